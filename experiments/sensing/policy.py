"""P4: uncertainty-gated lexicographic foraging vs exploit-only, epsilon-greedy, weighted sum.

The model is trained with the validated schedule of `sensing_maps` (cached); with
`model_per_seed` each seed trains its own (FULL), else every seed uses seed 0's (QUICK:
five 12000-step trainings do not fit in minutes on 2 CPU cores). Each seed tunes
every policy's one parameter on validation flowers (a preset grid of the same size per
policy, chosen by reward on those flowers), and evaluates the tuned policies on test
flowers disjoint from the validation ones (other keys). A moth visits each flower
`n_visits` times, `probes_per_visit` probes a visit, and keeps what it learned about the
flower (its posterior) between visits: the reward per visit is its learning curve. The
claims compare the lexicographic policy with each tuned baseline over the seeds (paired
t interval of the per-seed means, the seed's flowers shared by every policy).
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import (
    Precondition,
    Result,
    RunContext,
    all_of,
    gated,
    paired_t,
    superior,
    t_mean,
)
from experiments.sensing._setup import (
    FULL_OVERRIDES,
    UNSEEN,
    SensingConfig,
    train_seconds,
    trained_model_validated,
)
from jaxlab import sensing

NAME = "sensing_policy"
PAPER = "P4"
DESCRIPTION = "Foraging with information maps: lexicographic gate vs exploit / e-greedy / weighted"


@dataclasses.dataclass(frozen=True)
class Config(SensingConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    # the validated training schedule of sensing_maps (cosine decay from 3e-3 over 12000
    # steps, best held-out -ELBO kept); each seed trains (or reads from the cache) its own
    steps: int = 12000
    lr: float = 3e-3
    cosine: bool = True
    val_flowers: int = 256
    n_seeds: int = 5
    # each seed trains its own model (else all use seed 0's: the seeds then vary the
    # flowers, the tuning and the policies' randomness, not the training)
    model_per_seed: bool = False
    # flowers per seed: `n_tune` validation flowers choose each policy's parameter,
    # `n_eval` test flowers (and as many unseen-condition ones) score the tuned policies
    n_tune: int = 128
    n_eval: int = 256
    n_visits: int = 4
    probes_per_visit: int = 3
    grid: int = 13
    # the tuning grids: one parameter per policy, the same number of values each (exploit
    # has none); chosen by the mean reward per probe on the validation flowers. (The first
    # grids, gate 0.01-0.3, epsilon 0.05-0.4, beta 0.01-10, had every seed's choice at an
    # edge: gate 0.3, epsilon 0.05, beta 0.01 / 0.1; a gate of 1 never explores: the
    # uncertainty is at most 1, the prior's)
    gates: tuple[float, ...] = (0.1, 0.3, 0.6, 1.0)
    epsilons: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1)
    betas: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0)
    # a flower is "learned" at the first visit whose fraction of rewarded probes reaches
    # `threshold`; never within the visits counts as `n_visits + 1`
    threshold: float = 0.5
    # superiority margins: visits to the threshold (fewer is better) and reward per probe
    margin_visits: float = 0.0
    margin_reward: float = 0.01


QUICK = Config()
# the smoke tier
TINY = Config(
    n_flowers=32,
    n_probes=4,
    width=8,
    steps=100,
    val_flowers=8,
    val_every=25,
    cache=False,
    n_seeds=2,
    n_tune=4,
    n_eval=4,
    n_visits=2,
    probes_per_visit=2,
    grid=5,
    gates=(0.05, 0.3),
    epsilons=(0.1, 0.3),
    betas=(0.1, 1.0),
)
FULL = Config(
    **FULL_OVERRIDES,
    n_seeds=8,
    model_per_seed=True,
    n_tune=1024,
    n_eval=2048,
    n_visits=5,
    probes_per_visit=4,
    grid=41,
)
# Device memory FULL needs, roughly: XLA's memory analysis of one policy's compiled episodes
# (2048 flowers vmapped, a 41^2-point map every step, float32; `.lower(...).compile()
# .memory_analysis()` on the CPU backend, 2026-12-05): 74 GB of temporaries
FULL_MEMORY_GB = 74

POLICIES = ("lexicographic", "exploit", "egreedy", "weighted")
BASELINES = POLICIES[1:]


def full_work(config) -> float:
    """Rough seconds here: the compilations (~8 s a policy and flower-set size), the
    trainings (`train_seconds` a seed) and the episodes (per seed: the tuning grids on the
    validation flowers, 4 tuned policies x 2 test sets; a map over the grid a probe, ~20
    width^2 multiply-adds a point, at 1e10 a second)."""
    probes = config.n_visits * config.probes_per_visit
    runs = (1 + len(config.gates) + len(config.epsilons) + len(config.betas)) * config.n_tune
    runs += 4 * 2 * config.n_eval
    episodes = config.n_seeds * runs * probes * config.grid**2 * 20 * config.width**2
    trainings = config.n_seeds if config.model_per_seed else 1
    return 32.0 + trainings * train_seconds(config) + episodes / 1e10


def tuning_grid(config) -> dict[str, list[sensing.AbstractPolicy]]:
    """Each policy's candidates (the preset grid of its one parameter, as an array: traced
    by the compiled episodes, not compiled in)."""

    def a(x):
        return jnp.asarray(x)

    return {
        "lexicographic": [sensing.LexicographicPolicy(gate=a(g)) for g in config.gates],
        "exploit": [sensing.ExploitPolicy()],
        "egreedy": [sensing.EpsilonGreedyPolicy(epsilon=a(e)) for e in config.epsilons],
        "weighted": [sensing.WeightedPolicy(beta=a(b)) for b in config.betas],
    }


def parameter(policy) -> float:
    """The tuned parameter of a policy (NaN for exploit, which has none)."""
    for name in ("gate", "epsilon", "beta"):
        if hasattr(policy, name):
            return float(getattr(policy, name))
    return float("nan")


def visit_scores(rewards, n_visits: int, threshold: float) -> dict[str, np.ndarray]:
    """Per-flower scores of episodes `rewards` (F, n_visits * probes) split into visits:
    `rate` (F, V) the fraction of rewarded probes in each visit, `reward` (F,) the mean
    over all probes, `visits_to_threshold` (F,) the first visit (1-indexed) whose rate
    reaches `threshold` (`n_visits + 1` when none does), `first_nectar` (F,) the first
    rewarded probe (1-indexed; probes + 1 when none)."""
    r = np.asarray(rewards, dtype=np.float64)
    f, t = r.shape
    if t % n_visits:
        raise ValueError(f"rewards: {t} probes do not split into {n_visits} visits")
    rate = r.reshape(f, n_visits, t // n_visits).mean(-1)
    reached = rate >= threshold
    hit = r > 0
    return {
        "rate": rate,
        "reward": r.mean(1),
        "visits_to_threshold": np.where(reached.any(1), reached.argmax(1) + 1, n_visits + 1),
        "first_nectar": np.where(hit.any(1), hit.argmax(1) + 1, t + 1),
    }


@eqx.filter_jit
def _episodes(model, flowers, keys, policy, grid, n_probes):
    """Rewards `(F, n_probes)` of `policy` on `flowers`; the model's arrays, the policy's
    parameter (an array, `tuning_grid`) and the grid are traced (one compilation per
    policy class and flower count)."""
    return jax.vmap(
        lambda f, k: sensing.run_episode(model, f, policy, grid, n_probes, key=k).rewards
    )(flowers, keys)


def _flowers(key, n, **kw):
    return jax.vmap(lambda k: sensing.sample_flower(key=k, **kw))(jax.random.split(key, n))


def _seed(config, key, model):
    """One seed: tune every policy on validation flowers, score the tuned policies on test
    flowers (training and unseen condition)."""
    _, k_tune, k_seen, k_unseen, k_run = jax.random.split(key, 5)
    grid = sensing.action_grid(config.grid)
    probes = config.n_visits * config.probes_per_visit
    tune = _flowers(k_tune, config.n_tune)
    seen = _flowers(k_seen, config.n_eval)
    unseen = _flowers(k_unseen, config.n_eval, **UNSEEN)
    out = {}
    for name, candidates in tuning_grid(config).items():

        def run(flowers, keys, pol):
            return _episodes(model, flowers, keys, pol, grid, probes)

        keys = jax.random.split(jax.random.fold_in(k_run, 0), config.n_tune)
        val = [float(np.mean(run(tune, keys, pol))) for pol in candidates]
        i = int(np.argmax(val))  # ties: the first in the grid
        best = candidates[i]
        seen_r = run(seen, jax.random.split(jax.random.fold_in(k_run, 1), config.n_eval), best)
        unseen_r = run(unseen, jax.random.split(jax.random.fold_in(k_run, 2), config.n_eval), best)
        out[name] = {
            "param": parameter(best),
            "at_edge": len(candidates) > 1 and i in (0, len(candidates) - 1),
            "val_reward": max(val),
            "seen": visit_scores(seen_r, config.n_visits, config.threshold),
            "unseen": visit_scores(unseen_r, config.n_visits, config.threshold),
        }
    return out


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    keys = [jax.random.fold_in(key, s) for s in range(config.n_seeds)]
    # the model of seed s trains from the first of seed s's keys (seed 0's for every seed
    # without `model_per_seed`)
    trainings = config.n_seeds if config.model_per_seed else 1
    models = [
        trained_model_validated(config, jax.random.split(keys[s], 5)[0], ctx, tag=f"vae_seed{s}")
        for s in range(trainings)
    ]
    seeds = [
        _seed(config, k, models[s if config.model_per_seed else 0][0]) for s, k in enumerate(keys)
    ]

    def per_seed(name, cond, score):  # (seeds,) the mean over each seed's flowers
        return np.array([np.mean(sd[name][cond][score]) for sd in seeds])

    scores = {
        "reward": ("seen", "reward"),
        "visits_to_threshold": ("seen", "visits_to_threshold"),
        "first_nectar": ("seen", "first_nectar"),
        "unseen_reward": ("unseen", "reward"),
    }
    metrics: dict = {}
    for name in POLICIES:
        for metric, (cond, score) in scores.items():
            metrics[f"{metric}_{name}"] = t_mean(per_seed(name, cond, score))
        if name != "exploit":  # nothing to tune
            for s, sd in enumerate(seeds):
                metrics[f"tuned_param_{name}_seed{s}"] = sd[name]["param"]
            # seeds whose choice lies at an end of the grid (the grid may be too narrow)
            metrics[f"tuned_at_grid_edge_{name}"] = sum(sd[name]["at_edge"] for sd in seeds)
    for s, (*_, best_step) in enumerate(models):
        metrics[f"model_best_step_seed{s}"] = int(best_step)

    lex = "lexicographic"
    lower = ("visits_to_threshold",)
    margins = {
        "visits_to_threshold": config.margin_visits,
        "reward": config.margin_reward,
        "unseen_reward": config.margin_reward,
    }
    best_reward = max(float(metrics[f"reward_{p}"].value) for p in POLICIES)
    competent = Precondition(
        "some tuned policy finds nectar on the test flowers",
        best_reward > 0,
        f"best mean reward per probe {best_reward:.3f}",
    )

    def beats_all(metric, what):
        """lexicographic - each tuned baseline: paired t over the seeds."""
        cond, score = scores[metric]
        parts = {}
        for o in BASELINES:
            diff = paired_t(per_seed(lex, cond, score), per_seed(o, cond, score))
            metrics[f"{metric}_{lex}_minus_{o}"] = diff
            parts[f"vs {o}"] = gated(
                superior(
                    diff,
                    lex,
                    f"{o} (tuned)",
                    margins[metric],
                    claim=f"{what}: {lex} beats {o}",
                    paper="-",
                    higher_is_better=metric not in lower,
                ),
                competent,
            )
        return parts

    def best_baseline(metric):
        sign = -1 if metric in lower else 1
        o = max(BASELINES, key=lambda b: sign * metrics[f"{metric}_{b}"].value)
        return f"{o} {metrics[f'{metric}_{o}']:.3f}"

    n, v, p = config.n_eval, config.n_visits, config.probes_per_visit
    model = "its own model" if config.model_per_seed else "one model for all seeds"
    design = (
        f"paired t over {config.n_seeds} seeds ({model}; each seed: {config.n_tune} "
        f"validation flowers for tuning, {n} test flowers shared by every policy)"
    )
    claims = [
        all_of(
            beats_all("visits_to_threshold", "visits to learn a flower"),
            claim="lexicographic policy learns faster (fewer visits to a reward rate of "
            f"{config.threshold:g} per probe)",
            paper="faster than exploitation-only, e-greedy, weighted",
            detail=f"{v} visits of {p} probes to each flower, posterior kept between visits; "
            f"lexicographic {metrics['visits_to_threshold_lexicographic']:.3f} visits vs best "
            f"tuned baseline {best_baseline('visits_to_threshold')} ({v + 1} = never); "
            f"{design}",
        ),
        all_of(
            beats_all("reward", "reward per probe over all visits"),
            claim="lexicographic policy is more sample-efficient (area under the reward-per-"
            "visit curve)",
            paper="more sample-efficient",
            detail=f"mean reward per probe over {v} visits of {p} probes: lexicographic "
            f"{metrics['reward_lexicographic']:.3f} vs best tuned baseline "
            f"{best_baseline('reward')}; {design}",
        ),
        all_of(
            beats_all("unseen_reward", "reward on unseen flowers"),
            claim="lexicographic policy generalises better to unseen flowers",
            paper="better generalisation",
            detail=f"unseen flowers (ring patterns, deeper corollas, low contrast), tuned on "
            f"training-condition flowers: lexicographic "
            f"{metrics['unseen_reward_lexicographic']:.3f} vs best tuned baseline "
            f"{best_baseline('unseen_reward')}; {design}",
        ),
    ]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
    visits = np.arange(1, v + 1)
    for ax, cond in zip(axes, ("seen", "unseen"), strict=True):
        for name in POLICIES:
            curves = np.array([sd[name][cond]["rate"].mean(0) for sd in seeds])
            line = ax.plot(visits, curves.mean(0), "o-", label=name)[0]
            for c in curves:
                ax.plot(visits, c, color=line.get_color(), alpha=0.2, lw=0.8)
        ax.set_xlabel("visit")
        ax.set_title(f"{cond} flowers", fontsize=9)
    axes[0].set_ylabel("rewarded fraction of probes")
    axes[0].legend(fontsize=8)
    notes = (
        "Synthetic flowers; the model is the multimodal VAE trained on random probes (the "
        f"validated schedule of sensing_maps; {model}). The policies do not change "
        "the model: what a moth learns is its posterior over the flower, kept across its "
        f"{v} visits of {p} probes, so the reward per visit is its learning curve. "
        "Unseen flowers: ring patterns, deeper corollas (curvature 1.0-1.6), low contrast. "
        f"Tuning grids (same size per policy): gate {config.gates}, epsilon "
        f"{config.epsilons}, beta {config.betas}."
    )
    return Result(metrics=metrics, claims=claims, figures={"reward_per_visit": fig}, notes=notes)
