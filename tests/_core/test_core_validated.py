"""`ValidatedStep`: the early-stopping choice is made on the validation loss only, the
plateau stop fires after `patience` evaluations, and a resume equals an uninterrupted run."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab._core import AbstractStep, Checkpointer, Driver, ValidatedStep, run_steps


class _Descent(AbstractStep):
    """Gradient descent on (w - target)^2: w moves monotonically from 0 to `target`."""

    target: jax.Array
    lr: float = eqx.field(static=True)

    def init(self, model, key):
        return jnp.asarray(model, jnp.float32)

    def step(self, state, key):
        loss = (state - self.target) ** 2
        return state - self.lr * 2 * (state - self.target), {"loss": loss}


def _val(state, centre):
    return (state - centre) ** 2


def _run(centre, *, steps=60, every=2, patience=3, ckpt=None):
    vs = ValidatedStep(
        _Descent(jnp.asarray(2.0), 0.05), _val, jnp.asarray(centre), every=every, patience=patience
    )
    key = jax.random.key(0)
    return run_steps(
        vs,
        vs.init(0.0, key),
        key=key,
        steps=steps,
        driver=Driver(chunk=4, stop=vs.stop, checkpointer=ckpt),
    )


def test_best_is_the_validation_minimum_and_the_stop_follows_patience():
    state, hist = _run(1.0)
    val = hist.aux["val_loss"]
    evaluated = np.flatnonzero(np.isfinite(val[: hist.steps_done]))
    np.testing.assert_array_equal(evaluated % 2, 1)  # steps 2, 4, ... (rows 1, 3, ...)
    i_best = evaluated[np.argmin(val[evaluated])]
    assert int(state.best_step) == i_best + 1
    assert float(state.best_loss) == pytest.approx(float(val[i_best]))
    assert float(state.best) == pytest.approx(1.0, abs=0.12)  # w nearest the val centre
    # stopped: patience evaluations after the best, rounded up to the chunk of 4 steps
    assert int(state.since_best) >= 3
    assert hist.steps_done < 60
    assert hist.steps_done - (i_best + 1) < 3 * 2 + 4
    # the training loss kept falling after the chosen step: the choice is not by it
    assert hist.losses[hist.steps_done - 1] < hist.losses[i_best]


def test_the_choice_moves_with_the_validation_data_only():
    s1, _ = _run(0.5, steps=200)
    s2, _ = _run(1.5, steps=200)
    assert float(s1.best) == pytest.approx(0.5, abs=0.2)
    assert float(s2.best) == pytest.approx(1.5, abs=0.2)
    assert int(s1.best_step) < int(s2.best_step)
    # validation minimum never reached before the end: no stop, best = last evaluation
    s3, h3 = _run(5.0, steps=40)
    assert h3.steps_done == 40
    assert int(s3.best_step) == 40


def test_resume_equals_uninterrupted(tmp_path):
    ref, href = _run(1.0)
    path = tmp_path / "v.eqx"
    _run(1.0, steps=60, ckpt=Checkpointer(path, resume=True))  # a complete run, saved
    res, hres = _run(1.0, steps=60, ckpt=Checkpointer(path, resume=True))  # resumed from it
    assert hres.steps_done == href.steps_done
    np.testing.assert_array_equal(hres.aux["val_loss"], href.aux["val_loss"])
    assert float(res.best) == float(ref.best)


def test_bad_arguments():
    inner = _Descent(jnp.asarray(2.0), 0.05)
    with pytest.raises(ValueError, match="patience"):
        ValidatedStep(inner, _val, jnp.asarray(1.0), every=1, patience=0)
    with pytest.raises(ValueError, match="inner"):
        ValidatedStep(object(), _val, jnp.asarray(1.0), every=1, patience=1)
    with pytest.raises(ValueError, match="min_rel_improvement"):
        ValidatedStep(inner, _val, jnp.asarray(1.0), every=1, patience=1, min_rel_improvement=1.5)
