"""Shared pieces of the P5 cells experiments: PCA embedding, LeCellModel training and the
two data sets (real PBMCs and the simulated counts)."""

from __future__ import annotations

import numpy as np
import optax

from experiments._harness import RunContext
from jaxlab import Driver, TqdmProgress, cells

# cells.train_lecell's default optimiser, built once: fits of same-shaped data share one
# compiled chunk (the driver caches it per step object, the optimiser included).
LECELL_OPTIMIZER = optax.adamw(1e-3, weight_decay=1e-4)
# cells.train_nbvae's default (Adam, 1e-3), built once for the same reason
NBVAE_OPTIMIZER = optax.adam(1e-3)


# The data sets the experiments run on, and the obs column of each one's cell types.
# "simulated" is cells.simulate_counts (no wheel ships a larger real set: see its docstring).
DATASETS = ("pbmc68k", "simulated")
LABEL_KEY = {"pbmc68k": "bulk_labels", "simulated": "cell_type"}
# metric-name prefix of each data set (the PBMC metrics keep their earlier names)
PREFIX = {"pbmc68k": "", "simulated": "sim_"}


def check_datasets(datasets) -> None:
    """Raise unless `datasets` is a non-empty tuple of names in `DATASETS`."""
    if not datasets or any(d not in DATASETS for d in datasets):
        raise ValueError(f"datasets: expected names from {DATASETS}, received {datasets!r}")


def simulated_cells(config, key, **kwargs):
    """`cells.simulate_counts` at the config's size (`sim_cells` x `sim_genes`)."""
    return cells.simulate_counts(config.sim_cells, config.sim_genes, key=key, **kwargs)


def pca_embedding(counts: np.ndarray, n_comps: int) -> np.ndarray:
    """scanpy PCA of log-normalised, scaled expression (the standard pipeline)."""
    import anndata
    import scanpy as sc

    a = anndata.AnnData(X=cells.log_normalize(counts))
    sc.pp.scale(a, max_value=10)
    sc.tl.pca(a, n_comps=n_comps, svd_solver="arpack")
    return np.asarray(a.obsm["X_pca"])


def lecell_kwargs(config, ctx: RunContext, tag: str) -> dict:
    """`cells.fit` settings of a config, checkpointed under `lecell_<tag>` in the run."""
    ckpt = ctx.checkpointer(f"lecell_{tag}")
    return {
        "latent_dim": config.latent_dim,
        "width": config.width,
        "steps": config.steps,
        "batch_size": config.batch_size,
        "lam": config.lam,
        "optimizer": LECELL_OPTIMIZER,
        "driver": Driver(checkpointer=ckpt, progress=TqdmProgress(desc=f"cells: LeJEPA {tag}")),
    }
