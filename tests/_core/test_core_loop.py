"""The training driver: chunk independence, exact resume, history, stop, both model styles."""

from __future__ import annotations

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab._core import (
    AbstractProgress,
    AbstractStep,
    Checkpointer,
    Driver,
    ScanLoop,
    StepLoop,
    optimizer_update,
    run_steps,
)


class EqxRegression(AbstractStep):
    """Minibatch SGD with noise on a linear model held as an equinox module."""

    x: jax.Array
    y: jax.Array
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    batch: int = eqx.field(static=True, default=8)

    def init(self, model, key):
        del key
        return model, self.optimizer.init(eqx.filter(model, eqx.is_array))

    def step(self, state, key):
        model, opt_state = state
        idx = jax.random.randint(key, (self.batch,), 0, self.x.shape[0])

        def loss_fn(m):
            return jnp.mean((jax.vmap(m)(self.x[idx]) - self.y[idx]) ** 2)

        loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
        updates, opt_state = optimizer_update(
            self.optimizer, grads, opt_state, eqx.filter(model, eqx.is_array)
        )
        return (eqx.apply_updates(model, updates), opt_state), {
            "loss": loss,
            "gnorm": optax.tree.norm(grads),
        }


class FlaxRegression(AbstractStep):
    """The same problem with a flax module: the state holds the params pytree."""

    x: jax.Array
    y: jax.Array
    module: nn.Module = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)

    def init(self, model, key):
        params = self.module.init(key, self.x[:1]) if model is None else model
        return params, self.optimizer.init(params)

    def step(self, state, key):
        params, opt_state = state
        idx = jax.random.randint(key, (8,), 0, self.x.shape[0])

        def loss_fn(p):
            return jnp.mean((self.module.apply(p, self.x[idx])[:, 0] - self.y[idx]) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer_update(self.optimizer, grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), {"loss": loss}


def _data(getkey):
    # float32 throughout: flax's parameters are float32 whatever x64 says.
    x = jax.random.normal(getkey(), (64, 3), jnp.float32)
    w = jnp.array([1.0, -2.0, 0.5], jnp.float32)
    return x, x @ w + 0.1 * jax.random.normal(getkey(), (64,), jnp.float32)


def _eqx_problem(getkey):
    x, y = _data(getkey)
    step = EqxRegression(x, y, optax.adam(0.05))
    model = eqx.nn.Linear(3, "scalar", key=getkey(), dtype=jnp.float32)
    return step, step.init(model, getkey())


def _flax_problem(getkey):
    x, y = _data(getkey)
    step = FlaxRegression(x, y, nn.Dense(1), optax.adam(0.05))
    return step, step.init(None, jax.random.key(3))


PROBLEMS = {"equinox": _eqx_problem, "flax": _flax_problem}


def _leaves(tree):
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_array))]


def _assert_same(a, b):
    for u, v in zip(_leaves(a), _leaves(b), strict=True):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("style", sorted(PROBLEMS))
def test_learns_and_chunk_size_does_not_change_results(style, getkey):
    step, state = PROBLEMS[style](getkey)
    key = getkey()
    s1, h1 = run_steps(step, state, key=key, steps=60, driver=Driver(chunk=60))
    s2, h2 = run_steps(step, state, key=key, steps=60, driver=Driver(chunk=7))
    s3, h3 = run_steps(step, state, key=key, steps=60, driver=Driver(chunk=5, loop=StepLoop()))
    _assert_same(s1, s2)
    np.testing.assert_array_equal(h1.losses, h2.losses)
    np.testing.assert_allclose(h1.losses, h3.losses, rtol=1e-5)
    assert h1.losses.shape == (60,)
    assert h1.steps_done == 60
    assert h1.losses[-10:].mean() < 0.2 * h1.losses[:5].mean()


@pytest.mark.parametrize(("style", "kill_after"), [("equinox", 10), ("equinox", 30), ("flax", 20)])
def test_resume_equals_uninterrupted(style, kill_after, getkey, tmp_path):
    step, state = PROBLEMS[style](getkey)
    key = getkey()
    ref_state, ref_hist = run_steps(step, state, key=key, steps=40, driver=Driver(chunk=10))

    ck = Checkpointer(tmp_path / "ck.eqx", every=10, resume=True)

    class Kill(Exception):
        pass

    def killer(s):
        del s
        killer.calls += 1
        if killer.calls * 10 >= kill_after:
            raise Kill

    killer.calls = 0
    with pytest.raises(Kill):
        run_steps(
            step, state, key=key, steps=40, driver=Driver(chunk=10, checkpointer=ck, stop=killer)
        )
    # The interrupted run saved nothing for the chunk that raised; resume redoes it.
    res_state, res_hist = run_steps(
        step, state, key=key, steps=40, driver=Driver(chunk=10, checkpointer=ck)
    )
    _assert_same(ref_state, res_state)
    np.testing.assert_array_equal(ref_hist.losses, res_hist.losses)
    assert res_hist.losses.shape == (40,)
    assert not np.isnan(res_hist.losses).any()


def test_resume_with_other_chunk_size_and_after_the_end(getkey, tmp_path):
    step, state = _eqx_problem(getkey)
    key = getkey()
    ref, ref_h = run_steps(step, state, key=key, steps=30, driver=Driver(chunk=30))
    ck = Checkpointer(tmp_path / "ck.eqx", every=6, resume=True)
    _, h = run_steps(step, state, key=key, steps=30, driver=Driver(chunk=4, checkpointer=ck))
    np.testing.assert_array_equal(h.losses, ref_h.losses)
    # A run killed after its last checkpoint resumes to the same result, running nothing.
    again, h2 = run_steps(step, state, key=key, steps=30, driver=Driver(chunk=9, checkpointer=ck))
    _assert_same(ref, again)
    np.testing.assert_array_equal(h2.losses, ref_h.losses)


def test_resume_false_starts_afresh_and_mismatches_are_rejected(getkey, tmp_path):
    step, state = _eqx_problem(getkey)
    key = getkey()
    path = tmp_path / "ck.eqx"
    run_steps(
        step, state, key=key, steps=10, driver=Driver(chunk=5, checkpointer=Checkpointer(path))
    )
    # resume=False ignores the file (and overwrites it).
    _, h = run_steps(
        step,
        state,
        key=key,
        steps=10,
        driver=Driver(chunk=5, checkpointer=Checkpointer(path, resume=False)),
    )
    assert h.steps_done == 10
    with pytest.raises(ValueError, match="another key"):
        run_steps(
            step,
            state,
            key=getkey(),
            steps=10,
            driver=Driver(chunk=5, checkpointer=Checkpointer(path, resume=True)),
        )
    with pytest.raises(ValueError, match="steps=10"):
        run_steps(
            step,
            state,
            key=key,
            steps=12,
            driver=Driver(chunk=5, checkpointer=Checkpointer(path, resume=True)),
        )


def test_stop_pads_history_and_resume_respects_it(getkey, tmp_path):
    step, state = _eqx_problem(getkey)
    key = getkey()
    calls = []

    def stop(s):
        calls.append(1)
        return len(calls) >= 2

    ck = Checkpointer(tmp_path / "ck.eqx", resume=True)
    _, h = run_steps(
        step, state, key=key, steps=50, driver=Driver(chunk=10, stop=stop, checkpointer=ck)
    )
    assert h.steps_done == 20
    assert h.losses.shape == (50,)
    assert np.isnan(h.losses[20:]).all()
    assert not np.isnan(h.losses[:20]).any()
    assert h.aux["gnorm"].shape == (50,)
    _, h2 = run_steps(step, state, key=key, steps=50, driver=Driver(chunk=10, checkpointer=ck))
    assert h2.steps_done == 20


def test_progress_strategy_is_called(getkey):
    step, state = _eqx_problem(getkey)

    class Record(AbstractProgress):
        def __init__(self):
            self.events = []

        def start(self, total, initial):
            self.events.append(("start", total, initial))

        def update(self, n, loss=None):
            self.events.append(("update", n, loss is not None))

        def close(self):
            self.events.append(("close",))

    rec = Record()
    run_steps(step, state, key=getkey(), steps=25, driver=Driver(chunk=10, progress=rec))
    assert rec.events == [
        ("start", 25, 0),
        ("update", 10, True),
        ("update", 10, True),
        ("update", 5, True),
        ("close",),
    ]


def test_compiled_chunk_is_reused(getkey):
    step, state = _eqx_problem(getkey)
    key = getkey()
    run_steps(step, state, key=key, steps=10, driver=Driver(chunk=5))
    traces = []

    class Counting(EqxRegression):
        def step(self, state, key):
            traces.append(1)
            return super().step(state, key)

    cstep = Counting(step.x, step.y, step.optimizer)
    run_steps(cstep, state, key=key, steps=20, driver=Driver(chunk=5))
    n_first = len(traces)
    assert n_first == 1  # four chunks of 5: one trace
    # New data of the same shape: traced fields, no retrace.
    run_steps(
        Counting(step.x + 1, step.y, step.optimizer),
        state,
        key=key,
        steps=20,
        driver=Driver(chunk=5),
    )
    assert len(traces) == n_first


def test_bad_arguments(getkey):
    step, state = _eqx_problem(getkey)
    with pytest.raises(ValueError, match="steps"):
        run_steps(step, state, key=getkey(), steps=0)
    with pytest.raises(ValueError, match="chunk"):
        run_steps(step, state, key=getkey(), steps=5, driver=Driver(chunk=-1))
    with pytest.raises(ValueError, match="step"):
        run_steps(lambda s, k: (s, {}), state, key=getkey(), steps=5)
    with pytest.raises(ValueError, match="every"):
        Checkpointer("x", every=0)
    assert isinstance(ScanLoop(), eqx.Module)


def test_shared_step_checks_pass_on_both_model_styles(getkey, tmp_path):
    from tests.step_checks import check_step

    for make in (_eqx_problem, _flax_problem):
        step, state = make(getkey)
        check_step(step, state, key=getkey(), steps=12, tmp_path=tmp_path)


def test_run_steps_refuses_a_step_count_beyond_the_cap():
    """Issue #59: steps=10**9 ran (a history row per step was the only bound, checked
    after the first chunk); now refused naming `steps` before anything runs."""
    from jaxlab._core import MAX_RUN_STEPS, check_steps

    assert check_steps("n_steps", MAX_RUN_STEPS) == MAX_RUN_STEPS
    with pytest.raises(ValueError, match=f"^n_steps: expected at most {MAX_RUN_STEPS}"):
        check_steps("n_steps", MAX_RUN_STEPS + 1)
    with pytest.raises(ValueError, match="^steps: expected a positive integer"):
        check_steps("steps", True)

    class Never(AbstractStep):
        def init(self, model, key):
            return model

        def step(self, state, key):
            raise AssertionError("no step may run")

    with pytest.raises(ValueError, match=f"^steps: expected at most {MAX_RUN_STEPS}"):
        run_steps(Never(), jnp.zeros(()), key=jax.random.key(0), steps=10**9)
