"""Issue #59 item 2 (illusions): every public function refuses bad input with a
ValueError naming the argument (each case below was accepted silently, or failed with an
unnamed or deep error, before the validation layer)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxlab import illusions as I

K = jax.random.key(0)
DENS = np.random.default_rng(0).uniform(size=20)
ZA = np.random.default_rng(1).standard_normal((6, 5))
ZB = np.random.default_rng(2).standard_normal((6, 5))
FRAMING = next(iter(I.FRAMINGS))
Q = I.Query("Is it?", ("Yes", "No"))


class Chars:
    """A tokenizer without a chat template: one id per character."""

    chat_template = None

    def encode(self, s, add_bos=True):
        return list(range(len(s)))


def _layout():
    return I.layout_queries(Chars(), ["a"], [[Q]])


CASES = {
    "ablation-latents-str": ("latents", lambda: I.ablation(None, "abc", layer=1)),
    "ablation-latents-float": ("latents", lambda: I.ablation(None, [1.5], layer=1)),
    "ablation-latents-negative": ("latents", lambda: I.ablation(None, [-1], layer=1)),
    "ablation-layer-bool": ("layer", lambda: I.ablation(None, [1], layer=True)),
    "ablation-layer-float": ("layer", lambda: I.ablation(None, [1], layer=1.5)),
    "ablation-input_scale-nan": (
        "input_scale",
        lambda: I.ablation(None, [1], layer=1, input_scale=np.nan),
    ),
    "matched_latents-density-nan": (
        "density",
        lambda: I.matched_latents(np.where(DENS > 0.9, np.nan, DENS), [1, 2], key=K),
    ),
    "matched_latents-density-negative": (
        "density",
        lambda: I.matched_latents(-DENS, [1, 2], key=K),
    ),
    "matched_latents-density-str": ("density", lambda: I.matched_latents("abc", [1, 2], key=K)),
    "matched_latents-chosen-duplicates": ("chosen", lambda: I.matched_latents(DENS, [1, 1], key=K)),
    "causal_query-first-none": ("first", lambda: I.causal_query(None, "b", FRAMING)),
    "causal_query-first-int": ("first", lambda: I.causal_query(5, "b", FRAMING)),
    "causal_query-second-empty": ("second", lambda: I.causal_query("a", "", FRAMING)),
    "causal_query-framing-list": ("framing", lambda: I.causal_query("a", "b", [FRAMING])),
    "correlation_queries-traits-str": (
        "traits",
        lambda: I.correlation_queries(I.make_stimuli(key=K), traits="abc"),
    ),
    "make_stimuli-counts-bool": (
        "counts",
        lambda: I.make_stimuli(key=K, counts=((True, 8), (9, 4))),
    ),
    "framing_feature_shift-z_a-str": (
        "z_a",
        lambda: I.framing_feature_shift("abc", ZB, key=K, k=2, resamples=20),
    ),
    "framing_feature_shift-level-str": (
        "level",
        lambda: I.framing_feature_shift(ZA, ZB, key=K, k=2, resamples=20, level="0.9"),
    ),
    "layout_queries-contexts-str": (
        "contexts",
        lambda: I.layout_queries(Chars(), "abc", [[Q]] * 3),
    ),
    "query_logliks-sums-nan": (
        "sums",
        lambda: I.query_logliks([np.array([np.nan, 0.0])], _layout()),
    ),
    "query_logliks-sums-width": (
        "sums",
        lambda: I.query_logliks([np.array([0.0, 1.0, 2.0])], _layout()),
    ),
    "query_logliks-layout-str": ("layout", lambda: I.query_logliks([np.zeros(2)], "abc")),
    "Query-answers-str": ("answers", lambda: I.Query("q", "Yes")),
    "render_sequence-sequence-out-of-range": (
        "sequence",
        lambda: I.render_sequence("coin", [0, 5, 1]),
    ),
    "render_sequence-sequence-negative": (
        "sequence",
        lambda: I.render_sequence("coin", [0, -1, 1]),
    ),
    "render_sequence-sequence-dice-7": ("sequence", lambda: I.render_sequence("dice", [1, 7, 1])),
    "render_sequence-start-nan": ("start", lambda: I.render_sequence("walk", [0, 1], start=np.nan)),
    "render_sequence-start-str": ("start", lambda: I.render_sequence("walk", [0, 1], start="5")),
    "render_sequence-start-float": ("start", lambda: I.render_sequence("walk", [0, 1], start=2.5)),
    "streak_slope-run_lengths-negative": (
        "run_lengths",
        lambda: I.streak_slope([-1, 2, 3], [0.5, 0.4, 0.3]),
    ),
    "streak_slope-run_lengths-zero": (
        "run_lengths",
        lambda: I.streak_slope([0, 2, 3], [0.5, 0.4, 0.3]),
    ),
    "streak_slope-p_repeat-1.5": ("p_repeat", lambda: I.streak_slope([1, 2, 3], [1.5, 0.4, 0.3])),
    "streak_slope-p_repeat-negative": (
        "p_repeat",
        lambda: I.streak_slope([1, 2, 3], [-0.5, 0.4, 0.3]),
    ),
    "expected_answer-loglik-2d": (
        "loglik",
        lambda: I.expected_answer(np.zeros((2, 2)), np.zeros((2, 2))),
    ),
    "frequency_bias-estimates-negative": (
        "estimates",
        lambda: I.frequency_bias([-10.0, 6.0], [12.0, 4.0]),
    ),
    "mean_ci-level-str": ("level", lambda: I.mean_ci([0.2, 0.4, 0.5], level="0.9")),
    # found by the round-3 fuzz table (tests/test_fuzz_public_api.py): a length of 10**9
    # allocated gigabytes (past the 4 GiB limit of the fuzz child), a string p_repeat raised
    # an unnamed NumPy error
    "random_sequence-n-1e9": (
        "n",
        lambda: I.random_sequence("coin", 10**9, key=K),
    ),
    "periodic_sequence-n-1e9": (
        "n",
        lambda: I.periodic_sequence("coin", 10**9, [0, 1]),
    ),
    "streak_slope-p_repeat-str": (
        "p_repeat",
        lambda: I.streak_slope([1, 2, 3], "abc"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_naming_the_argument(case):
    arg, call = CASES[case]
    with pytest.raises(ValueError, match=rf"(^|\W){arg}\W"):
        call()
