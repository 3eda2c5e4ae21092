"""The global Lyapunov certificate as an LMI, and the point-wise decrease condition.

Write the injection MLP as an implicit (feed-forward) network: with the stacked
hidden activations `w = tanh(v)`, `v = N_x eta + N_w w` (`N_w` strictly block
lower-triangular), the nominal scaled error dynamics are
`f(eta) = A_cl eta + N_pw w`, `A_cl = A_eps + L C_eps`. `tanh` lies in the sector
[0, 1], i.e. `w_i (v_i - w_i) >= 0`. For `V = eta^T P eta` and any diagonal `T >= 0`
(LipSDP-style multipliers),

    dV/dtau <= dV/dtau + 2 w^T T (v - w) = [eta; w]^T H(P, T) [eta; w],

    H = [[A_cl^T P + P A_cl,      P N_pw + N_x^T T      ],
         [N_pw^T P + T N_x,       T N_w + N_w^T T - 2 T ]],

so `H < 0` (negative definite) certifies global exponential stability of the
nominal error dynamics. The LMI is linear in `(P, T)` for fixed weights.

Paper: P2 (stage 2 "LMI fine-tuning"); multipliers as in LipSDP (Fazlyab et al. 2019).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jaxtyping import Array, Float

from jaxlab._core import as_array, check_array, check_real

from ._observer import NeuralObserver


def lyapunov_matrix_arg(observer: NeuralObserver, P) -> jax.Array:
    """`P` checked as a finite `(ne, ne)` float matrix of `observer` (shape/dtype also
    under tracing; values when concrete)."""
    ne = observer.extended_dim
    return as_array("P", P, shape=(ne, ne), dtype=jnp.floating, finite=True)


def scaled_errors_arg(name: str, observer: NeuralObserver, etas, *, batch: bool) -> jax.Array:
    """Scaled errors `(S, ne)` (`batch`) or `(ne,)`, finite floats."""
    ne = observer.extended_dim
    shape = ("S", ne) if batch else (ne,)
    return as_array(name, etas, shape=shape, dtype=jnp.floating, finite=True, nonempty=True)


__all__ = [
    "LyapunovMatrix",
    "implicit_blocks",
    "lmi_matrix",
    "lmi_penalty",
    "decrease_bound",
    "lyapunov_hinge",
]


class LyapunovMatrix(eqx.Module):
    """A positive-definite `P = F F^T + floor I` (PD by construction).

    **Fields:** `factor F (n, n)`; `floor > 0` (static).
    """

    factor: Float[Array, "n n"]
    floor: float = eqx.field(static=True, default=1e-3)

    @classmethod
    def from_matrix(cls, P, floor: float = 1e-3) -> LyapunovMatrix:
        """Factor a symmetric `P > floor I` (Cholesky of `P - floor I`).

        **Arguments:** `P (n, n)` a finite real square matrix (its symmetric part is used)
        whose symmetric part exceeds `floor I`; `floor > 0` finite. A `P` that is not
        square, not finite or not above `floor I` raises `ValueError` naming `P` (the
        Cholesky factor would be NaN).
        """
        P = as_array("P", P, ndim=2, dtype=np.number, real=True, finite=True)
        if not jnp.issubdtype(P.dtype, jnp.floating):
            P = P.astype(jnp.result_type(float))
        n = P.shape[0]
        check_array("P", P, shape=(n, n))
        floor = check_real("floor", floor, low=0.0, low_inclusive=False)
        F = jnp.linalg.cholesky(0.5 * (P + P.T) - floor * jnp.eye(n, dtype=P.dtype))
        if not isinstance(F, Tracer) and not bool(jnp.all(jnp.isfinite(F))):
            raise ValueError(
                f"P: expected a symmetric positive-definite matrix above floor={floor} I "
                "(its Cholesky factor is not finite)"
            )
        return cls(factor=F, floor=floor)

    def matrix(self) -> Float[Array, "n n"]:
        n = self.factor.shape[0]
        return self.factor @ self.factor.T + self.floor * jnp.eye(n, dtype=self.factor.dtype)


def implicit_blocks(observer: NeuralObserver):
    """`(A_cl (ne, ne), N_x (nh, ne), N_w (nh, nh), N_pw (ne, nh))` of the implicit form."""
    A_eps, C_eps, _ = observer.error_model()
    dt = A_eps.dtype
    ne = observer.extended_dim
    sizes = [w.shape[0] for w in observer.hidden]
    nh = sum(sizes)
    A_cl = A_eps + observer.gain @ C_eps
    N_x = jnp.zeros((nh, ne), dt)
    N_w = jnp.zeros((nh, nh), dt)
    if observer.hidden:
        N_x = N_x.at[: sizes[0], :].set(observer.hidden[0] @ C_eps)
        off = 0
        for k in range(1, len(sizes)):
            rows = slice(off + sizes[k - 1], off + sizes[k - 1] + sizes[k])
            cols = slice(off, off + sizes[k - 1])
            N_w = N_w.at[rows, cols].set(observer.hidden[k])
            off += sizes[k - 1]
        N_pw = jnp.zeros((ne, nh), dt).at[:, nh - sizes[-1] :].set(observer.readout)
    else:
        N_pw = jnp.zeros((ne, 0), dt)
    return A_cl, N_x, N_w, N_pw


def lmi_matrix(observer: NeuralObserver, P, multipliers) -> Float[Array, "k k"]:
    """The certificate matrix `H(P, T)`; `k = ne + nh`.

    With the injection MLP written as an implicit network (`w = tanh(v)`,
    `v = N_x eta + N_w w`, error dynamics `A_cl eta + N_pw w`) and the sector bound of
    tanh with diagonal multipliers `T >= 0` (LipSDP style),

        H = [[A_cl^T P + P A_cl,  P N_pw + N_x^T T      ],
             [N_pw^T P + T N_x,   T N_w + N_w^T T - 2 T ]],

    and `H < 0` certifies global exponential stability of `V = eta^T P eta` (P2, stage 2).

    **Arguments:** `observer`; `P (ne, ne)` symmetric; `multipliers (nh,)` the diagonal of `T`.
    **Returns:** symmetric `H (ne + nh, ne + nh)`; `H < 0` certifies global stability.
    """
    P = lyapunov_matrix_arg(observer, P)
    multipliers = as_array(
        "multipliers",
        multipliers,
        shape=(observer.hidden_dim,),
        dtype=jnp.floating,
        finite=True,
        low=0.0,
    )
    A_cl, N_x, N_w, N_pw = implicit_blocks(observer)
    T = jnp.diag(multipliers)
    top_left = A_cl.T @ P + P @ A_cl
    off = P @ N_pw + N_x.T @ T
    bottom = T @ N_w + N_w.T @ T - 2 * T
    H = jnp.block([[top_left, off], [off.T, bottom]])
    return 0.5 * (H + H.T)


def lmi_penalty(H, *, margin: float, barrier_weight: float = 1e-3, violation_weight: float = 1e2):
    """Differentiable eigenvalue penalty/barrier for `H <= -margin I`.

    With `lam = eigvalsh(H) + margin`: violated eigenvalues (`lam >= 0`) cost
    `violation_weight * lam`, satisfied ones a log-barrier `-barrier_weight log(-lam)`
    (clipped at 1 so it never rewards arbitrarily large negative eigenvalues).
    No SDP is solved. **Arguments:** `H (k, k)` symmetric, finite; `margin`, a finite
    real. **Returns:** a scalar.
    """
    H = as_array("H", H, ndim=2, dtype=jnp.floating, finite=True, nonempty=True)
    if H.shape[0] != H.shape[1]:
        raise ValueError(f"H: expected a square matrix, received shape {tuple(H.shape)}")
    margin = check_real("margin", margin)
    lam = jnp.linalg.eigvalsh(H) + margin
    safe = jnp.where(lam < 0, -lam, 1.0)
    barrier = jnp.where(lam < 0, -barrier_weight * jnp.log(jnp.minimum(safe, 1.0)), 0.0)
    violation = jnp.where(lam >= 0, violation_weight * (lam + barrier_weight), 0.0)
    return jnp.sum(barrier + violation)


def decrease_bound(observer: NeuralObserver, P, eta, *, rate: float, disturbance_bound: float):
    """Upper bound of `dV/dtau + rate V` at the scaled error `eta` (fast time `tau = t/eps`).

    `V = eta^T P eta`; with `d eta/dtau = f(eta) + epsilon D d'` and `|d'| <= M`:
    `dV/dtau + rate V <= 2 eta^T P f(eta) + rate eta^T P eta + 2 epsilon M |D^T P eta|`.
    Negative values mean decrease with exponential rate `rate / epsilon` in real time
    despite any admissible disturbance derivative.

    **Arguments:** `observer`, `P (ne, ne)`, `eta (ne,)`, `rate >= 0`, `disturbance_bound M >= 0`.
    **Returns:** a scalar.
    """
    P = lyapunov_matrix_arg(observer, P)
    eta = scaled_errors_arg("eta", observer, eta, batch=False)
    rate = check_real("rate", rate, low=0.0)
    disturbance_bound = check_real("disturbance_bound", disturbance_bound, low=0.0)
    _, _, D = observer.error_model()
    Pe = P @ eta
    quad = 2 * Pe @ observer.error_field(eta) + rate * eta @ Pe
    lin = 2 * observer.epsilon * disturbance_bound * jnp.sqrt(jnp.sum((D.T @ Pe) ** 2) + 1e-30)
    return quad + lin


def lyapunov_hinge(
    observer: NeuralObserver, P, etas, *, rate: float, disturbance_bound: float, margin: float
):
    """Mean point-guided hinge `relu(decrease_bound(eta) / |eta|^2 + margin)` over samples.

    **Arguments:** `etas (S, ne)` sampled scaled errors (non-zero); other args as
    `decrease_bound`; `margin >= 0`. **Returns:** a scalar (0 iff every sample decreases
    with the requested margin).
    """
    P = lyapunov_matrix_arg(observer, P)
    etas = scaled_errors_arg("etas", observer, etas, batch=True)
    margin = check_real("margin", margin, low=0.0)
    bound = jax.vmap(
        lambda e: decrease_bound(observer, P, e, rate=rate, disturbance_bound=disturbance_bound)
    )(etas)
    norms = jnp.sum(etas**2, axis=1)
    return jnp.mean(jax.nn.relu(bound / norms + margin))
