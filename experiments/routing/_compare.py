"""Shared router comparison of the P6 experiments (routing_text, routing_vqa,
routing_ablation, routing_masking, routing_groups).

One `compare` call fits every named router on the training part of each split (one split
per seed, drawn from the run's key), routes the held-out queries at a grid of cost
weights lambda (utility = E[quality] - lambda * cost / max cost) and keeps, per router
and split, the (L, N) quality and cost of the chosen candidates. The experiments read
their metrics from these arrays:

- AIQ (RouterBench) of the router's (mean cost, accuracy) points over the test split's
  fixed-candidate cost range: jaxlab's normalisation, the area over [c_min, c_max] of
  the fixed candidates' mean costs divided by (c_max - c_min) (`routing.aiq` with
  `cost_range=(c_min, c_max)`), not RouterBench's released `calc_AIQ` (area from cost 0
  divided by c_max: `cost_range="routerbench"`); a difference of two routers is an
  `Estimate` with a 95% interval from the harness's percentile bootstrap over the held-out
  queries of every split
  (`split_bootstrap`: items are the (split, query) pairs, both routers scored on the same
  resampled queries, the statistic averaged over the splits);
- the best VL-RouterBench rank score over the cost weights, with the same bootstrap;
- accuracy at lambda = 0 under availability masks (`masked_accuracy`).

Every router-comparison claim of a P6 experiment is gated by the competence gate of its
table (`_gate.competence`, applied by `gate_claims`): on a pool whose candidates are not
above chance, or whose oracle does not beat as many independent guessers, the claim is
`untestable` (never "fails").
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import jax
import numpy as np

from experiments._harness import Claim, Estimate, bootstrap, gated, superior
from jaxlab import routing

from . import _gate

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
    """How routers are compared (mixed into each experiment's config).

    Selection (`select=True`): every learned router gets the same pre-declared budget of
    6 scored candidates on an inner validation split (`validation_fraction` of the
    training part, by cluster where the table has clusters), selected by validation AIQ
    at `cost_weights`: the iterative routers 2 settings x `n_checks` stopping points
    (validation AIQ every `steps // n_checks` steps of one fit per setting), kNN 6 values
    of k. The selected model is kept as fitted on the inner part (`refit=False`), or, with
    `refit=True`, every learned router's selected setting is fitted again on the whole
    training part for its selected step count (`select_router(refit=True)`). The first
    entry of each grid is the setting every router had before selection (`select=False`
    fits only that one, for `steps`, on the whole training part)."""

    test_fraction: float = 0.3
    n_splits: int = 3
    cost_weights: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2)
    steps: int = 300
    n_boot: int = 300
    select: bool = True
    #: refit every selected router on the whole training part (all learned routers alike;
    #: off by default: on the QUICK tables it lowered LatentRouter's text AIQ by 0.026 and
    #: raised its VQA AIQ by 0.005, no claim changed; see CHANGELOG.md's P6 row)
    refit: bool = False
    validation_fraction: float = 0.2
    n_checks: int = 3
    #: linear, MLP, MF and EmbedLLM routers (their default rate first)
    learning_rates: tuple[float, ...] = (1e-2, 3e-2)
    #: LatentRouter and its ablations: (learning rate, dim, depth)
    latent_settings: tuple[tuple[float, int, int], ...] = ((3e-3, 32, 2), (1e-2, 16, 1))
    knn_ks: tuple[int, ...] = (10, 2, 5, 20, 40, 80)
    #: margin of the superiority claims (LatentRouter's gain over a baseline, an
    #: ablation's drop): the paper claims a gain of any size, so 0 (null: no gain)
    gain_margin: float = 0.0


#: the smoke tier's comparison (each experiment's TINY): one split, short fits, and a
#: selection grid cut to one setting per router x 2 stopping points (kNN: 2 values of k),
#: so every learned router still gets the same budget (2 scored candidates); a one-block
#: LatentRouter (its training step's compilation is most of a TINY run)
TINY_COMPARE = dict(
    n_splits=1,
    steps=20,
    n_boot=20,
    n_checks=2,
    cost_weights=(0.0, 0.2, 1.6),
    learning_rates=(1e-2,),
    latent_settings=((3e-3, 16, 1),),
    knn_ks=(10, 2),
)


def compare_work(config: CompareConfig, n_tables: int = 1) -> float:
    """Router fit steps of a comparison (the dry run's work unit): splits x tables x the
    iterative routers' grid settings x steps."""
    settings = len(config.learning_rates) + len(config.latent_settings)
    return float(config.n_splits * n_tables * settings * config.steps)


@dataclasses.dataclass(frozen=True)
class TablesConfig(CompareConfig):
    """A comparison over several P6 tables (`_tables.named_table` names) with one kind of
    router features (`_features.FEATURES`)."""

    tables: tuple[str, ...] = ("text", "vqa")
    features: str = "minilm"


def grid(name: str, config: CompareConfig) -> tuple[Callable, list[dict], int | None]:
    """`(fit, settings, monitor_every)` of router `name` (a baseline or a `LATENT`
    variant): its fit function, its selection grid (first entry: the unselected
    setting) and the validation interval in steps (None: not iterative)."""
    if config.steps % config.n_checks:
        raise ValueError(
            f"n_checks: expected a divisor of steps={config.steps}, received {config.n_checks}"
        )
    every = config.steps // config.n_checks
    if name == "fixed":
        return routing.FixedRouter.fit, [{}], None
    if name == "knn":
        return routing.KNNRouter.fit, [{"k": k} for k in config.knn_ks], None
    lrs = [{"learning_rate": lr, "steps": config.steps} for lr in config.learning_rates]
    if name == "linear":
        return functools.partial(routing.MLPRouter.fit, hidden=()), lrs, every
    if name == "mlp":
        return routing.MLPRouter.fit, lrs, every
    if name == "mf":
        return routing.MatrixFactorisationRouter.fit, lrs, every
    if name == "embedllm":
        return routing.EmbedLLMRouter.fit, lrs, every
    if name in LATENT:
        settings = [
            {"learning_rate": lr, "dim": d, "depth": depth, "steps": config.steps}
            for lr, d, depth in config.latent_settings
        ]
        return functools.partial(routing.LatentRouter.fit, **LATENT[name]), settings, every
    raise ValueError(f"name: expected one of {(*BASELINES, *LATENT)}, received {name!r}")


def budget(name: str, config: CompareConfig) -> int:
    """How many fitted candidates router `name`'s selection scores (0: nothing to select)."""
    _, settings, every = grid(name, config)
    if name == "fixed":
        return 0
    return len(settings) * (config.n_checks if every else 1)


def fit(
    name: str,
    train: routing.RoutingTable,
    config: CompareConfig,
    key: jax.Array,
    *,
    clusters: np.ndarray | None = None,
):
    """`(router, selection)`: router `name` fitted on `train` (`selection` a
    `routing.RouterSelection` on an inner validation split of `train` when
    `config.select`, else None and the grid's first setting fitted on all of `train`).
    `clusters` (train.n_queries,) keep clustered queries on one side of the inner split."""
    fit_fn, settings, every = grid(name, config)
    if name == "fixed" or not config.select:
        return fit_fn(train, key=key, **settings[0]), None
    sel = routing.select_router(
        fit_fn,
        train,
        settings,
        key=key,
        validation_fraction=config.validation_fraction,
        clusters=clusters,
        cost_weights=config.cost_weights,
        monitor_every=every,
        refit=config.refit,
    )
    return sel.router, sel


def protocol(config: CompareConfig) -> str:
    """The selection protocol in words (for claims and notes)."""
    if not config.select:
        return (
            f"no selection: every router fitted once ({config.steps} steps, its default rate) "
            "on the whole training part"
        )
    every = config.steps // config.n_checks
    checks = "/".join(str(every * (i + 1)) for i in range(config.n_checks))
    lat = ", ".join(f"lr {lr:g} dim {d} depth {dp}" for lr, d, dp in config.latent_settings)
    return (
        f"every learned router selected by validation AIQ (the {len(config.cost_weights)} "
        f"cost weights) on an inner {config.validation_fraction:.0%} validation split of each "
        "training part (by image where the table has clusters), the same budget of "
        f"{budget('linear', config)} scored candidates each: linear/MLP/MF/EmbedLLM learning "
        f"rates {'/'.join(f'{x:g}' for x in config.learning_rates)} x stopping at {checks} "
        f"steps, LatentRouter and its ablations ({lat}) x the same stops, kNN k in "
        f"{'/'.join(map(str, config.knn_ks))}; {_kept(config)}; test queries never enter the "
        "selection"
    )


def _kept(config: CompareConfig) -> str:
    """Which model the selection keeps, in words (for `protocol`)."""
    if config.refit:
        return (
            "the selected setting is refitted on the whole training part for its selected "
            "step count"
        )
    return "the selected model is kept (trained on the inner part, no refit)"


def protocol_tag(config: CompareConfig) -> str:
    """A short form of `protocol` for a claim's measured text."""
    if not config.select:
        return "no router selection"
    return (
        f"every learned router selected by validation AIQ on an inner "
        f"{config.validation_fraction:.0%} split, {budget('linear', config)} candidates each"
        + (", refitted on the whole training part" if config.refit else "")
    )


def selection_metrics(splits: list[Split], names: Sequence[str], prefix: str = "") -> dict:
    """Per router: mean over splits of the selected candidate's validation AIQ and step
    count (routers with a selection only)."""
    out = {}
    for n in names:
        sels = [x for s in splits if (x := s.selections.get(n)) is not None]
        if len(sels) < len(splits):
            continue
        out[f"{prefix}validation_aiq/{n}"] = float(np.mean([x.score for x in sels]))
        if all(x.steps is not None for x in sels):
            out[f"{prefix}selected_steps/{n}"] = float(np.mean([x.steps for x in sels]))
    return out


def selection_summary(splits: list[Split], names: Sequence[str]) -> str:
    """One line per router: the setting and step count selected on each split."""
    out = []
    for n in names:
        sels = [x for s in splits if (x := s.selections.get(n)) is not None]
        if len(sels) < len(splits):
            continue
        picks = []
        for x in sels:
            kv = ",".join(f"{k}={v}" for k, v in x.setting.items() if k != "steps")
            picks.append(kv + (f"@{x.steps}" if x.steps is not None else ""))
        out.append(f"{n}: " + " | ".join(picks))
    return "; ".join(out)


@dataclasses.dataclass
class Split:
    """One split's outcome: per router the (L, N) quality/cost of its choices at each cost
    weight, the fitted routers and their selections (`fit`), the tables, the split's
    bootstrap seed (drawn from the run's key; `split_bootstrap` seeds from every split's)."""

    train: routing.RoutingTable
    test: routing.RoutingTable
    routers: dict
    selections: dict
    quality: dict[str, np.ndarray]
    cost: dict[str, np.ndarray]
    cost_range: tuple[float, float]
    seed: int


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
        seed = int(jax.random.randint(k_boot, (), 0, 2**31 - 1))
        train_cl = None
        if clusters is not None:
            at = {q: i for i, q in enumerate(table.query_ids)}
            train_cl = np.asarray(clusters)[[at[q] for q in train.query_ids]]
        routers, sels, qual, cost = {}, {}, {}, {}
        for i, n in enumerate(names):
            r, sels[n] = fit(n, train, config, jax.random.fold_in(k_fit, i), clusters=train_cl)
            ch = np.stack(
                [np.asarray(routing.route(r, test.features, cost_weight=float(lm))) for lm in lams]
            )
            routers[n], qual[n], cost[n] = r, test.quality[rows, ch], test.cost[rows, ch]
        out.append(
            Split(
                train,
                test,
                routers,
                sels,
                qual,
                cost,
                (float(fixed_c.min()), float(fixed_c.max())),
                seed,
            )
        )
    return out


def _aiq(q_l, c_l, crange):
    return routing.aiq(c_l.mean(1), q_l.mean(1), cost_range=crange)


def _rank(q_l, c_l, crange):
    return float(
        np.max(routing.rank_score(q_l.mean(1), c_l.mean(1), cmin=crange[0], cmax=crange[1]))
    )


_STATS: dict[str, Callable] = {"aiq": _aiq, "rank": _rank}


def stat(splits: list[Split], name: str, which: str = "aiq") -> float:
    """Mean over splits of a router's AIQ (`which="aiq"`) or best rank score (`"rank"`)."""
    f = _STATS[which]
    return float(np.mean([f(s.quality[name], s.cost[name], s.cost_range) for s in splits]))


def _counts(idx: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    """Per split, the (B, N_s) multiplicity of each held-out query in each of B resamples of
    the pooled (split, query) items `idx` (B, n)."""
    total = sum(sizes)
    flat = np.asarray(idx).reshape(-1, np.shape(idx)[-1]).astype(np.int64)
    b = flat.shape[0]
    ids = (np.arange(b)[:, None] * total + flat).ravel()
    counts = np.bincount(ids, minlength=b * total).reshape(b, total).astype(float)
    return np.split(counts, np.cumsum(sizes)[:-1], axis=1)


def split_bootstrap(
    splits: list[Split],
    per_split: Callable[[int, np.ndarray], np.ndarray],
    *,
    n_resamples: int,
    level: float = 0.95,
) -> Estimate:
    """The harness's percentile bootstrap (`experiments._harness.bootstrap`) of a statistic
    of the held-out queries of every split.

    Items are the (split, query) pairs of all splits' test parts, resampled with
    replacement; `per_split(s, w)` gives split `s`'s statistic (B,) under query weights
    `w` (B, N_s) (each query's multiplicity in a resample; all ones for the data), and the
    estimate is its mean over the splits: `mean_s per_split(s, w_s)`. Every call draws the
    same resamples (seeded from the splits' seeds, which come from the run's key), so the
    estimates of one run share their resampled queries. `n` is the pooled query count."""
    sizes = [s.test.n_queries for s in splits]

    def statistic(idx, axis=-1):
        idx = np.asarray(idx)
        ws = _counts(idx, sizes)
        vals = np.mean([per_split(i, w) for i, w in enumerate(ws)], axis=0)
        return vals.reshape(idx.shape[:-1]) if idx.ndim > 1 else float(vals[0])

    rng = np.random.default_rng([s.seed for s in splits])
    return bootstrap(
        np.arange(sum(sizes), dtype=float),
        statistic,
        seed=rng,
        level=level,
        n_resamples=n_resamples,
    )


def _weighted_mean(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(B, L): per resample (row of `w`, (B, N)) the weighted mean over queries of each row
    of `x` (L, N)."""
    return (w @ x.T) / w.sum(1, keepdims=True)


def diff_estimate(
    splits: list[Split], a: str, b: str, which: str = "aiq", *, n_resamples: int
) -> Estimate:
    """Difference `a - b` of two routers' AIQ (`which="aiq"`) or best rank score
    (`"rank"`), averaged over the splits, with a 95% paired `split_bootstrap` interval
    (both routers on the same resampled held-out queries)."""
    f = _STATS[which]

    def per_split(i, w):
        s = splits[i]
        out = np.empty(w.shape[0])
        qa, ca = _weighted_mean(w, s.quality[a]), _weighted_mean(w, s.cost[a])
        qb, cb = _weighted_mean(w, s.quality[b]), _weighted_mean(w, s.cost[b])
        for r in range(w.shape[0]):
            out[r] = f(qa[r][:, None], ca[r][:, None], s.cost_range) - f(
                qb[r][:, None], cb[r][:, None], s.cost_range
            )
        return out

    return split_bootstrap(splits, per_split, n_resamples=n_resamples)


def gate_claims(
    table: routing.RoutingTable, claims: Sequence[Claim], label: str = ""
) -> tuple[list[Claim], dict]:
    """`(claims, metrics)`: every router-comparison claim on `table` gated by the table's
    competence gate (`_gate.competence`; failed: the claim is `untestable`), and the gate's
    metrics (prefixed `label/` when given)."""
    comp = _gate.competence(table, label=label)
    pre = f"{label}/" if label else ""
    return [gated(c, comp.precondition) for c in claims], {
        pre + k: v for k, v in comp.metrics.items()
    }


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


def mean_estimate(
    splits: list[Split],
    per_query: list[np.ndarray],
    *,
    n_resamples: int,
    where: list[np.ndarray] | None = None,
) -> Estimate:
    """Mean of a per-query quantity (one (N,) array per split; only the queries where the
    (N,) boolean `where` holds, if given) averaged over the splits, with a 95%
    `split_bootstrap` interval."""
    xs = [np.asarray(x, float) for x in per_query]
    ms = [np.ones_like(x) for x in xs] if where is None else [np.asarray(m, float) for m in where]

    def per_split(i, w):
        wm = w * ms[i]
        return (wm @ np.where(ms[i] > 0, xs[i], 0.0)) / wm.sum(1)

    return split_bootstrap(splits, per_split, n_resamples=n_resamples)


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

    from experiments._harness import Result, log

    names = (*BASELINES, "latent")
    splits = compare(table, names, config, key, clusters=clusters)
    metrics: dict[str, float | Estimate] = {
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
    metrics.update(selection_metrics(splits, names))
    log.info("AIQ %s", {n: round(metrics[f"aiq/{n}"], 4) for n in names})
    log.info("selected: %s", selection_summary(splits, names))
    best_aiq = max(BASELINES, key=lambda n: metrics[f"aiq/{n}"])
    best_rank = max(BASELINES, key=lambda n: metrics[f"rank_score_best/{n}"])
    d1 = diff_estimate(splits, "latent", best_aiq, "aiq", n_resamples=config.n_boot)
    d2 = diff_estimate(splits, "latent", best_rank, "rank", n_resamples=config.n_boot)
    metrics["aiq_gain_vs_best_baseline"] = d1
    metrics["rank_gain_vs_best_baseline"] = d2
    claims = [
        superior(
            d1,
            "LatentRouter",
            f"the best baseline by AIQ ({best_aiq})",
            config.gain_margin,
            claim=f"LatentRouter's AIQ is above the best baseline's ({best_aiq}) on held-out "
            f"queries ({size}; {config.n_splits} splits; paired bootstrap over held-out "
            f"queries; {caveat})",
            paper="LatentRouter outperforms fixed-model, feature-level and learned-router "
            "baselines",
            detail=f"{protocol_tag(config)}: "
            f"AIQ {metrics['aiq/latent']:.4f} vs {metrics[f'aiq/{best_aiq}']:.4f}; "
            + ", ".join(f"{n} {metrics[f'aiq/{n}']:.4f}" for n in BASELINES)
            + f"; zero router {metrics['aiq/zero']:.4f}, oracle {metrics['aiq/oracle']:.4f}",
        ),
        superior(
            d2,
            "LatentRouter",
            f"the best baseline by rank score ({best_rank})",
            config.gain_margin,
            claim="LatentRouter's best VL-RouterBench rank score (beta 0.1, over the cost "
            f"weights) is above the best baseline's ({best_rank}) ({size}; paired bootstrap "
            "over held-out queries)",
            paper="higher rank score than the baselines",
            detail=f"{protocol_tag(config)}: {metrics['rank_score_best/latent']:.4f} vs "
            f"{metrics[f'rank_score_best/{best_rank}']:.4f}; "
            + ", ".join(f"{n} {metrics[f'rank_score_best/{n}']:.4f}" for n in BASELINES),
        ),
    ]
    claims, gate_metrics = gate_claims(table, claims)
    metrics.update(gate_metrics)
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
    notes = (
        f"{notes} Router selection: {protocol(config)}. Selected (setting@steps per split): "
        f"{selection_summary(splits, names)}."
    )
    return Result(metrics=metrics, claims=claims, figures={"cost_quality": fig}, notes=notes)
