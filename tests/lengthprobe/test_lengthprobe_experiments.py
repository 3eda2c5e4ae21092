"""The lengthprobe experiments' module contract, and lengthprobe_retraction's caching on a
tiny random decoder (slow: many compiles).

The model and its completions are stand-ins (a random 3-layer decoder, prompt ids folded into
its vocabulary, completions of random lengths). The experiments' metric keys, claims and
figures at their TINY size (the real model) are checked by the smoke tier (tests/smoke).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

import jaxlab.lm as lm
from experiments._harness import RunContext
from experiments._harness._registry import validate_module
from experiments.lengthprobe import _setup, decodable, retraction, transfer
from jaxlab import lengthprobe as lp
from tests.lm.lm_reference import tiny_llama

FAMILIES = ("count", "repeat_word", "math_steps", "paragraph_summary")


def test_modules_keep_the_contract():
    for mod in (decodable, transfer, retraction):
        validate_module(mod)
        assert mod.NAME.startswith("lengthprobe_")
        assert mod.PAPER == "P17"


@pytest.fixture(scope="module")
def fake_data(tmp_path_factory):
    model = lm.Transformer.random(tiny_llama(), key=jax.random.key(0))
    prompts = [
        p for i, f in enumerate(FAMILIES) for p in lp.make_prompts(f, 10, key=jax.random.key(i))
    ]
    ids = [[1 + (ord(c) % 59) for c in p.text[:24]] for p in prompts]
    root = tmp_path_factory.mktemp("lpexp")
    # completions of random lengths (3..30 tokens, a few truncated) stand in for generation
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 31, len(ids))
    cs = lp.CompletionSet(
        tuple(p.family for p in prompts),
        tuple(tuple(i) for i in ids),
        tuple(tuple(rng.integers(1, 61, n).tolist()) for n in lengths),
        tuple("max_tokens" if n == 30 else "stop_token" for n in lengths),
        30,
    )
    last, gen = lp.completion_states(model, cs, layers=(0, 1, 2), path=root / "s")
    return _setup.ModelData("tiny", prompts, cs, last, gen, (0, 1, 2))


class _CharTokenizer:
    """One id per character of a 60-character alphabet (0 is the stop/pad id)."""

    chars = " \n.,:;abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123"
    stop_ids, pad_id, chat_template = (0,), 0, None

    def encode(self, text, *, add_bos=None):
        return [1 + max(0, self.chars.find(ch)) for ch in text]

    def decode(self, ids):
        return "".join(self.chars[i - 1] if i > 0 else "" for i in ids)


@pytest.mark.slow
def test_retraction_writes_its_keys_and_caches(fake_data, monkeypatch, tmp_path):
    model = lm.Transformer.random(tiny_llama(), key=jax.random.key(0))
    tok = _CharTokenizer()
    loads = []

    def load(name):
        loads.append(name)
        return model, tok

    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_setup, "model_data", lambda config, model, key: fake_data)
    monkeypatch.setattr(_setup, "_tokenizer_and_config", lambda name: (tok, None))
    monkeypatch.setattr(lm, "load", load)
    config = dataclasses.replace(
        retraction.QUICK,
        models=("smollm2-135m-instruct",),
        families=FAMILIES,
        n_boot=20,
        min_length=6,
        max_items=6,
        continue_tokens=4,
    )
    ctx = RunContext(retraction.NAME, out_dir=tmp_path)
    res = retraction.run(config, jax.random.key(0), ctx)
    for k in ("jump_retraction", "jump_filler", "jump_position_only_smollm2"):
        assert np.isfinite(res.metrics[k]), k
    diff = res.metrics["jump_diff"]  # an Estimate: the paired bootstrap over items
    assert diff.finite
    assert diff.low <= diff.high
    assert diff.value == pytest.approx(res.metrics["jump_retraction"] - res.metrics["jump_filler"])
    assert res.claims[0].verdict in ("holds", "fails", "inconclusive")
    assert res.metrics["jump_position_only_diff_smollm2"] == 0.0
    assert res.metrics["items_smollm2"] >= 2
    assert len(loads) == 1  # continuations and their states from one model load
    assert set(res.figures) == {"retraction_jumps"}
    again = retraction.run(config, jax.random.key(0), ctx)
    assert len(loads) == 1  # the second run regenerates nothing
    assert again.metrics["jump_diff_smollm2"] == res.metrics["jump_diff_smollm2"]
