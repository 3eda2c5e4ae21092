"""cslm refuses complex scores and accuracies with a ValueError naming the argument (found
by the contract fuzz of issue #59: a TypeError/ValueError from inside jnp before)."""

from __future__ import annotations

import numpy as np
import pytest

import jaxlab.cslm as cslm


def test_complex_scores_and_accuracies_are_refused():
    correct = np.array([[True, False], [False, True]])
    scores = np.array([[0.1, 0.9], [0.8, 0.2]])
    # by hand: item 0 picks sample 1 (wrong), item 1 picks sample 0 (wrong)
    assert cslm.best_of_k(correct, scores, k=2).tolist() == [False, False]
    with pytest.raises(ValueError, match="scores: expected real values"):
        cslm.best_of_k(correct, scores + 1j, k=2)
    acc = np.array([0.2, 0.6, 0.9])
    assert np.isfinite(float(cslm.min_budget(acc, (8, 16, 32), 0.5)))
    with pytest.raises(ValueError, match="accuracy: expected real values"):
        cslm.min_budget(acc + 1j, (8, 16, 32), 0.5)


class _Tok:
    chat_template = None

    def encode(self, text, add_bos=True):
        return [ord(c) % 7 for c in text]


def test_text_functions_refuse_non_text_naming_the_argument():
    # found when every cslm function was declared to the fuzz (issue #59)
    import jax

    task = cslm.make_task("addition", 3, key=jax.random.key(0))
    assert cslm.extract_answer("so the answer is 42", "int") == 42
    # an array [["int"]] compared equal to "int" and was read as the kind before
    with pytest.raises(ValueError, match="kind: expected 'int' or 'list'"):
        cslm.extract_answer("so the answer is 42", np.array([["int"]]))
    assert "Proposed answer: 7" in cslm.verification_prompt(task, 7)
    assert "Proposed answer: none" in cslm.verification_prompt(task, None)
    for bad in (7.5, "abc", np.array([[7]])):  # named `answer` (format_answer's) before
        with pytest.raises(ValueError, match="candidate: expected an int or a tuple"):
            cslm.verification_prompt(task, bad)
    assert cslm.prompt_ids(_Tok(), "2+2?") == [ord(c) % 7 for c in "Question: 2+2?\nReasoning:"]
    for bad in (None, np.array([["2+2?"]]), "  "):  # "Question: None" was encoded before
        with pytest.raises(ValueError, match="question: expected"):
            cslm.prompt_ids(_Tok(), bad)
