"""Issue 30 findings 2 and 4: malformed plans, NaN/inf/int anchors, NaN right-hand sides.

Each malformed input must raise a clear error naming the argument (a `ValueError` on
concrete inputs, an `equinox.error_if` or the fused C++ pass's check under `jit`), never
return garbage or zeros. The
C++ kernels read the plan, so the kernel-backed calls run in a subprocess
(`test_malformed_plan_in_subprocess_never_crashes`).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import laplex
from jaxlab._kernels.laplex import CpuScan


def _problem(seed=0, h=2, m=7, n=9):
    rng = np.random.default_rng(seed)
    t = jnp.asarray(rng.uniform(-3, 3, (h, m)))
    s = jnp.asarray(rng.uniform(-3, 3, (h, n)))
    a = jnp.asarray(rng.uniform(0.2, 2.0, h))
    c = jnp.asarray(rng.standard_normal(h))
    v = jnp.asarray(rng.standard_normal(n))
    return v, t, s, a, c


def _broken_plans(plan):
    n = plan.perm_s.shape[1]
    yield (
        "plan.perm_s",
        plan.__class__(
            plan.perm_s.at[0, 0].set(n + 5), plan.rank_t, plan.perm_t, plan.rank_s, plan.presorted_s
        ),
    )
    yield (
        "plan.perm_s",
        plan.__class__(
            plan.perm_s.at[0, 1].set(plan.perm_s[0, 0]),  # duplicate: not a permutation
            plan.rank_t,
            plan.perm_t,
            plan.rank_s,
            plan.presorted_s,
        ),
    )
    yield (
        "plan.perm_t",
        plan.__class__(
            plan.perm_s, plan.rank_t, plan.perm_t.at[1, 2].set(-1), plan.rank_s, plan.presorted_s
        ),
    )
    yield (
        "plan.rank_t",
        plan.__class__(
            plan.perm_s, plan.rank_t.at[0, 0].set(n + 1), plan.perm_t, plan.rank_s, plan.presorted_s
        ),
    )
    yield (
        "plan.perm_s",
        plan.__class__(
            plan.perm_s.astype(jnp.float32), plan.rank_t, plan.perm_t, plan.rank_s, plan.presorted_s
        ),
    )


def test_malformed_plan_raises_value_error_naming_the_field():
    v, t, s, a, c = _problem()
    plan = laplex.make_plan(t, s)
    for field, bad in _broken_plans(plan):
        with pytest.raises(ValueError, match=f"^{field}: expected"):
            laplex.matvec(v, t, s, a, c=c, plan=bad)


def test_plan_of_other_anchors_is_refused():
    v, t, s, a, c = _problem()
    other = laplex.make_plan(t, -s)  # well formed, but sorts other anchors
    with pytest.raises(ValueError, match="^plan: expected a plan of these anchors"):
        laplex.matvec(v, t, s, a, c=c, plan=other)
    with pytest.raises(ValueError, match="^plan: expected a LaplexPlan"):
        laplex.matvec(v, t, s, a, c=c, plan=(1, 2))


@pytest.mark.parametrize("scan", ["default", "blocked"])
def test_malformed_plan_under_jit_raises(scan):
    # as `matvec` documents: the fused C++ pass (the default on CPU) checks the plan it
    # reads and fails the compiled call (JaxRuntimeError from the compiling call, ValueError
    # later); other strategies keep equinox.error_if; the message is the same
    v, t, s, a, c = _problem()
    plan = laplex.make_plan(t, s)
    strategy = laplex.default_scan() if scan == "default" else laplex.BlockedScan()
    f = eqx.filter_jit(lambda p: laplex.matvec(v, t, s, a, c=c, plan=p, scan=strategy))
    np.testing.assert_allclose(f(plan), laplex.dense_matrix(t, s, a, None, c) @ v, rtol=1e-10)
    fused = isinstance(strategy, CpuScan) and strategy.fused
    errors = (jax.errors.JaxRuntimeError, ValueError) if fused else eqx.EquinoxRuntimeError
    for _, bad in list(_broken_plans(plan))[:4]:
        with pytest.raises(errors, match="plan: expected perm_s/perm_t"):
            jax.block_until_ready(f(bad))


def test_update_plan_re_sorts_a_malformed_plan():
    v, t, s, a, c = _problem()
    plan = laplex.make_plan(t, s)
    _, dup = list(_broken_plans(plan))[1]  # duplicate entry: sorted-looking, not a permutation
    assert not bool(laplex.plan_is_valid(dup, t, s))
    fixed = laplex.update_plan(dup, t, s)
    np.testing.assert_array_equal(fixed.perm_s, plan.perm_s)


def test_malformed_plan_in_subprocess_never_crashes():
    """The fused C++ path with out-of-range permutations, in a child process."""
    code = textwrap.dedent(
        """
        import jax, jax.numpy as jnp, numpy as np, equinox as eqx
        jax.config.update("jax_enable_x64", True)
        from jaxlab import laplex
        rng = np.random.default_rng(0)
        t = jnp.asarray(rng.uniform(-3, 3, (2, 50)))
        v = jnp.asarray(rng.standard_normal(50))
        a, c = jnp.ones(2), jnp.ones(2)
        plan = laplex.make_plan(t, t)
        bad = laplex.LaplexPlan(plan.perm_s.at[:, :10].set(10**6), plan.rank_t,
                                plan.perm_t.at[:, :10].set(-7), plan.rank_s, plan.presorted_s)
        f = eqx.filter_jit(lambda p: laplex.matvec(v, t, t, a, c=c, plan=p))
        for call in (lambda: laplex.matvec(v, t, t, a, c=c, plan=bad), lambda: f(bad)):
            try:
                call()
            except (ValueError, eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError) as e:
                assert "plan" in str(e), e
            else:
                raise SystemExit("malformed plan accepted")
        print("ok")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("ok")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_anchors_raise_under_jit(bad):
    v, t, s, a, c = _problem()
    tb = t.at[0, 3].set(bad)
    sb = s.at[1, 0].set(bad)
    f = eqx.filter_jit(lambda t, s: laplex.matvec(v, t, s, a, c=c))
    with pytest.raises(eqx.EquinoxRuntimeError, match="t: expected finite values"):
        f(tb, s)
    with pytest.raises(eqx.EquinoxRuntimeError, match="s: expected finite values"):
        f(t, sb)
    with pytest.raises(eqx.EquinoxRuntimeError, match="t: expected finite values"):
        eqx.filter_jit(lambda t: laplex.matvec(v[:7], t, t, a, c=c))(tb)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nonfinite_anchors_raise_under_grad_without_plan(bad):
    # on the fused CPU strategy the plan-less checks hang on the decays, not the anchors:
    # the sorts inside (the gradient's fresh plan, fused_sym_fresh) run on the bad anchors
    # and must end, the call then raising the same error
    v, t, s, a, c = _problem()
    tb = t.at[1, 2].set(bad)

    def loss(v, t, s):
        return jnp.sum(laplex.matvec(v, t, s, a, c=c, scan=CpuScan()) ** 2)

    def loss_sym(v, t):  # t is s: one sort
        return jnp.sum(laplex.matvec(v, t, t, a, c=c, scan=CpuScan()) ** 2)

    with pytest.raises(eqx.EquinoxRuntimeError, match="t: expected finite values"):
        eqx.filter_jit(jax.grad(loss, argnums=(0, 1)))(v, tb, s)
    with pytest.raises(eqx.EquinoxRuntimeError, match="t: expected finite values"):
        eqx.filter_jit(jax.grad(loss_sym, argnums=(0, 1)))(v[:7], tb)
    with pytest.raises(eqx.EquinoxRuntimeError, match="t: expected finite values"):
        eqx.filter_jit(lambda v, t: laplex.matvec(v, t, t, a, c=c, scan=CpuScan()))(v[:7], tb)


def test_make_plan_rejects_nonfinite_and_integer_anchors():
    _, t, s, _, _ = _problem()
    with pytest.raises(ValueError, match="^t: expected finite values"):
        laplex.make_plan(t.at[0, 0].set(jnp.nan), s)
    with pytest.raises(ValueError, match="^s: expected finite values"):
        laplex.make_plan(t, s.at[0, 0].set(jnp.inf))
    with pytest.raises(ValueError, match="^t: expected dtype floating, received int"):
        laplex.make_plan(jnp.arange(6).reshape(2, 3), s)
    with pytest.raises(ValueError, match=r"^s: expected shape \('H=2', 'N'\)"):
        laplex.make_plan(t, s[:1])
    with pytest.raises(eqx.EquinoxRuntimeError, match="t: expected finite values"):
        eqx.filter_jit(laplex.make_plan)(t.at[0, 0].set(jnp.nan), s)
    # lists are converted once at the boundary and give the same plan
    same = laplex.make_plan(np.asarray(t).tolist(), np.asarray(s).tolist())
    np.testing.assert_array_equal(same.perm_s, laplex.make_plan(t, s).perm_s)


def test_conjugate_gradient_rejects_nan_b():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((5, 5))
    mat = jnp.asarray(q @ q.T + 5 * np.eye(5))
    b = jnp.asarray(rng.standard_normal(5))
    x, _ = laplex.conjugate_gradient(lambda z: mat @ z, b, tol=1e-12)
    np.testing.assert_allclose(x, np.linalg.solve(np.asarray(mat), np.asarray(b)), rtol=1e-8)
    with pytest.raises(ValueError, match="^b: expected finite values"):
        laplex.conjugate_gradient(lambda z: mat @ z, b.at[2].set(jnp.nan))
    cg = eqx.filter_jit(lambda b: laplex.conjugate_gradient(lambda z: mat @ z, b)[0])
    with pytest.raises(eqx.EquinoxRuntimeError, match="b: expected finite values"):
        cg(b.at[2].set(jnp.nan))
    with pytest.raises(eqx.EquinoxRuntimeError, match="iterate became NaN/inf"):
        eqx.filter_jit(lambda b: laplex.conjugate_gradient(lambda z: z * jnp.nan, b)[0])(b)
    with pytest.raises(ValueError, match="^maxiter: expected a positive integer"):
        laplex.conjugate_gradient(lambda z: mat @ z, b, maxiter=0)
    # a b the operator does not fit (the contract fuzz of issue #59: a TypeError from
    # inside the caller's matmul before)
    for bad in (b[:4], jnp.concatenate([b, b[:1]])):
        with pytest.raises(ValueError, match=r"^b: the operator `mv` does not accept b of shape"):
            laplex.conjugate_gradient(lambda z: mat @ z, bad)
    with pytest.raises(ValueError, match=r"^b: expected the shape mv\(b\) returns"):
        laplex.conjugate_gradient(lambda z: jnp.concatenate([mat @ z, z]), b)


def test_traced_checks_can_be_switched_off_for_hot_loops():
    # issue 30 Build 1: the traced value checks (decays, anchors, plan) are on by default
    # and `traced_checks=False` (an explicit keyword, no global switch) skips them
    v, t, s, a, c = _problem()
    plan = laplex.make_plan(t, s)

    def call(a, checks=True):
        return laplex.matvec(v, t, s, a, c=c, plan=plan, traced_checks=checks)

    want = laplex.dense_matrix(t, s, a, None, c) @ v
    fast = eqx.filter_jit(lambda a: call(a, checks=False))
    np.testing.assert_allclose(fast(a), want, rtol=1e-10)  # same result without checks
    fast(-a)  # a negative decay is no longer caught (the price of the opt-out)
    checked = eqx.filter_jit(call)
    with pytest.raises(eqx.EquinoxRuntimeError, match="a: decays must be > 0"):
        checked(-a)


# ---- the public-API fuzz of issue #59 (laplex table, second round): each case below was
# silent garbage or a confusing error before its fix


def _spd_mv(z):
    return (3.0 * jnp.eye(4, dtype=z.dtype) + 0.1) @ z


def test_dense_matrix_checks_the_kernel_like_matvec():
    t, s, a, c = (jnp.asarray(x) for x in ([[0.0, 1.0]], [[0.5, 2.0, 3.0]], [1.0], [1.0]))
    with pytest.raises(ValueError, match="^t: expected finite"):  # a NaN row silently
        laplex.dense_matrix(t.at[0, 0].set(jnp.nan), s, a, c=c)
    with pytest.raises(ValueError, match="^a: expected values in"):  # exp(+|d|) grows silently
        laplex.dense_matrix(t, s, -a, c=c)
    with pytest.raises(ValueError, match="^c"):  # a (1, 1) weight broadcast silently
        laplex.dense_matrix(t, s, a, c=c[None])
    with pytest.raises(ValueError, match="^s"):  # AttributeError: list has no shape
        laplex.dense_matrix(t, None, a, c=c)  # type: ignore[arg-type]


def test_lanczos_family_checks_vector_and_sizes():
    z = jnp.ones(4)
    with pytest.raises(ValueError, match="^z"):  # a NaN basis silently
        laplex.lanczos(_spd_mv, jnp.zeros(4), 3)
    with pytest.raises(ValueError, match="^z"):
        laplex.lanczos_sqrt_apply(_spd_mv, z.at[1].set(jnp.inf), 3)
    with pytest.raises(ValueError, match="^steps"):  # steps=0 gave empty garbage
        laplex.lanczos(_spd_mv, z, 0)
    with pytest.raises(ValueError, match="^steps: needs about"):  # allocated first
        laplex.lanczos(_spd_mv, z, 10**12)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="^n"):  # a float size reached jax.random
        laplex.slq_logdet(_spd_mv, 2.5, key=key)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^probes: needs about"):  # allocated first
        laplex.slq_logdet(_spd_mv, 4, key=key, probes=10**12, steps=3)


def test_plan_helpers_check_anchors():
    t = jnp.asarray([[0.0, 1.0, 2.0]])
    plan = laplex.make_plan(t, t)
    with pytest.raises(ValueError, match="^t"):  # NaN anchors read as "plan valid"
        laplex.plan_is_valid(plan, t.at[0, 0].set(jnp.nan), t)
    with pytest.raises(ValueError, match="^s"):  # a vmap size error naming nothing
        laplex.update_plan(plan, t, jnp.zeros((2, 3)))
    with pytest.raises(ValueError, match="^plan.perm_s"):  # a plan of other anchors
        laplex.plan_is_valid(plan, t[:, :2], t[:, :2])


def test_fit_head_refuses_labels_outside_the_classes():
    model = laplex.LaplexLinear(4, 3, 1, key=jax.random.key(0), dtype=jnp.float64)
    x = jnp.asarray(np.random.default_rng(0).standard_normal((3, 4)))
    for bad in ([0, 1, 3], [0, -1, 2]):  # class 3 of 3 / -1: a silently wrong loss
        with pytest.raises(ValueError, match="^y: class labels must lie in"):
            laplex.fit_head(model, x, jnp.asarray(bad), steps=1)
    with pytest.raises(ValueError, match="^x"):  # a NaN loss
        laplex.fit_head(model, x.at[0, 0].set(jnp.nan), jnp.asarray([0, 1, 2]), steps=1)


def test_sharded_matvec_takes_lists_like_matmat():
    rng = np.random.default_rng(1)
    t, s = rng.uniform(-2, 2, (1, 3)), rng.uniform(-2, 2, (1, 4))
    v = rng.standard_normal((4, 2))
    want = laplex.matmat(v, t, s, [1.0], c=[1.0])
    got = laplex.sharded_matvec(v.tolist(), t, s, [1.0], c=[1.0])  # was AttributeError
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_lanczos_names_a_vector_the_operator_does_not_take():
    with pytest.raises(ValueError, match="^z: the operator"):  # a dot_general TypeError
        laplex.lanczos(_spd_mv, jnp.ones(3), 2)
    with pytest.raises(ValueError, match="^z: the operator"):
        laplex.lanczos_sqrt_apply(_spd_mv, jnp.ones(5), 2)
    with pytest.raises(ValueError, match="^n: the operator"):
        laplex.slq_logdet(_spd_mv, 5, key=jax.random.key(0), dtype=jnp.float64)


@pytest.mark.parametrize("backend", ["abc", "", 3, True])
def test_default_scan_refuses_an_unknown_backend(backend):
    """Issue #59: `default_scan("abc")` picked `PallasScan` silently (any name but "cpu"
    did) and `default_scan(3)` compared an int to "cpu"; now a ValueError names it."""
    with pytest.raises(ValueError, match="^backend: expected"):
        laplex.default_scan(backend)


def test_default_scan_still_picks_per_platform():
    for platform in ("gpu", "cuda", "tpu"):  # no kernel build: "cpu" may compile C++
        assert type(laplex.default_scan(platform)).__name__ == "PallasScan"


def test_a_device_platform_outside_the_named_list_still_gets_a_scan():
    """The sharded path picks its scan from `devices[0].platform`, which a JAX plugin may
    name as it likes: only a caller's name is checked, never a platform JAX reports."""
    from jaxlab._kernels.laplex import scan_for_platform

    assert type(scan_for_platform("neuron")).__name__ == "PallasScan"
