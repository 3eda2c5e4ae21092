"""`cells.simulate_counts` against its documented model: NB moments, the full mean formula,
planted DE genes recovered by a t-test, the stimulated programme, determinism, bad input."""

import jax
import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from jaxlab import cells


def _true_mean(a):
    """mu_cg of the docstring's formula, rebuilt from the returned planted effects."""
    types = a.obs["cell_type"].cat.codes.to_numpy()
    batches = a.obs["batch"].cat.codes.to_numpy()
    dose = a.obs["dose"].to_numpy()
    prog = a.var["program"].to_numpy()
    return (
        a.obs["size_factor"].to_numpy()[:, None]
        * a.var["base_mean"].to_numpy()[None, :]
        * a.varm["type_factor"].T[types]
        * a.varm["batch_factor"].T[batches]
        * (1.0 + dose[:, None] * prog[None, :])
    )


def test_counts_have_the_negative_binomial_mean_and_variance():
    # one type, one batch, no library spread, no stimulation: every cell has mean mu_g
    theta = 3.0
    a = cells.simulate_counts(
        20000,
        24,
        key=jax.random.key(0),
        type_fractions=(1.0,),
        n_batches=1,
        library_scale=0.0,
        stimulated_fraction=0.0,
        n_program=1,
        inverse_dispersion=theta,
    )
    x = np.asarray(a.X, dtype=np.float64)
    mu = _true_mean(a)[0]
    assert np.allclose(_true_mean(a), mu[None, :])
    n = x.shape[0]
    var = mu + mu**2 / theta
    z_mean = (x.mean(0) - mu) / np.sqrt(var / n)
    s2 = x.var(0, ddof=1)
    m4 = ((x - x.mean(0)) ** 4).mean(0)
    z_var = (s2 - var) / np.sqrt((m4 - s2**2) / n)
    assert np.all(np.abs(z_mean) < 4.5), z_mean
    assert np.all(np.abs(z_var) < 4.5), z_var
    # a Poisson model (theta -> inf) is rejected: the overdispersion is real
    assert np.mean(s2 > mu + 5 * np.sqrt(2 * mu**2 / n)) > 0.9


def test_standardised_residuals_of_the_full_model_have_mean_0_and_variance_1():
    theta = 5.0
    a = cells.simulate_counts(4000, 200, key=jax.random.key(1), stimulated_fraction=0.1)
    mu = _true_mean(a)
    r = (np.asarray(a.X, dtype=np.float64) - mu) / np.sqrt(mu + mu**2 / theta)
    n = r.size
    assert abs(r.mean()) < 5 / np.sqrt(n)
    assert abs(r.var() - 1.0) < 0.02
    # per stimulated dose, programme genes' counts scale by 1 + d relative to the mean model
    # without the programme (ratio of sums over cells with that dose)
    prog = a.var["program"].to_numpy()
    dose = a.obs["dose"].to_numpy()
    plain = mu / (1.0 + dose[:, None] * prog[None, :])
    for d in (1.0, 2.0, 4.0):
        rows = dose == d
        ratio = a.X[rows][:, prog].sum() / plain[rows][:, prog].sum()
        assert abs(ratio - (1.0 + d)) < 0.05 * (1.0 + d)


def test_planted_de_genes_are_recovered_by_a_t_test():
    a = cells.simulate_counts(
        3000,
        400,
        key=jax.random.key(2),
        type_fractions=(0.5, 0.5),
        de_probability=0.2,
        stimulated_fraction=0.0,
    )
    logx = cells.log_normalize(np.asarray(a.X))
    t0 = (a.obs["cell_type"] == "type0").to_numpy()
    t, p = stats.ttest_ind(logx[t0], logx[~t0], equal_var=False)
    tf = a.varm["type_factor"]
    true_lfc = np.log(tf[:, 0] / tf[:, 1])
    planted = true_lfc != 0.0
    # a gene differs when either type moved it: P = 1 - 0.8^2 = 0.36
    assert abs(planted.sum() - 0.36 * 400) < 4 * np.sqrt(400 * 0.36 * 0.64)
    assert roc_auc_score(planted, np.abs(t)) > 0.95
    called = p < 0.01 / p.size  # Bonferroni
    # power needs counts: strong folds on genes with mean >= 1 count per cell
    strong = (np.abs(true_lfc) > 0.4) & (a.var["base_mean"].to_numpy() >= 1.0)
    assert called[strong].mean() > 0.9
    assert called[~planted].mean() < 0.02
    # the called genes move in the planted direction
    assert np.all(np.sign(t[called & planted]) == np.sign(true_lfc[called & planted]))


def test_labels_follow_the_arguments():
    a = cells.simulate_counts(5000, 100, key=jax.random.key(3), stimulated_fraction=0.01)
    assert a.shape == (5000, 100)
    assert a.obs["stimulated"].sum() == 50
    assert set(a.obs.loc[a.obs["stimulated"], "dose"]) <= {1.0, 2.0, 4.0}
    assert (a.obs.loc[~a.obs["stimulated"], "dose"] == 0).all()
    assert a.var["program"].sum() == 16
    base = a.var["base_mean"].to_numpy()
    assert base[a.var["program"].to_numpy()].min() > np.median(base)
    frac = a.obs["cell_type"].value_counts(normalize=True).sort_index().to_numpy()
    want = np.asarray((0.35, 0.25, 0.15, 0.12, 0.08, 0.05))
    assert np.all(np.abs(frac - want) < 4 * np.sqrt(want * (1 - want) / 5000))
    assert list(a.obs["batch"].cat.categories) == ["batch0", "batch1", "batch2"]
    assert a.X.dtype == np.float32
    assert np.all(np.round(a.X) == a.X)


def test_same_key_same_data_other_key_other_data():
    kw = {"n_cells": 300, "n_genes": 50}
    a = cells.simulate_counts(**kw, key=jax.random.key(4))
    b = cells.simulate_counts(**kw, key=jax.random.key(4))
    c = cells.simulate_counts(**kw, key=jax.random.key(5))
    assert np.array_equal(a.X, b.X)
    assert a.obs.equals(b.obs)
    assert np.array_equal(a.varm["type_factor"], b.varm["type_factor"])
    assert not np.array_equal(a.X, c.X)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_cells": 0}, "^n_cells: expected a positive integer"),
        ({"n_cells": 1}, "^n_cells: expected >= 2"),
        ({"n_genes": 2.5}, "^n_genes: expected a positive integer"),
        ({"n_genes": 20, "n_program": 16}, r"^n_genes: expected >= 2 \* n_program"),
        ({"type_fractions": (0.5, 0.6)}, "^type_fractions: expected a sum of 1"),
        ({"type_fractions": (1.5, -0.5)}, r"^type_fractions: expected values in \(0.0"),
        ({"type_fractions": ()}, "^type_fractions: expected a non-empty"),
        ({"n_batches": 0}, "^n_batches: expected a positive integer"),
        ({"inverse_dispersion": 0.0}, r"^inverse_dispersion: expected values in \(0.0, inf\]"),
        ({"mean_shape": float("nan")}, "^mean_shape: expected a finite number"),
        ({"batch_scale": -0.1}, r"^batch_scale: expected values in \[0.0, inf\]"),
        ({"de_probability": 1.5}, r"^de_probability: expected values in \[0.0, 1.0\]"),
        ({"stimulated_fraction": 1.0}, r"^stimulated_fraction: expected values in \[0.0, 1.0\)"),
        ({"doses": (1.0, 0.0)}, r"^doses: expected values in \(0.0"),
        ({"doses": ()}, "^doses: expected a non-empty"),
    ],
)
def test_bad_input_raises_value_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cells.simulate_counts(**({"n_cells": 100, "n_genes": 40} | kwargs), key=jax.random.key(0))
