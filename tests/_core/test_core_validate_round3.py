"""The shared validation layer of issue #59: ids never wrap, sizes are capped before
allocation, paired lengths match, a bare string is not a sequence of strings, and an
allocation larger than the machine is refused by name."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab._core import (
    AbstractStep,
    Driver,
    available_memory,
    check_ids,
    check_lengths,
    check_memory,
    check_size,
    check_strings,
    run_steps,
)


def test_check_ids_accepts_the_range_and_refuses_wrapping_values():
    np.testing.assert_array_equal(check_ids("ids", [0, 3, 4], 5), [0, 3, 4])
    np.testing.assert_array_equal(check_ids("ids", np.array([[1], [2]]), 5), [[1], [2]])
    for bad in ([0, 5], [-1, 2], [999]):
        with pytest.raises(ValueError, match=r"ids: token ids must lie in \[0, 5\)"):
            check_ids("ids", bad, 5, what="token ids")
    for bad in ("abc", [0.5, 1.0], [True, False], None, [[1, 2], [3]]):
        with pytest.raises(ValueError, match="ids: expected integer"):
            check_ids("ids", bad, 5)


def test_check_ids_under_jit_raises_instead_of_wrapping():
    f = jax.jit(lambda t: check_ids("tokens", t, 5) * 1)
    np.testing.assert_array_equal(f(jnp.array([1, 4])), [1, 4])
    with pytest.raises(Exception, match=r"tokens: ids must lie in \[0, 5\)"):
        jax.block_until_ready(f(jnp.array([1, 5])))


def test_check_size_caps_before_anything_is_allocated():
    assert check_size("n", 7, cap=10) == 7
    with pytest.raises(ValueError, match=r"n: expected at most 10 \(the cap\), received 11"):
        check_size("n", 11, cap=10, why="the cap")
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="n: expected a positive integer"):
            check_size("n", bad, cap=10)


def test_check_lengths_names_every_argument():
    assert check_lengths(a=[1, 2], b=np.zeros((2, 3))) == 2
    with pytest.raises(ValueError, match="features, queries: expected one length, received "
                       "features=7, queries=4"):  # fmt: skip
        check_lengths(features=np.zeros((7, 2)), queries=[1, 2, 3, 4])


def test_check_strings_refuses_a_bare_string():
    assert check_strings("candidates", ["a", "b"]) == ("a", "b")
    with pytest.raises(
        ValueError, match="candidates: expected a sequence of strings, received the string"
    ):
        check_strings("candidates", "abc")
    with pytest.raises(ValueError, match="candidates: expected strings"):
        check_strings("candidates", ["a", 3])
    with pytest.raises(ValueError, match="candidates: expected at least one"):
        check_strings("candidates", [])


def test_check_memory_compares_with_what_the_machine_has():
    have = available_memory()
    # oracle: /proc/meminfo read independently where it exists
    try:
        text = Path("/proc/meminfo").read_text()
        kb = int(next(ln for ln in text.splitlines() if ln.startswith("MemAvailable:")).split()[1])
        assert abs(have - kb * 1024) < 0.2 * kb * 1024  # memory moves between the two reads
    except (OSError, StopIteration):
        assert have > 0
    check_memory("resamples", 1024.0)
    with pytest.raises(ValueError, match="resamples: needs about .* GiB"):
        check_memory("resamples", 10.0 * have)
    with pytest.raises(ValueError, match="resamples: needs about"):
        check_memory("resamples", float("inf"))


def test_check_range_refuses_complex_values():
    from jaxlab._core import check_range

    check_range("p", np.array([0.2, 0.5]), low=0.0, high=1.0)
    with pytest.raises(ValueError, match=r"p: expected real values in \[0.0, 1.0\]"):
        check_range("p", np.array([0.2, 0.5]) + 0j, low=0.0, high=1.0)


def test_as_array_refuses_complex_unless_the_dtype_admits_it():
    from jaxlab._core import as_array

    z = np.array([1.0, 2.0]) + 1j
    with pytest.raises(ValueError, match="x: expected real values, received dtype complex128"):
        as_array("x", z)
    with pytest.raises(ValueError, match="x: expected real values"):
        as_array("x", z, dtype=jnp.floating)
    assert jnp.iscomplexobj(as_array("x", z.astype(np.complex64), dtype=np.number))
    assert jnp.iscomplexobj(as_array("x", z.astype(np.complex64), dtype=jnp.complexfloating))


class _Counter(AbstractStep):
    """state + 1 per step; aux holds a (1000,) float32 row per step (4 kB)."""

    def init(self, model, key):
        return jnp.zeros((), jnp.float32)

    def step(self, state, key):
        return state + 1, {"row": jnp.zeros(1000, jnp.float32) + state}


class _BigRow(_Counter):
    """aux holds a (10**6,) float32 row per step (4 MB)."""

    def step(self, state, key):
        return state + 1, {"row": jnp.zeros(10**6, jnp.float32) + state}


def test_run_steps_bounds_its_history_before_allocating():
    """Issue #59: steps=10**9 allocated (steps,) history rows per aux entry (GiBs) before
    failing; the estimate (steps x bytes per step) is checked against the memory first."""
    step = _Counter()
    state, hist = run_steps(step, step.init(None, None), key=jax.random.key(0), steps=3)
    assert float(state) == 3.0
    np.testing.assert_array_equal(hist.aux["row"][:, 0], [0.0, 1.0, 2.0])
    # beyond the driver's step cap: refused before any step runs (MAX_RUN_STEPS, #59)
    with pytest.raises(ValueError, match=r"^steps: expected at most 10000000"):
        run_steps(
            step, step.init(None, None), key=jax.random.key(0), steps=10**12, driver=Driver(chunk=2)
        )
    # within the cap, a history too large for memory is still refused before allocating
    big = _BigRow()
    with pytest.raises(ValueError, match=r"^steps: needs about 37252\.9 GiB"):
        run_steps(
            big, big.init(None, None), key=jax.random.key(0), steps=10**7, driver=Driver(chunk=2)
        )


def test_available_memory_respects_an_address_space_limit():
    """Under RLIMIT_AS (a child with `ulimit -v`), check_memory refuses what the limit
    would turn into a MemoryError (issue #59: fit(steps=10**9) allocated a 3.7 GiB loss
    history in a 4 GiB child because MemAvailable was larger)."""
    import subprocess
    import sys

    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
        "from jaxlab._core import available_memory, check_memory\n"
        "assert available_memory() <= 4 << 30, available_memory()\n"
        "try:\n"
        "    check_memory('steps', 3.7 * 2**30)\n"
        "except ValueError as e:\n"
        "    assert str(e).startswith('steps: needs about'), e\n"
        "else:\n"
        "    raise SystemExit('not refused')\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
