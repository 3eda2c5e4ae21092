"""`select_router`: a router's settings chosen on a validation split of its training table.

Every learned router has settings (learning rate, steps, capacity, kNN's k) that change
what it learns; comparing routers fairly means giving each the same pre-declared
selection budget. `select_router` splits the training table once into an inner training
part and a validation part (by cluster when given, as `RoutingTable.split`), fits the
router with every setting of a small grid on the inner part and scores each fitted
router by its validation AIQ (`router_aiq`: RouterBench's AIQ of its routing at the given
cost weights, over the validation part's fixed-candidate cost range). With
`monitor_every`, iterative fits are also scored every `monitor_every` steps (through the
fit's `monitor`, i.e. `run_steps`' `stop`), so the stopping point is selected as well
(early stopping on the validation score; `patience` ends a fit whose score has not
improved for that many checks). The first best score wins ties. By default the selected
router is the fitted model itself (trained on the inner part only); with `refit=True` the
chosen setting is fitted once more on the whole table (same key as the selection's fits,
for the selected number of steps when the stopping point was selected) and that refitted
router is returned instead. The selection itself (setting, steps, scores) is the same
either way; the refitted router has no validation score of its own (it has seen the
validation part).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._core import as_array, check_positive_int, check_real, short_repr

from ._metrics import aiq
from ._router import AbstractRouter
from ._table import RoutingTable

__all__ = ["RouterSelection", "router_aiq", "select_router"]


@eqx.filter_jit
def _choices(router, features, cost_weights):
    def at(lam):
        return jnp.argmax(router.predict_utilities(features, cost_weight=lam), axis=1)

    return jax.vmap(at)(cost_weights)


def router_aiq(router: AbstractRouter, table: RoutingTable, *, cost_weights) -> float:
    """AIQ (RouterBench) of `router`'s routing of `table`'s queries at `cost_weights`.

    Each cost weight gives one (mean cost, accuracy) point of the routed candidates; the
    AIQ is the area under their non-decreasing hull over the table's fixed candidates'
    mean-cost range (the points' own range when every candidate costs the same).

    **Arguments:** `router`; `table` (its `features`, `quality`, `cost`); `cost_weights`
    (L,) values >= 0.

    **Returns:** a float.
    """
    lams = _cost_weights(cost_weights)
    ch = np.asarray(_choices(router, jnp.asarray(table.features, jnp.float32), jnp.asarray(lams)))
    rows = np.arange(table.n_queries)
    q, c = table.quality[rows, ch].mean(1), table.cost[rows, ch].mean(1)
    fixed = table.cost.mean(0)
    lo, hi = float(fixed.min()), float(fixed.max())
    return aiq(c, q, cost_range=(lo, hi) if hi > lo else None)


def _cost_weights(cost_weights) -> np.ndarray:
    lams = as_array("cost_weights", cost_weights, finite=True, nonempty=True, low=0.0, real=True)
    if lams.ndim > 1:
        raise ValueError(
            f"cost_weights: expected a number or a 1-D list of values >= 0, received shape "
            f"{tuple(lams.shape)}"
        )
    return np.asarray(lams, np.float32).reshape(-1)


@dataclasses.dataclass(frozen=True)
class RouterSelection:
    """The outcome of `select_router`.

    **Fields:**

    - `router`: the selected fitted router: trained on the inner training part, or, when
      `refit`, the selected setting (and step count) fitted again on the whole table.
    - `setting`: its grid entry (a dict of keyword arguments of the fit).
    - `steps`: the step count it was taken at (None for a fit without a monitor).
    - `score`: the validation AIQ of the selected candidate (the inner-part fit; a
      refitted router has seen the validation part, so it has no validation score).
    - `scores`: every scored candidate as `(grid index, steps or None, validation AIQ)`,
      in the order they were scored.
    - `validation_ids`: the `query_ids` of the validation part.
    - `refit`: whether `router` was refitted on the whole table.
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    router: AbstractRouter
    setting: Mapping[str, Any]
    steps: int | None
    score: float
    scores: tuple[tuple[int, int | None, float], ...]
    validation_ids: tuple[str, ...]
    refit: bool = False


def select_router(
    fit: Callable[..., AbstractRouter],
    table: RoutingTable,
    grid: Sequence[Mapping[str, Any]],
    *,
    key: jax.Array,
    validation_fraction: float = 0.2,
    clusters=None,
    cost_weights=(0.0,),
    monitor_every: int | None = None,
    patience: int | None = None,
    refit: bool = False,
) -> RouterSelection:
    """The setting of `grid` (and, with `monitor_every`, the stopping point) whose fitted
    router has the highest validation AIQ (`router_aiq`) on a split of `table`.

    **Arguments:**

    - `fit`: `fit(table, *, key, **setting) -> router`, e.g. `MLPRouter.fit`; with
      `monitor_every` it also receives `monitor=` and `monitor_every=` (as the
      iterative routers' `fit`, see `fit_router`).
    - `table`: the training table (the only rows the selection sees).
    - `grid`: the settings to try (dicts of keyword arguments of `fit`), at least one.
    - `key`: PRNG key (the validation split and the fits; every setting is fitted
      with the same key).
    - `validation_fraction`: share of `table` (of its clusters, with `clusters`) held
      out for validation, in (0, 1).
    - `clusters`: (N,) ints or None: queries sharing a cluster stay on one side.
    - `cost_weights`: (L,) cost weights the validation AIQ routes at.
    - `monitor_every`: score the fit every this many steps (None: only the fitted
      router).
    - `patience`: with `monitor_every`, end a fit after this many checks without a
      better score (None: never).
    - `refit`: after the selection, fit the selected setting again on the whole `table`
      (with the key of the selection's fits and, with `monitor_every`, `steps=` the
      selected step count, replacing any `steps` in the setting) and return that router
      instead of the inner-part fit.

    **Returns:** a `RouterSelection`.
    """
    grid = [dict(s) for s in grid]
    if not grid:
        raise ValueError("grid: expected at least one setting, received none")
    lams = _cost_weights(cost_weights)
    if monitor_every is not None:
        monitor_every = check_positive_int("monitor_every", monitor_every)
    if patience is not None:
        patience = check_positive_int("patience", patience)
    validation_fraction = check_real(
        "validation_fraction",
        validation_fraction,
        low=0.0,
        high=1.0,
        low_inclusive=False,
        high_inclusive=False,
    )
    k_split, k_fit = jax.random.split(key)
    inner, val = table.split(validation_fraction, key=k_split, clusters=clusters)
    scores: list[tuple[int, int | None, float]] = []
    best: dict[str, Any] = {}

    def record(i, steps, router) -> float:
        s = router_aiq(router, val, cost_weights=lams)
        scores.append((i, steps, s))
        if not best or s > best["score"]:
            best.update(router=router, i=i, steps=steps, score=s)
        return s

    for i, setting in enumerate(grid):
        if monitor_every is None:
            record(i, None, fit(inner, key=k_fit, **setting))
            continue
        run = {"top": -np.inf, "since": 0}

        def monitor(router, steps, i=i, run=run):
            s = record(i, steps, router)
            run["since"] = 0 if s > run["top"] else run["since"] + 1
            run["top"] = max(run["top"], s)
            return patience is not None and run["since"] >= patience

        fit(inner, key=k_fit, monitor=monitor, monitor_every=monitor_every, **setting)
    setting, router = grid[best["i"]], best["router"]
    if refit:
        steps = {} if best["steps"] is None else {"steps": best["steps"]}
        router = fit(table, key=k_fit, **{**setting, **steps})
    return RouterSelection(
        router=router,
        setting=setting,
        steps=best["steps"],
        score=float(best["score"]),
        scores=tuple(scores),
        validation_ids=val.query_ids,
        refit=bool(refit),
    )
