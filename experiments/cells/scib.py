"""P5: scIB integration score of LeCellModel vs PCA and an NB-VAE on real PBMCs."""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import Claim, Result, RunContext, log
from experiments.cells._setup import lecell_kwargs, pca_embedding
from jaxlab import cells
from jaxlab._core import TqdmProgress

NAME = "cells_scib"
PAPER = "P5"
DESCRIPTION = "scIB bio/batch/total (scib-metrics) of LeCellModel, PCA and NB-VAE on PBMC68k"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    n_batches: int = 3
    latent_dim: int = 16
    width: int = 256
    steps: int = 1500
    batch_size: int = 256
    lam: float = 0.05
    vae_steps: int = 1500


QUICK = Config()
FULL = Config(latent_dim=32, width=1024, steps=20000, batch_size=512, vae_steps=20000)


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    from scib_metrics.benchmark import Benchmarker

    k_fit, k_vae = jax.random.split(key)
    adata = cells.simulate_batches(
        cells.load_pbmc68k(), config.n_batches, key=jax.random.key(0)
    )  # one batch simulation for every run seed, as before
    counts = cells.counts_matrix(adata)
    d = config.latent_dim
    _, ann = cells.fit(adata, key=k_fit, attributions=False, **lecell_kwargs(config, ctx, "scib"))
    adata.obsm["X_lecell"] = ann.obsm["X_lecell"]
    adata.obsm["X_pca"] = pca_embedding(counts, d)
    codes = adata.obs["batch"].cat.codes.to_numpy()
    _, adata.obsm["X_vae"] = cells.train_nbvae(
        counts,
        codes,
        key=k_vae,
        steps=config.vae_steps,
        latent_dim=d,
        checkpointer=ctx.checkpointer("nbvae_scib"),
        progress=TqdmProgress(desc="cells: NB-VAE"),
    )
    bm = Benchmarker(
        adata,
        batch_key="batch",
        label_key="bulk_labels",
        embedding_obsm_keys=["X_lecell", "X_pca", "X_vae"],
        pre_integrated_embedding_obsm_key="X_pca",
        n_jobs=1,
        progress_bar=False,
    )
    bm.benchmark()
    df = bm.get_results(min_max_scale=False)
    log.info("scib results:\n%s", df.to_string())
    metrics = {}
    for method, key_ in (("lecell", "X_lecell"), ("pca", "X_pca"), ("vae", "X_vae")):
        metrics[f"scib_bio_{method}"] = float(df.loc[key_, "Bio conservation"])
        metrics[f"scib_batch_{method}"] = float(df.loc[key_, "Batch correction"])
        metrics[f"scib_total_{method}"] = float(df.loc[key_, "Total"])
    tot = {m: metrics[f"scib_total_{m}"] for m in ("lecell", "pca", "vae")}
    claims = [
        Claim(
            "LeCellModel scIB total >= PCA and VAE baselines",
            "LeCellModel best total score",
            f"total lecell {tot['lecell']:.3f}, pca {tot['pca']:.3f}, vae {tot['vae']:.3f}",
            tot["lecell"] >= max(tot["pca"], tot["vae"]),
        )
    ]
    fig, axes = plt.subplots(2, 3, figsize=(13, 8))
    for col, key_ in enumerate(("X_lecell", "X_pca", "X_vae")):
        z = adata.obsm[key_]
        xy = _two_d(z)
        for row, obs in enumerate(("bulk_labels", "batch")):
            ax = axes[row, col]
            cats = adata.obs[obs].astype("category")
            for i, c in enumerate(cats.cat.categories):
                m = (cats == c).to_numpy()
                ax.scatter(xy[m, 0], xy[m, 1], s=4, label=str(c), color=plt.cm.tab10(i % 10))
            ax.set_title(f"{key_} coloured by {obs}", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[0, 2].legend(fontsize=6, markerscale=2, loc="best")
        axes[1, 2].legend(fontsize=7, markerscale=2)
    notes = (
        "Real PBMCs (scanpy's 10x_pbmc68k_reduced, 700 cells x 765 genes, counts recovered "
        "from the stored log-normalised values). Batches are synthetic: random split into "
        f"{config.n_batches} batches with library-size, gene-wise capture and dropout "
        "effects (jaxlab.cells.simulate_batches). scIB metrics by scib-metrics' "
        "Benchmarker (total = 0.4 batch + 0.6 bio, unscaled). Embedding plots: first two "
        "principal components of each embedding."
    )
    return Result(metrics=metrics, claims=claims, figures={"embeddings": fig}, notes=notes)


def _two_d(z):
    zc = z - z.mean(0)
    _, _, vt = np.linalg.svd(zc, full_matrices=False)
    return zc @ vt[:2].T
