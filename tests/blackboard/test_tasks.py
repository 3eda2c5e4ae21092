"""Task generator (ground truth = what the executor reads) and the KramaBench loader."""

from __future__ import annotations

import json

import jax
import pytest

import jaxlab.blackboard as bb

from ._tables import frame, tables


def _tasks(n=12, **kw):
    return bb.generate_tasks(tables(), n, key=jax.random.key(3), **kw)


def test_sources_are_exactly_the_tables_the_executor_reads():
    tasks = _tasks(12, join_fraction=0.3)
    assert any(len(t.data_sources) >= 2 for t in tasks)
    assert any(not t.data_sources for t in tasks)
    lake = tables()
    for t in tasks:
        if not t.data_sources:
            assert t.answer == bb.NOT_IN_LAKE
            continue
        plan = bb.parse_plan(t.plan)
        assert tuple(plan.tables) == t.data_sources
        only = {n: lake[n] for n in t.data_sources}
        got = bb.execute(plan, only)  # runs on exactly its sources...
        if t.answer_type == "list_exact":
            got = [str(x) for x in got]
        elif t.answer_type == "string_exact":
            got = str(got)
        assert bb.score_answer(got, t.answer, t.answer_type) == 1.0
        for drop in t.data_sources:  # ...and on nothing less
            with pytest.raises(bb.PlanError, match="not in the lake"):
                bb.execute(plan, {n: v for n, v in only.items() if n != drop})


def test_questions_describe_content_not_table_names():
    for t in _tasks(12, join_fraction=0.3):
        for s in t.data_sources:
            assert s not in t.query
            assert tables()[s].title.rstrip(". ") in t.query


def test_generated_answers_equal_pandas():
    checked = 0
    for t in _tasks(12, join_fraction=0.3):
        plan = bb.parse_plan(t.plan) if t.plan else None
        if plan is None or plan.tables != ("shop/sales", "shop/stores") or plan.group is None:
            continue
        j = frame("shop/sales").merge(frame("shop/stores"), on="store")
        g = j.groupby(plan.group.column)[plan.agg_column.column].mean()
        assert t.answer == str(g.idxmax())
        checked += 1
    assert checked >= 1


def test_generator_is_deterministic_in_key_and_checks_inputs():
    a = [x.to_json() for x in _tasks()]
    assert a == [x.to_json() for x in _tasks()]
    b = [x.to_json() for x in bb.generate_tasks(tables(), 12, key=jax.random.key(4))]
    assert a != b
    with pytest.raises(ValueError, match="n_tasks"):
        bb.generate_tasks(tables(), 0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="join_fraction"):
        bb.generate_tasks(tables(), 3, key=jax.random.key(0), join_fraction=2.0)


def test_save_load_round_trip(tmp_path):
    tasks = _tasks()
    bb.save_tasks(tasks, tmp_path / "t.json")
    back = bb.load_tasks(tmp_path / "t.json")
    assert [t.to_json() for t in back] == [t.to_json() for t in tasks]


def test_loader_reads_a_kramabench_file(tmp_path):
    krama = [
        {
            "id": "archeology-easy-1",
            "query": "What is the average age of the samples from site A?",
            "answer": 12.5,
            "answer_type": "numeric_approximate",
            "data_sources": ["radiocarbon_database_regional.xlsx"],
            "subtasks": [
                {
                    "id": "archeology-easy-1-1",
                    "query": "Which file?",
                    "answer": "radiocarbon_database_regional.xlsx",
                    "answer_type": "string_exact",
                }
            ],
        },
        {
            "id": "legal-hard-2",
            "query": "List the states",
            "answer": ["CA", "NY"],
            "answer_type": "list_exact",
        },
    ]
    (tmp_path / "k.json").write_text(json.dumps(krama))
    got = bb.load_tasks(tmp_path / "k.json")
    assert [t.id for t in got] == ["archeology-easy-1", "legal-hard-2"]
    assert got[0].data_sources == ("radiocarbon_database_regional.xlsx",)
    assert got[0].subtasks[0]["answer_type"] == "string_exact"
    assert got[1].data_sources == ()
    assert got[1].answer == ["CA", "NY"]


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", "not valid JSON"),
        ('[{"id": 1}]', "missing fields"),
        ('[{"id": 1, "query": "q", "answer": 1, "answer_type": "vague"}]', "answer_type"),
        (
            '[{"id": 1, "query": "q", "answer": 1, "answer_type": "numeric_exact", '
            '"data_sources": "a.csv"}]',
            "data_sources",
        ),
        ("[3]", "expected an object"),
        ('"text"', "list of task objects"),
    ],
)
def test_loader_rejects_bad_files(tmp_path, content, match):
    (tmp_path / "bad.json").write_text(content)
    with pytest.raises(ValueError, match=match):
        bb.load_tasks(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="path"):
        bb.load_tasks(tmp_path / "missing.json")


def test_lexical_free_questions_share_no_word_with_their_tables():
    """#55: questions about a column's content whose relevant table's profile (what BM25
    indexes: title, columns, labels, samples, doc) shares no content word with them."""
    import re

    lake = tables()
    tasks = _tasks(12, join_fraction=0.0, absent_fraction=0.0, lexical_free_fraction=0.3)
    free = [t for t in tasks if "lexical_free" in t.tags]
    assert len(free) >= 2
    assert all(not t.tags for t in tasks if t not in free)
    stop = set(bb.LEXICAL_STOPWORDS)
    for t in free:
        words = set(re.findall(r"[a-z0-9]+", t.query.lower())) - stop
        assert words
        for s in t.data_sources:
            profile = set(re.findall(r"[a-z0-9]+", bb.profile_text(lake[s]).lower()))
            assert not words & profile, (t.query, words & profile)
        got = bb.execute(bb.parse_plan(t.plan), {n: lake[n] for n in t.data_sources})
        assert bb.score_answer(got, t.answer, t.answer_type) == 1.0


def test_tags_round_trip(tmp_path):
    tasks = _tasks(12, join_fraction=0.0, absent_fraction=0.0, lexical_free_fraction=0.3)
    bb.save_tasks(tasks, tmp_path / "t.json")
    assert [t.tags for t in bb.load_tasks(tmp_path / "t.json")] == [t.tags for t in tasks]
