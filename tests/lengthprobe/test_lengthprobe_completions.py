"""Families, stop reasons, the cached completion set (tiny random decoder) and states."""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest

import jaxlab.lm as lm
from jaxlab import lengthprobe as lp
from tests.lm.lm_reference import tiny_llama
from tests.progress_record import RecordProgress


@pytest.fixture(scope="module")
def model():
    return lm.Transformer.random(tiny_llama(), key=jax.random.key(0))


@pytest.fixture(scope="module")
def smol_tokenizer():
    return lm.Tokenizer.from_gguf(lm.read_gguf(lm.model_path("smollm2-135m-instruct")))


# ------------------------------------------------------------------ families


def test_every_family_draws_deterministic_prompts():
    for name, fam in lp.FAMILIES.items():
        a = lp.make_prompts(name, 6, key=jax.random.key(3))
        b = lp.make_prompts(name, 6, key=jax.random.key(3))
        c = lp.make_prompts(name, 6, key=jax.random.key(4))
        assert a == b
        assert a != c
        assert all(p.family == name and p.text.strip() for p in a)
        assert (fam.kind == "synthetic") == all(p.reference is not None for p in a)
    assert len(lp.SYNTHETIC) >= 4
    assert len(lp.NATURAL) >= 3


def test_synthetic_references_have_their_units():
    for p in lp.make_prompts("count", 10, key=jax.random.key(0)):
        nums = [int(v) for v in p.reference.split(", ")]
        a, b = (int(v) for v in re.match(r"Count from (\d+) to (\d+)\.", p.text).groups())
        assert nums == list(range(a, b + 1))
        assert len(nums) == p.units
    for p in lp.make_prompts("repeat_word", 10, key=jax.random.key(0)):
        assert len(p.reference.split(" ")) == p.units
        assert f"exactly {p.units} times" in p.text
    for p in lp.make_prompts("list_items", 10, key=jax.random.key(0)):
        assert len(p.reference.splitlines()) == p.units
    for p in lp.make_prompts("chain_sum", 10, key=jax.random.key(0)):
        terms = [int(t) for t in p.text.split("Compute ")[1].split(" one step")[0].split(" + ")]
        assert p.reference.endswith(f"Answer: {sum(terms)}")
        assert len(terms) == p.units


def test_known_lengths_equal_the_tokenizer_count(smol_tokenizer):
    for name in lp.SYNTHETIC:
        for p in lp.make_prompts(name, 15, key=jax.random.key(1)):
            want = len(smol_tokenizer.encode(p.reference, add_bos=False))
            assert lp.reference_length(smol_tokenizer, p) == want


def test_family_bad_input():
    with pytest.raises(ValueError, match="family"):
        lp.make_prompts("nope", 3, key=jax.random.key(0))
    with pytest.raises(ValueError, match="count"):
        lp.make_prompts("count", 0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="count"):
        lp.make_prompts("math_steps", 10_000, key=jax.random.key(0))
    with pytest.raises(ValueError, match="prompt"):
        lp.reference_length(None, lp.make_prompts("math_steps", 1, key=jax.random.key(0))[0])


# ------------------------------------------------------------------ stop reasons


def _decode(ids):
    return "".join("abcdefghij"[i % 10] for i in ids)


def test_stop_reason_hand_built():
    # stop id 9 at index 3: content is the 3 tokens before, padding after ignored
    assert lp.stop_reason([4, 5, 6, 9, 0, 0], stop_ids=[9], max_new_tokens=6) == (
        [4, 5, 6],
        "stop_token",
    )
    # immediate stop: empty content
    assert lp.stop_reason([9, 0, 0], stop_ids=[9, 8], max_new_tokens=3) == ([], "stop_token")
    # no stop within the budget: truncated
    assert lp.stop_reason([1, 2, 3], stop_ids=[9], max_new_tokens=3) == ([1, 2, 3], "max_tokens")
    # stop string "cd" completes at token index 3 (ids 2, 3 decode to "cd")
    out = lp.stop_reason(
        [0, 1, 2, 3, 4, 9], stop_ids=[9], max_new_tokens=6, stop_strings=["cd"], decode=_decode
    )
    assert out == ([0, 1, 2, 3], "stop_string")
    # a stop string after the stop token does not count
    out = lp.stop_reason(
        [0, 9, 2, 3], stop_ids=[9], max_new_tokens=4, stop_strings=["cd"], decode=_decode
    )
    assert out == ([0], "stop_token")
    with pytest.raises(ValueError, match="generated"):
        lp.stop_reason([1, 2], stop_ids=[9], max_new_tokens=5)
    with pytest.raises(ValueError, match="decode"):
        lp.stop_reason([1, 9], stop_ids=[9], max_new_tokens=2, stop_strings=["x"])
    with pytest.raises(ValueError, match="max_new_tokens"):
        lp.stop_reason([1, 9], stop_ids=[9], max_new_tokens=0)


# ------------------------------------------------------------------ completion sets


def _prompts():
    rng = np.random.default_rng(0)
    return [rng.integers(1, 61, n).tolist() for n in (3, 5, 4, 6, 2)]


def _generate(model, path, progress=None, max_new=6):
    return lp.generate_completions(
        model,
        None,
        _prompts(),
        families=["a", "b", "a", "b", "a"],
        max_new_tokens=max_new,
        path=path,
        key=jax.random.key(0),
        batch_size=2,
        stop_ids=(7, 11),
        pad_id=0,
        progress=progress,
    )


@pytest.fixture(scope="module")
def completions(model, tmp_path_factory):
    return _generate(model, tmp_path_factory.mktemp("lp") / "c")


def test_completions_equal_direct_generation(model, completions):
    cs = completions
    assert len(cs) == 5
    assert cs.families == ("a", "b", "a", "b", "a")
    # rows 0 and 3 generated directly, in a batch of the same shape (no new compile)
    prompts = _prompts()
    g = lm.generate(model, [prompts[0], prompts[3]], max_new_tokens=6, stop_tokens=(7, 11))
    for r, i in enumerate((0, 3)):
        want = lp.stop_reason(np.asarray(g.tokens)[r], stop_ids=(7, 11), max_new_tokens=6)
        assert (list(cs.completions[i]), cs.reasons[i]) == want
    assert cs.prompts == tuple(tuple(p) for p in prompts)
    assert np.array_equal(cs.truncated, [r == "max_tokens" for r in cs.reasons])
    assert np.array_equal(cs.lengths, [len(c) for c in cs.completions])
    assert lp.CompletionSet.from_json(cs.to_json()) == cs


def test_cache_hit_and_resume(model, tmp_path, monkeypatch):
    calls = []
    real = lm.generate

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(lm, "generate", counting)
    first = _generate(model, tmp_path / "c")
    n_batches = len(calls)
    assert n_batches == 3  # family a: 3 prompts in 2 batches, family b: 1 batch
    rec = RecordProgress()
    again = _generate(model, tmp_path / "c", progress=rec)
    assert again == first
    assert len(calls) == n_batches
    assert rec.calls[0] == ("start", 3, 3)
    # a run killed after its first batch: the manifest lists batch 0 only
    import json

    m = json.loads((tmp_path / "c" / "manifest.json").read_text())
    m["batches"] = [0]
    (tmp_path / "c" / "manifest.json").write_text(json.dumps(m))
    resumed = _generate(model, tmp_path / "c")
    assert resumed == first
    assert len(calls) == n_batches + 2
    with pytest.raises(ValueError, match="path"):
        _generate(model, tmp_path / "c", max_new=5)


def test_completion_bad_input(model, tmp_path):
    with pytest.raises(ValueError, match="families"):
        lp.generate_completions(
            model,
            None,
            _prompts(),
            families=["a"],
            max_new_tokens=4,
            path=tmp_path,
            key=jax.random.key(0),
            stop_ids=(7,),
            pad_id=0,
        )
    with pytest.raises(ValueError, match="prompts"):
        lp.generate_completions(
            model,
            None,
            [[1], []],
            families=["a", "a"],
            max_new_tokens=4,
            path=tmp_path,
            key=jax.random.key(0),
            stop_ids=(7,),
            pad_id=0,
        )
    with pytest.raises(ValueError, match="tokenizer"):
        lp.generate_completions(
            model,
            None,
            [[1]],
            families=["a"],
            max_new_tokens=4,
            path=tmp_path,
            key=jax.random.key(0),
        )
    with pytest.raises(ValueError, match="reasons"):
        lp.CompletionSet(("a",), ((1,),), ((2,),), ("done",), 4)
    with pytest.raises(ValueError, match="completions"):
        lp.CompletionSet(("a",), ((1,),), (), ("stop_token",), 4)


def test_states_and_targets(model, completions, tmp_path):
    cs = completions
    last, gen = lp.completion_states(model, cs, layers=(0, 2), path=tmp_path / "s", dtype="float32")
    assert last.n_tokens == len(cs)
    assert gen.n_tokens == int(cs.lengths.sum())
    rem = lp.remaining_length(cs, gen.text_index, gen.positions)
    # per completion: remaining counts down L-1, ..., 0
    for i in range(len(cs)):
        r = rem[gen.text_index == i]
        assert np.array_equal(r, np.arange(cs.lengths[i])[::-1])
    # the prompt-last state is the forward pass's last prompt position
    _, acts = lm.forward(model, np.asarray(cs.prompts[1]), capture=["resid_post"], layers=[2])
    np.testing.assert_allclose(
        last.array("resid_post", 2)[1], np.asarray(acts["resid_post"])[0, -1], rtol=1e-4, atol=1e-5
    )
    with pytest.raises(ValueError, match="positions"):
        lp.remaining_length(cs, gen.text_index, gen.positions[:-1])
    with pytest.raises(ValueError, match="completions"):
        lp.completion_states(model, [1, 2], layers=(0,), path=tmp_path / "x")


# ------------------------------------------------------------------ retractions

_VOCAB = ["The", " sum", " is", " 12", ".", " Wait", ",", " no", "\n", "3", " + ", "4", " Actually"]


def _words(ids):
    return "".join(_VOCAB[i] for i in ids)


def test_find_retractions_on_hand_written_tokens():
    # "The sum is 12. Wait, no" -> the event starts in token 5 (" Wait")
    assert lp.find_retractions([0, 1, 2, 3, 4, 5, 6, 7], _words) == [5]
    # a repeated line "3 + 4" restarts at its first token (index 4 after "3 + 4\n")
    seq = [9, 10, 11, 8, 9, 10, 11]
    assert lp.find_retractions(seq, _words) == [4]
    assert lp.find_retractions(seq, _words, repeated_lines=False) == []
    # two events (a phrase and another phrase), sorted
    seq = [0, 12, 4, 5, 6]
    assert lp.find_retractions(seq, _words) == [1, 3]
    assert lp.find_retractions([], _words) == []
    with pytest.raises(ValueError, match="phrases"):
        lp.find_retractions([0], _words, phrases=[""])
