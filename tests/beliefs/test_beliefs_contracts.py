"""Issue #59 item 2 (beliefs): every public function refuses bad input with a ValueError
naming the argument (each case below returned NaN or a meaningless number, or failed with
an unnamed or deep error, before the validation layer)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxlab import beliefs as B

K = jax.random.key(0)
ACTS = np.random.default_rng(0).standard_normal((2, 12, 3))
LABELS = np.tile([True, False], 6)
TRAIN = np.repeat([True, False], 6)
SC = np.random.default_rng(1).standard_normal((8, 3))
ZEROS = np.zeros(8)


def _directions(**kw):
    args = {
        "directions": np.ones((2, 3)),
        "thresholds": np.zeros(2),
        "test_auroc": np.zeros(2),
        "test_accuracy": np.zeros(2),
        "method": "logistic",
    }
    return B.BeliefDirections(**(args | kw))


CASES = {
    "fit_directions-acts-str": ("acts", lambda: B.fit_directions("abc", LABELS, train=TRAIN)),
    "fit_directions-penalty-str": (
        "penalty",
        lambda: B.fit_directions(ACTS, LABELS, train=TRAIN, method="logistic", penalty="1"),
    ),
    "dominance-scores-nan": ("scores", lambda: B.dominance(np.where(SC > 1.0, np.nan, SC))),
    "dominance-scores-str": ("scores", lambda: B.dominance("abc")),
    "partial_correlation-weights-zeros": (
        "weights",
        lambda: B.partial_correlation(SC[:, 0], SC[:, 1], SC[:, 2], weights=ZEROS),
    ),
    "partial_correlation-x-constant": (
        "x",
        lambda: B.partial_correlation(np.ones(8), SC[:, 1], SC[:, 2]),
    ),
    "partial_correlation-x-too-few-rows": (
        "x",
        lambda: B.partial_correlation(SC[:2, 0], SC[:2, 1], SC[:2, 2]),
    ),
    "dose_slope-weights-zeros": (
        "weights",
        lambda: B.dose_slope([-1.0, 0.0, 1.0], SC, weights=ZEROS),
    ),
    "evidence_counts-items-str": ("items", lambda: B.evidence_counts("abc")),
    "evidence_counts-items-ints": ("items", lambda: B.evidence_counts([1, 2])),
    "evidence_counts-max_evidence-negative": (
        "max_evidence",
        lambda: B.evidence_counts([], max_evidence=-1),
    ),
    "evidence_counts-max_evidence-bool": (
        "max_evidence",
        lambda: B.evidence_counts([], max_evidence=True),
    ),
    "read_tomi-path-int": ("path", lambda: B.read_tomi(5)),
    "BeliefDirections-directions-nan": (
        "directions",
        lambda: _directions(directions=np.full((2, 3), np.nan)),
    ),
    "BeliefDirections-thresholds-short": (
        "thresholds",
        lambda: _directions(thresholds=np.zeros(1)),
    ),
    "BeliefDirections-method-unknown": ("method", lambda: _directions(method="nope")),
    # issue #59, declared in the fuzz table: each was a TypeError/ValueError from inside
    # JAX/NumPy naming nothing, a silent acceptance, or an allocation that killed the process
    "dominance-mask-str": ("mask", lambda: B.dominance(SC, mask="abc")),
    "fit_directions-labels-None": ("labels", lambda: B.fit_directions(ACTS, None, train=TRAIN)),
    "fit_directions-train-str": ("train", lambda: B.fit_directions(ACTS, LABELS, train="abc")),
    "fit_directions-acts-empty": (
        "acts",
        lambda: B.fit_directions(ACTS[:0], LABELS, train=TRAIN),
    ),
    "generation_states-prompts-array": (
        "completions",
        lambda: B.generation_states(
            _model(), np.array([[1, 2], [3, 4]]), np.array([[5]]), layers=[0], width=2
        ),
    ),
    "generation_states-prompts-None": (
        "prompts",
        lambda: B.generation_states(_model(), None, [[5]], layers=[0], width=2),
    ),
    "generation_states-width-1e9": (
        "width",
        lambda: B.generation_states(_model(), [[1, 2]], [[5]], layers=[0], width=10**9),
    ),
    "option_logprobs-prompts-None": (
        "prompts",
        lambda: B.option_logprobs(_model(), None, np.array([[1, 2]]), np.ones((1, 24)), layers=[0]),
    ),
    "option_logprobs-vectors-str": (
        "vectors",
        lambda: B.option_logprobs(_model(), [[1, 2]], np.array([[1, 2]]), "abc", layers=[0]),
    ),
    "option_logprobs-vectors-empty": (
        "vectors",
        lambda: B.option_logprobs(
            _model(), [[1, 2]], np.array([[1, 2]]), np.ones((0, 24)), layers=[0]
        ),
    ),
    "evidence_counts-max_evidence-1e9": (
        "max_evidence",
        lambda: B.evidence_counts([], max_evidence=10**9),
    ),
    "make_factual-n_per_cell-1e9": (
        "n_per_cell",
        lambda: B.make_factual(10**9, key=K, max_evidence=1),
    ),
    "make_scenarios-n_per_cell-1e9": (
        "n_per_cell",
        lambda: B.make_scenarios(10**9, key=K, max_evidence=1),
    ),
}


def _model():
    from jaxlab import lm

    from ..lm.lm_reference import tiny_llama

    return lm.Transformer.random(tiny_llama(vocab_size=13), key=jax.random.key(3))


def test_option_logprobs_batch_size_beyond_the_prompts_is_the_same():
    """A batch_size of 10**9 padded the prompt list to 10**9 rows (hang); now at most B
    rows are used, with the same log-probabilities."""
    model = _model()
    args = (model, [[1, 2, 3], [4, 5, 6]], np.array([[7, 8], [9, 10]]), np.ones((1, 24)))
    ref = B.option_logprobs(*args, layers=[0], batch_size=2)
    big = B.option_logprobs(*args, layers=[0], batch_size=10**9)
    np.testing.assert_allclose(big, ref, rtol=1e-6)


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_naming_the_argument(case):
    arg, call = CASES[case]
    with pytest.raises(ValueError, match=rf"(^|\W){arg}\W"):
        call()
