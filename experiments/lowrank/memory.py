"""P1 claim: loss-invisible overlaps store training history.

Rank-1 linear RNNs with two input channels learn task A (a fixed-point map on
channel 1) and task B (one on channel 2) in different orders. Histories that end
on the same task ("B only" vs "A then B") end with the same function, hence the
same loss-visible overlaps of that task, but task A left its trace in overlaps
the last task's loss cannot see (n.I1): a linear decoder reads the history out
of the invisible overlaps, not out of the visible ones. A sweep shows when the
memory is kept and when it is lost: weight decay (relaxes invisible overlaps)
and correlated input channels (B's learning then overwrites A's trace).
"""

from __future__ import annotations

import dataclasses

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from tqdm.auto import tqdm

from experiments._harness import (
    Precondition,
    Result,
    RunContext,
    all_of,
    at_least,
    at_most,
    gated,
    log,
    paired_bootstrap,
    superior,
    wilson,
)
from experiments.lowrank._setup import LAYOUT, channel_task, random_init, train_histories
from jaxlab import lowrank as lr
from jaxlab import numpy_rng

NAME = "lowrank_memory"
PAPER = "P1"
DESCRIPTION = "Training history is decodable from loss-invisible overlaps, not from visible ones"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    n_nets: int = 32
    t_first: float = 20.0
    t_last: float = 1000.0
    gain_a: float = 0.8
    gain_b: float = -0.6
    init_jitter: float = 0.15
    readout_overlap: float = 0.6
    obs_noise: float = 0.02
    # read-out noise levels (s.d.) swept to find where the visible overlaps reach chance
    noise_levels: tuple[float, ...] = (0.0, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05)
    # "at chance": decoding accuracy <= this (chance 0.5; ~2.4 binomial s.d. at 64 nets)
    chance_band: float = 0.65
    # "decodable": the paper-level target accuracy of the invisible-overlap decoder
    decodable_bar: float = 0.95
    # "memory lost": accuracy drops by more than this under weight decay / input overlap
    # (fixed before the run; the old rule's 0.2)
    lost_margin: float = 0.2
    n_boot: int = 2000
    weight_decays: tuple[float, ...] = (0.0, 0.001, 0.003, 0.01)
    input_correlations: tuple[float, ...] = (0.0, 0.99, 0.999)
    rtol: float = 1e-7
    # issue #54: both histories are compared at one depth of training: the last phase stops
    # at the first of `n_stop_save` log-spaced times (up to t_last) where the last task's
    # loss is <= `loss_tol` (before: a fixed t_last left B at 1.8e-7 and A>B at 8.9e-10);
    # 1e-6 is reached by every network of both histories well before t_last at QUICK
    loss_tol: float = 1e-6
    n_stop_save: int = 400


QUICK = Config()
TINY = Config(
    n_nets=8,
    t_first=2.0,
    t_last=4.0,
    weight_decays=(0.0, 0.1),
    input_correlations=(0.0, 0.9),
    n_boot=200,
    loss_tol=1e-2,
    n_stop_save=20,
)  # the smoke tier
FULL = Config(
    n_nets=512,
    weight_decays=(0.0, 0.0003, 0.001, 0.002, 0.003, 0.01),
    input_correlations=(0.0, 0.5, 0.9, 0.99, 0.995, 0.999, 0.9999),
)


def decode_correct(
    features: np.ndarray,
    labels: np.ndarray,
    *,
    rng: np.random.Generator,
    ridge: float = 1e-3,
    folds: int = 4,
) -> np.ndarray:
    """Per item: is its cross-validated prediction by a ridge-regression linear classifier
    (binary labels) right? `rng` draws the fold assignment. **Returns:** `(n,)` bool."""
    order = rng.permutation(len(labels))
    parts = np.array_split(order, folds)
    correct = np.zeros(len(labels), bool)
    for k in range(folds):
        test = parts[k]
        train = np.concatenate([parts[j] for j in range(folds) if j != k])
        mu = features[train].mean(0)
        sd = features[train].std(0)
        keep = sd > 1e-9 * (1.0 + np.abs(mu))
        if not np.any(keep):
            correct[test] = labels[test] == np.bincount(labels[train]).argmax()
            continue
        x_tr = (features[train][:, keep] - mu[keep]) / sd[keep]
        x_te = (features[test][:, keep] - mu[keep]) / sd[keep]
        x_tr = np.concatenate([x_tr, np.ones((len(train), 1))], 1)
        x_te = np.concatenate([x_te, np.ones((len(test), 1))], 1)
        y = 2.0 * labels[train] - 1.0
        w = np.linalg.solve(x_tr.T @ x_tr + ridge * len(train) * np.eye(x_tr.shape[1]), x_tr.T @ y)
        correct[test] = (x_te @ w > 0).astype(int) == labels[test]
    return correct


def _features(gs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    iu, ju = np.triu_indices(gs.shape[-1])
    sel = mask[iu, ju]
    return gs[:, iu[sel], ju[sel]]


@eqx.filter_jit
def _last_phase(gs, task, weight_decay, trained, ts, rtol, tol):
    ctrl = diffrax.PIDController(rtol=rtol, atol=rtol * 1e-2)
    loss = lr.OverlapLoss(task, LAYOUT, lr.Linear(), weight_decay=weight_decay)
    task_loss = lr.OverlapLoss(task, LAYOUT, lr.Linear())

    def one(g):
        traj = lr.solve_overlap_flow(loss, g, trained, ts, stepsize_controller=ctrl)
        lt = jax.vmap(task_loss)(traj)
        below = lt <= tol
        i = jnp.where(below.any(), jnp.argmax(below), ts.shape[0] - 1)
        return traj[i], below.any(), lt[i], ts[i]

    return jax.vmap(one)(gs)


def _train_to_tolerance(g0, phases, weight_decay, config, trained):
    """Every phase but the last for its duration; the last until the last task's loss
    (without the decay term) first reaches `config.loss_tol` on a log-spaced grid up to its
    duration (else its end). **Returns:** overlaps, reached, loss and time at the stop."""
    head, (task, duration) = phases[:-1], phases[-1]
    g = train_histories(g0, head, weight_decay, config.rtol, trained) if head else g0
    ts = jnp.concatenate(
        [
            jnp.zeros(1, jnp.float64),
            jnp.geomspace(1e-2, float(duration), config.n_stop_save - 1, dtype=jnp.float64),
        ]
    )
    return _last_phase(
        g,
        task,
        jnp.asarray(weight_decay, jnp.float64),
        trained,
        ts,
        config.rtol,
        jnp.asarray(config.loss_tol, jnp.float64),
    )


def _condition(g0, config, weight_decay, tasks, visible, trained, pairs, key):
    t1, t2 = config.t_first, config.t_last
    phases = {
        "B": [(tasks["B"], t2)],
        "A>B": [(tasks["A"], t1), (tasks["B"], t2)],
        "A": [(tasks["A"], t2)],
        "B>A": [(tasks["B"], t1), (tasks["A"], t2)],
    }
    needed = sorted({h for pair in pairs for h in pair})
    finals, stop = {}, {}
    for h in needed:
        g, reached, loss_at, t_at = _train_to_tolerance(
            g0, phases[h], weight_decay, config, trained
        )
        finals[h] = np.asarray(g)
        stop[h] = (np.asarray(reached), np.asarray(loss_at), np.asarray(t_at))
    rng = numpy_rng(key)  # read-out noise and CV folds (the run's "readout" stream)
    acc, correct = {}, {}
    levels = sorted({0.0, float(config.obs_noise), *map(float, config.noise_levels)})
    for kind in ("invisible", "visible"):
        for noise in levels:
            accs, items = [], []
            for pair in pairs:
                vis = np.asarray(visible[pair[0][-1]])
                mask = ~vis if kind == "invisible" else vis
                x = np.concatenate([_features(finals[p], mask) for p in pair])
                x = x + noise * rng.standard_normal(x.shape)
                y = np.repeat(np.arange(2), len(g0))
                items.append(decode_correct(x, y, rng=rng))
                accs.append(float(items[-1].mean()))
            acc[f"{kind}@{noise:g}"] = float(np.mean(accs))
            correct[f"{kind}@{noise:g}"] = items  # per pair: (2 n_nets,) bool
        acc[kind] = acc[f"{kind}@{float(config.obs_noise):g}"]
        acc[f"{kind}_noiseless"] = acc[f"{kind}@0"]
        correct[kind] = correct[f"{kind}@{float(config.obs_noise):g}"]
        correct[f"{kind}_noiseless"] = correct[f"{kind}@0"]
    losses = {
        h: float(
            np.mean(
                jax.vmap(lr.OverlapLoss(tasks[h[-1]], LAYOUT, lr.Linear()))(jnp.asarray(finals[h]))
            )
        )
        for h in needed
    }
    return acc, correct, losses, finals, stop


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    trained = LAYOUT.trained_mask(m=False, n=True)
    with jax.enable_x64(True):
        tasks = {
            "A": channel_task(config.gain_a, 0, config.readout_overlap),
            "B": channel_task(config.gain_b, 1, config.readout_overlap),
        }
        samples = lr.random_overlaps(LAYOUT, 8, key=jax.random.fold_in(key, 7), dtype=jnp.float64)
        visible = {
            k: lr.classify_overlaps(lr.OverlapLoss(t, LAYOUT, lr.Linear()), samples)
            for k, t in tasks.items()
        }
        k_init = jax.random.fold_in(key, 0)
        grid = [("wd", wd) for wd in config.weight_decays]
        grid += [("rho", r) for r in config.input_correlations if r != 0.0]
        table, items = {}, {}
        finals0, stop0 = None, {}
        for ci, (kind, val) in enumerate(tqdm(grid, desc="lowrank_memory conditions")):
            wd, rho = (val, 0.0) if kind == "wd" else (0.0, val)
            g0 = random_init(k_init, config.n_nets, config.init_jitter, rho, config.readout_overlap)
            pairs = [("B", "A>B"), ("A", "B>A")] if (kind, val) == ("wd", 0.0) else [("B", "A>B")]
            acc, correct, losses, finals, stop = _condition(
                g0, config, wd, tasks, visible, trained, pairs, ctx.key("readout", ci)
            )
            table[(kind, val)] = (acc, losses)
            items[(kind, val)] = correct
            if kind == "wd" and val == 0.0:
                finals0, stop0 = finals, stop
            log.info(
                "%s=%g: acc invisible %.3f visible %.3f",
                kind,
                val,
                acc["invisible"],
                acc["visible"],
            )

    acc0, losses0 = table[("wd", 0.0)]
    levels = sorted({0.0, float(config.obs_noise), *map(float, config.noise_levels)})
    at_chance = [lv for lv in levels if acc0[f"visible@{lv:g}"] <= config.chance_band]
    chance_noise = at_chance[0] if at_chance else float("nan")
    metrics = {
        "history_decode_acc_invisible": acc0["invisible"],
        "history_decode_acc_visible": acc0["visible"],
        "obs_noise": config.obs_noise,
        "chance": 0.5,
        "visible_chance_noise": chance_noise,
        "invisible_acc_at_visible_chance_noise": (
            acc0[f"invisible@{chance_noise:g}"] if at_chance else float("nan")
        ),
        **{f"final_loss_{h}": v for h, v in losses0.items()},
    }
    for (kind, val), (acc, _) in table.items():
        for name, v in acc.items():
            metrics[f"sweep/{kind}{val:g}/acc_{name}"] = v

    def proportion(correct):  # accuracy over every item of every pair, Wilson interval
        c = np.concatenate(correct)
        return wilson(int(c.sum()), int(c.size))

    inv, vis = (
        proportion(items[("wd", 0.0)]["invisible_noiseless"]),
        proportion(items[("wd", 0.0)]["visible_noiseless"]),
    )
    metrics["history_decode_acc_invisible_noiseless"] = inv
    metrics["history_decode_acc_visible_noiseless"] = vis
    boot_seed = int(jax.random.randint(ctx.key("bootstrap"), (), 0, 2**31 - 1))
    base = items[("wd", 0.0)]["invisible"][0].astype(float)  # the (B, A>B) pair
    lost = {}
    wd_max = config.weight_decays[-1]
    rho_max = config.input_correlations[-1]
    conditions = [("wd", wd_max, f"weight decay {wd_max:g}")]
    if rho_max != 0.0:
        conditions.append(("rho", rho_max, f"input overlap I1.I2 = {rho_max:g}"))
    for kind, val, label in conditions:
        cond = items[(kind, val)]["invisible"][0].astype(float)
        diff = paired_bootstrap(cond, base, seed=boot_seed, n_resamples=config.n_boot)
        metrics[f"memory_loss_{kind}"] = diff
        lost[label] = superior(
            diff,
            label,
            "no weight decay, orthogonal inputs (same initial networks)",
            config.lost_margin,
            higher_is_better=False,
            claim=f"memory is lost under {label}",
            paper="conditions under which memory is lost",
        )
    acc_wd = table[("wd", wd_max)][0]["invisible"]
    acc_rho = table[("rho", rho_max)][0]["invisible"] if rho_max != 0.0 else float("nan")
    for h, (reached, _, t_at) in stop0.items():
        metrics[f"stop_time_{h}"] = float(np.mean(t_at))
        metrics[f"stop_reached_{h}"] = float(np.mean(reached))
    all_reached = all(bool(np.all(r)) for r, _, _ in stop0.values())
    depth = Precondition(
        f"every network of every history trained to the common loss tolerance "
        f"{config.loss_tol:g} on its last task",
        all_reached,
        "; ".join(
            f"{h}: {int(np.sum(r))}/{r.size} reached, stopped at t = {np.mean(t):.1f} with "
            f"loss {np.mean(lv):.1e}"
            for h, (r, lv, t) in stop0.items()
        ),
    )
    claims = [
        gated(
            at_least(
                inv,
                config.decodable_bar,
                null=f"the target accuracy {config.decodable_bar:g} (chance 0.5)",
                claim="invisible overlaps encode training history (linear decoder)",
                paper="decodable (target >= 0.95)",
                detail=f"noiseless; {acc0['invisible']:.3f} with read-out noise "
                f"{config.obs_noise:g}; "
                f"{config.n_nets} nets per history, 4-fold CV; losses at the stop B "
                f"{losses0['B']:.1e}, A>B {losses0['A>B']:.1e} (tolerance {config.loss_tol:g})",
            ),
            depth,
        ),
        gated(
            at_most(
                vis,
                config.chance_band,
                null=f"the chance band {config.chance_band:g} (chance 0.5)",
                claim="visible overlaps do not encode training history",
                paper="~chance",
                detail="noiseless (as the invisible row), both histories at one loss "
                "tolerance: the visible overlaps converge to the same point only as "
                "t -> inf, and their residual carries the history; they reach chance (<= "
                f"{config.chance_band:g}) only with read-out noise s.d. >= {chance_noise:g} "
                f"(swept {', '.join(f'{lv:g}' for lv in levels)}), where the invisible ones "
                f"still give {metrics['invisible_acc_at_visible_chance_noise']:.3f}",
            ),
            depth,
        ),
        all_of(
            lost,
            claim="memory is lost under weight decay or overlapping input channels",
            paper="conditions under which memory is lost",
            detail=f"invisible-overlap accuracy (read-out noise {config.obs_noise:g}, the "
            f"(B, A>B) pair): {acc_wd:.3f} at weight decay {wd_max:g}; {acc_rho:.3f} at "
            f"I1.I2 = {rho_max:g}; vs {base.mean():.3f} without; paired bootstrap over "
            f"{base.size} networks x histories",
        ),
    ]
    notes = (
        "Synthetic, linear rank-1 RNN with two input channels; n trained (m, I1, I2, w "
        f"fixed, m.w = {config.readout_overlap}). Task A / B: reproduce a linear rank-1 "
        f"teacher's responses to input steps and pulses on channel 1 / 2 (steady-state gains "
        f"{config.gain_a} / {config.gain_b}). Histories are compared pairwise "
        "among those ending on the same task: {B only vs A then B} and {A only vs B then A}, "
        "same initial networks in both; visible/invisible is relative to the last task's loss "
        "(loss-sensitivity classifier). Accuracies: mean over the two pairs (sweep: the B "
        "pair), 4-fold cross-validated ridge classifier on standardised overlaps read out "
        f"with Gaussian noise of s.d. {config.obs_noise:g} (overlaps estimated from ~2500 "
        "recorded neurons); noiseless accuracies are reported too: without noise any "
        "residual of the slow convergence of the visible overlaps is decodable. Training "
        "by the overlap ODE (validated against full GD in lowrank_agreement). Weight decay "
        "lambda adds lambda/2 sum |v|^2/N. With m trained too, the m<->n rescaling "
        "symmetry leaves a gauge direction in the visible overlaps that can also carry "
        "history."
    )
    fig = _figure(config, table, finals0, visible["B"])
    return Result(metrics=metrics, claims=claims, figures={"memory": fig}, notes=notes)


def _figure(config, table, finals, visible_b):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, kind, key_name, label in (
        (axes[0], "wd", "weight_decays", "weight decay"),
        (axes[1], "rho", "input_correlations", "I1.I2"),
    ):
        vals = [v for v in getattr(config, key_name) if (kind, v) in table or v == 0.0]
        accs = [table[(kind, v) if (kind, v) in table else ("wd", 0.0)][0] for v in vals]
        xs = np.arange(len(vals))
        ax.plot(xs, [a["invisible"] for a in accs], "o-", label="from invisible overlaps")
        ax.plot(xs, [a["visible"] for a in accs], "s--", label="from visible overlaps")
        ax.set_xticks(xs, [f"{v:g}" for v in vals])
        ax.axhline(0.5, color="k", lw=0.5)
        ax.set_ylim(0.3, 1.05)
        ax.set_xlabel(label)
        ax.set_ylabel("history decoding accuracy")
        ax.legend(fontsize=8)
    ax = axes[2]
    names = LAYOUT.overlap_names()
    index = {nm: (i, j) for nm, i, j in zip(names, *np.triu_indices(LAYOUT.size), strict=True)}
    (i1, j1), (i2, j2) = index["n1.I1"], index["m1.n1"]
    for h, c in (("B", "C0"), ("A>B", "C3")):
        ax.scatter(finals[h][:, i2, j2], finals[h][:, i1, j1], s=8, color=c, label=h)
    ax.set_xlabel("m.n (visible to B)")
    ax.set_ylabel("n.I1 (invisible to B)")
    ax.set_title("after learning B: same function, different history")
    ax.legend()
    fig.tight_layout()
    return fig
