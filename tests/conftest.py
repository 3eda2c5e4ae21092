"""Shared test configuration (DESIGN.md §3).

- strict dtype promotion: implicit mixed-dtype promotion is an error;
- implicit rank promotion raises (`jax_numpy_rank_promotion="raise"`): broadcasting is
  written out in library code;
- float64 enabled so that oracles (dense matrices, finite differences) are exact
  enough to be meaningful; library code states its dtypes explicitly;
- `getkey`: a fresh PRNG key per call, deterministic per test;
- `tree_allclose`: pytree comparison helper;
- compiled executables are dropped after every test module (`jax.clear_caches`): each
  XLA:CPU executable holds ~3 memory mappings, and one process running the whole suite
  compiles enough of them to pass Linux's `vm.max_map_count` (65530), after which the
  next compilation segfaults inside XLA;
- XLA:CPU's LLVM backend runs at -O0 (`--xla_backend_optimization_level=0`, unless
  XLA_FLAGS already sets a level): with the tests' tiny shapes, compiling is most of the
  suite's time and -O0 roughly halves it (tests/stereo/test_stereo_raft.py: 112 -> 62 s
  of CPU, tests/topology's step checks 46 -> 23 s); it only sets LLVM's optimisation
  level (the HLO passes are the same), so results can differ from -O3 in the last bits
  (e.g. FMA contraction), never beyond an oracle tolerance. Subprocesses that the tests
  start (the examples) inherit it through the environment.
"""

from __future__ import annotations

import gc
import itertools
import os
import zlib

# before jax creates its CPU client, which reads XLA_FLAGS once
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
    ).strip()

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_enable_x64", True)
# implicit rank promotion (a (d,) bias added to a (T, d) array) is an error, as in diffrax
jax.config.update("jax_numpy_rank_promotion", "raise")


def tree_allclose(x, y, *, rtol=1e-5, atol=1e-8) -> bool:
    """True when both pytrees have the same structure and all leaves are close."""
    lx, tx = jax.tree_util.tree_flatten(x)
    ly, ty = jax.tree_util.tree_flatten(y)
    if tx != ty:
        return False
    for a, b in zip(lx, ly, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
            return False
    return True


# Each XLA:CPU executable holds ~3 memory mappings; one process compiling the whole suite
# passes Linux's vm.max_map_count (65530) and segfaults inside the compiler. Dropping the
# compiled executables after every module kept the count under ~3,600, but also forced
# modules of one component to recompile what their neighbours had compiled. So the caches
# are dropped only once the process holds more than _MAX_MAPPINGS mappings (and after
# every module where /proc is unavailable).
_MAX_MAPPINGS = 20_000


def _n_mappings() -> int | None:
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_executables():
    yield
    n = _n_mappings()
    if n is None or n > _MAX_MAPPINGS:
        jax.clear_caches()
        gc.collect()


@pytest.fixture
def getkey(request):
    """`getkey()` returns a new key each call; the sequence is fixed per test."""
    # crc32, not hash(): str hashes are salted per process, and tests must be reproducible.
    seed = zlib.crc32(request.node.nodeid.encode()) % (2**31)
    counter = itertools.count()
    base = jax.random.key(seed)

    def _getkey():
        return jax.random.fold_in(base, next(counter))

    return _getkey


@pytest.fixture(name="tree_allclose")
def _tree_allclose_fixture():
    return tree_allclose


__all__ = ["tree_allclose", "jnp"]


# ---------------------------------------------------------------- robustness totals
# The fuzz suite (tests/test_fuzz_public_api.py) and the corrupted-file sweeps
# (tests/corruption.py) hand their counts to the report with `record_property`
# ("fuzz" / "corruption"); they travel with the test reports, also from xdist workers,
# and are summed here at the end of the session (each test asserts its unhandled == 0).
_TOTALS = {
    "fuzz": ("tried", "clean", "documented", "unhandled"),
    "corruption": ("tried", "value_error", "documented", "unhandled"),
    "contracts": ("tried", "refused", "accepted", "other"),
}


def robustness_totals(reports) -> dict[str, dict[str, int]]:
    """Per suite, the sum of the counts the call reports of `reports` carry."""
    out: dict[str, dict[str, int]] = {}
    for rep in reports:
        if getattr(rep, "when", None) != "call":
            continue
        for name, value in getattr(rep, "user_properties", ()):
            if name in _TOTALS:
                t = out.setdefault(name, dict.fromkeys(_TOTALS[name], 0) | {"tests": 0})
                t["tests"] += 1
                for k in _TOTALS[name]:
                    t[k] += int(value[k])
    return out


def pytest_terminal_summary(terminalreporter):
    reports = [r for key in ("passed", "failed") for r in terminalreporter.stats.get(key, [])]
    totals = robustness_totals(reports)
    if not totals:
        return
    terminalreporter.section("robustness totals (issue 30)")
    for name, t in sorted(totals.items()):
        counts = ", ".join(f"{k} {t[k]}" for k in _TOTALS[name])
        terminalreporter.write_line(f"{name}: {counts} (over {t['tests']} tests)")
