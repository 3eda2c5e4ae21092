"""Issue #59 item 2 (cslm): every public function refuses bad input with a ValueError
naming the argument (each case below was accepted silently, or failed with an unnamed or
deep error, before the validation layer)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxlab import cslm as C

K = jax.random.key(0)
FAMILY = next(iter(C.FAMILIES))
SCORES = np.random.default_rng(0).standard_normal((4, 3, 2))
CORRECT = np.random.default_rng(1).uniform(size=(6, 3)) > 0.4
IDS = np.array([[0, 1, 0], [1, 1, 2], [0, -1, 0], [2, 2, 2]])
OK = np.random.default_rng(2).uniform(size=(4, 3)) > 0.5


def _task():
    return C.make_task(FAMILY, 3, key=K)


CASES = {
    "truncated_reasoning-generated-str": ("generated", lambda: C.truncated_reasoning("abcdef", 2)),
    "truncated_reasoning-generated-float": (
        "generated",
        lambda: C.truncated_reasoning([1.5, 2.5], 2),
    ),
    "truncated_reasoning-generated-negative": (
        "generated",
        lambda: C.truncated_reasoning([-1, 2], 2),
    ),
    "forced_answer_prompts-prompt-str": (
        "prompt",
        lambda: C.forced_answer_prompts("ab", [1, 2], [1], [3]),
    ),
    "forced_answer_prompts-cue-str": (
        "cue",
        lambda: C.forced_answer_prompts([1], [1, 2], [1], "ab"),
    ),
    "forced_answer_prompts-generated-float": (
        "generated",
        lambda: C.forced_answer_prompts([1], [1.5, 2], [1], [3]),
    ),
    "forced_answer_prompts-prompt-negative": (
        "prompt",
        lambda: C.forced_answer_prompts([-1], [1, 2], [1], [3]),
    ),
    "budget_accuracy-scores-nan": (
        "scores",
        lambda: C.budget_accuracy(np.where(SCORES > 0.5, np.nan, SCORES)),
    ),
    "budget_accuracy-scores-str": ("scores", lambda: C.budget_accuracy("abc")),
    "budget_accuracy-true_index-bool": (
        "true_index",
        lambda: C.budget_accuracy(SCORES, true_index=True),
    ),
    "budget_accuracy-true_index-float": (
        "true_index",
        lambda: C.budget_accuracy(SCORES, true_index=0.5),
    ),
    "min_budget_ci-correct-nan": (
        "correct",
        lambda: C.min_budget_ci(np.where(CORRECT, np.nan, 1.0), (8, 16, 32), 0.5, key=K, n_boot=10),
    ),
    "min_budget_ci-correct-2": (
        "correct",
        lambda: C.min_budget_ci(CORRECT * 2.0, (8, 16, 32), 0.5, key=K, n_boot=10),
    ),
    "fit_step_error-steps-str": ("steps", lambda: C.fit_step_error("abcde", np.full(5, 0.5))),
    "option_confidence-scores-nan": (
        "scores",
        lambda: C.option_confidence(np.array([[0.0, np.nan]])),
    ),
    "option_confidence-scores-str": ("scores", lambda: C.option_confidence("abc")),
    "expected_calibration_error-bins-1e12": (
        "bins",
        lambda: C.expected_calibration_error([0.1, 0.8], [0.0, 1.0], bins=10**12),
    ),
    "majority_vote-ids-below-minus-1": (
        "ids",
        lambda: C.majority_vote(np.where(IDS == 2, -5, IDS), OK, 2),
    ),
    "majority_vote-ids-float": ("ids", lambda: C.majority_vote(IDS + 0.5, OK, 2)),
    "verifier_precision_recall-accept-float": (
        "accept",
        lambda: C.verifier_precision_recall([0.5, 0.2], [True, False]),
    ),
    "verifier_precision_recall-correct-2": (
        "correct",
        lambda: C.verifier_precision_recall([1, 0], [2, 0]),
    ),
    "make_task-family-list": ("family", lambda: C.make_task([FAMILY], 3, key=K)),
    "make_task-n-1e15": ("n", lambda: C.make_task("counting", 10**15, key=K)),
    "perturbed_answers-task-str": ("task", lambda: C.perturbed_answers("abc", 2, key=K)),
    "verify-task-str": ("task", lambda: C.verify("abc", "5")),
    "verification_prompt-task-str": ("task", lambda: C.verification_prompt("abc", None)),
    "format_answer-answer-dict": ("answer", lambda: C.format_answer({"a": 1})),
    "format_answer-answer-nan": ("answer", lambda: C.format_answer(np.nan)),
    "format_answer-answer-float": ("answer", lambda: C.format_answer(2.7)),
    "answer_continuation-answer-dict": ("answer", lambda: C.answer_continuation({"a": 1})),
    "answer_ids-answers-str": ("answers", lambda: C.answer_ids("abc")),
    "answer_ids-answers-float": ("answers", lambda: C.answer_ids([[1.5, 2]])),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_naming_the_argument(case):
    arg, call = CASES[case]
    with pytest.raises(ValueError, match=rf"(^|\W){arg}\W"):
        call()


def test_the_task_argument_is_still_accepted():
    task = _task()
    assert C.verify(task, f"Answer: {C.format_answer(task.answer)}")
    assert len(C.perturbed_answers(task, 2, key=K)) == 2
