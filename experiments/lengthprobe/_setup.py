"""Shared set-up of the lengthprobe experiments: the cached completion sets and states.

Per model, the prompts of every family are drawn from the config's key, completed greedily
by `jaxlab.lengthprobe.generate_completions` (resumable batches) and their residual states
stored by `completion_states` (two `lm.collect` stores), all under
`$JAXLAB_CACHE_DIR/lengthprobe/<model>-<hash>` where the hash covers the model's pinned
weight wheels, the prompts, the budget, the layers and the code version. A run whose cache
is complete loads no model.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import time

import jax
import numpy as np

from experiments._harness import Estimate, cache_dir, log, model_params, model_sha256
from jaxlab import TqdmProgress, interp, lm, write_json
from jaxlab import lengthprobe as lp

CODE_VERSION = "lengthprobe-v1"

CAVEAT = (
    "Small open models (SmolLM2-135M and Qwen2.5-Coder-0.5B here; the paper used three 7-8B "
    "models), 4-bit GGUF weights dequantised to float32, greedy decoding, 8 prompts per "
    "family (QUICK): larger models and samples may behave differently."
)


@dataclasses.dataclass(frozen=True)
class CacheConfig:
    """Models, families and sizes of the cached completion sets (QUICK defaults)."""

    models: tuple[str, ...] = ("smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct")
    families: tuple[str, ...] = tuple(lp.FAMILIES)
    items: int = 8
    max_new_tokens: int = 160
    batch_size: int = 8
    n_layers_stored: int = 8  # evenly spaced layers, first to last
    # (model, items, max_new_tokens, batch_size) overrides: on the shared 2-core VM (load
    # ~12) a Qwen-0.5B batch of 8 x 128 tokens took ~4 min, a SmolLM2 16 x 192 one ~10 min.
    budgets: tuple[tuple[str, int, int, int], ...] = (("qwen2.5-coder-0.5b-instruct", 8, 128, 8),)

    def budget(self, model: str) -> tuple[int, int, int]:
        """(prompts per family, max new tokens, batch size) of `model`."""
        for m, items, new, batch in self.budgets:
            if m == model:
                return items, new, batch
        return self.items, self.max_new_tokens, self.batch_size


FULL_CACHE = {
    "models": (
        "smollm2-135m-instruct",
        "gemma3-270m",
        "qwen2.5-coder-0.5b-instruct",
        "qwen2.5-coder-1.5b-instruct",
    ),
    "items": 200,
    "max_new_tokens": 512,
    "batch_size": 32,
    "n_layers_stored": 64,
    "budgets": (),
}


#: TINY (the smoke tier): SmolLM2 alone, 6 prompts of two synthetic families and one natural
#: one (each family one batch of 6; most completions end within 48 tokens, so every probe,
#: baseline and per-family read-out has complete completions), 2 stored layers. The three
#: experiments share these settings, so they share one tiny cache.
TINY_CACHE = {
    "models": ("smollm2-135m-instruct",),
    "families": ("repeat_word", "list_items", "paragraph_summary"),
    "items": 6,
    "max_new_tokens": 48,
    "batch_size": 6,
    "n_layers_stored": 2,
    "budgets": (),
}


def full_work(config: CacheConfig) -> float:
    """Model work of the cache: parameters x prompts x tokens (prompt ~150 + budget), twice
    (generation, states)."""
    total = 0.0
    for m in config.models:
        items, new, _ = config.budget(m)
        total += model_params(m) * len(config.families) * items * 2 * (150 + new)
    return total


def short(model: str) -> str:
    """Short model tag for metric names."""
    return model.split("-")[0] if model.startswith("smollm") else model.split("-instruct")[0]


@functools.cache
def _tokenizer_and_config(name: str) -> tuple[lm.Tokenizer, lm.LMConfig]:
    card = lm.describe(name)
    return card.tokenizer, card.config


def stored_layers(name: str, count: int) -> tuple[int, ...]:
    """`count` evenly spaced layer indices of model `name` (all layers if it has fewer)."""
    n = _tokenizer_and_config(name)[1].n_layers
    return tuple(sorted({int(round(v)) for v in np.linspace(0, n - 1, min(count, n))}))


@dataclasses.dataclass
class ModelData:
    """One model's cached data: prompts, completions and the two state stores."""

    model: str
    prompts: list[lp.CompletionPrompt]
    completions: lp.CompletionSet
    last: lm.ActivationStore
    generated: lm.ActivationStore
    layers: tuple[int, ...]


def model_data(config: CacheConfig, model: str, key: jax.Array) -> ModelData:
    """Build (or read) the completion set and states of one model."""
    tok, _ = _tokenizer_and_config(model)
    items, max_new, batch = config.budget(model)
    prompts = [
        p
        for i, f in enumerate(config.families)
        for p in lp.make_prompts(f, items, key=jax.random.fold_in(key, i))
    ]
    ids = [lp.encode_prompt(tok, p.text) for p in prompts]
    layers = stored_layers(model, config.n_layers_stored)
    h = hashlib.sha256(
        json.dumps(
            {
                "model": [model, model_sha256(model)],
                "prompts": [[p.family, p.text] for p in prompts],
                "max_new": max_new,
                "batch": batch,
                "code": CODE_VERSION,
            },
            sort_keys=True,
        ).encode()
    ).hexdigest()[:16]
    folder = cache_dir("lengthprobe", f"{short(model)}-{h}")
    cset, last, gen = cached_generation(
        folder,
        model,
        ids,
        [p.family for p in prompts],
        max_new_tokens=max_new,
        batch_size=batch,
        key=jax.random.fold_in(key, 10_000),
        layers=layers,
        desc=f"lengthprobe {short(model)} completions",
    )
    return ModelData(model, prompts, cset, last, gen, layers)


def cached_generation(
    folder, model: str, ids, families, *, max_new_tokens, batch_size, key, layers, desc
) -> tuple[lp.CompletionSet, lm.ActivationStore, lm.ActivationStore]:
    """Greedy completions of `ids` and their prompt-last / generated states at `layers`,
    read from `folder` (under a content hash the caller chose) or built there (resumable);
    the model is loaded only for what is missing. Returns (set, last, generated)."""
    done = folder / "completions.json"
    states = folder / ("states-" + "-".join(map(str, layers)))
    net = None
    if done.exists():
        cset = lp.CompletionSet.from_json(json.loads(done.read_text()))
    else:
        t0 = time.perf_counter()
        net, tok = lm.load(model, mesh="auto")
        cset = lp.generate_completions(
            net,
            tok,
            ids,
            families=families,
            max_new_tokens=max_new_tokens,
            path=folder / "batches",
            key=key,
            batch_size=batch_size,
            progress=TqdmProgress(desc=desc),
        )
        write_json(done, cset.to_json())
        log.info("%s: %d completions in %.0f s", desc, len(cset), time.perf_counter() - t0)
    try:
        last = lm.ActivationStore(states / "prompt_last")
        gen = lm.ActivationStore(states / "generated")
    except ValueError:
        if net is None:
            net, _ = lm.load(model, mesh="auto")
        t0 = time.perf_counter()
        last, gen = lp.completion_states(
            net, cset, layers=layers, path=states, progress=TqdmProgress(desc="states")
        )
        log.info("%s: states in %.0f s", desc, time.perf_counter() - t0)
    return cset, last, gen


def layer_stack(store: lm.ActivationStore, layers) -> np.ndarray:
    """(L, n, d) float32 array of the store's residual columns, in `layers` order."""
    return np.stack([np.asarray(store.array("resid_post", i), np.float32) for i in layers])


def to_tokens(log_pred, max_new_tokens: int) -> np.ndarray:
    """Token counts of log1p predictions, read as at most 10x the token budget: a wild
    out-of-fold extrapolation (a ridge probe fitted on fewer token rows than dimensions, as
    at the smoke tier's size, predicted log1p lengths of +-600) would overflow `expm1`."""
    p = np.asarray(log_pred)
    return np.expm1(np.minimum(p, np.asarray(np.log1p(10 * max_new_tokens), p.dtype)))


def oof(fit, folds: np.ndarray) -> np.ndarray:
    """Out-of-fold predictions of a baseline `fit(train_mask) -> (n,) predictions`."""
    out = np.zeros(folds.shape[0])
    for f in np.unique(folds):
        test = folds == f
        out[test] = fit(~test)[test]
    return out


if __name__ == "__main__":  # build the QUICK cache: python -m experiments.lengthprobe._setup
    import logging
    import sys

    logging.basicConfig(level=logging.INFO)
    for m in sys.argv[1:] or CacheConfig().models:  # optional model names: one process each
        t0 = time.perf_counter()
        d = model_data(CacheConfig(), m, jax.random.key(0))
        print(
            m,
            f"{time.perf_counter() - t0:.0f} s",
            len(d.completions),
            d.generated.n_tokens,
            dict(zip(*np.unique(d.completions.reasons, return_counts=True), strict=True)),
        )


def spearman_gap(y, p, q, *, weights=None):
    """Spearman(y, p) - Spearman(y, q): the gain of predictor p over q (bootstrap metric)."""
    return interp.spearman(y, p, weights=weights) - interp.spearman(y, q, weights=weights)


def boot_estimate(value, low, high, *, n: int, level: float = 0.95, units: str = "prompts"):
    """An interval of jaxlab's percentile bootstrap (`interp.bootstrap_ci`,
    `lengthprobe.length_metrics`) as an `Estimate`: those resample whole prompts (groups)
    and evaluate on masked rows, which the harness's `bootstrap` does not; `n` the units
    resampled (at least 1)."""
    return Estimate(
        float(value),
        float(low),
        float(high),
        level,
        f"percentile bootstrap over {units} (jaxlab.interp)",
        max(int(n), 1),
    )


def generated_rows(d: ModelData) -> dict[str, np.ndarray]:
    """The generated-state rows of complete (not truncated) completions: their index in the
    store, completion row, family id, position in the completion and log1p remaining."""
    cs, st = d.completions, d.generated
    keep = ~cs.truncated[st.text_index]
    rows = np.flatnonzero(keep)
    ti = np.asarray(st.text_index[rows], np.int64)
    pos = np.asarray(st.positions[rows], np.int64) - cs.prompt_lengths[ti]
    rem = lp.remaining_length(cs, ti, st.positions[rows])
    return {
        "rows": rows,
        "text_index": ti,
        "family": cs.family_ids[ti],
        "position": pos,
        "remaining": rem,
        "y": np.log1p(rem).astype(np.float32),
    }
