"""P17 claim 3: the per-position remaining-length estimate jumps upward where the model
retracts and restarts a partial solution, more than at a neutral filler of the same length.

Per model, a ridge probe regresses log1p(remaining length) from the residual state of every
generated token of the natural families' complete completions of the training prompts (half
the prompts, grouped), at one layer chosen by held-out R^2 on validation prompts split off
the training prompts (grouped; the test prompts play no part in the choice). Forced
events, on held-out natural completions (complete or truncated) of at least `min_length`
tokens: each is cut at a line or sentence end near its middle (`lp.cut_point`), a
retraction phrase or a neutral filler with the same token count is appended to the prompt
and partial solution (`lp.insert_phrase`, `lp.same_length_filler`), and the model continues
greedily (`continue_tokens`, cached by content hash like the completion sets). The jump is
the probe's remaining-length estimate (tokens) at the last phrase token minus the estimate at
the last partial-solution token; retraction and filler jumps are paired over items (paired
bootstrap CI of the mean difference). The position-only predictor (mean log1p remaining per
position, the same training rows) moves only with the position, so it falls by the same
amount after both phrases: its difference is zero by construction. Natural retractions:
`lp.find_retractions` (phrases only) on every natural completion, with the estimate before
the event and `len(phrase)` tokens later on held-out completions (the first wording's
length). Three retraction wordings rotate over the forced items, each with a filler of its
own token length, so that the jump is not one phrase's lexical effect; the probe must have
a validation R^2 above 0 (competence gate).
The figure plots each item's retraction jump against its filler jump (remaining-length
curves of example completions are `lengthprobe_decodable`'s `remaining_curves` figure).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import (
    Estimate,
    Precondition,
    Result,
    RunContext,
    cache_dir,
    gated,
    model_params,
    paired_bootstrap,
    superior,
)
from experiments.lengthprobe import _setup
from jaxlab import interp, lm
from jaxlab import lengthprobe as lp

NAME = "lengthprobe_retraction"
PAPER = "P17"
DESCRIPTION = "Remaining-length estimate jump at forced retractions vs same-length fillers"

# several wordings, rotated over the forced items, so that a jump is not one phrase's
# lexical effect (#55 item 10); each has its own neutral filler of the same token length
RETRACTIONS = (
    "\nWait, that is wrong. Let me redo this.\n",
    "\nHmm, I made a mistake above. I will start over.\n",
    "\nActually, that is not right. Let me try again from the start.\n",
)
FILLERS = (
    "\nOkay, so far this looks right. Let me go on.\n",
    "\nGood, that part is done. Now I continue with the next part.\n",
    "\nOkay, this part looks fine and clear. Let me keep going with the rest of it now.\n",
)
CODE_VERSION = "lengthprobe-retraction-v2"


@dataclasses.dataclass(frozen=True)
class Config(_setup.CacheConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes after the cache)."""

    test_fraction: float = 0.5
    max_items: int = 32  # forced items per model
    min_length: int = 16  # content tokens a completion needs to be cut
    continue_tokens: int = 16  # the jump needs only the phrase; the rest is context
    n_boot: int = 1000


QUICK = Config()
TINY = Config(**_setup.TINY_CACHE, max_items=3, continue_tokens=4, n_boot=50)  # the smoke tier
FULL = Config(**_setup.FULL_CACHE, max_items=400, continue_tokens=256, n_boot=2000)


def full_work(config: Config) -> float:
    """The cache's model work plus the forced continuations (2 per item, prompt ~300)."""
    cont = 2 * config.max_items * (300 + config.continue_tokens)
    return _setup.full_work(config) + cont * sum(model_params(m) for m in config.models)


def _row_lookup(store: lm.ActivationStore) -> dict[tuple[int, int], int]:
    return {
        (int(t), int(p)): r
        for r, (t, p) in enumerate(zip(store.text_index, store.positions, strict=True))
    }


def _continuations(config, model: str, ids, families, layer, key):
    """Continue generating from the forced prefixes (cached); returns (set, last, generated)."""
    h = hashlib.sha256(
        json.dumps(
            {
                "model": [model, _setup.model_sha256(model)],
                "prompts": [families, ids],
                "max_new": config.continue_tokens,
                "batch": config.budget(model)[2],
                "code": CODE_VERSION,
            },
            sort_keys=True,
        ).encode()
    ).hexdigest()[:16]
    folder = cache_dir("lengthprobe", f"{_setup.short(model)}-retraction-{h}")
    return _setup.cached_generation(
        folder,
        model,
        ids,
        families,
        max_new_tokens=config.continue_tokens,
        batch_size=config.budget(model)[2],
        key=key,
        layers=(layer,),
        desc=f"retraction {_setup.short(model)} continuations",
    )


def _position_curve(g, train_rows, query_positions) -> np.ndarray:
    """Position-only log1p-remaining estimate (fitted on `train_rows`) at query positions."""
    q = np.asarray(query_positions, np.int64)
    y = np.concatenate([g["y"][train_rows], np.zeros(q.size, np.float32)])
    pos = np.concatenate([g["position"][train_rows], q])
    train = np.concatenate([np.ones(train_rows.size, bool), np.zeros(q.size, bool)])
    return lp.position_only(y, pos, train)[train_rows.size :]


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    metrics: dict[str, float] = {}
    claims, notes = [], []
    fig_j, axes_j = plt.subplots(
        1, len(config.models), figsize=(4.2 * len(config.models), 3.8), squeeze=False
    )
    for mi, model in enumerate(config.models):
        tag = _setup.short(model)
        tok, _ = _setup._tokenizer_and_config(model)
        d = _setup.model_data(config, model, key)
        cs = d.completions
        natural_c = np.asarray([lp.FAMILIES[f].kind == "natural" for f in cs.families])
        train_c = np.asarray(
            interp.group_split(
                jnp.arange(len(cs)),
                key=jax.random.fold_in(key, 7),
                test_fraction=config.test_fraction,
            )
        )
        # probe: natural families, training prompts, complete completions. The layer is
        # chosen by held-out R^2 on validation prompts split off the training prompts
        # (grouped by completion: row-wise GCV treats a completion's neighbouring tokens as
        # independent and picked a non-generalising last layer for Qwen-0.5B); the held-out
        # test prompts are not used for the choice.
        g = _setup.generated_rows(d)
        nat_rows = natural_c[g["text_index"]]
        fit_rows = np.flatnonzero(nat_rows & train_c[g["text_index"]])
        test_rows = np.flatnonzero(nat_rows & ~train_c[g["text_index"]])
        both = np.concatenate([fit_rows, test_rows])
        xs = _setup.layer_stack(d.generated, d.layers)[:, g["rows"][both]]
        is_fit = jnp.arange(both.size) < fit_rows.size
        inner = interp.group_split(
            jnp.asarray(g["text_index"][fit_rows]), key=jax.random.fold_in(key, 9)
        )
        sweep = interp.probe_sweep(
            jnp.asarray(xs[:, : fit_rows.size]), jnp.asarray(g["y"][fit_rows]), train=inner
        )
        li = int(np.argmax(np.asarray(sweep["r2"])))
        layer = d.layers[li]
        metrics[f"layer_val_r2_{tag}"] = float(sweep["r2"][li])
        probe, _ = interp.ridge_gcv(
            jnp.asarray(xs[li]), jnp.asarray(g["y"][both]), weights=is_fit.astype(jnp.float32)
        )
        del xs
        coef, icpt = np.asarray(probe.coef, np.float64), float(probe.intercept)
        metrics[f"layer_{tag}"] = layer
        metrics[f"probe_rows_{tag}"] = int(fit_rows.size)

        def estimate(store, rows, _coef=coef, _icpt=icpt, _layer=layer):
            x = np.asarray(store.array("resid_post", _layer), np.float64)[np.asarray(rows)]
            return x @ _coef + _icpt

        # held-out per-position fit (complete natural test completions): probe vs position
        est_test = estimate(d.generated, g["rows"][test_rows])
        pos_test = _position_curve(g, fit_rows, g["position"][test_rows])
        for name, p in (("probe", est_test), ("position_only", pos_test)):
            metrics[f"heldout_spearman_{tag}_{name}"] = float(
                interp.spearman(jnp.asarray(g["y"][test_rows]), jnp.asarray(p, jnp.float32))
            )
        # forced items: held-out natural completions long enough to cut
        cand = np.flatnonzero(natural_c & ~train_c & (cs.lengths >= config.min_length))
        order = np.asarray(jax.random.permutation(jax.random.fold_in(key, 8), cand.size))
        items = cand[order][: config.max_items]
        encode = functools.partial(tok.encode, add_bos=False)
        phrases = [encode(r) for r in RETRACTIONS]
        fillers = [lp.same_length_filler(encode, len(ph), FILLERS) for ph in phrases]
        phrase = phrases[0]  # the natural retractions' reference length (below)
        for j, ph in enumerate(phrases):
            metrics[f"phrase_tokens_{j}_{tag}"] = len(ph)
        ids, fams, before_pos, cut_of, which = [], [], [], [], []
        for n_i, i in enumerate(items):
            c = cs.completions[i]
            cut = lp.cut_point(c, tok.decode)
            j = n_i % len(phrases)
            for cond, ph in (("retraction", phrases[j]), ("filler", fillers[j])):
                x, _, _ = lp.insert_phrase(cs.prompts[i], c, cut, ph)
                ids.append(x)
                fams.append(cond)
            before_pos.append(cs.prompt_lengths[i] + cut - 1)
            cut_of.append(cut)
            which.append(j)
        cont, last, _ = _continuations(
            config, model, ids, fams, layer, ctx.key("continuations", mi)
        )
        lookup = _row_lookup(d.generated)
        before_rows = [lookup[(int(i), int(p))] for i, p in zip(items, before_pos, strict=True)]
        est_before = estimate(d.generated, before_rows)
        est_after = estimate(last, np.arange(len(cont)))
        n_items = len(items)
        e = np.concatenate([est_before, est_after[0::2], est_after[1::2]])
        k = np.arange(n_items)
        jump_r = lp.estimate_jump(e, k, n_items + k)
        jump_f = lp.estimate_jump(e, k, 2 * n_items + k)
        jump_r_log = est_after[0::2] - est_before
        jump_f_log = est_after[1::2] - est_before
        cuts = np.asarray(cut_of, np.int64)
        lens = np.array([len(phrases[j]) for j in which], np.int64)
        pc = _position_curve(g, fit_rows, np.concatenate([cuts - 1, cuts - 1 + lens]))
        jump_pos = lp.estimate_jump(pc, k, n_items + k)
        diff = (jump_r - jump_f).astype(np.float32)
        seed = int(jax.random.randint(jax.random.fold_in(key, 9), (), 0, 2**31 - 1))
        if n_items >= 2:  # paired over items: the model's jump after both phrases
            jump_diff = paired_bootstrap(jump_r, jump_f, seed=seed, n_resamples=config.n_boot)
            jump_log_diff = paired_bootstrap(
                jump_r_log, jump_f_log, seed=seed, n_resamples=config.n_boot
            )
        else:
            nan = float("nan")
            jump_diff = jump_log_diff = Estimate(nan, nan, nan, 0.95, "too few items", 1)
        cont_len = cont.lengths
        metrics.update(
            {
                f"items_{tag}": n_items,
                f"jump_retraction_{tag}": float(jump_r.mean()),
                f"jump_filler_{tag}": float(jump_f.mean()),
                f"jump_diff_{tag}": jump_diff,
                f"jump_diff_median_{tag}": float(np.median(diff)),
                f"jump_diff_positive_fraction_{tag}": float((diff > 0).mean()),
                f"jump_log_retraction_{tag}": float(jump_r_log.mean()),
                f"jump_log_filler_{tag}": float(jump_f_log.mean()),
                f"jump_log_diff_{tag}": jump_log_diff,
                f"jump_position_only_{tag}": float(jump_pos.mean()),
                f"jump_position_only_diff_{tag}": 0.0,  # same positions after both phrases
                f"estimate_before_{tag}": float(np.expm1(est_before).mean()),
                f"continuation_len_retraction_{tag}": float(cont_len[0::2].mean()),
                f"continuation_len_filler_{tag}": float(cont_len[1::2].mean()),
                f"continuation_truncated_retraction_{tag}": float(cont.truncated[0::2].mean()),
                f"continuation_truncated_filler_{tag}": float(cont.truncated[1::2].mean()),
            }
        )
        which_a = np.asarray(which)
        for j in range(len(phrases)):
            sel = which_a == j
            if sel.any():  # each wording's mean jump difference (a lexical effect shows here)
                metrics[f"jump_diff_phrase{j}_{tag}"] = float(diff[sel].mean())
                metrics[f"items_phrase{j}_{tag}"] = int(sel.sum())
        ax = axes_j[0, mi]
        ax.scatter(jump_f, jump_r, s=12)
        lim = [min(jump_f.min(), jump_r.min()), max(jump_f.max(), jump_r.max())]
        ax.plot(lim, lim, "k:", lw=0.8)
        ax.axvline(jump_pos.mean(), color="C1", ls="--", lw=0.8, label="position-only jump")
        ax.set_xlabel("jump at filler (tokens)")
        ax.set_ylabel("jump at retraction (tokens)")
        ax.set_title(f"{tag}: probe estimate after - before ({n_items} items)", fontsize=8)
        ax.legend(fontsize=7)

        # natural retractions (phrases) in the natural completions
        events = {
            int(i): lp.find_retractions(cs.completions[i], tok.decode, repeated_lines=False)
            for i in np.flatnonzero(natural_c)
        }
        n_events = sum(len(v) for v in events.values())
        metrics[f"natural_retractions_{tag}"] = n_events
        metrics[f"natural_retraction_completions_{tag}"] = sum(bool(v) for v in events.values())
        metrics[f"natural_repeated_lines_{tag}"] = sum(
            len(lp.find_retractions(cs.completions[i], tok.decode, phrases=()))
            for i in np.flatnonzero(natural_c)
        )
        b_rows, a_rows, b_pos, a_pos = [], [], [], []
        for i, ks in events.items():
            if train_c[i]:
                continue
            for kk in ks:
                if kk < 1:
                    continue
                after = min(kk + len(phrase) - 1, cs.lengths[i] - 1)
                b_rows.append(lookup[(i, int(cs.prompt_lengths[i] + kk - 1))])
                a_rows.append(lookup[(i, int(cs.prompt_lengths[i] + after))])
                b_pos.append(kk - 1)
                a_pos.append(after)
        metrics[f"natural_retractions_heldout_{tag}"] = len(b_rows)
        if b_rows:
            m = len(b_rows)
            ee = np.concatenate([estimate(d.generated, b_rows), estimate(d.generated, a_rows)])
            metrics[f"natural_jump_{tag}"] = float(
                lp.estimate_jump(ee, np.arange(m), m + np.arange(m)).mean()
            )
            pp = _position_curve(g, fit_rows, np.concatenate([b_pos, a_pos]))
            metrics[f"natural_jump_position_only_{tag}"] = float(
                lp.estimate_jump(pp, np.arange(m), m + np.arange(m)).mean()
            )
        if mi == 0:  # the contract keys, for the first model
            for kname in ("jump_retraction", "jump_filler", "jump_diff"):
                metrics[kname] = metrics[f"{kname}_{tag}"]
        claims.append(
            gated(
                gated(
                    superior(
                        jump_diff,
                        "jump at a forced retraction",
                        "jump at a neutral filler of the same token length (same items)",
                        claim=f"{tag}: the probe's remaining-length estimate jumps upward at a "
                        "forced retraction more than at a neutral filler of the same token "
                        "length (paired bootstrap interval of the difference above 0); a "
                        "position-only predictor cannot (its jump is the same after both). "
                        + _setup.CAVEAT,
                        paper="the per-position estimate shifts upward at retractions "
                        "(qualitative, curated high-loss completions, 7-8B models)",
                        detail=f"jump (tokens) retraction {jump_r.mean():+.1f} vs filler "
                        f"{jump_f.mean():+.1f} over {n_items} items (log1p units "
                        f"{jump_log_diff:+.3f}); "
                        f"position-only {jump_pos.mean():+.1f} after both; per wording (retraction "
                        "- filler, tokens): "
                        + ", ".join(
                            f"#{j} {metrics[f'jump_diff_phrase{j}_{tag}']:+.1f} "
                            f"(n={metrics[f'items_phrase{j}_{tag}']})"
                            for j in range(len(phrases))
                            if f"jump_diff_phrase{j}_{tag}" in metrics
                        )
                        + f"; {n_events} natural retractions",
                    ),
                    Precondition(
                        "at least 2 forced items (held-out natural completions long enough to cut)",
                        n_items >= 2,
                        f"{n_items} items",
                    ),
                ),
                # competence gate (#55 item 1, P17): the probe must predict remaining length
                # on held-out validation rows before its jumps mean anything
                Precondition(
                    "the probe predicts remaining length (validation R^2 > 0 at its layer)",
                    bool(float(sweep["r2"][li]) > 0),
                    f"validation R^2 {float(sweep['r2'][li]):.3f} at layer {layer}",
                ),
            )
        )
        notes.append(
            f"{tag}: layer {layer} (validation R^2 {float(sweep['r2'][li]):.3f}; probe on "
            f"{fit_rows.size} training rows), {n_items} forced "
            f"items, {len(phrases)} retraction wordings of "
            f"{', '.join(str(len(ph)) for ph in phrases)} tokens, fillers "
            f"{[tok.decode(f) for f in fillers]!r}."
        )
    notes_text = (
        f"{_setup.CAVEAT} Forced retraction phrases {list(RETRACTIONS)!r} (rotated over the "
        "items) vs a neutral filler of the same token count, inserted at a line/sentence end "
        "near the middle of held-out natural completions (families "
        f"{[n for n in lp.NATURAL if n in config.families]}); "
        f"continuations of {config.continue_tokens} greedy tokens are cached. " + " ".join(notes)
    )
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"retraction_jumps": fig_j},
        notes=notes_text,
    )
