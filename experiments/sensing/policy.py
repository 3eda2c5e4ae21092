"""P4: uncertainty-gated lexicographic foraging vs exploit-only, epsilon-greedy, weighted sum."""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import Result, RunContext, all_of, paired_bootstrap, superior
from experiments.sensing._setup import (
    FULL_OVERRIDES,
    UNSEEN,
    SensingConfig,
    train_seconds,
    trained_model,
)
from jaxlab import sensing

NAME = "sensing_policy"
PAPER = "P4"
DESCRIPTION = "Foraging with information maps: lexicographic gate vs exploit / e-greedy / weighted"


@dataclasses.dataclass(frozen=True)
class Config(SensingConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    n_eval: int = 64
    n_steps: int = 12
    grid: int = 17
    gate: float = 0.05
    epsilon: float = 0.2
    beta: float = 0.05
    # bootstrap resamples of the paired per-flower differences (lexicographic - baseline)
    n_boot: int = 2000


QUICK = Config()
# the smoke tier
TINY = Config(n_flowers=32, n_probes=4, width=8, steps=100, n_eval=4, n_steps=3, grid=5, n_boot=200)
FULL = Config(**FULL_OVERRIDES, n_eval=2048, n_steps=20, grid=41)
# Device memory FULL needs, roughly: XLA's memory analysis of one policy's compiled episodes
# (2048 flowers vmapped, a 41^2-point map every step, float32; `.lower(...).compile()
# .memory_analysis()` on the CPU backend, 2026-12-05): 74 GB of temporaries
FULL_MEMORY_GB = 74


def full_work(config) -> float:
    """Rough seconds here: the compilations (~8 s, most of TINY's ~10 s), the training
    (`train_seconds`) and the episodes (4 policies x 2 flower sets x steps, a map over the
    grid a step, ~20 width^2 multiply-adds a point, at 1e10 a second)."""
    episodes = 4 * 2 * config.n_eval * config.n_steps * config.grid**2 * 20 * config.width**2
    return 8.0 + train_seconds(config) + episodes / 1e10


def _policies(config):
    return {
        "lexicographic": sensing.LexicographicPolicy(gate=config.gate),
        "exploit": sensing.ExploitPolicy(),
        "egreedy": sensing.EpsilonGreedyPolicy(epsilon=config.epsilon),
        "weighted": sensing.WeightedPolicy(beta=config.beta),
    }


def _episodes(model, policy, grid, n_steps):
    """The compiled episodes of one policy over a batch of flowers `(flowers, keys)`."""
    return jax.jit(
        jax.vmap(lambda f, k: sensing.run_episode(model, f, policy, grid, n_steps, key=k))
    )


def _evaluate(run, flowers, n_steps, key):
    n = flowers.curvature.shape[0]
    ep = run(flowers, jax.random.split(key, n))
    hit = np.asarray(ep.rewards) > 0
    first = np.where(hit.any(1), hit.argmax(1) + 1, n_steps + 1)  # 1-indexed; T+1 = never
    found = np.arange(1, n_steps + 1)[None, :] >= first[:, None]  # (flowers, steps)
    found_by = found.mean(0)
    return {
        "steps_to_nectar": float(first.mean()),
        "reward_auc": float(found_by.mean()),
        "success": float(hit.any(1).mean()),
        "curve": found_by,
        "uncertainty": np.asarray(ep.uncertainty).mean(0),
        # per flower (the paired comparisons: every policy meets the same flowers and keys)
        "per_flower": {
            "steps_to_nectar": first.astype(np.float64),
            "reward_auc": found.mean(1),
            "success": hit.any(1).astype(np.float64),
        },
    }


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    k_train, k_seen, k_unseen, k_run = jax.random.split(key, 4)
    model, _ = trained_model(config, k_train, ctx)
    grid = sensing.action_grid(config.grid)
    n = config.n_eval
    seen = jax.vmap(lambda k: sensing.sample_flower(key=k))(jax.random.split(k_seen, n))
    unseen = jax.vmap(lambda k: sensing.sample_flower(key=k, **UNSEEN))(
        jax.random.split(k_unseen, n)
    )
    metrics, curves, per_flower = {}, {}, {}
    for name, pol in _policies(config).items():
        run_pol = _episodes(model, pol, grid, config.n_steps)  # one compile: seen and unseen
        r = _evaluate(run_pol, seen, config.n_steps, k_run)
        u = _evaluate(run_pol, unseen, config.n_steps, jax.random.fold_in(k_run, 1))
        metrics[f"steps_to_nectar_{name}"] = r["steps_to_nectar"]
        metrics[f"reward_auc_{name}"] = r["reward_auc"]
        metrics[f"success_{name}"] = r["success"]
        metrics[f"unseen_success_{name}"] = u["success"]
        curves[name] = r["curve"]
        per_flower[name] = {
            "steps_to_nectar": r["per_flower"]["steps_to_nectar"],
            "reward_auc": r["per_flower"]["reward_auc"],
            "unseen_success": u["per_flower"]["success"],
        }
    others = ("exploit", "egreedy", "weighted")
    lex = "lexicographic"
    lower = ("steps_to_nectar",)  # fewer probes is better
    best_other = {
        k: max(others, key=lambda o: metrics[f"{k}_{o}"] * (1 if k not in lower else -1))
        for k in ("steps_to_nectar", "reward_auc", "unseen_success")
    }
    boot_seed = int(jax.random.randint(ctx.key("bootstrap"), (), 0, 2**31 - 1))

    def beats_all(metric, what):
        """lexicographic - each baseline: paired bootstrap over the flowers."""
        parts = {}
        for o in others:
            diff = paired_bootstrap(
                per_flower[lex][metric],
                per_flower[o][metric],
                seed=boot_seed,
                n_resamples=config.n_boot,
            )
            metrics[f"{metric}_{lex}_minus_{o}"] = diff
            parts[f"vs {o}"] = superior(
                diff,
                lex,
                o,
                claim=f"{what}: {lex} beats {o}",
                paper="-",
                higher_is_better=metric not in lower,
            )
        return parts

    flowers = f"paired percentile bootstrap over {n} flowers (every policy meets the same ones)"
    claims = [
        all_of(
            beats_all("steps_to_nectar", "probes to first nectar"),
            claim="lexicographic policy learns faster (fewer probes to first nectar)",
            paper="faster than exploitation-only, e-greedy, weighted",
            detail=f"{metrics['steps_to_nectar_lexicographic']:.2f} vs best baseline "
            f"{best_other['steps_to_nectar']} "
            f"{metrics['steps_to_nectar_' + best_other['steps_to_nectar']]:.2f}; {flowers}",
        ),
        all_of(
            beats_all("reward_auc", "area under the success curve"),
            claim="lexicographic policy is more sample-efficient (area under the success curve)",
            paper="more sample-efficient",
            detail=f"AUC {metrics['reward_auc_lexicographic']:.3f} vs best baseline "
            f"{best_other['reward_auc']} {metrics['reward_auc_' + best_other['reward_auc']]:.3f}"
            f"; {flowers}",
        ),
        all_of(
            beats_all("unseen_success", "success on unseen flowers"),
            claim="lexicographic policy generalises better to unseen flowers",
            paper="better generalisation",
            detail=f"unseen success {metrics['unseen_success_lexicographic']:.2f} vs best "
            f"baseline {best_other['unseen_success']} "
            f"{metrics['unseen_success_' + best_other['unseen_success']]:.2f}; {flowers}",
        ),
    ]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    t = np.arange(1, config.n_steps + 1)
    for name, c in curves.items():
        ax.plot(t, c, label=name)
    ax.set_xlabel("probe")
    ax.set_ylabel("fraction of flowers with nectar found")
    ax.legend()
    notes = (
        "Synthetic flowers; the model is the multimodal VAE trained on random probes. "
        "Unseen flowers: ring patterns, deeper corollas (curvature 1.0-1.6), low contrast. "
        f"{n} flowers per condition, {config.n_steps} probes per visit."
    )
    return Result(metrics=metrics, claims=claims, figures={"success_curve": fig}, notes=notes)
