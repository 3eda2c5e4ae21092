"""Shared set-up of the P13 beliefs experiments: the items and the cached model calls.

Items: `jaxlab.beliefs.make_scenarios` (box / door / suspect, k_A, k_B in 0..4, or up to the
config's `max_evidence`, a balanced design), `make_factual` (misleading context against the
prior) and the first ToMi (and, in FULL, Hi-ToM) stories of the `evals` wheel, all drawn from
the run's key.

Model calls, each cached per chunk of items as `.npz` under a content hash (model GGUF
SHA-256, the exact prompts and options, layers, generation length, code version) in
`$JAXLAB_CACHE_DIR/beliefs` (default `~/.cache/jaxlab/beliefs`); a killed build resumes at
the next chunk and a complete cache loads no model:

- `model_run`: greedy generation of the answer (up to `max_new_tokens`, stopping at a
  newline), the option log-likelihoods of the action (first-token log-probabilities from
  the generation's first step for single-token options, `lm.score` otherwise), and the
  residual states at the last prompt token and every generated token at the stored layers;
- `monitor_scores`: self-report questions asked after the model's own answer, scored with
  `lm.score` (all questions share the prompt's KV cache as options);
- `steer_scores`: option log-probabilities under steering / ablation at the last token.
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

from experiments._harness import (
    Estimate,
    Precondition,
    cache_dir,
    cached_items,
    load_npz,
    log,
    model_params,
    model_sha256,
    save_npz,
    wilson,
)
from experiments._harness import model_tag as short
from jaxlab import beliefs as bl
from jaxlab import lm, progress_bar
from jaxlab.data import wheel_file

CODE_VERSION = "beliefs-v1"  # bump when prompts, options, generation or read-outs change

TOMI = "evals/registry/data/theory_of_mind/tomi/test.jsonl"
HITOM = "evals/registry/data/theory_of_mind/hitom/hitom-multiple-choice.jsonl"

QUICK_MODELS = ("smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct")
FULL_MODELS = (
    "smollm2-135m-instruct",
    "gemma3-270m",
    "qwen2.5-coder-0.5b-instruct",
    "qwen2.5-coder-1.5b-instruct",
)

CAVEAT = (
    "Small open models (SmolLM2-135M-Instruct, Qwen2.5-Coder-0.5B-Instruct; 4-bit GGUF "
    "weights dequantised to float32), plain-text prompts, greedy decoding, actions read by "
    "option likelihood; the paper's models were larger, so a negative result here says "
    "nothing about them."
)

CONFIDENCE = ("low", "medium", "high")
CONFIDENCE_VALUES = np.array([0.0, 0.5, 1.0])
_Q_CONF = "\nQuestion: How confident are you in that answer: low, medium or high?\nAnswer:"
_Q_CONFLICT = "\nQuestion: Did the clues point to different answers, yes or no?\nAnswer:"
_Q_AGAIN = "\nQuestion: Are you sure? Think again and answer.\nAnswer: "


@dataclasses.dataclass(frozen=True)
class ItemConfig:
    """Which items a run uses (the cache key covers the resulting prompts)."""

    n_per_cell: int = 3
    factual_per_cell: int = 1
    tomi_items: int = 24
    hitom_items: int = 0
    max_evidence: int = 4  # k_A, k_B in 0..max_evidence


def make_items(cfg: ItemConfig, key: jax.Array) -> list[bl.BeliefItem]:
    """Scenarios, factual items, ToMi and Hi-ToM stories (in that order)."""
    items = bl.make_scenarios(
        cfg.n_per_cell, key=jax.random.fold_in(key, 0), max_evidence=cfg.max_evidence
    )
    if cfg.factual_per_cell:
        items += bl.make_factual(
            cfg.factual_per_cell, key=jax.random.fold_in(key, 1), max_evidence=cfg.max_evidence
        )
    if cfg.tomi_items:
        items += bl.read_tomi(wheel_file("evals", TOMI), n=cfg.tomi_items)
    if cfg.hitom_items:
        items += bl.read_hitom(wheel_file("evals", HITOM), n=cfg.hitom_items)
    return items


@functools.cache
def tokenizer_and_config(name: str) -> tuple[lm.Tokenizer, lm.LMConfig]:
    """The model's tokenizer and config without loading its weights."""
    card = lm.describe(name)
    return card.tokenizer, card.config


def stored_layers(name: str, count: int | None) -> tuple[int, ...]:
    """`count` evenly spaced layers from the first to the last (None or more: every layer)."""
    n = tokenizer_and_config(name)[1].n_layers
    if count is None or count >= n:
        return tuple(range(n))
    return tuple(sorted({int(round(v)) for v in np.linspace(0, n - 1, count)}))


@functools.cache
def _newline_ids(name: str) -> tuple[int, ...]:
    tok, _ = tokenizer_and_config(name)
    texts = tok.backend.decode_batch([[i] for i in range(tok.vocab_size)])
    return tuple(i for i, t in enumerate(texts) if "\n" in t) + tuple(tok.stop_ids)


def option_ids(name: str, item: bl.BeliefItem) -> list[list[int]]:
    """Token ids of each option of `item` (continuations, no BOS)."""
    tok, _ = tokenizer_and_config(name)
    return [tok.encode(o, add_bos=False) for o in item.options]


class _Lazy:
    """Loads the model on first use (a complete cache never loads it)."""

    def __init__(self, name: str):
        self.name, self._m = name, None

    def get(self) -> tuple[lm.Transformer, lm.Tokenizer]:
        if self._m is None:
            t0 = time.perf_counter()
            self._m = lm.load(self.name, mesh="auto")
            log.info("beliefs: loaded %s in %.0f s", self.name, time.perf_counter() - t0)
        return self._m


def _hash(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


@dataclasses.dataclass
class ModelRun:
    """One model's cached read-outs of the items.

    **Attributes:** `layers` the stored layers; `action` (n, K_max) option log-likelihoods
    (-inf past an item's options); `choice` (n,) argmax option; `generated` list of the
    generated ids; `states` (L, n, 1 + G, d) residual states at the last prompt token and the
    generated tokens; `mask` (n, 1 + G); `seconds` the build time of what was missing.
    """

    model: str
    layers: tuple[int, ...]
    action: np.ndarray
    choice: np.ndarray
    generated: list[list[int]]
    states: np.ndarray
    mask: np.ndarray
    seconds: float


def model_run(
    model: str,
    items: Sequence[bl.BeliefItem],
    *,
    n_layers: int | None,
    max_new_tokens: int,
    chunk: int = 16,
    lazy: _Lazy | None = None,
) -> ModelRun:
    """Generation, action scores and states of every item (cached per chunk of items)."""
    tok, cfg = tokenizer_and_config(model)
    layers = stored_layers(model, n_layers)
    lazy = lazy or _Lazy(model)
    sha = model_sha256(model)
    stops = _newline_ids(model)
    K = max(len(it.options) for it in items)
    prompts = [tok.encode(it.prompt) for it in items]
    opts = [option_ids(model, it) for it in items]
    starts = list(range(0, len(items), chunk))
    chunks = [list(range(s, min(s + chunk, len(items)))) for s in starts]
    paths = [
        cache_dir("beliefs")
        / (
            f"run-{short(model)}-"
            + _hash(
                sha,
                [prompts[i] for i in idx],
                [opts[i] for i in idx],
                layers,
                max_new_tokens,
                CODE_VERSION,
            )
            + ".npz"
        )
        for idx in chunks
    ]
    timer = [0.0]

    def build(c: int) -> dict[str, np.ndarray]:
        idx = chunks[c]
        t0 = time.perf_counter()
        net, _ = lazy.get()
        batch = [prompts[i] for i in idx]
        pad = chunk - len(batch)  # a full batch: one compile for every chunk
        g = lm.generate(
            net,
            batch + [batch[0]] * pad,
            max_new_tokens=max_new_tokens,
            stop_tokens=stops,
            return_logits=True,
        )
        lengths = np.asarray(g.lengths)[: len(idx)]
        gen = np.asarray(g.tokens)[: len(idx)]
        first = np.asarray(jax.nn.log_softmax(g.logits[: len(idx), 0, :], axis=-1))
        action = np.full((len(idx), K), -np.inf)
        multi = np.zeros(len(idx), bool)
        for r, i in enumerate(idx):
            for j, o in enumerate(opts[i]):
                action[r, j] = first[r, o[0]]
            multi[r] = any(len(o) > 1 for o in opts[i])
        if multi.any():
            rows = [i for r, i in enumerate(idx) if multi[r]]
            sc = lm.score(
                net,
                tok,
                [prompts[i] for i in rows],
                [items[i].options for i in rows],
                batch_size=4,
            )
            for r, s_ in zip(np.flatnonzero(multi), sc.sum, strict=True):
                action[r, : len(s_)] = s_
        comps = [list(gen[r, : lengths[r]]) for r in range(len(idx))]
        states, mask = bl.generation_states(
            net,
            batch + [batch[0]] * pad,
            comps + [comps[0]] * pad,
            layers=layers,
            width=max_new_tokens,
        )
        timer[0] += time.perf_counter() - t0
        log.info("beliefs %s chunk %d: %.1f s", model, c, time.perf_counter() - t0)
        return {
            "action": action,
            "generated": gen,
            "lengths": lengths,
            "states": states[: len(idx)].astype(np.float32),
            "mask": mask[: len(idx)],
        }

    # one item per chunk; in a multi-process job each chunk is built by one process
    parts = cached_items(paths, build, desc=f"beliefs {short(model)} generate+states")
    t_build = timer[0]
    action = np.concatenate([p["action"] for p in parts])
    return ModelRun(
        model,
        layers,
        action,
        np.argmax(action, axis=1),
        [
            list(map(int, g[:n]))
            for p in parts
            for g, n in zip(p["generated"], p["lengths"], strict=True)
        ],
        np.concatenate([p["states"] for p in parts]).transpose(1, 0, 2, 3),
        np.concatenate([p["mask"] for p in parts]),
        t_build,
    )


def monitor_questions(item: bl.BeliefItem) -> list[str]:
    """The self-report options asked after an answer: confidence (3), conflict (2),
    answering again (one per option)."""
    return (
        [_Q_CONF + " " + c for c in CONFIDENCE]
        + [_Q_CONFLICT + " yes", _Q_CONFLICT + " no"]
        + [_Q_AGAIN + item.answer_prefix + o for o in item.options]
    )


def monitor_scores(
    model: str,
    items: Sequence[bl.BeliefItem],
    choice: np.ndarray,
    *,
    chunk: int = 16,
    lazy: _Lazy | None = None,
) -> tuple[np.ndarray, float]:
    """(n, 5 + K) log-likelihoods of the self-report options after the model's own answer
    (cached per chunk), and the build time of what was missing."""
    tok, _ = tokenizer_and_config(model)
    lazy = lazy or _Lazy(model)
    sha = model_sha256(model)
    prompts = [it.prompt + it.options[int(c)] + "." for it, c in zip(items, choice, strict=True)]
    conts = [monitor_questions(it) for it in items]
    out, t_build = [], 0.0
    for s in progress_bar(range(0, len(items), chunk), desc=f"beliefs {short(model)} monitor"):
        h = _hash(sha, prompts[s : s + chunk], conts[s : s + chunk], CODE_VERSION)
        path = cache_dir("beliefs") / f"monitor-{short(model)}-{h}.npz"
        got = load_npz(path)
        if got is None:
            t0 = time.perf_counter()
            net, _ = lazy.get()
            sc = lm.score(net, tok, prompts[s : s + chunk], conts[s : s + chunk], batch_size=4)
            got = {"logliks": np.stack(sc.sum)}
            save_npz(path, got)
            t_build += time.perf_counter() - t0
        out.append(got["logliks"])
    return np.concatenate(out), t_build


def steer_scores(
    model: str,
    items: Sequence[bl.BeliefItem],
    vectors: np.ndarray,
    *,
    layers: Sequence[int],
    mode: str,
    tag: str,
    lazy: _Lazy | None = None,
) -> tuple[np.ndarray, float]:
    """(C, n, 2) option log-probabilities of single-token two-option items under the C
    edits (`jaxlab.beliefs.option_logprobs`), cached; and the build time."""
    tok, _ = tokenizer_and_config(model)
    prompts = [tok.encode(it.prompt) for it in items]
    ids = np.array([[o[0] for o in option_ids(model, it)] for it in items])
    vec = np.asarray(vectors, np.float32)
    h = _hash(
        model_sha256(model),
        prompts,
        ids.tolist(),
        hashlib.sha256(vec.tobytes()).hexdigest(),
        list(vec.shape),
        list(layers),
        mode,
        CODE_VERSION,
    )
    path = cache_dir("beliefs") / f"steer-{tag}-{short(model)}-{h}.npz"
    got = load_npz(path)
    if got is not None:
        return got["logprobs"], 0.0
    t0 = time.perf_counter()
    net, _ = (lazy or _Lazy(model)).get()
    lp = bl.option_logprobs(net, prompts, ids, vec, layers=layers, mode=mode, batch_size=16)
    save_npz(path, {"logprobs": lp})
    dt = time.perf_counter() - t0
    log.info("beliefs %s steer %s: %.0f s", model, tag, dt)
    return lp, dt


@dataclasses.dataclass(frozen=True)
class BaseConfig:
    """The settings the three experiments share (items, layers, generation); QUICK values.

    QUICK is reduced from the issue's ~200 templated + 100 ToMi items to 75 scenarios
    (3 per (k_A, k_B) cell), 25 factual items and 24 ToMi stories for SmolLM2 and 50
    scenarios (2 per cell, `reduced_models`) for Qwen2.5-Coder-0.5B, every layer stored
    (the issue asks for every layer; storing them costs memory, ~0.1 GB for SmolLM2, not
    model calls) and 12 generated tokens: at the issue's size the cache build (generation +
    states + self-report scores) would take well over an hour on the shared 2-core machine
    (measured under a load of ~14: ~70 s per chunk of 16 items for SmolLM2, ~300 s for
    Qwen).
    """

    models: tuple[str, ...] = QUICK_MODELS
    n_per_cell: int = 3
    factual_per_cell: int = 1
    tomi_items: int = 24
    hitom_items: int = 0
    reduced_models: tuple[str, ...] = ("qwen2.5-coder-0.5b-instruct",)
    reduced_n_per_cell: int = 2
    n_layers: int = 64  # >= every layer of the pool's models: all of them (stored_layers)
    max_new_tokens: int = 12
    max_evidence: int = 4  # the design's cells: k_A, k_B in 0..max_evidence
    chunk: int = 16  # items per cached chunk of model calls (one compiled batch)


#: FULL: four models, all items at the paper's scale, every layer
FULL_SETTINGS = {
    "models": FULL_MODELS,
    "reduced_models": (),
    "n_per_cell": 12,
    "factual_per_cell": 4,
    "tomi_items": 600,
    "hitom_items": 600,
    "n_layers": 64,
    "max_new_tokens": 24,
}


#: TINY (the smoke tier): SmolLM2 alone, one scenario and one factual item per (k_A, k_B)
#: cell of a 4 x 4 design (k up to 3: every read-out still has ties and |k_A - k_B| >= 3
#: items, and the prompts fit a 128-token bucket) and 2 ToMi stories, all 34 items in one
#: chunk (one compile, no padded rows); 2 stored layers, 3 generated tokens. The three
#: experiments share these settings, so they share one tiny cache.
TINY_SETTINGS = {
    "models": ("smollm2-135m-instruct",),
    "reduced_models": (),
    "n_per_cell": 1,
    "factual_per_cell": 1,
    "tomi_items": 2,
    "hitom_items": 0,
    "n_layers": 2,
    "max_new_tokens": 3,
    "max_evidence": 3,
    "chunk": 34,
}


def full_work(config) -> float:
    """Model work of the cache: sum over models of parameters x tokens (prompt ~80 + generated)
    x items (Hi-ToM stories count 3), twice (generation, states), plus the self-reports."""
    total = 0.0
    for m in config.models:
        ic = item_config(config, m)
        scen = (ic.max_evidence + 1) ** 2 * ic.n_per_cell
        items = (ic.max_evidence + 1) ** 2 * ic.factual_per_cell + ic.tomi_items
        items += scen + 3 * ic.hitom_items
        tokens = 2 * items * (80 + config.max_new_tokens) + scen * (100 + 7 * 16)
        total += model_params(m) * tokens
    return total


def build(config, key: jax.Array, **kw) -> dict[str, float]:
    """Build (or read) the generation and monitoring caches of an experiment config's
    models; seconds per model."""
    out = {}
    for m in config.models:
        items = make_items(item_config(config, m), key)
        scen = [i for i, it in enumerate(items) if it.family in bl.SCENARIOS]
        lazy = _Lazy(m)
        run = model_run(m, items, lazy=lazy, chunk=config.chunk, **kw)
        _, t = monitor_scores(
            m, [items[i] for i in scen], run.choice[scen], lazy=lazy, chunk=config.chunk
        )
        out[m] = run.seconds + t
    return out


@dataclasses.dataclass
class Beliefs:
    """Out-of-fold belief read-outs of the scenario items of one model.

    **Attributes:** `rows` indices of the scenario items in the item list; `balance` (n,);
    `folds` (n,) cross-fitting fold of each item; `auroc` (L,) mean held-out AUROC of the
    fold directions; `dom_mean`, `dom_final`, `dom_fraction` (L, n) out-of-fold dominance
    summaries over the generated sequence; `margins` (L, n, 1 + G) per-position margins.
    """

    rows: np.ndarray
    balance: np.ndarray
    folds: np.ndarray
    auroc: np.ndarray
    dom_mean: np.ndarray
    dom_final: np.ndarray
    dom_fraction: np.ndarray
    margins: np.ndarray


_vdominance = jax.jit(jax.vmap(jax.vmap(lambda s, m: bl.dominance(s, mask=m))))


def cross_fit(
    run: ModelRun,
    items: Sequence[bl.BeliefItem],
    *,
    key: jax.Array,
    n_folds: int = 5,
    labels: np.ndarray | None = None,
    method: str = "mean_difference",
) -> Beliefs:
    """Fit belief directions (last prompt token, items with a decided balance) on all folds
    but one and read the dominance of the held-out fold's items over their generation."""
    rows = np.array([i for i, it in enumerate(items) if it.family in bl.SCENARIOS])
    balance = np.array([items[i].balance for i in rows], np.float64)
    # folds stratified by the balance (each level dealt round-robin in a random order), so
    # every fold holds items favouring A and B
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)))
    folds = np.zeros(rows.size, np.int64)
    k = 0
    for level in np.unique(balance):
        at = rng.permutation(np.flatnonzero(balance == level))
        folds[at] = (k + np.arange(at.size)) % n_folds
        k += at.size
    lab = balance > 0 if labels is None else labels
    decided = balance != 0
    states = run.states[:, rows]  # (L, n, 1 + G, d)
    mask = run.mask[rows]
    L, n = states.shape[:2]
    dmean, dfin, dfrac = (np.zeros((L, n)) for _ in range(3))
    margins = np.zeros((L, n, states.shape[2]))
    aurocs = []
    for f in range(n_folds):
        held = folds == f
        fit_rows = decided & ~held
        # held-out AUROC on the held fold's decided items (fit_directions' test split)
        sel = decided
        fit = bl.fit_directions(states[:, sel, 0], lab[sel], train=fit_rows[sel], method=method)
        aurocs.append(np.asarray(fit.test_auroc))
        st = np.asarray(fit.state(states[:, held]))  # (L, n_held, 1 + G)
        d = _vdominance(st, np.broadcast_to(mask[held], st.shape))
        dmean[:, held], dfin[:, held], dfrac[:, held] = (
            np.asarray(d.mean),
            np.asarray(d.final),
            np.asarray(d.fraction),
        )
        margins[:, held] = np.asarray(d.margin)
    return Beliefs(rows, balance, folds, np.mean(aurocs, axis=0), dmean, dfin, dfrac, margins)


def scenario_split(items: Sequence[bl.BeliefItem], key: jax.Array, test_fraction: float):
    """(rows, train mask) of a random split of the scenario items."""
    from jaxlab import interp

    rows = np.array([i for i, it in enumerate(items) if it.family in bl.SCENARIOS])
    train = np.asarray(
        interp.group_split(np.arange(rows.size), key=key, test_fraction=test_fraction)
    )
    return rows, train


def item_config(config, model: str) -> ItemConfig:
    """The `ItemConfig` of an experiment config for `model`: its item fields, or for the
    models in `config.reduced_models` only `config.reduced_n_per_cell` scenarios per cell
    (no factual or ToMi items; QUICK's budget on the shared CPU)."""
    if model in config.reduced_models:
        return ItemConfig(config.reduced_n_per_cell, 0, 0, 0, config.max_evidence)
    return ItemConfig(
        config.n_per_cell,
        config.factual_per_cell,
        config.tomi_items,
        config.hitom_items,
        config.max_evidence,
    )


if __name__ == "__main__":  # build the QUICK caches: python -m experiments.beliefs._setup [model]
    import logging
    import sys

    logging.basicConfig(level=logging.INFO)
    cfg = BaseConfig(models=tuple(sys.argv[1:]) or QUICK_MODELS)
    secs = build(cfg, jax.random.key(0), n_layers=cfg.n_layers, max_new_tokens=cfg.max_new_tokens)
    print(secs)


def follows_evidence(run_: ModelRun, items: Sequence[bl.BeliefItem], rows) -> Precondition:
    """P13's competence gate (#55 item 1): a claim about how a model forms or uses a
    belief from evidence is tested only on a model whose plain choice follows the
    evidence: on the decided items among `rows` (k_A != k_B), the share whose option
    log-likelihood margin log P(A) - log P(B) has the sign of k_A - k_B, with a Wilson
    interval whose lower bound must exceed chance (1/2)."""
    rows = np.asarray(rows)
    bal = np.array([items[i].balance for i in rows], np.float64)
    dec = bal != 0
    margin = run_.action[rows, 0] - run_.action[rows, 1]
    n = int(dec.sum())
    k = int(np.sum((margin[dec] > 0) == (bal[dec] > 0)))
    est = wilson(k, n) if n else Estimate.point(float("nan"), method="no decided item")
    return Precondition(
        "the model's choices follow the evidence (accuracy against the evidence balance on "
        "decided items, Wilson interval above 1/2)",
        bool(n and est.low > 0.5),
        f"accuracy {k}/{n} = {est.value:.2f} [{est.low:.2f}, {est.high:.2f}]",
    )
