"""The routing experiment's contract and its text-table job: the evals items parse, the
answer rules split tokens and latency consistently, and (slow) a tiny table built with
SmolLM2 equals a direct `lm.score` of the same prompts and is read back from the cache."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from experiments._harness._registry import validate_module
from experiments.routing import _sources, _text_table, text
from jaxlab import routing
from jaxlab.data import logiqa_items


def test_experiment_contract():
    validate_module(text)
    assert text.QUICK.models == _text_table.TableConfig().models
    # the experiment's table fields are the table config's (an empty `omit` left out, as
    # in the manifests written before it existed)
    assert set(_text_table.table_fields(text.QUICK)) == {
        f.name for f in dataclasses.fields(_text_table.TableConfig)
    } - {"omit"}
    assert "omit" in _text_table.table_fields(
        dataclasses.replace(text.QUICK, omit=_text_table.TABLE_2K.omit)
    )


def test_items_parse_and_shots_are_not_queries():
    queries, shots = _sources.source_items((("medmcqa", 5), ("logiqa", 3), ("reclor", 3)))
    assert [q["group"] for q in queries] == ["medmcqa"] * 5 + ["logiqa"] * 3 + ["reclor"] * 3
    for q in queries:
        assert len(q["options"]) == 4
        assert 0 <= q["answer"] < 4
        assert q["prompt"].endswith("Answer:")
    for g, s in shots.items():
        assert len(s) == _sources.N_SHOTS
        assert all(x["prompt"] not in {q["prompt"] for q in queries} for x in s), g
    p0, o0 = _text_table.prompt_inputs("zero_shot", queries[0], shots)
    p1, o1 = _text_table.prompt_inputs("few_shot", queries[0], shots)
    assert o0 == o1
    assert len(o0) == 8
    assert o0[4:] == [" A", " B", " C", " D"]
    assert p1.endswith(p0)
    assert len(p1) > len(p0)
    p2, o2 = _text_table.prompt_inputs("think", queries[0], shots)
    assert o2 == o0
    assert p2 == p0.removesuffix("Answer:") + "Let's think step by step."
    with pytest.raises(ValueError, match="prompt"):
        _text_table.prompt_inputs("cot", queries[0], shots)


def test_logiqa_items_parse_the_evals_file():
    """The one LogiQA reader (jaxlab.data, used by routing and lm_pool): four clean options,
    every answer letter, the wheel's rows in order, and sizes refused before reading."""
    items = logiqa_items(300)
    assert len(items) == 300
    assert {it["answer"] for it in items} == {0, 1, 2, 3}
    assert not any(o.startswith(("A.", "B.", "C.", "D.")) for it in items for o in it["options"])
    assert all(it["prompt"].endswith("Answer:") for it in items)
    assert logiqa_items(5) == items[:5]
    assert [q["prompt"] for q in _sources._logiqa(3)] == [it["prompt"] for it in items[:3]]
    with pytest.raises(ValueError, match="LogiQA file has"):
        logiqa_items(99_999)
    for bad in (0, -1, 10**7, 2.0):
        with pytest.raises(ValueError, match="n: expected"):
            logiqa_items(bad)


def test_answer_rules_share_tokens_and_latency():
    rng = np.random.default_rng(0)
    out = {
        "sum": rng.normal(size=(3, 8)),
        "mean": rng.normal(size=(3, 8)),
        "input_tokens": np.array([10, 20, 30]),
        "option_tokens": rng.integers(1, 6, (3, 8)),
        "latency": np.array([1.0, 2.0, 3.0]),
    }
    ch_sum, n_sum, lat_sum = _text_table._rule("sum", out)
    ch_mean, _, lat_mean = _text_table._rule("mean", out)
    ch_let, n_let, lat_let = _text_table._rule("letter", out)
    np.testing.assert_array_equal(ch_sum, np.argmax(out["sum"][:, :4], 1))
    np.testing.assert_array_equal(ch_let, np.argmax(out["sum"][:, 4:], 1))
    np.testing.assert_array_equal(ch_mean, np.argmax(out["mean"][:, :4], 1))
    np.testing.assert_array_equal(n_sum + n_let, out["option_tokens"].sum(1))
    # text and letter continuations (with their shares of the prompt) split the latency
    np.testing.assert_allclose(lat_sum + lat_let, out["latency"])
    np.testing.assert_allclose(lat_sum, lat_mean)
    # think: the generated tokens are output tokens of every rule; the split still adds up
    gen = {**out, "generated_tokens": np.array([5, 0, 32])}
    _, g_sum, l_sum = _text_table._rule("sum", gen)
    _, g_let, l_let = _text_table._rule("letter", gen)
    np.testing.assert_array_equal(g_sum, n_sum + gen["generated_tokens"])
    np.testing.assert_array_equal(g_let, n_let + gen["generated_tokens"])
    np.testing.assert_allclose(l_sum + l_let, out["latency"])


@pytest.mark.slow
def test_tiny_table_equals_direct_scores(tmp_path, monkeypatch):
    from jaxlab import lm

    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path))
    cfg = _text_table.TableConfig(models=("smollm2-135m-instruct",), per_source=(("medmcqa", 3),))
    cfg = dataclasses.replace(cfg, chunk=3)
    t = _text_table.build_text_table(cfg)
    assert isinstance(t, routing.RoutingTable)
    assert t.quality.shape == (3, 3)
    queries, shots = _sources.source_items(cfg.per_source)
    model, tok = lm.load("smollm2-135m-instruct")
    inputs = [_text_table.prompt_inputs("zero_shot", q, shots) for q in queries]
    sc = lm.score(model, tok, [p for p, _ in inputs], [o for _, o in inputs], batch_size=1)
    answers = np.array([q["answer"] for q in queries])
    np.testing.assert_array_equal(t.quality[:, 0], [np.argmax(s[:4]) for s in sc.sum] == answers)
    np.testing.assert_array_equal(t.quality[:, 2], [np.argmax(s[4:]) for s in sc.sum] == answers)
    n_in = np.array([len(tok.encode(p)) for p, _ in inputs])
    n_params = lm.MODELS["smollm2-135m-instruct"].n_params
    np.testing.assert_allclose(t.cost[:, 0], 2 * n_params * (n_in + t.output_tokens[:, 0]) / 1e9)
    # the committed QUICK table holds the same outcomes for these first items
    committed = _text_table.text_table(_text_table.TableConfig())
    np.testing.assert_array_equal(committed.quality[:3, :3], t.quality)
    # a second build reads the content-hashed cache (same table, no model call)
    monkeypatch.setattr(lm, "score", None)
    u = _text_table.build_text_table(cfg)
    np.testing.assert_array_equal(u.quality, t.quality)
    np.testing.assert_array_equal(u.latency, t.latency)


@pytest.mark.slow
def test_think_candidates_equal_one_item_at_a_time_generation_and_scores(tmp_path, monkeypatch):
    """The think pass (one batched greedy generation per chunk, then batched scoring) equals
    generating and scoring each item alone (batch 1) with the public `lm` calls."""
    from jaxlab import lm

    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path))
    cfg = _text_table.TableConfig(
        models=("smollm2-135m-instruct",),
        prompts=("think",),
        per_source=(("socialiqa", 2), ("quartz", 2)),
    )
    t = _text_table.build_text_table(cfg)
    queries, shots = _sources.source_items(cfg.per_source)
    model, tok = lm.load("smollm2-135m-instruct")
    for i, q in enumerate(queries):
        first, options = _text_table.prompt_inputs("think", q, shots)
        text = lm.generate_text(model, tok, first, max_new_tokens=_text_table.THINK_TOKENS)
        second = f"{first} {text.strip()}\nAnswer:"
        s = lm.score(model, tok, [second], [options], batch_size=1).sum[0]
        k = len(q["options"])
        right = [np.argmax(s[:k]) == q["answer"], np.argmax(s[k:]) == q["answer"]]
        assert [t.quality[i, 0], t.quality[i, 2]] == right, i
        n_gen = t.output_tokens[i, 2] - k  # letter rule: K one-token letters + generated
        assert 0 < n_gen <= _text_table.THINK_TOKENS
        assert t.input_tokens[i, 0] == len(tok.encode(first))


def test_committed_quick_table():
    cfg = _text_table.TableConfig()
    t = _text_table.text_table(cfg)
    n = sum(k for _, k in cfg.per_source)
    assert t.quality.shape == (n, len(cfg.models) * len(cfg.prompts) * len(cfg.rules))
    assert set(np.unique(t.quality)) <= {0.0, 1.0}
    from jaxlab import lm

    for j, name in enumerate(t.candidates):
        model = name.split(":")[0]
        tokens = t.input_tokens[:, j] + t.output_tokens[:, j]
        np.testing.assert_allclose(t.cost[:, j], 2 * lm.MODELS[model].n_params * tokens / 1e9)
    # the letter rule reads 4 one-token continuations; the text rules read the options
    letter = [j for j, c in enumerate(t.candidates) if c.endswith(":letter")]
    assert np.all(t.output_tokens[:, letter] == 4)
    assert t.meta["config"] == _text_table.table_fields(_text_table.TableConfig())


def test_socialiqa_and_quartz_items_format_back_to_the_raw_rows():
    """Parsing is checked by its inverse: each item, written back in the file's own layout,
    is the raw row up to whitespace (question, options, gold letter), for every row of
    both files."""
    import json

    from jaxlab.data import wheel_file

    for n, items, rel, layout in (
        (
            2224,
            _sources.socialiqa_items,
            _sources._SOCIALIQA,
            "{q} A: {o[0]}; B: {o[1]}; C: {o[2]}.",
        ),
        (3860, _sources.quartz_items, _sources._QUARTZ, "{q}\n\n A: {o[0]}\n B: {o[1]}"),
    ):
        path = wheel_file("evals", rel, pin=_sources._PIN)
        raw = [json.loads(x) for x in path.read_text(encoding="utf-8").split("\n") if x.strip()]
        parsed = items(n)
        assert len(raw) == len(parsed) == n
        for row, it in zip(raw, parsed, strict=True):
            # equal up to whitespace (the parser strips each option)
            written = layout.format(q=it["question"], o=it["options"])
            assert "".join(written.split()) == "".join(row["input"][-1]["content"].split())
            assert "ABC"[it["answer"]] == row["ideal"]
            assert it["prompt"].startswith(it["question"] + "\nA. ")
            assert it["prompt"].endswith("\nAnswer:")
        with pytest.raises(ValueError, match="requested"):
            items(n + 1)


def test_lettered_items_refuse_a_malformed_row(tmp_path):
    path = tmp_path / "bad.jsonl"
    rows = [
        {"input": [{"role": "user", "content": "Q? A: x; B: y; C: z."}], "ideal": "B"},
        {"input": [{"role": "user", "content": "Q? A: x; B: y."}], "ideal": "A"},
    ]
    path.write_text("\n".join(__import__("json").dumps(r) for r in rows))
    pattern = r"^(.*) A: (.*); B: (.*); C: (.*)\.$"
    assert _sources._lettered_items(path, 1, pattern, "ABC", "toy")[0]["answer"] == 1
    with pytest.raises(ValueError, match=r"bad\.jsonl: malformed toy row 1"):
        _sources._lettered_items(path, 2, pattern, "ABC", "toy")


@pytest.mark.parametrize("size", [1, 3, 20])
def test_chunks_cover_queries_in_order_without_mixing_option_counts(size):
    rng = np.random.default_rng(size)
    ks = np.repeat(rng.integers(2, 5, 6), rng.integers(1, 30, 6))
    queries = [{"options": ["o"] * int(k)} for k in ks]
    parts = _text_table._chunks(queries, size)
    assert [i for p in parts for i in range(p.start, p.stop)] == list(range(len(queries)))
    for p in parts:
        assert 0 < p.stop - p.start <= size
        assert len(set(ks[p])) == 1
        # a chunk starts at a multiple of size or where the option count changes
        assert p.start % size == 0 or ks[p.start] != ks[p.start - 1]
    # uniform option counts: the plain fixed-size chunks (the QUICK table's cache keys)
    same = [{"options": ["o"] * 4}] * len(queries)
    assert _text_table._chunks(same, size) == [
        slice(s, min(s + size, len(same))) for s in range(0, len(same), size)
    ]


def test_committed_2k_table_has_the_issue_size_and_agrees_with_the_quick_table():
    t = _text_table.text_table(_text_table.TABLE_2K)
    cfg = _text_table.TABLE_2K
    n = sum(k for _, k in cfg.per_source)
    assert n >= 2000
    passes = len(cfg.models) * len(cfg.prompts) - len(cfg.omit)
    assert t.quality.shape == (n, passes * len(cfg.rules))
    assert [c.rsplit(":", 1)[0] for c in t.candidates[:: len(cfg.rules)]] == [
        f"{m}:{p}" for m, p in _text_table.table_passes(cfg)
    ]
    assert t.n_candidates >= 10
    assert t.meta["config"] == _text_table.table_fields(cfg)
    sizes = dict(cfg.per_source)
    assert [int(np.sum(t.groups == g)) for g in range(len(t.group_names))] == [
        sizes[name] for name in t.group_names
    ]
    from jaxlab import lm

    for j, name in enumerate(t.candidates):
        model = name.split(":")[0]
        tokens = t.input_tokens[:, j] + t.output_tokens[:, j]
        np.testing.assert_allclose(t.cost[:, j], 2 * lm.MODELS[model].n_params * tokens / 1e9)
    # the letter rule reads K one-token letters: 4, 3 and 2 options per source
    k = {"medmcqa": 4, "socialiqa": 3, "quartz": 2}
    letter = [j for j, c in enumerate(t.candidates) if c.endswith(":letter")]
    want = np.array([k[t.group_names[g]] for g in t.groups])
    for j in letter:
        np.testing.assert_array_equal(t.output_tokens[:, j], want)
    # the MedMCQA zero-shot outcomes are the QUICK table's (same items, same scores)
    quick = _text_table.text_table(_text_table.TableConfig())
    for j, name in enumerate(quick.candidates):
        np.testing.assert_array_equal(
            t.quality[:299, t.candidates.index(name)], quick.quality[:299, j]
        )


def test_table_passes_leave_out_the_omitted_pairs_and_reject_unknown_ones():
    cfg = _text_table.TableConfig(
        models=("a", "b"), prompts=("zero_shot", "few_shot"), omit=(("b", "few_shot"),)
    )
    assert _text_table.table_passes(cfg) == [
        ("a", "zero_shot"),
        ("a", "few_shot"),
        ("b", "zero_shot"),
    ]
    # an empty omit leaves the manifest fields as before it existed (committed QUICK table)
    assert "omit" not in _text_table.table_fields(_text_table.TableConfig())
    assert _text_table.table_fields(cfg)["omit"] == [["b", "few_shot"]]
    with pytest.raises(ValueError, match="omit"):
        _text_table.table_passes(dataclasses.replace(cfg, omit=(("c", "think"),)))
