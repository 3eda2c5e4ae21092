"""Forced retraction events: cut point, phrase insertion, same-length filler and the jump of
the remaining-length estimate, each against a hand computation."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab import lengthprobe as lp
from tests.lengthprobe.test_lengthprobe_completions import _words

# _words vocabulary: 0 "The", 1 " sum", 2 " is", 3 " 12", 4 ".", 5 " Wait", 6 ",", 7 " no",
# 8 "\n", 9 "3", 10 " + ", 11 "4", 12 " Actually"


def test_cut_point_prefers_a_break_near_the_middle():
    # "The sum is 12.\n3 + 4\n3 + 4": prefixes ending in a break: k=5 ("."), 6 ("\n"),
    # 10 ("\n"); len 13, middle 6.5 -> k=6 (distance 0.5; 5 is 1.5 away, 10 is 3.5)
    seq = [0, 1, 2, 3, 4, 8, 9, 10, 11, 8, 9, 10, 11]
    assert lp.cut_point(seq, _words) == 6
    # fraction 0.8 -> target 10.4 -> k=10
    assert lp.cut_point(seq, _words, fraction=0.8) == 10
    # no break at all: the rounded fraction (clipped to [1, n - 1])
    assert lp.cut_point([9, 10, 11, 10, 11], _words) == 2  # round(2.5) = 2 (banker's)
    assert lp.cut_point([9, 10], _words, fraction=0.99) == 1
    # a tie (k=5 and k=7 both 1 away from 6) goes to the shorter prefix
    assert lp.cut_point([9, 10, 11, 10, 4, 9, 4, 9, 10, 11, 10, 11], _words, breaks=(".",)) == 5
    with pytest.raises(ValueError, match="tokens"):
        lp.cut_point([9], _words)
    with pytest.raises(ValueError, match="fraction"):
        lp.cut_point([9, 10], _words, fraction=1.0)
    with pytest.raises(ValueError, match="breaks"):
        lp.cut_point([9, 10], _words, breaks=("",))


def test_insert_phrase_positions():
    ids, before, after = lp.insert_phrase([100, 101, 102], [9, 10, 11, 4], 2, [5, 6, 7])
    assert ids == [100, 101, 102, 9, 10, 5, 6, 7]
    assert (before, after) == (4, 7)  # " + " (last kept token) and " no" (last phrase token)
    assert ids[before] == 10
    assert ids[after] == 7
    assert after - before == 3
    with pytest.raises(ValueError, match="cut"):
        lp.insert_phrase([1], [9, 10], 0, [5])
    with pytest.raises(ValueError, match="cut"):
        lp.insert_phrase([1], [9, 10], 3, [5])
    with pytest.raises(ValueError, match="phrase"):
        lp.insert_phrase([1], [9, 10], 1, [])


def test_same_length_filler():
    def encode(text):  # one id per word
        return [len(w) for w in text.split()]

    cands = ["a bb ccc", "one two three four", "x y z w v u"]
    assert lp.same_length_filler(encode, 4, cands) == [3, 3, 5, 4]  # exact match wins
    assert lp.same_length_filler(encode, 5, cands) == [1, 1, 1, 1, 1]  # truncated 6 -> 5
    assert lp.same_length_filler(encode, 2, cands) == [1, 2]  # no 2-word one: "a bb" of the first
    with pytest.raises(ValueError, match="candidates"):
        lp.same_length_filler(encode, 7, cands)
    with pytest.raises(ValueError, match="length"):
        lp.same_length_filler(encode, 0, cands)


def test_estimate_jump_by_hand():
    # log1p estimates of remaining tokens 9, 19, 4, 4 at four positions
    est = np.log1p([9.0, 19.0, 4.0, 4.0])
    jump = lp.estimate_jump(est, np.array([0, 2, 1]), np.array([1, 3, 3]))
    np.testing.assert_allclose(jump, [10.0, 0.0, -15.0], atol=1e-9)
    np.testing.assert_allclose(
        lp.estimate_jump([3.0, 1.0], np.array([0]), np.array([1]), log1p=False), [-2.0]
    )
    # a position-only estimate r(j) = L - 1 - j falls by exactly the phrase length
    L, before, n = 50, 20, 7
    r = L - 1 - np.arange(L, dtype=float)
    assert lp.estimate_jump(r, np.array([before]), np.array([before + n]), log1p=False)[0] == -n
    with pytest.raises(ValueError, match="after"):
        lp.estimate_jump(est, np.array([0]), np.array([4]))
    with pytest.raises(ValueError, match="before, after"):
        lp.estimate_jump(est, np.array([0, 1]), np.array([1]))
    with pytest.raises(ValueError, match="estimates"):
        lp.estimate_jump(np.zeros((2, 2)), np.array([0]), np.array([1]))
