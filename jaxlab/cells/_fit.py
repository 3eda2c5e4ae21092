"""`fit`: AnnData in, AnnData out — train LeCellModel and annotate the cells."""

from __future__ import annotations

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from jaxlab._core import check_positive_int, load_checkpoint, optimizer_update, save_checkpoint

from ._data import counts_matrix, log_normalize
from ._model import LeCellModel, jepa_loss
from ._score import gene_attribution, jepa_score

__all__ = ["fit", "train_lecell", "annotate"]


def _float():
    """JAX's default float dtype (float64 when x64 is enabled): data match the parameters."""
    return jnp.result_type(float)


def train_lecell(
    counts: np.ndarray,
    *,
    key: jax.Array,
    latent_dim: int = 16,
    width: int = 256,
    steps: int = 1500,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    lam: float = 0.05,
    n_views: int = 2,
    chunk: int = 50,
    checkpoint: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
) -> tuple[LeCellModel, dict[str, np.ndarray]]:
    """Train on a (cells x genes) count matrix; returns the model and loss curves."""
    check_positive_int("steps", steps)
    check_positive_int("batch_size", batch_size)
    n, g = counts.shape
    logx = log_normalize(counts)
    km, kt = jax.random.split(key)
    model = LeCellModel(g, latent_dim, width, gene_mean=logx.mean(0),
                        gene_scale=logx.std(0) + 0.1, key=km)
    opt = optax.adamw(learning_rate, weight_decay=1e-4)
    state = opt.init(eqx.filter(model, eqx.is_array))
    start = 0
    if resume and checkpoint is not None and Path(checkpoint).is_file():
        model, state, s = load_checkpoint(checkpoint, (model, state, jnp.array(0)))
        start = int(s)
    data = jnp.asarray(counts, dtype=_float())
    bsz = min(batch_size, n)

    @eqx.filter_jit
    def run_chunk(model, state, k):
        params, static = eqx.partition(model, eqx.is_array)

        def body(carry, kk):
            p, s = carry
            ki, kl = jax.random.split(kk)
            idx = jax.random.choice(ki, n, (bsz,), replace=False)

            def loss_fn(pp):
                return jepa_loss(eqx.combine(pp, static), data[idx], key=kl, n_views=n_views,
                                 lam=lam)

            (loss, parts), grads = jax.value_and_grad(loss_fn, has_aux=True)(p)
            upd, s = optimizer_update(opt, grads, s, p)
            return (optax.apply_updates(p, upd), s), (loss, parts["sigreg"], parts["invariance"])

        (params, state), hist = jax.lax.scan(body, (params, state), jax.random.split(k, chunk))
        return eqx.combine(params, static), state, hist

    curves = {"loss": [], "sigreg": [], "invariance": []}
    n_chunks = max(0, -(-(steps - start) // chunk))
    bar = tqdm(range(n_chunks), desc="cells: LeJEPA", disable=not progress)
    done = start
    for _ in bar:
        model, state, (loss, sig, inv) = run_chunk(model, state, jax.random.fold_in(kt, done))
        done += chunk
        for name, v in (("loss", loss), ("sigreg", sig), ("invariance", inv)):
            curves[name].append(np.asarray(v))
        bar.set_postfix(loss=float(loss[-1]), sigreg=float(sig[-1]))
        if checkpoint is not None:
            save_checkpoint(checkpoint, (model, state, jnp.array(done)))
    return model, {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in curves.items()}


def annotate(model: LeCellModel, counts: np.ndarray, *, attributions: bool = True,
             batch: int = 256) -> dict[str, np.ndarray]:
    """Embeddings, JEPA-SCOREs and (optionally) gene attributions for every cell."""
    logx = jnp.asarray(log_normalize(counts), dtype=_float())
    emb = jax.jit(jax.vmap(model.embed))
    score = jax.jit(jax.vmap(lambda x: jepa_score(model.embed, x)))
    attr = jax.jit(jax.vmap(lambda x: gene_attribution(model.embed, x)))
    out = {"embedding": [], "score": [], "attribution": []}
    for s in range(0, logx.shape[0], batch):
        xb = logx[s:s + batch]
        out["embedding"].append(np.asarray(emb(xb)))
        out["score"].append(np.asarray(score(xb)))
        if attributions:
            out["attribution"].append(np.asarray(attr(xb)))
    return {k: np.concatenate(v) for k, v in out.items() if v}


def fit(adata, *, key: jax.Array, layer: str | None = None, attributions: bool = True,
        **train_kwargs):
    """Train LeCellModel on `adata`'s counts (X or `layer`) and annotate a copy.

    **Returns:** (model, annotated copy) with `obsm["X_lecell"]` (cells x D),
    `obs["jepa_score"]`, `obs["jepa_logdensity"]` (score plus the Gaussian log-prior of
    the embedding: the density estimate) and, when `attributions`, `layers["jepa_attribution"]`
    (gradient x input of the score per gene). obs/var are kept unchanged.
    """
    counts = counts_matrix(adata, layer)
    model, curves = train_lecell(counts, key=key, **train_kwargs)
    ann = annotate(model, counts, attributions=attributions)
    out = adata.copy()
    out.obsm["X_lecell"] = ann["embedding"]
    out.obs["jepa_score"] = ann["score"]
    # Change of variables with the isotropic-Gaussian embedding SIGReg enforces:
    # log p(x) = log N(f(x); 0, I) + JEPA-SCORE(x), up to a constant.
    out.obs["jepa_logdensity"] = ann["score"] - 0.5 * np.sum(ann["embedding"] ** 2, axis=1)
    if attributions:
        out.layers["jepa_attribution"] = ann["attribution"].astype(np.float32)
    out.uns["lecell"] = {"final_loss": float(curves["loss"][-1]) if len(curves["loss"]) else
                         float("nan")}
    return model, out
