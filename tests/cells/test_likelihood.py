"""`cells.simulated_log_likelihood` against an independent scipy oracle: `scipy.stats.nbinom`
log-pmfs summed over genes, the mixture over type, batch and dose enumerated cell by cell,
and the size-factor integral by adaptive `scipy.integrate.quad`."""

import itertools

import jax
import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import logsumexp

from jaxlab import cells


def _small(library_scale: float = 0.3, stimulated_fraction: float = 0.25):
    return cells.simulate_counts(
        8,
        12,
        key=jax.random.key(3),
        type_fractions=(0.6, 0.4),
        n_batches=2,
        stimulated_fraction=stimulated_fraction,
        doses=(1.0, 3.0),
        n_program=3,
        library_scale=library_scale,
    )


def _component_loglik(a, x, s) -> float:
    """log prod_g NB(x_g; s a_g, theta) per (type, batch, dose) component, by scipy, with the
    component's log prior weight."""
    p: dict = a.uns["simulator"]
    theta = p["inverse_dispersion"]
    base = a.var["base_mean"].to_numpy()
    tf, bf = a.varm["type_factor"].T, a.varm["batch_factor"].T
    prog = a.var["program"].to_numpy()
    f = p["stimulated_fraction"]
    mix = [(0.0, 1 - f)] + ([(d, f / len(p["doses"])) for d in p["doses"]] if f else [])
    out = []
    for t, b, (d, q) in itertools.product(range(tf.shape[0]), range(bf.shape[0]), mix):
        mu = s * base * tf[t] * bf[b] * (1 + d * prog)
        ll = stats.nbinom.logpmf(x, theta, theta / (theta + mu)).sum()
        out.append(np.log(p["type_fractions"][t] * q / bf.shape[0]) + ll)
    return float(logsumexp(out))


def _oracle(a, i):
    x = np.asarray(a.X, dtype=np.float64)[i]
    sigma = float(a.uns["simulator"]["library_scale"])
    us = np.linspace(-8 * sigma, 8 * sigma, 161)
    shift = max(_component_loglik(a, x, np.exp(u)) for u in us)

    def f(u):
        return np.exp(_component_loglik(a, x, np.exp(u)) - shift) * stats.norm.pdf(u, 0, sigma)

    val, _ = integrate.quad(f, -8 * sigma, 8 * sigma, epsabs=0, epsrel=1e-10, limit=200)
    return shift + float(np.log(val))


def test_marginal_matches_scipy_nbinom_and_quad():
    a = _small()
    got = cells.simulated_log_likelihood(a)
    want = np.array([_oracle(a, i) for i in range(a.n_obs)])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_given_size_factor_matches_scipy_nbinom():
    a = _small()
    got = cells.simulated_log_likelihood(a, given_size_factor=True)
    s = a.obs["size_factor"].to_numpy()
    want = [_component_loglik(a, np.asarray(a.X, np.float64)[i], s[i]) for i in range(a.n_obs)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-8)


def test_no_library_spread_and_no_stimulation_need_no_integral():
    a = _small(library_scale=0.0, stimulated_fraction=0.0)
    got = cells.simulated_log_likelihood(a)
    want = [_component_loglik(a, np.asarray(a.X, np.float64)[i], 1.0) for i in range(a.n_obs)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-8)
    np.testing.assert_allclose(got, cells.simulated_log_likelihood(a, given_size_factor=True))


def test_the_likelihood_ranks_stimulated_cells_as_atypical():
    # the planted programme makes a rare stimulated cell unlikely under the mixture
    a = cells.simulate_counts(600, 200, key=jax.random.key(5), stimulated_fraction=0.05)
    ll = cells.simulated_log_likelihood(a, given_size_factor=True)
    stim = a.obs["stimulated"].to_numpy()
    assert ll[stim].mean() < ll[~stim].mean()


def test_rejects_an_anndata_without_the_simulator_parameters():
    a = _small()
    del a.uns["simulator"]
    with pytest.raises(ValueError, match="adata"):
        cells.simulated_log_likelihood(a)
    with pytest.raises(ValueError, match="width"):
        cells.simulated_log_likelihood(_small(), width=0.0)
