"""Agents with scripted "models": an oracle that knows the truth, BM25 by hand, planner."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import jaxlab.blackboard as bb

from ._tables import tables


class TruthModel(bb.AgentModel):
    """Likelihood 0 for an option naming a true table of the request in the prompt, else -1;
    the request-free (base) prompt gives -0.5 to every option, so PMI is +-0.5."""

    name = "truth"

    def __init__(self, truth: dict[str, list[str]], lake: bb.Lake):
        self.truth, self.lake = truth, lake

    def option_scores(self, prompt, options):
        for q, names in self.truth.items():
            if q in prompt:
                titles = [self.lake.tables[n].title.rstrip(". ") for n in names]
                return np.array([0.0 if any(t in o for t in titles) else -1.0 for o in options])
        return np.full(len(options), -0.5)

    def count_tokens(self, text):
        return len(text.split())


def _lake():
    ts = tables()
    parts = {"shop": ("shop/cities", "shop/sales", "shop/stores"), "zoo": ("zoo/animals",)}
    return bb.Lake(ts, parts)


def test_oracle_model_volunteers_exactly_the_right_partitions_f1_one():
    lake = _lake()
    tasks = bb.generate_tasks(lake.tables, 10, key=jax.random.key(1), join_fraction=0.3)
    model = TruthModel({t.query: list(t.data_sources) for t in tasks}, lake)
    cfg = bb.DiscoveryConfig(threshold=0.0, margin=0.1)
    f1s = []
    for t in tasks:
        d = bb.blackboard(lake, t.query, model, cfg)
        f1s.append(bb.discovery_prf(d.tables, t.data_sources)[2])
        volunteers = {m.split(":")[0] for m in d.messages if "VOLUNTEER" in m}
        assert volunteers == {lake.partition_of(s) for s in t.data_sources}
    assert f1s == [1.0] * len(tasks)


def test_a_model_that_knows_nothing_abstains_and_scores_zero():
    lake = _lake()
    tasks = [t for t in bb.generate_tasks(lake.tables, 6, key=jax.random.key(1)) if t.data_sources]
    model = TruthModel({}, lake)  # PMI 0 everywhere: nobody volunteers
    d = bb.blackboard(lake, tasks[0].query, model, bb.DiscoveryConfig())
    assert d.tables == ()
    assert bb.discovery_prf(d.tables, tasks[0].data_sources)[2] == 0.0


def test_master_slave_misses_what_its_routing_misses():
    lake = _lake()
    tasks = [
        t
        for t in bb.generate_tasks(lake.tables, 10, key=jax.random.key(1))
        if t.data_sources and t.data_sources[0].startswith("zoo")
    ]

    class BlindRouter(TruthModel):  # knows the tables, not the partition descriptions
        def option_scores(self, prompt, options):
            s = super().option_scores(prompt, options)
            return np.where(["(columns:" in o for o in options], s, -0.5)

    model = BlindRouter({t.query: list(t.data_sources) for t in tasks}, lake)
    # all descriptions tie, so the master routes to the first partition, "shop"
    d = bb.master_slave(lake, tasks[0].query, model, bb.DiscoveryConfig(route_k=1))
    assert d.messages[0] == "central: ROUTE to ['shop']"
    assert d.tables == ()


def test_single_agent_truncation_is_reported():
    lake = _lake()
    model = TruthModel({}, lake)
    d = bb.single_agent(lake, "anything", model, bb.DiscoveryConfig(context_tokens=40))
    assert 0 < d.visible < 1
    assert "of 4 tables fit in 40 tokens" in d.messages[0]


def test_bm25_against_a_hand_computed_score():
    docs = ["apple apple banana", "banana cherry", "cherry cherry cherry date"]
    idx = bb.BM25(docs, k1=1.5, b=0.75)
    # query "apple": only doc 0; N=3, n=1 -> idf = ln(1 + 2.5/1.5); |d0| = 3, avgdl = 3
    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    want = idf * 2 * 2.5 / (2 + 1.5 * (1 - 0.75 + 0.75 * 3 / 3))
    assert idx.scores("apple") == pytest.approx([want, 0.0, 0.0])
    # "cherry": doc1 tf 1 |d|=2, doc2 tf 3 |d|=4
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    s1 = idf * 1 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 2 / 3))
    s2 = idf * 3 * 2.5 / (3 + 1.5 * (0.25 + 0.75 * 4 / 3))
    assert idx.scores("Cherry!") == pytest.approx([0.0, s1, s2])
    with pytest.raises(ValueError, match="documents"):
        bb.BM25([])
    with pytest.raises(ValueError, match="^b: "):
        bb.BM25(["a"], b=2.0)
    with pytest.raises(ValueError, match="^k1: "):
        bb.BM25(["a"], k1=-1.0)


class SlotModel(bb.AgentModel):
    """Prefers the option that shares the most words with the question in the prompt."""

    name = "slots"

    def option_scores(self, prompt, options):
        words = set(prompt.lower().replace("'", " ").replace("?", " ").split())
        return np.array(
            [
                len(words & set(o.lower().replace("(", " ").replace(")", " ").split()))
                / (1 + len(o.split()))
                for o in options
            ]
        )

    def count_tokens(self, text):
        return len(text.split())


def test_planner_output_goes_through_the_strict_parser_and_answers():
    lake = _lake()
    q = (
        "In the data on: Body mass and leg count of zoo animals, how many records have "
        "'legs' greater than 3?"
    )
    res = bb.answer_query(q, ["zoo/animals"], lake, SlotModel())
    assert isinstance(res, bb.QueryAnswer)
    assert bb.parse_plan(res.plan).where[0].value == 3.0
    assert res.tokens > 0
    assert res.ok
    assert res.reason == ""
    # zoo/animals' legs in tests/blackboard/_tables.py: 4, 2, 6, 4, 2 -> 3 rows above 3
    assert res.answer == 3.0
    assert bb.answer_query(q, [], lake, SlotModel()).answer == bb.NOT_IN_LAKE


def test_answer_query_says_why_there_is_no_answer():
    """Issue 60: the PlanError's reason is returned, not swallowed into (None, "", 0)."""
    lake = _lake()
    q = "In the data on: zoo animals and shop sales, what is the mean 'mass'?"
    res = bb.answer_query(q, ["zoo/animals", "shop/sales"], lake, SlotModel())
    assert res.answer is None
    assert not res.ok
    assert res.reason == (
        "plan: tables: no shared key column between 'zoo/animals' and 'shop/sales'"
    )
    res = bb.answer_query(q, ["shop/cities"], lake, SlotModel())
    assert res.reason == "plan: tables: no numeric column to aggregate"
    with pytest.raises(ValueError, match="found: tables not in the lake"):
        bb.answer_query(q, ["zoo/nope"], lake, SlotModel())


def test_lake_checks_its_partitions():
    with pytest.raises(ValueError, match="partitions"):
        bb.Lake(tables(), {"shop": ("shop/sales",)})
    with pytest.raises(ValueError, match="table"):
        _lake().partition_of("nope")
    with pytest.raises(ValueError, match="n_tables"):
        _lake().subset(0, key=jax.random.key(0))


def test_score_cache_key_names_the_weights_and_the_code_version(tmp_path):
    """#55: the score cache is keyed on the weights' hash and a code version, not the
    model's alias only; the same identity reads the same file."""

    def path(**kw):
        m = bb.LMAgentModel(None, None, name="smollm2", cache_dir=tmp_path, **kw)
        return m._path("Question: q\nThe data set needed to answer it:", " a table")

    base = path(weights="aa" * 32, version="1")
    assert base == path(weights="aa" * 32, version="1")
    assert base != path(weights="bb" * 32, version="1")
    assert base != path(weights="aa" * 32, version="2")
    with pytest.raises(ValueError, match="weights"):
        bb.LMAgentModel(None, None, name="smollm2", cache_dir=tmp_path, weights="", version="1")


def test_token_matched_baselines_master_slave_all_and_bm25_rerank():
    """#55: master-slave over every partition finds what the blackboard finds under an
    oracle model; BM25 reranked by the agents within the blackboard's token budget spends
    no more than that budget and, given all of it, sees every table."""
    lake = _lake()
    tasks = [t for t in bb.generate_tasks(lake.tables, 10, key=jax.random.key(1)) if t.data_sources]
    model = TruthModel({t.query: list(t.data_sources) for t in tasks}, lake)
    cfg = bb.DiscoveryConfig(threshold=0.0, margin=0.1, bm25_threshold=0.0)
    index = bb.bm25_index(lake)
    for t in tasks:
        board = bb.blackboard(lake, t.query, model, cfg)
        allp = bb.master_slave(lake, t.query, model, cfg, route_k=len(lake.partitions))
        assert allp.tables == board.tables
        budget = bb.blackboard_tokens(lake, t.query, model, cfg)
        assert budget == board.tokens
        rr = bb.bm25_rerank(lake, t.query, index, model, cfg, budget=budget)
        assert 0 < rr.tokens <= budget
        assert set(rr.tables) == set(t.data_sources)
        small = bb.bm25_rerank(lake, t.query, index, model, cfg, budget=rr.tokens // 3)
        assert small.tokens <= rr.tokens // 3
    nothing = bb.bm25_rerank(lake, tasks[0].query, index, model, cfg, budget=1)
    assert nothing.tables == ()
    assert nothing.tokens == 0
    methods = ("blackboard", "master_slave_all", "bm25_rerank")
    found = bb.run_methods(lake, tasks, model, cfg, methods=methods, progress=False)
    for m in ("master_slave_all", "bm25_rerank"):
        assert m in found
    for b, r in zip(found["blackboard"], found["bm25_rerank"], strict=True):
        assert r.tokens <= b.tokens
