"""Task families: determinism, answers against an independent re-derivation from the prompt
text, verifiers accept the truth and reject perturbations (property tests over keys)."""

from __future__ import annotations

import re

import jax
import pytest

from jaxlab import cslm

SIZES = (1, 2, 3, 5, 8)
KEYS = 25


def _numbers(text):
    return [int(x) for x in re.findall(r"\d+", text)]


def _oracle(task: cslm.Task):
    """The answer recomputed from the prompt text alone (no shared code with the generators)."""
    body = task.prompt.split(" Think step by step")[0]
    if task.family == "chain_sum":
        terms = re.findall(r"([+-]?)\s*(\d+)", body.removeprefix("Compute ").rstrip("."))
        return sum(-int(v) if s == "-" else int(v) for s, v in terms)
    if task.family == "addition":
        a, b = _numbers(body)
        return a + b
    if task.family == "multiplication":
        a, b = _numbers(body)
        return a * b
    if task.family == "sorting":
        return tuple(sorted(_numbers(body)))
    if task.family == "counting":
        target = re.search(r"'(\w+)'", body).group(1)
        words = body.split(": ", 1)[1].rstrip("?").split(", ")
        return words.count(target)
    if task.family == "tracking":
        holds = {p: int(b) for p, b in re.findall(r"(\w+) has ball (\d+)", body)}
        for p, q in re.findall(r"(\w+) and (\w+) swap balls", body):
            holds[p], holds[q] = holds[q], holds[p]
        return holds[re.search(r"Which ball does (\w+) have", body).group(1)]
    if task.family == "word_problem":
        count = int(re.search(r"has (\d+)", body).group(1))
        for verb, amount in re.findall(r"(gives away|gets) (\d+)", body):
            count += int(amount) if verb == "gets" else -int(amount)
        return count
    raise AssertionError(task.family)


@pytest.mark.parametrize("family", sorted(cslm.FAMILIES))
def test_family_answers_and_verifiers(family, getkey):
    key = getkey()
    for n in SIZES:
        tasks = cslm.make_tasks(family, n, KEYS, key=jax.random.fold_in(key, n))
        for t in tasks:
            assert t.family == family
            assert t.n == n
            assert t.answer == _oracle(t), t.prompt
            assert t.steps == cslm.FAMILIES[family].steps(n)
            truth = cslm.format_answer(t.answer)
            assert t.verify(f"Let me think.\nAnswer: {truth}")
            assert cslm.verify(t, f"... so the answer is {truth}.")
            assert not t.verify("I do not know.")
            for wrong in cslm.perturbed_answers(t, 5, key=getkey()):
                assert wrong != t.answer
                assert not t.verify(f"Answer: {cslm.format_answer(wrong)}")
        assert len({t.prompt for t in tasks}) > (1 if n > 1 else 0)


def test_sorting_distractors_are_sorted_near_misses(getkey):
    """A sorted answer gets only sorted distractors (order alone cannot reveal them), each
    a near miss: same length with one value off, or one element dropped or repeated."""
    moves = set()
    for n in (1, 2, 5, 9):
        for t in cslm.make_tasks("sorting", n, 6, key=getkey()):
            assert list(t.answer) == sorted(t.answer)
            for wrong in cslm.perturbed_answers(t, 3, key=getkey()):
                assert wrong != t.answer
                assert list(wrong) == sorted(wrong)
                assert abs(len(wrong) - len(t.answer)) <= 1
                if len(wrong) == len(t.answer):
                    assert sum(a != b for a, b in zip(wrong, t.answer, strict=True)) >= 1
                moves.add(len(wrong) - len(t.answer))
    assert moves == {-1, 0, 1}


def test_same_key_same_task(getkey):
    key = getkey()
    for family in cslm.FAMILIES:
        a = cslm.make_task(family, 4, key=key)
        assert a == cslm.make_task(family, 4, key=key)
        assert cslm.make_tasks(family, 4, 3, key=key)[:2] == cslm.make_tasks(family, 4, 2, key=key)


def test_sizes_are_sizes(getkey):
    t = cslm.make_task("addition", 4, key=getkey())
    assert all(len(str(x)) == 4 for x in _numbers(t.prompt.split(" Think")[0]))
    assert len(cslm.make_task("sorting", 7, key=getkey()).answer) == 7
    assert cslm.make_task("tracking", 5, key=getkey()).prompt.count("swap balls") == 5
    body = cslm.make_task("chain_sum", 6, key=getkey()).prompt.split(" Think")[0]
    assert body.count(" + ") + body.count(" - ") == 5


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("Answer: 42", "int", 42),
        ("answer = -7 because 3 - 10", "int", -7),
        ("5-3 is 2, then 2+4 is 6", "int", 6),
        ("First answer: 3. Final answer: 12, since...", "int", 12),
        ("no number here", "int", None),
        ("Answer: [3, 1, 2]", "list", (3, 1, 2)),
        ("I sort: [5, 4] -> [4, 5]", "list", (4, 5)),
        ("The answer is 1, 2, 3\nthen 9", "list", (1, 2, 3)),
        ("Answer: [] ", "list", ()),
        ("nothing", "list", None),
        ("Answer: 1,234", "int", 1),
    ],
)
def test_extract_answer_rules(text, kind, expected):
    assert cslm.extract_answer(text, kind) == expected


def test_bad_input(getkey):
    key = getkey()
    with pytest.raises(ValueError, match="^n:"):
        cslm.make_task("chain_sum", 0, key=key)
    with pytest.raises(ValueError, match="^family:"):
        cslm.make_task("nope", 2, key=key)
    with pytest.raises(ValueError, match="^n:"):
        cslm.make_task("tracking", 99, key=key)
    with pytest.raises(ValueError, match="^count:"):
        cslm.make_tasks("chain_sum", 2, 0, key=key)
    with pytest.raises(ValueError, match="^key:"):
        cslm.make_task("chain_sum", 2, key=3)
    with pytest.raises(ValueError, match="^kind:"):
        cslm.extract_answer("1", "float")
