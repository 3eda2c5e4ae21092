"""Agents for data discovery: the blackboard, its baselines, and the query planner.

Every language-model judgement is an option likelihood (`jaxlab.lm.score`), so the same
model, the same per-call context budget and the same cache serve every method:

- relevance of a table to a request is the pointwise mutual information
  `mean log p(snippet | request) - mean log p(snippet)` of the table's snippet (title and
  columns) as a continuation, with and without the request;
- `blackboard`: the central agent posts the request; each partition agent, seeing only its
  own partition's snippets, computes its tables' relevance, volunteers when its best
  relevance exceeds a threshold (its confidence) and offers its tables within a margin of
  its best, with a one-line justification; the central agent keeps the offers within a
  margin of the most confident one (Salemi et al., blackboard architecture for LLM data
  discovery);
- `master_slave`: the central agent routes from a description of each partition it must
  know in advance to its `route_k` best partitions, whose agents then offer as above;
- `single_agent`: all snippets numbered in one prompt truncated to the context budget
  (the truncation is reported), the table chosen by the likelihood of its number;
- `retrieval`: BM25 over the full profiles;
- `dense_retrieval`: cosine similarity of the model's mean-pooled embeddings of the full
  profiles and the request (`DenseIndex`, centred), with BM25's selection rule;
- token-matched baselines (the blackboard judges every table of the lake): `master_slave`
  routed to every partition (`master_slave_all`), and `bm25_rerank`, BM25's ranking
  judged by the agents' relevance as far as the blackboard's tokens on the task reach
  (`blackboard_tokens`);
- `oracle`: the task's true tables.

`prefetch` fills the score cache for every relevance call of a task set in large
batches (many prompts, up to 32 options each) before the methods run one request at a
time, which then only read the cache.

The planner fills the slots of a typed plan (kind, measured column, group column, filter
column) by option likelihood among the candidates the chosen tables allow; literals are
the numbers written in the question; the plan text then goes through the strict
`parse_plan` before `execute`. Model text is never evaluated.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._core import (
    check_instance,
    check_positive_int,
    check_real,
    check_strings,
    progress_bar,
    read_json,
    short_repr,
)
from ._bm25 import BM25
from ._dense import DenseIndex
from ._lake import Lake, partition_description, profile_text
from ._plan import ColumnRef, Condition, Plan, PlanError, execute, format_plan, parse_plan
from ._table import Table
from ._tasks import NOT_IN_LAKE, Task

__all__ = [
    "AgentModel",
    "LMAgentModel",
    "Discovery",
    "DiscoveryConfig",
    "snippet",
    "relevance",
    "blackboard",
    "master_slave",
    "single_agent",
    "retrieval",
    "blackboard_tokens",
    "bm25_rerank",
    "oracle",
    "bm25_index",
    "dense_index",
    "prefetch",
    "plan_query",
    "answer_query",
    "QueryAnswer",
    "METHODS",
]

_RELEVANT = "The data set needed to answer it:"
_MAX_OPTIONS = 64  # options per item that `jaxlab.lm.score` takes


class AgentModel(abc.ABC):
    """What the agents need from a language model: option likelihoods and token counts."""

    name: str = "model"

    @abc.abstractmethod
    def option_scores(self, prompt: str, options: Sequence[str]) -> np.ndarray:
        """Mean per-token log-likelihood of each option continuing `prompt`, shape (K,)."""

    @abc.abstractmethod
    def count_tokens(self, text: str) -> int:
        """Number of tokens of `text`."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), d) embeddings (for `dense_retrieval`); models without them raise."""
        raise NotImplementedError(f"{type(self).__name__} has no text embeddings")


class LMAgentModel(AgentModel):
    """A `jaxlab.lm` model as an `AgentModel`, every option score cached on disk.

    **Arguments:**

    - `model`, `tokenizer`: from `jaxlab.lm.load`.
    - `name`: the model's name (reported; part of the cache key).
    - `cache_dir`: folder of the score cache (`None`: no cache); one small JSON file per
      (name, weights, version, prompt, option) content hash, so runs resume and nested
      lakes share scores; embeddings likewise, one .npy file per (identity, text).
    - `weights`: the model's identity in the cache key, e.g. the SHA-256 of its weights
      (required with a `cache_dir`: an alias alone would serve stale scores after the
      weights behind it change).
    - `version`: the scoring code's version in the cache key (bump it when the prompts'
      scoring changes).
    - `batch_size`: items per `lm.score` batch.
    """

    def __init__(
        self,
        model,
        tokenizer,
        *,
        name: str,
        cache_dir: str | Path | None = None,
        weights: str | None = None,
        version: str = "0",
        batch_size: int = 8,
    ):
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        if self.cache_dir is not None and not (isinstance(weights, str) and weights.strip()):
            raise ValueError(
                f"weights: a cached model needs its weights' identity (e.g. their SHA-256), "
                f"received {weights!r}"
            )
        check_instance("version", version, str)
        self.weights, self.version = weights or "", version
        self.batch_size = batch_size
        self.calls = 0  # options actually scored by the model (cache misses)

    def _path(self, prompt: str, option: str, suffix: str = ".json") -> Path | None:
        if self.cache_dir is None:
            return None
        key = [self.name, self.weights, self.version, prompt, option]
        h = hashlib.sha256(json.dumps(key).encode()).hexdigest()
        return self.cache_dir / h[:2] / f"{h}{suffix}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """`jaxlab.lm.embed` of each text, each vector cached on disk (.npy)."""
        import jaxlab.lm as lm

        from .._core import atomic_write

        out: list[np.ndarray | None] = [None] * len(texts)
        miss: list[int] = []
        for i, t in enumerate(texts):
            path = self._path("<embed>", t, ".npy")
            if path is not None and path.is_file():
                try:
                    out[i] = np.load(path, allow_pickle=False)
                    continue
                except (OSError, ValueError):  # a torn file: embed again
                    pass
            miss.append(i)
        if miss:
            todo: list[str] = [texts[j] for j in miss]
            e = lm.embed(self.model, self.tokenizer, todo)
            for j, text, v in zip(miss, todo, e, strict=True):
                out[j] = v
                path = self._path("<embed>", text, ".npy")
                if path is not None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with atomic_write(path, "wb") as f:
                        np.save(f, v, allow_pickle=False)
        return np.stack([np.asarray(v) for v in out])

    def option_scores(self, prompt: str, options: Sequence[str]) -> np.ndarray:
        return self.option_scores_many([prompt], [options])[0]

    def option_scores_many(
        self,
        prompts: Sequence[str],
        options: Sequence[Sequence[str]],
        *,
        progress: bool = False,
    ) -> list[np.ndarray]:
        """`option_scores` for several prompts, the cache misses scored in batches (a
        progress bar over the batches when `progress`)."""
        import jaxlab.lm as lm

        out = [np.full(len(o), np.nan) for o in options]
        todo: list[tuple[int, list[int]]] = []
        for i, (p, opts) in enumerate(zip(prompts, options, strict=True)):
            miss = []
            for j, o in enumerate(opts):
                path = self._path(p, o)
                if path is not None and path.is_file():
                    out[i][j] = read_json(path)["score"]
                else:
                    miss.append(j)
            for c in range(0, len(miss), _MAX_OPTIONS):  # lm.score's per-item limit
                todo.append((i, miss[c : c + _MAX_OPTIONS]))
        starts = range(0, len(todo), self.batch_size)
        for start in progress_bar(starts, desc="option scores", enabled=progress):
            chunk = todo[start : start + self.batch_size]
            # bucket the option count and the batch to powers of two (repeating an option /
            # an item), so that a run compiles a handful of shapes, not one per partition
            k = max(8, 1 << (max(len(m) for _, m in chunk) - 1).bit_length())
            b = 1 << (len(chunk) - 1).bit_length()
            opts = [[options[i][j] for j in miss] for i, miss in chunk]
            opts = [o + [o[0]] * (k - len(o)) for o in opts]
            s = lm.score(
                self.model, self.tokenizer, [prompts[i] for i, _ in chunk], opts, batch_size=b
            )
            for (i, miss), means in zip(chunk, s.mean, strict=True):
                for j, v in zip(miss, means[: len(miss)], strict=True):
                    out[i][j] = float(v)
                    self.calls += 1
                    path = self._path(prompts[i], options[i][j])
                    if path is not None:
                        from .._core import write_json

                        path.parent.mkdir(parents=True, exist_ok=True)
                        write_json(path, {"score": float(v)})
        return out

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_bos=False))


@dataclasses.dataclass(frozen=True)
class DiscoveryConfig:
    """Selection rules shared by the methods (relevances in nats of PMI, BM25 in its units).

    - `threshold`: a partition agent volunteers (and any LM method answers at all) only
      when its best relevance exceeds this.
    - `margin`: tables within this of the best relevance are kept.
    - `max_tables`: the most tables a method returns.
    - `snippet_chars`: characters of a table's snippet (title + columns).
    - `context_tokens`: the per-call context budget (the single agent's prompt is
      truncated to it).
    - `route_k`: partitions the master routes to.
    - `bm25_ratio`: BM25 keeps documents scoring at least this fraction of the best;
      `bm25_threshold`: it answers only above this score.
    - `dense_ratio`, `dense_threshold`: the same rule for dense retrieval's cosines.
    - `embed_chars`: characters of a profile that dense retrieval embeds.

    Thresholds are finite numbers, `margin` >= 0, the ratios in [0, 1], the counts
    (`max_tables`, `snippet_chars`, `context_tokens`, `route_k`, `embed_chars`) positive
    integers; anything else raises a `ValueError` naming the field.
    """

    threshold: float = 0.0
    margin: float = 0.3
    max_tables: int = 3
    snippet_chars: int = 90
    context_tokens: int = 512
    route_k: int = 2
    bm25_ratio: float = 0.8
    bm25_threshold: float = 5.0
    dense_ratio: float = 0.8
    dense_threshold: float = 0.0
    embed_chars: int = 1200

    def __post_init__(self):
        for name in ("threshold", "bm25_threshold", "dense_threshold"):
            check_real(name, getattr(self, name))
        check_real("margin", self.margin, low=0.0)
        for name in ("bm25_ratio", "dense_ratio"):
            check_real(name, getattr(self, name), low=0.0, high=1.0)
        for name in ("max_tables", "snippet_chars", "context_tokens", "route_k", "embed_chars"):
            check_positive_int(name, getattr(self, name))


@dataclasses.dataclass(frozen=True)
class Discovery:
    """What a discovery method returns for one request.

    - `tables`: the tables found (empty: "not in the lake").
    - `tokens`: tokens the method's model calls processed for this request.
    - `messages`: the blackboard / routing log (offers with confidence and justification).
    - `visible`: fraction of the lake the deciding agent could see (single agent: < 1
      when the context was truncated).
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    tables: tuple[str, ...]
    tokens: int = 0
    messages: tuple[str, ...] = ()
    visible: float = 1.0


def snippet(table: Table, *, chars: int = 90) -> str:
    """A table's short description: its title, then its columns, cut at `chars` (a
    positive integer; a `ValueError` names a bad `table` or `chars`)."""
    check_instance("table", table, Table)
    check_positive_int("chars", chars)
    s = f"{table.title.rstrip('. ')} (columns: {', '.join(list(table.columns)[:8])})"
    return " " + (s if len(s) <= chars else s[:chars].rstrip() + "...")


def _check_call(lake=None, request=None, model=None, cfg=None, *, need=()) -> None:
    """The shared contract of the discovery functions: a `Lake`, a string request, an
    `AgentModel`, a `DiscoveryConfig` (each named in the error)."""
    if "lake" in need:
        check_instance("lake", lake, Lake)
    if "request" in need:
        check_instance("request", request, str)
    if "model" in need:
        check_instance("model", model, AgentModel)
    if "cfg" in need:
        check_instance("cfg", cfg, DiscoveryConfig)


_ALL = ("lake", "request", "model", "cfg")


def _request_prompt(request: str) -> str:
    return f"Question: {request}\n{_RELEVANT}"


def relevance(model: AgentModel, request: str, snippets: Sequence[str]) -> tuple[np.ndarray, int]:
    """PMI relevance of each snippet to `request` and the tokens the request-side call used.

    **Returns:** `(scores, tokens)`: scores (K,) = mean log p(snippet | request) - mean log
    p(snippet | no request), and the number of prompt + option tokens of the request call.
    `request` is a string, `snippets` a non-empty sequence of strings (not a bare string),
    `model` an `AgentModel`; anything else raises a `ValueError` naming the argument.
    """
    _check_call(request=request, model=model, need=("request", "model"))
    snippets = check_strings("snippets", snippets)
    prompt = _request_prompt(request)
    if isinstance(model, LMAgentModel):
        cond, base = model.option_scores_many([prompt, _RELEVANT], [snippets, snippets])
    else:
        cond, base = model.option_scores(prompt, snippets), model.option_scores(_RELEVANT, snippets)
    cond = _checked_scores(model, cond, snippets)
    base = _checked_scores(model, base, snippets)
    tokens = model.count_tokens(prompt) + sum(model.count_tokens(s) for s in snippets)
    return cond - base, tokens


def _select(
    scores: dict[str, float],
    cfg: DiscoveryConfig,
    *,
    threshold: float,
    margin: float | None = None,
    ratio: float | None = None,
) -> tuple[str, ...]:
    if not scores:
        return ()
    best = max(scores.values())
    if best <= threshold:
        return ()
    if ratio is not None:
        keep = [(s, n) for n, s in scores.items() if s >= ratio * best]
    else:
        keep = [(s, n) for n, s in scores.items() if s >= best - (margin or cfg.margin)]
    keep.sort(key=lambda x: (-x[0], x[1]))
    return tuple(n for _, n in keep[: cfg.max_tables])


def _offers(model, lake, partition, request, cfg) -> tuple[dict[str, float], float, int]:
    names = lake.partitions[partition]
    pmi, tok = relevance(
        model, request, [snippet(lake.tables[n], chars=cfg.snippet_chars) for n in names]
    )
    return dict(zip(names, pmi.tolist(), strict=True)), float(pmi.max()), tok


def blackboard(lake: Lake, request: str, model: AgentModel, cfg: DiscoveryConfig) -> Discovery:
    """Blackboard discovery: partition agents volunteer offers for the posted request.

    **Arguments:**

    - `lake`: the lake (each partition agent reads only its partition's tables).
    - `request`: what the central agent posts (the task's question).
    - `model`: the agents' language model.
    - `cfg`: thresholds, margins and budgets.

    **Returns:** a `Discovery` whose messages are the board's posts. A wrong type for any
    argument raises a `ValueError` naming it.
    """
    _check_call(lake, request, model, cfg, need=_ALL)
    board = [f"central: REQUEST {request}"]
    offered: dict[str, float] = {}
    tokens = 0
    for p in lake.partitions:
        scores, conf, tok = _offers(model, lake, p, request, cfg)
        tokens += tok
        if conf <= cfg.threshold:
            continue
        mine = _select(scores, cfg, threshold=cfg.threshold)
        best = lake.tables[mine[0]].title[:60]
        board.append(
            f"{p}: VOLUNTEER confidence {conf:.3f}, offers {list(mine)} (best match: {best!r})"
        )
        for n in mine:
            offered[n] = scores[n]
    chosen = _select(offered, cfg, threshold=cfg.threshold)
    board.append(f"central: SELECT {list(chosen) or NOT_IN_LAKE}")
    return Discovery(chosen, tokens, tuple(board))


def _descriptions(lake: Lake) -> list[str]:
    """The master's options: each partition's description, in `lake.partitions` order."""
    return [" " + partition_description(lake, p) for p in lake.partitions]


def master_slave(
    lake: Lake,
    request: str,
    model: AgentModel,
    cfg: DiscoveryConfig,
    *,
    route_k: int | None = None,
) -> Discovery:
    """Master-slave discovery: the central agent routes by partition descriptions to its
    `route_k` best partitions (`None`: `cfg.route_k`; `len(lake.partitions)`: every
    partition, the token-matched variant `master_slave_all`)."""
    _check_call(lake, request, model, cfg, need=_ALL)
    k = cfg.route_k if route_k is None else check_positive_int("route_k", route_k)
    parts = list(lake.partitions)
    descs = _descriptions(lake)
    route, tokens = relevance(model, request, descs)
    order = np.argsort(-route, kind="stable")[:k]
    msgs = [f"central: ROUTE to {[parts[i] for i in order]}"]
    offered: dict[str, float] = {}
    for i in order:
        scores, _, tok = _offers(model, lake, parts[i], request, cfg)
        tokens += tok
        for n in _select(scores, cfg, threshold=cfg.threshold):
            offered[n] = scores[n]
    chosen = _select(offered, cfg, threshold=cfg.threshold)
    return Discovery(chosen, tokens, (*msgs, f"central: SELECT {list(chosen)}"))


def _single_prompt(lake: Lake, request: str, model: AgentModel, cfg: DiscoveryConfig):
    """The single agent's numbered snippets truncated to the budget: (prompt, options, names)."""
    tail = f"Question: {request}\nThe number of the data set needed (or none):"
    budget = cfg.context_tokens - model.count_tokens(tail) - 4
    lines, names, used = ["Data sets:"], [], model.count_tokens("Data sets:")
    for n in lake.tables:
        line = f"[{len(names) + 1}]{snippet(lake.tables[n], chars=cfg.snippet_chars)}"
        t = model.count_tokens(line) + 1
        if used + t > budget:
            break
        lines.append(line)
        names.append(n)
        used += t
    prompt = "\n".join(lines) + "\n" + tail
    options = [f" {k + 1}" for k in range(len(names))] + [" none"]
    return prompt, options, names


def single_agent(lake: Lake, request: str, model: AgentModel, cfg: DiscoveryConfig) -> Discovery:
    """One agent with every snippet in its prompt, truncated to `cfg.context_tokens`."""
    _check_call(lake, request, model, cfg, need=_ALL)
    prompt, options, names = _single_prompt(lake, request, model, cfg)
    lp = _checked_scores(model, model.option_scores(prompt, options), options)
    tokens = model.count_tokens(prompt) + sum(model.count_tokens(o) for o in options)
    visible = len(names) / max(len(lake), 1)
    msg = (f"single: {len(names)} of {len(lake)} tables fit in {cfg.context_tokens} tokens",)
    if not names or lp[-1] >= lp[:-1].max():
        return Discovery((), tokens, msg, visible)
    scores = dict(zip(names, lp[:-1].tolist(), strict=True))
    chosen = _select(scores, cfg, threshold=-math.inf)
    return Discovery(chosen, tokens, msg, visible)


def blackboard_tokens(lake: Lake, request: str, model: AgentModel, cfg: DiscoveryConfig) -> int:
    """The tokens `blackboard` spends on `request` (every partition's relevance call:
    the request prompt and the partition's snippets), counted without scoring: the budget
    of the token-matched baselines."""
    _check_call(lake, request, model, cfg, need=_ALL)
    prompt = model.count_tokens(_request_prompt(request))
    snips = [snippet(t, chars=cfg.snippet_chars) for t in lake.tables.values()]
    return prompt * len(lake.partitions) + sum(model.count_tokens(s) for s in snips)


def bm25_rerank(
    lake: Lake,
    request: str,
    index: BM25,
    model: AgentModel,
    cfg: DiscoveryConfig,
    *,
    budget: int,
) -> Discovery:
    """BM25 retrieval reranked by the agents' relevance within a token budget.

    The lake's tables in BM25 order (ties by name), as many as fit in one relevance call
    of at most `budget` tokens (the request prompt and their snippets), are judged by the
    model's PMI relevance (as a partition agent judges its partition); the selection is
    the blackboard's (`cfg.threshold`, `cfg.margin`). With `budget` = `blackboard_tokens`
    this is retrieval given the blackboard's token budget. A budget below the prompt and
    the first snippet finds nothing and spends 0 tokens.

    **Arguments:** `lake`, `request`, `model`, `cfg` as in `blackboard`; `index` a `BM25`
    built by `bm25_index(lake)`; `budget` a positive integer (tokens).
    """
    _check_call(lake, request, model, cfg, need=_ALL)
    check_instance("index", index, BM25)
    check_positive_int("budget", budget)
    if len(index.docs) != len(lake):
        raise ValueError(
            f"index: built over {len(index.docs)} documents, the lake has {len(lake)} tables"
        )
    names = list(lake.tables)
    s = index.scores(request)
    order = sorted(range(len(names)), key=lambda i: (-float(s[i]), names[i]))
    used = model.count_tokens(_request_prompt(request))
    keep: list[str] = []
    snips: list[str] = []
    for i in order:
        sn = snippet(lake.tables[names[i]], chars=cfg.snippet_chars)
        t = model.count_tokens(sn)
        if used + t > budget:
            break
        keep.append(names[i])
        snips.append(sn)
        used += t
    msg = f"bm25_rerank: {len(keep)} of {len(lake)} tables judged within {budget} tokens"
    if not keep:
        return Discovery((), 0, (msg,), 0.0)
    pmi, tokens = relevance(model, request, snips)
    chosen = _select(dict(zip(keep, pmi.tolist(), strict=True)), cfg, threshold=cfg.threshold)
    return Discovery(chosen, tokens, (msg,), len(keep) / len(lake))


def retrieval(
    lake: Lake, request: str, index: BM25 | DenseIndex, cfg: DiscoveryConfig
) -> Discovery:
    """BM25 or dense retrieval over the full profiles (`index` built over `lake.tables` in
    order by `bm25_index` / `dense_index`); the documents within `*_ratio` of the best,
    when the best exceeds `*_threshold`."""
    _check_call(lake, request, None, cfg, need=("lake", "request", "cfg"))
    check_instance("index", index, (BM25, DenseIndex))
    if len(index.docs) != len(lake):
        raise ValueError(
            f"index: built over {len(index.docs)} documents, the lake has {len(lake)} tables "
            "(build it with bm25_index / dense_index over this lake)"
        )
    s = index.scores(request)
    scores = dict(zip(lake.tables, s.tolist(), strict=True))
    if isinstance(index, DenseIndex):
        return Discovery(_select(scores, cfg, threshold=cfg.dense_threshold, ratio=cfg.dense_ratio))
    return Discovery(_select(scores, cfg, threshold=cfg.bm25_threshold, ratio=cfg.bm25_ratio))


def oracle(data_sources: Sequence[str]) -> Discovery:
    """The task's true tables (the ceiling of the end-to-end stage); `data_sources` a
    sequence of table names (not a bare string: a `ValueError` names it)."""
    return Discovery(check_strings("data_sources", data_sources, nonempty=False))


def bm25_index(lake: Lake) -> BM25:
    """The BM25 index of the lake's full profiles, in `lake.tables` order (`lake` a `Lake`)."""
    check_instance("lake", lake, Lake)
    return BM25([profile_text(t) for t in lake.tables.values()])


def dense_index(lake: Lake, model: AgentModel, cfg: DiscoveryConfig) -> DenseIndex:
    """The dense index of the lake's profiles under `model.embed`, in `lake.tables` order.

    **Arguments:**

    - `lake`: the lake whose tables are indexed.
    - `model`: an agent model with `embed` (`LMAgentModel`: `jaxlab.lm.embed`, cached).
    - `cfg`: `cfg.embed_chars` is how much of each profile is embedded.

    **Returns:** a `DenseIndex` for `retrieval`. A wrong type for any argument raises a
    `ValueError` naming it.
    """
    _check_call(lake, None, model, cfg, need=("lake", "model", "cfg"))
    docs = [profile_text(t)[: cfg.embed_chars] for t in lake.tables.values()]
    return DenseIndex(docs, model.embed)


METHODS = (
    "blackboard",
    "master_slave",
    "single_agent",
    "retrieval",
    "dense_retrieval",
    "master_slave_all",
    "bm25_rerank",
    "oracle",
)
"""The discovery methods `run_methods` compares: the blackboard (P8), its master-slave and
single-agent baselines, BM25 and dense retrieval, the token-matched baselines
(`master_slave_all`: master-slave routed to every partition; `bm25_rerank`: BM25 reranked
by the agents within the blackboard's tokens on the task) and the oracle."""

_CHUNK = 32  # options per prompt in a prefetch item


def _check_run(lake, tasks, model, cfg, methods) -> tuple[str, ...]:
    """`run_methods`' and `prefetch`'s arguments: `methods` as a tuple of known names."""
    _check_call(lake, None, model, cfg, need=("lake", "model", "cfg"))
    methods = check_strings("methods", methods)
    if isinstance(tasks, str | bytes) or not all(isinstance(t, Task) for t in tasks):
        raise ValueError(f"tasks: expected a sequence of Task, received {tasks!r:.60}")
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise ValueError(f"methods: expected names from {METHODS}, received {bad}")
    return methods


def prefetch(
    lake: Lake,
    tasks,
    model: AgentModel,
    cfg: DiscoveryConfig,
    *,
    methods: Sequence[str] = METHODS,
    progress: bool = True,
) -> int:
    """Score every relevance call the LM methods will make on `tasks`, in large batches.

    The blackboard's and the master's calls share one prompt per request (its snippets
    and partition descriptions as options), the request-free base prompt is shared by
    all requests, and the single agent has one prompt per request; each goes in chunks
    of 32 options through `LMAgentModel.option_scores_many`, whose cache the methods
    then read. Models other than `LMAgentModel` (scripted ones) are left alone.

    **Arguments:**

    - `lake`, `tasks`: the lake and the tasks whose queries will be posted.
    - `model`: the agents' model.
    - `cfg`: the discovery settings (snippet length, context budget) the methods use.
    - `methods`: the methods that will run (only the LM ones need scores).
    - `progress`: show a progress bar over the scoring batches.

    **Returns:** the number of (prompt, option) pairs asked for (cached or not). The
    arguments are checked as in `run_methods` (also for models it leaves alone).
    """
    methods = _check_run(lake, tasks, model, cfg, methods)
    if not isinstance(model, LMAgentModel):
        return 0
    groups: list[tuple[str, list[str]]] = []  # (prompt, options)
    if {"blackboard", "master_slave", "master_slave_all", "bm25_rerank"} & set(methods):
        snippets = [snippet(t, chars=cfg.snippet_chars) for t in lake.tables.values()]
        groups.append((_RELEVANT, snippets))
        groups += [(_request_prompt(t.query), snippets) for t in tasks]
    if {"master_slave", "master_slave_all"} & set(methods):  # the partition descriptions
        descs = _descriptions(lake)
        groups.append((_RELEVANT, descs))
        groups += [(_request_prompt(t.query), descs) for t in tasks]
    if "single_agent" in methods:
        for t in tasks:
            prompt, options, _ = _single_prompt(lake, t.query, model, cfg)
            groups.append((prompt, options))
    prompts, options = [], []
    for p, opts in groups:
        for i in range(0, len(opts), _CHUNK):
            prompts.append(p)
            options.append(list(opts[i : i + _CHUNK]))
    model.option_scores_many(prompts, options, progress=progress)
    return sum(len(o) for o in options)


# ------------------------------------------------------------------------------ planner

_KINDS = {
    "value_mean": " the average of one column over all records",
    "count": " the number of records above a threshold",
    "argmax": " the group with the highest average",
    "keys": " the list of groups whose average is above a threshold",
}
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


def _checked_scores(model: AgentModel, scores, options: Sequence[str]) -> np.ndarray:
    """A model's option scores as (K,) floats; a wrong length or a NaN/inf score raises a
    `ValueError` naming the model (np.argmax would pick a NaN option silently)."""
    lp = np.asarray(scores, np.float64)
    if lp.shape != (len(options),):
        raise ValueError(
            f"model: {model.name!r}.option_scores returned shape {lp.shape} for "
            f"{len(options)} options"
        )
    if not np.all(np.isfinite(lp)):
        raise ValueError(
            f"model: {model.name!r}.option_scores returned NaN or inf for options "
            f"{[o for o, v in zip(options, lp, strict=True) if not np.isfinite(v)][:3]}"
        )
    return lp


def _pick(model: AgentModel, prompt: str, options: Sequence[str]) -> tuple[int, int]:
    lp = _checked_scores(model, model.option_scores(prompt, options), options)
    tok = model.count_tokens(prompt) + sum(model.count_tokens(o) for o in options)
    return int(np.argmax(lp)), tok


def _columns(tables: Sequence[Table], numeric: bool) -> list[tuple[int, str]]:
    return [
        (i, c)
        for i, t in enumerate(tables)
        for c, dt in t.dtypes.items()
        if (dt != "str") == numeric and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", c)
    ]


def plan_query(question: str, tables: Sequence[Table], model: AgentModel) -> tuple[str, int]:
    """The central agent's plan for `question` over the chosen `tables`, slot by slot.

    **Returns:** `(plan_text, tokens)`; the text is in `parse_plan`'s format. Raises
    `PlanError` when the tables admit no plan (no numeric column, no join key).
    `question` a string, `tables` a sequence of `Table`, `model` an `AgentModel`; anything
    else raises a `ValueError` naming the argument.
    """
    check_instance("question", question, str)
    check_instance("tables", tables, (list, tuple))
    for t in tables:
        check_instance("tables", t, Table)
    check_instance("model", model, AgentModel)
    if not tables:
        raise PlanError("tables: no table to plan over")
    q = f"Question: {question}\n"
    kinds = list(_KINDS)
    k, tokens = _pick(model, q + "The answer is", [_KINDS[x] for x in kinds])
    kind = kinds[k]
    nums = _columns(tables, numeric=True)
    if not nums:
        raise PlanError("tables: no numeric column to aggregate")
    m, tok = _pick(
        model, q + "The column measured is", [f" {c} ({tables[i].label(c)})" for i, c in nums]
    )
    tokens += tok
    mi, mc = nums[m]
    order = [mi] + [i for i in range(len(tables)) if i != mi]  # the measured table is t0
    alias = {i: f"t{order.index(i)}" for i in order}
    ts = [tables[i] for i in order]
    joins = []
    for j in order[1:]:
        shared = [
            c
            for c in tables[j].columns
            if c in ts[0].columns
            and tables[j].dtypes[c] == ts[0].dtypes[c]
            and tables[j].dtypes[c] == "str"
        ]
        if not shared:
            raise PlanError(
                f"tables: no shared key column between {ts[0].name!r} and {tables[j].name!r}"
            )
        joins.append((ColumnRef("t0", shared[0]), ColumnRef(alias[j], shared[0])))
    numbers = [float(x) for x in _NUMBER.findall(question)]
    where: tuple[Condition, ...] = ()
    group = None
    having = None
    agg_ref = ColumnRef(alias[mi], mc)
    if kind == "count":
        if not numbers:
            raise PlanError("question: a count needs a threshold and none is written")
        where = (Condition(agg_ref, ">", numbers[-1]),)
        plan = Plan(tuple(t.name for t in ts), "count", "value", joins=tuple(joins), where=where)
        return format_plan(plan), tokens
    if kind in ("argmax", "keys"):
        cats = _columns(tables, numeric=False)
        cats = [(i, c) for i, c in cats if not any(c == jr.column for _, jr in joins)] or cats
        if not cats:
            raise PlanError("tables: no text column to group by")
        g, tok = _pick(
            model,
            q + "The groups are given by the column",
            [f" {c} ({tables[i].label(c)})" for i, c in cats],
        )
        tokens += tok
        group = ColumnRef(alias[cats[g][0]], cats[g][1])
        if kind == "keys":
            if not numbers:
                raise PlanError("question: a list above a threshold needs a threshold")
            having = (">", numbers[-1])
    if len(ts) == 3 and numbers:  # a filter on the third table, as 3-table questions ask
        fnums = [(i, c) for i, c in nums if alias[i] == "t2"]
        if fnums:
            f, tok = _pick(
                model,
                q + "The records are filtered on the column",
                [f" {c} ({tables[i].label(c)})" for i, c in fnums],
            )
            tokens += tok
            where = (Condition(ColumnRef("t2", fnums[f][1]), ">", numbers[-1]),)
    plan = Plan(
        tuple(t.name for t in ts),
        "mean",
        "value" if group is None else ("argmax" if kind != "keys" else "keys"),
        agg_column=agg_ref,
        joins=tuple(joins),
        where=where,
        group=group,
        having=having,
    )
    return format_plan(plan), tokens


class QueryAnswer(NamedTuple):
    """What `answer_query` returns (a named tuple: read the fields by name).

    - `answer`: the executed plan's answer (a float, or a list of strings / a string);
      `NOT_IN_LAKE` when discovery found no table; `None` when no valid plan could be
      made or run (then `reason` says why).
    - `plan`: the planner's text (`""` when no plan was asked for).
    - `tokens`: the planner call's tokens (0 when no call was made).
    - `reason`: `""` on success; otherwise the stage and the `PlanError`'s message, e.g.
      `"plan: tables: no numeric column to aggregate"` (the tables admit no plan) or
      `"execute: ..."` (the planner's text is outside the grammar or does not fit the
      tables, e.g. no shared key column to join on).
    """

    answer: object
    plan: str
    tokens: int
    reason: str = ""

    @property
    def ok(self) -> bool:
        """Whether a plan was made and run (`answer` is not `None`)."""
        return not self.reason


def answer_query(question: str, found: Sequence[str], lake: Lake, model: AgentModel) -> QueryAnswer:
    """End to end after discovery: plan over the found tables, parse strictly, execute.

    Never swallows why it failed: a `PlanError` while planning or executing becomes a
    `QueryAnswer` with `answer=None` and the error's message in `reason` (the common case
    when discovery adds tables that cannot be joined); other errors propagate, among them
    the `ValueError` naming `model` when it scores an option NaN/inf or returns the wrong
    number of scores (an argmax over NaN would pick an option silently).

    **Arguments:**

    - `question`: the natural-language query.
    - `found`: the names of the discovered tables (keys of `lake.tables`).
    - `lake`: the data lake.
    - `model`: the planning `AgentModel`.

    **Returns:** a `QueryAnswer` (`answer`, `plan`, `tokens`, `reason`). A wrong type for
    any argument (a bare string for `found`) raises a `ValueError` naming it.
    """
    check_instance("question", question, str)
    found = check_strings("found", found, nonempty=False)
    _check_call(lake, None, model, None, need=("lake", "model"))
    if not found:
        return QueryAnswer(NOT_IN_LAKE, "", 0)
    missing = [n for n in found if n not in lake.tables]
    if missing:
        raise ValueError(f"found: tables not in the lake: {missing}")
    try:
        text, tokens = plan_query(question, [lake.tables[n] for n in found], model)
    except PlanError as e:
        return QueryAnswer(None, "", 0, f"plan: {e}")
    try:
        ans = execute(parse_plan(text), lake.tables)
    except PlanError as e:
        return QueryAnswer(None, text, tokens, f"execute: {e}")
    if isinstance(ans, list):
        ans = [str(a) for a in ans]
    elif not isinstance(ans, float):
        ans = str(ans)
    return QueryAnswer(ans, text, tokens)


def run_methods(
    lake: Lake,
    tasks,
    model: AgentModel,
    cfg: DiscoveryConfig,
    *,
    methods: Sequence[str] = METHODS,
    progress: bool = True,
) -> dict[str, list]:
    """Discovery of every method on every task: method -> list of `Discovery` (task order).

    The LM methods' relevance calls are scored first in large batches (`prefetch`).
    `tasks` a sequence of `Task`, `methods` names from `METHODS` (not a bare string);
    anything else raises a `ValueError` naming the argument.
    """
    methods = _check_run(lake, tasks, model, cfg, methods)
    index = bm25_index(lake) if {"retrieval", "bm25_rerank"} & set(methods) else None
    dense = dense_index(lake, model, cfg) if "dense_retrieval" in methods else None
    prefetch(lake, tasks, model, cfg, methods=methods, progress=progress)
    out: dict[str, list] = {m: [] for m in methods}
    for task in progress_bar(tasks, desc="discovery", enabled=progress):
        for m in methods:
            if m == "blackboard":
                d = blackboard(lake, task.query, model, cfg)
            elif m == "master_slave":
                d = master_slave(lake, task.query, model, cfg)
            elif m == "master_slave_all":
                d = master_slave(lake, task.query, model, cfg, route_k=len(lake.partitions))
            elif m == "bm25_rerank":
                assert index is not None
                budget = blackboard_tokens(lake, task.query, model, cfg)
                d = bm25_rerank(lake, task.query, index, model, cfg, budget=budget)
            elif m == "single_agent":
                d = single_agent(lake, task.query, model, cfg)
            elif m == "retrieval":
                assert index is not None  # built above whenever "retrieval" is in methods
                d = retrieval(lake, task.query, index, cfg)
            elif m == "dense_retrieval":
                assert dense is not None  # the query's embedding is its model call
                d = retrieval(lake, task.query, dense, cfg)
                d = dataclasses.replace(d, tokens=model.count_tokens(task.query))
            else:
                d = oracle(task.data_sources)
            out[m].append(d)
    return out
