"""Expected information gain of a probe about the flower latents, per modality and joint.

Two estimators:

- `linearized_information_gain`: with the decoder linearised at the posterior
  mean, o = J z + c + eps, z ~ N(mu, Sigma), eps ~ N(0, sigma^2 I), the mutual
  information is exact: 0.5 * logdet(I + J Sigma J^T / sigma^2). Non-negative by
  construction, zero exactly when the observation does not depend on z.
- `mc_information_gain`: the nested Monte-Carlo estimator
  E[log p(o | z) - log E_z' p(o | z')] with samples from the posterior, which makes
  no linearisation (used to check the first, and for strongly nonlinear probes).

`information_map` evaluates either over a grid of actions with `vmap`.

Paper: P4 (modality-specific information landscapes over the action space).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float

from jaxlab._core import as_array, check_memory, check_positive_int

from ._flower import ACTION_DIM
from ._model import GaussianExpert, MultimodalVAE

__all__ = [
    "linearized_information_gain",
    "mc_information_gain",
    "information_map",
    "expected_reward",
    "action_grid",
    "grid_mask",
]

_MODES = {"visual": ("visual",), "mechano": ("mechano",), "joint": ("visual", "mechano")}


def _check_modality(modality: str) -> tuple[str, ...]:
    if modality not in _MODES:
        raise ValueError(f"modality: expected one of {sorted(_MODES)}, received {modality!r}")
    return _MODES[modality]


def _action(action) -> jax.Array:
    return as_array("action", action, shape=(ACTION_DIM,), dtype=jnp.floating, finite=True)


def linearized_information_gain(
    model: MultimodalVAE, post: GaussianExpert, action: Float[Array, 3], modality: str = "joint"
) -> Float[Array, ""]:
    """0.5 logdet(I + J Sigma J^T / sigma^2) for `modality` in 'visual', 'mechano', 'joint'."""
    mods = _check_modality(modality)
    action = _action(action)
    sqrt_cov = 1 / jnp.sqrt(post.precision)  # diagonal posterior
    rows = []
    for m in mods:
        jac = jax.jacfwd(lambda z, m=m: model.decode(m, z, action))(post.mean)
        rows.append(jac * sqrt_cov[None, :] / model.sigma[m])
    a = jnp.concatenate(rows, axis=0)  # (obs, latent): whitened Jacobian
    # logdet(I_obs + A A^T) = logdet(I_lat + A^T A): the smaller matrix.
    g = jnp.eye(a.shape[1], dtype=a.dtype) + a.T @ a
    return 0.5 * jnp.linalg.slogdet(g)[1]


def mc_information_gain(
    model: MultimodalVAE,
    post: GaussianExpert,
    action: Float[Array, 3],
    modality: str = "joint",
    *,
    key: jax.Array,
    n_samples: int = 256,
) -> Float[Array, ""]:
    """Nested Monte-Carlo mutual information I(z; o | action) under the posterior
    (`n_samples` a positive integer; the work and memory are `n_samples^2`)."""
    mods = _check_modality(modality)
    action = _action(action)
    check_positive_int("n_samples", n_samples)
    check_memory("n_samples", 8.0 * 3 * n_samples * n_samples)  # log-likelihood table
    kz, ko = jax.random.split(key)
    std = 1 / jnp.sqrt(post.precision)
    z = post.mean[None] + std[None] * jax.random.normal(
        kz, (n_samples,) + post.mean.shape, post.mean.dtype
    )
    preds = [jax.vmap(lambda zz, m=m: model.decode(m, zz, action))(z) for m in mods]
    sig = [model.sigma[m] for m in mods]
    keys = jax.random.split(ko, len(mods))
    obs = [
        p + s * jax.random.normal(k, p.shape, p.dtype)
        for p, s, k in zip(preds, sig, keys, strict=True)
    ]

    def loglik(o_i):  # log p(o_i | z_j) for all j
        total = 0.0
        for o, p, s in zip(o_i, preds, sig, strict=True):
            total = total - 0.5 * jnp.sum(((o[None, :] - p) / s) ** 2, axis=-1)
        return total

    ll = jax.vmap(loglik)(tuple(obs))  # ll[i, j] = log p(o_i | z_j) up to a constant
    diag = jnp.diagonal(ll)
    return jnp.mean(diag - (logsumexp(ll, axis=1) - jnp.log(n_samples)))


def expected_reward(
    model: MultimodalVAE, post: GaussianExpert, action: Float[Array, 3]
) -> Float[Array, ""]:
    """Predicted tube-entry signal (mechanosensory channel 5) at the posterior mean, in [0, 1]."""
    action = _action(action)
    return jnp.clip(model.decode("mechano", post.mean, action)[5], 0.0, 1.0)


def action_grid(n: int = 15, extent: float = 0.9, angle: float = 0.0) -> Float[Array, "G 3"]:
    """Tip positions of an n x n grid over [-extent, extent]^2 that lie in the disc of
    radius `extent` (row-major, so `grid_mask(n, extent)` scatters them back into an
    n x n image), with a fixed approach angle."""
    check_positive_int("n", n)
    check_memory("n", 8.0 * n * n * 6)  # the n x n mesh, its mask and the kept points
    xs = np.linspace(-extent, extent, n)
    gx, gy = np.meshgrid(xs, xs, indexing="xy")
    keep = grid_mask(n, extent).ravel()
    pts = np.stack([gx.ravel()[keep], gy.ravel()[keep], np.full(int(keep.sum()), angle)], -1)
    return jnp.asarray(pts, dtype=float)


def grid_mask(n: int, extent: float = 0.9) -> np.ndarray:
    """Boolean n x n image of which grid points `action_grid(n, extent)` keeps."""
    check_positive_int("n", n)
    check_memory("n", 8.0 * n * n * 4)  # the n x n mesh and the mask
    xs = np.linspace(-extent, extent, n)
    gx, gy = np.meshgrid(xs, xs, indexing="xy")
    return gx**2 + gy**2 <= extent**2 + 1e-12


def information_map(
    model: MultimodalVAE,
    post: GaussianExpert,
    actions: Float[Array, "G 3"],
    modality: str = "joint",
) -> Float[Array, " G"]:
    """Linearised information gain of every action in `actions` (vmapped)."""
    actions = as_array(
        "actions", actions, shape=(None, ACTION_DIM), dtype=jnp.floating, finite=True, nonempty=True
    )
    _check_modality(modality)
    return jax.vmap(lambda a: linearized_information_gain(model, post, a, modality))(actions)
