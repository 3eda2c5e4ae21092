"""The P13 pipeline on a transformer-free synthetic model with a planted belief direction.

Activations: item i with evidence balance b_i has, at the planted layer, h = b_i u + noise
at its last prompt token and at each of its "generated" positions (other layers: noise,
optionally plus item-level nuisance directions); the "model" chooses A with logit
4 h . u at the planted layer. The pipeline must find the planted layer and direction,
give modulation rho ~ 1 (scipy's Spearman as the oracle), beat a shuffled-label null, and
give a positive steering slope along the direction and ~0 along a random direction.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from jaxlab import beliefs as bl
from jaxlab._core import numpy_rng

L, D, T, PLANTED = 3, 32, 6, 1


def _synthetic(rng, n_per_balance=12, nuisance=0.0):
    balance = np.repeat(np.arange(-4, 5), n_per_balance).astype(np.float64)
    n = balance.shape[0]
    u = rng.normal(size=D)
    u /= np.linalg.norm(u)
    acts = 0.5 * rng.normal(size=(L, n, 1 + T, D))
    acts[PLANTED] += balance[:, None, None] * u
    basis = np.linalg.qr(rng.normal(size=(D, 4)))[0]
    acts += nuisance * (rng.normal(size=(n, 4)) @ basis.T)[None, :, None, :]
    train = rng.random(n) < 0.6
    return balance, u, acts, train


_mean_dominance = jax.jit(jax.vmap(lambda s: bl.dominance(s).mean))


def _rho(fit, layer, acts, balance, test):
    states = fit.state(acts[:, :, 1:])[layer]  # (n, T) over the "generated" positions
    return scipy.stats.spearmanr(balance[test], np.asarray(_mean_dominance(states))[test])[0]


@pytest.mark.parametrize(
    "method", ["mean_difference", pytest.param("logistic", marks=pytest.mark.slow)]
)
def test_pipeline_recovers_planted_belief(method, getkey):
    rng = numpy_rng(getkey())
    balance, u, acts, train = _synthetic(rng)
    decided = balance != 0
    # directions are fitted on training items with a decided balance only
    fit = bl.fit_directions(
        acts[:, decided, 0], balance[decided] > 0, train=train[decided], method=method
    )
    auroc = np.asarray(fit.test_auroc)
    assert int(np.argmax(auroc)) == PLANTED
    assert auroc[PLANTED] > 0.99
    assert np.max(np.delete(auroc, PLANTED)) < 0.8
    w = np.asarray(fit.unit[PLANTED])
    assert abs(w @ u) > 0.9
    assert _rho(fit, PLANTED, acts, balance, ~train) > 0.95
    # steering: adding alpha w to the last-token state moves the choice along the direction
    alphas = np.linspace(-2, 2, 5)
    h = acts[PLANTED, :, 0]
    r = rng.normal(size=D)
    r /= np.linalg.norm(r)

    def curve(v):  # (n, A) choice logits under steering by alpha v
        return np.stack([4.0 * (h + a * v) @ u for a in alphas], axis=1)

    slope = float(bl.dose_slope(alphas, curve(w)))
    slope_random = float(bl.dose_slope(alphas, curve(r)))
    np.testing.assert_allclose(slope, 4.0 * (w @ u), rtol=1e-8)  # the analytic slope
    assert slope > 3.5
    assert abs(slope_random) < 0.25 * slope
    # ablation: projecting the direction out pushes choices toward chance
    h_abl = h - (h @ w)[:, None] * w[None, :]
    assert np.mean(np.abs(h_abl @ u)) < 0.3 * np.mean(np.abs(h @ u))


def test_modulation_beats_shuffled_label_null(getkey):
    # with nuisance directions of larger variance than the belief, a direction fitted to
    # shuffled labels mostly follows the nuisance; the real one still tracks the balance
    rng = numpy_rng(getkey())
    balance, _, acts, train = _synthetic(rng, n_per_balance=30, nuisance=6.0)
    acts = acts[PLANTED : PLANTED + 1]
    decided = balance != 0
    labels = balance[decided] > 0
    fit = bl.fit_directions(acts[:, decided, 0], labels, train=train[decided])
    real = _rho(fit, 0, acts, balance, ~train)
    null = [
        _rho(
            bl.fit_directions(acts[:, decided, 0], rng.permutation(labels), train=train[decided]),
            0,
            acts,
            balance,
            ~train,
        )
        for _ in range(20)
    ]
    assert real > np.quantile(null, 0.95) + 0.15


def test_mean_difference_directions_match_numpy(getkey):
    balance, _, acts, _ = _synthetic(numpy_rng(getkey()), n_per_balance=4)
    labels = balance > 0
    train = np.arange(balance.shape[0]) % 2 == 0
    x = acts[:, :, 0]
    fit = bl.fit_directions(x, labels, train=train)
    mu_a = x[:, train & labels].mean(axis=1)
    mu_b = x[:, train & ~labels].mean(axis=1)
    np.testing.assert_allclose(fit.directions, mu_a - mu_b, rtol=1e-8)
    thr = np.einsum("ld,ld->l", (mu_a + mu_b) / 2, mu_a - mu_b)
    np.testing.assert_allclose(fit.thresholds, thr, rtol=1e-8)
    s = bl.belief_state(x[0], fit.directions[0], fit.thresholds[0])
    ref = (x[0] @ (mu_a - mu_b)[0] - thr[0]) / np.linalg.norm((mu_a - mu_b)[0])
    np.testing.assert_allclose(s, ref, rtol=1e-8)
    np.testing.assert_allclose(fit.state(x)[0], ref, rtol=1e-8)


def test_fit_directions_rejects_bad_input(getkey):
    balance, _, acts, _ = _synthetic(numpy_rng(getkey()), n_per_balance=2)
    labels = balance > 0
    train = np.ones(balance.shape[0], bool)
    with pytest.raises(ValueError, match="labels"):  # no held-out rows
        bl.fit_directions(acts[:, :, 0], labels, train=train)
    with pytest.raises(ValueError, match="method"):
        bl.fit_directions(acts[:, :, 0], labels, train=~train, method="pca")
    with pytest.raises(ValueError, match="acts"):
        bl.fit_directions(acts[0, :, 0], labels, train=train)
    with pytest.raises(ValueError, match="labels"):
        bl.fit_directions(acts[:, :, 0], balance, train=train)
    with pytest.raises(ValueError, match="acts"):
        bl.belief_state(acts[0, :, 0], np.ones(D + 1), 0.0)
    with pytest.raises(ValueError, match="acts"):
        bl.BeliefDirections(
            jnp.ones((2, D)), jnp.zeros(2), jnp.zeros(2), jnp.zeros(2), "logistic"
        ).state(acts[:, :, 0])
