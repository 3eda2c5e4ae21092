"""Independent re-check of the global certificate with cvxpy, and sampling guarantees.

`certify_lmi` assembles the LMI afresh in float64 numpy from the observer's
weights (not through `lmi_matrix`) and solves the feasibility problem

    maximise s  over  P = P^T, t >= 0
    s.t.  H(P, diag t) <= -s I,   trace(P) = 1,   P >= (floor / ne) I

with an interior-point (Clarabel) or first-order (SCS) conic solver. The observer
is certified when `s* > tol`; `s*` is the normalised margin (for `A_cl = -a I`
without hidden layers, `s* = 2 a / ne`). The floor keeps `P` definite and makes a
negative `s*` measure how far an uncertifiable observer is from a certificate. `check_certificate`
checks a *given* `(P, T)` by the largest eigenvalue of `H` (numpy `eigvalsh`).

`coverage_bound` and `local_stability_radius` turn sampled decrease checks into the
paper's probabilistic-coverage and local-radius statements (assumptions stated in
their docstrings).

Paper: P2, "Provably stable neural-network observers".
"""

from __future__ import annotations

import dataclasses
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from jaxlab._core import (
    as_array,
    check_memory,
    check_positive_int,
    check_real,
    check_size,
    short_repr,
)

from ._lmi import decrease_bound, lyapunov_matrix_arg, scaled_errors_arg
from ._observer import NeuralObserver

__all__ = [
    "search_decrease_violations",
    "Certificate",
    "certify_lmi",
    "check_certificate",
    "numpy_lmi_blocks",
    "coverage_bound",
    "local_stability_radius",
    "sampled_decrease",
]

MAX_SEARCH_STEPS = 1_000_000
"""The most ascent steps `search_decrease_violations` runs per start (each is one
gradient evaluation per start): larger values are refused instead of running for days."""


@dataclasses.dataclass(frozen=True)
class Certificate:
    """Result of `certify_lmi`: `certified`, normalised `margin` s*, the solver's `P`
    and multipliers `t`, solver `status`, `solver` name and wall `seconds`."""

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    certified: bool
    margin: float
    P: np.ndarray | None
    multipliers: np.ndarray | None
    status: str
    solver: str
    seconds: float


def numpy_lmi_blocks(observer: NeuralObserver):
    """`(A_cl, N_x, N_w, N_pw)` assembled in float64 numpy, independently of jax."""
    A = np.asarray(observer.A, np.float64)
    C = np.asarray(observer.C, np.float64)
    E = np.asarray(observer.E, np.float64)
    n, nd = E.shape
    ne = n + nd
    eps = observer.epsilon
    A_eps = np.zeros((ne, ne))
    A_eps[:n, :n] = eps * A
    A_eps[:n, n:] = E
    C_eps = np.hstack([C, np.zeros((C.shape[0], nd))])
    A_cl = A_eps + np.asarray(observer.gain, np.float64) @ C_eps
    Ws = [np.asarray(w, np.float64) for w in observer.hidden]
    sizes = [w.shape[0] for w in Ws]
    nh = int(sum(sizes))
    N_x = np.zeros((nh, ne))
    N_w = np.zeros((nh, nh))
    N_pw = np.zeros((ne, nh))
    if Ws:
        starts = np.concatenate([[0], np.cumsum(sizes)])
        N_x[: sizes[0]] = Ws[0] @ C_eps
        for k in range(1, len(Ws)):
            N_w[starts[k] : starts[k + 1], starts[k - 1] : starts[k]] = Ws[k]
        N_pw[:, starts[-2] :] = np.asarray(observer.readout, np.float64)
    return A_cl, N_x, N_w, N_pw


def _assemble(blocks, P, t):
    A_cl, N_x, N_w, N_pw = blocks
    T = np.diag(t)
    off = P @ N_pw + N_x.T @ T
    H = np.block([[A_cl.T @ P + P @ A_cl, off], [off.T, T @ N_w + N_w.T @ T - 2 * T]])
    return 0.5 * (H + H.T)


def check_certificate(observer: NeuralObserver, P, multipliers) -> float:
    """Largest eigenvalue of `H(P, diag(multipliers))` (float64 numpy; < 0 = certified).

    **Arguments:** `P (ne, ne)` positive definite, `multipliers (nh,)` >= 0, finite."""
    P = np.asarray(lyapunov_matrix_arg(observer, P), np.float64)
    t = np.asarray(
        as_array(
            "multipliers",
            multipliers,
            shape=(observer.hidden_dim,),
            dtype=jnp.floating,
            finite=True,
        ),
        np.float64,
    )
    if np.any(t < 0):
        raise ValueError("multipliers: expected non-negative values")
    if np.linalg.eigvalsh(0.5 * (P + P.T))[0] <= 0:
        raise ValueError("P: expected a positive-definite matrix")
    return float(np.linalg.eigvalsh(_assemble(numpy_lmi_blocks(observer), P, t))[-1])


def certify_lmi(
    observer: NeuralObserver, *, solver: str = "CLARABEL", tol: float = 1e-7, floor: float = 1e-2
) -> Certificate:
    """Re-check global stability of an observer by solving the LMI with cvxpy.

    **Arguments:** `observer`; `solver` ("CLARABEL" or "SCS"); `tol` a finite real, the
    margin above which the observer counts as certified (guards against solver tolerance);
    `floor` in (0, 1): `P >= floor / ne I` (bounds the condition number of `P`).

    **Returns:** a `Certificate`.
    """
    import cvxpy as cp  # optional dependency: the `observers` extra

    tol = check_real("tol", tol)
    floor = check_real("floor", floor, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    if solver not in ("CLARABEL", "SCS"):
        raise ValueError(f"solver: expected 'CLARABEL' or 'SCS', received {solver!r}")
    A_cl, N_x, N_w, N_pw = numpy_lmi_blocks(observer)
    ne, nh = A_cl.shape[0], N_x.shape[0]
    P = cp.Variable((ne, ne), symmetric=True)
    s = cp.Variable()
    cons = [P >> (floor / ne) * np.eye(ne), cp.trace(P) == 1]
    if nh:
        t = cp.Variable(nh, nonneg=True)
        T = cp.diag(t)
        off = P @ N_pw + N_x.T @ T
        H = cp.bmat([[A_cl.T @ P + P @ A_cl, off], [off.T, T @ N_w + N_w.T @ T - 2 * T]])
    else:
        t = None
        H = A_cl.T @ P + P @ A_cl
    Hs = 0.5 * (H + H.T)
    cons.append(Hs << -s * np.eye(ne + nh))
    prob = cp.Problem(cp.Maximize(s), cons)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # an inaccurate solve is reported through `status` (and is not certified)
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            prob.solve(solver=solver)
        status = str(prob.status)
    except cp.SolverError as err:  # numerical failure is "not certified", not a crash
        status = f"solver error: {err}"
    seconds = time.perf_counter() - t0
    s_val = s.value
    ok = s_val is not None and status in ("optimal", "optimal_inaccurate")
    margin = float(s_val) if ok and s_val is not None else float("-inf")
    P_val = None if P.value is None else np.asarray(P.value)
    t_val = None if (t is None or t.value is None) else np.maximum(np.asarray(t.value), 0.0)
    certified = bool(ok and margin > tol and status == "optimal")
    if certified and P_val is not None:
        # Re-verify the solver's own (P, T) by an eigenvalue check: guards against
        # constraint-violating "optimal" points within the solver tolerance.
        tt = np.zeros((0,)) if t_val is None else t_val
        certified = (
            np.linalg.eigvalsh(P_val)[0] > 0
            and np.linalg.eigvalsh(_assemble((A_cl, N_x, N_w, N_pw), P_val, tt))[-1] < 0
        )
    return Certificate(bool(certified), margin, P_val, t_val, status, solver, seconds)


def coverage_bound(num_samples: int, num_failures: int, confidence: float = 0.99) -> float:
    """Lower confidence bound on the probability that the decrease condition holds.

    Assumption: the `num_samples` checked points are i.i.d. from a distribution `mu`
    on the compact error domain. Then with probability at least `confidence` over the
    sampling, `mu({eta : condition holds}) >= coverage_bound(...)` (one-sided
    Clopper-Pearson bound; with no failures it equals `(1 - confidence)^(1/N)`).

    **Returns:** a float in [0, 1].
    """
    check_positive_int("num_samples", num_samples)
    confidence = float(as_array("confidence", confidence, shape=(), dtype=np.floating, finite=True))
    if isinstance(num_failures, bool) or not isinstance(num_failures, int | np.integer):
        raise ValueError(f"num_failures: expected an integer, received {num_failures!r}")
    if not (0 <= num_failures <= num_samples):
        raise ValueError(
            f"num_failures: expected 0 <= num_failures <= {num_samples}, received {num_failures}"
        )
    if not (0.0 < confidence < 1.0):
        raise ValueError(f"confidence: expected a value in (0, 1), received {confidence}")
    k, n = num_failures, num_samples
    if k == n:
        return 0.0
    # upper bound on the failure probability: Beta(1 - confidence; k + 1, n - k) quantile
    p_fail = float(scipy.stats.beta.ppf(confidence, k + 1, n - k))
    return 1.0 - p_fail


def sampled_decrease(
    observer: NeuralObserver,
    P,
    *,
    key,
    radius: float,
    num_samples: int,
    rate: float = 0.0,
    disturbance_bound: float = 0.0,
):
    """Decrease bounds at samples drawn uniformly in the ball `|eta| <= radius`.

    **Returns:** `(etas (S, ne), values (S,))`, `values = decrease_bound(eta)`.
    """
    check_positive_int("num_samples", num_samples)
    radius = check_real("radius", radius, low=0.0, low_inclusive=False)
    P = lyapunov_matrix_arg(observer, P)
    ne = observer.extended_dim
    check_memory("num_samples", 8.0 * num_samples * (4 * ne + 4))  # directions, radii, etas
    kd, kr = jax.random.split(key)
    dt = observer.A.dtype
    d = jax.random.normal(kd, (num_samples, ne), dt)
    d = d / jnp.linalg.norm(d, axis=1, keepdims=True)
    r = radius * jax.random.uniform(kr, (num_samples, 1), dt) ** (1.0 / ne)  # volume-uniform
    etas = d * r
    vals = jax.vmap(
        lambda e: decrease_bound(observer, P, e, rate=rate, disturbance_bound=disturbance_bound)
    )(etas)
    return etas, vals


def search_decrease_violations(
    observer: NeuralObserver,
    P,
    etas,
    *,
    steps: int,
    step_size: float = 0.1,
    max_norm: float,
    free=None,
    rate: float = 0.0,
    disturbance_bound: float = 0.0,
):
    """Gradient search for scaled errors where the decrease condition fails.

    From each start in `etas (S, ne)`, `steps` ascent steps on the normalised bound
    `g(eta) = decrease_bound(eta) / |eta|^2` move the coordinates marked `free (ne,)`
    (bool; None: all) by `step_size |eta_free|` along the normalised gradient, then clip
    `|eta_free|` to `max_norm`; the others stay fixed (e.g. a disturbance part fixed by
    the true initial state). Work: `S x steps` gradient evaluations.

    **Arguments:** `observer`; `P (ne, ne)` the Lyapunov matrix; `etas (S, ne)` the starts;
    `steps`, `step_size` (relative), `max_norm` (keyword-only); `free (ne,)`; `rate`,
    `disturbance_bound` as `decrease_bound`.

    **Returns:** `(etas (S, ne), values (S,))`, `values = decrease_bound(eta)` at the end
    points (`> 0`: a violation found).
    """
    steps = check_size("steps", steps, cap=MAX_SEARCH_STEPS, why="MAX_SEARCH_STEPS")
    step_size = check_real("step_size", step_size, low=0.0, low_inclusive=False)
    max_norm = check_real("max_norm", max_norm, low=0.0, low_inclusive=False)
    ne = observer.extended_dim
    P = lyapunov_matrix_arg(observer, P)
    etas = scaled_errors_arg("etas", observer, etas, batch=True)
    mask = (
        jnp.ones(ne, bool) if free is None else as_array("free", free, shape=(ne,), dtype=np.bool_)
    )
    m = mask.astype(etas.dtype)

    def bound(e):
        return decrease_bound(observer, P, e, rate=rate, disturbance_bound=disturbance_bound)

    def g(e):
        return bound(e) / (e @ e)

    def one(e):
        def body(e, _):
            grad = jax.grad(g)(e) * m
            size = jnp.sqrt(jnp.sum((e * m) ** 2))
            e = e + step_size * size * grad / (jnp.linalg.norm(grad) + 1e-30)
            size = jnp.sqrt(jnp.sum((e * m) ** 2))
            e = e * (1 - m) + e * m * jnp.minimum(1.0, max_norm / (size + 1e-30))
            return e, None

        e, _ = jax.lax.scan(body, e, None, length=steps)
        return e, bound(e)

    return jax.vmap(one)(etas)


def local_stability_radius(observer: NeuralObserver, P, etas, values) -> float:
    """Sampled local stability radius from decrease checks (`sampled_decrease`).

    The largest sublevel set `{V <= c}` of `V = eta^T P eta` containing no sample
    that fails the decrease (`values >= 0`), capped at the sampled ball
    (`c <= lambda_min(P) max|eta|^2`); returns the radius `sqrt(c / lambda_max(P))` of
    the largest ball inside it (scaled coordinates). Assumption (as in the paper's
    local-radius theorem): the decrease function is Lipschitz and the samples are
    dense enough that no violation region falls between them; without it this is
    an estimate, not a proof. For a globally certified observer (`certify_lmi`) the
    decrease holds everywhere and the radius is the sampled ball's.

    **Arguments:** `P (ne, ne)` positive definite; `etas (S, ne)` the samples and
    `values (S,)` their decrease bounds, finite.

    **Returns:** a float.
    """
    # `observer` is not read: the radius depends on P and the samples only
    sizes: dict[str, int] = {}
    kw = {"dtype": jnp.floating, "finite": True, "nonempty": True, "sizes": sizes}
    P = np.asarray(as_array("P", P, shape=("ne", "ne"), **kw), np.float64)
    etas = np.asarray(as_array("etas", etas, shape=("S", "ne"), **kw), np.float64)
    values = np.asarray(as_array("values", values, shape=("S",), **kw), np.float64)
    lam = np.linalg.eigvalsh(0.5 * (P + P.T))
    if lam[0] <= 0:  # the square root of a negative level: a silent NaN radius
        raise ValueError("P: expected a positive-definite matrix")
    V = np.einsum("si,ij,sj->s", etas, P, etas)
    cap = lam[0] * float(np.max(np.sum(etas**2, axis=1)))
    bad = values >= 0
    c = min(cap, float(V[bad].min())) if bad.any() else cap
    return float(np.sqrt(c / lam[-1]))
