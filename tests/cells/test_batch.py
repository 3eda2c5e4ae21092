"""Batch conditioning of LeCellModel (`train_lecell(batch=...)`, `fit(batch_key=...)`):
the per-batch offsets against a pandas group-by, and a batch-conditioned fit that removes
the planted batch shift a fit without labels keeps."""

import jax
import numpy as np
import pandas as pd
import pytest

from jaxlab import cells


def test_batch_offsets_match_a_groupby_and_centre_every_batch():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 5)) + np.repeat([[0.0], [2.0], [-1.0]], 10, axis=0)
    labels = np.repeat(["b", "c", "a"], 10)
    off = cells.batch_offsets(x, labels)
    means = pd.DataFrame(x).groupby(labels).mean().to_numpy()  # sorted labels: a, b, c
    np.testing.assert_allclose(off, means - x.mean(0), atol=1e-12)
    codes = np.unique(labels, return_inverse=True)[1]
    centred = x - off[codes]
    for b in range(3):
        np.testing.assert_allclose(centred[codes == b].mean(0), x.mean(0), atol=1e-12)


def _separation(z, codes):
    """Distance of the two batch centroids over the pooled within-batch sd."""
    a, b = z[codes == 0], z[codes == 1]
    pooled = np.sqrt(0.5 * (a.var(0).sum() + b.var(0).sum()))
    return np.linalg.norm(a.mean(0) - b.mean(0)) / pooled


def test_a_batch_conditioned_fit_removes_the_planted_batch_shift():
    adata = cells.simulate_counts(
        600,
        100,
        key=jax.random.key(0),
        type_fractions=(0.5, 0.5),
        n_batches=2,
        batch_scale=1.0,
        stimulated_fraction=0.0,
        n_program=4,
    )
    codes = adata.obs["batch"].cat.codes.to_numpy()
    kw: dict = {"latent_dim": 4, "width": 32, "steps": 150, "batch_size": 128}
    _, plain = cells.fit(adata, key=jax.random.key(1), attributions=False, **kw)
    _, cond = cells.fit(adata, key=jax.random.key(1), attributions=False, batch_key="batch", **kw)
    s_plain = _separation(plain.obsm["X_lecell"], codes)
    s_cond = _separation(cond.obsm["X_lecell"], codes)
    assert s_plain > 1.0, s_plain  # without labels the batches stay apart
    assert s_cond < 0.25 * s_plain, (s_cond, s_plain)
    assert np.all(np.isfinite(cond.obs["jepa_logdensity"].to_numpy()))


def test_batch_labels_are_checked():
    adata = cells.simulate_counts(40, 40, key=jax.random.key(2), n_program=4)
    with pytest.raises(ValueError, match="batch_key"):
        cells.fit(adata, key=jax.random.key(0), batch_key="nope", steps=2, batch_size=8)
    counts = cells.counts_matrix(adata)
    with pytest.raises(ValueError, match="batch"):
        cells.train_lecell(counts, key=jax.random.key(0), batch=np.zeros(3), steps=2)
