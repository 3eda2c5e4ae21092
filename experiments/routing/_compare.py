"""Shared router comparison of the P6 experiments (routing_text, routing_vqa,
routing_ablation, routing_masking, routing_groups).

One `compare` call fits every named router on the training part of each split (one split
per seed, drawn from the run's key), routes the held-out queries at a grid of cost
weights lambda (utility = E[quality] - lambda * cost / max cost) and keeps, per router
and split, the (L, N) quality and cost of the chosen candidates. The experiments read
their metrics from these arrays:

- AIQ (RouterBench) of the router's (mean cost, accuracy) points over the test split's
  fixed-candidate cost range; a difference of two routers gets a 95% CI from a paired
  bootstrap over test queries (the same resampled queries for both routers; draw b of
  every split averaged over the splits, whose resamples are independent);
- the best VL-RouterBench rank score over the cost weights, with the same bootstrap;
- accuracy at lambda = 0 under availability masks (`masked_accuracy`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import jax
import numpy as np

from jaxlab import routing

BASELINES = ("fixed", "knn", "linear", "mlp", "mf", "embedllm")
#: LatentRouter and its ablations (constructor options)
LATENT = {
    "latent": {},
    "latent_no_comm": {"communication": False},
    "latent_no_correction": {"correction": False},
    "latent_point_head": {"head": "point"},
}


@dataclasses.dataclass(frozen=True)
class CompareConfig:
    """How routers are compared (mixed into each experiment's config)."""

    test_fraction: float = 0.3
    n_splits: int = 3
    cost_weights: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2)
    steps: int = 300
    latent_dim: int = 32
    n_boot: int = 300


@dataclasses.dataclass(frozen=True)
class TablesConfig(CompareConfig):
    """A comparison over several P6 tables (`_setup.named_table` names) with one kind of
    router features (`_setup.FEATURES`)."""

    tables: tuple[str, ...] = ("text", "vqa")
    features: str = "minilm"


def fit(name: str, train: routing.RoutingTable, config: CompareConfig, key: jax.Array):
    """The router `name` (a baseline or a `LATENT` variant) fitted on `train`."""
    steps = config.steps
    if name == "fixed":
        return routing.FixedRouter.fit(train)
    if name == "knn":
        return routing.KNNRouter.fit(train, k=10)
    if name == "linear":
        return routing.MLPRouter.fit(train, key=key, hidden=(), steps=steps)
    if name == "mlp":
        return routing.MLPRouter.fit(train, key=key, steps=steps)
    if name == "mf":
        return routing.MatrixFactorisationRouter.fit(train, key=key, steps=steps)
    if name == "embedllm":
        return routing.EmbedLLMRouter.fit(train, key=key, steps=steps)
    if name in LATENT:
        return routing.LatentRouter.fit(
            train, key=key, dim=config.latent_dim, steps=steps, **LATENT[name]
        )
    raise ValueError(f"name: expected one of {(*BASELINES, *LATENT)}, received {name!r}")


@dataclasses.dataclass
class Split:
    """One split's outcome: per router the (L, N) quality/cost of its choices at each cost
    weight, the fitted routers, the tables, the bootstrap resamples (B, N)."""

    train: routing.RoutingTable
    test: routing.RoutingTable
    routers: dict
    quality: dict[str, np.ndarray]
    cost: dict[str, np.ndarray]
    cost_range: tuple[float, float]
    boot: np.ndarray


def compare(
    table: routing.RoutingTable,
    names: Sequence[str],
    config: CompareConfig,
    key: jax.Array,
    *,
    clusters: np.ndarray | None = None,
) -> list[Split]:
    """Fit and route every router in `names` on `config.n_splits` splits of `table`."""
    out = []
    lams = np.asarray(config.cost_weights)
    for s in range(config.n_splits):
        k_split, k_fit, k_boot = jax.random.split(jax.random.fold_in(key, s), 3)
        train, test = table.split(config.test_fraction, key=k_split, clusters=clusters)
        rows = np.arange(test.n_queries)
        fixed_c = test.cost.mean(0)
        idx = np.asarray(
            jax.random.randint(k_boot, (config.n_boot, test.n_queries), 0, test.n_queries)
        )
        routers, qual, cost = {}, {}, {}
        for i, n in enumerate(names):
            r = fit(n, train, config, jax.random.fold_in(k_fit, i))
            ch = np.stack(
                [np.asarray(routing.route(r, test.features, cost_weight=float(lm))) for lm in lams]
            )
            routers[n], qual[n], cost[n] = r, test.quality[rows, ch], test.cost[rows, ch]
        out.append(
            Split(
                train,
                test,
                routers,
                qual,
                cost,
                (float(fixed_c.min()), float(fixed_c.max())),
                idx,
            )
        )
    return out


def _aiq(q_l, c_l, crange, rows=None):
    if rows is not None:
        q_l, c_l = q_l[:, rows], c_l[:, rows]
    return routing.aiq(c_l.mean(1), q_l.mean(1), cost_range=crange)


def _rank(q_l, c_l, crange, rows=None):
    if rows is not None:
        q_l, c_l = q_l[:, rows], c_l[:, rows]
    return float(
        np.max(routing.rank_score(q_l.mean(1), c_l.mean(1), cmin=crange[0], cmax=crange[1]))
    )


_STATS: dict[str, Callable] = {"aiq": _aiq, "rank": _rank}


def stat(splits: list[Split], name: str, which: str = "aiq") -> float:
    """Mean over splits of a router's AIQ (`which="aiq"`) or best rank score (`"rank"`)."""
    f = _STATS[which]
    return float(np.mean([f(s.quality[name], s.cost[name], s.cost_range) for s in splits]))


def diff_ci(splits: list[Split], a: str, b: str, which: str = "aiq") -> tuple[float, float, float]:
    """(mean difference a - b, 95% CI low, high) of AIQ or best rank score; paired bootstrap
    over test queries, the splits' draws averaged."""
    f = _STATS[which]
    per = []
    for s in splits:
        per.append(
            [
                f(s.quality[a], s.cost[a], s.cost_range, rows)
                - f(s.quality[b], s.cost[b], s.cost_range, rows)
                for rows in s.boot
            ]
        )
    draws = np.mean(np.asarray(per), axis=0)
    gain = stat(splits, a, which) - stat(splits, b, which)
    return float(gain), float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975))


def oracle_curve(quality: np.ndarray, cost: np.ndarray, n: int = 256):
    """(cost, quality) points of the per-query oracle at n cost weights: per query the
    candidate maximising quality - lambda * cost / max cost (cheapest among ties). By the
    Lagrangian argument these points lie on the upper envelope of every routing's
    (mean cost, accuracy), so no router's AIQ exceeds the oracle's (up to the grid)."""
    scale = float(np.max(cost)) or 1.0
    lams = np.r_[0.0, np.geomspace(1e-4, 1e4, n - 1)]
    rows = np.arange(quality.shape[0])
    pc, pq = np.empty(n), np.empty(n)
    for i, lam in enumerate(lams):
        u = quality - lam * cost / scale
        best = u.max(1, keepdims=True)
        ch = np.argmin(np.where(u >= best - 1e-12, cost, np.inf), axis=1)
        pc[i], pq[i] = cost[rows, ch].mean(), quality[rows, ch].mean()
    return pc, pq


def zero_and_oracle_aiq(splits: list[Split]) -> tuple[float, float]:
    """Mean AIQ of RouterBench's zero router (hull of the fixed candidates) and of the
    per-query oracle over cost weights (`oracle_curve`)."""
    zero, orc = [], []
    for s in splits:
        t = s.test
        zero.append(routing.aiq(t.cost.mean(0), t.quality.mean(0), cost_range=s.cost_range))
        pc, pq = oracle_curve(t.quality, t.cost)
        orc.append(routing.aiq(pc, pq, cost_range=s.cost_range))
    return float(np.mean(zero)), float(np.mean(orc))


def masked_quality(split: Split, name: str, available: np.ndarray) -> np.ndarray:
    """(N,) quality of router `name`'s lambda = 0 choices on the test queries when only
    the candidates in `available` (M,) may be chosen."""
    t = split.test
    ch = np.asarray(routing.route(split.routers[name], t.features, available=available))
    return t.quality[np.arange(t.n_queries), ch]


def best_candidates(split: Split, k: int) -> np.ndarray:
    """(M,) availability with the `k` best candidates on the training part removed."""
    order = np.argsort(-split.train.quality.mean(0), kind="stable")
    av = np.ones(split.train.n_candidates, bool)
    av[order[:k]] = False
    return av


def boot_ci(splits: list[Split], per_query: list[np.ndarray]) -> tuple[float, float, float]:
    """(mean, 95% CI) of a per-query quantity (one (N,) array per split) by the splits'
    bootstrap resamples (draw b of every split averaged)."""
    draws = np.mean(
        [[x[rows].mean() for rows in s.boot] for s, x in zip(splits, per_query, strict=True)],
        axis=0,
    )
    mean = float(np.mean([x.mean() for x in per_query]))
    return mean, float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975))


def main_result(
    table: routing.RoutingTable,
    config: CompareConfig,
    key,
    *,
    size: str,
    caveat: str,
    clusters=None,
    notes: str = "",
):
    """The routing_text / routing_vqa result: every baseline and LatentRouter compared on
    AIQ and rank score (paired-bootstrap CIs against the best baseline), accuracy at the
    fixed candidates' median cost, the cost-quality figure."""
    import matplotlib.pyplot as plt

    from experiments._harness import Claim, Result, log

    names = (*BASELINES, "latent")
    splits = compare(table, names, config, key, clusters=clusters)
    metrics: dict[str, float] = {
        "n_queries": table.n_queries,
        "n_candidates": table.n_candidates,
        "oracle_accuracy_all": float(table.quality.max(1).mean()),
        "best_fixed_accuracy_all": float(table.quality.mean(0).max()),
    }
    for j, name in enumerate(table.candidates):
        metrics[f"accuracy/{name}"] = float(table.quality[:, j].mean())
        metrics[f"mean_cost/{name}"] = float(table.cost[:, j].mean())
    metrics["aiq/zero"], metrics["aiq/oracle"] = zero_and_oracle_aiq(splits)
    for n in names:
        metrics[f"aiq/{n}"] = stat(splits, n, "aiq")
        metrics[f"rank_score_best/{n}"] = stat(splits, n, "rank")
        at = []
        for s in splits:
            pc, pq = s.cost[n].mean(1), s.quality[n].mean(1)
            at.append(routing.accuracy_at_cost(pc, pq, float(np.median(s.test.cost.mean(0)))))
        metrics[f"accuracy_at_median_cost/{n}"] = float(np.nanmean(at))
    log.info("AIQ %s", {n: round(metrics[f"aiq/{n}"], 4) for n in names})
    best_aiq = max(BASELINES, key=lambda n: metrics[f"aiq/{n}"])
    best_rank = max(BASELINES, key=lambda n: metrics[f"rank_score_best/{n}"])
    d1 = diff_ci(splits, "latent", best_aiq, "aiq")
    d2 = diff_ci(splits, "latent", best_rank, "rank")
    for tag, d in (("aiq_gain_vs_best_baseline", d1), ("rank_gain_vs_best_baseline", d2)):
        metrics[tag], metrics[f"{tag}_ci_low"], metrics[f"{tag}_ci_high"] = d
    null = "holds when the paired-bootstrap 95% CI of the gain lies above 0 (null: no gain)"
    claims = [
        Claim(
            f"LatentRouter's AIQ is above the best baseline's ({best_aiq}) on held-out queries "
            f"({size}; {config.n_splits} splits; {null}; {caveat})",
            "LatentRouter outperforms fixed-model, feature-level and learned-router baselines",
            f"AIQ {metrics['aiq/latent']:.4f} vs {metrics[f'aiq/{best_aiq}']:.4f}; gain "
            f"{d1[0]:+.4f} (95% CI {d1[1]:+.4f}, {d1[2]:+.4f}); "
            + ", ".join(f"{n} {metrics[f'aiq/{n}']:.4f}" for n in BASELINES)
            + f"; zero router {metrics['aiq/zero']:.4f}, oracle {metrics['aiq/oracle']:.4f}",
            d1[1] > 0,
        ),
        Claim(
            "LatentRouter's best VL-RouterBench rank score (beta 0.1, over the cost weights) is "
            f"above the best baseline's ({best_rank}) ({size}; {null})",
            "higher rank score than the baselines",
            f"{metrics['rank_score_best/latent']:.4f} vs "
            f"{metrics[f'rank_score_best/{best_rank}']:.4f}; gain {d2[0]:+.4f} (95% CI "
            f"{d2[1]:+.4f}, {d2[2]:+.4f}); "
            + ", ".join(f"{n} {metrics[f'rank_score_best/{n}']:.4f}" for n in BASELINES),
            d2[1] > 0,
        ),
    ]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ax.plot(table.cost.mean(0), table.quality.mean(0), "k^", label="fixed candidates (all queries)")
    s0 = splits[0]
    for n in names:
        pc, pq = s0.cost[n].mean(1), s0.quality[n].mean(1)
        hc, hq = routing.cost_quality_hull(pc, pq)
        (line,) = ax.plot(
            hc,
            hq,
            "-",
            lw=2.5 if n == "latent" else 1.2,
            label=f"{n} (mean AIQ {metrics[f'aiq/{n}']:.3f})",
        )
        ax.plot(pc, pq, ".", alpha=0.5, color=line.get_color())
    ax.set_xscale("log")
    ax.set_xlabel("mean cost per query")
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=7)
    ax.set_title("cost-quality points and non-decreasing hulls (split 0, held-out queries)")
    return Result(metrics=metrics, claims=claims, figures={"cost_quality": fig}, notes=notes)
