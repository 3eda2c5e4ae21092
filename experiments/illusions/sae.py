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

Framing: the same questions with an analytic instruction paragraph before the
statements ("Think analytically: count the statements for each group before
answering."), a holistic one ("Go with your overall impression of each group.") or none
(`jaxlab.illusions.INSTRUCTIONS`). The SAE is fitted on the tokens of all three
framings. Reported: phi under each framing (paired over presentations), the latents at
the answer position whose mean activation differs most between analytic and holistic
(`framing_feature_shift`: sign-flip max-statistic p-values and bootstrap intervals, one
presentation = one resampling unit), and their overlap with the latents most associated
with the read-out (`latent_overlap`, hypergeometric null over the latents alive at the
answer position).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax

from experiments._harness import (
    Estimate,
    Result,
    RunContext,
    all_of,
    at_most,
    log,
    model_params,
    paired_t,
    superior,
    t_mean,
)
from experiments.illusions import _setup
from jaxlab import Driver, lm
from jaxlab import illusions as il
from jaxlab import interp as ip

NAME = "illusions_sae"
PAPER = "P14"
DESCRIPTION = "TopK-SAE features of the attribution read-out: ablation vs random/matched controls"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    model: str = "smollm2-135m-instruct"
    orders: int = 10
    counts: tuple[tuple[int, int], tuple[int, int]] = ((4, 2), (2, 1))
    expansion: int = 4
    k: int = 16
    steps: int = 300
    batch_size: int = 256
    lr: float = 1e-3
    ablate: int = 8
    framings: tuple[str, ...] = ("none", "analytic", "holistic")
    overlap_k: int = 16
    resamples: int = 2000
    # level of the sign-flip max-statistic and hypergeometric tests (p <= alpha; the usual 5%)
    alpha: float = 0.05


QUICK = Config()
# the smoke tier: 2 orders of the smallest design with phi = 0 and a 2:1 group-size ratio
# (6 attribution questions per presentation, not QUICK's 9: every presentation is run once
# per framing and per ablation, so its questions are most of the cost), a small SAE trained
# for a few steps
TINY = Config(
    orders=2,
    counts=((2, 2), (1, 1)),
    expansion=1,
    k=4,
    steps=20,
    batch_size=64,
    ablate=2,
    overlap_k=4,
    resamples=100,
)
FULL = Config(orders=200, counts=((18, 8), (9, 4)), expansion=16, k=32, steps=5000)
# FULL: ~13M token rows (200 orders x 3 framings x 39 questions x ~570 tokens) x 576 float32
# = ~31 GB on the device at a time (the SAE's training set; the scaled copy for its
# metrics), twice at the peak (`sae_metrics` pads a copy), plus the model and the SAE
FULL_MEMORY_GB = 65


def full_work(config: Config) -> float:
    """FLOPs: forwards of every attribution question (one sequence of ~13 tokens per statement
    + 60) per framing and ablation condition, plus the SAE's training steps."""
    n_q = sum(map(sum, config.counts))
    tokens = config.orders * n_q * (len(config.framings) + 3) * (13 * n_q + 60)
    d = lm.describe(config.model).config.d_model
    sae = 12 * config.steps * config.batch_size * config.expansion * d * d
    return 2 * model_params(config.model) * tokens + sae


#: rows per block of dense SAE codes: FULL's ~13M token rows x 9216 latents would take ~500
#: GB at once; QUICK's ~60k rows are one block
ENCODE_ROWS = 1 << 18


def _blocks(sae, x, scale, fn) -> list:
    """`fn(codes)` of each block of `ENCODE_ROWS` rows of `x * scale` (dense SAE codes)."""
    out = []
    for i in range(0, x.shape[0], ENCODE_ROWS):
        out.append(fn(jax.vmap(sae.encode)(jnp.asarray(x[i : i + ENCODE_ROWS] * scale))))
    return out


def _sequences(tok, stimuli, instruction=""):
    """Per presentation, the token ids of each attribution question up to its answer's
    "Group" (the next token, " A" or " B", is the choice), the context framed by
    `instruction` ("" = plain)."""
    out = []
    for s in stimuli:
        qs = il.correlation_queries(s, traits=())[: len(s.texts)]
        context = il.framed_context(s.context, instruction)
        head = tok.encode(il.layout_queries(tok, [context], [qs[:1]]).prompts[0])
        lay = il.layout_queries(
            tok,
            [context],
            [[il.Query(q.question, ("Group", "Group")) for q in qs]],
            max_options=2 * len(qs),
        )
        out.append([head + tok.encode(c, add_bos=False) for c in lay.continuations[0][::2]])
    return out


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    k_stim, k_sae, k_fit, k_ctrl = jax.random.split(key, 4)
    model, tok = lm.load(config.model, mesh="auto")
    layer = model.config.n_layers // 2
    opt_ids = [tok.encode(" A", add_bos=False)[-1], tok.encode(" B", add_bos=False)[-1]]
    stimuli = [
        il.make_stimuli(key=jax.random.fold_in(k_stim, o), variant="neutral", counts=config.counts)
        for o in range(config.orders)
    ]
    if config.framings[0] != "none":
        raise ValueError(f"framings: expected 'none' first, received {config.framings}")
    seqs_by = {f: _sequences(tok, stimuli, il.INSTRUCTIONS[f]) for f in config.framings}
    seqs = seqs_by["none"]
    batches_by = {f: [lm.pad_prompts(s) for s in sq] for f, sq in seqs_by.items()}
    batches = batches_by["none"]

    def phis(intervene):
        out, pm = [], []
        for (t, m), s in zip(batches, stimuli, strict=True):
            lp = np.asarray(il.option_logprobs(model, t, m, opt_ids, intervene=intervene))
            p_min = np.asarray(il.option_probabilities(lp))[:, 1]
            pm.append(p_min)
            out.append(float(il.attribution_phi(p_min, s.desirable)))
        return np.array(out), pm

    # the plain runs (every framing): the read-out, every real token (no BOS) for the
    # SAE, the answer position of each question, all tokens of the plain contexts
    rows, every = [], []
    last_by: dict[str, np.ndarray] = {}
    phi_by: dict[str, np.ndarray] = {}
    base_pm: list[np.ndarray] = []
    for f in config.framings:
        last, fphi = [], []
        for (t, m), s in zip(batches_by[f], stimuli, strict=True):
            logits, acts = lm.forward_batched(
                model, t, mask=m, capture=["resid_post"], layers=[layer]
            )
            lp = np.asarray(jax.nn.log_softmax(logits[:, -1, :], axis=-1))[:, opt_ids]
            pm = np.asarray(il.option_probabilities(lp))[:, 1]
            fphi.append(float(il.attribution_phi(pm, s.desirable)))
            a = np.asarray(acts["resid_post"][:, 0], np.float32)  # (B, T, d)
            mm = np.asarray(m).astype(bool)
            if f == "none":
                base_pm.append(pm)
                every.append(a[mm])
            mm[np.arange(mm.shape[0]), mm.argmax(1)] = False  # drop the first real token (BOS)
            rows.append(a[mm])
            last.append(a[:, -1])
        last_by[f] = np.concatenate(last)
        phi_by[f] = np.array(fphi)
    base_phi = phi_by["none"]
    x_last = last_by["none"]
    x = np.concatenate(rows)
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
        driver=Driver(checkpointer=ctx.checkpointer("sae")),
    )
    losses = np.concatenate([h.losses for h in hists])
    quality = ip.sae_metrics(sae, jnp.asarray(x * scale))
    fired = sum(_blocks(sae, x, scale, lambda z: np.asarray(z > 0).sum(0)))
    density = fired / x.shape[0]
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

    # framing: latents at the answer position under every framing, the analytic vs
    # holistic shift, and its overlap with the read-out's most associated latents
    z_by = {f: np.asarray(jax.vmap(sae.encode)(jnp.asarray(last_by[f] * scale))) for f in last_by}
    alive = np.flatnonzero(np.any([(z > 0).any(0) for z in z_by.values()], axis=0))
    k_over = min(config.overlap_k, alive.size)
    readout = alive[np.argsort(-np.abs(corr[alive]), kind="stable")[:k_over]]
    n_q = len(seqs[0])
    order_of = np.repeat(np.arange(config.orders), n_q)
    shift = None
    if {"analytic", "holistic"} <= set(config.framings):
        shift = il.framing_feature_shift(
            z_by["analytic"][:, alive],
            z_by["holistic"][:, alive],
            key=jax.random.fold_in(k_ctrl, 2),
            k=k_over,
            groups=order_of,
            resamples=config.resamples,
        )
        shift["latents"] = alive[shift["latents"]]
        # positions among the alive latents (the population of both draws)
        overlap = il.latent_overlap(
            np.searchsorted(alive, shift["latents"]),
            np.searchsorted(alive, readout),
            population=int(alive.size),
        )
    metrics: dict[str, float | Estimate] = {
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
        metrics[f"top_minus_{ctrl}"] = paired_t(diffs["top"], diffs[ctrl])
    for f in config.framings:
        metrics[f"framing/{f}/phi"] = t_mean(phi_by[f])
    for a_, b_ in (("analytic", "holistic"), ("analytic", "none"), ("holistic", "none")):
        if {a_, b_} <= set(config.framings):
            metrics[f"framing/{a_}_minus_{b_}/phi"] = paired_t(phi_by[a_], phi_by[b_])
    metrics["framing/alive_latents"] = int(alive.size)
    metrics["framing/k"] = int(k_over)
    if shift is not None:
        metrics["framing/shift_min_p"] = float(shift["p_value"].min())
        metrics["framing/shift_significant"] = int((shift["p_value"] < 0.05).sum())
        metrics["framing/shift_top_abs"] = float(np.abs(shift["shift"][0]))
        metrics["framing/overlap"] = overlap["overlap"]
        metrics["framing/overlap_expected"] = overlap["expected"]
        metrics["framing/overlap_p"] = overlap["p_value"]
        for i in range(min(5, k_over)):
            metrics[f"framing/shift_{i}/latent"] = int(shift["latents"][i])
            # jaxlab.illusions.framing_feature_shift: percentile bootstrap over presentations
            metrics[f"framing/shift_{i}/analytic_minus_holistic"] = Estimate(
                float(shift["shift"][i]),
                float(shift["ci_low"][i]),
                float(shift["ci_high"][i]),
                0.95,
                "percentile bootstrap over presentations (not corrected for the selection)",
                config.orders,
            )
            metrics[f"framing/shift_{i}/p"] = float(shift["p_value"][i])
    contexts = []
    ids_flat = np.concatenate([np.asarray(t)[np.asarray(m).astype(bool)] for t, m in batches])
    seq_flat = np.concatenate(
        [np.repeat(np.arange(len(s)) + 1000 * o, [len(q) for q in s]) for o, s in enumerate(seqs)]
    )
    # contexts over all real tokens (BOS included, so the ids line up with the text)
    acts_flat = np.concatenate(
        _blocks(sae, np.concatenate(every), scale, lambda z: np.asarray(z[:, top[:3]]))
    )
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
    claims = []
    text = (
        "Ablating the k SAE latents most associated with the attribution read-out reduces "
        "|phi| more than k random and k frequency-matched latents (paired t interval over "
        f"presentations of the difference below 0). {_setup.CAVEAT}"
    )
    part = {
        "claim": text,
        "paper": "holistic-frequency / analytic features are linked to the illusion (paper's "
        "SAE analysis on larger LLMs)",
        "higher_is_better": False,
    }
    claims.append(
        all_of(
            {
                f"vs {ctrl}": superior(
                    metrics[f"top_minus_{ctrl}"],
                    "ablating the top read-out latents (|phi| change)",
                    f"ablating {ctrl} latents (|phi| change)",
                    **part,
                )
                for ctrl in ("random", "matched")
            },
            claim=text,
            paper=part["paper"],
            detail=f"|phi| change: top {metrics['abs_phi_change/top']:+.3f}, random "
            f"{metrics['abs_phi_change/random']:+.3f}, matched "
            f"{metrics['abs_phi_change/matched']:+.3f} over {config.orders} orders (plain "
            f"|phi| {metrics['abs_phi/plain']:.3f})",
        )
    )
    if {"analytic", "holistic"} <= set(config.framings):
        d = "framing/analytic_minus_holistic/phi"
        claims.append(
            superior(
                metrics[d],
                "analytic instruction",
                "holistic instruction",
                higher_is_better=False,
                claim="An analytic instruction ('count the statements for each group') lowers "
                "the attribution phi relative to a holistic one ('go with your overall "
                "impression'); holds when the 95% t interval of the paired per-presentation "
                "difference phi(analytic) - phi(holistic) lies below 0 (null: no "
                f"difference). {_setup.CAVEAT}",
                paper="analytic processing counters the illusion, holistic processing feeds it "
                "(paper's framing manipulation, larger LLMs)",
                detail="phi "
                + ", ".join(f"{f} {metrics[f'framing/{f}/phi']:+.3f}" for f in config.framings)
                + f" over {config.orders} orders of the reduced design",
            )
        )
    shift_note = ""
    if shift is not None:
        tops = ", ".join(
            f"{int(shift['latents'][i])} {shift['shift'][i]:+.2f} "
            f"[{shift['ci_low'][i]:+.2f}, {shift['ci_high'][i]:+.2f}] p={shift['p_value'][i]:.3f}"
            for i in range(min(3, k_over))
        )
        # that two different prompts move some latent is true by construction (a different
        # input gives different activations): a property, reported in the metrics and the
        # notes, not a claim row (#55 item 9); tests/illusions/test_framing.py checks that
        # the permutation test finds a planted shift and stays quiet on exchangeable codes
        shift_note = (
            f" Framing shift (a property, not a claim: two prompts always differ): min "
            f"family-wise sign-flip p {metrics['framing/shift_min_p']:.3g}; "
            f"{metrics['framing/shift_significant']} of the top {k_over} of {alive.size} "
            f"alive latents with p < 0.05; top latents (analytic - holistic, bootstrap CI over "
            f"presentations): {tops}."
        )
        claims.append(
            at_most(
                Estimate.point(
                    overlap["p_value"], n=int(alive.size), method="hypergeometric p-value"
                ),
                config.alpha,
                null="two independent draws from the latents alive at the answer position",
                claim=f"The {k_over} latents the framing moves most overlap the {k_over} latents "
                "most associated with the attribution read-out beyond chance: holds when the "
                f"hypergeometric p <= {config.alpha:g}. {_setup.CAVEAT}",
                paper="the framing-sensitive features are the illusion's features (paper's SAE "
                "analysis)",
                subject="overlap p",
                detail=f"overlap {int(overlap['overlap'])} vs {overlap['expected']:.2f} expected "
                f"by chance (M = {alive.size} alive latents); the read-out latents follow "
                "p(minority), which carries little illusion here (plain |phi| "
                f"{metrics['abs_phi/plain']:.3f}); the null draws uniformly, not matched in "
                "firing frequency, so busy latents topping both lists also count",
            )
        )
    figs = {}
    fig, ax = plt.subplots(figsize=(5, 3.2))
    names = ["plain", *conds]
    vals = [base_phi, *(res[n] for n in conds)]
    ax.boxplot(vals)
    ax.set_xticks(np.arange(1, len(names) + 1), names)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_ylabel("attribution phi per presentation")
    ax.set_title(f"SmolLM2 layer {layer}: ablating {config.ablate} latents", fontsize=9)
    fig.tight_layout()
    figs["phi_ablation"] = fig
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    ax = axes[0]
    for i in range(config.orders):
        ax.plot(
            range(len(config.framings)),
            [phi_by[f][i] for f in config.framings],
            "o-",
            color="grey",
            alpha=0.4,
            lw=0.8,
        )
    ax.plot(
        range(len(config.framings)),
        [phi_by[f].mean() for f in config.framings],
        "ks-",
        lw=2,
        label="mean",
    )
    ax.set_xticks(range(len(config.framings)), list(config.framings))
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_ylabel("attribution phi per presentation")
    ax.set_title("(a) phi by instruction framing", fontsize=9)
    ax = axes[1]
    if shift is not None:
        y = np.arange(k_over)
        inside = np.isin(shift["latents"], readout)
        err = [shift["shift"] - shift["ci_low"], shift["ci_high"] - shift["shift"]]
        ax.errorbar(shift["shift"], y, xerr=err, fmt="none", ecolor="grey", lw=1)
        ax.scatter(shift["shift"], y, c=np.where(inside, "C3", "C0"), zorder=3)
        ax.set_yticks(y, [str(int(j)) for j in shift["latents"]], fontsize=6)
        ax.invert_yaxis()
        ax.axvline(0, color="grey", lw=0.5)
        ax.set_xlabel("mean latent activation, analytic - holistic")
        ax.set_title(
            f"(b) top {k_over} shifted latents (red: read-out latents; overlap "
            f"{int(overlap['overlap'])} vs {overlap['expected']:.1f})",
            fontsize=8,
        )
    fig.tight_layout()
    figs["framing"] = fig
    notes = (
        f"{_setup.CAVEAT} Reduced design {config.counts} (design phi "
        f"{float(il.phi_coefficient(np.array(config.counts))):.3f}), {config.orders} "
        f"orders, neutral labels. TopK SAE {sae.d_sae} latents, k={config.k}, "
        f"{config.steps} steps on {x.shape[0]} prompt tokens (EV "
        f"{metrics['sae_explained_variance']:.2f}); trained on the prompts themselves, so "
        "the latents are not a general dictionary (fitted on the tokens of every framing: "
        + ", ".join(f"{f}: {il.INSTRUCTIONS[f]!r}" for f in config.framings)
        + "). Top latents' contexts: "
        + "; ".join(contexts)
        + shift_note
    )
    return Result(metrics=metrics, claims=claims, figures=figs, notes=notes)
