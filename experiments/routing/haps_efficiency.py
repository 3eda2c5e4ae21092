"""P19 HAPS efficiency: time per query, generated parameters per query, training cost.

On the `routing_haps_main` data (see there), per held-out query, jitted and timed after
warm-up (medians of `repeats` passes over the test queries, one query per call):

- routing only: the MLP router's decision plus the chosen plain model's top blocks on the
  cached prefix (the answer pass without an adapter);
- static LoRA: the top blocks of one model with a fixed adapter;
- HAPS: router + trunk + generation of the chosen model's LoRA + its adapted top blocks;
- for scale: the chosen top blocks run over the whole prompt instead of the cached prefix.

Also the generated parameters per query (the chosen architecture's A and B entries) against
that model's size, and the training time per step of HAPS vs the static LoRA vs the
routing-only router. Claim (a timing claim: its value varies between runs): HAPS's time per
query is within `max_overhead` x the routing-only pass (both on the cached prefix), the
paper's "efficient at inference" against a bar preset here. The generated fraction of the
chosen model's parameters (< 1%: the paper's "lightweight") is arithmetic on the
configuration (rank x adapted matrices / model size), not a measurement with sampling error:
it is reported as a property (metrics `generated_fraction_of_model_mean`, and the notes),
not as a claim. Timings on a 2-core machine shared with other agents: ratios within one run
are what to read.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import (
    Estimate,
    Result,
    RunContext,
    at_most,
    bootstrap,
    interleaved_times,
    log,
)
from experiments.routing import _haps
from jaxlab import lm, routing

NAME = "routing_haps_efficiency"
PAPER = "P19"
DESCRIPTION = "HAPS cost: time per query and generated parameters vs routing-only / static LoRA"


@dataclasses.dataclass(frozen=True)
class Config(_haps.HAPSConfig):
    """Settings of one run; the defaults are QUICK."""

    # only timed: a short fit per method (QUICK: 10 steps, was 40, for the shared machine;
    # the per-step time includes the fit's compilation, see the notes)
    steps: int = 10
    n_timed: int = 30  # held-out queries timed
    # interleaved timing rounds (>= 5: the claim's interval bootstraps them), each one pass
    # over the timed queries per method and architecture
    repeats: int = 5
    # the claim reads the upper end of the two-sided 2 * timing_level - 1 percentile
    # bootstrap interval of the median per-round ratio HAPS / routing-only
    timing_level: float = 0.95
    #: the time-per-query ratio HAPS / routing-only the efficiency claim allows (our bar for
    #: "efficient at inference": the paper gives no number)
    max_overhead: float = 2.0


QUICK = Config()
TINY = Config(**_haps.HAPS_TINY, n_timed=4, repeats=5)  # the smoke tier
FULL = Config(**{**_haps.HAPS_FULL, "steps": 100}, n_timed=200)


def _median_time(fn, args_list, repeats):
    for a in args_list[:2]:
        jax.block_until_ready(fn(*a))  # compile + warm-up
    best = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for a in args_list:
            jax.block_until_ready(fn(*a))
        best.append((time.perf_counter() - t0) / len(args_list))
    return float(np.median(best))


def full_work(config: Config) -> float:
    """`_haps.haps_work`: parameters x (prefix items + fit steps x batch x blocks)."""
    return _haps.haps_work(config)


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    del ctx
    k_split, k_fit, k_static, k_mlp = jax.random.split(key, 4)
    data = _haps.haps_data(config)
    names = _haps.data_names(data)
    train, test = _haps.haps_split(data, config, k_split)
    test = test[: config.n_timed]
    table = _haps.plain_table(data)
    haps, h_hist, h_secs = _haps.train_haps(data, config, data.features, train, k_fit)
    zeros = np.zeros((len(data.items), 1), np.float32)
    static, _, s_secs = _haps.train_haps(
        data, config, zeros, train, k_static, explore=1.0, route_weight=0.0, reward_weight=0.0
    )
    t0 = time.perf_counter()
    mlp = routing.MLPRouter.fit(table.rows(train), key=k_mlp, steps=config.steps)
    r_secs = time.perf_counter() - t0
    opts = jnp.arange(4, dtype=jnp.int32)

    def one(i, j):
        return jax.tree_util.tree_map(lambda a: a[i], data.inputs[j])

    @eqx.filter_jit
    def routing_only(router, x, inp, upper):
        j = jnp.argmax(router.predict_quality(x[None])[0])
        return j, routing.adapted_option_logits(upper, inp, None, opts)

    @eqx.filter_jit
    def static_pass(static, x, inp, upper, j):
        return routing.adapted_option_logits(upper, inp, static.lora(x, j), opts)

    @eqx.filter_jit
    def haps_pass(haps, x, inp, upper, j):
        route = haps.route(x)
        return route, routing.adapted_option_logits(upper, inp, haps.lora(x, j), opts)

    @eqx.filter_jit
    def whole_prompt(upper, resid):
        pos = jnp.arange(resid.shape[0], dtype=jnp.int32)
        h = upper.run_blocks(resid, pos, lm.KVCache.empty(upper.config, resid.shape[0]))[0]
        return upper.token_logits(h[-1], opts)

    x = jnp.asarray(data.features)
    choice = np.asarray(jax.vmap(haps.route)(x[jnp.asarray(test)]))
    metrics: dict[str, float | Estimate] = {"n_timed": len(test)}
    kinds = ("routing_only", "static_lora", "haps")
    # one pass over the queries HAPS routes to architecture j (a jitted pass specialises on
    # the model), per method; all timed in interleaved rounds
    passes: dict[str, Callable[[], list]] = {}
    z = jnp.zeros(1, jnp.float32)
    for j in range(len(names)):
        sel = test[choice == j]
        if sel.size == 0:
            continue
        u = data.uppers[j]
        args = [(x[i], one(i, j)) for i in sel]  # sliced before the clock
        passes[f"routing_only/{j}"] = lambda a=args, u=u: [
            jax.block_until_ready(routing_only(mlp, xi, inp, u)) for xi, inp in a
        ]
        passes[f"static_lora/{j}"] = lambda a=args, u=u, j=j: [
            jax.block_until_ready(static_pass(static, z, inp, u, j)) for _, inp in a
        ]
        passes[f"haps/{j}"] = lambda a=args, u=u, j=j: [
            jax.block_until_ready(haps_pass(haps, xi, inp, u, j)) for xi, inp in a
        ]
    rounds = int(config.repeats)
    if rounds < 5:
        raise ValueError(f"config.repeats: expected >= 5 interleaved rounds, received {rounds}")
    raw = interleaved_times(passes, warmup=1, repeats=rounds)
    # seconds per query in each round: the passes over every architecture's queries (each
    # architecture weighted by HAPS's routing share) / the timed queries
    per_round = {
        kind: sum(np.asarray(v) for n, v in raw.items() if n.startswith(f"{kind}/")) / len(test)
        for kind in kinds
    }
    spq = {kind: float(np.median(per_round[kind])) for kind in kinds}  # seconds per query
    # the cache's saving: the same top blocks over the whole prompt (the residual recomputed)
    pre = _haps.prefix_residuals(names[0], [data.items[i] for i in test], top=config.cached_top)
    if config.top == config.cached_top:
        spq["top_blocks_whole_prompt_" + names[0]] = _median_time(
            lambda r: whole_prompt(data.uppers[0], r),
            [(jnp.asarray(r),) for r in pre["resid"][:10]],
            config.repeats,
        )
    metrics.update({f"seconds_per_query/{k}": v for k, v in spq.items()})
    n_gen = np.array([g.n_generated for g in haps.generators])
    n_params = np.array([lm.MODELS[n].n_params for n in names])
    metrics["generated_params_per_query_mean"] = float(n_gen[choice].mean())
    metrics["generated_fraction_of_model_mean"] = float((n_gen / n_params)[choice].mean())
    for j, n in enumerate(names):
        metrics[f"generated_params_per_query/{n}"] = float(n_gen[j])
        metrics[f"model_params/{n}"] = float(n_params[j])
    trainable = sum(
        a.size for a in jax.tree_util.tree_leaves(eqx.filter(haps, eqx.is_inexact_array))
    )
    metrics["haps_trainable_params"] = float(trainable)
    metrics["train_seconds_per_step/haps"] = h_secs / config.steps
    metrics["train_seconds_per_step/static_lora"] = s_secs / config.steps
    metrics["train_seconds_per_step/routing_only_mlp"] = r_secs / config.steps
    metrics["prefix_cache_build_seconds_this_run"] = data.cache_seconds
    est = bootstrap(
        per_round["haps"] / per_round["routing_only"],
        np.median,
        seed=int(jax.random.randint(jax.random.fold_in(key, 5), (), 0, 2**31 - 1)),
        level=2 * float(config.timing_level) - 1,
    )
    est = dataclasses.replace(est, method=f"{est.method} of the median per-round ratio")
    ratio = est.value
    metrics["haps_over_routing_only_time_ratio"] = est
    log.info("efficiency: %s", metrics)
    claims = [
        at_most(
            est,
            config.max_overhead,
            null=f"{config.max_overhead}x the routing-only time per query",
            subject="HAPS / routing-only time per query",
            timing=True,
            claim=f"HAPS's time per query (router + LoRA generation + adapted top blocks on the "
            f"cached prefix) is within {config.max_overhead}x the routing-only pass on the same "
            f"prefix (median per-round ratio of {rounds} interleaved rounds; shared 2-core "
            f"machine, ratio within one run; {_haps.HAPS_CAVEAT})",
            paper="HAPS is efficient at inference",
            detail=f"{spq['haps'] * 1e3:.2f} ms vs {spq['routing_only'] * 1e3:.2f} ms; "
            f"static LoRA {spq['static_lora'] * 1e3:.2f} ms",
        ),
    ]
    del h_hist
    fig, (ax_q, ax_t) = plt.subplots(1, 2, figsize=(9, 3.6))
    per_query = spq
    ax_q.bar(range(len(per_query)), [v * 1e3 for v in per_query.values()], color="C0")
    ax_q.set_xticks(range(len(per_query)), [k.replace("_", " ") for k in per_query], fontsize=6)
    ax_q.tick_params(axis="x", rotation=20)
    ax_q.set_ylabel("ms per held-out query (median)")
    ax_q.set_title(f"inference on the cached prefix (ratio HAPS / routing {ratio:.2f})", fontsize=8)
    per_step = {k.split("/", 1)[1]: v for k, v in metrics.items() if k.startswith("train_sec")}
    ax_t.bar(range(len(per_step)), list(per_step.values()), color="C1")
    ax_t.set_xticks(range(len(per_step)), [k.replace("_", " ") for k in per_step], fontsize=7)
    ax_t.set_yscale("log")
    ax_t.set_ylabel("training seconds per step")
    ax_t.set_title(
        f"HAPS generates {100 * metrics['generated_fraction_of_model_mean']:.3f}% of the "
        "chosen model's parameters per query",
        fontsize=8,
    )
    fig.tight_layout()
    notes = (
        f"{_haps.HAPS_CAVEAT}. Timings: jitted single-query calls after a warm-up pass, "
        f"{config.repeats} interleaved rounds (one pass over the {len(test)} held-out queries "
        "per method and architecture each), per-architecture times weighted by HAPS's routing "
        "shares; the claim's interval bootstraps the per-round ratios; a 2-core machine "
        f"shared with other agents, so read ratios. Training: {config.steps} timed steps per "
        "method (not converged); "
        "seconds per step = the fit's wall time / steps, compilation included. Properties "
        "(arithmetic on the configuration, not claims): HAPS generates "
        f"{metrics['generated_params_per_query_mean']:.0f} numbers per query, "
        f"{100 * metrics['generated_fraction_of_model_mean']:.3f}% of the chosen model's "
        "parameters (the paper's 'lightweight': < 1%; the fraction shrinks for larger models); "
        f"HAPS's trainable parameters: {metrics['haps_trainable_params']:.0f}."
    )
    return Result(metrics=metrics, claims=claims, figures={"cost": fig}, notes=notes)
