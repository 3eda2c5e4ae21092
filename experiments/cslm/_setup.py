"""Shared set-up of the cslm experiments: the cached, resumable model-call jobs.

Model calls (generations, option scores) are the expensive part. Each job covers one
(model, family, size, items) chunk and is stored as `.npz` under a content hash of
everything that determines it (model file SHA-256, prompts, options, budgets, sampler,
code version) in `$JAXLAB_CACHE_DIR/cslm` (default `~/.cache/jaxlab/cslm`). A run reads
the chunks that exist and computes the missing ones, so a killed build resumes at the next
chunk, and a QUICK experiment whose cache is complete makes no model call.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import time
from collections.abc import Sequence

import jax
import numpy as np

from experiments._harness import cache_dir, load_npz, log, model_params, model_sha256, save_npz
from jaxlab import cslm, lm, progress_bar

CODE_VERSION = "cslm-v1"  # bump when prompts, options or the scoring change
N_DISTRACTORS = 3
TEMPERATURE = 0.7

# the sizes per family of the budget table shared by cslm_complexity and cslm_reliability
SIZES = (
    ("chain_sum", (2, 4, 8, 16)),
    ("addition", (1, 2, 3, 4)),
    ("multiplication", (1, 2, 3, 4)),
    ("sorting", (2, 4, 8, 16)),
    ("counting", (2, 4, 8, 16)),
    ("tracking", (1, 2, 4, 8)),
    ("word_problem", (1, 2, 4, 8)),
)


@dataclasses.dataclass(frozen=True)
class ChunkConfig:
    """Models, families and sizes of a cslm experiment's cached chunks; the defaults are the
    QUICK budget table."""

    models: tuple[str, ...] = ("smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct")
    # the three families the complexity claim names; FULL runs all seven
    families: tuple[str, ...] = ("chain_sum", "counting", "sorting")
    # (family, sizes) pairs
    sizes: tuple[tuple[str, tuple[int, ...]], ...] = SIZES
    items: int = 30
    # one compiled batch per chunk (30 items; the triad's 8 items x 4 samples)
    batch_size: int = 32

    def sizes_of(self, family: str) -> tuple[int, ...]:
        """The problem sizes of `family`."""
        return dict(self.sizes)[family]


@dataclasses.dataclass(frozen=True)
class BudgetConfig(ChunkConfig):
    """The budget table shared by cslm_complexity and cslm_reliability (QUICK defaults);
    `BUDGET_FULL_OVERRIDES` are the FULL values."""

    # 0: the answer forced straight after the question (no reasoning), so B* has no floor
    budgets: tuple[int, ...] = (0, 16, 32, 64, 128, 256)


BUDGET_FULL_OVERRIDES = {
    "families": tuple(f for f, _ in SIZES),
    "models": (
        "smollm2-135m-instruct",
        "gemma3-270m",
        "qwen2.5-coder-0.5b-instruct",
        "qwen2.5-coder-1.5b-instruct",
    ),
    "sizes": (
        ("chain_sum", (1, 2, 4, 6, 8, 12, 16, 24)),
        ("addition", tuple(range(1, 9))),
        ("multiplication", tuple(range(1, 9))),
        ("sorting", (2, 3, 4, 6, 8, 12, 16, 24)),
        ("counting", (2, 3, 4, 6, 8, 12, 16, 24)),
        ("tracking", (1, 2, 3, 4, 6, 8, 10, 12)),
        ("word_problem", (1, 2, 3, 4, 6, 8, 10, 12)),
    ),
    "items": 200,
    "budgets": (0, 16, 32, 64, 128, 256, 512, 1024),
}

#: the smoke tier's budget table (cslm_complexity / cslm_reliability TINY): SmolLM2, one
#: family at 3 sizes, 3 items, budgets 0/2/4/8 (its chunks are built by `budget_chunk`; their
#: content hash differs from QUICK's)
BUDGET_TINY = {
    "models": ("smollm2-135m-instruct",),
    "families": ("chain_sum",),
    "sizes": (("chain_sum", (1, 2, 3)),),
    "items": 3,
    "budgets": (0, 2, 4, 8),
    "batch_size": 4,
}


def chunk_work(config: ChunkConfig, tokens: int) -> float:
    """The dry run's work unit: model parameters (billions) x items x sizes x `tokens` (the
    generated tokens per item)."""
    params = sum(model_params(m) for m in config.models) / 1e9
    sizes = sum(len(config.sizes_of(f)) for f in config.families)
    return params * sizes * config.items * tokens


CAVEAT = (
    "Small open models (135M-0.5B parameters, 4-bit GGUF weights dequantised to "
    "float32); the paper's thesis is about LMs in general, and larger models may "
    "behave differently."
)


def short(model: str) -> str:
    """Short model tag for metric names: smollm2, qwen-0.5b, ..."""
    return (
        model.split("-")[0]
        if model.startswith("smollm")
        else model.replace("qwen2.5-coder-", "qwen-").replace("-instruct", "")
    )


def _content_hash(**parts) -> str:
    """SHA-256 prefix of the JSON of `parts` (lists, tuples, numbers, strings)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


class Models:
    """Loads one model at a time (the pool's memory rule), only when a chunk is missing."""

    def __init__(self):
        self._name, self._pair = None, None

    def __call__(self, name: str):
        if self._name != name:
            self._pair = None  # release the previous model first
            t0 = time.perf_counter()
            self._pair = lm.load(name, mesh="auto")
            self._name = name
            log.info("cslm: loaded %s in %.1f s", name, time.perf_counter() - t0)
        return self._pair


def tokenizer_of(name: str) -> lm.Tokenizer:
    """The model's tokenizer without loading its weights."""
    return _tokenizer(str(name))


@functools.cache
def _tokenizer(name: str) -> lm.Tokenizer:
    return lm.describe(name).tokenizer


def budget_chunk(
    models: Models,
    model: str,
    family: str,
    n: int,
    items: int,
    budgets: Sequence[int],
    key: jax.Array,
    *,
    batch_size: int = 16,
) -> dict[str, np.ndarray]:
    """accuracy(n, B) data for one chunk: greedy reasoning once, forced answers at each B.

    Returns arrays: `scores` (items, budgets, 1 + N_DISTRACTORS) option log-likelihoods
    (true answer first), `correct` (items, budgets) forced-answer correctness, `free_correct`
    (items,) the free text's own final answer verified, `gen_tokens` (items,), `steps`,
    `generated` (items, max budget) the reasoning token ids (-1 after the end).
    """
    budgets = cslm.check_budgets(budgets)
    tasks = cslm.make_tasks(family, n, items, key=key)
    tok = tokenizer_of(model)
    prompts = [cslm.prompt_ids(tok, t.prompt) for t in tasks]
    options = [
        [
            cslm.answer_continuation(a)
            for a in (
                t.answer,
                *cslm.perturbed_answers(t, N_DISTRACTORS, key=jax.random.fold_in(key, 10_000 + i)),
            )
        ]
        for i, t in enumerate(tasks)
    ]
    h = _content_hash(
        kind="budget",
        model=model_sha256(model),
        prompts=prompts,
        options=options,
        budgets=budgets,
        code=CODE_VERSION,
    )
    path = cache_dir("cslm") / f"budget-{family}-n{n}-{h}.npz"
    cached = load_npz(path)
    if cached is not None:
        return cached
    net, tok = models(model)
    t0 = time.perf_counter()
    gen = cslm.generate_reasoning(
        net,
        tok,
        prompts,
        max_new_tokens=budgets[-1],
        key=jax.random.fold_in(key, 1),
        batch_size=batch_size,
    )
    t1 = time.perf_counter()
    scores = cslm.budget_scores(net, tok, prompts, gen, budgets, options)
    t2 = time.perf_counter()
    texts = [tok.decode(g) for g in gen]
    padded = np.full((len(gen), budgets[-1]), -1, np.int32)  # the reasoning, for inspection
    for i, g in enumerate(gen):
        padded[i, : len(g)] = g
    out = {
        "generated": padded,
        "scores": scores,
        "correct": cslm.budget_accuracy(scores),
        "free_correct": np.array([t.verify(x) for t, x in zip(tasks, texts, strict=True)]),
        "gen_tokens": np.array([len(g) for g in gen], np.int64),
        "steps": np.array([t.steps for t in tasks], np.int64),
        "seconds": np.array([t1 - t0, t2 - t1]),
    }
    save_npz(path, out)
    log.info(
        "cslm %s %s n=%d: %d items, generate %.0f s, score %.0f s",
        model,
        family,
        n,
        items,
        t1 - t0,
        t2 - t1,
    )
    return out


def triad_chunk(
    models: Models,
    model: str,
    family: str,
    n: int,
    items: int,
    samples: int,
    max_new_tokens: int,
    key: jax.Array,
    *,
    batch_size: int = 16,
) -> dict[str, np.ndarray]:
    """k sampled solutions per item, their parsed answers, correctness and LM-verifier scores.

    Returns arrays (items, samples): `correct`, `answer_ids` (`cslm.answer_ids`),
    `gen_tokens`, `verify_score` = log p(" Yes") - log p(" No") of the model judging its own
    parsed answer, `verify_tokens` (tokens the verifier reads and scores).
    """
    tasks = cslm.make_tasks(family, n, items, key=key)
    tok = tokenizer_of(model)
    prompts = [cslm.prompt_ids(tok, t.prompt) for t in tasks]
    h = _content_hash(
        kind="triad",
        model=model_sha256(model),
        prompts=prompts,
        samples=samples,
        max_new=max_new_tokens,
        temperature=TEMPERATURE,
        code=CODE_VERSION,
    )
    path = cache_dir("cslm") / f"triad-{family}-n{n}-{h}.npz"
    cached = load_npz(path)
    if cached is not None:
        return cached
    net, tok = models(model)
    rows = [p for p in prompts for _ in range(samples)]
    gen = cslm.generate_reasoning(
        net,
        tok,
        rows,
        max_new_tokens=max_new_tokens,
        key=jax.random.fold_in(key, 2),
        sampler=lm.Sample(TEMPERATURE),
        batch_size=batch_size,
    )
    answers = [
        cslm.extract_answer(tok.decode(g), t.kind)
        for t, g in zip((t for t in tasks for _ in range(samples)), gen, strict=True)
    ]
    flat_tasks = [t for t in tasks for _ in range(samples)]
    correct = np.array([a == t.answer for a, t in zip(answers, flat_tasks, strict=True)])
    vprompts = [
        tok.encode(
            tok.apply_chat_template([{"role": "user", "content": cslm.verification_prompt(t, a)}])
            + "Answer:"
        )
        for t, a in zip(flat_tasks, answers, strict=True)
    ]
    vs = lm.score(net, tok, vprompts, [list(cslm.VERIFIER_OPTIONS)] * len(vprompts)).sum
    shape = (items, samples)
    out = {
        "correct": correct.reshape(shape),
        "answer_ids": cslm.answer_ids(
            [answers[i * samples : (i + 1) * samples] for i in range(items)]
        ),
        "gen_tokens": np.array([len(g) for g in gen], np.int64).reshape(shape),
        "verify_score": np.array([s[0] - s[1] for s in vs]).reshape(shape),
        "verify_tokens": np.array([len(p) + 1 for p in vprompts], np.int64).reshape(shape),
        "parsed": np.array([a is not None for a in answers]).reshape(shape),
    }
    save_npz(path, out)
    return out


def budget_table(
    config: BudgetConfig, key: jax.Array, models: Models | None = None
) -> dict[tuple[str, str, int], dict[str, np.ndarray]]:
    """Every (model, family, size) budget chunk of a config, built where missing."""
    models = models or Models()
    jobs = [(m, f, n) for m in config.models for f in config.families for n in config.sizes_of(f)]
    out = {}
    for m, f, n in progress_bar(jobs, total=len(jobs), desc="cslm budget chunks"):
        k = jax.random.fold_in(jax.random.fold_in(key, sorted(cslm.FAMILIES).index(f)), n)
        out[(m, f, n)] = budget_chunk(
            models, m, f, n, config.items, config.budgets, k, batch_size=config.batch_size
        )
    return out
