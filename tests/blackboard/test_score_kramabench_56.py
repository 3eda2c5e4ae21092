"""Issue 56: `score_answer` against KramaBench's current metrics, transcribed here.

KramaBench: github.com/mitdbg/Kramabench, `benchmark/metrics.py` at commit 3d26983 (the
version with `higher_is_better` and `RAEScore`; `benchmark/evaluator.py` at 1c98f70 calls
`metric_factory(name)(predicted=..., target=...)` and scores 0 when a metric raises).
Transcribed below: `str_to_float` (top of the file), `F1.__call__`, `F1Approximate.__call__`
(its LLM paraphrase judge replaced by F1's string rule, as jaxlab does), `RAEScore.__call__`,
`try_convert_to_number` and `Success.__call__` (the end of the file). Each keeps
KramaBench's control flow, including its `except Exception` -> 0; `eval` of a predicted
string is `ast.literal_eval` here (no pair below needs more).
"""

from __future__ import annotations

import ast
import json

import numpy as np
import pytest

import jaxlab.blackboard as bb


def kb_str_to_float(num_string):
    if num_string.endswith("%"):
        return float(num_string.strip("%")) / 100
    return float(num_string)


def kb_f1(predicted, target):
    try:
        if isinstance(predicted, list) and isinstance(target, str):
            target = json.loads(target)
        if isinstance(predicted, str) and isinstance(target, list):
            try:
                predicted = json.loads(predicted)
            except json.JSONDecodeError:
                try:
                    predicted = ast.literal_eval(predicted)
                except Exception:
                    predicted = [i.strip() for i in predicted.split(",") if i.strip()]
        if isinstance(predicted, str) and isinstance(target, str):
            return 1.0 if predicted.strip().lower() == target.strip().lower() else 0.0
        if len(target) == 0:
            return float(len(predicted) == 0)
        matched_predicted = set()
        recall_cnt = 0
        for t in target:
            found = False
            for j, p in enumerate(predicted):
                if isinstance(t, str):
                    if t.strip().lower() == str(p).strip().lower():
                        found = True
                        matched_predicted.add(j)
                        break
                elif isinstance(t, (float, int)):
                    if isinstance(p, (float, int)):
                        pp = p
                    elif isinstance(p, str):
                        try:
                            pp = kb_str_to_float(p)
                        except Exception:
                            continue
                    else:
                        continue
                    denom = max(abs(t), 1e-12)
                    if abs(pp - t) / denom < 1e-6:
                        found = True
                        matched_predicted.add(j)
                        break
                else:
                    if p == t:
                        found = True
                        matched_predicted.add(j)
                        break
            if found:
                recall_cnt += 1
        recall = recall_cnt / len(target)
        precision = (len(matched_predicted) / len(predicted)) if predicted else 0.0
        if precision + recall == 0:
            return 0.0
        return 2 * precision * recall / (precision + recall)
    except Exception:
        return 0.0


def kb_f1_approximate(predicted, target):
    try:
        if isinstance(target, str):
            target = json.loads(target)
        if isinstance(predicted, str):
            try:
                predicted = json.loads(predicted)
            except json.JSONDecodeError:
                predicted = ast.literal_eval(predicted)
        predicted = list(predicted)
        if len(target) == 0:
            return float(len(predicted) == 0)
        matched_predicted = set()
        recall_cnt = 0
        for t in target:
            found = False
            for j, p in enumerate(predicted):
                if isinstance(t, str):
                    if t.strip().lower() == str(p).strip().lower():  # LLM judge in KB
                        found = True
                        matched_predicted.add(j)
                        break
                else:
                    if isinstance(p, (float, int)):
                        pp = p
                    elif isinstance(p, str):
                        try:
                            pp = kb_str_to_float(p)
                        except Exception:
                            continue
                    else:
                        continue
                    denom = max(abs(t), 1e-12)
                    if abs(pp - t) / denom <= 0.01:
                        found = True
                        matched_predicted.add(j)
                        break
            if found:
                recall_cnt += 1
        recall = recall_cnt / len(target)
        precision = len(matched_predicted) / len(predicted) if predicted else 0.0
        if precision + recall == 0:
            return 0.0
        return 2 * precision * recall / (precision + recall)
    except Exception:
        return 0.0


def kb_rae_score(predicted, target):
    try:
        if isinstance(predicted, str):
            predicted = kb_str_to_float(predicted)
        if isinstance(target, str):
            target = kb_str_to_float(target)
        rae = abs(predicted - target) / abs(target)
        return 1 / (1 + rae)
    except Exception:
        return 0.0


def kb_try_convert_to_number(value):
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            cleaned_value = value.strip()
            if cleaned_value.endswith("%"):
                cleaned_value = cleaned_value[:-1].strip()
            return kb_str_to_float(cleaned_value)
        except (ValueError, TypeError):
            return value
    return value


def kb_success(predicted, target):
    if predicted is None:
        return 0
    try:
        predicted_num = kb_try_convert_to_number(predicted)
        target_num = kb_try_convert_to_number(target)
        if isinstance(predicted_num, (int, float)) and isinstance(target_num, (int, float)):
            if predicted_num == target_num:
                return 1
            if isinstance(target_num, float) or isinstance(predicted_num, float):
                if target_num == 0:
                    return int(abs(predicted_num) < 1e-6)
                rea = abs(predicted_num - target_num) / abs(target_num)
                abs_diff = abs(predicted_num - target_num)
                larger_magnitude = max(abs(predicted_num), abs(target_num))
                return int(rea < 1e-6 or abs_diff < 1e-6 or (abs_diff < larger_magnitude * 1e-4))
            return 0
        elif isinstance(target, str) and isinstance(predicted, str):
            return int(predicted.strip().lower() == target.strip().lower())
        elif isinstance(target, str) and isinstance(predicted, (float, int)):
            raise ValueError("TypeError: Success Metric: unsupported argument types!")
        else:
            return int(predicted == target)
    except Exception:
        return 0


# the answer type's KramaBench metric (string_approximate: jaxlab scores it as Success)
KB = {
    "numeric_exact": kb_success,
    "string_exact": kb_success,
    "string_approximate": kb_success,
    "numeric_approximate": kb_rae_score,
    "list_exact": kb_f1,
    "list_approximate": kb_f1_approximate,
}

# (pred, truth, answer_type): designed around each rule and its edges
PAIRS = [
    # numeric_exact / Success: KramaBench's rounding tolerance
    (7.5201, 7.52, "numeric_exact"),
    (7.53, 7.52, "numeric_exact"),
    ("7.52", 7.52, "numeric_exact"),
    (42, 42, "numeric_exact"),
    (42.0, 42, "numeric_exact"),
    (41, 42, "numeric_exact"),
    ("42.0", 42, "numeric_exact"),
    ("abc", 42, "numeric_exact"),
    (None, 42, "numeric_exact"),
    (1e-7, 0.0, "numeric_exact"),
    (1e-5, 0, "numeric_exact"),
    (100000, 100001.0, "numeric_exact"),
    (123456789, 123456790, "numeric_exact"),
    ("50%", 50, "numeric_exact"),
    ("50%", 0.5, "numeric_exact"),
    (True, 1, "numeric_exact"),
    ([1, 2], [1, 2], "numeric_exact"),
    ("10.87", "10.87", "numeric_exact"),
    (10.87, "10.87", "numeric_exact"),
    ("Wollaston Beach", "Wollaston Beach", "numeric_exact"),
    (5, "Wollaston Beach", "numeric_exact"),
    # string_exact
    (" Leeds ", "leeds", "string_exact"),
    ("York", "Leeds", "string_exact"),
    ("3", "3.0", "string_exact"),
    (["H", "L", "N"], ["H", "L", "N"], "string_exact"),
    ("Bucks Creek", ["Bucks Creek", "Forest Street"], "string_exact"),
    ("a b", "a  b", "string_approximate"),
    # numeric_approximate / RAEScore
    (12.0, 10.0, "numeric_approximate"),
    (0.0, 9.8e-27, "numeric_approximate"),
    ("50%", 0.5, "numeric_approximate"),
    ("3.9668%", "3.96680%", "numeric_approximate"),
    ("-0.01", "-0.01", "numeric_approximate"),
    (-10.0, -5.0, "numeric_approximate"),
    ("nan!", 3.0, "numeric_approximate"),
    (None, 3.0, "numeric_approximate"),
    (1.0, 0.0, "numeric_approximate"),
    ([1.0, 2.0], [1.0, 2.0], "numeric_approximate"),
    # list_exact / F1
    (["a", "b"], ["a", "b"], "list_exact"),
    (["a", "x"], ["a", "b", "c"], "list_exact"),
    ([], ["a"], "list_exact"),
    ([], [], "list_exact"),
    (["a"], [], "list_exact"),
    (["a", "a"], ["a"], "list_exact"),
    (["a"], ["a", "a"], "list_exact"),
    (["a", "a", "b"], ["a", "a", "b"], "list_exact"),
    ([1, 2.0], ["1", "2"], "list_exact"),
    (["1", "2"], [1, 2.0], "list_exact"),
    (["50%"], [0.5], "list_exact"),
    ([0.0], [9.8e-27], "list_exact"),
    ('["a", "b"]', ["a", "b"], "list_exact"),
    ("['a', 'c']", ["a", "b"], "list_exact"),
    ("Bucks Creek, Pleasant Street", ["Bucks Creek", "Forest Street"], "list_exact"),
    (["a", "b"], '["a", "b"]', "list_exact"),
    ("M", "M", "list_exact"),
    (2007, 2007, "list_exact"),
    (3, [3], "list_exact"),
    ([3], 3, "list_exact"),
    ([[1, 2]], [[1, 2]], "list_exact"),
    ([None], ["None"], "list_exact"),
    # list_approximate / F1Approximate
    ([1.005, 2.0], [1.0, 2.0], "list_approximate"),
    ([1.02], [1.0], "list_approximate"),
    (["a", 3.0], ["A", 3.0], "list_approximate"),
    ("[1.0, 2.0]", [1.0, 2.0], "list_approximate"),
    (7, [7], "list_approximate"),
    (["x"], [[1]], "list_approximate"),
]


@pytest.mark.parametrize(("pred", "truth", "answer_type"), PAIRS)
def test_score_answer_equals_kramabench(pred, truth, answer_type):
    ref = float(KB[answer_type](pred, truth))
    assert bb.score_answer(pred, truth, answer_type) == pytest.approx(ref, abs=1e-12)


def test_the_issue_cases_by_hand():
    assert bb.score_answer(7.5201, 7.52, "numeric_exact") == 1.0  # was 0 (1e-9 tolerance)
    # F1 counts duplicates: recall 2/2 over the truth's copies, precision 1/2
    assert bb.score_answer(["a", "a"], ["a"], "list_exact") == pytest.approx(2 / 3)
    assert bb.score_answer(["a"], ["a", "a"], "list_exact") == 1.0  # sets: also 1.0
    assert bb.score_answer('["a", "b"]', ["a", "b"], "list_exact") == 1.0  # a string list
    assert bb.score_answer("50%", 0.5, "numeric_approximate") == 1.0
    # no floor on |truth|: a prediction of 0 for 9.8e-27 has relative error 1 -> 1/2
    assert bb.score_answer(0.0, 9.8e-27, "numeric_approximate") == pytest.approx(0.5)


def test_deviations_kept():
    # KramaBench divides by zero for a truth of 0 and scores 0 even for an exact 0
    assert kb_rae_score(0.0, 0.0) == 0.0
    assert bb.score_answer(0.0, 0.0, "numeric_approximate") == 1.0
    assert bb.score_answer(1.0, 0.0, "numeric_approximate") == 0.0
    # a non-finite score is 0 (KramaBench's formula gives nan for a nan prediction)
    assert np.isnan(kb_rae_score(float("nan"), 3.0))
    assert bb.score_answer(float("nan"), 3.0, "numeric_approximate") == 0.0
    # a Python expression is never evaluated: "2*3" is one comma-split item, not 6
    assert bb.score_answer("2*3", ["6"], "list_exact") == 0.0


def test_numpy_answers_are_read_as_their_json_values():
    assert bb.score_answer(np.float64(7.5201), 7.52, "numeric_exact") == 1.0
    assert bb.score_answer(np.int64(3), 3, "numeric_exact") == 1.0
    assert bb.score_answer(np.array([1.0, 2.0]), [1.0, 2.0], "list_exact") == 1.0
    assert bb.score_answer([np.str_("a")], ["a"], "list_exact") == 1.0


def test_values_that_do_not_fit_their_type_never_raise():
    # shapes of real KramaBench answers whose value does not fit the declared type
    # (e.g. numeric_exact with a file name or a list, list_exact with a scalar,
    # numeric_approximate with a list)
    odd = [
        ("SILSO/SN_y_tot_V2.0.csv", "numeric_exact"),
        ([159.0, 76.4], "numeric_exact"),
        ("0.4688", "numeric_exact"),
        (["Location", "Measure"], "string_approximate"),
        (["H", "L", "N"], "string_exact"),
        ("M", "list_exact"),
        (2007, "list_exact"),
        ("[9269.8635, 9266.908]", "list_exact"),
        ("Expected answer: ['Longitude (X)', 'lng']", "list_exact"),
        ([2689.9, 2624.8], "numeric_approximate"),
        ("3.96680%", "numeric_approximate"),
        ({"a": 1}, "list_approximate"),
    ]
    for truth, kind in odd:
        for pred in (truth, "wrong", None, 0, [], [1, "x"], float("nan")):
            s = bb.score_answer(pred, truth, kind)
            assert 0.0 <= s <= 1.0
            assert s == pytest.approx(
                float(KB[kind](pred, truth)) if np.isfinite(KB[kind](pred, truth)) else 0.0
            )
