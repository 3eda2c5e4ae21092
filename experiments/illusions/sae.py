"""P14 claim: ablating the SAE features most associated with the illusion read-out
reduces |phi| more than ablating random or frequency-matched features.

A reduced Hamilton & Gifford design keeps phi = 0 exactly (6/2 vs 3/1 statements, the
same 3:1 ratio) so that every attribution question fits a short prompt. The attribution
read-out is the next-token choice " A" vs " B" after "...assistant\\nGroup" (the
shared "Group" token cancels). A TopK SAE (`jaxlab.interp`, trained through the `_core`
driver) is fitted on SmolLM2's resid_post at the middle layer over the prompts' own
tokens (QUICK: no external corpus). Latents at the answer position are associated with
the read-out (`interp.feature_label_association` against p(minority) above its median);
the k most correlated latents are ablated at every position (`interp.ablate_features`),
against k random firing latents and k frequency-matched latents; the effect is the
paired change of |phi| per presentation.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax

from experiments._harness import Claim, Result, RunContext, log
from experiments.illusions import _setup
from jaxlab import illusions as il
from jaxlab import interp as ip
from jaxlab import lm

NAME = "illusions_sae"
PAPER = "P14"
DESCRIPTION = "TopK-SAE features of the attribution read-out: ablation vs random/matched controls"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    model: str = "smollm2-135m-instruct"
    orders: int = 3
    counts: tuple[tuple[int, int], tuple[int, int]] = ((4, 2), (2, 1))
    expansion: int = 4
    k: int = 16
    steps: int = 300
    batch_size: int = 256
    lr: float = 1e-3
    ablate: int = 8


QUICK = Config()
FULL = Config(orders=200, counts=((18, 8), (9, 4)), expansion=16, k=32, steps=5000)


def _sequences(tok, stimuli):
    """Per presentation, the token ids of each attribution question up to its answer's
    "Group" (the next token, " A" or " B", is the choice)."""
    out = []
    for s in stimuli:
        qs = il.correlation_queries(s, traits=())[: len(s.texts)]
        head = tok.encode(il.layout_queries(tok, [s.context], [qs[:1]]).prompts[0])
        lay = il.layout_queries(
            tok,
            [s.context],
            [[il.Query(q.question, ("Group", "Group")) for q in qs]],
            max_options=2 * len(qs),
        )
        out.append([head + tok.encode(c, add_bos=False) for c in lay.continuations[0][::2]])
    return out


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    k_stim, k_sae, k_fit, k_ctrl = jax.random.split(key, 4)
    model, tok = lm.load(config.model)
    layer = model.config.n_layers // 2
    opt_ids = [tok.encode(" A", add_bos=False)[-1], tok.encode(" B", add_bos=False)[-1]]
    stimuli = [
        il.make_stimuli(key=jax.random.fold_in(k_stim, o), variant="neutral", counts=config.counts)
        for o in range(config.orders)
    ]
    seqs = _sequences(tok, stimuli)
    batches = [lm.pad_prompts(s) for s in seqs]

    def phis(intervene):
        out, pm = [], []
        for (t, m), s in zip(batches, stimuli, strict=True):
            lp = np.asarray(il.option_logprobs(model, t, m, opt_ids, intervene=intervene))
            p_min = np.asarray(il.option_probabilities(lp))[:, 1]
            pm.append(p_min)
            out.append(float(il.attribution_phi(p_min, s.desirable)))
        return np.array(out), pm

    # the plain run: the read-out, every real token (no BOS) for the SAE, the answer
    # position of each question for the association, all tokens for the contexts
    rows, last, every, base_phi, base_pm = [], [], [], [], []
    for (t, m), s in zip(batches, stimuli, strict=True):
        logits, acts = lm.forward_batched(model, t, mask=m, capture=["resid_post"], layers=[layer])
        lp = np.asarray(jax.nn.log_softmax(logits[:, -1, :], axis=-1))[:, opt_ids]
        base_pm.append(np.asarray(il.option_probabilities(lp))[:, 1])
        base_phi.append(float(il.attribution_phi(base_pm[-1], s.desirable)))
        a = np.asarray(acts["resid_post"][:, 0], np.float32)  # (B, T, d)
        mm = np.asarray(m).astype(bool)
        every.append(a[mm])
        mm[np.arange(mm.shape[0]), mm.argmax(1)] = False  # drop the first real token (BOS)
        rows.append(a[mm])
        last.append(a[:, -1])
    base_phi = np.array(base_phi)
    x = np.concatenate(rows)
    x_last = np.concatenate(last)
    scale = float(np.sqrt(x.shape[1]) / np.mean(np.linalg.norm(x, axis=1)))
    log.info("illusions_sae: %d token rows at layer %d", x.shape[0], layer)
    sae = ip.TopKSAE(
        x.shape[1], config.expansion * x.shape[1], config.k, key=k_sae, b_dec=jnp.asarray(x * scale)
    )
    sae, _, hists = ip.fit_sae(
        jnp.asarray(x),
        sae,
        key=k_fit,
        steps=config.steps,
        batch_size=min(config.batch_size, x.shape[0]),
        optimizer=optax.adam(config.lr),
        scale=scale,
        checkpointer=ctx.checkpointer("sae"),
    )
    losses = np.concatenate([h.losses for h in hists])
    quality = ip.sae_metrics(sae, jnp.asarray(x * scale))
    z_all = np.asarray(jax.vmap(sae.encode)(jnp.asarray(x * scale)))
    density = (z_all > 0).mean(0)
    z_last = np.asarray(jax.vmap(sae.encode)(jnp.asarray(x_last * scale)))

    p_min = np.concatenate(base_pm)
    label = (p_min > np.median(p_min)).astype(np.int32)
    assoc = ip.feature_label_association(jnp.asarray(z_last), jnp.asarray(label))
    corr = np.asarray(assoc["correlation"])
    top = np.argsort(-np.abs(corr))[: config.ablate]
    rand = il.matched_latents(density, top, key=k_ctrl, matched=False)
    matched = il.matched_latents(density, top, key=jax.random.fold_in(k_ctrl, 1))
    conds = {"top": top, "random": rand, "matched": matched}
    res = {}
    for name, lat in conds.items():
        res[name], _ = phis(il.ablation(sae, lat, layer=layer, input_scale=scale))
    metrics: dict[str, float] = {
        "layer": layer,
        "sae_explained_variance": float(quality["explained_variance"]),
        "sae_l0": float(quality["l0"]),
        "sae_final_loss": float(losses[np.isfinite(losses)][-1]),
        "token_rows": int(x.shape[0]),
        "phi/plain": float(base_phi.mean()),
        "abs_phi/plain": float(np.abs(base_phi).mean()),
        "top_abs_correlation": float(np.abs(corr[top]).mean()),
    }
    diffs = {}
    for name in conds:
        metrics[f"phi/{name}"] = float(res[name].mean())
        d = np.abs(res[name]) - np.abs(base_phi)
        diffs[name] = d
        metrics[f"abs_phi_change/{name}"] = float(d.mean())
    for ctrl in ("random", "matched"):
        m, lo, hi = il.mean_ci(diffs["top"] - diffs[ctrl])
        metrics[f"top_minus_{ctrl}"] = m
        metrics[f"top_minus_{ctrl}/ci_low"] = lo
        metrics[f"top_minus_{ctrl}/ci_high"] = hi
    contexts = []
    ids_flat = np.concatenate([np.asarray(t)[np.asarray(m).astype(bool)] for t, m in batches])
    seq_flat = np.concatenate(
        [np.repeat(np.arange(len(s)) + 1000 * o, [len(q) for q in s]) for o, s in enumerate(seqs)]
    )
    # contexts over all real tokens (BOS included, so the ids line up with the text)
    z_every = np.asarray(jax.vmap(sae.encode)(jnp.asarray(np.concatenate(every) * scale)))
    acts_flat = z_every[:, top[:3]]
    for j in range(min(3, len(top))):
        c = ip.top_activating_contexts(
            jnp.asarray(acts_flat[:, j]),
            jnp.asarray(ids_flat),
            jnp.asarray(seq_flat),
            k=1,
            window=4,
        )
        toks = [int(t) for t in np.asarray(c["tokens"][0]) if t >= 0]
        contexts.append(f"latent {int(top[j])} (corr {corr[top[j]]:+.2f}): {tok.decode(toks)!r}")
    claims = [
        Claim(
            "Ablating the k SAE latents most associated with the attribution read-out "
            "reduces |phi| more than k random and k frequency-matched latents (paired CI of "
            f"the difference below 0). {_setup.CAVEAT}",
            "holistic-frequency / analytic features are linked to the illusion (paper's "
            "SAE analysis on larger LLMs)",
            f"|phi| change: top {metrics['abs_phi_change/top']:+.3f}, random "
            f"{metrics['abs_phi_change/random']:+.3f}, matched "
            f"{metrics['abs_phi_change/matched']:+.3f}; top - random "
            f"{metrics['top_minus_random']:+.3f} [{metrics['top_minus_random/ci_low']:+.3f}, "
            f"{metrics['top_minus_random/ci_high']:+.3f}], top - matched "
            f"{metrics['top_minus_matched']:+.3f} [{metrics['top_minus_matched/ci_low']:+.3f}, "
            f"{metrics['top_minus_matched/ci_high']:+.3f}] over {config.orders} orders "
            f"(plain |phi| {metrics['abs_phi/plain']:.3f})",
            bool(
                metrics["top_minus_random/ci_high"] < 0 and metrics["top_minus_matched/ci_high"] < 0
            ),
        )
    ]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    names = ["plain", *conds]
    vals = [base_phi, *(res[n] for n in conds)]
    ax.boxplot(vals)
    ax.set_xticks(np.arange(1, len(names) + 1), names)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_ylabel("attribution phi per presentation")
    ax.set_title(f"SmolLM2 layer {layer}: ablating {config.ablate} latents", fontsize=9)
    fig.tight_layout()
    notes = (
        f"{_setup.CAVEAT} Reduced design {config.counts} (design phi "
        f"{float(il.phi_coefficient(np.array(config.counts))):.3f}), {config.orders} "
        f"orders, neutral labels. TopK SAE {sae.d_sae} latents, k={config.k}, "
        f"{config.steps} steps on {x.shape[0]} prompt tokens (EV "
        f"{metrics['sae_explained_variance']:.2f}); trained on the prompts themselves, so "
        "the latents are not a general dictionary. Top latents' contexts: " + "; ".join(contexts)
    )
    return Result(metrics=metrics, claims=claims, figures={"phi_ablation": fig}, notes=notes)
