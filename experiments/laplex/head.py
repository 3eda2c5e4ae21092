"""P9 claim: a LAPLEX projection is compact: far fewer parameters than dense, competitive.

Task: the 8x8 handwritten digits shipped with scikit-learn (`load_digits`, 1797 images,
10 classes; no download), split at random into train / validation / test images, pixels
centred by the training mean and scaled by its overall std. A regime where a dense head
is good: the claims are gated on the dense head's mean test accuracy reaching
`dense_bar` (0.8; below it every row is untestable). The head is
`readout(tanh(P x))` with a shared dense readout (`hidden -> 10`) and the projection `P`
(`64 -> hidden`, QUICK 256, FULL 1024) one of:

- dense (`64 * hidden + hidden` weights);
- low-rank `U V` at ranks `ranks`;
- LAPLEX (`jaxlab.laplex.LaplexLinear`) with `heads`;
- random features: `P` a fixed Gaussian matrix, only the readout trained (its budget
  is the readout alone).

Same tuning budget for every head: full-batch Adam for `steps` steps at each learning
rate of `lrs` (one tuning initialisation), the rate with the best validation accuracy
(ties: lower validation cross-entropy) kept; then `inits` fresh initialisations at that
rate, scored on the test images. Init i of every head shares its readout key, so the
comparisons are paired t intervals over initialisations. The figure plots mean test
accuracy (t interval over inits) against the projection's trainable parameters.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax

from experiments._harness import (
    Precondition,
    Result,
    RunContext,
    all_of,
    best_of,
    gated,
    log,
    noninferior,
    paired_t,
    superior,
    t_mean,
)
from jaxlab import laplex, progress_bar

NAME = "laplex_head"
PAPER = "P9"
DESCRIPTION = "LAPLEX 64x256 projection vs dense, low-rank, random features on digits (lr tuned)"

N_CLASSES = 10


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    hidden: int = 256
    n_train: int = 500
    n_val: int = 300
    n_test: int = 997
    heads: tuple[int, ...] = (1, 2, 4)
    ranks: tuple[int, ...] = (1, 2, 4)
    steps: int = 100
    # the learning-rate grid every head is tuned over on the validation images
    lrs: tuple[float, ...] = (0.003, 0.01, 0.03, 0.1, 0.3)
    # initialisations per head at its chosen learning rate (t interval over them)
    inits: int = 5
    # precondition: the dense head's mean test accuracy must reach this (a regime where
    # dense is good), fixed before the run
    dense_bar: float = 0.8
    # non-inferiority margin of the best LAPLEX head vs dense (accuracy), fixed before the run
    dense_margin: float = 0.02


QUICK = Config()
TINY = Config(  # the smoke tier: every projection family, one matched budget (h = r = 1)
    hidden=16,
    n_train=60,
    n_val=20,
    n_test=20,
    heads=(1, 2),
    ranks=(1,),
    steps=3,
    lrs=(0.01, 0.03),
    inits=2,
)
FULL = Config(
    hidden=1024,
    heads=(1, 2, 4, 8, 16),
    ranks=(1, 2, 4, 8, 16, 32),
    n_train=1000,
    n_test=497,
    steps=1000,
    lrs=(0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3),
    inits=10,
)


def full_work(config) -> float:
    """FLOPs (crude): every head's full-batch steps at every learning rate and every
    initialisation (the dense one's 64 x hidden product; LAPLEX and low-rank ~ (n + m)
    per head or rank), the shared readout, and ~1e10 (a second) per fit for its compile."""
    b, n, m = config.n_train, 64, config.hidden
    models = 2 + len(config.ranks) + len(config.heads)
    fits = models * (len(config.lrs) + config.inits)
    per_step = n * m + (n + m) * (20 * sum(config.heads) + sum(config.ranks))
    per_step += models * m * N_CLASSES
    return float(6 * config.steps * b * per_step * (len(config.lrs) + config.inits) + 1e10 * fits)


class Dense(eqx.Module):
    w: jax.Array
    b: jax.Array

    def __init__(self, n, m, *, key):
        self.w = jax.random.normal(key, (m, n), jnp.float32) / float(np.sqrt(n))
        self.b = jnp.zeros((m,), jnp.float32)

    def batch(self, x):
        return x @ self.w.T + self.b[None]


class LowRank(eqx.Module):
    u: jax.Array
    v: jax.Array
    b: jax.Array

    def __init__(self, n, m, r, *, key):
        k1, k2 = jax.random.split(key)
        self.u = jax.random.normal(k1, (m, r), jnp.float32) / float(np.sqrt(r))
        self.v = jax.random.normal(k2, (r, n), jnp.float32) / float(np.sqrt(n))
        self.b = jnp.zeros((m,), jnp.float32)

    def batch(self, x):
        return (x @ self.v.T) @ self.u.T + self.b[None]


class Fixed(eqx.Module):
    """A fixed random Gaussian projection (random features; not trained)."""

    w: jax.Array

    def __init__(self, n, m, *, key):
        self.w = jax.random.normal(key, (m, n), jnp.float32) / float(np.sqrt(n))

    def batch(self, x):
        return x @ jax.lax.stop_gradient(self.w).T


class Head(eqx.Module):
    """`readout(tanh(proj x))`, batched."""

    proj: eqx.Module
    readout: Dense

    def batch(self, x):
        return self.readout.batch(jnp.tanh(self.proj.batch(x)))


def trainable(proj) -> int:
    """Trainable parameters of a projection (0 for the fixed random one)."""
    if isinstance(proj, Fixed):
        return 0
    return int(sum(x.size for x in jax.tree.leaves(eqx.filter(proj, eqx.is_array))))


def digits(config, key):
    """(x_train, y_train, x_val, y_val, x_test, y_test): scikit-learn's 8x8 digits
    (flattened, 64 dimensions), a random split of disjoint images, pixels centred by the
    training mean image and scaled by the training pixels' overall std."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = np.asarray(data.data, np.float32)
    y = np.asarray(data.target, np.int32)
    sizes = (config.n_train, config.n_val, config.n_test)
    if min(sizes) < 1 or sum(sizes) > len(x):
        raise ValueError(f"n_train, n_val, n_test: each >= 1, at most {len(x)} in all: {sizes}")
    perm = np.asarray(jax.random.permutation(key, len(x)))
    cuts = np.cumsum(sizes)
    parts = [perm[: cuts[0]], perm[cuts[0] : cuts[1]], perm[cuts[1] : cuts[2]]]
    mean = x[parts[0]].mean(0)
    scale = float((x[parts[0]] - mean).std())
    out = []
    for idx in parts:
        out += [jnp.asarray((x[idx] - mean) / scale), jnp.asarray(y[idx])]
    return tuple(out)


def _fit_score(make, m, key, lr, steps, x_tr, y_tr, evals):
    """Train one head (projection `make(kp)`, readout from `kr`) and return
    (trainable projection params, final training loss, [(accuracy, cross-entropy)] on
    each `(x, y)` of `evals`)."""
    kp, kr = jax.random.split(key)
    head = Head(make(kp), Dense(m, N_CLASSES, key=kr))
    trained, hist = laplex.fit_head(head, x_tr, y_tr, steps=steps, optimizer=optax.adam(lr))
    scores = []
    for x, y in evals:
        logits = trained.batch(x)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        scores.append((float(jnp.mean(jnp.argmax(logits, 1) == y)), float(ce)))
    return trainable(head.proj), float(hist.losses[-1]), scores


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    k_data, k_tune, k_model = jax.random.split(key, 3)
    x_tr, y_tr, x_va, y_va, x_te, y_te = digits(config, k_data)
    n, m, c = x_tr.shape[1], config.hidden, N_CLASSES
    projs = {"dense": lambda k: Dense(n, m, key=k), "random": lambda k: Fixed(n, m, key=k)}
    projs.update({f"lowrank{r}": (lambda k, r=r: LowRank(n, m, r, key=k)) for r in config.ranks})
    projs.update(
        {f"laplex{h}": (lambda k, h=h: laplex.LaplexLinear(n, m, h, key=k)) for h in config.heads}
    )
    jobs = [(name, "tune", i) for name in projs for i in range(len(config.lrs))]
    jobs += [(name, "test", i) for name in projs for i in range(config.inits)]
    bar = iter(progress_bar(jobs, desc="laplex heads (tune, then test)"))
    metrics: dict = {}
    params, lr_of, acc, loss = {}, {}, {}, {}
    for name, make in projs.items():
        # the same grid for every head, one tuning init, scored on the validation images
        val = []
        for i, lr in enumerate(config.lrs):
            next(bar)
            params[name], _, [(a, ce)] = _fit_score(
                make, m, jax.random.fold_in(k_tune, i), lr, config.steps, x_tr, y_tr,
                [(x_va, y_va)],
            )  # fmt: skip
            val.append((a, -ce))
            metrics[f"val_acc_{name}_lr{lr:g}"] = a
        best = max(range(len(config.lrs)), key=val.__getitem__)
        lr_of[name] = config.lrs[best]
        # fresh inits at the chosen rate; init i's key is shared by every head (paired)
        acc[name], loss[name] = [], []
        for i in range(config.inits):
            next(bar)
            _, tl, [(a, _)] = _fit_score(
                make, m, jax.random.fold_in(k_model, i), lr_of[name], config.steps, x_tr, y_tr,
                [(x_te, y_te)],
            )  # fmt: skip
            acc[name].append(a)
            loss[name].append(tl)
        acc[name] = np.asarray(acc[name])
        metrics[f"acc_{name}"] = t_mean(acc[name])
        metrics[f"lr_{name}"] = lr_of[name]
        metrics[f"params_{name}"] = params[name]
        metrics[f"train_loss_{name}"] = float(np.mean(loss[name]))
        log.info(
            "%s: lr %g, test acc %.4f +- %.4f over %d inits, %d projection params",
            name, lr_of[name], acc[name].mean(), acc[name].std(), config.inits, params[name],
        )  # fmt: skip
    readout = m * c + c
    metrics["params_readout"] = readout
    dense_acc = metrics["acc_dense"]

    def paired(a, b, level=0.95):  # mean test-accuracy difference a - b over inits
        return paired_t(acc[a], acc[b], level)

    def beats(a, b, baseline):
        return superior(paired(a, b), a, baseline, claim=f"{a} beats {b}", paper="-")

    matched = [(h, f"laplex{h}", f"lowrank{h}") for h in config.heads if h in config.ranks]
    diffs = {h: beats(la, lr, f"rank-{h} head") for h, la, lr in matched}
    vs_rf = {h: beats(f"laplex{h}", "random", "random features") for h in config.heads}
    for h, la, lr in matched:
        metrics[f"laplex{h}_minus_lowrank{h}"] = paired(la, lr)
    for h in config.heads:
        metrics[f"laplex{h}_minus_dense"] = paired(f"laplex{h}", "dense")
    frac = {k: params[k] / params["dense"] for k in projs if k.startswith("laplex")}
    good = Precondition(
        f"dense head is good: mean test accuracy >= {config.dense_bar:g}",
        dense_acc.value >= config.dense_bar,
        f"dense {dense_acc} (t interval over {config.inits} inits)",
    )
    tuning = (
        f"every head tuned over lr {list(config.lrs)} on {len(y_va)} validation images "
        f"(one tuning init), then {config.inits} inits at its rate; chosen: "
        + ", ".join(f"{k} {lr_of[k]:g}" for k in projs)
    )

    def vs_dense(name):
        return lambda level: noninferior(
            paired(name, "dense", level),
            name,
            "dense head",
            config.dense_margin,
            claim="LAPLEX head is competitive with a dense head",
            paper=f"within {100 * config.dense_margin:g} points of dense",
            detail=f"{name}: {params[name]} params = {frac[name]:.2%} of dense "
            f"({params['dense']}); accuracy {acc[name].mean():.3f} vs dense "
            f"{acc['dense'].mean():.3f}; paired t over {config.inits} inits; {tuning}",
        )

    per_budget = "; ".join(
        f"{params[la]} vs {params[lr]} params: {acc[la].mean():.3f} vs {acc[lr].mean():.3f}"
        for h, la, lr in matched
    )
    claims = [
        gated(
            all_of(
                {f"laplex{h} vs lowrank{h}": d for h, d in diffs.items()}
                | {f"laplex{h} vs random": d for h, d in vs_rf.items()},
                claim="LAPLEX head beats low-rank and random-feature heads at matched parameters",
                paper="compact heads (qualitative)",
                detail=f"{n} x {m} projection on digits ({c} classes, {len(y_te)} test images), "
                f"LAPLEX h heads vs rank-h: {per_budget}; random features (projection "
                f"fixed) {acc['random'].mean():.3f}; dense {acc['dense'].mean():.3f}; chance "
                f"{1 / c:.3f}; paired t over {config.inits} inits; {tuning}",
            ),
            good,
        ),
        # the best of the LAPLEX heads: Holm over the heads
        gated(best_of({f"laplex{h}": vs_dense(f"laplex{h}") for h in config.heads}), good),
    ]
    fig, ax = plt.subplots(figsize=(6, 4))
    for fam, marker in (("laplex", "o-"), ("lowrank", "s-")):
        names = [k for k in projs if k.startswith(fam)]
        est = [metrics[f"acc_{k}"] for k in names]
        ax.errorbar(
            [params[k] for k in names],
            [e.value for e in est],
            yerr=[[e.value - e.low for e in est], [e.high - e.value for e in est]],
            fmt=marker,
            capsize=3,
            label=fam,
        )
    d = metrics["acc_dense"]
    ax.errorbar(
        [params["dense"]], [d.value], yerr=[[d.value - d.low], [d.high - d.value]], fmt="k*",
        ms=12, capsize=3, label="dense",
    )  # fmt: skip
    ax.axhline(acc["random"].mean(), color="0.5", ls="--", label="random features (P fixed)")
    ax.axhline(config.dense_bar, color="g", ls="-.", lw=0.8, label="dense bar (precondition)")
    ax.axhline(1 / c, color="r", ls=":", label="chance")
    ax.set_xscale("log")
    ax.set_xlabel(f"trainable projection parameters (+ {readout} shared readout)")
    ax.set_ylabel(f"test accuracy (mean, 95% t over {config.inits} inits)")
    ax.set_title(f"{n} x {m} projection, digits, lr tuned per head")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"acc_vs_params": fig},
        notes=(
            f"scikit-learn 8x8 digits: {config.n_train} train / {config.n_val} validation / "
            f"{config.n_test} test images (random split); head readout(tanh(P x)), full-batch "
            f"Adam {config.steps} steps; {tuning}. Rows gated on dense >= {config.dense_bar:g}."
        ),
    )
