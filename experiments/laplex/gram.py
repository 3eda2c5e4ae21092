"""P9 claim: LAPLEX Gram operators give Gaussian covariance models of flattened images
that keep visible spatial structure, and learned anchors adapt the geometry.

Data: the 100 aligned faces of the LFW subset shipped in the scikit-image wheel
(`skimage/data/lfw_subset.npy`, 25x25 = 625 dimensions; Huang et al. 2012's
congealed crops, one registration for all), split into train / validation / test
images. Pixels are centred by the training mean face and scaled by its overall std.
Models, zero-mean Gaussians fitted by maximum likelihood on the training images:

- diag: independent pixels with per-pixel variances (closed form);
- grid: a stationary Laplace (L1) kernel on the fixed pixel grid, `heads` scales;
- laplex: `LaplexGram` with the same heads and learned per-row / per-column anchors;
- factor analysis: low rank plus diagonal, `W W^T + Psi` (sklearn's `FactorAnalysis`, the
  PPCA / factor-analysis family the paper positions LAPLEX against), its rank chosen from
  `fa_ranks` on the validation NLL (LAPLEX and grid are early-stopped on the same faces);
- dense (reference, not a claim): Ledoit-Wolf shrunk sample covariance (sklearn),
  625 x 626 / 2 numbers.

The fits use the matvec-only likelihood (CG + stochastic Lanczos quadrature) through
`jaxlab.ValidatedStep`: the exact validation NLL (dense Cholesky; 625 dimensions allow
it) is scored every `val_every` steps and the best-validation parameters are kept
(early stopping with a patience). Train / validation / test NLL per dimension are
exact; the matvec-only estimate is checked against them. Figure: samples and the
learned anchors.

Dimension: `side` resamples the faces (bilinear) to `side^2` pixels. QUICK keeps the
shipped 25 x 25 = 625 (real pixels; ~400 s idle, ~920 s at load 13 on 2 cores); FULL
uses 64 x 64 = 4096. The largest run on the 2-core machine is `--set side=32` (1024
dimensions, 987 s at load ~9): interpolated pixels are smoother than real ones (they
favour the kernel models), and both fits ran all 100 steps without early stopping.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax

from experiments._harness import (
    Result,
    RunContext,
    at_most,
    bootstrap,
    log,
    paired_bootstrap,
    superior,
)
from jaxlab import Driver, TqdmProgress, ValidatedStep, laplex, run_steps

NAME = "laplex_gram"
PAPER = "P9"
DESCRIPTION = "LAPLEX Gram covariance on aligned faces vs diagonal, fixed-grid Laplace, dense"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    # image side in pixels: 25 is the shipped faces; a larger side resamples every face
    # (bilinear, scipy.ndimage.zoom) to side x side to scale the dimension (side^2)
    side: int = 25
    n_train: int = 40
    n_val: int = 20
    n_test: int = 40
    heads: int = 3
    steps: int = 100
    lr: float = 0.05
    probes: int = 2
    lanczos: int = 25
    cg_tol: float = 1e-3
    cg_maxiter: int = 400
    val_every: int = 5
    patience: int = 4
    min_rel_improvement: float = 1e-3
    eval_probes: int = 8
    eval_lanczos: int = 40
    eval_cg_tol: float = 1e-5
    n_boot: int = 2000
    # factor-analysis ranks tried; the one with the best validation NLL is kept (ranks
    # >= n_train are skipped: the sample covariance has rank < n_train)
    fa_ranks: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    # the matvec-only likelihood's bar: max relative error vs the exact NLL (fixed before
    # the run)
    slq_tol: float = 0.01


QUICK = Config()
TINY = Config(  # the smoke tier: both fits with one validation and early-stopping check
    side=12,
    n_train=6,
    n_val=3,
    n_test=3,
    heads=2,
    steps=4,
    val_every=2,
    lanczos=6,
    cg_maxiter=50,
    eval_probes=2,
    eval_lanczos=8,
    n_boot=50,
    fa_ranks=(1, 2),
)
FULL = Config(side=64, steps=1000, probes=8, patience=5)


def full_work(config) -> float:
    """Crude, in single-head 625-dim matvecs (scaled by side^2 / 625): both fits' steps
    (images x probes x (Lanczos + CG iterations, taken as <= 100)), their exact
    validations (a Cholesky ~ 1.3e4 matvecs), the SLQ test scores, and ~4e6 for the two
    fits' compiles."""
    h = int(config.heads) * config.side**2 / 625
    step = config.n_train * config.probes * (config.lanczos + min(config.cg_maxiter, 100)) * h
    val = 1.3e4 * config.steps / config.val_every
    test = config.n_test * config.eval_probes * (config.eval_lanczos + 100) * h
    return float(2 * (config.steps * step + val + test) + 4e6)


def load_faces(side: int = 25) -> np.ndarray:
    """(100, side, side) float faces in [0, 1] from the scikit-image wheel's LFW subset
    (25 x 25; another `side` resamples them bilinearly)."""
    dist = importlib.metadata.distribution("scikit-image")
    matches = [f for f in dist.files or () if str(f) == "skimage/data/lfw_subset.npy"]
    if not matches:
        raise FileNotFoundError("lfw_subset.npy: not in the scikit-image wheel; pip install it")
    images = np.load(dist.locate_file(matches[0]))
    faces = np.asarray(images[:100], np.float64) / (255.0 if images.max() > 1 else 1.0)
    if side == faces.shape[1]:
        return faces
    if side < 2:
        raise ValueError(f"side: expected an image side >= 2, received {side}")
    from scipy.ndimage import zoom

    f = side / faces.shape[1]
    out = np.stack([zoom(x, f, order=1, grid_mode=True, mode="nearest") for x in faces])
    return np.clip(out[:, :side, :side], 0.0, 1.0)


def exact_nll(cov, ys) -> np.ndarray:
    """Exact per-dimension Gaussian NLL of each row of `ys` under N(0, cov) (float64)."""
    cov = np.asarray(cov, np.float64)
    ys = np.asarray(ys, np.float64)
    chol = np.linalg.cholesky(cov)
    z = np.linalg.solve(chol, ys.T)
    logdet = 2 * np.sum(np.log(np.diag(chol)))
    n = cov.shape[0]
    return 0.5 * (np.sum(z**2, 0) + logdet + n * np.log(2 * np.pi)) / n


def _factor_analysis(tr, va, ranks) -> tuple[np.ndarray, int, dict[int, float]]:
    """Low-rank-plus-diagonal covariance `W W^T + Psi` by maximum likelihood (sklearn's
    `FactorAnalysis`, deterministic LAPACK SVD) at each rank of `ranks` below the number of
    training images; returns the covariance at the rank with the best exact validation
    NLL, that rank, and every tried rank's validation NLL/dim."""
    from sklearn.decomposition import FactorAnalysis

    tried = [int(k) for k in ranks if 1 <= int(k) < len(tr)]
    if not tried:
        raise ValueError(f"fa_ranks: expected a rank in 1..{len(tr) - 1}, received {ranks}")
    covs = {k: FactorAnalysis(k, svd_method="lapack").fit(tr).get_covariance() for k in tried}
    val = {k: float(exact_nll(c, va).mean()) for k, c in covs.items()}
    best = min(val, key=val.__getitem__)
    return covs[best], best, val


def _dense_nll(inner_state, ys, *, static):
    """Mean exact NLL per dimension (jittable; the validation score)."""
    model = eqx.combine(inner_state[0], static)
    chol = jnp.linalg.cholesky(model.dense())
    z = jax.scipy.linalg.solve_triangular(chol, ys.T.astype(chol.dtype), lower=True)
    n = ys.shape[1]
    logdet = 2 * jnp.sum(jnp.log(jnp.diag(chol)))
    return jnp.mean(0.5 * (jnp.sum(z**2, 0) + logdet + n * jnp.log(2 * jnp.pi)) / n)


def _fit(model, train, val, cfg, key, desc, ctx):
    inner = laplex.GramStep(
        model,
        train,
        optimizer=optax.adam(cfg.lr),
        probes=cfg.probes,
        lanczos_steps=cfg.lanczos,
        cg_tol=cfg.cg_tol,
        cg_maxiter=cfg.cg_maxiter,
    )
    step = ValidatedStep(
        inner,
        lambda s, ys: _dense_nll(s, ys, static=inner.static),
        val,
        every=cfg.val_every,
        patience=cfg.patience,
        min_rel_improvement=cfg.min_rel_improvement,
    )
    state, hist = run_steps(
        step,
        step.init(model, key),
        key=key,
        steps=cfg.steps,
        driver=Driver(
            chunk=cfg.val_every,
            checkpointer=ctx.checkpointer(desc.replace(" ", "_")),
            progress=TqdmProgress(desc=desc),
            stop=step.stop,
        ),
    )
    val_loss = hist.aux["val_loss"][: hist.steps_done]
    log.warning(
        "%s: %d steps, best validation NLL/dim %.4f at step %d",
        desc,
        hist.steps_done,
        float(state.best_loss),
        int(state.best_step),
    )
    info = {
        "steps_run": hist.steps_done,
        "best_step": int(state.best_step),
        "val_first": float(val_loss[np.isfinite(val_loss)][0])
        if np.isfinite(val_loss).any()
        else float("nan"),
    }
    return inner.model(state.best), info


def slq_max_rel_err(slq_grid, exact_grid, slq_lap, exact_lap, axis=-1):
    """max over the two models of |mean(SLQ) - mean(exact)| / |mean(exact)| along `axis`
    (vectorised for the harness's `bootstrap`)."""
    errs = [
        np.abs(np.mean(a, axis=axis) - np.mean(b, axis=axis)) / np.abs(np.mean(b, axis=axis))
        for a, b in ((slq_grid, exact_grid), (slq_lap, exact_lap))
    ]
    return np.maximum(*errs)


def _score(model, ys, cfg, key) -> np.ndarray:
    """Matvec-only (CG + SLQ) NLL/dim of each row of `ys`; row i draws its own probes
    (`fold_in(key, i)`), so the rows' errors against the exact NLL are independent."""
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
    return np.array(
        [float(f(model, y, jax.random.fold_in(key, i))) / y.size for i, y in enumerate(ys)]
    )


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    from sklearn.covariance import LedoitWolf

    faces = load_faces(config.side)
    size = faces.shape[1]
    n_tr, n_va, n_te = config.n_train, config.n_val, config.n_test
    if n_tr + n_va + n_te > len(faces):
        raise ValueError(f"n_train + n_val + n_test: at most {len(faces)} faces, got more")
    k_split, k_grid, k_lap, k_eval, k_samp, k_boot = jax.random.split(key, 6)
    perm = np.asarray(jax.random.permutation(k_split, len(faces)))
    flat = faces.reshape(len(faces), -1)
    tr, va, te = (
        flat[perm[:n_tr]],
        flat[perm[n_tr : n_tr + n_va]],
        flat[perm[n_tr + n_va : n_tr + n_va + n_te]],
    )
    mean, scale = tr.mean(0), tr.std()
    tr, va, te = ((x - mean) / scale for x in (tr, va, te))
    ys = {"train": tr, "val": va, "test": te}
    # coordinates in the shipped faces' pixel units, so every side starts from one kernel
    coords = [jnp.arange(size, dtype=jnp.float32) * (25.0 / size)] * 2
    dtype = jnp.float32
    grid0 = laplex.LaplexGram(
        coords, config.heads, key=k_grid, decay=0.2, noise=0.1, learn_anchors=False
    )
    grid, grid_info = _fit(
        grid0, jnp.asarray(tr, dtype), jnp.asarray(va, dtype), config, k_grid, "grid model", ctx
    )
    lap0 = laplex.LaplexGram(coords, config.heads, key=k_lap, decay=0.2, noise=0.1)
    lap, lap_info = _fit(
        lap0, jnp.asarray(tr, dtype), jnp.asarray(va, dtype), config, k_lap, "laplex model", ctx
    )
    fa_cov, fa_rank, fa_val = _factor_analysis(tr, va, config.fa_ranks)
    covs = {
        "diag": np.diag(tr.var(0)),
        "fa": fa_cov,
        "grid": np.asarray(grid.dense(), np.float64),
        "laplex": np.asarray(lap.dense(), np.float64),
        "dense_lw": LedoitWolf(assume_centered=True).fit(tr).covariance_,
    }
    nll = {m: {s: exact_nll(c, y) for s, y in ys.items()} for m, c in covs.items()}
    metrics: dict[str, float] = {"dimension": size * size, "n_train": n_tr, "n_test": n_te}
    for m in covs:
        for s in ys:
            metrics[f"nll_{m}_{s}"] = float(nll[m][s].mean())
    for name, info in (("grid", grid_info), ("laplex", lap_info)):
        for k, v in info.items():
            metrics[f"{name}_{k}"] = v
    # matvec-only test NLL (CG + SLQ) against the exact one
    slq_rows = {}
    for name, model in (("grid", grid), ("laplex", lap)):
        slq_rows[name] = _score(model, jnp.asarray(te, dtype), config, k_eval)
        est = float(slq_rows[name].mean())
        metrics[f"nll_{name}_test_slq"] = est
        metrics[f"slq_rel_err_{name}"] = abs(est - metrics[f"nll_{name}_test"]) / abs(
            metrics[f"nll_{name}_test"]
        )

    boot_seed = int(jax.random.randint(k_boot, (), 0, 2**31 - 1))

    def paired(a, b):  # mean test NLL difference a - b over test images, 95% bootstrap
        return paired_bootstrap(
            nll[a]["test"], nll[b]["test"], seed=boot_seed, n_resamples=config.n_boot
        )

    d_diag = paired("laplex", "diag")
    d_grid = paired("laplex", "grid")
    d_fa = paired("laplex", "fa")
    metrics["laplex_minus_diag"] = d_diag
    metrics["laplex_minus_grid"] = d_grid
    metrics["laplex_minus_fa"] = d_fa
    metrics["fa_rank"] = fa_rank
    for k, v in fa_val.items():
        metrics[f"nll_fa_val_rank_{k}"] = v
    params = {
        "laplex": int(sum(x.size for x in jax.tree.leaves(eqx.filter(lap, eqx.is_array)))),
        "grid": 2 * config.heads + 1,
        "diag": size * size,
        "fa": size * size * (fa_rank + 1),
        "dense_lw": size * size * (size * size + 1) // 2,
    }
    for k, v in params.items():
        metrics[f"params_{k}"] = v

    def row(m):
        return f"{m} {metrics[f'nll_{m}_train']:.3f} / {metrics[f'nll_{m}_test']:.3f}"

    held = (
        f"{n_te} held-out faces (train / test NLL/dim: "
        + ", ".join(row(m) for m in ("laplex", "grid", "fa", "diag", "dense_lw"))
        + "; dense_lw: Ledoit-Wolf reference)"
    )
    # the worse model's relative error of the mean test NLL, bootstrapped over the test
    # images (each image its own probe draw, so the resampling covers the probes' noise)
    slq = bootstrap(
        (slq_rows["grid"], nll["grid"]["test"], slq_rows["laplex"], nll["laplex"]["test"]),
        slq_max_rel_err,
        seed=boot_seed,
        n_resamples=config.n_boot,
    )
    claims = [
        superior(
            d_diag,
            "LAPLEX",
            "diagonal model",
            higher_is_better=False,
            claim="LAPLEX covariance beats the diagonal model on held-out images",
            paper="preserves spatial structure",
            detail=f"test NLL/dim, paired over {held}",
        ),
        superior(
            d_grid,
            "LAPLEX",
            "fixed-grid Laplace model",
            higher_is_better=False,
            claim="LAPLEX (learned anchors, heads) beats a fixed-grid stationary Laplace model",
            paper="data-adaptive geometry",
            detail=f"same {config.heads} heads, anchors learned vs fixed, test NLL/dim; early "
            f"stopping on {n_va} validation faces kept step {lap_info['best_step']} (laplex) / "
            f"{grid_info['best_step']} (grid) of {lap_info['steps_run']} / "
            f"{grid_info['steps_run']} run",
        ),
        superior(
            d_fa,
            "LAPLEX",
            f"factor analysis (low rank + diagonal, rank {fa_rank} chosen on validation)",
            higher_is_better=False,
            claim="LAPLEX beats the low-rank-plus-diagonal (factor analysis / PPCA) covariance "
            "on held-out images",
            paper="structured Gram operators vs low-rank covariance models",
            detail=f"test NLL/dim, paired over {held}; factor-analysis ranks tried "
            f"{sorted(fa_val)} (validation NLL/dim "
            + ", ".join(f"{k}: {v:.3f}" for k, v in sorted(fa_val.items()))
            + f"), {params['fa']} parameters vs LAPLEX's {params['laplex']}; no rank matches "
            f"LAPLEX's count (rank 1 already has {2 * size * size}): the baseline has more",
        ),
        at_most(
            slq,
            config.slq_tol,
            null=f"bar {config.slq_tol:.0%} relative error",
            subject="SLQ vs exact test NLL",
            claim="matvec-only likelihood (CG + SLQ) matches the exact one",
            paper="(method)",
            detail=f"max over the grid and LAPLEX models of |mean SLQ - mean exact| / |mean "
            f"exact| test NLL/dim, percentile bootstrap over {n_te} test images, each with "
            f"its own {config.eval_probes} probes; SLQ vs exact (dense Cholesky): grid "
            f"{metrics['nll_grid_test_slq']:.4f} vs {metrics['nll_grid_test']:.4f}, laplex "
            f"{metrics['nll_laplex_test_slq']:.4f} vs {metrics['nll_laplex_test']:.4f}",
        ),
    ]
    fig, axes = plt.subplots(1, 6, figsize=(16, 3))
    axes[0].imshow(te[0].reshape(size, size), cmap="gray")
    axes[0].set_title("held-out face (centred)")
    samples = {
        "diag": np.sqrt(np.diag(covs["diag"]))
        * np.asarray(jax.random.normal(k_samp, (size * size,))),
        "grid": np.asarray(grid.sample(key=k_samp)),
        "laplex": np.asarray(lap.sample(key=k_samp)),
        "dense_lw": np.linalg.cholesky(covs["dense_lw"])
        @ np.asarray(jax.random.normal(k_samp, (size * size,)), np.float64),
    }
    for ax, (name, smp) in zip(axes[1:5], samples.items(), strict=True):
        ax.imshow(smp.reshape(size, size), cmap="gray")
        ax.set_title(f"{name} sample")
    for ax in axes[:5]:
        ax.axis("off")
    ax = axes[5]
    for h in range(config.heads):
        ax.plot(np.asarray(lap.anchors[0][h]), label=f"rows, head {h}")
        ax.plot(np.asarray(lap.anchors[1][h]), ls="--", label=f"cols, head {h}")
    ax.set_title("learned anchors")
    ax.legend(fontsize=6)
    fig.tight_layout()
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"samples": fig},
        notes=(
            "LFW subset faces from the scikit-image wheel (aligned, 25x25"
            + (f", resampled bilinearly to {size}x{size}" if size != 25 else "")
            + f"; dimension {size * size}); "
            f"{n_tr} train / {n_va} validation / {n_te} test faces (random split); "
            "NLL per dimension in nats, exact (dense Cholesky); fits by the matvec-only "
            "stochastic likelihood with early stopping on the validation NLL."
        ),
    )
