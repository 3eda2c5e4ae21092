"""Shared pipeline of the P18 topology experiments: data -> complexes -> HOPSE vs HOMP.

Both models see the same lifted complexes and features, have the same width and
depth, and are trained the same way (`topology.fit`: AdamW, one `lax.scan` per epoch);
HOPSE additionally gets the precomputed Hasse-route encodings, HOMP passes
messages along the same routes instead. Training times exclude compilation.
Checkpoints (every `ckpt_every` epochs) let `--resume` continue a run.
"""

from __future__ import annotations

import dataclasses
import math
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from experiments._harness import (
    Claim,
    Estimate,
    Precondition,
    RunContext,
    at_least,
    gated,
    log,
    noninferior,
    welch_t,
)
from jaxlab import AbstractProgress, TqdmProgress
from jaxlab import topology as tp

F32 = jnp.float32
MODELS = ("hopse", "homp")
# the wall-clock metrics of the HOPSE-vs-HOMP experiments (their modules' TIMING_METRICS)
TIMING_METRICS = ("train_time_*_s", "epoch_time_*_s", "speedup_*")


@dataclasses.dataclass(frozen=True)
class Encodings:
    """Lifting and encoding settings shared by the topology experiments (their configs
    extend it) and the topology_step benchmark."""

    lift: str = "cycle"
    max_ring: int = 8
    lappe_k: int = 4
    rwse_steps: int = 8
    heat_times: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    elstatic: bool = True
    cycle_lengths: tuple[int, ...] = (3, 4, 5, 6)


@dataclasses.dataclass(frozen=True)
class TrainConfig(Encodings):
    """Model and optimiser settings shared by the HOPSE-vs-HOMP experiments (defaults:
    their QUICK values)."""

    batch_size: int = 32
    width: int = 32
    depth: int = 2
    lr: float = 2e-3
    weight_decay: float = 1e-4


# the training work that one compile of the two models' epoch steps costs on CPU (graph
# epochs at width 32, depth 2; TINY runs are mostly compiles, FULL runs mostly epochs)
COMPILE_WORK = 15_000


def train_work(n_graphs: int, runs: int, config: TrainConfig, epochs: int) -> float:
    """The work of training HOPSE and HOMP: graphs x vmapped runs x epochs (+1: the
    compile epoch), scaled by width / 32 and depth / 2, plus the compiles (`full_work`
    of the HOPSE-vs-HOMP experiments; a crude model, calibrated on QUICK runs)."""
    scale = int(config.width) / 32 * int(config.depth) / 2
    return n_graphs * runs * (epochs + 1) * scale + COMPILE_WORK


def spec_from(config: Encodings) -> tp.EncodingSpec:
    return tp.EncodingSpec(
        lappe_k=int(config.lappe_k),
        rwse_steps=int(config.rwse_steps),
        heat_times=tuple(float(t) for t in config.heat_times),
        elstatic=bool(config.elstatic),
        cycle_lengths=tuple(int(c) for c in config.cycle_lengths),
    )


def lift_from(config: Encodings) -> tp.LiftSpec:
    return tp.LiftSpec(kind=config.lift, max_length=int(config.max_ring), max_rank=2)


def prepare(name: str, graphs, config: Encodings, sizes=None):
    t0 = time.perf_counter()
    data, cxs = tp.prepare_dataset(
        name, graphs, lift=lift_from(config), spec=spec_from(config), sizes=sizes, dtype=np.float32
    )
    log.info("%s: %d complexes prepared in %.1f s", name, len(cxs), time.perf_counter() - t0)
    return data, cxs


def build(name: str, data: tp.ComplexArrays, out_dim: int, width: int, depth: int, key):
    """`"hopse"` (joined route encoder), `"hopse_per_route"` (one encoder MLP per route, the
    earlier HOPSE of these experiments) or `"homp"`, float32."""
    fd = [x.shape[-1] for x in data.x]
    width, depth = int(width), int(depth)
    if name in ("hopse", "hopse_per_route"):
        encoder = "joined" if name == "hopse" else "per_route"
        return tp.HOPSE(
            fd,
            data.enc[0][0].shape[-1],
            out_dim,
            width=width,
            depth=depth,
            encoder=encoder,
            key=key,
            dtype=F32,
        )
    if name != "homp":
        raise ValueError(f"name: expected hopse, hopse_per_route or homp, received {name!r}")
    return tp.HOMP(fd, out_dim, width=width, depth=depth, key=key, dtype=F32)


def n_params(model) -> int:
    return int(sum(x.size for x in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))))


class _EpochTimer(AbstractProgress):
    """A tqdm bar that also records the wall time of every chunk (one epoch each)."""

    def __init__(self, desc: str):
        self.bar, self.times, self._t = TqdmProgress(desc=desc), [], 0.0

    def start(self, total, initial):
        self.bar.start(total, initial)
        self._t = time.perf_counter()

    def update(self, n, loss=None):
        now = time.perf_counter()
        self.times.append(now - self._t)
        self._t = now
        self.bar.update(n, loss)

    def close(self):
        self.bar.close()


def train(
    tag: str,
    trainer: tp.Trainer,
    model,
    data,
    targets,
    weights,
    key,
    *,
    ctx: RunContext,
    epochs: int,
    vmapped: bool = False,
    eval_data=None,
    eval_every: int = 1,
    ckpt_every: int = 10,
):
    """`tp.fit` for `epochs` epochs; returns (state, train seconds, median epoch seconds,
    history). The step is compiled (and one epoch run) before the clock starts; the
    times are those of the epochs this process ran (after a resume, the remaining ones;
    NaN when a resume found the training complete and ran none: not measured, not 0 s,
    which made topology_mutag's time ratio divide by zero).
    """
    kw = dict(key=key, vmapped=vmapped, eval_data=eval_data, eval_every=eval_every)
    t0 = time.perf_counter()
    tp.fit(trainer, model, data, targets, weights, steps=1, **kw)  # compile outside the clock
    compile_s = time.perf_counter() - t0
    timer = _EpochTimer(tag)
    state, hist = tp.fit(
        trainer,
        model,
        data,
        targets,
        weights,
        steps=epochs,
        **kw,
        checkpointer=ctx.checkpointer(tag, every=ckpt_every),
        progress=timer,
    )
    elapsed = float(np.sum(timer.times)) if timer.times else float("nan")
    log.info("%s: compile %.1f s, train %.1f s over %d epochs", tag, compile_s, elapsed, epochs)
    per_epoch = float(np.median(timer.times)) if timer.times else float("nan")
    return state, elapsed, per_epoch, hist


def predict(trainer: tp.Trainer, state, data) -> np.ndarray:
    return np.asarray(eqx.filter_jit(tp.predict)(trainer.model(state), data))


def molecule_graphs(smiles: list[str]) -> list[tp.MolGraph]:
    return [tp.smiles_to_graph(s) for s in smiles]


def regression_run(name: str, splits: dict, config, key, ctx: RunContext, *, metric: str):
    """Train HOPSE and HOMP on a train/val/test regression split; test metric at best val.

    `config.seeds` independent initialisations per model train at once (vmap);
    metrics are the mean (and std) over seeds of the test error at each seed's
    best validation evaluation. `metric`: "mae" (L1 loss) or "rmse" (MSE loss).
    Targets are standardised with the training mean/std for training; metrics are
    in the original units.
    """
    graphs = {k: molecule_graphs(v[0]) for k, v in splits.items()}
    sizes = tp.max_sizes([tp.lift_graph(g, lift_from(config)) for k in graphs for g in graphs[k]])
    data = {k: prepare(f"{name}-{k}", graphs[k], config, sizes=sizes)[0] for k in graphs}
    stats = tp.encoding_stats(data["train"])
    data = {k: tp.standardize_encodings(v, stats) for k, v in data.items()}
    y = {k: np.asarray(v[1], np.float32) for k, v in splits.items()}
    mu, sd = float(y["train"].mean()), float(y["train"].std())
    loss = "l1" if metric == "mae" else "mse"
    out: dict = {
        "mean_cells_per_graph": float(
            np.mean([sum(np.asarray(m).sum(-1).mean() for m in data["test"].mask)])
        )
    }
    histories = {}
    per_seed_test = {}
    seeds = int(config.seeds)
    n_train = len(y["train"])
    for i, model_name in enumerate(MODELS):
        mkeys = jax.random.split(jax.random.fold_in(key, i), seeds)
        models = eqx.filter_vmap(
            lambda kk, model_name=model_name: build(
                model_name, data["train"], 1, config.width, config.depth, kk
            )
        )(mkeys)
        single = build(model_name, data["train"], 1, config.width, config.depth, mkeys[0])
        trainer = tp.Trainer(
            single,
            loss=loss,
            batch_size=int(config.batch_size),
            learning_rate=float(config.lr),
            weight_decay=float(config.weight_decay),
        )
        predict_all = eqx.filter_jit(
            eqx.filter_vmap(
                lambda st, d, trainer=trainer: tp.predict(trainer.model(st), d), in_axes=(0, None)
            )
        )

        def errors(pred, split):
            err = np.asarray(pred)[..., 0] * sd + mu - y[split][None, :]  # [S, n]
            return np.mean(np.abs(err), 1) if metric == "mae" else np.sqrt(np.mean(err**2, 1))

        epochs, every = int(config.epochs), int(config.eval_every)
        state, secs, epoch_s, run = train(
            f"{name}_{model_name}",
            trainer,
            models,
            data["train"],
            jnp.asarray((y["train"] - mu) / sd),
            jnp.ones((seeds, n_train), F32),
            jax.random.fold_in(key, 100 + i),
            ctx=ctx,
            epochs=epochs,
            vmapped=True,
            eval_data={"val": data["val"], "test": data["test"]},
            eval_every=every,
        )
        hist = [
            {
                "epoch": e,
                **{s: errors(run.aux[f"pred_{s}"][e - 1], s).tolist() for s in ("val", "test")},
            }
            for e in range(every, epochs + 1, every)
        ]
        if epochs % every:  # the old loop also evaluated after the last epoch
            hist.append(
                {
                    "epoch": epochs,
                    **{s: errors(predict_all(state, data[s]), s).tolist() for s in ("val", "test")},
                }
            )
        val = np.asarray([h["val"] for h in hist])  # [evals, seeds]
        test = np.asarray([h["test"] for h in hist])
        best = np.argmin(val, axis=0)  # model selection per seed
        per_seed = test[best, np.arange(seeds)]
        per_seed_test[model_name] = per_seed
        out[f"{metric}_{model_name}"] = float(per_seed.mean())
        out[f"{metric}_{model_name}_std"] = float(per_seed.std(ddof=1)) if seeds > 1 else 0.0
        out[f"{metric}_{model_name}_val"] = float(val[best, np.arange(seeds)].mean())
        out[f"{metric}_{model_name}_final"] = float(test[-1].mean())
        out[f"train_time_{model_name}_s"] = secs
        out[f"epoch_time_{model_name}_s"] = epoch_s
        out[f"params_{model_name}"] = n_params(single)
        histories[model_name] = [
            {
                "epoch": h["epoch"],
                "val": float(np.mean(h["val"])),
                "test": float(np.mean(h["test"])),
            }
            for h in hist
        ]
        if model_name == "hopse":
            out["hopse_route_mlps"] = sum(len(e) for e in single.encoders)
            # 1: the joined route encoder, 0: one MLP per route (metrics are numbers)
            out["hopse_joined_encoder"] = int(single.encoder == "joined")
    out["seeds"] = seeds
    # HOPSE - HOMP over the seeds (independent initialisations): Welch t interval at the
    # two-sided level whose upper end is the one-sided `ni_level` bound of the claim
    out[f"{metric}_diff"] = welch_t(
        per_seed_test["hopse"], per_seed_test["homp"], level=2 * float(config.ni_level) - 1
    )
    out["speedup_epoch_vs_homp"] = out["epoch_time_homp_s"] / out["epoch_time_hopse_s"]
    return out, histories


def curves_figure(histories: dict, metric: str, title: str):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, hist in histories.items():
        ax.plot([h["epoch"] for h in hist], [h["test"] for h in hist], label=f"{name} test")
        ax.plot([h["epoch"] for h in hist], [h["val"] for h in hist], "--", label=f"{name} val")
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


def _encoder_words(metrics: dict) -> str:
    if metrics.get("hopse_joined_encoder", 0) == 1:
        return (
            "HOPSE encodes each rank with one linear map over its features and joined route "
            "encodings"
        )
    return (
        f"HOPSE has {metrics['hopse_route_mlps']} small encoder MLPs, one per rank and Hasse route"
    )


def speed_claim(
    speedup: float, *, claim: str, paper: str, subject: str, detail: str, bar: float = 1.0
) -> Claim:
    """HOPSE faster than HOMP: one run's time ratio (HOMP / HOPSE, a point value: one
    timing run on a shared machine) at least `bar`; untestable when this process timed
    no epoch (a resume that found the training complete)."""
    c = at_least(
        Estimate.point(speedup, method="one timing run"),
        bar,
        null=f"HOMP (speed-up {bar:g}x)",
        subject=subject,
        claim=claim,
        paper=paper,
        detail=detail,
        timing=True,
    )
    return gated(
        c,
        Precondition(
            "epochs timed in this process",
            math.isfinite(speedup),
            "timed"
            if math.isfinite(speedup)
            else "this run resumed after its last "
            "checkpoint and trained no epoch (run without --resume to time it)",
        ),
    )


def regression_claims(
    metrics: dict,
    *,
    metric: str,
    dataset: str,
    label: str,
    unit: str,
    paper: str,
    time_digits: int,
    margin: float,
    speed_note: str = "",
) -> list[Claim]:
    """The two claims of a HOPSE-vs-HOMP regression run: non-inferior error, faster epochs.

    `metric` is the metrics prefix ("rmse", "mae"; `metrics[f"{metric}_diff"]` the Welch
    `Estimate` of HOPSE - HOMP); `label` the claim's data-set wording; `margin` the
    non-inferiority margin (metric units, from the experiment's config, fixed before the
    run); `speed_note` explains the timing result.
    """
    m, td = metric.upper(), time_digits
    speed = metrics["speedup_epoch_vs_homp"]
    return [
        noninferior(
            metrics[f"{metric}_diff"],
            "HOPSE",
            "HOMP",
            margin,
            higher_is_better=False,
            claim=f"{label}: HOPSE test {m} non-inferior to HOMP (margin {margin:g}{unit}, "
            "fixed in the config)",
            paper=paper,
            detail=(
                f"{m} HOPSE {metrics[f'{metric}_hopse']:.3f}±"
                f"{metrics[f'{metric}_hopse_std']:.3f} vs "
                f"HOMP {metrics[f'{metric}_homp']:.3f}±{metrics[f'{metric}_homp_std']:.3f}"
                f"{unit} over {metrics['seeds']} seeds"
            ),
        ),
        speed_claim(
            speed,
            claim=f"{dataset}: HOPSE epochs are faster than HOMP epochs",
            paper="consistent speedups over HOMP, up to 7x",
            subject="HOMP / HOPSE epoch time",
            detail=(
                f"{metrics['epoch_time_hopse_s']:.{td}f} s vs "
                f"{metrics['epoch_time_homp_s']:.{td}f}"
                f" s per epoch ({metrics['mean_cells_per_graph']:.0f} cells per "
                f"complex on average; {_encoder_words(metrics)}"
                + (f": {speed_note}" if speed_note else "")
                + "; 2 shared CPU cores, timings noisy)"
            ),
        ),
    ]
