"""Shared set-up of the routing experiments: the real text routing table and its build job.

Queries are real multiple-choice items from the OpenAI `evals` wheel (read as data files,
never imported): MedMCQA (medical exam questions), LogiQA (logical reasoning) and ReClor
(argument reasoning), each source one task group. Candidates are (model, prompt, answer
rule) triples over the `jaxlab.lm` pool. Prompts:

- `zero_shot`: the question and lettered options, then "Answer:";
- `few_shot`: one solved item of the same source (taken from beyond the query range)
  before the zero-shot prompt (FULL only: it doubles the prompt length).

One `jaxlab.lm.score` pass per (model, prompt) scores 2K continuations per item: the K
option texts and the K letters " A", " B", ...; three answer rules read it:

- `sum`: the option text of highest summed log-likelihood;
- `mean`: the option text of highest per-token mean log-likelihood (length-normalised);
- `letter`: the letter of highest log-likelihood.

A candidate is correct on a query when its rule picks the right option. Cost = 2 x
n_params x (input + output tokens) / 1e9, i.e. GFLOPs of the forward pass (input tokens =
prompt tokens, output tokens = the continuation tokens the rule reads: all option texts
for `sum`/`mean`, the K letters for `letter`). Latency = measured wall time of a chunk's
scoring, shared among its items in proportion to their tokens, and between the text and
letter continuations in proportion to their token counts. Features: `hashed_bow` of the
question text (256 buckets, words + bigrams): no model call.

Each (model, prompt, chunk of items) is cached as `.npz` under
`$JAXLAB_CACHE_DIR/routing/<content hash>` (model file SHA-256, prompts, options, code
version), so a killed build resumes at the chunk it was in. Build command:
`python -m experiments.routing._setup [--full]`.
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

from experiments._harness import cache_dir, load_npz, model_sha256, save_npz
from experiments.lm._setup import logiqa_items
from jaxlab import routing
from jaxlab._core import progress_bar, wheel_file

CODE_VERSION = "routing-text-v1"  # bump when prompts, options or scoring change
_PIN = "evals==3.0.1.post1"
_MEDMCQA = "evals/registry/data/medmcqa/samples.jsonl"
_RECLOR = "evals/registry/data/logiqa-logical-reasoning-plus/reclor-logical-reasoning-plus.jsonl"
PROMPTS = ("zero_shot", "few_shot")
RULES = ("sum", "mean", "letter")
N_SHOTS = 1

CAVEAT = (
    "Text-only small open models of the jaxlab.lm pool (QUICK: SmolLM2-135M and "
    "Gemma-3-270M; FULL adds Qwen2.5-Coder-0.5B/1.5B; 4-bit GGUF dequantised to float32) x "
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
    per_source: tuple[tuple[str, int], ...] = (("medmcqa", 120), ("logiqa", 40))
    chunk: int = 20
    batch_size: int = 4
    feature_dim: int = 256


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


def _logiqa(n: int) -> list[dict]:
    return [{**it, "question": it["prompt"].rsplit("\nA.", 1)[0]} for it in logiqa_items(n)]


_SOURCES = {"medmcqa": medmcqa_items, "logiqa": _logiqa, "reclor": reclor_items}


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
    t0 = time.perf_counter()
    sc = lm.score(net, tok, [p for p, _ in inputs], [o for _, o in inputs], batch_size=batch_size)
    seconds = time.perf_counter() - t0
    n_in = np.array([len(tok.encode(p)) for p, _ in inputs])
    lens = np.array([[len(t) for t in toks] for toks in sc.tokens])  # (items, 2K)
    total = n_in + lens.sum(1)
    out = {
        "sum": np.stack([np.asarray(s) for s in sc.sum]),
        "mean": np.stack([np.asarray(m) for m in sc.mean]),
        "input_tokens": n_in,
        "option_tokens": lens,
        "latency": seconds * total / total.sum(),
    }
    save_npz(path, out)
    return out


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
    n_in = out["input_tokens"]
    # the prompt's share of the latency is split between text and letter continuations
    frac = (n_in * share / (text + letters) + share) / (n_in + text + letters)
    return choice, n_out, out["latency"] * frac


def build_text_table(config: TableConfig = TableConfig()) -> routing.RoutingTable:
    """The (queries x model-prompt-rule candidates) table, from the cache or by scoring.

    Resumable: each (model, prompt, chunk) is cached on its own; a progress bar runs over
    all of them.
    """
    from jaxlab import lm

    queries, shots = source_items(config.per_source)
    answers = np.array([q["answer"] for q in queries])
    passes = [(m, p) for m in config.models for p in config.prompts]
    cands = [(m, p, r) for m, p in passes for r in config.rules]
    n, k = len(queries), len(cands)
    quality, cost, lat = np.zeros((n, k)), np.zeros((n, k)), np.zeros((n, k))
    tin, tout = np.zeros((n, k), np.int64), np.zeros((n, k), np.int64)
    models = _Models()
    jobs = [(m, p, s) for m, p in passes for s in range(0, n, config.chunk)]
    t0 = time.perf_counter()
    for model, prompt, s in progress_bar(jobs, desc="routing text table"):
        part = slice(s, s + config.chunk)
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
    """The fields of `config` that determine the table (a subclass's extra fields dropped)."""
    return json.loads(
        json.dumps({f.name: getattr(config, f.name) for f in dataclasses.fields(TableConfig)})
    )


def text_table(config: TableConfig) -> routing.RoutingTable:
    """The committed table under `data/routing/` when it was built with these settings and
    this code version; otherwise `build_text_table` (cache, then model calls)."""
    for path in sorted(DATA.glob("text_*.json")):
        try:
            meta = json.loads(path.read_text()).get("meta", {})
        except (OSError, json.JSONDecodeError):
            continue
        if meta.get("config") == table_fields(config) and meta.get("code") == CODE_VERSION:
            return routing.RoutingTable.load(path)
    return build_text_table(config)


if __name__ == "__main__":
    cfg = FULL_TABLE if "--full" in sys.argv else TableConfig()
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
        },
    )
    out = table.save(DATA / ("text_full" if "--full" in sys.argv else "text_quick"))
    print(f"{table.n_queries} queries x {table.n_candidates} candidates -> {out}")
    print(
        "accuracy per candidate:",
        dict(zip(table.candidates, table.quality.mean(0).round(3), strict=True)),
    )
