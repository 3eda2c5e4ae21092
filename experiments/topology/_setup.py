"""Shared pipeline of the P18 topology experiments: data -> complexes -> HOPSE vs HOMP.

Both models see the same lifted complexes and features, have the same width and
depth, and are trained the same way (`topology.fit`: AdamW, one `lax.scan` per epoch);
HOPSE additionally gets the precomputed Hasse-route encodings, HOMP passes
messages along the same routes instead. Training times exclude compilation.
Checkpoints (every `ckpt_every` epochs) let `--resume` continue a run.
"""

from __future__ import annotations

import dataclasses
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from experiments._harness import (
    Claim,
    RunContext,
    at_least,
    bootstrap,
    interleaved_times,
    log,
    noninferior,
    paired_t,
)
from jaxlab import AbstractProgress, Driver, TqdmProgress
from jaxlab import topology as tp

F32 = jnp.float32
MODELS = ("hopse", "homp")
# the wall-clock metrics of the HOPSE-vs-HOMP experiments (their modules' TIMING_METRICS)
TIMING_METRICS = (
    "train_time_*_s",
    "epoch_time_*_s",
    "speedup_*",
    "step_time_*_s",
    "step_speedup*",
)


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
    # the speed claim, fixed before the run: HOMP / HOPSE time of one training step,
    # `speed_rounds` interleaved timings (one step of each model per round), median ratio
    # with a percentile-bootstrap interval over the rounds; "faster" holds if the interval
    # lies at or above 1 + speed_margin (one-sided at speed_level)
    speed_rounds: int = 15
    speed_margin: float = 0.1
    speed_level: float = 0.95


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


def compiled_flops(compiled) -> float:
    """XLA's cost-analysis FLOPs of a compiled executable (`jit(f).lower(...).compile()`)."""
    cost = compiled.cost_analysis()
    if isinstance(cost, list):  # older jax: one dict per computation
        cost = cost[0]
    return float(cost["flops"])


def step_speed(
    data: tp.ComplexArrays, targets, out_dim: int, loss: str, config: TrainConfig, key
) -> dict:
    """HOMP / HOPSE time of one training step (forward, backward and AdamW update over a
    batch of the first `batch_size` complexes of `data`), both compiled before the clock.

    The two steps are timed in `config.speed_rounds` interleaved rounds (one step of each
    per round: both see the same drifts of the shared machine), after 2 warm-up calls
    each; the per-round ratios are bootstrapped (percentile, the median) at the two-sided
    level `2 * speed_level - 1` (its lower end the claim's one-sided bound). XLA's
    cost-analysis FLOPs of the same two executables give the machine-independent ratio.

    **Returns:** `step_speedup` (the `Estimate`), `step_time_<model>_s` (median seconds),
    `flops_step_<model>`, `flop_ratio_homp_over_hopse`, `speed_rounds`.
    """
    rounds = int(config.speed_rounds)
    if rounds < 5:
        raise ValueError(
            f"config.speed_rounds: expected >= 5 interleaved rounds, received {rounds}"
        )
    g = int(data.x[0].shape[0])
    b = min(int(config.batch_size), g)
    batch = jax.tree_util.tree_map(lambda a: a[:b], data)
    y, w = jnp.asarray(targets)[:b], jnp.ones((b,), F32)
    fns, out = {}, {}
    for i, name in enumerate(MODELS):
        model = build(name, data, out_dim, config.width, config.depth, jax.random.fold_in(key, i))
        trainer = tp.Trainer(
            model,
            loss=loss,
            batch_size=b,
            learning_rate=float(config.lr),
            weight_decay=float(config.weight_decay),
        )
        state = trainer.init(model)
        compiled = jax.jit(trainer.epoch).lower(state, batch, y, w, key).compile()
        out[f"flops_step_{name}"] = compiled_flops(compiled)
        fns[name] = lambda c=compiled, st=state: c(st, batch, y, w, key)
    times = interleaved_times(fns, warmup=2, repeats=rounds)
    ratios = np.asarray(times["homp"]) / np.asarray(times["hopse"])
    for name in MODELS:
        out[f"step_time_{name}_s"] = float(np.median(times[name]))
    out["flop_ratio_homp_over_hopse"] = out["flops_step_homp"] / out["flops_step_hopse"]
    out["step_speedup"] = bootstrap(
        ratios, np.median, seed=0, level=2 * float(config.speed_level) - 1
    )
    out["speed_rounds"] = rounds
    out["step_batch"] = b
    log.info(
        "step: HOPSE %.4f s, HOMP %.4f s (median of %d interleaved rounds); FLOP ratio %.2f",
        out["step_time_hopse_s"],
        out["step_time_homp_s"],
        rounds,
        out["flop_ratio_homp_over_hopse"],
    )
    return out


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
        driver=Driver(
            chunk=1, checkpointer=ctx.checkpointer(tag, every=ckpt_every), progress=timer
        ),
    )
    elapsed = float(np.sum(timer.times)) if timer.times else float("nan")
    log.info("%s: compile %.1f s, train %.1f s over %d epochs", tag, compile_s, elapsed, epochs)
    per_epoch = float(np.median(timer.times)) if timer.times else float("nan")
    return state, elapsed, per_epoch, hist


def predict(trainer: tp.Trainer, state, data) -> np.ndarray:
    return np.asarray(eqx.filter_jit(tp.predict)(trainer.model(state), data))


def molecule_graphs(smiles: list[str]) -> list[tp.MolGraph]:
    return [tp.smiles_to_graph(s) for s in smiles]


def random_splits(n: int, sizes: tuple[int, int, int], count: int, seed: int) -> np.ndarray:
    """`count` random train/val/test partitions of `n` items: `(count, n)` ids 0/1/2
    (the first `sizes[0]` of each permutation train, the next `sizes[1]` val, the next
    `sizes[2]` test; items beyond them, if any, -1: unused)."""
    n_tr, n_va, n_te = (int(v) for v in sizes)
    if min(n_tr, n_va, n_te) < 1 or n_tr + n_va + n_te > n:
        raise ValueError(f"sizes: expected three positive sizes summing to <= {n}, got {sizes}")
    rng = np.random.default_rng(seed)
    part = np.full((int(count), n), -1, np.int64)
    for s in range(int(count)):
        perm = rng.permutation(n)
        part[s, perm[:n_tr]] = 0
        part[s, perm[n_tr : n_tr + n_va]] = 1
        part[s, perm[n_tr + n_va : n_tr + n_va + n_te]] = 2
    return part


def regression_run(
    name: str, smiles: list[str], targets, sizes, config, key, ctx: RunContext, *, metric: str
):
    """Train HOPSE and HOMP on `config.splits` random train/val/test splits of a pool of
    molecules; test metric at each split's best validation evaluation.

    All splits train at once (vmap over splits: each split's training molecules weighted 1
    in the loss, the others 0; each split and model its own initialisation). Targets are
    standardised with each split's training mean/std; metrics are in the original units.
    The non-inferiority estimate is the paired t interval over the splits (HOPSE and
    HOMP see the same split).
    `metric`: "mae" (L1 loss) or "rmse" (MSE loss). `sizes`: (n_train, n_val, n_test).
    """
    graphs = molecule_graphs(list(smiles))
    data, _ = prepare(name, graphs, config)
    # encoding statistics over the whole pool: unsupervised, label-free preprocessing
    data = tp.standardize_encodings(data, tp.encoding_stats(data))
    y = np.asarray(targets, np.float64)
    n, S = len(y), int(config.splits)
    part = random_splits(n, sizes, S, seed=int(jax.random.randint(key, (), 0, 2**31 - 1)))
    train_mask = part == 0
    mu = np.array([y[m].mean() for m in train_mask])[:, None]
    sd = np.array([y[m].std() for m in train_mask])[:, None]
    loss = "l1" if metric == "mae" else "mse"
    out: dict = {
        "mean_cells_per_graph": float(sum(np.asarray(m).sum(-1).mean() for m in data.mask)),
        "n_pool": n,
        "n_train": int(sizes[0]),
        "n_val": int(sizes[1]),
        "n_test": int(sizes[2]),
    }
    histories = {}
    per_split_test = {}
    epochs, every = int(config.epochs), int(config.eval_every)

    def errors(pred, split):  # pred [S, n]: the split's error on its own val/test items
        err = np.asarray(pred, np.float64) * sd + mu - y[None, :]
        m = part == split
        if metric == "mae":
            return np.array([np.abs(err[s][m[s]]).mean() for s in range(S)])
        return np.array([np.sqrt((err[s][m[s]] ** 2).mean()) for s in range(S)])

    for i, model_name in enumerate(MODELS):
        mkeys = jax.random.split(jax.random.fold_in(key, i), S)
        models = eqx.filter_vmap(
            lambda kk, model_name=model_name: build(
                model_name, data, 1, config.width, config.depth, kk
            )
        )(mkeys)
        single = build(model_name, data, 1, config.width, config.depth, mkeys[0])
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
        state, secs, epoch_s, run = train(
            f"{name}_{model_name}",
            trainer,
            models,
            data,
            jnp.asarray((y[None, :] - mu) / sd, F32),
            jnp.asarray(train_mask, F32),
            jax.random.fold_in(key, 100 + i),
            ctx=ctx,
            epochs=epochs,
            vmapped=True,
            eval_data={"pool": data},
            eval_every=every,
        )
        preds = [
            (e, np.asarray(run.aux["pred_pool"][e - 1])[..., 0])
            for e in range(every, epochs + 1, every)
        ]
        if epochs % every:  # also evaluate after the last epoch
            preds.append((epochs, np.asarray(predict_all(state, data))[..., 0]))
        hist = [{"epoch": e, "val": errors(p, 1), "test": errors(p, 2)} for e, p in preds]
        val = np.asarray([h["val"] for h in hist])  # [evals, splits]
        test = np.asarray([h["test"] for h in hist])
        best = np.argmin(val, axis=0)  # model selection per split
        per_split = test[best, np.arange(S)]
        per_split_test[model_name] = per_split
        out[f"{metric}_{model_name}"] = float(per_split.mean())
        out[f"{metric}_{model_name}_std"] = float(per_split.std(ddof=1)) if S > 1 else 0.0
        out[f"{metric}_{model_name}_val"] = float(val[best, np.arange(S)].mean())
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
    out["splits"] = S
    # HOPSE - HOMP paired over the splits: t interval at the two-sided level whose upper
    # end is the one-sided `ni_level` bound of the claim
    out[f"{metric}_diff"] = paired_t(
        per_split_test["hopse"], per_split_test["homp"], level=2 * float(config.ni_level) - 1
    )
    # descriptive: the epoch-time ratio of the two (sequential, not interleaved) trainings
    out["speedup_epoch_vs_homp"] = out["epoch_time_homp_s"] / out["epoch_time_hopse_s"]
    first = np.flatnonzero(train_mask[0])  # the speed batch: split 0's training molecules
    sub = jax.tree_util.tree_map(lambda a: a[first], data)
    out |= step_speed(sub, ((y - mu[0]) / sd[0])[first], 1, loss, config, key)
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
    metrics: dict, config: TrainConfig, *, claim: str, paper: str, detail: str = ""
) -> Claim:
    """HOPSE's training step faster than HOMP's: the median HOMP / HOPSE time ratio of
    `step_speed`'s interleaved rounds (bootstrap interval over the rounds) at least
    `1 + config.speed_margin` (preset); XLA's FLOP ratio of the same steps in the detail."""
    m = float(config.speed_margin)
    return at_least(
        metrics["step_speedup"],
        1.0 + m,
        null=f"HOMP as fast (time ratio 1; bar 1 + margin {m:g}, fixed in the config)",
        subject="HOMP / HOPSE training-step time",
        claim=claim,
        paper=paper,
        detail=(
            f"step {metrics['step_time_hopse_s'] * 1e3:.2f} ms vs "
            f"{metrics['step_time_homp_s'] * 1e3:.2f} ms (medians of "
            f"{metrics['speed_rounds']} interleaved rounds, batch {metrics['step_batch']}); "
            f"XLA FLOP ratio HOMP / HOPSE {metrics['flop_ratio_homp_over_hopse']:.2f}"
            + (f"; {detail}" if detail else "")
        ),
        timing=True,
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
    config: TrainConfig,
    speed_note: str = "",
) -> list[Claim]:
    """The two claims of a HOPSE-vs-HOMP regression run: non-inferior error, faster epochs.

    `metric` is the metrics prefix ("rmse", "mae"; `metrics[f"{metric}_diff"]` the paired
    t `Estimate` of HOPSE - HOMP over the splits); `label` the claim's data-set wording;
    `margin` the non-inferiority margin (metric units, from the experiment's config,
    fixed before the run); `config` the run's config (the speed claim's preset margin); `speed_note`
    explains the timing result.
    """
    m, td = metric.upper(), time_digits
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
                f"{unit} over {metrics['splits']} random train/val/test splits (paired)"
            ),
        ),
        speed_claim(
            metrics,
            config,
            claim=f"{dataset}: HOPSE training steps are faster than HOMP's",
            paper="consistent speedups over HOMP, up to 7x",
            detail=(
                f"whole epochs (sequential, descriptive) {metrics['epoch_time_hopse_s']:.{td}f} s "
                f"vs {metrics['epoch_time_homp_s']:.{td}f} s; "
                f"{metrics['mean_cells_per_graph']:.0f} cells per complex on average; "
                f"{_encoder_words(metrics)}" + (f"; {speed_note}" if speed_note else "")
            ),
        ),
    ]
