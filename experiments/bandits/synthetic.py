"""P16: TDGE vs LinUCB / linear TS / epsilon-greedy in worlds with known relevant dimensions.

Two regimes. The main one is a large decision space (TDGE's claim is about large spaces):
12 dimensions x 5 values = 60 one-hot features, 2000 items, T = 1000. The small world of
earlier runs (6 x 4 = 24 features, 300 items, T = 500), where LinUCB is already efficient,
is kept and reported as a regime. Every policy's exploration hyperparameter (LinUCB's,
TDGE's backbone's and neural-linear's alpha, linear TS's v, epsilon-greedy's epsilon) is
tuned on its own grid of the same size, on tuning seeds separate from the evaluation seeds
(the same budget for the method and every baseline), then run on the evaluation seeds.
Dimension identification is compared by speed: the
number of rounds after which a policy's relevance estimate ranks exactly the truly
relevant dimensions on top and keeps doing so (checked every `identify_every` rounds),
for TDGE and for LinUCB's own weights.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import Result, RunContext, all_of, log, paired_t, superior, t_mean
from jaxlab import bandits

NAME = "bandits_synthetic"
PAPER = "P16"
DESCRIPTION = "Synthetic items with known reward-relevant dimensions: regret, rounds to identify"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    n_items: int = 2000
    n_values: tuple[int, ...] = (5,) * 12
    relevant: tuple[int, ...] = (0, 3, 7)
    horizon: int = 1000
    # evaluation seeds (issue #54: >= 20, t intervals); tuning seeds are a separate stream.
    # tune_seeds x grid size = seeds: the tuning and evaluation sweeps share one program
    seeds: int = 20
    tune_seeds: int = 5
    # the small regime (reported): where LinUCB is already efficient
    small_n_items: int = 300
    small_n_values: tuple[int, ...] = (4, 4, 4, 4, 4, 4)
    small_relevant: tuple[int, ...] = (0, 2)
    small_horizon: int = 500
    noise: float = 0.5
    # tuning grids, one size for every policy (fixed before the run): log-spaced around the
    # usual defaults (alpha 1 of Li et al. 2010, v ~0.5 of Agrawal & Goyal 2013, epsilon 0.1)
    alpha_grid: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0)
    ts_v_grid: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0)
    epsilon_grid: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3)
    probe_rounds: int = 3
    identify_every: int = 5
    # superiority margins of the claims (fixed before the run; the paper gives none, 0:
    # any improvement): final cumulative regret, and rounds to identify
    regret_margin: float = 0.0
    identify_margin: float = 0.0
    # coverage of the paired t intervals over seeds
    level: float = 0.95


QUICK = Config()
# the smoke tier (both regimes, every policy)
TINY = Config(
    n_items=40,
    n_values=(3, 3, 3),
    relevant=(1,),
    horizon=40,
    seeds=4,
    tune_seeds=2,
    alpha_grid=(0.3, 1.0),
    ts_v_grid=(0.3, 1.0),
    epsilon_grid=(0.03, 0.1),
    small_n_items=30,
    small_n_values=(2, 2),
    small_relevant=(0,),
    small_horizon=20,
    identify_every=10,
)
FULL = Config(n_items=5000, horizon=5000, seeds=64, tune_seeds=16, identify_every=25)
# Device memory FULL needs, roughly: a CPU run of FULL on 2026-12-01 died allocating one
# 25.6 GB buffer (per-seed horizon x items arrays, 5000 x 5000, vmapped over 64 seeds).
FULL_MEMORY_GB = 26


def full_work(config) -> float:
    """Multiply-adds, ~1e9 a second here: the compilations (a fixed 1.8e10, TINY's ~18 s)
    plus 6 policies x (evaluation + tuning runs) x rounds x items x features^2 (LinUCB
    scores) in both regimes."""
    main = config.horizon * config.n_items * sum(config.n_values) ** 2
    small = config.small_horizon * config.small_n_items * sum(config.small_n_values) ** 2
    runs = config.seeds + config.tune_seeds * len(config.alpha_grid)
    return 1.8e10 + 6 * runs * (main + small)


# policies whose relevance estimate is read for the rounds-to-identify comparison
IDENTIFIERS = ("tdge", "tdge_gain", "linucb")


def _relevance_from_theta(theta, feature_dim, n_dims):
    fd = jnp.asarray(feature_dim, jnp.int32)
    hi = jax.ops.segment_max(theta, fd, num_segments=n_dims)
    lo = jax.ops.segment_min(theta, fd, num_segments=n_dims)
    return hi - lo


def _recovery(relevance, relevant):
    """Fraction of the truly relevant dimensions among the top-|R| by estimated relevance."""
    k = len(relevant)
    top = np.argsort(-np.asarray(relevance), axis=-1)[..., :k]
    return np.mean([[d in row for d in relevant] for row in top.reshape(-1, k)])


def _separates(relevance, relevant):
    """Whether every relevant dimension scores strictly above every other one (ties fail)."""
    rel = np.asarray(relevance)
    is_rel = np.isin(np.arange(rel.shape[-1]), np.asarray(relevant))
    return rel[..., is_rel].min(axis=-1) > rel[..., ~is_rel].max(axis=-1)


def rounds_to_identify(relevance, relevant, every: int) -> np.ndarray:
    """Rounds after which the relevant dimensions score strictly above all others for good.

    **Arguments:**

    - `relevance`: `(S, C, M)` relevance estimates of S seeds at C checkpoints, the
      c-th taken after `(c + 1) * every` rounds.
    - `relevant`: indices of the truly relevant dimensions.
    - `every`: rounds between checkpoints.

    **Returns:** `(S,)` float rounds; `inf` where the set is not identified (and kept)
    by the last checkpoint.
    """
    hit = _separates(relevance, relevant)  # (S, C)
    # kept from checkpoint c on: suffix-and over the checkpoints
    kept = np.flip(np.logical_and.accumulate(np.flip(hit, -1), axis=-1), -1)
    first = np.argmax(kept, axis=-1)
    return np.where(kept.any(axis=-1), (first + 1.0) * every, np.inf)


def _grids(config) -> dict[str, tuple[str, tuple[float, ...]]]:
    """Each policy's tuned hyperparameter (a field path) and its grid."""
    alpha = ("alpha", tuple(config.alpha_grid))
    return {
        "tdge": ("backbone.alpha", alpha[1]),
        "tdge_gain": ("backbone.alpha", alpha[1]),
        "linucb": alpha,
        "lints": ("v", tuple(config.ts_v_grid)),
        "egreedy": ("epsilon", tuple(config.epsilon_grid)),
        "neurallinear": alpha,
    }


def _with_hyper(pol, path: str, value):
    """`pol` with the hyperparameter at `path` set to `value` (may be traced)."""

    def where(p):
        for part in path.split("."):
            p = getattr(p, part)
        return p

    return eqx.tree_at(where, pol, jnp.asarray(value, jnp.zeros(()).dtype))


def _world(config, ctx, n_items, n_values, relevant, horizon, tag):
    n_chunks = horizon // config.identify_every
    if n_chunks * config.identify_every != horizon:
        raise ValueError(
            f"identify_every: expected a divisor of the horizon {horizon}, received "
            f"{config.identify_every}"
        )
    grids = _grids(config)
    sizes = {len(g) for _, g in grids.values()}
    if len(sizes) != 1:
        raise ValueError(f"*_grid: expected one grid size for every policy, received {sizes}")
    backbones = {
        "linucb": bandits.LinUCB(alpha=1.0),
        "lints": bandits.LinearTS(v=1.0),
        "egreedy": bandits.EpsilonGreedy(epsilon=0.1),
        "neurallinear": bandits.NeuralLinear(alpha=1.0),
    }
    feature_dim = tuple(i for i, v in enumerate(n_values) for _ in range(v))
    m = len(n_values)
    policies = {
        "tdge": bandits.TDGE(backbones["linucb"], feature_dim, probe_rounds=config.probe_rounds),
        # variant: the dimension level is credited with the item model's gain (relevance)
        "tdge_gain": bandits.TDGE(
            backbones["linucb"],
            feature_dim,
            probe_rounds=config.probe_rounds,
            dimension_credit="gain",
        ),
        **backbones,
    }

    def relevance(name, pol, state):
        if name.startswith("tdge"):
            return bandits.dimension_relevance(pol, state)
        if name == "linucb":
            return _relevance_from_theta(state.theta, feature_dim, m)
        return jnp.zeros(m)

    def one_seed(k, hyper, name):
        k_world, k_rew, k_pol = jax.random.split(k, 3)
        world = bandits.make_dimension_world(
            n_items, n_values, relevant, key=k_world, noise=config.noise
        )
        pol = _with_hyper(policies[name], grids[name][0], hyper)
        rewards = world.sample_rewards(horizon, key=k_rew)
        k_init, k_play = jax.random.split(k_pol)
        state0 = pol.init(world.features.shape[-1], n_items, key=k_init)

        def chunk(state, inp):
            i, r_c = inp
            tr = bandits.play(
                pol, world.features, r_c, key=jax.random.fold_in(k_play, i), state=state
            )
            tdge = name.startswith("tdge")
            dims = tr.choices.dimension if tdge else jnp.zeros_like(tr.arms)  # pyright: ignore[reportAttributeAccessIssue]
            return tr.state, (tr.arms, dims, relevance(name, pol, tr.state))

        r_chunks = rewards.reshape(n_chunks, config.identify_every, n_items)
        _, (arms, dims, rel) = jax.lax.scan(chunk, state0, (jnp.arange(n_chunks), r_chunks))
        arms, dims = arms.reshape(-1), dims.reshape(-1)
        regret = jnp.cumsum(jnp.max(world.mean_rewards) - world.mean_rewards[arms])
        return regret, rel, dims

    def keys(stream, n):
        return jnp.stack([ctx.key(f"{tag}{stream}", i) for i in range(n)])

    # tuning: every grid value on the same tuning seeds (a stream separate from evaluation)
    n_tune, n_grid = int(config.tune_seeds), len(next(iter(grids.values()))[1])
    tune_keys = jnp.concatenate([keys("tune", n_tune)] * n_grid)
    eval_keys = keys("eval", int(config.seeds))
    curves, metrics, rels, dims, tuned = {}, {}, {}, {}, {}
    for name in policies:
        path, grid = grids[name]
        log.info("bandits_synthetic (%s): tuning %s (%s in %s)", tag, name, path, grid)
        hyp = jnp.repeat(jnp.asarray(grid, jnp.zeros(()).dtype), n_tune)
        # one program for the tuning and the evaluation sweep (same batch size at QUICK)
        batched = jax.jit(jax.vmap(lambda a, name=name: one_seed(a[0], a[1], name)))
        t_regret, _, _ = batched((tune_keys, hyp))
        mean_final = np.asarray(t_regret)[:, -1].reshape(n_grid, n_tune).mean(axis=1)
        best = float(grid[int(np.argmin(mean_final))])
        tuned[name] = best
        metrics[f"{tag}tuned_{name}"] = best
        metrics[f"{tag}tuning_regret_{name}"] = float(mean_final.min())
        log.info("bandits_synthetic (%s): running %s over %d seeds", tag, name, config.seeds)
        hyp_eval = jnp.full((eval_keys.shape[0],), best, jnp.zeros(()).dtype)
        regret, rel, dims[name] = batched((eval_keys, hyp_eval))
        regret = np.asarray(regret)
        curves[name] = regret
        rels[name] = np.asarray(rel)
        metrics[f"{tag}regret_{name}"] = t_mean(regret[:, -1], config.level)
    final_regret = {name: c[:, -1] for name, c in curves.items()}
    identify = {}
    for name in IDENTIFIERS:
        metrics[f"{tag}dim_recovery_{name}"] = float(_recovery(rels[name][:, -1], relevant))
        identify[name] = rounds_to_identify(rels[name], relevant, config.identify_every)
        capped = np.minimum(identify[name], horizon)  # not identified: counted as T
        metrics[f"{tag}rounds_to_identify_{name}"] = t_mean(capped, config.level)
        metrics[f"{tag}rounds_to_identify_{name}_median"] = float(np.median(identify[name]))
        metrics[f"{tag}identified_fraction_{name}"] = float(np.isfinite(identify[name]).mean())
    for name in ("tdge", "tdge_gain"):
        late = np.asarray(dims[name])[:, horizon // 2 :]
        # how often the dimension level restricts by a truly relevant dimension (2nd half)
        metrics[f"{tag}{name}_late_relevant_dim_fraction"] = float(np.isin(late, relevant).mean())
    return metrics, curves, rels, final_regret, identify, tuned


def _regret_claim(config, metrics, final, tuned, tag, label, horizon):
    baselines = ("linucb", "lints", "egreedy")
    parts = {}
    text = (
        f"{label}: TDGE explores more efficiently than bandit baselines (lower cumulative regret)"
    )
    paper = "TDGE substantially improves exploration efficiency over baselines"
    for b in baselines:
        diff = paired_t(final["tdge"], final[b], config.level)
        metrics[f"{tag}regret_diff_tdge_minus_{b}"] = diff
        parts[b] = superior(
            diff,
            "TDGE",
            f"{b} (tuned)",
            config.regret_margin,
            higher_is_better=False,
            claim=text,
            paper=paper,
        )
    best = min(baselines, key=lambda b: metrics[f"{tag}regret_{b}"].value)
    metrics[f"{tag}regret_diff_tdge_minus_best"] = metrics[f"{tag}regret_diff_tdge_minus_{best}"]
    hyper = ", ".join(f"{n} {tuned[n]:g}" for n in ("tdge", *baselines))
    return all_of(
        parts,
        claim=text,
        paper=paper,
        detail=(
            f"final regret TDGE {metrics[f'{tag}regret_tdge']:.1f} vs {best} (best baseline) "
            f"{metrics[f'{tag}regret_{best}']:.1f} (T={horizon}, paired over {config.seeds} "
            f"evaluation seeds); tuned on {config.tune_seeds} separate seeds: {hyper}"
        ),
    )


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    del key  # every draw comes from a named stream of ctx (tuning and evaluation seeds)
    metrics, curves, rels, final, identify, tuned = _world(
        config,
        ctx,
        config.n_items,
        tuple(config.n_values),
        tuple(config.relevant),
        config.horizon,
        "",
    )
    m_small, curves_small, _, final_small, _, tuned_small = _world(
        config,
        ctx,
        config.small_n_items,
        tuple(config.small_n_values),
        tuple(config.small_relevant),
        config.small_horizon,
        "small_",
    )
    metrics.update(m_small)
    n_values, relevant = tuple(config.n_values), tuple(config.relevant)
    big = f"{len(n_values)} dims x {sum(n_values)} features, {config.n_items} items"
    small = (
        f"small world ({len(config.small_n_values)} dims x {sum(config.small_n_values)} "
        f"features, {config.small_n_items} items)"
    )

    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    for a, cs, title in ((ax[0], curves, big), (ax[1], curves_small, small)):
        for name, c in cs.items():
            t = np.arange(1, c.shape[1] + 1)
            mu, se = c.mean(0), c.std(0, ddof=1) / np.sqrt(c.shape[0])
            a.plot(t, mu, label=name)
            a.fill_between(t, mu - se, mu + se, alpha=0.2)
        a.set(xlabel="round", ylabel="cumulative regret", title=f"{title} (mean ± s.e.)")
    ax[0].legend(fontsize=7)
    every = config.identify_every
    for name in IDENTIFIERS:
        hit = _separates(rels[name], relevant).mean(0)
        ax[2].plot(every * np.arange(1, hit.size + 1), hit, label=name)
    ax[2].set(
        xlabel="round",
        ylabel="fraction of seeds with the relevant set on top",
        title="dimension identification",
    )
    ax[2].legend(fontsize=7)
    fig.tight_layout()

    d_id = paired_t(
        np.minimum(identify["tdge"], config.horizon),
        np.minimum(identify["linucb"], config.horizon),
        config.level,
    )
    metrics["rounds_to_identify_diff_tdge_minus_linucb"] = d_id
    claims = [
        _regret_claim(config, metrics, final, tuned, "", big, config.horizon),
        _regret_claim(
            config, metrics, final_small, tuned_small, "small_", small, config.small_horizon
        ),
        superior(
            d_id,
            "TDGE",
            "LinUCB's own weights (tuned alpha)",
            config.identify_margin,
            higher_is_better=False,
            claim="TDGE identifies the reward-relevant dimensions faster than LinUCB's own weights",
            paper="probes dimensions and rapidly identifies the reward-relevant ones",
            detail=(
                f"rounds until the {len(relevant)} relevant dimensions score above all others "
                f"for good (checked every {every}; not identified counts as T={config.horizon}): "
                f"TDGE {metrics['rounds_to_identify_tdge']:.0f} (identified in "
                f"{metrics['identified_fraction_tdge']:.2f} of seeds) vs LinUCB "
                f"{metrics['rounds_to_identify_linucb']:.0f} "
                f"({metrics['identified_fraction_linucb']:.2f}); paired over {config.seeds} "
                f"seeds, {big}; final top-{len(relevant)} recovery "
                f"{metrics['dim_recovery_tdge']:.2f} vs {metrics['dim_recovery_linucb']:.2f}"
            ),
        ),
    ]
    notes = (
        f"Synthetic worlds (known answer). Main: {config.n_items} items, dimensions with "
        f"{list(n_values)} values, reward = sum of value weights of dimensions {list(relevant)} "
        f"+ N(0, {config.noise}^2) noise, T={config.horizon}. Small regime: "
        f"{config.small_n_items} items, {list(config.small_n_values)} values, relevant "
        f"{list(config.small_relevant)}, T={config.small_horizon}. {config.seeds} evaluation "
        "seeds each (paired t intervals). Tuning: each policy's exploration hyperparameter "
        f"(alpha in {list(config.alpha_grid)} for LinUCB, TDGE's LinUCB backbone and "
        f"neural-linear; v in {list(config.ts_v_grid)} for linear TS; epsilon in "
        f"{list(config.epsilon_grid)}) chosen by mean final regret on {config.tune_seeds} "
        "tuning seeds (a separate key stream), per regime: main "
        + ", ".join(f"{n} {v:g}" for n, v in tuned.items())
        + "; small "
        + ", ".join(f"{n} {v:g}" for n, v in tuned_small.items())
        + f". TDGE probes each dimension {config.probe_rounds} times first. Neural-linear "
        "reported as an extra baseline (not in the claim). The regret claim holds only if "
        "TDGE beats every baseline (LinUCB, linear TS, epsilon-greedy; intersection-union). "
        "'tdge' credits the dimension level with the observed reward; 'tdge_gain' with the "
        "item model's predicted gain of the chosen feature. Rounds to identify use TDGE's "
        "item-level relevance (range of feature weights per dimension) and the same read-out "
        "of LinUCB's weights."
    )
    return Result(metrics=metrics, claims=claims, figures={"regret": fig}, notes=notes)
