"""EEGNet / ShallowConvNet: output shapes, jit = eager, gradient vs finite differences,
and training learns a trivially separable problem."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import eeg


@pytest.mark.parametrize("cls", [eeg.EEGNet, eeg.ShallowConvNet])
def test_output_shape_jit_and_gradient(cls, getkey):
    # float32 throughout: flax BatchNorm keeps float32 statistics
    model = cls(n_classes=3)
    x = jax.random.normal(getkey(), (4, 8, 128), jnp.float32)
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


def test_train_classifier_learns_separable_power(getkey):
    # class 1 has 3x the amplitude on channel 0: trivially separable by power
    x = np.array(jax.random.normal(getkey(), (96, 4, 128), jnp.float32))
    y = np.arange(96) % 2
    x[y == 1, 0] *= 3.0
    predict = eeg.train_classifier(eeg.ShallowConvNet(n_classes=2, n_filters=4), x[:64], y[:64],
                                   key=getkey(), x_val=x[64:80], y_val=y[64:80], epochs=15,
                                   batch_size=16, learning_rate=1e-2, progress=False)
    assert eeg.balanced_accuracy(y[80:], predict(x[80:])) >= 0.9
    with pytest.raises(ValueError, match="x/y"):
        eeg.train_classifier(eeg.EEGNet(n_classes=2), x[:, 0], y, key=getkey())
