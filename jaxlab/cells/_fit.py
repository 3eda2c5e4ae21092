"""`fit`: AnnData in, AnnData out — train LeCellModel (`LeCellStep`) and annotate the cells."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float

from jaxlab._core import (
    Driver,
    History,
    as_array,
    check_finite,
    check_positive_int,
    check_range,
    check_real,
    check_steps,
    driver_for,
    run_steps,
)

from ._data import counts_matrix, log_normalize
from ._model import LeCellModel, jepa_loss
from ._model_step import AbstractModelStep
from ._score import gene_attribution, jepa_score

__all__ = ["LeCellStep", "fit", "train_lecell", "annotate", "batch_offsets"]


def _float():
    """JAX's default float dtype (float64 when x64 is enabled): data match the parameters."""
    return jnp.result_type(float)


class LeCellStep(AbstractModelStep):
    """One LeJEPA step of a `LeCellModel`: a minibatch of cells (drawn without
    replacement), `jepa_loss` on augmented views, one optimiser update.

    State: `(params, opt_state)` with `params = eqx.filter(model, eqx.is_array)` (the
    model's functions stay in the step, so the state is all arrays and scans);
    `combine(params)` gives the model back. Aux: `loss`, `sigreg`, `invariance`.
    `init(model, key)` checks that `model` has the structure the step was built for.

    **Arguments:**

    - `model`: a `LeCellModel` whose structure (sizes, activations) the step trains.
    - `counts`: `(N, G)` raw counts of the training cells (finite, >= 0; G the model's genes).
    - `optimizer`: an optax transformation (`train_lecell`: AdamW, lr 1e-3, decay 1e-4).
    - `batch_size`: cells per step (at most N); `lam`: SIGReg weight in [0, 1];
      `n_views`: views per cell. Other values raise a `ValueError` naming the argument.

    Paper: P5 (LeCellModel; LeJEPA's SIGReg, Balestriero & LeCun 2025).
    """

    counts: Float[Array, "N G"]
    batch_codes: Array | None
    batch_offset: Float[Array, "B G"] | None
    structure: LeCellModel = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)
    lam: float = eqx.field(static=True)
    n_views: int = eqx.field(static=True)

    def __init__(
        self,
        model: LeCellModel,
        counts,
        *,
        optimizer: optax.GradientTransformation,
        batch_size: int = 256,
        lam: float = 0.05,
        n_views: int = 2,
        batch=None,
        batch_offset=None,
    ):
        counts = as_array(
            "counts",
            counts,
            shape=(None, model.gene_mean.shape[0]),
            nonempty=True,
            finite=True,
            low=0.0,
        )
        self.counts = jnp.asarray(counts, dtype=_float())
        self.structure = eqx.filter(model, eqx.is_array, inverse=True)
        self.optimizer = optimizer
        self.batch_size = min(check_positive_int("batch_size", batch_size), self.counts.shape[0])
        self.lam = check_real("lam", lam, low=0.0, high=1.0)
        self.n_views = check_positive_int("n_views", n_views)
        if (batch is None) != (batch_offset is None):
            raise ValueError("batch, batch_offset: expected both or neither")
        if batch is None:
            self.batch_codes = self.batch_offset = None
        else:
            codes = _batch_codes(batch, self.counts.shape[0])
            offset = as_array(
                "batch_offset",
                batch_offset,
                shape=(int(codes.max()) + 1, self.counts.shape[1]),
                finite=True,
            )
            self.batch_codes = jnp.asarray(codes)
            self.batch_offset = jnp.asarray(offset, dtype=_float())

    def loss(self, model: LeCellModel, key: jax.Array):
        ki, kl = jax.random.split(key)
        idx = jax.random.choice(ki, self.counts.shape[0], (self.batch_size,), replace=False)
        offset = None
        if self.batch_offset is not None and self.batch_codes is not None:
            offset = self.batch_offset[self.batch_codes[idx]]
        return jepa_loss(
            model, self.counts[idx], key=kl, n_views=self.n_views, lam=self.lam, offset=offset
        )


def _batch_codes(batch, n: int) -> np.ndarray:
    """`batch` as `(n,)` integer codes 0..B-1 (each batch non-empty)."""
    b = np.asarray(batch)
    if b.shape != (n,):
        raise ValueError(f"batch: expected one label per cell ({n},), received shape {b.shape}")
    if not np.issubdtype(b.dtype, np.integer) or isinstance(batch, bool):
        _, b = np.unique(b, return_inverse=True)
    b = b.reshape(-1).astype(np.int32)
    if b.min() < 0:
        raise ValueError(f"batch: expected non-negative integer codes, received {b.min()}")
    return b


def batch_offsets(log_expression: np.ndarray, batch) -> np.ndarray:
    """Per-batch offsets of log-expression: `offset[b] = mean_{c in b} x_c - mean_c x_c`
    `(B, G)`; `x - offset[batch]` gives every batch the overall mean log-expression per
    gene (the batch conditioning of `train_lecell(batch=...)`: in log space a
    multiplicative per-gene capture factor is an additive shift, which this removes).

    **Arguments:** `log_expression` `(N, G)` finite; `batch` `(N,)` labels (integer codes
    0..B-1, or any labels, coded in sorted order). A batch code with no cell raises.
    """
    x = np.asarray(as_array("log_expression", log_expression, ndim=2, finite=True), np.float64)
    codes = _batch_codes(batch, x.shape[0])
    counts = np.bincount(codes)
    if np.any(counts == 0):
        raise ValueError(f"batch: every code 0..{counts.size - 1} needs a cell, received {counts}")
    sums = np.zeros((counts.size, x.shape[1]))
    np.add.at(sums, codes, x)
    return sums / counts[:, None] - x.mean(0)[None, :]


def _check_raw_counts(counts: np.ndarray, name: str = "counts") -> None:
    """Finite, non-negative integer counts (LeCellModel log-normalises itself: non-integer
    input means normalised data)."""
    if not (np.issubdtype(counts.dtype, np.number) or counts.dtype == np.bool_):
        raise ValueError(f"{name}: expected numeric counts, received dtype {counts.dtype}")
    if counts.size == 0:
        raise ValueError(f"{name}: expected at least one cell and gene, received {counts.shape}")
    check_finite(name, counts)
    check_range(name, counts, low=0.0)
    frac = np.abs(counts - np.rint(counts))
    if np.any(frac > 1e-3):
        i, j = np.unravel_index(int(np.argmax(frac)), counts.shape)
        raise ValueError(
            f"{name}: expected raw integer counts (LeCellModel log-normalises them itself), "
            f"received non-integer values (e.g. {float(counts[i, j]):.4g} at cell {i}, gene {j}): "
            "pass raw counts (adata.raw, or a counts layer with layer=...), not "
            "log-normalised or scaled values (or say so with counts_are_normalised=True); "
            "round corrected counts with np.rint"
        )


def _log_expression(counts: np.ndarray, name: str, counts_are_normalised: bool) -> np.ndarray:
    """The model's input: log-normalised raw counts, or the user's own normalised values."""
    if not counts_are_normalised:
        _check_raw_counts(counts, name)
        return log_normalize(counts)
    if not np.issubdtype(counts.dtype, np.number) or counts.size == 0:
        raise ValueError(f"{name}: expected a non-empty numeric matrix, received {counts.dtype}")
    check_finite(name, counts)
    check_range(name, counts, low=0.0)
    return counts.astype(np.float32)


def train_lecell(
    counts: np.ndarray,
    *,
    key: jax.Array,
    latent_dim: int = 16,
    width: int = 256,
    steps: int = 1500,
    batch_size: int = 256,
    lam: float = 0.05,
    n_views: int = 2,
    optimizer: optax.GradientTransformation | None = None,
    driver: Driver | None = None,
    counts_are_normalised: bool = False,
    batch=None,
) -> tuple[LeCellModel, History]:
    """Train a `LeCellModel` on a (cells x genes) count matrix with `LeCellStep`.

    **Arguments:**

    - `counts`: `(N, G)` raw integer counts (non-integer values raise `ValueError`:
      they are log-normalised or scaled data); `key`: PRNG key (keyword-only; the model
      is initialised from its first split, step `i` uses `fold_in(second split, i)`).
    - `latent_dim`, `width`: model sizes; `steps`, `batch_size`, `lam`, `n_views`: training
      (positive integers, `steps` at most `jaxlab.MAX_RUN_STEPS` = 10**7; `lam`, the
      SIGReg weight, in [0, 1]). Other values raise a
      `ValueError` naming the argument.
    - `optimizer`: default `optax.adamw(1e-3, weight_decay=1e-4)`; pass one object to
      several calls to reuse the compiled step.
    - `driver`: a `jaxlab.Driver` (chunk, checkpointer for save/resume, progress); its
      chunk defaults to 50 steps here when left at `Driver()`'s (no effect on the results).
    - `counts_are_normalised`: True when `counts` already holds log-normalised expression
      (e.g. `log1p(CP10k)`, non-negative): it is used as the model input as it is, instead
      of raising; the training views then thin `expm1(counts)` as pseudo-counts (about
      1e4 per cell), an approximation of the count-level augmentation: raw counts are
      preferred when you have them. Pass the same value to `annotate`.
    - `batch`: None, or `(N,)` batch labels: batch conditioning. Every view's
      log-expression is centred on its batch (minus `batch_offsets(log_expression,
      batch)[batch]`), so the encoder sees no per-gene batch shift of the mean (the
      multiplicative capture factors of a count model); pass the same labels to
      `annotate`. None: the model sees no batch labels (bit-identical to before).

    **Returns:** `(model, history)`, `history.aux` with the curves `loss`, `sigreg`,
    `invariance` of shape `(steps,)`.
    """
    check_steps("steps", steps)
    check_positive_int("batch_size", batch_size)
    check_positive_int("latent_dim", latent_dim)
    check_positive_int("width", width)
    check_positive_int("n_views", n_views)
    check_real("lam", lam, low=0.0, high=1.0)
    counts = np.asarray(counts)
    if counts.ndim != 2:
        raise ValueError(f"counts: expected (cells, genes), received shape {counts.shape}")
    logx = _log_expression(counts, "counts", counts_are_normalised)
    _, g = counts.shape
    km, kt = jax.random.split(key)
    offset = None if batch is None else batch_offsets(logx, batch)
    centred = logx if offset is None else logx - offset[_batch_codes(batch, logx.shape[0])]
    model = LeCellModel(
        g, latent_dim, width, gene_mean=centred.mean(0), gene_scale=centred.std(0) + 0.1, key=km
    )
    if optimizer is None:
        optimizer = optax.adamw(1e-3, weight_decay=1e-4)
    step = LeCellStep(
        model,
        counts if not counts_are_normalised else np.expm1(logx),
        optimizer=optimizer,
        batch_size=batch_size,
        lam=lam,
        n_views=n_views,
        batch=batch,
        batch_offset=offset,
    )
    (params, _), hist = run_steps(
        step,
        step.init(model, kt),
        key=kt,
        steps=steps,
        driver=driver_for(driver, chunk=50),
    )
    return step.combine(params), hist


def annotate(
    model: LeCellModel,
    counts: np.ndarray,
    *,
    attributions: bool = True,
    batch: int = 256,
    counts_are_normalised: bool = False,
    batch_labels=None,
) -> dict[str, np.ndarray]:
    """Embeddings, JEPA-SCOREs, log-densities and (optionally) gene attributions per cell.

    **Arguments:** `model` a `LeCellModel`; `counts` `(N, G)` raw integer counts, G the
    model's genes (log-normalised here, as in training); `attributions`; `batch` cells
    per jitted call (a positive integer);
    `counts_are_normalised` as in `train_lecell` (True: `counts` is already
    log-normalised expression and is used as it is); `batch_labels` `(N,)`: the batch
    labels of a model trained with `train_lecell(batch=...)` (each cell is centred on
    its batch's mean log-expression among the cells passed here; None: no centring).

    **Returns:** a dict under the names `fit` writes to the AnnData:
    `"X_lecell"` (N, D) embeddings, `"jepa_score"` (N,), `"jepa_logdensity"` (N,)
    (score plus the Gaussian log-prior of the embedding) and, when `attributions`,
    `"jepa_attribution"` (N, G). Other inputs raise a `ValueError` naming the argument.
    """
    if not isinstance(model, LeCellModel):
        raise ValueError(f"model: expected a LeCellModel, received {type(model).__name__}")
    batch = check_positive_int("batch", batch)
    as_array("counts", counts, shape=(None, model.gene_mean.shape[0]))
    logx = _log_expression(np.asarray(counts), "counts", counts_are_normalised)
    if batch_labels is not None:
        codes = _batch_codes(batch_labels, logx.shape[0])
        logx = logx - batch_offsets(logx, codes)[codes]
    logx = jnp.asarray(logx, dtype=_float())
    emb = jax.jit(jax.vmap(model.embed))
    score = jax.jit(jax.vmap(lambda x: jepa_score(model, x)))
    attr = jax.jit(jax.vmap(lambda x: gene_attribution(model, x)))
    out = {"X_lecell": [], "jepa_score": [], "jepa_attribution": []}
    for s in range(0, logx.shape[0], batch):
        xb = logx[s : s + batch]
        out["X_lecell"].append(np.asarray(emb(xb)))
        out["jepa_score"].append(np.asarray(score(xb)))
        if attributions:
            out["jepa_attribution"].append(np.asarray(attr(xb)))
    res = {k: np.concatenate(v) for k, v in out.items() if v}
    # Change of variables with the isotropic-Gaussian embedding SIGReg enforces:
    # log p(x) = log N(f(x); 0, I) + JEPA-SCORE(x), up to a constant.
    res["jepa_logdensity"] = res["jepa_score"] - 0.5 * np.sum(res["X_lecell"] ** 2, axis=1)
    return res


def fit(
    adata,
    *,
    key: jax.Array,
    layer: str | None = None,
    attributions: bool = True,
    counts_are_normalised: bool = False,
    batch_key: str | None = None,
    **train_kwargs,
):
    """Train LeCellModel on `adata`'s counts (X or `layer`) and annotate a copy.

    **Arguments:**

    - `adata`: AnnData with raw integer counts in `X` (or in `layers[layer]`); cells x genes.
    - `key`: PRNG key (keyword-only), as in `train_lecell`.
    - `layer`: the layer holding the counts (None: `X`).
    - `attributions`: also compute per-gene attributions (one gradient per cell).
    - `counts_are_normalised`: True when `X` (or the layer) holds log-normalised
      expression rather than raw counts (non-integer values raise otherwise); see
      `train_lecell`.
    - `batch_key`: None (the model sees no batch labels), or an `obs` column of batch
      labels: batch-conditioned training and annotation (its codes reach `train_lecell`
      as `batch`, which is therefore not one of `train_kwargs`).
    - `**train_kwargs`: passed to `train_lecell`: `latent_dim` (16), `width` (256),
      `steps` (1500), `batch_size` (256), `lam` (SIGReg weight, 0.05), `n_views` (2),
      `optimizer` (AdamW(1e-3)), `driver` (a `jaxlab.Driver`: chunk, checkpointer,
      progress); an unknown name raises `TypeError`.

    **Returns:** (model, annotated copy) (an AnnData result, scanpy style, rather than the
    `(model, History)` of `train_lecell`; its final loss is in `uns["lecell"]`) with
    `obsm["X_lecell"]` (cells x D),
    `obs["jepa_score"]`, `obs["jepa_logdensity"]` (score plus the Gaussian log-prior of
    the embedding: the density estimate) and, when `attributions`, `layers["jepa_attribution"]`
    (gradient x input of the score per gene). obs/var are kept unchanged.
    """
    counts = counts_matrix(adata, layer)
    where = "adata" if layer is None else f"layer {layer!r}"
    _log_expression(counts, where, counts_are_normalised)  # the error names the source
    labels = None
    if batch_key is not None:
        if batch_key not in adata.obs:
            raise ValueError(f"batch_key: expected an obs column, received {batch_key!r}")
        labels = np.asarray(adata.obs[batch_key].astype("category").cat.codes)
    model, history = train_lecell(
        counts, key=key, counts_are_normalised=counts_are_normalised, batch=labels, **train_kwargs
    )
    ann = annotate(
        model,
        counts,
        attributions=attributions,
        counts_are_normalised=counts_are_normalised,
        batch_labels=labels,
    )
    out = adata.copy()
    out.obsm["X_lecell"] = ann["X_lecell"]
    out.obs["jepa_score"] = ann["jepa_score"]
    out.obs["jepa_logdensity"] = ann["jepa_logdensity"]
    if attributions:
        out.layers["jepa_attribution"] = ann["jepa_attribution"].astype(np.float32)
    out.uns["lecell"] = {"final_loss": float(history.losses[-1])}
    return model, out
