"""Shared set-up of the P14 illusions experiments: cached option scores of the models.

Every model call is `jaxlab.lm.score` of the questions about one context (the statements
of one presentation, one sequence, one event pair), laid out by
`jaxlab.illusions.layout_queries`. Results are stored per chunk of contexts as `.npz` under
a content hash of everything that determines them (model GGUF SHA-256, the exact prompt
and option strings, code version) in `$JAXLAB_CACHE_DIR/illusions` (default
`~/.cache/jaxlab/illusions`): a killed build resumes at the next chunk, and a run whose
cache is complete makes no model call.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Sequence

import numpy as np

from experiments._harness import cache_dir, load_npz, log, model_sha256, save_npz
from experiments._harness import model_tag as short
from jaxlab import illusions as il
from jaxlab import lm, progress_bar

CODE_VERSION = "illusions-v1"  # bump when prompts, options or the scoring change

CAVEAT = (
    "Our models are small open models (SmolLM2-135M-Instruct and, where run, Gemma-3-270M / "
    "Qwen2.5-Coder-0.5B-Instruct; 4-bit GGUF weights dequantised to float32), read out by "
    "option likelihood; the paper studied larger LLMs, so a 'no' here says nothing about them."
)

#: statement orders per framing that issue #25 asks of QUICK illusions_correlation
ISSUE_ORDERS = 20


def orders_note(orders: int) -> str:
    """The QUICK reduction of illusions_correlation, stated in its claims ("" at >= 20)."""
    if orders >= ISSUE_ORDERS:
        return ""
    return (
        f"QUICK reduced for a shared 2-core machine: {orders} random statement orders per "
        f"framing, not the issue's {ISSUE_ORDERS} (scoring one order of the four framings "
        "took ~5 min for SmolLM2-135M and 8-14 min for Qwen2.5-Coder-0.5B at load 3-8, "
        f"2026-12-04, so {ISSUE_ORDERS} orders would take ~5 h)."
    )


@functools.cache
def tokenizer_of(name: str) -> lm.Tokenizer:
    """The model's tokenizer without loading its weights."""
    return lm.describe(name).tokenizer


def score_queries(
    pool: lm.Pool,
    model: str,
    contexts: Sequence[str],
    queries: Sequence[Sequence[il.Query]],
    *,
    tag: str,
    chunk: int = 4,
    max_options: int = 32,
    batch_size: int = 4,
) -> list[list[np.ndarray]]:
    """Per context, per query, the answers' log-likelihoods (cached per chunk of contexts).

    **Returns:** list (contexts) of lists (queries) of (n_answers,) float64 arrays.
    """
    tok = tokenizer_of(model)
    out: list[list[np.ndarray]] = []
    starts = range(0, len(contexts), chunk)
    for s in progress_bar(starts, desc=f"{tag} {short(model)}"):
        ctx, qs = list(contexts[s : s + chunk]), [list(q) for q in queries[s : s + chunk]]
        layout = il.layout_queries(tok, ctx, qs, max_options=max_options)
        h = hashlib.sha256(
            json.dumps(
                [model_sha256(model), layout.prompts, layout.continuations, CODE_VERSION]
            ).encode()
        ).hexdigest()[:20]
        path = cache_dir("illusions") / f"{tag}-{short(model)}-{h}.npz"
        cached = load_npz(path)
        flat = None if cached is None else cached.get("logliks")
        if flat is None:
            net, tok = pool[model]  # loaded on the first missing chunk
            t0 = time.perf_counter()
            sc = lm.score(net, tok, layout.prompts, layout.continuations, batch_size=batch_size)
            flat = np.concatenate(sc.sum)
            save_npz(path, {"logliks": flat})
            log.info("%s %s chunk %d: %.1f s", tag, model, s // chunk, time.perf_counter() - t0)
        offsets = np.cumsum([0] + [len(c) for c in layout.continuations])
        sums = [flat[offsets[i] : offsets[i + 1]] for i in range(len(layout.continuations))]
        per_query = il.query_logliks(sums, layout)
        k = 0
        for q in qs:
            out.append(per_query[k : k + len(q)])
            k += len(q)
    return out
