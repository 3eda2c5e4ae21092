"""P1: testable predictions for learning experiments, from the overlap theory.

1. History-dependent connectivity signatures: networks with the same behaviour
   (same loss-visible overlaps after learning task B) but different histories
   ("B only" vs "A then B") make the same behavioural change (learning task C)
   with different connectivity changes and at different speeds.
2. Savings (the paper's sense: relearning after forgetting): an A>B network made to
   forget A by learning C (same input channel, opposite gain) until its loss on A is
   back at the level of a network that never learned A (its paired B-only network)
   relearns A faster than the B-only network learns it, from the same loss level,
   because its invisible overlaps kept a trace of A.
"""

from __future__ import annotations

import dataclasses

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import Precondition, Result, RunContext, at_least, bootstrap, gated, log
from experiments.lowrank._setup import LAYOUT, channel_task, random_init, train_histories
from jaxlab import lowrank as lr

NAME = "lowrank_predictions"
PAPER = "P1"
DESCRIPTION = "Predictions: history-dependent connectivity changes and savings in relearning"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    n_nets: int = 32
    t_phase: float = 20.0
    t_probe: float = 10.0
    n_save: int = 41
    gain_a: float = 0.8
    gain_b: float = -0.6
    gain_c: float = -0.4
    recurrence_a: float = 0.2
    recurrence_b: float = 0.7
    recurrence_c: float = 0.2
    readout_overlap: float = 0.6
    init_jitter: float = 0.15
    criterion: float = 0.01
    # forgetting phase before relearning: A>B networks learn C until their loss on A reaches
    # the paired B-only network's loss on A (the common level), within `t_forget` (saved on
    # `n_forget_save` points; at t_forget = t_probe = 10, 14/32 networks had not forgotten)
    t_forget: float = 40.0
    n_forget_save: int = 801
    rtol: float = 1e-7
    n_boot: int = 2000
    # "different overlap changes": the largest gap between the mean overlap changes at
    # least this (a tolerance on overlaps of scale ~1; the paper states no number)
    signature_bar: float = 0.05
    # "savings": area under the naive learning curve / under the relearning one above this
    savings_bar: float = 1.0


QUICK = Config()
TINY = Config(
    n_nets=4, t_phase=2.0, t_probe=2.0, n_save=5, n_boot=200, t_forget=2.0, n_forget_save=11
)  # the smoke tier
FULL = Config(n_nets=256, n_save=161)


@eqx.filter_jit
def _probe(gs, task, ts, trained, rtol):
    """Train a batch of networks `gs` (B, P, P) on `task`; overlaps and losses at `ts`."""
    ctrl = diffrax.PIDController(rtol=rtol, atol=rtol * 1e-2)
    loss = lr.OverlapLoss(task, LAYOUT, lr.Linear())

    def one(g):
        traj = lr.solve_overlap_flow(loss, g, trained, ts, stepsize_controller=ctrl)
        return traj, jax.vmap(loss)(traj)

    return jax.vmap(one)(gs)


def _time_to_criterion(ts, losses, criterion):
    """First save time with loss <= criterion (the last time if never), floored at ts[1]."""
    below = losses <= criterion
    idx = np.where(below.any(axis=1), below.argmax(axis=1), len(ts) - 1)
    return np.maximum(np.asarray(ts)[idx], float(ts[1]))


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    trained = LAYOUT.trained_mask(m=False, n=True)
    with jax.enable_x64(True):
        layout = LAYOUT
        tasks = {
            k: channel_task(
                getattr(config, f"gain_{k.lower()}"),
                ch,
                config.readout_overlap,
                getattr(config, f"recurrence_{k.lower()}"),
            )
            for k, ch in (("A", 0), ("B", 1), ("C", 0))
        }
        g0 = random_init(
            jax.random.fold_in(key, 0),
            config.n_nets,
            config.init_jitter,
            0.0,
            config.readout_overlap,
        )
        ts = jnp.linspace(0.0, config.t_probe, config.n_save, dtype=jnp.float64)
        rtol = config.rtol
        g_b = train_histories(g0, [(tasks["B"], config.t_phase)], 0.0, rtol, trained)
        g_ab = train_histories(
            g0, [(tasks["A"], config.t_phase), (tasks["B"], config.t_phase)], 0.0, rtol, trained
        )
        # Prediction 1: learn C from behaviourally matched B-experts with different history.
        gs_c_b, l_c_b = _probe(g_b, tasks["C"], ts, trained, rtol)
        gs_c_ab, l_c_ab = _probe(g_ab, tasks["C"], ts, trained, rtol)
        # Prediction 2: savings. Forget A (learn C) down to a common level, then relearn A.
        gs_a_naive, l_a_naive = _probe(g_b, tasks["A"], ts, trained, rtol)
        loss_a = lr.OverlapLoss(tasks["A"], layout, lr.Linear())
        level = jax.vmap(loss_a)(g_b)  # (n,) loss on A of the paired never-A network
        ts_f = jnp.linspace(0.0, config.t_forget, config.n_forget_save, dtype=jnp.float64)
        gs_f, _ = _probe(g_ab, tasks["C"], ts_f, trained, rtol)
        la_f = jax.vmap(jax.vmap(loss_a))(gs_f)  # (n, n_forget_save) loss on A while forgetting
        reached = la_f >= level[:, None]
        idx = jnp.where(reached.any(axis=1), jnp.argmax(reached, axis=1), la_f.shape[1] - 1)
        g_forgot = gs_f[jnp.arange(gs_f.shape[0]), idx]
        forgot_ok = np.asarray(reached.any(axis=1))
        forget_time = np.asarray(ts_f)[np.asarray(idx)]
        gs_a_re, l_a_re = _probe(g_forgot, tasks["A"], ts, trained, rtol)
        loss_b = lr.OverlapLoss(tasks["B"], layout, lr.Linear())
        start_b = (float(jnp.mean(jax.vmap(loss_b)(g_b))), float(jnp.mean(jax.vmap(loss_b)(g_ab))))

    l_c_b, l_c_ab = np.asarray(l_c_b), np.asarray(l_c_ab)
    l_a_naive, l_a_re = np.asarray(l_a_naive), np.asarray(l_a_re)
    crit = config.criterion
    t_c_b = _time_to_criterion(ts, l_c_b, crit)
    t_c_ab = _time_to_criterion(ts, l_c_ab, crit)
    t_naive = _time_to_criterion(ts, l_a_naive, crit)
    t_re = _time_to_criterion(ts, l_a_re, crit)
    d_b = np.asarray(gs_c_b[:, -1] - gs_c_b[:, 0])
    d_ab = np.asarray(gs_c_ab[:, -1] - gs_c_ab[:, 0])
    names = layout.overlap_names()
    iu, ju = np.triu_indices(layout.size)
    sig_b, sig_ab = d_b.mean(0)[iu, ju], d_ab.mean(0)[iu, ju]
    boot_seed = int(jax.random.randint(ctx.key("bootstrap"), (), 0, 2**31 - 1))

    def gap(*cols, axis=-1):  # max over overlaps of |mean over networks of dG_B - dG_AB|
        return np.max(np.abs(np.stack([np.mean(c, axis=axis) for c in cols])), axis=0)

    per_net = (d_b - d_ab)[:, iu, ju]  # paired: the same initial network, two histories
    sig_gap = bootstrap(tuple(per_net.T), gap, seed=boot_seed, n_resamples=config.n_boot)
    t = np.asarray(ts)
    auc_naive, auc_re = (np.trapezoid(v, t, axis=1) for v in (l_a_naive, l_a_re))

    def ratio(a, b, axis=-1):  # = trapezoid(mean curve) / trapezoid(mean curve)
        return np.mean(a, axis=axis) / np.mean(b, axis=axis)

    savings = bootstrap((auc_naive, auc_re), ratio, seed=boot_seed, n_resamples=config.n_boot)
    forgot = Precondition(
        "A forgotten to the common level (loss on A >= the paired B-only network's) "
        "within the forgetting window",
        bool(forgot_ok.all()),
        f"{int(forgot_ok.sum())}/{forgot_ok.size} networks; learning C for "
        f"{forget_time.mean():.2f} on average; loss on A before relearning "
        f"{l_a_re[:, 0].mean():.3f} vs never-A {l_a_naive[:, 0].mean():.3f}",
    )
    metrics = {
        "start_loss_C_from_B": float(l_c_b[:, 0].mean()),
        "start_loss_C_from_AB": float(l_c_ab[:, 0].mean()),
        "time_to_criterion_C_from_B": float(t_c_b.mean()),
        "time_to_criterion_C_from_AB": float(t_c_ab.mean()),
        "connectivity_signature_gap": sig_gap,
        "time_to_criterion_A_after_B_only": float(t_naive.mean()),
        "time_to_criterion_A_relearn": float(t_re.mean()),
        "time_ratio_A": float(t_naive.mean() / t_re.mean()),
        # Area under the loss curve on A over the probe window (robust to a criterion
        # that is met immediately or never), with its bootstrap interval over networks
        "savings_ratio": savings,
        "criterion": crit,
        "start_loss_A_after_B_only": float(l_a_naive[:, 0].mean()),
        "start_loss_A_after_forgetting": float(l_a_re[:, 0].mean()),
        "forget_time_mean": float(forget_time.mean()),
        "forgotten_fraction": float(forgot_ok.mean()),
    }
    for nm, a, b in zip(names, sig_b, sig_ab, strict=True):
        metrics[f"delta_overlap_C/from_B/{nm}"] = float(a)
        metrics[f"delta_overlap_C/from_AB/{nm}"] = float(b)
    log.info("savings ratio %.2f, signature gap %.3f", savings.value, sig_gap.value)
    claims = [
        at_least(
            sig_gap,
            config.signature_bar,
            null=f"history-independent changes (gap below {config.signature_bar:g})",
            claim="same behavioural change, history-dependent connectivity change",
            paper="different overlap changes for behaviourally matched networks",
            subject="max |mean dG(B-only) - mean dG(A>B)|",
            detail=f"both B-experts (loss on B {start_b[0]:.1e} vs {start_b[1]:.1e}); time to "
            f"criterion on C {t_c_b.mean():.2f} vs {t_c_ab.mean():.2f}; bootstrap over "
            f"{config.n_nets} paired networks",
        ),
        gated(
            at_least(
                savings,
                config.savings_bar,
                null=f"no savings (ratio {config.savings_bar:g}: relearning no faster than "
                "first learning from the same loss)",
                claim="savings: a network that learned A and forgot it relearns A faster "
                "than a matched network learns it for the first time",
                paper="prediction (qualitative)",
                subject="area under the loss curve on A, first learning (B-only) / relearning "
                "(A>B, then C until A is forgotten)",
                detail=f"time to loss {crit:g}: {t_naive.mean():.2f} vs {t_re.mean():.2f} "
                f"(floored at the save step {float(ts[1]):g}); loss on A at the start "
                f"{metrics['start_loss_A_after_B_only']:.3f} (first learning) vs "
                f"{metrics['start_loss_A_after_forgetting']:.3f} (after forgetting, at least "
                f"the paired level); bootstrap over {config.n_nets} networks",
            ),
            forgot,
        ),
    ]
    fig = _figure(ts, l_c_b, l_c_ab, l_a_naive, l_a_re, names, sig_b, sig_ab)
    notes = (
        "Synthetic, linear rank-1 RNN with two input channels, n trained, overlap ODE "
        "(validated in lowrank_agreement). Tasks A, B, C: teacher-student step-response "
        "tasks (see lowrank_memory) with steady-state gains "
        f"{config.gain_a}, {config.gain_b}, {config.gain_c} and teacher recurrence m.n = "
        f"{config.recurrence_a}, {config.recurrence_b}, {config.recurrence_c} on input "
        "channels 1, 2, 1 (B's different recurrence makes learning B interfere with A); "
        f"{config.n_nets} random initial "
        "networks, each phase trained for t = "
        f"{config.t_phase:g}. 'Behaviourally matched' = both histories end on B and reach the "
        "same loss on B; their responses to C differ through loss-invisible overlaps."
    )
    return Result(metrics=metrics, claims=claims, figures={"predictions": fig}, notes=notes)


def _figure(ts, l_c_b, l_c_ab, l_a_naive, l_a_re, names, sig_b, sig_ab):
    t = np.asarray(ts)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    ax = axes[0]
    for arr, c, lab in ((l_c_b, "C0", "from B only"), (l_c_ab, "C3", "from A then B")):
        ax.plot(t, arr.mean(0), color=c, label=lab)
        ax.fill_between(t, np.percentile(arr, 10, 0), np.percentile(arr, 90, 0), color=c, alpha=0.2)
    ax.set_yscale("log")
    ax.set_xlabel("learning time on C")
    ax.set_ylabel("loss on C")
    ax.set_title("same behaviour, different learning curve")
    ax.legend()
    ax = axes[1]
    x = np.arange(len(names))
    ax.bar(x - 0.2, sig_b, 0.4, label="from B only")
    ax.bar(x + 0.2, sig_ab, 0.4, label="from A then B")
    ax.set_xticks(x, names, rotation=60, fontsize=7)
    ax.set_ylabel("mean change of overlap while learning C")
    ax.set_title("connectivity signature of the same change")
    ax.legend()
    ax = axes[2]
    for arr, c, lab in (
        (l_a_naive, "C2", "A learned after B only"),
        (l_a_re, "C1", "A relearned after A>B>C (A forgotten)"),
    ):
        ax.plot(t, arr.mean(0), color=c, label=lab)
    ax.set_yscale("log")
    ax.set_xlabel("learning time on A")
    ax.set_ylabel("loss on A")
    ax.set_title("savings")
    ax.legend()
    fig.tight_layout()
    return fig
