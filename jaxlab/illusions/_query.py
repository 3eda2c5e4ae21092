"""Questions about one shared context, scored as options of `jaxlab.lm.score`.

Every question about a context (the statements of one presentation, one sequence, one
event pair) becomes part of the continuation: option = question + answer, so all
questions of a context share one prompt KV cache, and the two options of a question
differ only in the answer (the question's tokens cancel in their comparison). Models
with a chat template see the context and question as one user turn and the answer as
the assistant's reply; base models see "Question: ...\\nAnswer: ...".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from .._core import as_array, check_positive_int, check_strings

__all__ = ["Query", "Layout", "layout_queries", "query_logliks"]

_MARK = "\u241f"  # a placeholder that no template or text contains


@dataclasses.dataclass(frozen=True)
class Query:
    """One question about a context and its candidate answers.

    **Attributes:** `question` (str); `answers` (tuple of str, >= 2); `values` (tuple of
    float, optional): the number each answer stands for (counts, ratings).
    """

    question: str
    answers: tuple[str, ...]
    values: tuple[float, ...] = ()

    def __post_init__(self):
        if not isinstance(self.question, str) or not self.question:
            raise ValueError(f"question: expected a non-empty string, received {self.question!r}")
        if (
            isinstance(self.answers, str)
            or len(self.answers) < 2
            or not all(isinstance(a, str) and a for a in self.answers)
        ):
            raise ValueError(
                f"answers: expected at least two non-empty strings, received {self.answers!r}"
            )
        if self.values and len(self.values) != len(self.answers):
            raise ValueError(
                f"values: expected {len(self.answers)} numbers (one per answer), "
                f"received {len(self.values)}"
            )


@dataclasses.dataclass(frozen=True)
class Layout:
    """Scoring items for `jaxlab.lm.score` and where each query's options landed.

    **Attributes:** `prompts` (list of str); `continuations` (list of option lists);
    `where` (per query: (item index, first option index, number of answers)).
    """

    prompts: list[str]
    continuations: list[list[str]]
    where: list[tuple[int, int, int]]


def _frame(tokenizer, context: str) -> tuple[str, str, str]:
    """(prompt, text between question and answer, question prefix) for this tokenizer."""
    template = getattr(tokenizer, "chat_template", None)
    if template:
        rendered = tokenizer.apply_chat_template([{"role": "user", "content": context + _MARK}])
        head, tail = rendered.split(_MARK)
        return head, tail, "\n\n"
    return context, "\nAnswer: ", "\n\nQuestion: "


def layout_queries(
    tokenizer,
    contexts: Sequence[str],
    queries: Sequence[Sequence[Query]],
    *,
    max_options: int = 32,
) -> Layout:
    """Items for `lm.score`: each context's queries as options, at most `max_options` per
    item (a context with more is repeated over several items; a query never splits).

    **Arguments:**

    - `tokenizer`: a `jaxlab.lm.Tokenizer` (its chat template decides the framing) or
      None for the plain "Question/Answer" framing.
    - `contexts`: C context strings.
    - `queries`: C lists of `Query`.
    - `max_options`: options per scoring item (bounds the per-item KV-cache copies).

    **Returns:** `Layout`; `query_logliks(scores.sum, layout)` reads the answers back.
    """
    contexts = check_strings("contexts", contexts)
    if len(contexts) != len(queries):
        raise ValueError(
            f"queries: expected {len(contexts)} query lists (one per context), "
            f"received {len(queries)}"
        )
    if check_positive_int("max_options", max_options) < 2:
        raise ValueError(f"max_options: expected an int >= 2, received {max_options!r}")
    prompts: list[str] = []
    conts: list[list[str]] = []
    where: list[tuple[int, int, int]] = []
    for ci, (ctx, qs) in enumerate(zip(contexts, queries, strict=True)):
        if not isinstance(ctx, str) or not ctx:
            raise ValueError(f"contexts[{ci}]: expected a non-empty string, received {ctx!r}")
        if not qs:
            raise ValueError(f"queries[{ci}]: expected at least one Query, received none")
        prompt, between, lead = _frame(tokenizer, ctx)
        current: list[str] | None = None
        for q in qs:
            if not isinstance(q, Query):
                raise ValueError(f"queries[{ci}]: expected Query objects, received {q!r}")
            if len(q.answers) > max_options:
                raise ValueError(
                    f"max_options: a query has {len(q.answers)} answers, more than {max_options}"
                )
            if current is None or len(current) + len(q.answers) > max_options:
                prompts.append(prompt)
                current = []
                conts.append(current)
            where.append((len(prompts) - 1, len(current), len(q.answers)))
            current.extend(lead + q.question + between + a for a in q.answers)
    return Layout(prompts, conts, where)


def query_logliks(sums: Sequence[np.ndarray], layout: Layout) -> list[np.ndarray]:
    """Per query, the (n_answers,) log-likelihoods of its answers.

    **Arguments:** `sums`: `jaxlab.lm.score(...).sum` of `layout`'s items (finite, one
    value per continuation); `layout` a `Layout`. Anything else raises a `ValueError`.

    **Returns:** list (one per query, in `layout_queries` order) of float64 arrays.
    """
    if not isinstance(layout, Layout):
        raise ValueError(f"layout: expected a Layout, received {type(layout).__name__}")
    if isinstance(sums, str | bytes) or not hasattr(sums, "__len__"):
        raise ValueError(f"sums: expected a sequence of arrays, received {sums!r:.60}")
    for i, (s, c) in enumerate(zip(sums, layout.continuations, strict=False)):
        as_array(f"sums[{i}]", s, shape=(len(c),), finite=True)
    if len(sums) != len(layout.prompts):
        raise ValueError(
            f"sums: expected {len(layout.prompts)} items (the layout's), received {len(sums)}"
        )
    return [np.asarray(sums[i][j : j + n], np.float64) for i, j, n in layout.where]
