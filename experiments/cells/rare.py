"""P5: rare stimulated-state detection by JEPA-SCORE atypicality vs kNN density and iForest."""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import spearmanr
from sklearn.ensemble import IsolationForest
from sklearn.metrics import roc_auc_score

from experiments._harness import Claim, Result, RunContext
from experiments.cells._setup import lecell_kwargs, pca_embedding
from jaxlab import cells

NAME = "cells_rare"
PAPER = "P5"
DESCRIPTION = "AUROC of rare interferon-stimulated cells: JEPA-SCORE vs kNN density, iForest"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    fractions: tuple[float, ...] = (0.005, 0.01, 0.02, 0.05, 0.10)
    doses: tuple[float, ...] = (1.0, 2.0, 4.0)
    latent_dim: int = 16
    width: int = 256
    steps: int = 1000
    batch_size: int = 256
    lam: float = 0.05
    n_pcs: int = 16


QUICK = Config()
FULL = Config(
    doses=(0.5, 1.0, 2.0, 4.0, 8.0),
    latent_dim=32,
    width=1024,
    steps=20000,
    batch_size=512,
    n_pcs=32,
)


def _tag(f):
    pct = f * 100
    return f"{pct:g}".replace(".", "p") + "pct"


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    base = cells.load_pbmc68k()
    metrics, rows = {}, []
    dose_rho = None
    for i, f in enumerate(config.fractions):
        adata = cells.spike_program(base, f, doses=tuple(config.doses), key=jax.random.key(i))
        y = adata.obs["stimulated"].to_numpy()
        counts = cells.counts_matrix(adata)
        _, ann = cells.fit(
            adata,
            key=jax.random.fold_in(key, i),
            attributions=False,
            **lecell_kwargs(config, ctx, f"rare{i}"),
        )
        # JEPA-SCORE density: log N(f(x); 0, I) + log-volume; low density = atypical.
        atyp = -ann.obs["jepa_logdensity"].to_numpy()
        score_only = -ann.obs["jepa_score"].to_numpy()
        pcs = pca_embedding(counts, config.n_pcs)
        knn = cells.knn_atypicality(pcs, k=15)
        iforest = -IsolationForest(random_state=0).fit(pcs).score_samples(pcs)
        t = _tag(f)
        metrics[f"auroc_lecell_{t}"] = roc_auc_score(y, atyp)
        metrics[f"auroc_knn_{t}"] = roc_auc_score(y, knn)
        metrics[f"auroc_iforest_{t}"] = roc_auc_score(y, iforest)
        metrics[f"auroc_jepascore_only_{t}"] = roc_auc_score(y, score_only)
        rows.append(
            (
                f,
                metrics[f"auroc_lecell_{t}"],
                metrics[f"auroc_knn_{t}"],
                metrics[f"auroc_iforest_{t}"],
            )
        )
        if f == max(config.fractions):
            stim = y.astype(bool)
            dose_rho = spearmanr(adata.obs["dose"].to_numpy()[stim], atyp[stim]).statistic
    metrics["dose_spearman_lecell"] = float(dose_rho)
    arr = np.asarray(rows)
    wins = int(np.sum(arr[:, 1] >= np.maximum(arr[:, 2], arr[:, 3])))
    claims = [
        Claim(
            "JEPA-SCORE detects rare stimulated states at least as well as kNN and iForest",
            "LeCellModel best across minority fractions",
            f"best or tied at {wins}/{len(rows)} fractions; AUROC lecell "
            f"{', '.join(f'{r[1]:.2f}' for r in rows)}",
            wins == len(rows),
        ),
        Claim(
            "JEPA-SCORE atypicality tracks response magnitude (dose)",
            "monotone in dose",
            f"Spearman rho = {dose_rho:.2f} (stimulated cells, "
            f"{max(config.fractions) * 100:g}% fraction)",
            bool(dose_rho > 0.3),
        ),
    ]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for j, name in enumerate(("lecell", "knn", "iforest")):
        ax.plot(arr[:, 0] * 100, arr[:, 1 + j], "o-", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("stimulated fraction (%)")
    ax.set_ylabel("AUROC")
    ax.axhline(0.5, color="grey", lw=0.5)
    ax.legend()
    notes = (
        "Real PBMCs (scanpy's pbmc68k_reduced) with a synthetic interferon response spiked "
        f"into a random minority: genes {', '.join(cells.INTERFERON_PROGRAM)} re-drawn as "
        "Poisson(x (1 + d) + d), dose d drawn from "
        f"{list(config.doses)} (jaxlab.cells.spike_program). Baselines on {config.n_pcs} "
        "scanpy PCs: mean 15-NN distance and scikit-learn IsolationForest. LeCellModel's "
        "atypicality is minus the JEPA-SCORE density (log-volume + Gaussian log-prior of "
        "the embedding); auroc_jepascore_only_* uses the log-volume alone."
    )
    return Result(metrics=metrics, claims=claims, figures={"auroc": fig}, notes=notes)
