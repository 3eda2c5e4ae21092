"""Checks every public step object must pass (used by each component's tests).

`check_step(step, state, key=..., steps=..., tmp_path=...)` runs the step through
`jaxlab._core.run_steps` and asserts, against an uninterrupted reference run:

- chunk size does not change the results (chunks of steps/2 and steps/2 - 1, bit for bit);
- interrupt-then-resume equals the uninterrupted run bit for bit (killed after the
  first checkpoint, resumed from it), and after the last checkpoint a resume runs
  nothing and returns the same state;
- `History` arrays have `steps` rows and no NaN.
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np

from jaxlab._core import AbstractStep, Checkpointer, Driver, run_steps


class _Kill(Exception):
    pass


def _leaves(tree):
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_array))]


def assert_trees_equal(a, b):
    la, lb = _leaves(a), _leaves(b)
    assert len(la) == len(lb)
    for u, v in zip(la, lb, strict=True):
        np.testing.assert_array_equal(u, v)


def check_step(step: AbstractStep, state, *, key, steps: int, tmp_path, loop=None) -> None:
    """Assert chunk independence and exact resume for `step` from `state` (see module)."""
    assert isinstance(step, AbstractStep)
    assert steps >= 4
    assert steps % 2 == 0
    half = steps // 2
    # Two chunk sizes, `half` (reused by the checkpointed runs below, so compiled once for
    # all of them: compiling is the most expensive part of these checks) and `half - 1`.
    ref_state, ref = run_steps(
        step, state, key=key, steps=steps, driver=Driver(chunk=half, loop=loop)
    )
    other_state, other = run_steps(
        step,
        state,
        key=key,
        steps=steps,
        driver=Driver(chunk=half - 1 or 1, loop=loop),
    )
    assert_trees_equal(ref_state, other_state)
    for name, v in ref.aux.items():
        assert v.shape[0] == steps, name
        np.testing.assert_array_equal(v, other.aux[name])
        if np.issubdtype(v.dtype, np.inexact):
            assert not np.isnan(v).any(), name

    ck = Checkpointer(tmp_path / f"{type(step).__name__}.eqx", every=half, resume=True)

    calls = []

    def kill(s):  # returns False after the first chunk (checkpoint saved), raises after the 2nd
        del s
        calls.append(1)
        if len(calls) == 2:
            raise _Kill
        return False

    try:
        run_steps(
            step,
            state,
            key=key,
            steps=steps,
            driver=Driver(chunk=half, checkpointer=ck, stop=kill, loop=loop),
        )
    except _Kill:
        pass
    else:  # pragma: no cover - the stop callable always raises
        raise AssertionError("kill did not fire")
    assert ck.exists()
    # Killed after the second chunk ran but before its checkpoint: resume from the first
    # checkpoint; then once more after the end (runs nothing, same results).
    res_state, res = run_steps(
        step,
        state,
        key=key,
        steps=steps,
        driver=Driver(chunk=half, checkpointer=ck, loop=loop),
    )
    assert_trees_equal(ref_state, res_state)
    again_state, again = run_steps(
        step,
        state,
        key=key,
        steps=steps,
        driver=Driver(chunk=half, checkpointer=ck, loop=loop),
    )
    assert_trees_equal(ref_state, again_state)
    for name, v in ref.aux.items():
        np.testing.assert_array_equal(v, res.aux[name])
        np.testing.assert_array_equal(v, again.aux[name])
