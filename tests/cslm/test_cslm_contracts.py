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
    # found by the round-3 fuzz table (tests/test_fuzz_public_api.py): each was accepted
    # (NaN/inf, costs < 0, accuracies > 1), or failed with an unnamed TypeError/ValueError
    "accuracy_at_tokens-costs-nan": (
        "costs",
        lambda: C.accuracy_at_tokens([np.nan, 20.0], [0.3, 0.5], [30.0]),
    ),
    "accuracy_at_tokens-costs-str": ("costs", lambda: C.accuracy_at_tokens("ab", [0.3], [3.0])),
    "accuracy_at_tokens-accuracy-over-1": (
        "accuracy",
        lambda: C.accuracy_at_tokens([10.0, 20.0], [0.3, 1.5], [30.0]),
    ),
    "accuracy_at_tokens-grid-inf": (
        "grid",
        lambda: C.accuracy_at_tokens([10.0, 20.0], [0.3, 0.5], [np.inf]),
    ),
    "accuracy_at_tokens-grid-none": (
        "grid",
        lambda: C.accuracy_at_tokens([10.0, 20.0], [0.3, 0.5], None),
    ),
    "check_budgets-budgets-none": ("budgets", lambda: C.check_budgets(None)),
    "min_budget_ci-p-none": ("p", lambda: C.min_budget_ci(CORRECT, (1, 2, 4), None, key=K)),
    "min_budget_ci-p-str": ("p", lambda: C.min_budget_ci(CORRECT, (1, 2, 4), "abc", key=K)),
    "fit_growth-n-inf": ("n", lambda: C.fit_growth([1.0, np.inf, 4.0], [1.0, 2.0, 3.0])),
    "fit_growth-y-str": ("y", lambda: C.fit_growth([1.0, 2.0], "ab")),
    "fit_growth-sigma-str": (
        "sigma",
        lambda: C.fit_growth([1.0, 2.0], [1.0, 2.0], sigma="ab"),
    ),
    "fit_step_error-steps-inf": (
        "steps",
        lambda: C.fit_step_error([1.0, np.inf], [0.9, 0.8]),
    ),
    "fit_step_error-items-inf": (
        "items",
        lambda: C.fit_step_error([1.0, 2.0], [0.9, 0.8], items=[50.0, np.inf]),
    ),
    "fit_step_error-items-str": (
        "items",
        lambda: C.fit_step_error([1.0, 2.0], [0.9, 0.8], items="ab"),
    ),
    "generate_reasoning-prompts-over-vocab": (
        "prompts",
        lambda: C.generate_reasoning(_tiny(), _Tok(), [[1, 999]], max_new_tokens=2, key=K),
    ),
    "generate_reasoning-prompts-array": (
        "prompts",
        lambda: C.generate_reasoning(_tiny(), _Tok(), np.array([[1, -1]]), max_new_tokens=2, key=K),
    ),
    "budget_scores-generated-over-vocab": (
        "generated",
        lambda: C.budget_scores(_tiny(), _Tok(), [[1]], [[999]], (0, 1), [[" 1", " 2"]]),
    ),
    "budget_scores-options-str": (
        "options",
        lambda: C.budget_scores(_tiny(), _Tok(), [[1]], [[2]], (0, 1), "ab"),
    ),
}


def _tiny():
    from jaxlab import lm
    from tests.lm.lm_reference import tiny_llama

    return lm.Transformer.random(tiny_llama(vocab_size=13), key=jax.random.key(3))


class _Tok:
    stop_ids = (2,)
    pad_id = 0

    def encode(self, text, add_bos=True):
        return ([1] if add_bos else []) + [3 + ord(c) % 10 for c in text]


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_naming_the_argument(case):
    arg, call = CASES[case]
    with pytest.raises(ValueError, match=rf"(^|\W){arg}\W"):
        call()


def test_the_task_argument_is_still_accepted():
    task = _task()
    assert C.verify(task, f"Answer: {C.format_answer(task.answer)}")
    assert len(C.perturbed_answers(task, 2, key=K)) == 2


def test_answer_ids_takes_an_integer_array():
    """An (items, S) integer array is a valid `answers` (a `not answers` on it raised
    NumPy's ambiguous-truth-value error before)."""
    got = C.answer_ids(np.array([[3, 4, 3], [5, 5, 1]]))
    np.testing.assert_array_equal(got, [[0, 1, 0], [0, 0, 1]])
