"""P9 claim: LAPLEX Gram operators give high-dimensional Gaussian covariance models
of flattened photographs that keep visible spatial structure.

Data: grayscale crops of photographs shipped in the scikit-image wheel (located
with importlib.metadata, read with Pillow; QUICK 224x224 = 50,176 dimensions,
FULL 1732x1732 = 3e6), each standardised. Models, all zero-mean Gaussians fitted
by maximum likelihood on training crops and scored on held-out crops:

- diag: i.i.d. pixels (sigma^2 I);
- grid: a stationary Laplace (L1) kernel on the fixed pixel grid + noise;
- laplex: `LaplexGram` with learned per-row / per-column anchors, several heads.

The likelihood is matvec-only (CG + stochastic Lanczos quadrature); for the grid
model the log-determinant is also computed exactly from the 1-D eigenvalues
(Kronecker structure) to check SLQ at full size. Figure: samples.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax
from PIL import Image

from experiments._harness import Claim, Result, RunContext, log
from jaxlab import laplex
from jaxlab._core import TqdmProgress

NAME = "laplex_gram"
PAPER = "P9"
DESCRIPTION = "LAPLEX Gram covariance on flattened photos vs diagonal and fixed-grid Laplace"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    crop: int = 224
    train: tuple[tuple[str, int, int], ...] = (("camera.png", 160, 60),)
    test: tuple[tuple[str, int, int], ...] = (("camera.png", 288, 288), ("coins.png", 0, 0))
    heads: int = 3
    steps: int = 20
    lr: float = 0.03
    probes: int = 2
    lanczos: int = 25
    cg_tol: float = 1e-3
    cg_maxiter: int = 400
    eval_probes: int = 4
    eval_lanczos: int = 40
    eval_cg_tol: float = 1e-4


QUICK = Config()
FULL = Config(
    crop=1732,
    train=(("hubble_deep_field.jpg", 0, 0),),
    test=(("hubble_deep_field.jpg", 100, 100),),
    steps=100,
    probes=4,
)


def _load_crop(name, r0, c0, size):
    dist = importlib.metadata.distribution("scikit-image")
    matches = [f for f in dist.files if str(f) == f"skimage/data/{name}"]
    if not matches:
        raise FileNotFoundError(f"{name}: not in the scikit-image wheel; pip install scikit-image")
    img = np.asarray(Image.open(dist.locate_file(matches[0])).convert("L"), np.float32)
    if img.shape[0] < r0 + size or img.shape[1] < c0 + size:
        raise ValueError(f"{name}: image {img.shape} smaller than crop {size} at {(r0, c0)}")
    crop = img[r0 : r0 + size, c0 : c0 + size]
    return (crop - crop.mean()) / (crop.std() + 1e-6)


def _exact_grid_nll(model, y):
    """Exact NLL of a single-head model on the fixed grid (Kronecker eigenvalues)."""
    a, c, noise = (
        float(jnp.exp(model.log_a[0])),
        float(jnp.exp(model.log_c[0])),
        float(jnp.exp(model.log_noise)),
    )
    evs, vecs = [], []
    for u in model.anchors:
        x = np.asarray(u[0], np.float64)
        e, q = np.linalg.eigh(np.exp(-a * np.abs(x[:, None] - x[None, :])))
        evs.append(e)
        vecs.append(q)
    lam = c * np.multiply.outer(evs[0], evs[1]) + noise
    yy = np.asarray(y, np.float64).reshape(model.shape)
    proj = vecs[0].T @ yy @ vecs[1]
    n = yy.size
    return 0.5 * (np.sum(proj**2 / lam) + np.sum(np.log(lam)) + n * np.log(2 * np.pi)) / n


def _fit(model, ys, cfg, key, desc, ctx):
    fitted, hist = laplex.fit_gram(
        model,
        jnp.stack(ys),
        key=key,
        steps=cfg.steps,
        optimizer=optax.adam(cfg.lr),
        probes=cfg.probes,
        lanczos_steps=cfg.lanczos,
        cg_tol=cfg.cg_tol,
        cg_maxiter=cfg.cg_maxiter,
        checkpointer=ctx.checkpointer(desc.replace(" ", "_")),
        progress=TqdmProgress(desc=desc),
    )
    log.warning("%s: final train NLL/dim %.4f", desc, float(hist.losses[-1]))
    return fitted


def _score(model, ys, cfg, key):
    f = jax.jit(
        lambda m, y, k: m.neg_log_likelihood(
            y,
            key=k,
            probes=cfg.eval_probes,
            lanczos_steps=cfg.eval_lanczos,
            cg_tol=cfg.eval_cg_tol,
            cg_maxiter=4 * cfg.cg_maxiter,
        )
    )
    return float(
        np.mean([float(f(model, y, jax.random.fold_in(key, i))) / y.size for i, y in enumerate(ys)])
    )


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    size = int(config.crop)
    train = [jnp.asarray(_load_crop(n, r, c, size).ravel()) for n, r, c in config.train]
    test = [jnp.asarray(_load_crop(n, r, c, size).ravel()) for n, r, c in config.test]
    coords = [jnp.arange(size, dtype=jnp.float32)] * 2
    k_grid, k_lap, k_eval, k_samp = jax.random.split(key, 4)
    # diagonal: sigma^2 fitted on the training crops (~1 after standardisation)
    var = float(np.mean([float(jnp.mean(y**2)) for y in train]))
    nll_diag = float(
        np.mean([0.5 * (float(jnp.mean(y**2)) / var + np.log(2 * np.pi * var)) for y in test])
    )
    grid0 = laplex.LaplexGram(coords, 1, key=k_grid, decay=0.2, noise=0.1, learn_anchors=False)
    grid = _fit(grid0, train, config, k_grid, "grid model", ctx)
    lap0 = laplex.LaplexGram(coords, config.heads, key=k_lap, decay=0.2, noise=0.1)
    lap = _fit(lap0, train, config, k_lap, "laplex model", ctx)
    nll_grid = _score(grid, test, config, k_eval)
    nll_lap = _score(lap, test, config, k_eval)
    nll_grid_train = _score(grid, train, config, k_eval)
    nll_lap_train = _score(lap, train, config, k_eval)
    nll_grid_exact = float(np.mean([_exact_grid_nll(grid, y) for y in test]))
    slq_err = abs(nll_grid - nll_grid_exact) / abs(nll_grid_exact)
    log.info(
        "test NLL/dim: diag %.4f grid %.4f (exact %.4f) laplex %.4f",
        nll_diag,
        nll_grid,
        nll_grid_exact,
        nll_lap,
    )
    metrics = {
        "nll_laplex": nll_lap,
        "nll_diag": nll_diag,
        "nll_grid": nll_grid,
        "nll_grid_exact": nll_grid_exact,
        "slq_rel_err_grid": slq_err,
        "nll_laplex_train": nll_lap_train,
        "nll_grid_train": nll_grid_train,
        "dimension": size * size,
        "laplex_decays": [float(x) for x in jnp.exp(lap.log_a)],
        "grid_decay": float(jnp.exp(grid.log_a[0])),
    }
    metrics = {k: v for k, v in metrics.items() if not isinstance(v, list)}
    claims = [
        Claim(
            "LAPLEX covariance beats the diagonal model on held-out photos",
            "preserves spatial structure",
            f"NLL/dim {nll_lap:.3f} vs diag {nll_diag:.3f}",
            nll_lap < nll_diag,
        ),
        Claim(
            "LAPLEX (learned anchors, heads) beats a fixed-grid stationary Laplace model",
            "data-adaptive geometry",
            f"NLL/dim {nll_lap:.3f} vs grid {nll_grid:.3f}",
            nll_lap < nll_grid,
        ),
        Claim(
            "matvec-only likelihood (CG + SLQ) matches the exact one",
            "(method)",
            f"grid model: SLQ {nll_grid:.4f} vs exact {nll_grid_exact:.4f} NLL/dim",
            slq_err < 0.01,
        ),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.5))
    axes[0].imshow(np.asarray(test[0]).reshape(size, size), cmap="gray")
    axes[0].set_title("held-out crop")
    axes[1].imshow(np.asarray(jax.random.normal(k_samp, (size, size))), cmap="gray")
    axes[1].set_title("diag model sample")
    axes[2].imshow(np.asarray(grid.sample(key=k_samp)).reshape(size, size), cmap="gray")
    axes[2].set_title("grid Laplace sample")
    axes[3].imshow(np.asarray(lap.sample(key=k_samp)).reshape(size, size), cmap="gray")
    axes[3].set_title("LAPLEX Gram sample")
    for ax in axes:
        ax.axis("off")
    fig.tight_layout()
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"samples": fig},
        notes=(
            f"scikit-image photographs (camera, coins; from the wheel), {size}x{size} "
            "standardised crops; NLL per dimension in nats on held-out crops; "
            "CG + SLQ estimates with fixed probes; grid model also scored exactly."
        ),
    )
