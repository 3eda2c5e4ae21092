"""TopK sparse autoencoders on the residual stream of SmolLM2-135M and Qwen2.5-Coder-0.5B vs a
top-L0 PCA baseline (P14's tool), one SAE per model.

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

from experiments._harness import (
    Claim,
    Estimate,
    Result,
    RunContext,
    all_of,
    at_least,
    at_most,
    cache_dir,
    log,
    model_params,
    model_tag,
    superior,
)
from jaxlab import Driver

NAME = "interp_sae"
# the SAE quality targets are jaxlab's bars for the toolkit P14 uses, not claims of P14
# (issue #55 item 2): their own section, so P14's counts are its own
PAPER = "interp"
DESCRIPTION = (
    "TopK SAE (aux-k) on SmolLM2 / Qwen-0.5B resid_post mid-layer: EV, L0, dead, CE/KL vs PCA"
)
# per-model wall-clock metrics (store, train, metrics, total): differ between runs
TIMING_METRICS = ("*_seconds",)


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 shared CPU cores, about an hour).

    `train_tokens` and `steps` are per model (aligned with `models`); a training
    segment of `segment_tokens` tokens stores all but its BOS row.
    """

    models: tuple[str, ...] = ("smollm2", "qwen-0.5b")
    # >= 200k stored tokens for both (1584 segments of 127). The SmolLM2 store took ~28 min
    # at load 7-11 on 2 shared cores; Qwen-0.5B's 12 min (SAE 4 min, metrics 3 min) at
    # load 2-11, 2026-12-02
    train_tokens: tuple[int, ...] = (202_752, 202_752)
    eval_tokens: int = 4096
    segment_tokens: int = 128
    eval_every: int = 8
    expansion: int = 8
    k: int = 32
    batch_size: int = 512
    steps: tuple[int, ...] = (600, 600)
    lr: float = 4e-4
    buffer_size: int = 16384
    dead_window: int = 200
    window_tokens: int = 1 << 20
    ce_sequences: int = 16
    curve_k: tuple[int, ...] = (8, 16, 32, 64, 128)
    #: explained-variance bar (SAELens' reference for GPT-2-class TopK SAEs)
    ev_bar: float = 0.8
    #: the largest fraction of dead latents (SAELens' reference)
    max_dead: float = 0.05
    #: CE-loss score bar (SAELens' reference)
    ce_bar: float = 0.8
    #: margin of "SAE beats PCA at equal L0" (EV and CE score): any gain, so 0
    pca_margin: float = 0.0


QUICK = Config()
TINY = Config(  # the smoke tier: SmolLM2, a 2k-token store, two SAE buffers of 4 steps
    models=("smollm2",),
    train_tokens=(2048,),
    eval_tokens=512,
    steps=(8,),
    batch_size=128,
    buffer_size=512,
    ce_sequences=2,
    curve_k=(8, 32),
)
FULL = Config(
    train_tokens=(20_000_000, 20_000_000),
    eval_tokens=65536,
    expansion=16,
    batch_size=4096,
    steps=(30_000, 30_000),
    buffer_size=1 << 20,
    dead_window=1000,
    ce_sequences=256,
)

# FULL on Qwen-0.5B: the 1M-row training window and the 1M-token SAE buffer (896 float32
# each: 3.6 GB apiece), the float32 model (2.5 GB), the SAE (2 x 896 x 14336) with Adam
# moments and a 4096-row batch of latents (0.2 GB each, a few live): about 12 GB
FULL_MEMORY_GB = 12


def full_work(config) -> float:
    """FLOPs per model: the activation stores (forward passes), the SAE steps, the CE/KL
    splices (4 forward passes per sequence), ~6e11 for the load and compiles (d_model
    taken as sqrt(n_params / 400))."""

    work = 0.0
    for name, tokens, steps in zip(config.models, config.train_tokens, config.steps, strict=True):
        p = model_params(name)
        d = (p / 400) ** 0.5
        work += 2 * p * (tokens + config.eval_tokens)
        work += 6 * steps * config.batch_size * d * config.expansion * d
        work += 8 * p * config.ce_sequences * config.segment_tokens + 6e11
    return work


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


def _store(model, items, layer, tag):
    import jaxlab.lm as lm
    from jaxlab import TqdmProgress

    h = hashlib.sha256(
        json.dumps([model.config.name, model.config.n_layers, layer, "skip_first", items]).encode()
    ).hexdigest()[:16]
    path = cache_dir("interp", "acts") / f"{tag}_{h}"
    t0 = time.perf_counter()
    # the library default skip_first=True: the forward sees the BOS, the store keeps every
    # other token (BOS rows carry outsized attention-sink activations and are left out of
    # SAE training and metrics, as in SAELens)
    store = lm.collect(
        model,
        None,
        [list(seg) for seg in items],
        layers=[layer],
        path=path,
        shard_rows=8192,
        batch_tokens=2048,
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


def _one_model(
    name: str, train_tokens: int, steps: int, config: Config, key: jax.Array, ctx: RunContext
) -> dict:
    """Store build, SAE training and metrics of one model; metrics, curves and timings."""
    import jaxlab.interp as ip
    import jaxlab.lm as lm
    from jaxlab import TqdmProgress

    tag = model_tag(name)
    t_start = time.perf_counter()
    model, tok = lm.load(name, mesh="auto")
    cfg = model.config
    layer = cfg.n_layers // 2
    texts = package_texts()
    ev_every = config.eval_every
    train_texts = [t for i, t in enumerate(texts) if i % ev_every != 0]
    eval_texts = [t for i, t in enumerate(texts) if i % ev_every == 0]
    L = config.segment_tokens
    train_items = segments(tok, train_texts, train_tokens, L)
    eval_items = segments(tok, eval_texts, config.eval_tokens, L)
    log.info(
        "%s: %d distributions' descriptions: %d train / %d eval segments of %d tokens",
        tag,
        len(texts),
        len(train_items),
        len(eval_items),
        L,
    )
    head = lm.layer_slice(model, 0, layer + 1)
    t0 = time.perf_counter()
    train = _store(head, train_items, layer, f"{tag}_train")
    held = _store(head, eval_items, layer, f"{tag}_eval")
    store_s = time.perf_counter() - t0
    x_eval = jnp.asarray(held.array())
    # the dead-fraction window and the PCA/init sample: the first `window_tokens` rows
    x_train = jnp.asarray(_first_rows(train, config.window_tokens))
    sample = x_train[:: max(x_train.shape[0] // 8192, 1)]
    d = cfg.d_model
    scale = float(np.sqrt(d) / float(jnp.mean(jnp.linalg.norm(sample, axis=1))))

    k_sae, k_fit = jax.random.split(key)
    sae = ip.TopKSAE(d, config.expansion * d, config.k, key=k_sae, b_dec=sample * scale)
    t0 = time.perf_counter()
    sae, _, hists = ip.fit_sae(
        train,
        sae,
        key=k_fit,
        steps=steps,
        batch_size=config.batch_size,
        optimizer=optax.adam(config.lr),
        buffer_size=config.buffer_size,
        scale=scale,
        dead_window=config.dead_window,
        driver=Driver(chunk=50, progress=TqdmProgress()),
        buffer_checkpointer=lambda b: ctx.checkpointer(f"{tag}_sae_buffer{b:04d}"),
    )
    train_s = time.perf_counter() - t0
    losses = np.concatenate([h.losses for h in hists])
    log.info(
        "%s SAE trained: %d steps in %.0f s, loss %.3f -> %.3f",
        tag,
        losses.size,
        train_s,
        losses[0],
        losses[-1],
    )

    k = config.k
    t0 = time.perf_counter()
    pca = ip.TopKPCA(sample * scale, k)
    m_sae = ip.sae_metrics(sae, x_eval * scale)
    m_pca = ip.sae_metrics(pca, x_eval * scale)
    window = ip.sae_metrics(sae, x_train * scale)
    ce_tokens = jnp.asarray(np.asarray(eval_items[: config.ce_sequences], np.int32))
    ce_sae = ip.ce_loss_score(model, ce_tokens, sae, layer=layer, input_scale=scale, skip_first=1)
    ce_pca = ip.ce_loss_score(model, ce_tokens, pca, layer=layer, input_scale=scale, skip_first=1)
    curve: dict[str, list[tuple[int, float]]] = {"sae": [], "pca": []}
    for kk in config.curve_k:
        if kk <= sae.d_sae:
            m = ip.sae_metrics(sae.with_k(kk), x_eval * scale)
            curve["sae"].append((kk, float(m["explained_variance"])))
        if kk <= d:
            m = ip.sae_metrics(ip.TopKPCA(sample * scale, kk), x_eval * scale)
            curve["pca"].append((kk, float(m["explained_variance"])))
    metrics_s = time.perf_counter() - t0

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
        "n_layers": cfg.n_layers,
        "d_model": d,
        "d_sae": sae.d_sae,
        "k": k,
        "input_scale": scale,
        "store_seconds": store_s,
        "train_seconds": train_s,
        "metrics_seconds": metrics_s,
        "total_seconds": time.perf_counter() - t_start,
        "steps": int(losses.size),
        "final_loss": float(losses[-1]),
        "train_dead_frac_last": float(np.concatenate([h.aux["dead_frac"] for h in hists])[-1]),
        "n_distributions": len(texts),
    }
    for kk, ev in curve["sae"]:
        metrics[f"ev_sae_k{kk}"] = ev
    for kk, ev in curve["pca"]:
        metrics[f"ev_pca_k{kk}"] = ev
    density = ip.density_histogram(window["feature_density"], bins=50)
    return {"tag": tag, "metrics": metrics, "curve": curve, "density": density}


def _claims(tag: str, m: dict, config: Config) -> list[Claim]:
    """The four claims of one model: point values of one trained SAE on the held-out
    tokens (no interval: one SAE, one evaluation set)."""
    k = m["k"]

    def point(v, n, what):
        return Estimate.single(v, n=int(n), method=f"{what} (one SAE, no interval)")

    ev = point(m["ev"], m["eval_tokens"], "held-out explained variance")
    ce = point(m["ce_loss_score"], m["ce_tokens"], "CE-loss score")
    return [
        at_least(
            ev,
            config.ev_bar,
            null=f"SAELens' EV {config.ev_bar:g}",
            subject="explained variance",
            claim=f"{tag}: EV >= {config.ev_bar:g} at L0 ~ {k}",
            # issue 56: SAELens <= 6.18 divided by E||x||^2 (uncentred), which inflates EV
            # for activations with a mean; jaxlab computes current SAELens' (centred) EV
            paper=f"EV >= {config.ev_bar:g} (SAELens, GPT-2-class; SAELens <= 6.18's EV is "
            "inflated for activations with a mean, this EV is current SAELens')",
            detail=f"L0 {m['l0']:.1f} (layer {m['layer']}, {m['train_tokens']} training "
            f"tokens, {m['steps']} steps)",
        ),
        at_most(
            point(m["dead_frac"], m["d_sae"], "dead fraction over the training window"),
            config.max_dead,
            null=f"{config.max_dead:.0%} dead latents",
            subject="dead fraction",
            claim=f"{tag}: dead latents <= {config.max_dead:.0%}",
            paper=f"<= {config.max_dead:.0%}",
            detail=f"{100 * m['dead_frac']:.2f}% of {m['d_sae']} over {m['window_tokens']} "
            "training tokens",
        ),
        at_least(
            ce,
            config.ce_bar,
            null=f"SAELens' CE-loss score {config.ce_bar:g}",
            subject="CE-loss score",
            claim=f"{tag}: CE-loss score >= {config.ce_bar:g}",
            paper=f">= {config.ce_bar:g}",
            detail=f"KL score {m['kl_score']:.3f}; zero-ablation CE {m['ce_ablated']:.2f}, "
            f"clean {m['ce_clean']:.2f}, SAE {m['ce_sae']:.2f}",
        ),
        all_of(
            {
                "EV": superior(
                    point(m["ev"] - m["pca_ev"], m["eval_tokens"], "EV difference"),
                    "SAE",
                    f"PCA at L0 {k}",
                    config.pca_margin,
                    claim=f"{tag}: SAE EV above PCA's at equal L0",
                    paper="SAE > PCA",
                    detail=f"EV {m['ev']:.3f} vs {m['pca_ev']:.3f}",
                ),
                "CE score": superior(
                    point(
                        m["ce_loss_score"] - m["pca_ce_loss_score"],
                        m["ce_tokens"],
                        "CE-loss score difference",
                    ),
                    "SAE",
                    f"PCA at L0 {k}",
                    config.pca_margin,
                    claim=f"{tag}: SAE CE-loss score above PCA's at equal L0",
                    paper="SAE > PCA",
                    detail=f"CE score {m['ce_loss_score']:.3f} vs {m['pca_ce_loss_score']:.3f}",
                ),
            },
            claim=f"{tag}: SAE beats PCA at equal L0 (EV and CE score)",
            paper="SAE > PCA",
        ),
    ]


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(config.models)
    if n == 0:
        raise ValueError("models: expected at least one model name")
    for field in ("train_tokens", "steps"):
        if len(getattr(config, field)) != n:
            raise ValueError(
                f"{field}: expected one value per model ({n}), received {getattr(config, field)}"
            )
    runs = [
        _one_model(*args, config, k, ctx)
        for *args, k in zip(
            config.models, config.train_tokens, config.steps, jax.random.split(key, n), strict=True
        )
    ]
    fig, axes = plt.subplots(n, 2, figsize=(10, 4 * n), squeeze=False)
    for (a1, a2), r in zip(axes, runs, strict=True):
        m, counts, edges = r["metrics"], *r["density"]
        a1.bar(edges[:-1], counts, width=np.diff(edges), align="edge")
        a1.set_xlabel("log10 feature density (training tokens)")
        a1.set_ylabel("latents")
        a1.set_title(f"{r['tag']} layer {m['layer']}: TopK SAE, {m['d_sae']} latents, k={m['k']}")
        for which, pts in r["curve"].items():
            if pts:
                a2.plot(*zip(*pts, strict=True), "o-", label=which.upper())
        a2.set_xscale("log", base=2)
        a2.set_xlabel("L0 (active components per token)")
        a2.set_ylabel("explained variance (held out)")
        a2.set_title(f"{r['tag']}: EV vs L0 (SAE trained at k={m['k']}, evaluated at k')")
        a2.legend()
    fig.tight_layout()

    metrics = {r["tag"]: r["metrics"] for r in runs}
    claims = [c for r in runs for c in _claims(r["tag"], r["metrics"], config)]
    first = runs[0]["metrics"]
    notes = (
        f"Models: {', '.join(config.models)} (pip weight wheels, 4-bit GGUF dequantised to "
        f"float32); resid_post of the middle layer (n_layers // 2). Text: the METADATA long "
        f"descriptions (README texts) of the {first['n_distributions']} installed Python "
        f"distributions (environment-dependent; the stores are content-hashed), cut into "
        f"{config.segment_tokens}-token segments; every {config.eval_every}th distribution "
        f"held out for EV/L0 and the CE/KL scores (zero-ablation baseline; the BOS position "
        f"kept clean). Inputs scaled so the mean norm is sqrt(d). The SAE EV-vs-L0 curve "
        f"evaluates the one SAE trained at k={config.k} with other k' at inference. "
        + " ".join(
            f"{r['tag']}: {r['metrics']['train_tokens']} training tokens, SAE "
            f"{r['metrics']['steps']} steps."
            for r in runs
        )
        # the wall-clock times are the `*_seconds` metrics (TIMING_METRICS), not in the
        # notes: a resumed or cached run's differ, the rest of the record must not
        + " Wall-clock times: the metrics <model>/store_seconds, train_seconds, "
        "metrics_seconds, total_seconds."
    )
    return Result(metrics=metrics, claims=claims, figures={"density_and_ev_l0": fig}, notes=notes)
