"""LeCellModel: a JEPA encoder/predictor on expression, trained with SIGReg + invariance.

Views of a cell come from expression augmentations applied to its counts:
binomial thinning (count resampling, Gaussian moment-matched), library-size
jitter and gene dropout,
then log-normalisation. The encoder maps log-normalised expression (G genes)
to a D-dimensional embedding; the predictor maps each view's embedding towards
the mean embedding of all views of that cell. The loss is

    lam * mean_v SIGReg(z_v) + (1 - lam) * mean_v ||pred(z_v) - mean_u z_u||^2,

SIGReg keeping the embedding an isotropic Gaussian (no collapse, no stop-grad).

Paper: P5 (LeCellModel).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxlab._core import as_array, check_memory, check_positive_int, check_real

from ._logvol import jacobian_log_volume
from ._sigreg import sigreg

__all__ = ["LeCellModel", "augment", "log_normalize_jax", "jepa_loss"]


def log_normalize_jax(counts: Float[Array, "... G"], target: float = 1e4):
    """log1p(counts / library size * target)."""
    lib = jnp.maximum(jnp.sum(counts, -1, keepdims=True), 1.0)
    return jnp.log1p(counts / lib * target)


def _check_thin(thin) -> None:
    try:
        low, high = thin
    except (TypeError, ValueError) as e:
        raise ValueError(f"thin: expected a pair (low, high), received {thin!r:.60}") from e
    low = check_real("thin", low, low=0.0, high=1.0)
    high = check_real("thin", high, low=0.0, high=1.0)
    if low > high:
        raise ValueError(f"thin: expected low <= high, received {thin!r}")


def augment(
    counts: Float[Array, " G"],
    *,
    key: jax.Array,
    thin: tuple[float, float] = (0.5, 1.0),
    lib_jitter: float = 0.2,
    dropout: float = 0.15,
) -> Float[Array, " G"]:
    """One augmented, log-normalised view of a cell's counts.

    **Arguments:** `counts` `(G,)` one cell's counts (finite, >= 0, G >= 1; fractional
    pseudo-counts are thinned too, as `train_lecell(counts_are_normalised=True)` does
    with `expm1` of log-expression); `key`; `thin`
    `(low, high)` with 0 <= low <= high <= 1 (the binomial thinning probability's range);
    `lib_jitter` >= 0 (log-normal library-size jitter); `dropout` in [0, 1) (gene
    dropout probability). Anything else raises a `ValueError` naming the argument
    (value checks on concrete inputs; under `jit` only the shape is checked).
    """
    counts = as_array(
        "counts", counts, ndim=1, dtype=jnp.floating, nonempty=True, finite=True, low=0.0
    )
    _check_thin(thin)
    lib_jitter = check_real("lib_jitter", lib_jitter, low=0.0)
    dropout = check_real("dropout", dropout, low=0.0, high=1.0, high_inclusive=False)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    p = jax.random.uniform(k1, (), counts.dtype, thin[0], thin[1])
    # Binomial(counts, p) thinning, by its moment-matched Gaussian (exact sampling with
    # jax.random.binomial is ~50x slower on CPU and the views only need the right noise).
    noise = jax.random.normal(k2, counts.shape, counts.dtype)
    thinned = jnp.maximum(jnp.round(counts * p + jnp.sqrt(counts * p * (1 - p)) * noise), 0.0)
    x = log_normalize_jax(thinned)
    scale = jnp.exp(lib_jitter * jax.random.normal(k3, (), counts.dtype))
    x = jnp.log1p(jnp.expm1(x) * scale)
    keep = jax.random.bernoulli(k4, 1 - dropout, x.shape)
    return jnp.where(keep, x, 0.0)


class LeCellModel(eqx.Module):
    """Encoder (G -> D) and residual predictor (D -> D) MLPs.

    `embed(x)` takes one cell's log-normalised expression (G,), standardises it with
    `gene_mean`/`gene_scale` and encodes it to (D,); `score(x)` is its JEPA-SCORE, the
    value `fit` writes to `obs["jepa_score"]`. The raw `encoder` MLP skips the
    standardisation: score and embed through the model, not through `model.encoder`.

    **Arguments:** `n_genes`, `latent_dim`, `width` positive integers, `depth` an integer
    >= 0 (hidden layers of the encoder); `gene_mean` `(n_genes,)` finite and `gene_scale`
    `(n_genes,)` finite and > 0 (None: 0 and 1); `key`. Anything else raises a
    `ValueError` naming the argument.
    """

    encoder: eqx.nn.MLP
    predictor: eqx.nn.MLP
    gene_mean: Float[Array, " G"]
    gene_scale: Float[Array, " G"]

    def __init__(
        self,
        n_genes: int,
        latent_dim: int = 16,
        width: int = 256,
        depth: int = 2,
        gene_mean=None,
        gene_scale=None,
        *,
        key: jax.Array,
    ):
        n_genes = check_positive_int("n_genes", n_genes)
        latent_dim = check_positive_int("latent_dim", latent_dim)
        width = check_positive_int("width", width)
        if isinstance(depth, bool) or depth != 0:  # 0: a linear encoder
            depth = check_positive_int("depth", depth)
        n_params = n_genes * width + depth * width * width + width * latent_dim + latent_dim * width
        check_memory("n_genes, latent_dim, width, depth", 8.0 * 4 * n_params)  # + Adam's moments
        if gene_mean is not None:
            gene_mean = as_array("gene_mean", gene_mean, shape=(n_genes,), finite=True)
        if gene_scale is not None:
            gene_scale = as_array(
                "gene_scale",
                gene_scale,
                shape=(n_genes,),
                finite=True,
                low=0.0,
                low_inclusive=False,
            )
        ke, kp = jax.random.split(key)
        self.encoder = eqx.nn.MLP(n_genes, latent_dim, width, depth, activation=jax.nn.gelu, key=ke)
        self.predictor = eqx.nn.MLP(
            latent_dim, latent_dim, width // 2, 1, activation=jax.nn.gelu, key=kp
        )
        dt = jnp.result_type(float)  # the parameters' dtype
        self.gene_mean = jnp.zeros(n_genes, dt) if gene_mean is None else jnp.asarray(gene_mean, dt)
        self.gene_scale = (
            jnp.ones(n_genes, dt) if gene_scale is None else jnp.asarray(gene_scale, dt)
        )

    def embed(self, x: Float[Array, " G"]) -> Float[Array, " D"]:
        mean = jax.lax.stop_gradient(self.gene_mean)
        scale = jax.lax.stop_gradient(self.gene_scale)
        return self.encoder((x - mean) / scale)

    def predict(self, z: Float[Array, " D"]) -> Float[Array, " D"]:
        return z + self.predictor(z)

    def score(self, x: Float[Array, " G"]) -> Float[Array, ""]:
        """JEPA-SCORE of one cell's log-normalised expression `x` (G,) (`jepa_score(self, x)`)."""
        return jacobian_log_volume(self.embed, x)


def jepa_loss(
    model: LeCellModel,
    counts: Float[Array, "B G"],
    *,
    key: jax.Array,
    n_views: int = 2,
    lam: float = 0.05,
    n_slices: int = 256,
    offset: Float[Array, "B G"] | None = None,
) -> tuple[Float[Array, ""], dict[str, Float[Array, ""]]]:
    """LeJEPA objective on a batch of cells; returns (loss, {sigreg, invariance}).

    **Arguments:** `model`; `counts` `(B, G)` with G the model's genes (finite, >= 0;
    fractional pseudo-counts are accepted, as in `augment`);
    `key`; `n_views`, `n_slices` positive integers; `lam` in [0, 1] (the SIGReg weight);
    `offset` `(B, G)` or None: subtracted from every log-normalised view of each cell
    before the encoder (batch conditioning: its batch's mean log-expression minus the
    overall mean, `train_lecell(batch=...)`).
    Anything else raises a `ValueError` naming the argument.
    """
    counts = as_array(
        "counts",
        counts,
        shape=(None, model.gene_mean.shape[0]),
        dtype=jnp.floating,
        nonempty=True,
        finite=True,
        low=0.0,
    )
    n_views = check_positive_int("n_views", n_views)
    # the views and their per-layer activations, forward and backward
    check_memory("n_views", 8.0 * 4 * n_views * counts.shape[0] * counts.shape[1])
    n_slices = check_positive_int("n_slices", n_slices)
    lam = check_real("lam", lam, low=0.0, high=1.0)
    kv, ks = jax.random.split(key)
    b = counts.shape[0]
    vkeys = jax.random.split(kv, (n_views, b))
    views = jax.vmap(jax.vmap(lambda c, k: augment(c, key=k)), in_axes=(None, 0))(counts, vkeys)
    if offset is not None:
        offset = as_array("offset", offset, shape=counts.shape, dtype=jnp.floating, finite=True)
        views = views - offset[None]
    z = jax.vmap(jax.vmap(model.embed))(views)  # (V, B, D)
    center = jnp.mean(z, 0)
    inv = jnp.mean(jnp.sum((jax.vmap(jax.vmap(model.predict))(z) - center[None]) ** 2, -1))
    sig = jnp.mean(
        jax.vmap(lambda zv, k: sigreg(zv, key=k, n_slices=n_slices))(
            z, jax.random.split(ks, n_views)
        )
    )
    return lam * sig + (1 - lam) * inv, {"sigreg": sig, "invariance": inv}
