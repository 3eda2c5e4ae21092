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
    # found by the second-round fuzz entries (issue #59): a (1, 1, k) index array was
    # flattened and accepted, a rating scale of 10**9 built 10**9 answer strings, None
    # sums/logliks were TypeErrors from len(), NaN answers were refused as "loglik" and
    # answers of the wrong width or a non-Stimuli were used or failed deep inside
    "ablation-latents-rank3": ("latents", lambda: I.ablation(None, [[[1, 2]]], layer=1)),
    "matched_latents-chosen-rank3": (
        "chosen",
        lambda: I.matched_latents(DENS, [[[1, 2]]], key=K),
    ),
    "matched_latents-density-empty": ("density", lambda: I.matched_latents([], [0], key=K)),
    "latent_overlap-first-rank3": (
        "first",
        lambda: I.latent_overlap([[[1, 2]]], [2, 3], population=5),
    ),
    "correlation_queries-scale-1e9": (
        "scale",
        lambda: I.correlation_queries(I.make_stimuli(key=K), scale=10**9),
    ),
    "query_logliks-sums-none": ("sums", lambda: I.query_logliks(None, _layout())),
    "read_correlation-logliks-none": (
        "logliks",
        lambda: I.read_correlation(None, I.make_stimuli(key=K)),
    ),
    "read_correlation-logliks-nan": (
        "logliks",
        lambda: I.read_correlation(_corr_logliks(nan_at=0), I.make_stimuli(key=K)),
    ),
    "read_correlation-logliks-estimate-width": (
        "logliks",
        lambda: I.read_correlation(_corr_logliks(short_at=39), I.make_stimuli(key=K)),
    ),
    "read_correlation-stimuli-none": (
        "stimuli",
        lambda: I.read_correlation(_corr_logliks(), None),
    ),
}


def _corr_logliks(nan_at=None, short_at=None):
    """Answers to `correlation_queries(make_stimuli(key=K))`: 39 attribution pairs, 27
    and 14 estimate answers, 4 ratings on 7 points; one NaN or one answer short."""
    out = [np.zeros(2)] * 39 + [np.zeros(27), np.zeros(14)] + [np.zeros(7)] * 4
    if nan_at is not None:
        out[nan_at] = np.array([np.nan, 0.0])
    if short_at is not None:
        out[short_at] = out[short_at][:-1]
    return out


def test_read_correlation_reads_the_design_answers():
    r = I.read_correlation(_corr_logliks(), I.make_stimuli(key=K))
    assert r["phi"] == pytest.approx(0.0, abs=1e-12)  # equal answers: no attribution bias
    assert r["estimate_majority"] == pytest.approx(13.0)  # uniform over 0..26


def test_layout_queries_takes_a_numpy_max_options():
    a = I.layout_queries(Chars(), ["a"], [[Q]], max_options=np.int64(4))
    assert a.where == _layout().where


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_naming_the_argument(case):
    arg, call = CASES[case]
    with pytest.raises(ValueError, match=rf"(^|\W){arg}\W"):
        call()
