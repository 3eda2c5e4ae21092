"""Contract fuzz (issue #59, item 3): bad inputs generated from each function's declared
argument kinds, so a function is fuzzed by being declared.

The declarations are the `Entry` tables of `tests/test_fuzz_public_api.py` (a valid
example call, the kind of each array argument, its positive-int sizes and its integer id
arguments with their range). That module keeps its hand-chosen mutations as regression
cases; this one derives further bad values per kind from a seeded generator:

- inexact arrays ("float", "prob", "count"): NaN and -inf at a *random* position (a check
  of the first element only lets it through), a complex array;
- every array: its last axis one shorter and one longer (a width off by one);
- "int" arrays as booleans, "bool" arrays as 0/1 integers;
- declared ids (`Entry.ids`): the first invalid id n, -1, and 10**9 at a random position;
- sizes: `True`, the string "3", a NumPy integer, and (slow tier, in a child process
  with a memory limit and a deadline) 10**9.

Each call ends in one of three ways: *refused* (a ValueError or TypeError whose message
names the argument, or for a width change any argument it disagrees with), *accepted*
(a result without NaN/inf, for a mutation that is not required to be refused, or one the
entry documents), or *other* (any other exception, an unnamed error, a silent NaN/inf, a
required refusal that was accepted, a call past its deadline, a crashed child): 0 allowed.
Counts per component are printed and recorded (`contracts` in the session's robustness
totals). The default tier runs a seeded sample of each fast component's cases (about 20
seconds); `-m slow` runs every case of every component, and the 10**9 sizes. With
JAXLAB_FUZZ_DIR=results/fuzz the slow tier's counts (never the sample's) are merged into
results/fuzz/contracts.json, the committed totals (`record_fuzz_counts`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

from tests.test_fuzz_public_api import (
    IN_PROCESS,
    ROOT,
    SLOW,
    SUBPROCESS,
    Entry,
    _finite,
    record_fuzz_case,
    record_fuzz_counts,
)

CALL_DEADLINE_S = 120.0  # per call; a call past it counts as "other" (a hang)
SAMPLE_PER_ENTRY = 3  # the default tier's cases per entry (seeded)
HUGE = 10**9


def _inexact(kind: str) -> bool:
    return kind in ("float", "prob", "count")


def array_mutations(kind: str, x, rng: np.random.Generator) -> list[tuple[str, Any, bool]]:
    """(tag, bad value, must be refused) for one array argument of the given kind."""
    x = np.asarray(x)
    out: list[tuple[str, Any, bool]] = []
    if x.size and _inexact(kind):
        i = int(rng.integers(x.size))
        for tag, v in (("nan@random", np.nan), ("-inf@random", -np.inf)):
            y = x.astype(np.float64).copy()
            y.reshape(-1)[i] = v
            out.append((tag, y, True))
        out.append(("dtype:complex", x.astype(np.complex128) + 1j, False))
    if x.ndim >= 1 and x.shape[-1] >= 2:
        out.append(("width-1", x[..., :-1], False))
    if x.ndim >= 1 and x.size:
        out.append(("width+1", np.concatenate([x, x[..., :1]], axis=-1), False))
    if kind == "bool" and x.size:
        out.append(("dtype:int", x.astype(np.int64), False))
    if kind == "int" and x.size:
        out.append(("dtype:bool", x.astype(bool), False))
    return out


def id_mutations(n: int, x, rng: np.random.Generator) -> list[tuple[str, Any, bool]]:
    """Out-of-range ids at a random position: each must be refused (never wrapped)."""
    x = np.asarray(x)
    if not x.size:
        return []
    i = int(rng.integers(x.size))
    out = []
    for tag, v in ((f"id={n}", n), ("id=-1", -1), ("id=1e9", HUGE)):
        y = x.astype(np.int64).copy()
        y.reshape(-1)[i] = v
        out.append((tag, y, True))
    return out


def size_mutations(x) -> list[tuple[str, Any, bool]]:
    return [
        ("size:bool", True, True),
        ("size:str", "3", True),
        ("size:np.int64", np.int64(x), False),
    ]


def cases(e: Entry, base: dict[str, Any], seed: int) -> list[tuple[str, str, Any, bool]]:
    """Every generated (argument, tag, value, must be refused) of one entry."""
    rng = np.random.default_rng(seed)
    out = []
    for arg, kind in e.arrays.items():
        out += [(arg, t, v, m) for t, v, m in array_mutations(kind, base[arg], rng)]
    for arg, n in e.ids.items():
        out += [(arg, t, v, m) for t, v, m in id_mutations(n, base[arg], rng)]
    for arg in e.sizes:
        out += [(arg, t, v, m) for t, v, m in size_mutations(base[arg])]
    return out


def _call(fn, kw, deadline: float):
    """`fn(**kw)` in a worker thread: ("ok", result) | ("raised", exc) | ("timeout", None)."""
    box: dict[str, Any] = {}

    def run():
        try:
            box["out"] = fn(**kw)
        except BaseException as err:  # noqa: BLE001 - classified by the caller
            box["err"] = err

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(deadline)
    if t.is_alive():
        return "timeout", None
    return ("raised", box["err"]) if "err" in box else ("ok", box["out"])


# a generated tag that the tables' documented acceptances already cover by another name
ALIAS = {"nan@random": "nan", "-inf@random": "inf"}


def classify(e: Entry, arg: str, tag: str, must: bool, status: str, value) -> tuple[str, str]:
    """("refused" | "accepted" | "other", why) for one call's outcome."""
    if status == "timeout":
        return "other", f"no result within {CALL_DEADLINE_S:.0f} s"
    same = (arg, ALIAS.get(tag, tag))
    want = e.documented.get((arg, tag)) or e.documented.get(same)
    if status == "raised":
        err = value
        if isinstance(err, ValueError | TypeError):
            msg = str(err)
            names = (*e.arrays, *e.sizes) if tag.startswith("width") else (arg,)
            if any(a in msg for a in names):
                return "refused", ""
        if want and isinstance(err, want[0]):
            return "accepted", f"documented {want[0].__name__}: {want[1]}"
        return "other", f"{type(err).__name__}: {str(err)[:160]}"
    reason = e.accepts.get((arg, tag)) or e.accepts.get(same)
    if reason:
        if _finite(value):
            return "accepted", reason
        return "other", "silent NaN/inf result"
    if must:
        return "other", "accepted (no error)"
    if not _finite(value):
        return "other", "silent NaN/inf result"
    return "accepted", ""


def contract_fuzz(entries, *, sample: int | None = None) -> dict[str, Any]:
    """Run the generated cases of `entries` (a seeded `sample` per entry, or all)."""
    counts = {"tried": 0, "refused": 0, "accepted": 0, "documented": 0, "other": 0}
    failures = []
    entries = list(entries)
    counts["functions"] = len(entries)
    for k, e in enumerate(entries):
        base = e.example()
        todo = cases(e, base, seed=k)
        if sample is not None and len(todo) > sample:
            pick = np.random.default_rng(1000 + k).choice(len(todo), sample, replace=False)
            todo = [todo[i] for i in sorted(pick)]
        for arg, tag, bad, must in todo:
            status, value = _call(e.fn, dict(base, **{arg: bad}), CALL_DEADLINE_S)
            verdict, why = classify(e, arg, tag, must, status, value)
            counts["tried"] += 1
            counts[verdict] += 1
            # an acceptance with a reason is one the entry documents (exception or input)
            counts["documented"] += verdict == "accepted" and bool(why)
            if verdict == "other":
                failures.append(f"{e.name}({arg}={tag}): {why}")
    return counts | {"failures": failures}


def _report(component, res, record_property, *, tier: str | None):
    counts = {k: res[k] for k in ("tried", "refused", "accepted", "other")}
    record_property("contracts", counts | {"component": component})
    print(
        f"\ncontract fuzz {component}: tried {res['tried']}, refused naming the argument "
        f"{res['refused']}, accepted {res['accepted']}, other {res['other']}"
    )
    documented = res["documented"]
    if tier is not None:  # the committed totals are those of full sweeps only
        record_fuzz_counts(
            "contracts",
            component,
            counts
            | {
                "functions": res["functions"],
                "documented": documented,
                "accepted": res["accepted"] - documented,
            },
            tier=tier,
        )
    assert not res["failures"], "\n".join(res["failures"][:40])


FAST = sorted(set(IN_PROCESS) - SLOW)


@pytest.mark.parametrize("component", FAST)
def test_contract_fuzz_sample(component, record_property):
    """The default tier: a seeded sample of each fast component's generated cases."""
    res = contract_fuzz(IN_PROCESS[component](), sample=SAMPLE_PER_ENTRY)
    _report(component, res, record_property, tier=None)


@pytest.mark.slow
@pytest.mark.parametrize("component", sorted(IN_PROCESS))
def test_contract_fuzz_full(component, record_property):
    _report(component, contract_fuzz(IN_PROCESS[component]()), record_property, tier="slow")


@pytest.mark.slow
@pytest.mark.parametrize("component", sorted(SUBPROCESS))
def test_contract_fuzz_full_in_subprocess(component, record_property):
    from tests.test_fuzz_public_api import _build_kernels_untimed

    _build_kernels_untimed()
    code = (
        "import json, jax; jax.config.update('jax_enable_x64', True)\n"
        "from tests.test_fuzz_public_api import SUBPROCESS\n"
        "from tests.test_fuzz_contracts import contract_fuzz\n"
        f"print('FUZZ=' + json.dumps(contract_fuzz(SUBPROCESS[{component!r}]())))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"process died (rc {proc.returncode}): {proc.stderr[-3000:]}"
    line = next(s for s in proc.stdout.splitlines() if s.startswith("FUZZ="))
    _report(component, json.loads(line[5:]), record_property, tier="slow")


# ------------------------------------------------ sizes of 10**9: refused or bounded

CHILD_MEMORY = 4 << 30  # address-space limit of the child that runs a huge size
CHILD_DEADLINE_S = 90


def huge_size_case(component: str, index: int, arg: str) -> dict[str, str]:
    """In the child: call entry `index` of `component` with `arg` = 10**9."""
    e = {**IN_PROCESS, **SUBPROCESS}[component]()[index]
    base = e.example()
    status, value = _call(e.fn, dict(base, **{arg: HUGE}), CHILD_DEADLINE_S)
    verdict, why = classify(e, arg, "size:1e9", False, status, value)
    return {"verdict": verdict, "why": why}


def _huge_cases():
    out = []
    for component, table in sorted({**IN_PROCESS, **SUBPROCESS}.items()):
        for i, e in enumerate(table()):
            out += [pytest.param(component, i, a, id=f"{e.name}-{a}") for a in e.sizes]
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("component", "index", "arg"), _huge_cases())
def test_a_size_of_1e9_is_refused_or_bounded(component, index, arg, record_property):
    """A size of 10**9 is a ValueError naming it, or a finite result within the deadline
    and the memory limit; an abort, an out-of-memory or a hang is a failure."""
    code = (
        "import json, resource\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({CHILD_MEMORY}, {CHILD_MEMORY}))\n"
        "from tests.test_fuzz_contracts import huge_size_case\n"
        f"print('CASE=' + json.dumps(huge_size_case({component!r}, {index}, {arg!r})))\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=CHILD_DEADLINE_S + 60,
        )
    except subprocess.TimeoutExpired:
        res = {"verdict": "other", "why": "the child did not finish"}
    else:
        line = [s for s in proc.stdout.splitlines() if s.startswith("CASE=")]
        res = (
            json.loads(line[0][5:])
            if line
            else {"verdict": "other", "why": f"child died (rc {proc.returncode})"}
        )
    counts: dict[str, int] = dict.fromkeys(("tried", "refused", "accepted", "other"), 0)
    counts["tried"] = 1
    counts[str(res["verdict"])] += 1
    record_property("contracts", counts | {"component": component})
    e = {**IN_PROCESS, **SUBPROCESS}[component]()[index]
    record_fuzz_case("contracts", component, "size_1e9", f"{e.name}({arg})", str(res["verdict"]))
    assert res["verdict"] != "other", f"{component} entry {index} ({arg}=10**9): {res['why']}"
