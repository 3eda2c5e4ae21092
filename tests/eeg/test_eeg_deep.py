"""EEGNet / ShallowConvNet / DeepConvNet: output shapes, jit = eager, gradient vs finite
differences, braindecode's Deep4 layer sizes, training learns a trivially separable
problem, and checkpoint/resume reproduces an uninterrupted run exactly."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab import eeg
from jaxlab._core import Checkpointer, Driver, StepLoop, run_steps

# DeepConvNet needs >= 441 samples with braindecode's defaults (see test below)
LENGTH = {eeg.EEGNet: 128, eeg.ShallowConvNet: 128, eeg.DeepConvNet: 448}


@pytest.mark.parametrize(
    "cls", [eeg.EEGNet, eeg.ShallowConvNet, pytest.param(eeg.DeepConvNet, marks=pytest.mark.slow)]
)
def test_output_shape_jit_and_gradient(cls, getkey):
    # float32 throughout: flax BatchNorm keeps float32 statistics
    model = cls(n_classes=3)
    x = jax.random.normal(getkey(), (4, 8, LENGTH[cls]), jnp.float32)
    variables = model.init(getkey(), x)
    out = model.apply(variables, x)
    assert out.shape == (4, 3)
    np.testing.assert_allclose(jax.jit(model.apply)(variables, x), out, rtol=1e-5, atol=1e-5)

    def f(scale):
        return jnp.sum(model.apply(variables, x * scale) ** 2)

    one = jnp.float32(1.0)
    g = jax.grad(f)(one)
    fd = (f(one + 1e-2) - f(one - 1e-2)) / 2e-2
    np.testing.assert_allclose(g, fd, rtol=2e-2)
    assert float(jnp.abs(g)) > 0


def test_deepconvnet_braindecode_sizes(getkey):
    # hand count of braindecode's Deep4Net defaults for C channels, 2 classes, an input of
    # 441 samples: 441 -conv10-> 432 -pool3/3-> 144 -> 135 -> 45 -> 36 -> 12 -> 3 -> 1
    c = 5
    model = eeg.DeepConvNet(n_classes=2)
    assert model.min_length() == 441
    # jitted init and forward: two compilations instead of ~170 eager per-op ones
    variables = jax.jit(model.init)(getkey(), jnp.zeros((2, c, 441), jnp.float32))
    n_params = sum(v.size for v in jax.tree_util.tree_leaves(variables["params"]))
    expected = (
        25 * 10
        + 25  # temporal conv with bias
        + 25 * 25 * c  # spatial conv, no bias (batch norm follows)
        + 2 * 25  # batch norm scale/shift
        + 50 * 25 * 10
        + 2 * 50
        + 100 * 50 * 10
        + 2 * 100
        + 200 * 100 * 10
        + 2 * 200
        + (200 * 1 + 1) * 2
    )  # classifier over the single remaining time step
    assert n_params == expected
    assert jax.jit(model.apply)(variables, jnp.zeros((3, c, 441), jnp.float32)).shape == (3, 2)
    assert variables["params"]["Conv_0"]["kernel"].shape == (1, 10, 1, 25)
    with pytest.raises(ValueError, match="at least 441"):
        model.init(getkey(), jnp.zeros((2, c, 440), jnp.float32))
    # a finer pool stride fits 2 s epochs at 128 Hz
    assert eeg.DeepConvNet(n_classes=2, pool_stride=2).min_length() <= 256


def test_train_classifier_learns_separable_power(getkey):
    # class 1 has 3x the amplitude on channel 0: trivially separable by power
    x = np.array(jax.random.normal(getkey(), (96, 4, 128), jnp.float32))
    y = np.arange(96) % 2
    x[y == 1, 0] *= 3.0
    predict = eeg.train_classifier(
        eeg.ShallowConvNet(n_classes=2, n_filters=4),
        x[:64],
        y[:64],
        key=getkey(),
        x_val=x[64:80],
        y_val=y[64:80],
        epochs=15,
        batch_size=16,
        optimizer=optax.adam(1e-2),
    )
    assert eeg.balanced_accuracy(y[80:], predict(x[80:])) >= 0.9
    with pytest.raises(ValueError, match="x/y"):
        eeg.train_classifier(eeg.EEGNet(n_classes=2), x[:, 0], y, key=getkey())


def _random_labels(getkey):
    # random labels: the validation loss soon stops improving, so early stopping fires
    x = np.asarray(jax.random.normal(getkey(), (80, 4, 128), jnp.float32))
    y = np.asarray(jax.random.bernoulli(getkey(), 0.5, (80,))).astype(int)
    return x, y


def test_classifier_step_passes_the_shared_step_checks_through_an_early_stop(getkey, tmp_path):
    from tests.step_checks import check_step

    x, y = _random_labels(getkey)
    step = eeg.ClassifierStep(
        jnp.asarray(x[:32]),
        jnp.asarray(y[:32], jnp.int32),
        jnp.asarray(x[64:]),
        jnp.asarray(y[64:], jnp.int32),
        eeg.ShallowConvNet(n_classes=2, n_filters=4),
        optax.adam(3e-2),
        epochs=10,
        batch_size=16,
        patience=1,
    )
    state = step.init(None, getkey())
    check_step(step, state, key=getkey(), steps=12, tmp_path=tmp_path, loop=StepLoop())
    final, hist = run_steps(
        step, state, key=getkey(), steps=12, driver=Driver(chunk=5, loop=StepLoop())
    )
    t = int(final["t"])
    assert bool(final["done"])
    assert t % 2 == 0
    assert t < 12  # stopped at an epoch end
    assert np.isnan(hist.losses[t:]).all()
    assert np.isfinite(hist.losses[:t]).all()


def test_train_classifier_early_stops_and_resumes_a_finished_run(getkey, tmp_path, tree_allclose):
    x, y = _random_labels(getkey)
    kw = dict(
        key=getkey(),
        x_val=x[64:],
        y_val=y[64:],
        epochs=30,
        batch_size=16,
        optimizer=optax.adam(3e-2),
        patience=2,
    )
    model = eeg.ShallowConvNet(n_classes=2, n_filters=4)
    full = eeg.train_classifier(model, x[:64], y[:64], **kw)
    assert full.stopped_early
    assert full.steps < 30 * 4
    assert full.steps % 4 == 0  # stops at an epoch end
    ep = full.steps // 4
    assert np.isfinite(full.val_losses[:ep]).all()
    assert np.isnan(full.val_losses[ep:]).all()
    best = int(np.argmin(full.val_losses[:ep]))
    assert best == ep - 1 - 2  # patience epochs without improvement after the best
    ckpt = Checkpointer(tmp_path / "shallow.eqx", every=3, resume=True)
    done = eeg.train_classifier(model, x[:64], y[:64], driver=Driver(checkpointer=ckpt), **kw)
    assert ckpt.exists()
    assert done.steps == full.steps
    # a finished run resumes to the same result without training
    again = eeg.train_classifier(model, x[:64], y[:64], driver=Driver(checkpointer=ckpt), **kw)
    assert again.steps == full.steps
    assert again.stopped_early
    assert tree_allclose(
        (again.params, again.batch_stats), (full.params, full.batch_stats), rtol=0, atol=0
    )
    np.testing.assert_array_equal(again.val_losses, full.val_losses)
    np.testing.assert_array_equal(again(x), full(x))
    with pytest.raises(ValueError, match="checkpoint"):
        eeg.train_classifier(
            model, x[:64], y[:64], driver=Driver(checkpointer=ckpt), **dict(kw, batch_size=8)
        )
