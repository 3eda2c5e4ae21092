"""HeadStep / GramStep: the shared step checks, and the fits against hand-written optax loops."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab import laplex
from jaxlab._core import StepLoop
from tests.step_checks import check_step


def _head_data(getkey):
    x = jax.random.normal(getkey(), (12, 6), jnp.float64)
    y = jnp.asarray(np.arange(12) % 3, jnp.int32)
    return x, y


def test_head_step_checks_and_fit_equals_hand_written_adam(getkey, tmp_path):
    x, y = _head_data(getkey)
    head = laplex.LaplexLinear(6, 3, 2, key=getkey(), dtype=jnp.float64)
    opt = optax.adam(0.05)
    step = laplex.HeadStep(head, x, y, optimizer=opt)
    check_step(
        step, step.init(head, getkey()), key=getkey(), steps=4, tmp_path=tmp_path, loop=StepLoop()
    )
    trained, hist = laplex.fit_head(head, x, y, steps=6, optimizer=opt)
    # oracle: the loop the laplex_head experiment used to write by hand
    params, static = eqx.partition(head, eqx.is_array)
    state = opt.init(params)
    for i in range(6):

        def loss_fn(p):
            logits = eqx.combine(p, static).batch(x)
            return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))

        loss, g = jax.value_and_grad(loss_fn)(params)
        with jax.numpy_dtype_promotion("standard"):
            upd, state = opt.update(g, state, params)
        params = optax.apply_updates(params, upd)
        np.testing.assert_allclose(hist.losses[i], loss, rtol=1e-12)
    for a, b in zip(
        jax.tree_util.tree_leaves(eqx.filter(trained, eqx.is_array)),
        jax.tree_util.tree_leaves(params),
        strict=True,
    ):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    assert hist.losses[-1] < hist.losses[0]


def test_gram_step_checks_and_fit_lowers_the_nll(getkey, tmp_path):
    coords = [jnp.arange(5, dtype=jnp.float64)] * 2
    gram = laplex.LaplexGram(coords, 1, key=getkey(), decay=0.5, noise=0.3, dtype=jnp.float64)
    ys = jax.random.normal(getkey(), (2, 25), jnp.float64)
    kw = dict(probes=2, lanczos_steps=8, cg_tol=1e-8, cg_maxiter=50)
    step = laplex.GramStep(gram, ys, optimizer=optax.adam(0.05), **kw)
    check_step(
        step, step.init(gram, getkey()), key=getkey(), steps=4, tmp_path=tmp_path, loop=StepLoop()
    )
    fitted, hist = laplex.fit_gram(
        gram, ys, key=getkey(), steps=4, optimizer=optax.adam(0.05), **kw
    )
    assert hist.losses.shape == (4,)
    assert isinstance(fitted, laplex.LaplexGram)
    # the step's loss is the mean per-dimension NLL (dense oracle: exact Gaussian NLL)
    sigma = np.asarray(jax.vmap(gram.matvec)(jnp.eye(25)))
    sign, logdet = np.linalg.slogdet(sigma)
    yy = np.asarray(ys)
    exact = (
        np.mean(
            [0.5 * (v @ np.linalg.solve(sigma, v) + logdet + 25 * np.log(2 * np.pi)) for v in yy]
        )
        / 25
    )
    assert sign > 0
    np.testing.assert_allclose(hist.losses[0], exact, rtol=0.1)
    with pytest.raises(ValueError, match="ys"):
        laplex.GramStep(gram, ys[:, :5], optimizer=optax.adam(0.05))
