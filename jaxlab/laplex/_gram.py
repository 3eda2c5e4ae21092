"""`LaplexGram`: a PSD LAPLEX Gram operator for Gaussian covariance models (P9).

    Sigma = sum_h c_h  kron_d exp(-a_h |u_{h,d}[i_d] - u_{h,d}[j_d]|)  +  sigma^2 I

on a grid with one learnable 1-D anchor per grid line and axis (`u_{h,d}`,
initialised to the pixel coordinates). Each axis factor is a Laplace
(Ornstein-Uhlenbeck) kernel on a line, hence PSD; Kronecker products and
positive sums keep it PSD, and the product over axes is the L1-distance Laplace
kernel on the warped grid. Applied axis-wise with 1-D LAPLEX passes: O(N log)
for N pixels, no N x N matrix. The Gaussian log-likelihood uses only matvecs:
conjugate gradients for the quadratic form, stochastic Lanczos quadrature for
the log-determinant, and Hutchinson-style estimates for its gradient.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxlab._core import check_array, check_finite, check_positive_int

from ._dense import dense_matrix
from ._linalg import conjugate_gradient, lanczos_sqrt_apply, slq_logdet
from ._matvec import matmat
from ._plan import make_plan

__all__ = ["LaplexGram"]


class LaplexGram(eqx.Module):
    """PSD LAPLEX Gram operator for Gaussian covariance models on a grid (1-D signal,
    image, volume) (P9):

        Sigma = sum_h c_h  kron_d exp(-a_h |u_{h,d}[i_d] - u_{h,d}[j_d]|)  +  sigma^2 I

    with one learnable 1-D anchor `u_{h,d}` per grid line and axis, initialised to the
    coordinates. Each axis factor is a Laplace (Ornstein-Uhlenbeck) kernel on a line,
    hence PSD, and Kronecker products and positive sums keep it PSD: the product over
    axes is the L1-distance Laplace kernel on the warped grid. It is applied axis-wise by
    1-D LAPLEX passes, O(N log N) for N grid points and no N x N matrix; the Gaussian
    log-likelihood uses only matvecs (conjugate gradients for the quadratic form,
    stochastic Lanczos quadrature for the log-determinant, Hutchinson-style estimates of
    its gradient).

    Fields:

    - `anchors`: one (H, n_d) array per axis d (learnable warped coordinates).
    - `log_a`, `log_c`: (H,) log decay and log weight per head.
    - `log_noise`: log of the diagonal noise variance sigma^2.
    - `learn_anchors`: if False the anchors are held fixed (a stationary
      Laplace model on the original grid).
    """

    anchors: tuple[Float[Array, "H n"], ...]
    log_a: Float[Array, " H"]
    log_c: Float[Array, " H"]
    log_noise: Float[Array, ""]
    learn_anchors: bool = eqx.field(static=True)

    def __init__(
        self,
        coords: Sequence[Float[Array, " n"]] | Float[Array, " n"],
        heads: int = 1,
        *,
        key: PRNGKeyArray,
        decay: float = 1.0,
        noise: float = 0.1,
        learn_anchors: bool = True,
        dtype=jnp.float32,
    ):
        """**Arguments:**

        - `coords`: a 1-D array of coordinates, or one per grid axis (e.g. row and
          column pixel positions).
        - `heads`: number of summed Kronecker terms.
        - `key`: keyword-only; jitters the initial decays of the heads.
        - `decay`, `noise`: initial decay (per coordinate unit) and noise variance.
        """
        if getattr(coords, "ndim", None) == 1:
            coords = (cast(Array, coords),)
        h = check_positive_int("heads", heads)
        axes = []
        for d, x in enumerate(coords):
            x = jnp.asarray(x, dtype)
            check_array(f"coords[{d}]", x, ndim=1, dtype=jnp.floating)
            check_finite(f"coords[{d}]", x)
            axes.append(jnp.broadcast_to(x, (h, x.shape[0])))
        if not axes:
            raise ValueError("coords: expected at least one axis, received none")
        if decay <= 0 or not math.isfinite(decay):
            raise ValueError(f"decay: expected a positive number, received {decay}")
        if noise <= 0 or not math.isfinite(noise):
            raise ValueError(f"noise: expected a positive number, received {noise}")
        self.anchors = tuple(axes)
        spread = jnp.linspace(-1.0, 1.0, h, dtype=dtype) if h > 1 else jnp.zeros((1,), dtype)
        jitter = 0.1 * jax.random.normal(key, (h,), dtype)
        self.log_a = jnp.log(jnp.asarray(decay, dtype)) + spread + jitter
        self.log_c = jnp.full((h,), -jnp.log(jnp.asarray(float(h), dtype)))
        self.log_noise = jnp.log(jnp.asarray(noise, dtype))
        self.learn_anchors = learn_anchors

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(x.shape[1] for x in self.anchors)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def _anchors(self):
        return self.anchors if self.learn_anchors else jax.lax.stop_gradient(self.anchors)

    def kernel_matvec(self, v: Float[Array, " N"]) -> Float[Array, " N"]:
        """`sum_h c_h (kron_d A_{h,d}) v` (no noise term)."""
        anchors = self._anchors()
        a, c = jnp.exp(self.log_a), jnp.exp(self.log_c)
        grid = v.reshape(self.shape)
        out = jnp.zeros_like(grid)
        one = jnp.ones((1,), v.dtype)
        for h in range(self.log_a.shape[0]):
            x = grid
            for d, u in enumerate(anchors):
                uh = u[h][None]
                plan = make_plan(uh, uh)  # one array: sorted once
                moved = jnp.moveaxis(x, d, 0)
                flat = moved.reshape(moved.shape[0], -1)
                y = matmat(flat, uh, uh, a[h][None], c=one, plan=plan)
                x = jnp.moveaxis(y.reshape(moved.shape), 0, d)
            out = out + c[h] * x
        return out.reshape(-1)

    def matvec(self, v: Float[Array, " N"]) -> Float[Array, " N"]:
        """`Sigma v` with `Sigma` = kernel + noise * I. **Arguments:** `v` (N,)."""
        check_array("v", v, shape=(self.size,), dtype=jnp.floating)
        return self.kernel_matvec(v) + jnp.exp(self.log_noise) * v

    def dense(self) -> Float[Array, "N N"]:
        """The dense covariance (small grids only; the test oracle)."""
        anchors = self._anchors()
        one = jnp.ones((1,), self.log_a.dtype)
        total = jnp.exp(self.log_noise) * jnp.eye(self.size, dtype=self.log_a.dtype)
        for h in range(self.log_a.shape[0]):
            k = jnp.ones((1, 1), self.log_a.dtype)
            for u in anchors:
                uh = u[h][None]
                k = jnp.kron(k, dense_matrix(uh, uh, jnp.exp(self.log_a[h])[None], c=one))
            total = total + jnp.exp(self.log_c[h]) * k
        return total

    def neg_log_likelihood(
        self,
        y: Float[Array, " N"],
        *,
        key: PRNGKeyArray,
        probes: int = 8,
        lanczos_steps: int = 30,
        cg_tol: float = 1e-6,
        cg_maxiter: int = 1000,
    ) -> Float[Array, ""]:
        """Gaussian negative log-likelihood of `y ~ N(0, Sigma)`, matvec-only.

        Value: `0.5 (y^T Sigma^{-1} y + logdet Sigma + N log 2 pi)` with CG for the
        solve and SLQ (`probes` Rademacher probes, `lanczos_steps` nodes) for the
        log-determinant. Gradient (w.r.t. the operator's parameters and `y`): exact
        for the quadratic form up to CG tolerance, and the Hutchinson estimate
        `mean_z (Sigma^{-1} z)^T dSigma z` for the log-determinant.

        **Arguments:** `y` (N,); `key` (keyword-only) draws the probes.
        **Returns:** scalar.
        """
        check_array("y", y, shape=(self.size,), dtype=jnp.floating)
        n = self.size
        frozen = jax.lax.stop_gradient(self)
        solve_mv = frozen.matvec
        alpha, _ = conjugate_gradient(
            solve_mv, jax.lax.stop_gradient(y), tol=cg_tol, maxiter=cg_maxiter
        )
        alpha = jax.lax.stop_gradient(alpha)
        quad = 2 * jnp.vdot(alpha, y) - jnp.vdot(alpha, self.matvec(alpha))
        k_slq, k_hutch = jax.random.split(key)
        logdet = jax.lax.stop_gradient(
            slq_logdet(solve_mv, n, key=k_slq, probes=probes, steps=lanczos_steps, dtype=y.dtype)
        )
        zs = jax.random.rademacher(k_hutch, (probes, n), y.dtype)
        sol = jax.vmap(
            lambda z: conjugate_gradient(solve_mv, z, tol=cg_tol, maxiter=cg_maxiter)[0]
        )(zs)
        sol = jax.lax.stop_gradient(sol)
        tr = jnp.mean(jax.vmap(lambda u, z: jnp.vdot(u, self.matvec(z)))(sol, zs))
        logdet_sur = logdet + tr - jax.lax.stop_gradient(tr)
        return 0.5 * (quad + logdet_sur + n * jnp.log(2 * jnp.pi).astype(y.dtype))

    def sample(self, *, key: PRNGKeyArray, lanczos_steps: int = 60) -> Float[Array, " N"]:
        """One draw from N(0, Sigma) via a Lanczos approximation of `Sigma^{1/2} z`."""
        z = jax.random.normal(key, (self.size,), self.log_a.dtype)
        return lanczos_sqrt_apply(jax.lax.stop_gradient(self).matvec, z, lanczos_steps)
