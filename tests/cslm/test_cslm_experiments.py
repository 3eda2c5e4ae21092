"""The cslm experiments' content-hashed caches: a second build of the TINY budget table and
triad chunk reads the cache without loading the model (slow: real model calls; the
experiments' contract at TINY size is the smoke tier's, tests/smoke)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from experiments.cslm import _setup, complexity, triad


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "cslm"


@pytest.mark.slow
def test_tiny_chunks_are_read_back_from_the_cache(cache):
    key = jax.random.key(0)
    tiny = complexity.TINY
    table = _setup.budget_table(tiny, key)
    assert len(list(cache.glob("budget-*.npz"))) == sum(len(s) for _, s in tiny.sizes)
    models = _setup.Models()
    again = _setup.budget_table(tiny, key, models)
    assert models._name is None  # all from the cache
    assert again.keys() == table.keys()
    for k, chunk in table.items():
        np.testing.assert_array_equal(again[k]["correct"], chunk["correct"])
    t = triad.TINY
    family, n = t.families[0], t.sizes_of(t.families[0])[0]
    args = (t.models[0], family, n, t.items, t.samples, t.max_new_tokens, key)
    first = _setup.triad_chunk(_setup.Models(), *args, batch_size=t.batch_size)
    assert len(list(cache.glob("triad-*.npz"))) == 1
    models = _setup.Models()
    second = _setup.triad_chunk(models, *args, batch_size=t.batch_size)
    assert models._name is None
    np.testing.assert_array_equal(second["verify_score"], first["verify_score"])


def test_content_hash_takes_the_chunk_keys_nested_lists():
    # budget_chunk hashes lists of prompts and lists of option lists: an lru-cached hash
    # raised "unhashable type: 'list'" on them, which only the slow test above exercised
    parts = {"kind": "budget", "prompts": ["p1", "p2"], "options": [[" 1", " 2"], [" 3"]]}
    h = _setup._content_hash(**parts)
    assert h == _setup._content_hash(**parts)
    assert h != _setup._content_hash(**{**parts, "options": [[" 1", " 2"], [" 4"]]})
    assert h != _setup._content_hash(**{**parts, "budgets": (16,)})
