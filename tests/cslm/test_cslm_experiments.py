"""The cslm experiments keep their contract on tiny configs with SmolLM2 (slow: real model
calls), and a second run reads the content-hashed cache without loading the model."""

from __future__ import annotations

import dataclasses

import jax
import pytest

from experiments._harness import Result, RunContext
from experiments.cslm import _setup, complexity, reliability, triad

TINY_BUDGET = {
    "models": ("smollm2-135m-instruct",),
    "families": ("chain_sum",),
    "sizes": (("chain_sum", (1, 2, 3)),),
    "items": 3,
    "budgets": (2, 4, 8),
    "batch_size": 4,
}
TINY_TRIAD = {
    "models": ("smollm2-135m-instruct",),
    "families": ("chain_sum",),
    "sizes": (("chain_sum", (2,)),),
    "items": 2,
    "samples": 2,
    "max_new_tokens": 8,
    "batch_size": 4,
}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "cslm"


@pytest.mark.slow
def test_experiment_contracts_and_cache(cache, tmp_path):
    key = jax.random.key(0)
    tiny = dataclasses.replace(complexity.QUICK, **TINY_BUDGET, n_boot=20)
    res = complexity.run(tiny, key, RunContext(complexity.NAME, tmp_path / "c"))
    assert isinstance(res, Result)
    assert res.claims
    assert res.figures
    assert "smollm2/chain_sum/kendall_tau" in res.metrics
    assert len(list(cache.glob("budget-*.npz"))) == 3
    models = _setup.Models()
    table = _setup.budget_table(tiny, key, models)
    assert models._name is None
    assert len(table) == 3  # all from the cache
    res = reliability.run(
        dataclasses.replace(reliability.QUICK, **TINY_BUDGET),
        key,
        RunContext(reliability.NAME, tmp_path / "r"),
    )
    assert "smollm2/ece" in res.metrics
    assert res.claims
    res = triad.run(
        dataclasses.replace(triad.QUICK, **TINY_TRIAD), key, RunContext(triad.NAME, tmp_path / "t")
    )
    assert "smollm2/lm_verifier_precision" in res.metrics
    assert len(res.claims) == 2
    assert len(list(cache.glob("triad-*.npz"))) == 1


def test_content_hash_takes_the_chunk_keys_nested_lists():
    # budget_chunk hashes lists of prompts and lists of option lists: an lru-cached hash
    # raised "unhashable type: 'list'" on them, which only the slow test above exercised
    parts = {"kind": "budget", "prompts": ["p1", "p2"], "options": [[" 1", " 2"], [" 3"]]}
    h = _setup._content_hash(**parts)
    assert h == _setup._content_hash(**parts)
    assert h != _setup._content_hash(**{**parts, "options": [[" 1", " 2"], [" 4"]]})
    assert h != _setup._content_hash(**{**parts, "budgets": (16,)})
