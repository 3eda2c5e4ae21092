"""Matvec-only linear algebra: conjugate gradients, Lanczos, SLQ log-determinant."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, PRNGKeyArray

from jaxlab._core import as_array, check_positive_int, check_range, error_if_not_finite

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
    try:  # the operator's own shape error would not say which argument is off
        out = jax.eval_shape(mv, b)
    except TypeError as e:
        raise ValueError(
            f"b: the operator `mv` does not accept b of shape {b.shape} ({e})"
        ) from None
    if getattr(out, "shape", None) != b.shape:
        raise ValueError(
            f"b: expected the shape mv(b) returns, received {b.shape} -> "
            f"{getattr(out, 'shape', type(out).__name__)}"
        )
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


def lanczos(mv: Matvec, z: Float[Array, " N"], steps: int):
    """`steps` Lanczos iterations from `z` with full re-orthogonalisation.

    **Returns:** `(alphas (steps,), betas (steps - 1,), V (steps, N))` with
    orthonormal rows `V` and `V A V^T = tridiag(betas, alphas, betas)`.
    """
    n = z.shape[0]
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


def _tridiag_eig(alphas, betas):
    t = jnp.diag(alphas) + jnp.diag(betas, 1) + jnp.diag(betas, -1)
    return jnp.linalg.eigh(t)


def slq_logdet(
    mv: Matvec, n: int, *, key: PRNGKeyArray, probes: int = 8, steps: int = 30, dtype=jnp.float32
) -> Array:
    """Stochastic Lanczos quadrature estimate of `log det A` (SPD `A`, size n).

    `log det A = E_z[z^T log(A) z]` with Rademacher `z`; each quadratic form is a
    `steps`-node Gauss quadrature from Lanczos (Ubaru, Chen & Saad 2017).
    """
    zs = jax.random.rademacher(key, (probes, n), dtype)

    def one(z):
        alphas, betas, _ = lanczos(mv, z, steps)
        evals, evecs = _tridiag_eig(alphas, betas)
        return jnp.vdot(z, z) * jnp.sum(evecs[0] ** 2 * jnp.log(jnp.maximum(evals, 1e-30)))

    return jnp.mean(jax.vmap(one)(zs))


def lanczos_sqrt_apply(mv: Matvec, z: Float[Array, " N"], steps: int = 40) -> Array:
    """Approximate `A^{1/2} z` by Lanczos (sampling from N(0, A) with `z ~ N(0, I)`)."""
    alphas, betas, basis = lanczos(mv, z, steps)
    evals, evecs = _tridiag_eig(alphas, betas)
    f = evecs @ (jnp.sqrt(jnp.maximum(evals, 0)) * evecs[0])
    return jnp.linalg.norm(z) * (basis.T @ f)
