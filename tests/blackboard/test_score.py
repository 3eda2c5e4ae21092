"""KramaBench scoring and discovery metrics on toy cases."""

from __future__ import annotations

import pytest

import jaxlab.blackboard as bb


def test_exact_numbers_and_strings():
    assert bb.score_answer(42, 42, "numeric_exact") == 1.0
    assert bb.score_answer("42.0", 42, "numeric_exact") == 1.0
    assert bb.score_answer(41, 42, "numeric_exact") == 0.0
    assert bb.score_answer("abc", 42, "numeric_exact") == 0.0
    assert bb.score_answer(" Leeds ", "leeds", "string_exact") == 1.0
    assert bb.score_answer("York", "Leeds", "string_exact") == 0.0


def test_relative_error_score():
    assert bb.relative_error_score(10.0, 10.0) == 1.0
    assert bb.relative_error_score(12.0, 10.0) == pytest.approx(1 / 1.2)
    assert bb.relative_error_score(0.0, 10.0) == pytest.approx(0.5)
    assert bb.relative_error_score(-10.0, -5.0) == pytest.approx(1 / 2)
    assert bb.score_answer("nan", 3.0, "numeric_approximate") == 0.0
    assert bb.score_answer(None, 3.0, "numeric_approximate") == 0.0


def test_list_f1():
    assert bb.score_answer(["a", "b"], ["a", "b"], "list_exact") == 1.0
    # precision 1/2, recall 1/3 -> F1 = 2 * (1/6) / (5/6) = 0.4
    assert bb.score_answer(["a", "x"], ["a", "b", "c"], "list_exact") == pytest.approx(0.4)
    assert bb.score_answer([], ["a"], "list_exact") == 0.0
    # KramaBench's F1 compares a string truth with str(pred): "2" != str(2.0) = "2.0"
    assert bb.score_answer([1, 2.0], ["1", "2"], "list_exact") == pytest.approx(0.5)


def test_discovery_prf():
    assert bb.discovery_prf(["a"], ["a", "b"]) == pytest.approx((1.0, 0.5, 2 / 3))
    assert bb.discovery_prf(["a", "c"], ["a"]) == pytest.approx((0.5, 1.0, 2 / 3))
    assert bb.discovery_prf([], []) == (1.0, 1.0, 1.0)
    assert bb.discovery_prf(["a"], []) == (0.0, 0.0, 0.0)
    assert bb.discovery_prf([], ["a"]) == (1.0, 0.0, 0.0)


def test_bad_inputs():
    with pytest.raises(ValueError, match="answer_type"):
        bb.score_answer(1, 1, "fuzzy")
    # a truth that does not fit is scored as KramaBench scores it (0), never refused
    assert bb.relative_error_score(1.0, "abc") == 0.0
    assert bb.list_f1(["a"], "a") == 0.0
