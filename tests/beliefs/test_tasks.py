"""Task generators (balanced designs, determinism) and the evals-wheel readers."""

from __future__ import annotations

import collections
import json

import jax
import numpy as np
import pytest

from jaxlab import beliefs as bl
from jaxlab._core import wheel_file

TOMI = "evals/registry/data/theory_of_mind/tomi/test.jsonl"
HITOM = "evals/registry/data/theory_of_mind/hitom/hitom-multiple-choice.jsonl"


def _count(item):
    a, b = (o.strip() for o in item.options)
    sents = [s.rstrip(".") for s in item.context.split(". ")]
    n_a = sum(1 for s in sents if (a in s.split() or f"{a}'s" in s) and b not in s.split())
    n_b = sum(1 for s in sents if (b in s.split() or f"{b}'s" in s) and a not in s.split())
    return n_a, n_b


def test_scenarios_balanced_and_consistent(getkey):
    items = bl.make_scenarios(3, key=getkey())
    assert len(items) == 75
    np.testing.assert_array_equal(bl.evidence_counts(items), np.full((5, 5), 3))
    # each cell holds every kind once (3 kinds, 3 items per cell)
    per_cell = collections.defaultdict(collections.Counter)
    for it in items:
        per_cell[it.evidence][it.family] += 1
    assert all(c == {"box": 1, "door": 1, "suspect": 1} for c in per_cell.values())
    for it in items:
        ka, kb = it.evidence
        assert it.balance == ka - kb
        assert it.answer == (0 if ka > kb else 1 if kb > ka else -1)
        assert _count(it) == (ka, kb), it.context
        assert it.prompt.endswith("Answer: " + bl.SCENARIOS[it.family].prefix)
        # A is one fixed hypothesis per kind (what a belief direction can find)
        assert it.options == tuple(" " + h for h in bl.SCENARIOS[it.family].hypotheses)
    # both hypotheses appear first in the question about equally often (order randomised)
    first_is_a = [
        it.question.index(it.options[0].strip()) < it.question.index(it.options[1].strip())
        for it in items
    ]
    assert 0.25 < np.mean(first_is_a) < 0.75


def test_scenarios_deterministic_in_key(getkey):
    k = getkey()
    a = bl.make_scenarios(2, key=k, kinds=("door",), max_evidence=2)
    b = bl.make_scenarios(2, key=k, kinds=("door",), max_evidence=2)
    c = bl.make_scenarios(2, key=jax.random.fold_in(k, 1), kinds=("door",), max_evidence=2)
    assert a == b
    assert a != c
    np.testing.assert_array_equal(bl.evidence_counts(a, max_evidence=2), np.full((3, 3), 2))


def test_factual_balanced(getkey):
    items = bl.make_factual(2, key=getkey(), max_evidence=3)
    np.testing.assert_array_equal(bl.evidence_counts(items, max_evidence=3), np.full((4, 4), 2))
    for it in items:
        assert it.answer == 0
        assert it.family == "fact"
        assert _count(it) == it.evidence


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"n_per_cell": 0}, "n_per_cell"),
        ({"n_per_cell": 1, "max_evidence": 5}, "max_evidence"),
        ({"n_per_cell": 1, "kinds": ("cave",)}, "kinds"),
    ],
)
def test_scenarios_reject_bad_input(kw, match, getkey):
    with pytest.raises(ValueError, match=match):
        bl.make_scenarios(key=getkey(), **kw)


def test_item_rejects_bad_fields():
    with pytest.raises(ValueError, match="options"):
        bl.BeliefItem("c", "q", "p", (" a",), 0, None, "box")
    with pytest.raises(ValueError, match="answer"):
        bl.BeliefItem("c", "q", "p", (" a", " b"), 2, None, "box")


def test_read_tomi_and_hitom():
    tomi = bl.read_tomi(wheel_file("evals", TOMI), n=30)
    assert len(tomi) == 30
    with open(wheel_file("evals", TOMI)) as f:
        raw = [json.loads(line) for line in f][:40]
    ideals = {r["input"][0]["content"].replace("_", " "): r["ideal"] for r in raw}
    for it in tomi:
        ideal = ideals[it.context + " " + it.question]
        assert it.options[it.answer].strip() == ideal.replace("_", " ")
        assert it.evidence is None
        assert it.family == "tomi"
    assert {it.tag for it in tomi} == {"memory", "reality", "first_order", "second_order"}
    hitom = bl.read_hitom(wheel_file("evals", HITOM), n=20)
    assert len(hitom) == 20
    assert all(len(it.options) >= 2 and it.options[it.answer] for it in hitom)


def test_readers_reject_malformed(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"input": 3}\n')
    with pytest.raises(ValueError, match="line 1"):
        bl.read_tomi(p)
    with pytest.raises(ValueError, match="path"):
        bl.read_hitom(tmp_path / "missing.jsonl")


def test_experiment_items_default_and_smaller_design():
    """The beliefs experiments' items: QUICK's (k up to 4) are those of the generators'
    defaults, so its cache keys are unchanged; the smoke tier's TINY design has k up to 3."""
    from experiments.beliefs import _setup, modulation

    key = jax.random.key(0)
    quick = _setup.make_items(_setup.item_config(modulation.QUICK, "smollm2-135m-instruct"), key)
    ref = bl.make_scenarios(3, key=jax.random.fold_in(key, 0))
    ref += bl.make_factual(1, key=jax.random.fold_in(key, 1))
    ref += bl.read_tomi(wheel_file("evals", TOMI), n=24)
    assert quick == ref
    tiny = _setup.make_items(_setup.item_config(modulation.TINY, "smollm2-135m-instruct"), key)
    fams = collections.Counter(it.family for it in tiny)
    assert fams["fact"] == 16
    assert fams["tomi"] == 2
    assert sum(fams[k] for k in bl.SCENARIOS) == 16
    assert max(max(it.evidence) for it in tiny if it.evidence) == 3
    assert len(tiny) == modulation.TINY.chunk  # one chunk of model calls
