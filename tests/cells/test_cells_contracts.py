"""Issue #59 item 2 (cells): every public function refuses bad input with a ValueError
naming the argument, before any computation (each case below returned NaN, a silently
wrong result, or an unnamed/deep error before the validation layer was applied)."""

from __future__ import annotations

import anndata
import jax
import numpy as np
import optax
import pytest

from jaxlab import cells as C

K = jax.random.key(0)
COUNTS = np.random.default_rng(0).poisson(2.0, (12, 6)).astype(float)
NAN = COUNTS.copy()
NAN[3, 2] = np.nan
X = np.log1p(COUNTS[0])
XNAN = X.copy()
XNAN[2] = np.nan
Z = np.random.default_rng(1).standard_normal((10, 3))
ZNAN = Z.copy()
ZNAN[2, 1] = np.nan
EMB = np.random.default_rng(2).standard_normal((20, 3))
EMBNAN = EMB.copy()
EMBNAN[4, 1] = np.nan
ONE = np.ones(1)


def _adata():
    ad = anndata.AnnData(X=COUNTS.astype(np.float32))
    ad.var_names = [f"g{i}" for i in range(6)]
    return ad


def _model():
    return C.LeCellModel(6, 2, 8, key=K)


def _vae():
    return C.NBVAE(6, 1, 2, 8, key=K)


def _lecell(**kw):
    return C.train_lecell(
        **{"counts": COUNTS, "key": K, "steps": 1, "batch_size": 4, "width": 4, "latent_dim": 2}
        | kw
    )


def _nbvae(**kw):
    return C.train_nbvae(**{"counts": COUNTS, "key": K, "steps": 1, "batch_size": 4} | kw)


def _spike(**kw):
    return C.spike_program(**{"adata": _adata(), "fraction": 0.5, "genes": ("g1",), "key": K} | kw)


CASES = {
    "log_normalize-counts-nan": ("counts", lambda: C.log_normalize(NAN)),
    "log_normalize-counts-negative": ("counts", lambda: C.log_normalize(-COUNTS)),
    "log_normalize-counts-str": ("counts", lambda: C.log_normalize("abc")),
    "log_normalize-counts-1d": ("counts", lambda: C.log_normalize(COUNTS[0])),
    "log_normalize-target-nan": ("target", lambda: C.log_normalize(COUNTS, target=np.nan)),
    "log_normalize-target-negative": ("target", lambda: C.log_normalize(COUNTS, target=-1.0)),
    "log_normalize-target-str": ("target", lambda: C.log_normalize(COUNTS, target="1")),
    "counts_matrix-adata-str": ("adata", lambda: C.counts_matrix("abc")),
    "counts_matrix-min_cells-bool": (
        "min_cells",
        lambda: C.counts_matrix(_adata(), min_cells=True),
    ),
    "counts_matrix-min_cells-float": (
        "min_cells",
        lambda: C.counts_matrix(_adata(), min_cells=2.5),
    ),
    # the size fuzz's 10**9 (#59): the too-few-cells error names min_cells, before the
    # dense copy
    "counts_matrix-min_cells-1e9": (
        "min_cells",
        lambda: C.counts_matrix(_adata(), min_cells=10**9),
    ),
    "simulate_batches-n_batches-0": ("n_batches", lambda: C.simulate_batches(_adata(), 0, key=K)),
    "simulate_batches-n_batches-bool": (
        "n_batches",
        lambda: C.simulate_batches(_adata(), True, key=K),
    ),
    "simulate_batches-n_batches-1e9": (
        "n_batches",
        lambda: C.simulate_batches(_adata(), 10**9, key=K),
    ),
    "simulate_batches-strength-nan": (
        "strength",
        lambda: C.simulate_batches(_adata(), 2, key=K, strength=np.nan),
    ),
    "simulate_batches-strength-negative": (
        "strength",
        lambda: C.simulate_batches(_adata(), 2, key=K, strength=-1.0),
    ),
    "spike_program-fraction-str": ("fraction", lambda: _spike(fraction="0.5")),
    "spike_program-genes-empty": ("genes", lambda: _spike(genes=())),
    "spike_program-doses-negative": ("doses", lambda: _spike(doses=(-5.0,))),
    "spike_program-doses-nan": ("doses", lambda: _spike(doses=(np.nan,))),
    "spike_program-doses-empty": ("doses", lambda: _spike(doses=())),
    "spike_program-doses-str": ("doses", lambda: _spike(doses="abc")),
    "knn_atypicality-embedding-nan": ("embedding", lambda: C.knn_atypicality(EMBNAN, k=3)),
    "knn_atypicality-embedding-str": ("embedding", lambda: C.knn_atypicality("abc", k=3)),
    "augment-counts-nan": ("counts", lambda: C.augment(NAN[3], key=K)),
    "augment-counts-negative": ("counts", lambda: C.augment(-COUNTS[0], key=K)),
    "augment-counts-str": ("counts", lambda: C.augment("abc", key=K)),
    "augment-counts-2d": ("counts", lambda: C.augment(COUNTS, key=K)),
    "augment-dropout-1.5": ("dropout", lambda: C.augment(COUNTS[0], key=K, dropout=1.5)),
    "augment-dropout-negative": ("dropout", lambda: C.augment(COUNTS[0], key=K, dropout=-0.5)),
    "augment-thin-above-1": ("thin", lambda: C.augment(COUNTS[0], key=K, thin=(2.0, 3.0))),
    "augment-thin-reversed": ("thin", lambda: C.augment(COUNTS[0], key=K, thin=(0.9, 0.1))),
    "augment-lib_jitter-nan": (
        "lib_jitter",
        lambda: C.augment(COUNTS[0], key=K, lib_jitter=np.nan),
    ),
    "LeCellModel-n_genes-0": ("n_genes", lambda: C.LeCellModel(0, 2, 8, key=K)),
    "LeCellModel-n_genes-bool": ("n_genes", lambda: C.LeCellModel(True, 2, 8, key=K)),
    "LeCellModel-n_genes-2.5": ("n_genes", lambda: C.LeCellModel(2.5, 2, 8, key=K)),
    "LeCellModel-latent_dim-negative": ("latent_dim", lambda: C.LeCellModel(6, -1, 8, key=K)),
    "LeCellModel-width-0": ("width", lambda: C.LeCellModel(6, 2, 0, key=K)),
    "LeCellModel-depth-negative": ("depth", lambda: C.LeCellModel(6, 2, 8, depth=-1, key=K)),
    "LeCellModel-width-1e9": ("width", lambda: C.LeCellModel(6, 2, 10**9, key=K)),
    "LeCellModel-gene_mean-width": (
        "gene_mean",
        lambda: C.LeCellModel(6, 2, 8, gene_mean=np.zeros(5), key=K),
    ),
    "LeCellModel-gene_scale-zero": (
        "gene_scale",
        lambda: C.LeCellModel(6, 2, 8, gene_scale=np.zeros(6), key=K),
    ),
    "LeCellModel-gene_scale-nan": (
        "gene_scale",
        lambda: C.LeCellModel(6, 2, 8, gene_scale=np.full(6, np.nan), key=K),
    ),
    "jepa_loss-counts-width": ("counts", lambda: C.jepa_loss(_model(), COUNTS[:, :5], key=K)),
    "jepa_loss-counts-nan": ("counts", lambda: C.jepa_loss(_model(), NAN, key=K)),
    "jepa_loss-counts-negative": ("counts", lambda: C.jepa_loss(_model(), -COUNTS, key=K)),
    "jepa_loss-counts-1d": ("counts", lambda: C.jepa_loss(_model(), COUNTS[0], key=K)),
    "jepa_loss-n_views-0": ("n_views", lambda: C.jepa_loss(_model(), COUNTS, key=K, n_views=0)),
    "jepa_loss-n_views-bool": (
        "n_views",
        lambda: C.jepa_loss(_model(), COUNTS, key=K, n_views=True),
    ),
    "jepa_loss-lam-nan": ("lam", lambda: C.jepa_loss(_model(), COUNTS, key=K, lam=np.nan)),
    "jepa_loss-lam-2": ("lam", lambda: C.jepa_loss(_model(), COUNTS, key=K, lam=2.0)),
    "jepa_score-x-width": ("x", lambda: C.jepa_score(_model(), X[:5])),
    "jepa_score-x-nan": ("x", lambda: C.jepa_score(_model(), XNAN)),
    "jepa_score_sketched-x-width": ("x", lambda: C.jepa_score_sketched(_model(), X[:5], key=K)),
    "jepa_score_sketched-x-nan": ("x", lambda: C.jepa_score_sketched(_model(), XNAN, key=K)),
    "jepa_score_sketched-rank-1e9": (
        "rank",
        lambda: C.jepa_score_sketched(_model(), X, key=K, rank=10**9),
    ),
    "gene_attribution-x-width": ("x", lambda: C.gene_attribution(_model(), X[:5])),
    "gene_attribution-x-nan": ("x", lambda: C.gene_attribution(_model(), XNAN)),
    "epps_pulley-x-nan": ("x", lambda: C.epps_pulley(ZNAN)),
    "epps_pulley-x-empty": ("x", lambda: C.epps_pulley(Z[:0])),
    "epps_pulley-n_points-float": ("n_points", lambda: C.epps_pulley(Z, n_points=3.0)),
    "epps_pulley-n_points-str": ("n_points", lambda: C.epps_pulley(Z, n_points="5")),
    "epps_pulley-n_points-1e9": ("n_points", lambda: C.epps_pulley(Z, n_points=10**9 + 1)),
    "epps_pulley-t_max-nan": ("t_max", lambda: C.epps_pulley(Z, t_max=np.nan)),
    "epps_pulley-t_max-negative": ("t_max", lambda: C.epps_pulley(Z, t_max=-1.0)),
    "epps_pulley-t_max-0": ("t_max", lambda: C.epps_pulley(Z, t_max=0.0)),
    "epps_pulley_null_mean-t_max-nan": ("t_max", lambda: C.epps_pulley_null_mean(t_max=np.nan)),
    "epps_pulley_null_mean-n_points-2": ("n_points", lambda: C.epps_pulley_null_mean(n_points=2)),
    "epps_pulley_null_mean-n_points-1": ("n_points", lambda: C.epps_pulley_null_mean(n_points=1)),
    "sigreg-z-nan": ("z", lambda: C.sigreg(ZNAN, key=K)),
    "sigreg-z-empty": ("z", lambda: C.sigreg(Z[:0], key=K)),
    "sigreg-t_max-nan": ("t_max", lambda: C.sigreg(Z, key=K, t_max=np.nan)),
    "sigreg-n_slices-1e9": ("n_slices", lambda: C.sigreg(Z, key=K, n_slices=10**9)),
    "nb_log_likelihood-x-negative": ("x", lambda: C.nb_log_likelihood(-ONE, ONE, ONE)),
    "nb_log_likelihood-x-nan": ("x", lambda: C.nb_log_likelihood(ONE * np.nan, ONE, ONE)),
    "nb_log_likelihood-mean-negative": ("mean", lambda: C.nb_log_likelihood(ONE, -ONE, ONE)),
    "nb_log_likelihood-theta-0": ("theta", lambda: C.nb_log_likelihood(ONE, ONE, 0 * ONE)),
    "nb_log_likelihood-mean-shape": (
        "mean",
        lambda: C.nb_log_likelihood(np.ones(3), np.ones(2), np.ones(3)),
    ),
    "NBVAE-n_genes-0": ("n_genes", lambda: C.NBVAE(0, 1, key=K)),
    "NBVAE-n_batches-negative": ("n_batches", lambda: C.NBVAE(6, -1, key=K)),
    "NBVAE-latent_dim-bool": ("latent_dim", lambda: C.NBVAE(6, 1, True, key=K)),
    "NBVAE-n_genes-1e9": ("n_genes", lambda: C.NBVAE(10**9, 1, key=K)),
    "NBVAEStep-counts-nan": (
        "counts",
        lambda: C.NBVAEStep(_vae(), NAN, np.ones((12, 1)), optimizer=optax.adam(1e-3)),
    ),
    "NBVAEStep-counts-width": (
        "counts",
        lambda: C.NBVAEStep(_vae(), COUNTS[:, :5], np.ones((12, 1)), optimizer=optax.adam(1e-3)),
    ),
    "NBVAEStep-batch_onehot-width": (
        "batch_onehot",
        lambda: C.NBVAEStep(_vae(), COUNTS, np.ones((12, 2)), optimizer=optax.adam(1e-3)),
    ),
    "LeCellStep-counts-nan": (
        "counts",
        lambda: C.LeCellStep(_model(), NAN, optimizer=optax.adam(1e-3)),
    ),
    "LeCellStep-counts-width": (
        "counts",
        lambda: C.LeCellStep(_model(), COUNTS[:, :5], optimizer=optax.adam(1e-3)),
    ),
    "LeCellStep-counts-negative": (
        "counts",
        lambda: C.LeCellStep(_model(), -COUNTS, optimizer=optax.adam(1e-3)),
    ),
    "LeCellStep-lam-nan": (
        "lam",
        lambda: C.LeCellStep(_model(), COUNTS, optimizer=optax.adam(1e-3), lam=np.nan),
    ),
    "train_nbvae-counts-nan": ("counts", lambda: _nbvae(counts=NAN)),
    "train_nbvae-counts-negative": ("counts", lambda: _nbvae(counts=-COUNTS)),
    "train_nbvae-counts-str": ("counts", lambda: _nbvae(counts="abc")),
    "train_nbvae-counts-1d": ("counts", lambda: _nbvae(counts=COUNTS[0])),
    "train_nbvae-counts-empty": ("counts", lambda: _nbvae(counts=COUNTS[:0])),
    "train_nbvae-batch-negative": ("batch", lambda: _nbvae(batch=np.r_[-1, np.zeros(11, int)])),
    "train_nbvae-batch-float": ("batch", lambda: _nbvae(batch=np.full(12, 0.5))),
    "train_nbvae-batch-1e8": ("batch", lambda: _nbvae(batch=np.r_[10**8, np.zeros(11, int)])),
    "train_nbvae-batch-str": ("batch", lambda: _nbvae(batch="abc")),
    "train_nbvae-latent_dim-0": ("latent_dim", lambda: _nbvae(latent_dim=0)),
    "train_nbvae-latent_dim-bool": ("latent_dim", lambda: _nbvae(latent_dim=True)),
    "train_lecell-latent_dim-0": ("latent_dim", lambda: _lecell(latent_dim=0)),
    "train_lecell-latent_dim-bool": ("latent_dim", lambda: _lecell(latent_dim=True)),
    "train_lecell-width-2.5": ("width", lambda: _lecell(width=2.5)),
    "train_lecell-lam-nan": ("lam", lambda: _lecell(lam=np.nan)),
    "train_lecell-lam-negative": ("lam", lambda: _lecell(lam=-1.0)),
    "train_lecell-n_views-1e9": ("n_views", lambda: _lecell(n_views=10**9)),
    "annotate-counts-width": ("counts", lambda: C.annotate(_model(), COUNTS[:, :5])),
    "annotate-batch-0": ("batch", lambda: C.annotate(_model(), COUNTS, batch=0)),
    "annotate-batch-bool": ("batch", lambda: C.annotate(_model(), COUNTS, batch=True)),
    "annotate-batch-2.5": ("batch", lambda: C.annotate(_model(), COUNTS, batch=2.5)),
    "annotate-model-str": ("model", lambda: C.annotate("abc", COUNTS)),
    "simulate_counts-type_fractions-str": (
        "type_fractions",
        lambda: C.simulate_counts(20, 40, key=K, n_program=4, type_fractions="ab"),
    ),
    "simulate_counts-doses-str": (
        "doses",
        lambda: C.simulate_counts(20, 40, key=K, n_program=4, doses="ab"),
    ),
    "simulate_counts-stimulated_fraction-str": (
        "stimulated_fraction",
        lambda: C.simulate_counts(20, 40, key=K, n_program=4, stimulated_fraction="0.1"),
    ),
    "simulate_counts-n_cells-1e9": (
        "n_cells",
        lambda: C.simulate_counts(10**9, 40, key=K, n_program=4),
    ),
    "fit-adata-str": ("adata", lambda: C.fit("abc", key=K, steps=1)),
    # issue #59 (fuzz of the rest of cells): a zero-gene cell gave an empty view; a step
    # count of 10**9 ran without bound (now the driver's MAX_RUN_STEPS, before any work)
    "augment-counts-empty": ("counts", lambda: C.augment(np.zeros(0), key=K)),
    "train_lecell-steps-1e9": ("steps", lambda: _lecell(steps=10**9)),
    "train_nbvae-steps-1e9": ("steps", lambda: _nbvae(steps=10**9)),
    "fit-steps-1e9": ("steps", lambda: C.fit(_adata(), key=K, steps=10**9)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_naming_the_argument(case):
    arg, call = CASES[case]
    with pytest.raises(ValueError, match=rf"(^|\W){arg}\W"):
        call()
