"""Issue #59 item 2 (lengthprobe): every public function refuses bad input with a
ValueError naming the argument (each case below returned a silently wrong value or NaN,
or failed with an unnamed error, before the validation layer)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxlab import lengthprobe as lp

K = jax.random.key(0)
N = 12
Y = np.random.default_rng(0).uniform(1, 5, N)
YNAN = Y.copy()
YNAN[3] = np.nan
FAM = np.repeat([0, 1, 2], 4)
TR = np.tile([True, True, False, False], 3)
PL = np.random.default_rng(1).integers(5, 20, N).astype(float)
POS = np.tile(np.arange(4), 3)
PROMPTS = [list(np.random.default_rng(i).integers(0, 30, 6)) for i in range(N)]
X = np.random.default_rng(2).standard_normal((N, 3))
XNAN = X.copy()
XNAN[2, 0] = np.nan
E = np.log1p(np.arange(10.0))
SRC, TGT = FAM < 2, FAM == 2


def _dec(ids):
    return "".join(chr(97 + (i % 26)) for i in ids)


def _enc(s):
    return list(range(len(s)))


def _dt(**kw):
    args = {"x": X, "y": Y, "positions": POS, "source": SRC, "target": TGT, "train": TR}
    return lp.directional_transfer(**(args | kw))


CASES = {
    "family_mean-y-nan": ("y", lambda: lp.family_mean(YNAN, FAM, TR)),
    "family_mean-y-str": ("y", lambda: lp.family_mean("abc", FAM, TR)),
    "family_mean-y-2d": ("y", lambda: lp.family_mean(np.ones((N, 2)), np.ones((N, 2)), TR)),
    "family_mean-families-float": ("families", lambda: lp.family_mean(Y, FAM + 0.5, TR)),
    "prompt_length_fit-y-nan": ("y", lambda: lp.prompt_length_fit(YNAN, PL, TR)),
    "prompt_length_fit-prompt_lengths-nan": (
        "prompt_lengths",
        lambda: lp.prompt_length_fit(Y, np.where(np.arange(N) == 2, np.nan, PL), TR),
    ),
    "prompt_length_fit-prompt_lengths-negative": (
        "prompt_lengths",
        lambda: lp.prompt_length_fit(Y, -PL, TR),
    ),
    "prompt_length_fit-y-empty": ("y", lambda: lp.prompt_length_fit(Y[:0], PL[:0], TR[:0])),
    "bow_features-prompts-str": ("prompts", lambda: lp.bow_features("abcdefghijkl", TR)),
    "bow_features-prompts-negative": (
        "prompts",
        lambda: lp.bow_features([[-1, 2], *PROMPTS[1:]], TR),
    ),
    "bow_features-prompts-float": (
        "prompts",
        lambda: lp.bow_features([[1.5, 2], *PROMPTS[1:]], TR),
    ),
    "bow_features-prompts-strs": ("prompts", lambda: lp.bow_features([["a"], *PROMPTS[1:]], TR)),
    "bow_features-max_features-0": (
        "max_features",
        lambda: lp.bow_features(PROMPTS, TR, max_features=0),
    ),
    "bow_features-max_features-bool": (
        "max_features",
        lambda: lp.bow_features(PROMPTS, TR, max_features=True),
    ),
    "bow_features-max_features-float": (
        "max_features",
        lambda: lp.bow_features(PROMPTS, TR, max_features=2.5),
    ),
    "bow_features-max_features-negative": (
        "max_features",
        lambda: lp.bow_features(PROMPTS, TR, max_features=-1),
    ),
    "bag_of_words-prompts-short": ("prompts", lambda: lp.bag_of_words(Y, PROMPTS[:5], TR)),
    "bag_of_words-max_features-0": (
        "max_features",
        lambda: lp.bag_of_words(Y, PROMPTS, TR, max_features=0),
    ),
    "position_only-y-nan": ("y", lambda: lp.position_only(YNAN, POS, TR)),
    "position_only-positions-float": ("positions", lambda: lp.position_only(Y, POS + 0.5, TR)),
    "position_only-positions-1e9": (
        "positions",
        lambda: lp.position_only(Y, np.where(np.arange(N) == 0, 10**12, POS), TR),
    ),
    "position_only-families-float": (
        "families",
        lambda: lp.position_only(Y, POS, TR, families=FAM + 0.5),
    ),
    "position_only-y-empty": ("y", lambda: lp.position_only(Y[:0], POS[:0], TR[:0])),
    "mae-weights-zeros": ("weights", lambda: lp.mae(Y, Y, weights=np.zeros(N))),
    "normalised_mae-y_true-zeros": ("y_true", lambda: lp.normalised_mae(np.zeros(N), Y)),
    "log_r2-y_true-constant": ("y_true", lambda: lp.log_r2(np.ones(N), Y)),
    "log_r2-y_true-one-row": ("y_true", lambda: lp.log_r2(Y[:1], Y[:1])),
    "length_metrics-y_true-str": ("y_true", lambda: lp.length_metrics("abc", Y, key=K)),
    # inf passes the >= 0 range check: refused by name, not by the bootstrap's arrays[0]
    "length_metrics-y_true-inf": (
        "y_true",
        lambda: lp.length_metrics(np.where(np.arange(len(Y)) == 0, np.inf, Y), Y, key=K),
    ),
    "length_metrics-n_resamples-1e12": (
        "n_resamples",
        lambda: lp.length_metrics(Y, Y, key=K, n_resamples=10**12),
    ),
    "cross_fit-acts-str": ("acts", lambda: lp.cross_fit("abc", Y, groups=FAM, key=K, n_folds=2)),
    "transfer_matrix-families-negative": (
        "families",
        lambda: lp.transfer_matrix(X, Y, families=FAM - 1, train=TR),
    ),
    "transfer_matrix-families-float": (
        "families",
        lambda: lp.transfer_matrix(X, Y, families=FAM + 0.5, train=TR),
    ),
    "transfer_matrix-families-1e9": (
        "families",
        lambda: lp.transfer_matrix(
            X, Y, families=np.where(np.arange(N) == 0, 10**9, FAM), train=TR
        ),
    ),
    "transfer_matrix-train-int": (
        "train",
        lambda: lp.transfer_matrix(X, Y, families=FAM, train=TR.astype(int) * 2),
    ),
    "transfer_matrix-metric-str": (
        "metric",
        lambda: lp.transfer_matrix(X, Y, families=FAM, train=TR, metric="abc"),
    ),
    "directional_transfer-source-short": ("source", lambda: _dt(source=SRC[:5])),
    "directional_transfer-target-short": ("target", lambda: _dt(target=TGT[:5])),
    "directional_transfer-train-short": ("train", lambda: _dt(train=TR[:5])),
    "directional_transfer-source-int": ("source", lambda: _dt(source=SRC.astype(int) * 3)),
    "find_retractions-tokens-str": ("tokens", lambda: lp.find_retractions("abc", _dec)),
    "find_retractions-tokens-float": ("tokens", lambda: lp.find_retractions([1.5, 2.5], _dec)),
    "find_retractions-tokens-negative": ("tokens", lambda: lp.find_retractions([-1, 2], _dec)),
    "find_retractions-phrases-str": (
        "phrases",
        lambda: lp.find_retractions([1, 2], _dec, phrases="wait"),
    ),
    "find_retractions-decode-str": ("decode", lambda: lp.find_retractions([1, 2], "abc")),
    "cut_point-fraction-str": ("fraction", lambda: lp.cut_point([1, 2, 3], _dec, fraction="0.5")),
    "cut_point-breaks-str": ("breaks", lambda: lp.cut_point([1, 2, 3], _dec, breaks=".")),
    "cut_point-tokens-str": ("tokens", lambda: lp.cut_point("abc", _dec)),
    "cut_point-tokens-float": ("tokens", lambda: lp.cut_point([1.5, 2.5, 3.5], _dec)),
    "insert_phrase-cut-bool": ("cut", lambda: lp.insert_phrase([1], [2, 3], True, [4])),
    "insert_phrase-cut-float": ("cut", lambda: lp.insert_phrase([1], [2, 3], 1.5, [4])),
    "insert_phrase-cut-str": ("cut", lambda: lp.insert_phrase([1], [2, 3], "1", [4])),
    "insert_phrase-prompt-str": ("prompt", lambda: lp.insert_phrase("ab", [2, 3], 1, [4])),
    "insert_phrase-completion-float": (
        "completion",
        lambda: lp.insert_phrase([1], [2.5, 3], 1, [4]),
    ),
    "same_length_filler-length-bool": ("length", lambda: lp.same_length_filler(_enc, True, ["ab"])),
    "same_length_filler-length-float": (
        "length",
        lambda: lp.same_length_filler(_enc, 2.5, ["abc"]),
    ),
    "same_length_filler-length-str": ("length", lambda: lp.same_length_filler(_enc, "2", ["abc"])),
    "same_length_filler-candidates-str": (
        "candidates",
        lambda: lp.same_length_filler(_enc, 1, "abc"),
    ),
    "estimate_jump-estimates-nan": (
        "estimates",
        lambda: lp.estimate_jump(np.where(np.arange(10) == 3, np.nan, E), [1], [3]),
    ),
    "estimate_jump-estimates-str": ("estimates", lambda: lp.estimate_jump("abc", [1], [2])),
    "make_prompts-family-list": ("family", lambda: lp.make_prompts(["count"], 2, key=K)),
    "make_prompts-count-1e12": ("count", lambda: lp.make_prompts("count", 10**12, key=K)),
    "stop_reason-stop_ids-str": (
        "stop_ids",
        lambda: lp.stop_reason([1, 2, 3], stop_ids="ab", max_new_tokens=3),
    ),
    "stop_reason-generated-str": (
        "generated",
        lambda: lp.stop_reason("abc", stop_ids=[0], max_new_tokens=3),
    ),
    "stop_reason-generated-float": (
        "generated",
        lambda: lp.stop_reason([1.5, 2.5, 3.5], stop_ids=[0], max_new_tokens=3),
    ),
    "stop_reason-stop_strings-str": (
        "stop_strings",
        lambda: lp.stop_reason(
            [1, 2, 3], stop_ids=[0], max_new_tokens=3, stop_strings="ab", decode=_dec
        ),
    ),
    # found by the round-3 fuzz table (tests/test_fuzz_public_api.py): each was accepted
    # (a 3-D row flattened), or an unnamed TypeError / ValueError from int() or numpy
    "stop_reason-generated-2d": (
        "generated",
        lambda: lp.stop_reason([[[4, 5, 2]]], stop_ids=[2], max_new_tokens=3),
    ),
    "stop_reason-stop_ids-2d": (
        "stop_ids",
        lambda: lp.stop_reason([4, 5, 2], stop_ids=[[[2]]], max_new_tokens=3),
    ),
    "cross_fit-y-str": ("y", lambda: lp.cross_fit(X[None], "abc", groups=FAM, key=K)),
    "insert_phrase-completion-empty": ("completion", lambda: lp.insert_phrase([1], [], 1, [2])),
    "remaining_length-text_index-none": (
        "text_index",
        lambda: lp.remaining_length(_completions(), None, [2]),
    ),
    "remaining_length-text_index-float": (
        "text_index",
        lambda: lp.remaining_length(_completions(), [0.5], [2]),
    ),
    "remaining_length-positions-str": (
        "positions",
        lambda: lp.remaining_length(_completions(), [0], "abc"),
    ),
    "same_length_filler-length-1e9": (
        "length",
        lambda: lp.same_length_filler(_enc, 10**9, ["abc"]),
    ),
    "generate_completions-prompts-str": (
        "prompts",
        lambda: _generate(prompts=["abc"]),
    ),
    "generate_completions-prompts-over-vocab": (
        "prompts",
        lambda: _generate(prompts=[[1, 999]]),
    ),
    "generate_completions-families-str": (
        "families",
        lambda: _generate(prompts=[[1], [2], [3]], families="abc"),
    ),
    "completion_states-layers-none": ("layers", lambda: _states(None)),
    "completion_states-layers-over": ("layers", lambda: _states([0, 99])),
    # an AttributeError ('str' object has no attribute 'lengths') before
    "total_length-completions-str": ("completions", lambda: lp.total_length("abc")),
}


def _completions():
    return lp.CompletionSet(("a",), ((1, 2),), ((4, 5, 6),), ("stop_token",), 4)


def _tiny_model():
    from jaxlab import lm
    from tests.lm.lm_reference import tiny_llama

    return lm.Transformer.random(tiny_llama(vocab_size=13), key=jax.random.key(3))


def _generate(prompts, families=("a",)):
    return lp.generate_completions(
        _tiny_model(),
        None,
        prompts,
        families=families,
        max_new_tokens=2,
        path="/nonexistent-never-written",
        key=K,
        stop_ids=(2,),
        pad_id=0,
    )


def _states(layers):
    return lp.completion_states(
        _tiny_model(), _completions(), layers=layers, path="/nonexistent-never-written"
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_naming_the_argument(case):
    arg, call = CASES[case]
    with pytest.raises(ValueError, match=rf"(^|\W){arg}\W"):
        call()


def test_find_retractions_with_no_phrases_counts_repeated_lines_only():
    """`phrases=()` is the documented repeated-lines-only mode (lengthprobe_retraction
    counts natural repeated lines with it): not refused as an empty sequence."""
    text = "a\nb\na\nwait\n"
    toks = [ord(c) for c in text]

    def decode(ids):
        return "".join(chr(i) for i in ids)

    assert lp.find_retractions(toks, decode, phrases=()) == [4]
    assert lp.find_retractions(toks, decode, phrases=("wait",), repeated_lines=False) == [6]
