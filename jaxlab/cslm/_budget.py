"""Token budgets: accuracy(n, B) from one generation per item.

Each item is generated once with the largest budget. For a budget B the reasoning is cut
after its first B tokens, the answer cue "\\nAnswer:" is appended, and the candidate
answers are scored as continuations with `jaxlab.lm.score` (option log-likelihoods). The
item counts as solved at B when the true answer is the most likely candidate. So a grid
of budgets costs one generation and one scoring pass per distinct truncation, not one
generation per budget. Truncations past the end of a generation that stopped early are the
same text and are scored once.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np

from .. import lm
from .._core import (
    as_array,
    check_ids,
    check_instance,
    check_nonnegative_int,
    check_positive_int,
    check_strings,
    progress_bar,
)
from ._answers import Answer, format_answer

__all__ = [
    "ANSWER_CUE",
    "answer_continuation",
    "budget_accuracy",
    "budget_scores",
    "check_budgets",
    "forced_answer_prompts",
    "generate_reasoning",
    "prompt_ids",
    "truncated_reasoning",
]

ANSWER_CUE = "\nAnswer:"
"""The cue appended after the (cut) reasoning before an answer is scored (`budget_scores`'
default `cue`)."""


def check_budgets(budgets: int | Sequence[int]) -> tuple[int, ...]:
    """Validate a budget grid: a non-empty, strictly increasing sequence of ints >= 0
    (0: the answer forced straight after the question, no reasoning)."""
    if not isinstance(budgets, int | np.integer) and (
        isinstance(budgets, str | bytes) or not hasattr(budgets, "__iter__")
    ):
        raise ValueError(f"budgets: expected a sequence of token budgets, received {budgets!r}")
    values = [budgets] if isinstance(budgets, int | np.integer) else list(budgets)
    if not values:
        raise ValueError("budgets: expected a non-empty list of token budgets, received []")
    out = tuple(check_nonnegative_int("budgets", b) for b in values)
    if any(b >= c for b, c in zip(out, out[1:], strict=False)):
        raise ValueError(f"budgets: expected strictly increasing values, received {list(out)}")
    return out


def prompt_ids(tokenizer: lm.Tokenizer, question: str) -> list[int]:
    """Token ids of `question` as one user turn (chat template), or "Question: ...\\nAnswer
    with reasoning:\\n" for a model without a chat template (a base model).

    `question` is a non-empty string (anything else raises a `ValueError` naming it)."""
    check_instance("question", question, str)
    if not question.strip():
        raise ValueError(f"question: expected a non-empty string, received {question!r}")
    if tokenizer.chat_template:
        text = tokenizer.apply_chat_template([{"role": "user", "content": question}])
    else:
        text = f"Question: {question}\nReasoning:"
    return tokenizer.encode(text)


def answer_continuation(answer: Answer) -> str:
    """The scored continuation of a candidate answer after the cue: " 42\\n"."""
    return f" {format_answer(answer)}\n"


def _ids(name: str, ids, n: int | None = None) -> list[int]:
    """A 1-D sequence of integer token ids in [0, n) (>= 0 when n is None; not a string,
    no floats or booleans)."""
    arr = check_ids(name, ids, n, what="token ids")
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D id sequence, received shape {arr.shape}")
    return arr.tolist()


def _id_lists(name: str, rows, model, *, nonempty: bool = True) -> list[list[int]]:
    """N token-id lists (a list of lists or an (N, L) array), ids in the model's
    vocabulary (never wrapped); `nonempty`: every list holds at least one id."""
    if not isinstance(model, lm.Transformer):
        raise ValueError(
            f"model: expected a jaxlab.lm.Transformer, received {type(model).__name__}"
        )
    if rows is None or isinstance(rows, str | bytes) or not hasattr(rows, "__len__"):
        raise ValueError(f"{name}: expected a sequence of token-id lists, received {rows!r:.60}")
    out = [_ids(name, r, model.config.vocab_size) for r in rows]
    if not out:
        raise ValueError(f"{name}: expected a non-empty list of token lists, received []")
    if nonempty and any(not r for r in out):
        raise ValueError(f"{name}: expected non-empty token lists, received an empty one")
    return out


def truncated_reasoning(generated: Sequence[int], budget: int) -> list[int]:
    """The first `budget` reasoning tokens (all of them if the generation is shorter).

    `generated` integer token ids >= 0, `budget` an integer >= 0 (0: none; else a
    `ValueError` naming the argument)."""
    budget = check_nonnegative_int("budget", budget)
    return _ids("generated", generated)[:budget]


def forced_answer_prompts(
    prompt: Sequence[int], generated: Sequence[int], budgets: Sequence[int], cue: Sequence[int]
) -> list[list[int]]:
    """prompt + reasoning cut at B + cue, for every budget B of the grid.

    **Arguments:**

    - `prompt`: the question's token ids.
    - `generated`: the reasoning token ids (stop token removed).
    - `budgets`: increasing budgets (>= 0; 0: no reasoning).
    - `cue`: token ids of the answer cue (`ANSWER_CUE` encoded without BOS).

    Token ids are integers >= 0 (a string, floats or negative ids raise a `ValueError`
    naming the argument).

    **Returns:** one token list per budget.
    """
    budgets = check_budgets(budgets)
    prompt, generated, cue = _ids("prompt", prompt), _ids("generated", generated), _ids("cue", cue)
    if not list(prompt):
        raise ValueError("prompt: expected a non-empty token list, received []")
    return [list(prompt) + truncated_reasoning(generated, b) + list(cue) for b in budgets]


def generate_reasoning(
    model: lm.Transformer,
    tokenizer: lm.Tokenizer,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    key: jax.Array,
    sampler=lm.Greedy(),
    batch_size: int = 16,
    progress: bool = False,
) -> list[list[int]]:
    """Generate one reasoning continuation per prompt (batched, left-padded, KV cache).

    **Arguments:**

    - `model`, `tokenizer`: from `jaxlab.lm.load`.
    - `prompts`: N non-empty prompt token lists (e.g. `prompt_ids`; ids in the model's
      vocabulary, never wrapped).
    - `max_new_tokens`: the largest budget.
    - `key`: PRNG key (batch b samples with `fold_in(key, b)`).
    - `sampler`: `lm.Greedy()` or `lm.Sample(...)`.
    - `batch_size`: rows per compiled batch (the last batch is padded by repetition, so
      one shape compiles).
    - `progress`: show a progress bar over batches.

    **Returns:** N lists of generated ids, cut before the first stop token.
    """
    max_new_tokens = check_positive_int("max_new_tokens", max_new_tokens)
    batch_size = check_positive_int("batch_size", batch_size)
    prompts = _id_lists("prompts", prompts, model)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    stops = set(tokenizer.stop_ids)
    out: list[list[int]] = [[] for _ in prompts]
    starts = range(0, len(order), batch_size)
    for b, s in enumerate(
        progress_bar(starts, total=len(starts), desc="generate", enabled=progress)
    ):
        idx = order[s : s + batch_size]
        batch = [list(prompts[i]) for i in idx]
        batch += [batch[0]] * (batch_size - len(batch))
        gen = lm.generate(
            model,
            batch,
            max_new_tokens=max_new_tokens,
            sampler=sampler,
            stop_tokens=tokenizer.stop_ids,
            pad_id=tokenizer.pad_id,
            key=jax.random.fold_in(key, b),
        )
        toks, lengths = np.asarray(gen.tokens), np.asarray(gen.lengths)
        for r, i in enumerate(idx):
            row = toks[r, : lengths[r]].tolist()
            cut = next((j for j, t in enumerate(row) if t in stops), len(row))
            out[i] = row[:cut]
    return out


def budget_scores(
    model: lm.Transformer,
    tokenizer: lm.Tokenizer,
    prompts: Sequence[Sequence[int]],
    generated: Sequence[Sequence[int]],
    budgets: Sequence[int],
    options: Sequence[Sequence[str]],
    *,
    cue: str = ANSWER_CUE,
    batch_size: int = 8,
) -> np.ndarray:
    """Log-likelihood of each candidate answer after the reasoning is cut at each budget.

    **Arguments:**

    - `model`, `tokenizer`: the model that generated the reasoning.
    - `prompts`: N non-empty prompt token lists (ids in the model's vocabulary).
    - `generated`: N reasoning token lists (from `generate_reasoning`; ids in the
      model's vocabulary).
    - `budgets`: increasing budgets B (>= 0; 0: no reasoning).
    - `options`: N lists of K candidate continuations (`answer_continuation`), the same K
      for every item.
    - `cue`: the text that forces the answer.
    - `batch_size`: items per `lm.score` batch.

    **Returns:** (N, len(budgets), K) float64 log p(option | prompt + reasoning[:B] + cue).
    Truncations that coincide (a generation shorter than B) are scored once.
    """
    budgets = check_budgets(budgets)
    prompts = _id_lists("prompts", prompts, model)
    generated = _id_lists("generated", generated, model, nonempty=False)
    if isinstance(options, str | bytes):
        raise ValueError(f"options: expected N lists of continuations, received {options!r:.60}")
    options = [check_strings("options", o) for o in options]
    if len(generated) != len(prompts) or len(options) != len(prompts):
        raise ValueError(
            f"prompts, generated, options: expected equal non-empty lengths, "
            f"received {len(prompts)}, {len(generated)}, {len(options)}"
        )
    ks = {len(o) for o in options}
    if len(ks) != 1 or 0 in ks:
        raise ValueError(
            f"options: expected the same non-zero number of options per item, "
            f"received counts {sorted(ks)}"
        )
    cue_ids = tokenizer.encode(cue, add_bos=False)
    rows: dict[tuple[int, int], int] = {}
    texts, conts = [], []
    for i, (p, g) in enumerate(zip(prompts, generated, strict=True)):
        for b in budgets:
            length = min(b, len(g))
            if (i, length) not in rows:
                rows[(i, length)] = len(texts)
                texts.append(list(p) + list(g[:length]) + cue_ids)
                conts.append(list(options[i]))
    scores = lm.score(model, tokenizer, texts, conts, batch_size=batch_size).sum
    out = np.zeros((len(prompts), len(budgets), ks.pop()), np.float64)
    for i, g in enumerate(generated):
        for j, b in enumerate(budgets):
            out[i, j] = scores[rows[(i, min(b, len(g)))]]
    return out


def budget_accuracy(scores: np.ndarray, *, true_index: int = 0) -> np.ndarray:
    """Solved-or-not per item and budget: the true option scores strictly above every other.

    **Arguments:**

    - `scores`: (..., K) option log-likelihoods (e.g. from `budget_scores`).
    - `true_index`: position of the true answer among the options (an integer in [0, K)).

    NaN/inf scores raise a `ValueError` naming `scores`.

    **Returns:** (...) bool.
    """
    s = np.asarray(as_array("scores", scores, finite=True), np.float64)
    true_index = check_nonnegative_int("true_index", true_index)
    if s.ndim < 1 or s.shape[-1] < 2:
        raise ValueError(f"scores: expected (..., K) with K >= 2 options, received {s.shape}")
    if not 0 <= true_index < s.shape[-1]:
        raise ValueError(f"true_index: expected in [0, {s.shape[-1]}), received {true_index}")
    others = np.delete(s, true_index, axis=-1)
    return s[..., true_index] > others.max(axis=-1)
