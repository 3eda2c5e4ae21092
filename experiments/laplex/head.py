"""P9 claim: a LAPLEX projection is compact: far fewer parameters than dense, competitive.

A large projection (`side^2 x hidden`, QUICK 1024 x 1024) on flattened image crops:
each input is a `side x side` grayscale crop (standardised per crop) of one of eight
photographs and textures shipped in the scikit-image wheel, the label says which one
(training crops from the left 60% of each image, test crops from the rest: no shared
pixels). The head is `readout(tanh(P x))` with a shared dense readout
(`hidden -> 8`) and the projection `P` one of:

- dense (`side^2 * hidden` weights);
- low-rank `U V` at ranks `ranks`;
- LAPLEX (`jaxlab.laplex.LaplexLinear`) with `heads`;
- random features: `P` a fixed Gaussian matrix, only the readout trained (its budget
  is the readout alone).

Same optimiser, steps and readout for all. The figure plots test accuracy against the
projection's trainable parameters; claims compare at matched budgets with paired
bootstrap intervals over test crops.
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
from PIL import Image

from experiments._harness import (
    Result,
    RunContext,
    all_of,
    best_of,
    log,
    noninferior,
    paired_bootstrap,
    superior,
)
from jaxlab import laplex, progress_bar

NAME = "laplex_head"
PAPER = "P9"
DESCRIPTION = "LAPLEX 1024x1024 projection vs dense, low-rank, random features: acc vs params"

IMAGES = (
    "brick.png",
    "grass.png",
    "gravel.png",
    "camera.png",
    "moon.png",
    "astronaut.png",
    "coffee.png",
    "hubble_deep_field.jpg",
)


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    side: int = 32
    hidden: int = 1024
    train_per_class: int = 75
    test_per_class: int = 50
    heads: tuple[int, ...] = (1, 2, 4)
    ranks: tuple[int, ...] = (1, 2, 4)
    steps: int = 200
    lr: float = 0.01
    n_boot: int = 2000
    # non-inferiority margin of the best LAPLEX head vs dense (accuracy), fixed before the run
    dense_margin: float = 0.02


QUICK = Config()
TINY = Config(  # the smoke tier: every projection family, one matched budget (h = r = 1)
    side=8,
    hidden=16,
    train_per_class=3,
    test_per_class=2,
    heads=(1, 2),
    ranks=(1,),
    steps=3,
    n_boot=50,
)
FULL = Config(
    heads=(1, 2, 4, 8, 16),
    ranks=(1, 2, 4, 8, 16, 64),
    steps=1000,
    train_per_class=400,
    test_per_class=200,
)


def full_work(config) -> float:
    """FLOPs (crude): every projection's full-batch steps (the dense one's side^2 x hidden
    product dominates; LAPLEX and low-rank ~ (n + m) per head or rank), the shared
    readout, and ~1e10 (a second) per projection for its compile."""
    b, n, m = len(IMAGES) * config.train_per_class, config.side**2, config.hidden
    models = 2 + len(config.ranks) + len(config.heads)
    per_step = n * m + (n + m) * (20 * sum(config.heads) + sum(config.ranks))
    per_step += models * m * len(IMAGES)
    return float(6 * config.steps * b * per_step + 1e10 * models)


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


def _image(name):
    dist = importlib.metadata.distribution("scikit-image")
    matches = [f for f in dist.files or () if str(f) == f"skimage/data/{name}"]
    if not matches:
        raise FileNotFoundError(f"{name}: not in the scikit-image wheel; pip install it")
    return np.asarray(Image.open(dist.locate_file(matches[0])).convert("L"), np.float32)


def crops(config, key):
    """(x_train, y_train, x_test, y_test): standardised flattened crops; training crops
    lie in the left 60% of each image's columns, test crops in the right 40%."""
    s = config.side
    xs = {"train": [], "test": []}
    ys = {"train": [], "test": []}
    for c, name in enumerate(IMAGES):
        img = _image(name)
        h, w = img.shape
        split = int(0.6 * w)
        for part, n, (lo, hi) in (
            ("train", config.train_per_class, (0, split - s)),
            ("test", config.test_per_class, (split, w - s)),
        ):
            k = jax.random.fold_in(key, 2 * c + (part == "test"))
            r = np.asarray(jax.random.randint(k, (n,), 0, h - s))
            q = np.asarray(jax.random.randint(jax.random.fold_in(k, 1), (n,), lo, hi + 1))
            patch = np.stack([img[a : a + s, b : b + s].ravel() for a, b in zip(r, q, strict=True)])
            patch = (patch - patch.mean(1, keepdims=True)) / (patch.std(1, keepdims=True) + 1e-3)
            xs[part].append(patch)
            ys[part].append(np.full(n, c, np.int32))
    return tuple(jnp.asarray(np.concatenate(d[p])) for p in ("train", "test") for d in (xs, ys))


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    k_data, k_model, k_boot = jax.random.split(key, 3)
    x_tr, y_tr, x_te, y_te = crops(config, k_data)
    n, m, c = config.side**2, config.hidden, len(IMAGES)
    projs = {"dense": lambda k: Dense(n, m, key=k), "random": lambda k: Fixed(n, m, key=k)}
    projs.update({f"lowrank{r}": (lambda k, r=r: LowRank(n, m, r, key=k)) for r in config.ranks})
    projs.update(
        {f"laplex{h}": (lambda k, h=h: laplex.LaplexLinear(n, m, h, key=k)) for h in config.heads}
    )
    correct, params, metrics = {}, {}, {}
    for i, (name, make) in enumerate(progress_bar(list(projs.items()), desc="laplex heads")):
        kp, kr = jax.random.split(jax.random.fold_in(k_model, i))
        head = Head(make(kp), Dense(m, c, key=kr))
        trained, hist = laplex.fit_head(
            head, x_tr, y_tr, steps=config.steps, optimizer=optax.adam(config.lr)
        )
        pred = jnp.argmax(trained.batch(x_te), axis=1)
        correct[name] = np.asarray(pred == y_te, np.float32)
        params[name] = trainable(head.proj)
        metrics[f"acc_{name}"] = float(correct[name].mean())
        metrics[f"params_{name}"] = params[name]
        metrics[f"train_loss_{name}"] = float(hist.losses[-1])
        log.info(
            "%s: test acc %.4f, %d projection params", name, correct[name].mean(), params[name]
        )
    readout = m * c + c
    metrics["params_readout"] = readout

    boot_seed = int(jax.random.randint(k_boot, (), 0, 2**31 - 1))

    def paired(a, b, level=0.95):  # accuracy difference a - b over test crops
        return paired_bootstrap(
            correct[a], correct[b], seed=boot_seed, level=level, n_resamples=config.n_boot
        )

    def beats(a, b, baseline):
        return superior(paired(a, b), a, baseline, claim=f"{a} beats {b}", paper="-")

    matched = [(h, f"laplex{h}", f"lowrank{h}") for h in config.heads if h in config.ranks]
    diffs = {h: beats(la, lr, f"rank-{h} head") for h, la, lr in matched}
    vs_rf = {h: beats(f"laplex{h}", "random", "random features") for h in config.heads}
    for h, claim in diffs.items():
        metrics[f"laplex{h}_minus_lowrank{h}"] = claim.estimate
    frac = {k: params[k] / params["dense"] for k in projs if k.startswith("laplex")}

    def vs_dense(name):
        return lambda level: noninferior(
            paired(name, "dense", level),
            name,
            "dense head",
            config.dense_margin,
            claim="LAPLEX head is competitive with a dense head",
            paper=f"within {100 * config.dense_margin:g} points of dense",
            detail=f"{name}: {params[name]} params = {frac[name]:.2%} of dense "
            f"({params['dense']}); accuracy {metrics[f'acc_{name}']:.3f} vs dense "
            f"{metrics['acc_dense']:.3f}",
        )

    overfit = sum(metrics[f"train_loss_{k}"] < 0.05 for k in projs)
    per_budget = "; ".join(
        f"{params[la]} vs {params[lr]} params: {metrics[f'acc_{la}']:.3f} vs "
        f"{metrics[f'acc_{lr}']:.3f}"
        for h, la, lr in matched
    )
    claims = [
        all_of(
            {f"laplex{h} vs lowrank{h}": d for h, d in diffs.items()}
            | {f"laplex{h} vs random": d for h, d in vs_rf.items()},
            claim="LAPLEX head beats low-rank and random-feature heads at matched parameters",
            paper="compact heads (qualitative)",
            detail=f"{n} x {m} projection on image crops ({len(IMAGES)} classes, {len(y_te)} "
            f"test crops), LAPLEX h heads vs rank-h: {per_budget}; random features "
            f"(projection fixed) {metrics['acc_random']:.3f}; chance {1 / c:.3f}; {overfit} of "
            f"{len(projs)} heads fit the training crops (loss < 0.05): a low-accuracy, "
            "overfitting regime, one split and one init; paired bootstrap over test crops",
        ),
        # the best of the LAPLEX heads (by test accuracy): Holm over the heads
        best_of({f"laplex{h}": vs_dense(f"laplex{h}") for h in config.heads}, level=0.95),
    ]
    fig, ax = plt.subplots(figsize=(6, 4))
    for fam, marker in (("laplex", "o-"), ("lowrank", "s-")):
        names = [k for k in projs if k.startswith(fam)]
        ax.plot([params[k] for k in names], [metrics[f"acc_{k}"] for k in names], marker, label=fam)
    ax.plot([params["dense"]], [metrics["acc_dense"]], "k*", ms=12, label="dense")
    ax.axhline(metrics["acc_random"], color="0.5", ls="--", label="random features (P fixed)")
    ax.axhline(1 / c, color="r", ls=":", label="chance")
    ax.set_xscale("log")
    ax.set_xlabel(f"trainable projection parameters (+ {readout} shared readout)")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"{n} x {m} projection, image-crop classification")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"acc_vs_params": fig},
        notes=(
            f"{config.side}x{config.side} standardised crops of {len(IMAGES)} scikit-image "
            f"photographs/textures ({config.train_per_class} train / {config.test_per_class} "
            "test per image, disjoint column ranges); head readout(tanh(P x)), full-batch Adam "
            f"{config.steps} steps, lr {config.lr}; one split, one init per projection."
        ),
    )
