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
DESCRIPTION = (
    "scIB bio/batch/total (scib-metrics) of LeCellModel, PCA and NB-VAEs (with and without "
    "batch labels) on PBMC68k"
)


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

# method name -> obsm key of its embedding
EMBEDDINGS = {"lecell": "X_lecell", "pca": "X_pca", "vae_nobatch": "X_vae_nobatch", "vae": "X_vae"}
FULL = Config(latent_dim=32, width=1024, steps=20000, batch_size=512, vae_steps=20000)


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    from scib_metrics.benchmark import Benchmarker

    k_fit, k_vae = jax.random.split(key)
    k_vae0 = jax.random.fold_in(k_vae, 1)
    adata = cells.simulate_batches(
        cells.load_pbmc68k(), config.n_batches, key=jax.random.key(0)
    )  # one batch simulation for every run seed, as before
    counts = cells.counts_matrix(adata)
    d = config.latent_dim
    _, ann = cells.fit(adata, key=k_fit, attributions=False, **lecell_kwargs(config, ctx, "scib"))
    adata.obsm["X_lecell"] = ann.obsm["X_lecell"]
    adata.obsm["X_pca"] = pca_embedding(counts, d)
    codes = adata.obs["batch"].cat.codes.to_numpy()
    # the batch-conditioned NB-VAE, and the fair baseline: like LeCellModel (and PCA) the
    # second one never sees the batch labels
    vaes = {
        "X_vae": (codes, k_vae, "nbvae_scib", "cells: NB-VAE"),
        "X_vae_nobatch": (None, k_vae0, "nbvae_nobatch_scib", "cells: NB-VAE, no batch labels"),
    }
    for obsm, (batch, k, tag, desc) in vaes.items():
        _, adata.obsm[obsm] = cells.train_nbvae(
            counts,
            batch,
            key=k,
            steps=config.vae_steps,
            latent_dim=d,
            checkpointer=ctx.checkpointer(tag),
            progress=TqdmProgress(desc=desc),
        )
    bm = Benchmarker(
        adata,
        batch_key="batch",
        label_key="bulk_labels",
        embedding_obsm_keys=list(EMBEDDINGS.values()),
        pre_integrated_embedding_obsm_key="X_pca",
        n_jobs=1,
        progress_bar=False,
    )
    bm.benchmark()
    df = bm.get_results(min_max_scale=False)
    log.info("scib results:\n%s", df.to_string())
    metrics = {}
    for method, key_ in EMBEDDINGS.items():
        metrics[f"scib_bio_{method}"] = float(df.loc[key_, "Bio conservation"])
        metrics[f"scib_batch_{method}"] = float(df.loc[key_, "Batch correction"])
        metrics[f"scib_total_{method}"] = float(df.loc[key_, "Total"])

    def part(kind):
        v = {m: metrics[f"scib_{kind}_{m}"] for m in EMBEDDINGS}
        fair = ", ".join(f"{m} {v[m]:.3f}" for m in ("lecell", "pca", "vae_nobatch"))
        text = f"{fair}; batch-conditioned vae (given the batch labels) {v['vae']:.3f}"
        return v, text, v["lecell"] >= max(v["pca"], v["vae_nobatch"])

    claims = []
    for kind, name in (("bio", "bio-conservation"), ("batch", "batch-correction")):
        _, text, holds = part(kind)
        claims.append(
            Claim(
                f"LeCellModel scIB {name} >= PCA and an NB-VAE without batch labels",
                "LeCellModel best total score (scIB bio-conservation and batch correction)",
                text + " (one seed: an ordering, no interval)",
                holds,
            )
        )
    _, text, holds = part("total")
    claims.append(
        Claim(
            "LeCellModel scIB total >= PCA and an NB-VAE without batch labels (the baselines "
            "given the same information)",
            "LeCellModel best total score",
            "total " + text + " (one seed: an ordering, no interval)",
            holds,
        )
    )
    fig, axes = plt.subplots(2, len(EMBEDDINGS), figsize=(4.3 * len(EMBEDDINGS), 8))
    for col, key_ in enumerate(EMBEDDINGS.values()):
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
        axes[0, -1].legend(fontsize=6, markerscale=2, loc="best")
        axes[1, -1].legend(fontsize=7, markerscale=2)
    notes = (
        "Real PBMCs (scanpy's 10x_pbmc68k_reduced, 700 cells x 765 genes, counts recovered "
        "from the stored log-normalised values). Batches are synthetic: random split into "
        f"{config.n_batches} batches with library-size, gene-wise capture and dropout "
        "effects (jaxlab.cells.simulate_batches). scIB metrics by scib-metrics' "
        "Benchmarker (total = 0.4 batch + 0.6 bio, unscaled), reported per part. "
        "LeCellModel sees no batch labels, so its fair baselines are PCA and the NB-VAE "
        "trained with one batch (X_vae_nobatch); the batch-conditioned NB-VAE (X_vae) is "
        "reported beside them as a method given more information. Embedding plots: "
        "first two principal components of each embedding."
    )
    return Result(metrics=metrics, claims=claims, figures={"embeddings": fig}, notes=notes)


def _two_d(z):
    zc = z - z.mean(0)
    _, _, vt = np.linalg.svd(zc, full_matrices=False)
    return zc @ vt[:2].T
