"""`Driver`: the one value that says how `run_steps` drives a run, and the wrapper
convention built on it (`fit(..., optimizer=..., driver=...)`).

The oracle for `run_steps` is a plain Python loop over `step.step(state, fold_in(key, i))`
with an integer step (exact arithmetic, so every driver setting must match it bit for bit).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab
from jaxlab import (
    AbstractProgress,
    AbstractStep,
    Checkpointer,
    Driver,
    NoProgress,
    ScanLoop,
    StepLoop,
    run_steps,
)


class IntStep(AbstractStep):
    """`x <- (3 x + u) mod p` with `u` drawn from the step's key: exact integer arithmetic."""

    def init(self, model, key):
        del key
        return jnp.asarray(model, jnp.int32)

    def step(self, state, key):
        u = jax.random.randint(key, state.shape, 0, 1000, jnp.int32)
        new = (3 * state + u) % 100_003
        return new, {"loss": jnp.sum(new).astype(jnp.float32), "first": new[0]}


def _reference(step, state, key, steps):
    """The plain loop `run_steps` must equal: step i uses fold_in(key, i)."""
    losses = []
    for i in range(steps):
        state, aux = step.step(state, jax.random.fold_in(key, i))
        losses.append(float(aux["loss"]))
    return np.asarray(state), np.asarray(losses, np.float32)


def _problem():
    step = IntStep()
    return step, step.init(np.arange(5), None), jax.random.key(11)


def test_driver_defaults_and_replace():
    d = Driver()
    assert (d.chunk, d.checkpointer, d.progress, d.stop, d.loop) == (100, None, None, None, None)
    e = d.replace(chunk=7, loop=StepLoop())
    assert e.chunk == 7
    assert isinstance(e.loop, StepLoop)
    assert d.chunk == 100
    assert d.loop is None
    with pytest.raises(AttributeError):
        d.chunk = 3  # type: ignore[misc]
    with pytest.raises(ValueError, match="chunk"):
        d.replace(chunk=0)  # replace validates again
    assert Driver(chunk=np.int64(4)).chunk == 4


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("chunk", 0),
        ("chunk", -3),
        ("chunk", 2.5),
        ("chunk", True),
        ("checkpointer", "ck.eqx"),
        ("progress", object()),
        ("stop", 3),
        ("loop", "scan"),
    ],
)
def test_driver_rejects_bad_fields_naming_them(field, value):
    with pytest.raises(ValueError, match=f"^{field}:"):
        Driver(**{field: value})


def test_run_steps_rejects_a_non_driver():
    step, state, key = _problem()
    with pytest.raises(ValueError, match="driver"):
        run_steps(step, state, key=key, steps=3, driver={"chunk": 2})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        run_steps(step, state, key=key, steps=3, chunk=2)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "driver",
    [
        None,
        Driver(),
        Driver(chunk=1),
        Driver(chunk=7),
        Driver(chunk=7, loop=StepLoop()),
        Driver(chunk=30, loop=ScanLoop(), progress=NoProgress()),
    ],
)
def test_run_steps_with_any_driver_equals_the_plain_loop(driver):
    step, state, key = _problem()
    ref_state, ref_losses = _reference(step, state, key, 30)
    out, hist = run_steps(step, state, key=key, steps=30, driver=driver)
    np.testing.assert_array_equal(np.asarray(out), ref_state)
    np.testing.assert_array_equal(hist.losses, ref_losses)
    assert hist.steps_done == 30


def test_driver_checkpoint_resume_equals_the_uninterrupted_run(tmp_path):
    step, state, key = _problem()
    ref_state, ref_losses = _reference(step, state, key, 24)

    class Kill(Exception):
        pass

    calls = [0]

    def killer(s):
        calls[0] += 1
        if calls[0] == 2:  # after the second chunk, before its checkpoint is written
            raise Kill
        return False

    ck = Checkpointer(tmp_path / "ck.eqx", every=5, resume=True)
    driver = Driver(chunk=5, checkpointer=ck)
    with pytest.raises(Kill):
        run_steps(step, state, key=key, steps=24, driver=driver.replace(stop=killer))
    out, hist = run_steps(step, state, key=key, steps=24, driver=driver)
    np.testing.assert_array_equal(np.asarray(out), ref_state)
    np.testing.assert_array_equal(hist.losses, ref_losses)
    # after the end a resume runs nothing and returns the same (another chunk is fine)
    again, hist2 = run_steps(step, state, key=key, steps=24, driver=driver.replace(chunk=3))
    np.testing.assert_array_equal(np.asarray(again), ref_state)
    np.testing.assert_array_equal(hist2.losses, ref_losses)


def test_driver_stop_ends_the_run_after_its_chunk_and_progress_sees_each_chunk():
    step, state, key = _problem()
    ref_state, ref_losses = _reference(step, state, key, 8)

    class Record(AbstractProgress):
        def __init__(self):
            self.events = []

        def start(self, total, initial=0):
            self.events.append(("start", total, initial))

        def update(self, n, loss=None):
            self.events.append(("update", n))

        def close(self):
            self.events.append(("close",))

    rec = Record()
    seen = []

    def stop(s):
        seen.append(1)
        return len(seen) == 2

    out, hist = run_steps(
        step, state, key=key, steps=20, driver=Driver(chunk=4, stop=stop, progress=rec)
    )
    assert hist.steps_done == 8
    np.testing.assert_array_equal(np.asarray(out), ref_state)
    np.testing.assert_array_equal(hist.losses[:8], ref_losses)
    assert np.isnan(hist.losses[8:]).all()
    assert (hist.aux["first"][8:] == 0).all()
    assert rec.events == [("start", 20, 0), ("update", 4), ("update", 4), ("close",)]


def test_shared_step_checks_pass_with_the_driver(tmp_path):
    from tests.step_checks import check_step

    step, state, key = _problem()
    check_step(step, state, key=key, steps=10, tmp_path=tmp_path)
    check_step(step, state, key=key, steps=10, tmp_path=tmp_path / "step", loop=StepLoop())


# --- the wrapper convention -------------------------------------------------------------

# Options that belong to the Driver (or, for the learning rate, to `optimizer=`): no public
# fit/train_* function re-declares them.
_DRIVER_OPTIONS = {"learning_rate", "checkpointer", "progress", "chunk", "stop", "loop"}

# Documented exceptions (docs/design.md, "Training"): each keeps its parameter for a reason.
_EXCEPTIONS = {
    # Trains several models in one call: `progress`/`checkpointers` are per-model factories
    # (name -> strategy), not one run's driver options.
    "jaxlab.em.train_methods": {"progress"},
}

# Functions not converted yet (removed from this set as each component is converted).
_PENDING: set[str] = set()


def _public_fits():
    """`jaxlab.<component>.<name>` for every public function named fit* or train_*."""
    out = {}
    for mod in pkgutil.iter_modules(jaxlab.__path__):
        if mod.name.startswith("_") or mod.name in {"data", "lm"}:
            continue
        component = importlib.import_module(f"jaxlab.{mod.name}")
        for name in getattr(component, "__all__", dir(component)):
            obj = getattr(component, name, None)
            if (name.startswith(("fit", "train_")) or name == "fit") and inspect.isfunction(obj):
                out[f"jaxlab.{mod.name}.{name}"] = obj
    return out


def test_public_fits_take_a_driver_not_loose_driver_options():
    fits = _public_fits()
    assert len(fits) >= 20  # the walk found the wrappers (a broken walk must not pass)
    offenders = {}
    for qualname, fn in fits.items():
        params = set(inspect.signature(fn).parameters)
        bad = params & _DRIVER_OPTIONS - _EXCEPTIONS.get(qualname, set())
        if qualname in _PENDING:
            continue
        if bad:
            offenders[qualname] = sorted(bad)
    assert offenders == {}, offenders
    # every pending or excepted name is a real public function (no stale entries)
    assert set(_EXCEPTIONS) | _PENDING <= set(fits)


def test_driver_for_fills_the_wrappers_defaults_and_combines_stops():
    from jaxlab._core import driver_for

    d = driver_for(None, chunk=5, loop=StepLoop())
    assert d.chunk == 5
    assert isinstance(d.loop, StepLoop)
    # the caller's explicit choices win over the wrapper's defaults
    d = driver_for(Driver(chunk=7, loop=ScanLoop()), chunk=5, loop=StepLoop())
    assert d.chunk == 7
    assert isinstance(d.loop, ScanLoop)
    # an explicit chunk equal to the default is still the caller's choice
    assert driver_for(Driver(chunk=100), chunk=5).chunk == 100
    assert driver_for(Driver().replace(chunk=100), chunk=5).chunk == 100
    assert driver_for(Driver(progress=None), chunk=5).chunk == 5
    assert Driver().chunk == 100
    assert repr(Driver().chunk) == "100"
    calls = []
    ours = driver_for(None, stop=lambda s: calls.append("ours") or s == 1).stop
    assert ours is not None
    assert ours(1)
    both = driver_for(
        Driver(stop=lambda s: calls.append("theirs") or s == 2), stop=lambda s: s == 1
    ).stop
    assert both is not None
    assert both(1)
    assert both(2)
    assert not both(3)
    assert calls.count("theirs") == 3  # the caller's stop sees every chunk
    with pytest.raises(ValueError, match="driver"):
        driver_for(5)  # type: ignore[arg-type]
