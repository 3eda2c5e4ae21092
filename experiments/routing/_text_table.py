"""Shared set-up of the routing experiments: the real text routing table and its build job.

Queries are real multiple-choice items from the OpenAI `evals` wheel (read as data files,
never imported): MedMCQA (medical exam questions), LogiQA (logical reasoning) and ReClor
(argument reasoning), each source one task group. Candidates are (model, prompt, answer
rule) triples over the `jaxlab.lm` pool. Prompts:

- `zero_shot`: the question and lettered options, then "Answer:";
- `few_shot`: one solved item of the same source (taken from beyond the query range)
  before the zero-shot prompt;
- `think`: the zero-shot prompt with "Answer:" replaced by "Let's think step by step.",
  a greedy generation of at most THINK_TOKENS tokens (stopping at the model's stop
  tokens), then "\nAnswer:" (the short-budget chain of thought of the issue; its
  generated tokens count as output tokens).

One `jaxlab.lm.score` pass per (model, prompt) scores 2K continuations per item: the K
option texts and the K letters " A", " B", ...; three answer rules read it:

- `sum`: the option text of highest summed log-likelihood;
- `mean`: the option text of highest per-token mean log-likelihood (length-normalised);
- `letter`: the letter of highest log-likelihood.

A candidate is correct on a query when its rule picks the right option. Cost = 2 x
n_params x (input + output tokens) / 1e9, i.e. GFLOPs of the forward pass (input tokens =
prompt tokens, output tokens = the continuation tokens the rule reads: all option texts
for `sum`/`mean`, the K letters for `letter`; plus the generated tokens for `think`).
Latency = measured wall time of a chunk's generation and scoring, shared among its items in
proportion to their tokens, and between the text and letter continuations in proportion
to their token counts. Features: `hashed_bow` of the question text (256 buckets, words +
bigrams): no model call.

Each (model, prompt, chunk of items) is cached as `.npz` under
`$JAXLAB_CACHE_DIR/routing/<content hash>` (model file SHA-256, prompts, options, code
version), so a killed build resumes at the chunk it was in. Build command:
`python -m experiments.routing._setup [--2k | --full]` (QUICK table, TABLE_2K, FULL_TABLE).
The items come from `_sources.py`, the committed tables from `_committed.py`, the sentence
features from `_features.py`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time

import numpy as np

from experiments._harness import cache_dir, load_npz, model_sha256, save_npz
from jaxlab import progress_bar, routing

from ._committed import committed_table
from ._features import FEATURES, sentence_features
from ._loader import ModelLoader
from ._sources import source_items

CODE_VERSION = "routing-text-v1"  # bump when prompts, options or scoring change
PROMPTS = ("zero_shot", "few_shot", "think")
THINK_CUE = "Let's think step by step."
THINK_TOKENS = 32
RULES = ("sum", "mean", "letter")

CAVEAT = (
    "Text-only small open models of the jaxlab.lm pool (QUICK: SmolLM2-135M and "
    "Gemma-3-270M; the issue-sized TABLE_2K adds Qwen2.5-Coder-0.5B zero-shot, FULL "
    "Qwen2.5-Coder-0.5B/1.5B in every prompt; 4-bit GGUF dequantised to float32) x "
    "prompt/answer-rule variants on real evals multiple-choice items, scored by option "
    "log-likelihood; the paper routes multimodal LLMs (1B-78B, image-question inputs) on "
    "MMR-Bench / VL-RouterBench."
)


@dataclasses.dataclass(frozen=True)
class TableConfig:
    """What the text routing table holds; the defaults are the reduced QUICK table."""

    models: tuple[str, ...] = ("smollm2-135m-instruct", "gemma3-270m")
    prompts: tuple[str, ...] = ("zero_shot",)
    rules: tuple[str, ...] = RULES
    # items per source (medmcqa has 300 - N_SHOTS usable items)
    per_source: tuple[tuple[str, int], ...] = (("medmcqa", 299), ("logiqa", 200), ("reclor", 100))
    chunk: int = 20
    batch_size: int = 4
    feature_dim: int = 256
    # (model, prompt) passes left out of the models x prompts cross product
    omit: tuple[tuple[str, str], ...] = ()


FULL_TABLE = TableConfig(
    models=(
        "smollm2-135m-instruct",
        "gemma3-270m",
        "qwen2.5-coder-0.5b-instruct",
        "qwen2.5-coder-1.5b-instruct",
    ),
    prompts=PROMPTS,
    per_source=(("medmcqa", 299), ("logiqa", 1200), ("reclor", 499)),
)


#: the issue's size (>= 2000 queries x >= 10 candidates) within a 2-core session on
#: short-prompt sources: SmolLM2-135M and Gemma-3-270M x zero/one-shot and
#: Qwen2.5-Coder-0.5B zero-shot, x three answer rules (SmolLM2 + Gemma: 42 min of model
#: calls on the shared 2-core VM; Qwen zero-shot ~1 h more; its one-shot pass, 1-2 h more
#: there, is left out; LogiQA/ReClor passages would triple every pass)
TABLE_2K = TableConfig(
    models=("smollm2-135m-instruct", "gemma3-270m", "qwen2.5-coder-0.5b-instruct"),
    prompts=("zero_shot", "few_shot"),
    omit=(("qwen2.5-coder-0.5b-instruct", "few_shot"),),
    per_source=(("medmcqa", 299), ("socialiqa", 1100), ("quartz", 700)),
)


def _shot_text(it: dict) -> str:
    return f"{it['prompt']} {it['options'][it['answer']]}\n\n"


def prompt_inputs(prompt: str, item: dict, shots: dict) -> tuple[str, list[str]]:
    """The prompt text of `item` and its 2K continuations (K option texts, K letters)."""
    k = len(item["options"])
    options = [" " + o for o in item["options"]] + [" " + c for c in "ABCDEFGH"[:k]]
    if prompt == "zero_shot":
        return item["prompt"], options
    if prompt == "few_shot":
        return "".join(_shot_text(s) for s in shots[item["group"]]) + item["prompt"], options
    if prompt == "think":
        return item["prompt"].removesuffix("Answer:") + THINK_CUE, options
    raise ValueError(f"prompt: expected one of {PROMPTS}, received {prompt!r}")


def _score_chunk(models, model, prompt, items, shots, batch_size) -> dict[str, np.ndarray]:
    """Option scores of one chunk: `sum`, `mean` (items, 2K), token counts, latency."""
    from jaxlab import lm

    inputs = [prompt_inputs(prompt, it, shots) for it in items]
    h = hashlib.sha256(
        json.dumps(
            {"model": model_sha256(model), "inputs": inputs, "code": CODE_VERSION}, sort_keys=True
        ).encode()
    ).hexdigest()[:24]
    path = cache_dir("routing", "text") / f"{h}.npz"
    cached = load_npz(path)
    if cached is not None:
        return cached
    net, tok = models(model)
    prompts = [p for p, _ in inputs]
    n_in = np.array([len(tok.encode(p)) for p in prompts])
    n_gen = np.zeros(len(prompts), np.int64)
    t0 = time.perf_counter()  # latency: generation and scoring, not this tokenisation
    if prompt == "think":
        prompts, n_gen = think_prompts(net, tok, prompts)
    sc = lm.score(net, tok, prompts, [o for _, o in inputs], batch_size=batch_size)
    seconds = time.perf_counter() - t0
    lens = np.array([[len(t) for t in toks] for toks in sc.tokens])  # (items, 2K)
    total = n_in + n_gen + lens.sum(1)
    out = {
        "sum": np.stack([np.asarray(s) for s in sc.sum]),
        "mean": np.stack([np.asarray(m) for m in sc.mean]),
        "input_tokens": n_in,
        "option_tokens": lens,
        "generated_tokens": n_gen,
        "latency": seconds * total / total.sum(),
    }
    save_npz(path, out)
    return out


def think_prompts(net, tok, prompts: list[str]) -> tuple[list[str], np.ndarray]:
    """The `think` prompts' second stage: each prompt's greedy continuation of at most
    THINK_TOKENS tokens (one batch; a stop token ends a row and is not kept), then
    "\nAnswer:"; and the number of generated tokens per prompt."""
    from jaxlab import lm

    gen = lm.generate(
        net,
        [tok.encode(p) for p in prompts],
        max_new_tokens=THINK_TOKENS,
        stop_tokens=tok.stop_ids,
        pad_id=tok.pad_id,
    )
    toks, lengths = np.asarray(gen.tokens), np.asarray(gen.lengths)
    out = []
    for p, row, n in zip(prompts, toks, lengths, strict=True):
        ids = [int(t) for t in row[:n] if int(t) not in tok.stop_ids]
        out.append(f"{p} {tok.decode(ids).strip()}\nAnswer:")
    return out, lengths.astype(np.int64)


def _rule(rule: str, out: dict[str, np.ndarray]):
    """(choice, output tokens, latency share) of an answer rule on a chunk's scores."""
    k = out["sum"].shape[1] // 2
    text, letters = out["option_tokens"][:, :k].sum(1), out["option_tokens"][:, k:].sum(1)
    if rule == "letter":
        choice, n_out, share = np.argmax(out["sum"][:, k:], 1), letters, letters
    elif rule in ("sum", "mean"):
        choice, n_out, share = np.argmax(out[rule][:, :k], 1), text, text
    else:
        raise ValueError(f"rule: expected one of {RULES}, received {rule!r}")
    # prompt and generated tokens: read by both kinds of continuation
    n_in = out["input_tokens"] + out.get("generated_tokens", 0)
    # the prompt's share of the latency is split between text and letter continuations
    frac = (n_in * share / (text + letters) + share) / (n_in + text + letters)
    return choice, n_out + out.get("generated_tokens", 0), out["latency"] * frac


def _chunks(queries: list[dict], size: int) -> list[slice]:
    """Consecutive slices of `size` queries, cut also where the option count changes (a
    chunk's scores are one (items, 2K) array)."""
    starts = set(range(0, len(queries), size))
    starts |= {
        i
        for i in range(1, len(queries))
        if len(queries[i]["options"]) != len(queries[i - 1]["options"])
    }
    cuts = sorted(starts) + [len(queries)]
    return [slice(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def table_passes(config: TableConfig) -> list[tuple[str, str]]:
    """The (model, prompt) passes of the table: the models x prompts cross product without
    `config.omit` (each omitted pair must be in the product)."""
    product = [(m, p) for m in config.models for p in config.prompts]
    omit = {tuple(x) for x in config.omit}
    if not omit <= set(product):
        bad = sorted(omit - set(product))
        raise ValueError(f"omit: {bad} not among the (model, prompt) passes {product}")
    return [x for x in product if x not in omit]


def build_text_table(config: TableConfig = TableConfig()) -> routing.RoutingTable:
    """The (queries x model-prompt-rule candidates) table, from the cache or by scoring.

    Resumable: each (model, prompt, chunk) is cached on its own; a progress bar runs over
    all of them.
    """
    from jaxlab import lm

    queries, shots = source_items(config.per_source)
    answers = np.array([q["answer"] for q in queries])
    passes = table_passes(config)
    cands = [(m, p, r) for m, p in passes for r in config.rules]
    n, k = len(queries), len(cands)
    quality, cost, lat = np.zeros((n, k)), np.zeros((n, k)), np.zeros((n, k))
    tin, tout = np.zeros((n, k), np.int64), np.zeros((n, k), np.int64)
    models = ModelLoader()
    jobs = [(m, p, part) for m, p in passes for part in _chunks(queries, config.chunk)]
    t0 = time.perf_counter()
    for model, prompt, part in progress_bar(jobs, desc="routing text table"):
        out = _score_chunk(models, model, prompt, queries[part], shots, config.batch_size)
        for rule in config.rules:
            j = cands.index((model, prompt, rule))
            choice, n_out, latency = _rule(rule, out)
            quality[part, j] = choice == answers[part]
            tin[part, j], tout[part, j], lat[part, j] = out["input_tokens"], n_out, latency
            cost[part, j] = 2 * lm.MODELS[model].n_params * (tin[part, j] + n_out) / 1e9
    groups = [name for name, _ in config.per_source]
    return routing.RoutingTable(
        quality=quality,
        cost=cost,
        candidates=tuple(f"{m}:{p}:{r}" for m, p, r in cands),
        input_tokens=tin,
        output_tokens=tout,
        latency=lat,
        features=routing.hashed_bow([q["question"] for q in queries], dim=config.feature_dim),
        groups=np.array([groups.index(q["group"]) for q in queries]),
        group_names=tuple(groups),
        query_ids=tuple(f"{q['group']}/{i}" for i, q in enumerate(queries)),
        meta={
            "code": CODE_VERSION,
            "models": {m: model_sha256(m) for m in config.models},
            "prompts": list(config.prompts),
            "rules": list(config.rules),
            "cost": "2 * n_params * (input_tokens + output_tokens) / 1e9 (GFLOPs)",
            "features": f"hashed_bow(question, dim={config.feature_dim})",
            "build_seconds_this_call": time.perf_counter() - t0,
            "build_command": "python -m experiments.routing._setup",
        },
    )


def table_fields(config: TableConfig) -> dict:
    """The fields of `config` that determine the table (a subclass's extra fields dropped;
    an empty `omit` too, as in the manifests written before it existed)."""
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(TableConfig)}
    if not fields["omit"]:
        del fields["omit"]
    return json.loads(json.dumps(fields))


def text_table(config: TableConfig) -> routing.RoutingTable:
    """The committed table under `data/routing/` when it was built with these settings and
    this code version; otherwise `build_text_table` (cache, then model calls)."""
    table = committed_table("text", table_fields(config), CODE_VERSION)
    return build_text_table(config) if table is None else table


def text_queries(config: TableConfig) -> list[dict]:
    """The text table's queries in its row order (question texts for the router features)."""
    return source_items(config.per_source)[0]


def text_table_with_features(config: TableConfig, kind: str) -> routing.RoutingTable:
    """`text_table(config)` with router features `kind`: "minilm" (sentence embedding of
    the question), "bow" (the table's hashed bag of words) or "both" (concatenated)."""
    if kind not in FEATURES:
        raise ValueError(f"features: expected one of {FEATURES}, received {kind!r}")
    table = text_table(config)
    if kind == "bow":
        return table
    x = sentence_features([q["question"] for q in text_queries(config)])
    if x.shape[0] != table.n_queries:
        raise ValueError(f"{x.shape[0]} question texts for a table of {table.n_queries} queries")
    desc = "MiniLM-L6 sentence embedding of the question (384, unit norm)"
    if kind == "both":
        x = np.concatenate([x, table.features], axis=1)
        desc += f" + {table.meta.get('features')}"
    return dataclasses.replace(table, features=x, meta={**table.meta, "features": desc})
