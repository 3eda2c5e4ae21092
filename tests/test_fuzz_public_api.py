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
kernel fails the test instead of killing pytest. Totals are printed (`-s` shows them).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
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
    tried = clean = documented = 0
    failures, docs = [], set()
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
        "tried": tried,
        "clean": clean,
        "documented": documented,
        "failures": failures,
        "documented_list": sorted(docs),
    }


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

    return [
        Entry(
            "laplex.matvec",
            lambda **k: laplex.matvec(**k),
            prob,
            {"v": "float", "t": "float", "s": "float", "a": "float", "c": "float"},
        ),
        Entry(
            "laplex.matmat",
            lambda **k: laplex.matmat(**k),
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
    ]


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
    return [
        Entry("bandits.ips", lambda **k: B.ips(**k), log, kinds),
        Entry("bandits.snips", lambda **k: B.snips(**k), log, kinds),
        Entry(
            "bandits.doubly_robust",
            lambda **k: B.doubly_robust(**k),
            lambda: dict(log(), q_hat=_rng(6).uniform(size=(12, 3))),
            dict(kinds, q_hat="float"),
        ),
        Entry(
            "bandits.sherman_morrison",
            lambda **k: B.sherman_morrison(**k),
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
        ),
    ]


def lowrank_table():
    from jaxlab import lowrank as lr

    layout = lr.OverlapLayout(1, 1)
    task = lr.fixed_point_task(n_trials=2, n_steps=4).astype(jnp.float64)
    loss = lr.OverlapLoss(task, layout, lr.Linear())
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
            lambda **k: lr.gram(**k),
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
    ]


def cells_table():
    from jaxlab import cells

    key = jax.random.key(1)
    return [
        Entry(
            "cells.train_lecell",
            lambda **k: cells.train_lecell(
                k["counts"], key=key, steps=k["steps"], batch_size=4, width=4, latent_dim=2
            )[1]["loss"],
            lambda: {"counts": _rng(8).poisson(2.0, (8, 5)).astype(float), "steps": 1},
            {"counts": "count"},
            sizes=("steps",),
        ),
    ]


def sensing_table():
    from jaxlab import sensing

    return [
        Entry(
            "sensing.action_grid",
            lambda **k: sensing.action_grid(**k),
            lambda: {"n": 3},
            sizes=("n",),
        ),
    ]


def topology_table():
    from jaxlab import topology as T

    ring = np.roll(np.eye(5), 1, axis=1)
    ring = ring + ring.T
    return [
        Entry(
            "topology.rwse",
            lambda **k: T.rwse(**k),
            lambda: {"adj": ring, "steps": 3},
            {"adj": "float"},
            sizes=("steps",),
        ),
        Entry(
            "topology.lap_pe",
            lambda **k: T.lap_pe(**k),
            lambda: {"adj": ring, "k": 2},
            {"adj": "float"},
            sizes=("k",),
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
            lambda **k: R.cost_quality_hull(**k),
            pts,
            {"cost": "float", "quality": "float"},
            accepts=flat,
        ),
        Entry(
            "routing.aiq",
            lambda **k: R.aiq(**k),
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
    ]


IN_PROCESS = {
    "bandits": bandits_table,
    "lowrank": lowrank_table,
    "cells": cells_table,
    "sensing": sensing_table,
    "topology": topology_table,
    "routing": routing_table,
}
SUBPROCESS = {"laplex": laplex_table}  # C++ kernels: a crash must not kill pytest

TOTALS: dict[str, dict[str, Any]] = {}


def _report(component, res):
    TOTALS[component] = res
    print(
        f"\nfuzz {component}: tried {res['tried']}, handled cleanly {res['clean']}, "
        f"documented exceptions {res['documented']}, failures {len(res['failures'])}"
    )
    for d in res["documented_list"]:
        print("  documented:", d)
    assert not res["failures"], "\n".join(res["failures"][:40])


SLOW = {"cells"}  # compiles a training step per accepted input: run with -m slow


@pytest.mark.parametrize(
    "component",
    [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in sorted(IN_PROCESS)],
)
def test_fuzz_component(component):
    _report(component, fuzz(IN_PROCESS[component]()))


@pytest.mark.parametrize("component", sorted(SUBPROCESS))
def test_fuzz_component_in_subprocess(component):
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
    _report(component, json.loads(line[5:]))


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
