"""Issue 32 / issue 30 item 2: the reused-plan check inside the fused C++ passes.

With the fused CPU strategy (`CpuScan(fused=True)`, the default on CPU) a plan reaching
`matvec` as a traced value is checked inside the C++ passes, each field before a pass
reads it (`check` attribute of the FFI calls, `kernels/laplex/laplex_check.h`), not by
the XLA scatter-add of `plan_error_if`. A malformed plan fails the compiled call with an
error whose text holds `plan_error_if`'s message and names the field and head
(`jax.errors.JaxRuntimeError` from the call that compiles, `ValueError` from later calls
of the compiled executable: jaxlib maps the kernel's INVALID_ARGUMENT status so); a
concrete plan still raises `ValueError` eagerly (`check_plan`); other strategies keep
`plan_error_if` (`equinox.EquinoxRuntimeError`). Valid plans give bitwise the results of
the unchecked pass, which match the dense float64 matrix.
"""

from __future__ import annotations

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import laplex
from jaxlab._kernels.laplex import cpu_kernel_available, fused_apply, fused_parts, fused_sym
from jaxlab.laplex._plan import PLAN_MALFORMED

from .test_laplex_matvec import _dense_np, _rel

pytestmark = pytest.mark.skipif(not cpu_kernel_available(), reason="no C++ compiler")

FIELDS = ("perm_s", "rank_t", "perm_t", "rank_s")
KERNEL_ERRORS = (jax.errors.JaxRuntimeError, ValueError)  # as documented in `matvec`


def _problem(sym, *, h=2, m=7, n=9, seed=0):
    rng = np.random.default_rng(seed)
    s = jnp.asarray(rng.uniform(-3, 3, (h, n)))
    t = s if sym else jnp.asarray(rng.uniform(-3, 3, (h, m)))
    a = jnp.asarray(rng.uniform(0.2, 2.0, h))
    c = jnp.asarray(rng.standard_normal(h))
    v = jnp.asarray(rng.standard_normal(n))
    return v, t, s, a, c


def _replace(plan, field, value):
    parts = {k: getattr(plan, k) for k in FIELDS}
    parts[field] = value
    return laplex.LaplexPlan(**parts, presorted_s=plan.presorted_s)


def _defects(plan):
    """(field, head, kind, malformed plan): every defect in every field and head."""
    for field in FIELDS:
        x = getattr(plan, field)
        length = x.shape[1]
        hi = plan.perm_t.shape[1] if field == "rank_s" else plan.perm_s.shape[1]
        for head in range(x.shape[0]):
            if field.startswith("perm"):
                yield field, head, "outside", _replace(plan, field, x.at[head, 3].set(length))
                yield field, head, "outside", _replace(plan, field, x.at[head, 0].set(-1))
                dup = x.at[head, 1].set(x[head, 4])  # a duplicate: not a permutation
                yield field, head, "repeats", _replace(plan, field, dup)
            else:
                yield field, head, "outside", _replace(plan, field, x.at[head, 2].set(hi + 1))
                yield field, head, "outside", _replace(plan, field, x.at[head, 0].set(-3))


def _kernel_error(field, head, kind):
    return re.escape(PLAN_MALFORMED) + f".*plan.{field}, head {head}: .*{kind}"


def _read_by_matvec(sym):
    """The plan fields the forward pass reads (`matvec`'s docstring)."""
    return ("perm_s",) if sym else ("perm_s", "rank_t", "perm_t")


@pytest.mark.parametrize("sym", [True, False])
def test_malformed_plan_under_jit_raises_the_plan_message_from_the_kernel(sym):
    v, t, s, a, c = _problem(sym)
    plan = laplex.make_plan(t, s)
    f = jax.jit(lambda p: laplex.matvec(v, t, t if sym else s, a, c=c, plan=p))
    want = _dense_np(np.asarray(v)[:, None], t, s, a, None, c)[:, 0]
    assert _rel(f(plan), want) < 1e-12
    raised = 0
    for field, head, kind, bad in _defects(plan):
        if field in _read_by_matvec(sym):
            with pytest.raises(KERNEL_ERRORS, match=_kernel_error(field, head, kind)):
                jax.block_until_ready(f(bad))
            raised += 1
        else:  # a field the pass does not read: not checked, and the result is unchanged
            assert _rel(f(bad), want) < 1e-12
    assert raised == 2 * (3 if sym else 3 + 2 + 3)


@pytest.mark.parametrize("sym", [True, False])
def test_malformed_plan_under_grad_raises_for_every_field(sym):
    # the gradient passes read all four fields: every defect in every head is refused,
    # also by a grad whose forward value is unused (and so dropped by XLA)
    v, t, s, a, c = _problem(sym)
    plan = laplex.make_plan(t, s)

    def loss(v, a, p):
        return jnp.sum(laplex.matvec(v, t, t if sym else s, a, c=c, plan=p))

    g = jax.jit(jax.grad(loss, argnums=(0, 1)))
    jax.block_until_ready(g(v, a, plan))
    count = 0
    for field, head, kind, bad in _defects(plan):
        with pytest.raises(KERNEL_ERRORS, match=_kernel_error(field, head, kind)):
            jax.block_until_ready(g(v, a, bad))
        count += 1
    assert count == 2 * (3 + 2 + 3 + 2)


@pytest.mark.parametrize("sym", [True, False])
def test_malformed_concrete_plan_raises_value_error_eagerly(sym):
    v, t, s, a, c = _problem(sym)
    plan = laplex.make_plan(t, s)
    for field, _, _, bad in _defects(plan):
        with pytest.raises(ValueError, match=f"^plan.{field}: expected"):
            laplex.matvec(v, t, t if sym else s, a, c=c, plan=bad)


def test_fused_calls_check_eagerly_when_asked():
    v, t, s, a, c = _problem(False)
    plan = laplex.make_plan(t, s)
    x = v[:, None]
    args = (x, t, s, a, c, plan.perm_s, plan.rank_t)
    y = fused_apply(*args, plan.perm_t, check=True)
    assert _rel(y, _dense_np(x, t, s, a, None, c)) < 1e-12
    bad = plan.perm_t.at[1, 2].set(plan.perm_t[1, 5])
    with pytest.raises(KERNEL_ERRORS, match=_kernel_error("perm_t", 1, "repeats")):
        jax.block_until_ready(fused_apply(*args, bad, check=True))
    jax.block_until_ready(fused_apply(*args, bad))  # unchecked: clamped, no error
    sp = laplex.make_plan(s, s)
    with pytest.raises(KERNEL_ERRORS, match=_kernel_error("perm_s", 0, "outside")):
        fused_sym(x, s, a, c, sp.perm_s.at[0, 0].set(99), sp.presorted_s, check=True)
    # the transposed gradient call names the plan's fields, not its argument roles
    bad_rank = plan.rank_s.at[1, 0].set(-3)
    kw = {"jordan": False, "tie": True, "check": True, "transposed": True}
    with pytest.raises(KERNEL_ERRORS, match=_kernel_error("rank_s", 1, "outside")):
        fused_parts(x[:7], s, t, a, plan.perm_t, bad_rank, plan.perm_s, **kw)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("presorted", [True, False])
@pytest.mark.parametrize("threads", ["1", "3"])
def test_valid_plan_checked_equals_unchecked_bitwise(dtype, sym, presorted, threads, monkeypatch):
    # several threads split the check (JAXLAB_LAPLEX_THREADS drops the size threshold)
    monkeypatch.setenv("JAXLAB_LAPLEX_THREADS", threads)
    rng = np.random.default_rng(5)
    h, m, n = 2, 1500, 1300
    s = rng.uniform(0, 100, (h, n))
    t = s if sym else rng.uniform(0, 100, (h, m))
    if presorted:
        s = np.sort(s, axis=1)
        t = s if sym else np.sort(t, axis=1)
    sj = jnp.asarray(s, dtype)
    tj = sj if sym else jnp.asarray(t, dtype)
    a = jnp.asarray(rng.uniform(0.2, 2.0, h), dtype)
    c = jnp.asarray(rng.standard_normal(h), dtype)
    v = jnp.asarray(rng.standard_normal(n), dtype)
    plan = laplex.make_plan(tj, sj)
    outs = {}
    for checks in (True, False):
        f = jax.jit(
            lambda v, t, s, a, p, checks=checks: laplex.matvec(
                v, t, t if sym else s, a, c=c, plan=p, traced_checks=checks
            )
        )
        outs[checks] = np.asarray(f(v, tj, sj, a, plan))
    np.testing.assert_array_equal(outs[True], outs[False])
    tol = 1e-12 if dtype == jnp.float64 else 2e-5
    assert _rel(outs[True], _dense_np(np.asarray(v)[:, None], tj, sj, a, None, c)[:, 0]) < tol


@pytest.mark.parametrize("sym", [True, False])
def test_checks_off_runs_a_malformed_plan_without_raising(sym):
    # traced_checks=False: the kernels clamp every index (memory safe) and do not check
    v, t, s, a, c = _problem(sym)
    plan = laplex.make_plan(t, s)
    f = jax.jit(lambda p: laplex.matvec(v, t, t if sym else s, a, c=c, plan=p, traced_checks=False))
    want = _dense_np(np.asarray(v)[:, None], t, s, a, None, c)[:, 0]
    assert _rel(f(plan), want) < 1e-12
    bad = _replace(plan, "perm_s", plan.perm_s.at[0, 0].set(10**6))
    assert jax.block_until_ready(f(bad)).shape == want.shape


def test_other_strategies_keep_plan_error_if():
    v, t, s, a, c = _problem(False)
    plan = laplex.make_plan(t, s)
    f = eqx.filter_jit(lambda p: laplex.matvec(v, t, s, a, c=c, plan=p, scan=laplex.BlockedScan()))
    bad = _replace(plan, "rank_t", plan.rank_t.at[0, 0].set(99))
    with pytest.raises(eqx.EquinoxRuntimeError, match=re.escape(PLAN_MALFORMED)):
        f(bad)


def test_nonfinite_anchors_with_a_reused_plan_raise_under_jit():
    # the finiteness check of reused-plan anchors hangs on `a` (no copy of the anchors)
    v, t, s, a, c = _problem(False)
    plan = laplex.make_plan(t, s)
    f = eqx.filter_jit(lambda t, s, p: laplex.matvec(v, t, s, a, c=c, plan=p))
    with pytest.raises(eqx.EquinoxRuntimeError, match="t: expected finite values"):
        f(t.at[1, 2].set(jnp.nan), s, plan)
    with pytest.raises(eqx.EquinoxRuntimeError, match="s: expected finite values"):
        f(t, s.at[0, 0].set(jnp.inf), plan)
