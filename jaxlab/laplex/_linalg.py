"""Matvec-only linear algebra: conjugate gradients, Lanczos, SLQ log-determinant."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, PRNGKeyArray

from jaxlab._core import (
    as_array,
    check_memory,
    check_positive_int,
    check_range,
    error_if_not_finite,
)

__all__ = ["conjugate_gradient", "lanczos", "slq_logdet", "lanczos_sqrt_apply"]

Matvec = Callable[[Array], Array]


def conjugate_gradient(
    mv: Matvec, b: Float[Array, " N"], *, tol: float = 1e-6, maxiter: int = 500
) -> tuple[Float[Array, " N"], Array]:
    """Solve `A x = b` for symmetric positive definite `A` given only `mv(v) = A v`.

    Stops when `||r|| <= tol ||b||` or after `maxiter` iterations.

    **Returns:** `(x, iterations)`.

    `b` must be a finite (N,) vector (`ValueError` for concrete inputs, `equinox.error_if`
    under `jit`); a NaN/inf iterate (e.g. `mv` not positive definite) raises through
    `equinox.error_if` instead of being returned.
    """
    b = as_array("b", b, ndim=1, dtype=jnp.inexact, finite=True)
    if b.shape[0] == 0:
        raise ValueError("b: expected a non-empty (N,) vector, received shape (0,)")
    check_range("tol", tol, low=0.0)
    check_positive_int("maxiter", maxiter)
    b = error_if_not_finite("b", b)
    _check_operator(mv, "b", b)
    bnorm = jnp.linalg.norm(b)

    def cond(state):
        _, r, _, rs, k = state
        return (jnp.sqrt(rs) > tol * bnorm) & (k < maxiter)

    def body(state):
        x, r, p, rs, k = state
        ap = mv(p)
        alpha = rs / jnp.vdot(p, ap)
        x = x + alpha * p
        r = r - alpha * ap
        rs_new = jnp.vdot(r, r)
        p = r + (rs_new / rs) * p
        return x, r, p, rs_new, k + 1

    x0 = jnp.zeros_like(b)
    state = (x0, b, b, jnp.vdot(b, b), jnp.asarray(0))
    x, *_, k = lax.while_loop(cond, body, state)
    x = eqx.error_if(x, ~jnp.all(jnp.isfinite(x)), "conjugate_gradient: the iterate became NaN/inf")
    return x, k


def _check_operator(mv: Matvec, name: str, x: Array | jax.ShapeDtypeStruct) -> None:
    """Raise a `ValueError` naming `name` unless `mv` maps a vector shaped like `x` to one
    of the same shape (the operator's own shape error would not say which argument is
    off)."""
    try:
        out = jax.eval_shape(mv, x)
    except TypeError as e:
        raise ValueError(
            f"{name}: the operator `mv` does not accept {name} of shape {x.shape} ({e})"
        ) from None
    if getattr(out, "shape", None) != x.shape:
        raise ValueError(
            f"{name}: expected the shape mv({name}) returns, received {x.shape} -> "
            f"{getattr(out, 'shape', type(out).__name__)}"
        )


def lanczos(mv: Matvec, z: Float[Array, " N"], steps: int):
    """`steps` Lanczos iterations from `z` with full re-orthogonalisation.

    **Returns:** `(alphas (steps,), betas (steps - 1,), V (steps, N))` with
    orthonormal rows `V` and `V A V^T = tridiag(betas, alphas, betas)`.

    `z` must be a finite, nonzero (N,) vector and `steps` a positive int (`ValueError`
    for concrete inputs; the (steps, N) basis is checked against memory first).
    """
    z = _start_vector(z)
    _check_operator(mv, "z", z)
    steps = check_positive_int("steps", steps)
    n = z.shape[0]
    check_memory("steps", 2.0 * steps * n * jnp.dtype(z.dtype).itemsize)
    v0 = z / jnp.linalg.norm(z)
    basis = jnp.zeros((steps, n), z.dtype).at[0].set(v0)

    def body(j, carry):
        basis, alphas, betas = carry
        v = basis[j]
        w = mv(v)
        alpha = jnp.vdot(v, w)
        w = w - basis.T @ (basis @ w)  # full re-orthogonalisation (rows > j are zero)
        w = w - basis.T @ (basis @ w)
        beta = jnp.linalg.norm(w)
        nxt = jnp.where(beta > 0, w / jnp.where(beta > 0, beta, 1), 0)
        basis = lax.cond(j + 1 < steps, lambda: basis.at[j + 1].set(nxt), lambda: basis)
        return basis, alphas.at[j].set(alpha), betas.at[j].set(beta)

    init = (basis, jnp.zeros((steps,), z.dtype), jnp.zeros((steps,), z.dtype))
    basis, alphas, betas = lax.fori_loop(0, steps, body, init)
    return alphas, betas[:-1], basis


def _start_vector(z) -> Array:
    """A finite, nonzero, non-empty (N,) starting vector (value checks when concrete)."""
    z = as_array("z", z, ndim=1, dtype=jnp.inexact, finite=True, nonempty=True)
    if not isinstance(z, jax.core.Tracer) and not bool(jnp.any(z != 0)):
        raise ValueError("z: expected a nonzero starting vector, received all zeros")
    return z


def _tridiag_eig(alphas, betas):
    t = jnp.diag(alphas) + jnp.diag(betas, 1) + jnp.diag(betas, -1)
    return jnp.linalg.eigh(t)


def slq_logdet(
    mv: Matvec, n: int, *, key: PRNGKeyArray, probes: int = 8, steps: int = 30, dtype=jnp.float32
) -> Array:
    """Stochastic Lanczos quadrature estimate of `log det A` (SPD `A`, size n).

    `log det A = E_z[z^T log(A) z]` with Rademacher `z`; each quadratic form is a
    `steps`-node Gauss quadrature from Lanczos (Ubaru, Chen & Saad 2017).

    `n`, `probes` and `steps` are positive ints; the (probes, steps, n) Lanczos bases
    are checked against memory before anything is allocated.
    """
    n = check_positive_int("n", n)
    probes = check_positive_int("probes", probes)
    steps = check_positive_int("steps", steps)
    item = jnp.dtype(dtype).itemsize
    check_memory("n", 3.0 * n * item)  # one probe and two Lanczos vectors
    check_memory("steps", (steps + 2.0) * n * item)  # one probe's basis
    check_memory("probes", probes * (steps + 2.0) * n * item)  # all probes (vmapped)
    _check_operator(mv, "n", jax.ShapeDtypeStruct((n,), dtype))
    zs = jax.random.rademacher(key, (probes, n), dtype)

    def one(z):
        alphas, betas, _ = lanczos(mv, z, steps)
        evals, evecs = _tridiag_eig(alphas, betas)
        return jnp.vdot(z, z) * jnp.sum(evecs[0] ** 2 * jnp.log(jnp.maximum(evals, 1e-30)))

    return jnp.mean(jax.vmap(one)(zs))


def lanczos_sqrt_apply(mv: Matvec, z: Float[Array, " N"], steps: int = 40) -> Array:
    """Approximate `A^{1/2} z` by Lanczos (sampling from N(0, A) with `z ~ N(0, I)`).

    `z` and `steps` as in `lanczos`."""
    alphas, betas, basis = lanczos(mv, z, steps)
    z = as_array("z", z)
    evals, evecs = _tridiag_eig(alphas, betas)
    f = evecs @ (jnp.sqrt(jnp.maximum(evals, 0)) * evecs[0])
    return jnp.linalg.norm(z) * (basis.T @ f)
