"""P9 claim: LAPLEX matvec + gradient scale like FFTs, O(N log N) (near-linear).

Times one jitted matvec and its full gradient (v, t, s, a, c) for N = 1e3..1e7
(QUICK, CPU) or up to 1e8 (FULL), with unsorted anchors, so the sort is
included, and separately with a reused plan (pre-sorted anchors). The log-log
slope over the largest decades is the claim (near 1, not 2 as for dense), with a
percentile bootstrap interval over the `repeats` timed calls per size (`loglog_slope`).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import Result, RunContext, at_most, log, loglog_slope, time_callable
from jaxlab import laplex, progress_bar

NAME = "laplex_scaling"
PAPER = "P9"
DESCRIPTION = "Matvec + gradient time grows near-linearly in N (log-log slope <= 1.15)"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    sizes: tuple[int, ...] = (1000, 10_000, 100_000, 1_000_000, 10_000_000)
    # timed calls per size (>= 2: the slope's interval bootstraps them)
    repeats: int = 5
    heads: int = 1
    fit_from: int = 100_000
    # the claim's bar on the log-log slope ("near-linear"), fixed before the run
    max_slope: float = 1.15
    # the claim reads the upper end of the slope's two-sided 2 * slope_level - 1 percentile
    # bootstrap interval over the timed calls
    slope_level: float = 0.95


QUICK = Config()
TINY = Config(sizes=(300, 3000), repeats=2, fit_from=300)  # the smoke tier
FULL = Config(sizes=(1000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000), repeats=5)
# N = 1e8 float32: t, s, v, w, the three anchor/vector gradients, the plan's sorted copies
# and permutations and the matvec's forward/backward sums: ~20 arrays of 4e8 bytes
FULL_MEMORY_GB = 8


def _loss(v, t, s, a, c, w, plan):
    return jnp.sum(laplex.matvec(v, t, s, a, c=c, plan=plan) * w)


_VG = jax.jit(jax.value_and_grad(_loss, argnums=(0, 1, 2, 3, 4)))
_VG_FRESH = jax.jit(
    jax.value_and_grad(
        lambda v, t, s, a, c, w: _loss(v, t, s, a, c, w, None), argnums=(0, 1, 2, 3, 4)
    )
)
_PLAN = jax.jit(laplex.make_plan)


def full_work(config) -> float:
    """Element passes of the timed calls (warm-up + repeats) plus ~1e7 per size's compiles."""
    return float(sum((config.repeats + 1) * n + 1e7 for n in config.sizes))


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    h = int(config.heads)
    rows = []

    def times(fn):
        return time_callable(fn, warmup=1, repeats=config.repeats)

    for n in progress_bar(config.sizes, desc="laplex scaling"):
        k1, k2, k3, key = jax.random.split(key, 4)
        t = jax.random.uniform(k1, (h, n), jnp.float32, 0, n)
        s = jax.random.uniform(k2, (h, n), jnp.float32, 0, n)
        v = jax.random.normal(k3, (n,), jnp.float32)
        w = jnp.cos(jnp.arange(n, dtype=jnp.float32))
        a = jnp.full((h,), 0.5, jnp.float32)
        c = jnp.ones((h,), jnp.float32)
        fresh_r = times(functools.partial(_VG_FRESH, v, t, s, a, c, w))
        ts_, ss_ = jnp.sort(t, axis=1), jnp.sort(s, axis=1)
        plan = _PLAN(ts_, ss_)
        reused_r = times(functools.partial(_VG, v, ts_, ss_, a, c, w, plan))
        sort = float(np.median(times(functools.partial(_PLAN, t, s))))
        fresh, reused = float(np.median(fresh_r)), float(np.median(reused_r))
        rows.append(
            {"n": n, "fresh": fresh, "reused": reused, "sort": sort, "rounds": (fresh_r, reused_r)}
        )
        log.info(
            "N=%d matvec+grad %.4fs (fresh plan), %.4fs (reused plan), plan %.4fs",
            n,
            fresh,
            reused,
            sort,
        )
    ns = np.array([r["n"] for r in rows], float)
    sel = ns >= config.fit_from
    fitted = [r for r, keep in zip(rows, sel, strict=True) if keep]
    seed = int(jax.random.randint(jax.random.fold_in(key, 7), (), 0, 2**31 - 1))
    slope, slope_r = (
        loglog_slope(
            ns[sel],
            [r["rounds"][i] for r in fitted],
            seed=seed + i,
            level=2 * config.slope_level - 1,
        )
        for i in (0, 1)
    )
    metrics = {"loglog_slope": slope, "loglog_slope_reused_plan": slope_r}
    for r in rows:
        metrics[f"t_matvec_grad_s_n{r['n']}"] = r["fresh"]
        metrics[f"t_matvec_grad_reused_plan_s_n{r['n']}"] = r["reused"]
        metrics[f"t_plan_s_n{r['n']}"] = r["sort"]
        metrics[f"ns_per_element_n{r['n']}"] = 1e9 * r["fresh"] / r["n"]
    claims = [
        at_most(
            slope,
            config.max_slope,
            null=f"near-linear bar {config.max_slope:g} (dense: 2)",
            subject="log-log slope",
            claim="matvec + gradient scale near-linearly (FFT-like)",
            paper=f"log-log slope <= {config.max_slope:g}",
            detail=f"N >= {config.fit_from:.0e}, {int(sel.sum())} sizes, {config.repeats} timed "
            f"calls each; {slope_r:.2f} with a reused plan",
        )
    ]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.loglog(ns, [r["fresh"] for r in rows], "o-", label="matvec+grad, fresh sort")
    ax.loglog(ns, [r["reused"] for r in rows], "s-", label="matvec+grad, reused plan")
    ax.loglog(ns, [r["sort"] for r in rows], "^--", label="sort/plan only")
    ref = rows[-1]["fresh"] * (ns / ns[-1])
    ax.loglog(ns, ref, "k:", lw=0.8, label="slope 1")
    ax.set_xlabel("N (= M)")
    ax.set_ylabel("seconds")
    ax.set_title(f"LAPLEX on {jax.devices()[0].platform}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"scaling": fig},
        notes=(
            f"float32, {h} head(s), random anchors (synthetic), backend "
            f"{jax.default_backend()}. Wall-clock medians on a shared machine. "
            "Slope fitted over N >= fit_from (small N is dominated by dispatch)."
        ),
    )
