"""Dense retrieval (`DenseIndex`) against a hand computation, and the LM agent model's
batched cache filling (`prefetch`) and embedding cache on a tiny model with SmolLM2's
real tokenizer."""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest

import jaxlab.blackboard as bb
import jaxlab.lm as lm
from tests.lm.lm_reference import tiny_llama

from ._tables import tables

VOCAB = ["apple", "banana", "cherry", "date"]


def bag_of_words(texts):
    return np.array([[t.lower().split().count(w) for w in VOCAB] for t in texts], float)


def test_dense_index_is_the_cosine_of_centred_embeddings():
    docs = ["apple apple banana", "banana cherry", "cherry cherry cherry date"]
    idx = bb.DenseIndex(docs, bag_of_words)
    e = bag_of_words(docs)
    mu = e.mean(axis=0)
    q = bag_of_words(["apple cherry"])[0] - mu
    want = [(d - mu) @ q / np.linalg.norm(d - mu) / np.linalg.norm(q) for d in e]
    np.testing.assert_allclose(idx.scores("apple cherry"), want, rtol=1e-12)
    assert np.argmax(idx.scores("apple")) == 0
    # one document centres to zero: every score is 0, not NaN
    np.testing.assert_array_equal(bb.DenseIndex(["apple"], bag_of_words).scores("apple"), [0.0])


def test_dense_index_rejects_bad_input():
    with pytest.raises(ValueError, match="documents"):
        bb.DenseIndex([], bag_of_words)
    with pytest.raises(ValueError, match="encode"):
        bb.DenseIndex(["a"], "not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"\(2, d\)"):
        bb.DenseIndex(["a", "b"], lambda ts: np.zeros((3, 4)))
    with pytest.raises(ValueError, match="NaN"):
        bb.DenseIndex(["a", "b"], lambda ts: np.full((len(ts), 2), np.nan))
    with pytest.raises(ValueError, match="query"):
        bb.DenseIndex(["a b", "c"], bag_of_words).scores("  ")
    lake = bb.Lake(tables(), {"all": tuple(tables())})
    with pytest.raises(ValueError, match="index"):
        bb.retrieval(lake, "q", object(), bb.DiscoveryConfig())  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def tiny_agent_parts():
    """A tiny random llama over SmolLM2's vocabulary, with SmolLM2's tokenizer."""
    tok = lm.Tokenizer.from_gguf(lm.read_gguf(lm.model_path("smollm2")))
    cfg = tiny_llama(vocab_size=49152, context_length=2048)
    return lm.Transformer.random(cfg, key=jax.random.key(0)), tok


def _lake_and_tasks():
    ts = tables()
    lake = bb.Lake(
        ts, {"shop": ("shop/cities", "shop/sales", "shop/stores"), "zoo": ("zoo/animals",)}
    )
    return lake, bb.generate_tasks(lake.tables, 3, key=jax.random.key(2), join_fraction=0.3)


def test_prefetch_covers_every_relevance_call_and_equals_unbatched_scores(
    tiny_agent_parts, tmp_path
):
    model, tok = tiny_agent_parts
    lake, tasks = _lake_and_tasks()
    cfg = bb.DiscoveryConfig(context_tokens=128)
    agent = bb.LMAgentModel(
        model, tok, name="tiny", cache_dir=tmp_path, weights="tiny-test", batch_size=4
    )
    asked = bb.prefetch(lake, tasks, agent, cfg, progress=False)
    assert asked >= agent.calls > 0
    before = agent.calls
    found = bb.run_methods(lake, tasks, agent, cfg, progress=False)
    assert agent.calls == before  # every relevance call was a cache hit
    assert set(found) == set(bb.METHODS)
    # the batched (cached) scores equal scoring each request alone, without a cache
    alone = bb.LMAgentModel(model, tok, name="tiny", cache_dir=None)
    snippets = [bb.snippet(t, chars=cfg.snippet_chars) for t in lake.tables.values()]
    for t in tasks:
        got, _ = bb.relevance(agent, t.query, snippets)
        ref, _ = bb.relevance(alone, t.query, snippets)
        np.testing.assert_allclose(got, ref, atol=2e-5)
    # a second agent over the same cache scores nothing
    again = bb.LMAgentModel(model, tok, name="tiny", cache_dir=tmp_path, weights="tiny-test")
    bb.run_methods(lake, tasks, again, cfg, progress=False)
    assert again.calls == 0


def test_embed_cache_equals_lm_embed_and_survives_a_torn_file(tiny_agent_parts, tmp_path):
    model, tok = tiny_agent_parts
    agent = bb.LMAgentModel(model, tok, name="tiny", cache_dir=tmp_path, weights="tiny-test")
    texts = ["rainfall by month", "prices of diamonds by carat"]
    ref = lm.embed(model, tok, texts)
    np.testing.assert_allclose(agent.embed(texts), ref, rtol=1e-6)
    files = sorted(tmp_path.rglob("*.npy"))
    assert len(files) == 2
    files[0].write_bytes(b"\x93NUMPY torn")
    np.testing.assert_allclose(agent.embed(texts), ref, rtol=1e-6)
    lake, tasks = _lake_and_tasks()
    cfg = bb.DiscoveryConfig()
    d = bb.retrieval(lake, tasks[0].query, bb.dense_index(lake, agent, cfg), cfg)
    assert set(d.tables) <= set(lake.tables)
    assert len(d.tables) <= cfg.max_tables


def test_scripted_models_have_no_embeddings():
    class Words(bb.AgentModel):
        def option_scores(self, prompt, options):
            return np.zeros(len(options))

        def count_tokens(self, text):
            return len(re.findall(r"\S+", text))

    with pytest.raises(NotImplementedError, match="embeddings"):
        Words().embed(["a"])
    lake, tasks = _lake_and_tasks()
    assert bb.prefetch(lake, tasks, Words(), bb.DiscoveryConfig()) == 0
    with pytest.raises(ValueError, match="methods"):
        bb.run_methods(lake, tasks, Words(), bb.DiscoveryConfig(), methods=("nope",))


def test_more_options_than_lm_score_takes_per_item_are_split(tiny_agent_parts):
    """A planner slot over tables with > 64 numeric columns: `lm.score` takes at most 64
    options per item, so the agent splits them (the scores equal scoring each alone)."""
    model, tok = tiny_agent_parts
    agent = bb.LMAgentModel(model, tok, name="tiny", batch_size=2)
    options = [f" c{i}" for i in range(70)]
    got = agent.option_scores("The column measured is", options)
    assert got.shape == (70,)
    assert np.all(np.isfinite(got))
    ref = agent.option_scores("The column measured is", options[60:])
    np.testing.assert_allclose(got[60:], ref, atol=2e-5)
