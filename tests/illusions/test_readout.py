"""The read-out on hand-built answers, the query layout, randomness and causal items."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxlab.illusions as il
from jaxlab._core import wheel_file


def _answers(s, p_min, est=(8.0, 4.0), rating=4.0):
    """Log-likelihoods of a hand-built answerer for `correlation_queries(s)`."""
    out = [np.log([1 - p, p]) for p in p_min]
    for n, e in zip((26, 13), est, strict=True):
        ll = np.full(n + 1, -50.0)
        ll[int(e)] = 0.0  # certain of the count e
        out.append(ll)
    for _ in range(2 * len(il.TRAITS)):
        ll = np.full(7, -50.0)
        ll[int(rating) - 1] = 0.0
        out.append(ll)
    return out


def test_read_correlation_hand_built_case(getkey):
    s = il.make_stimuli(key=getkey())
    qs = il.correlation_queries(s)
    assert len(qs) == 39 + 2 + 2 * len(il.TRAITS)
    assert qs[0].answers == ("Group A", "Group B")
    assert qs[39].answers[-1] == "26"
    # undesirable -> minority with 0.75, desirable with 0.25: the hard-computed phi
    p = np.where(s.desirable, 0.25, 0.75)
    r = il.read_correlation(_answers(s, p, est=(6.0, 5.0)), s)
    table = np.array([[27 * 0.75, 12 * 0.25], [27 * 0.25, 12 * 0.75]])
    a, b, c, d = table.ravel()
    phi = (a * d - b * c) / np.sqrt((a + b) * (c + d) * (a + c) * (b + d))
    assert r["phi"] == pytest.approx(phi, rel=1e-6)
    np.testing.assert_allclose(r["p_minority"], p, rtol=1e-6)
    assert r["estimate_majority"] == pytest.approx(6.0, abs=1e-6)
    assert r["minority_excess"] == pytest.approx(5 / 4 - 6 / 8, abs=1e-5)
    assert r["trait_gap"] == pytest.approx(0.0, abs=1e-6)
    # attributing by the true group: no illusion (phi of the design, 0)
    r0 = il.read_correlation(_answers(s, np.where(s.minority, 0.999, 0.001)), s)
    assert abs(r0["phi"]) < 1e-3
    with pytest.raises(ValueError, match="logliks"):
        il.read_correlation(_answers(s, p)[:-1], s)


def test_layout_round_trip_and_bad_input():
    qs = [
        [il.Query("q1?", ("a", "b")), il.Query("q2?", ("x", "y", "z"))],
        [il.Query("q3", ("u", "v"))],
    ]
    lay = il.layout_queries(None, ["c1", "c2"], qs, max_options=3)
    assert lay.prompts == ["c1", "c1", "c2"]  # q1 and q2 do not fit in 3 options together
    assert lay.continuations[1] == ["\n\nQuestion: q2?\nAnswer: " + a for a in "xyz"]
    sums = [np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0]), np.array([6.0, 7.0])]
    got = il.query_logliks(sums, lay)
    for g, e in zip(got, ([1, 2], [3, 4, 5], [6, 7]), strict=True):
        np.testing.assert_array_equal(g, e)
    with pytest.raises(ValueError, match="answers"):
        il.Query("q", ("only",))
    with pytest.raises(ValueError, match="max_options"):
        il.layout_queries(None, ["c"], [[il.Query("q", ("a", "b", "c"))]], max_options=2)
    with pytest.raises(ValueError, match="queries"):
        il.layout_queries(None, ["c", "d"], qs[:1])
    with pytest.raises(ValueError, match="sums"):
        il.query_logliks(sums[:2], lay)


def test_randomness_sequences_and_streak_slope(getkey):
    s = il.random_sequence("coin", 4000, key=getkey())
    assert set(np.unique(s).tolist()) == {0, 1}
    assert abs(float(s.mean()) - 0.5) < 0.03
    d = il.random_sequence("dice", 600, key=getkey())
    assert set(np.unique(d).tolist()) == set(range(1, 7))
    assert il.final_run_length(np.array([1, 0, 0, 0])) == 3
    assert il.final_run_length(np.array([2, 2])) == 2
    np.testing.assert_array_equal(
        il.periodic_sequence("coin", 5, np.array([0, 1])), [0, 1, 0, 1, 0]
    )
    assert il.render_sequence("walk", np.array([0, 0, 1])).endswith("100, 101, 102, 101.")
    assert "Heads, Tails" in il.render_sequence("coin", np.array([0, 1]))
    r = np.array([1, 2, 3, 4, 1, 2])
    p = 0.5 - 0.05 * r + 0.01 * np.array([1, -1, 1, -1, 0, 0])
    slope = il.streak_slope(r, p)
    import scipy.stats

    assert slope == pytest.approx(scipy.stats.linregress(r, p).slope, rel=1e-10)
    assert slope < 0  # gambler's fallacy direction
    with pytest.raises(ValueError, match="kind"):
        il.random_sequence("roulette", 3, key=getkey())
    with pytest.raises(ValueError, match="period"):
        il.periodic_sequence("coin", 4, np.array([0, 2]))
    with pytest.raises(ValueError, match="run_lengths"):
        il.streak_slope(np.array([2, 2]), np.array([0.1, 0.2]))


def test_causal_items(getkey):
    pairs = il.causal_pairs(20, key=getkey())
    assert len(set(pairs)) == 20
    ctx, q = il.causal_query(*pairs[0], "temporal")
    assert ctx.startswith(pairs[0][0][0].upper())
    assert q.answers == ("Yes", "No")
    with pytest.raises(ValueError, match="framing"):
        il.causal_query("a", "b", "magic")
    items = il.read_corr2cause(wheel_file("evals", "corr2cause/corr2cause.jsonl"), max_variables=3)
    assert len(items) == 102
    assert {i.n_variables for i in items} == {2, 3}
    assert {i.label for i in items} == {"entailment", "contradiction", "neutral"}
    assert items[0].premise.startswith("Suppose there is a closed system of 2 variables")


def test_read_corr2cause_rejects_malformed_file(tmp_path):
    bad = tmp_path / "c.jsonl"
    bad.write_text('{"input": [], "ideal": "Answer: neutral"}\n')
    with pytest.raises(ValueError, match="line 1"):
        il.read_corr2cause(bad)


def test_baselines_have_sources():
    for row in il.HUMAN_BASELINES:
        assert row.source
        assert row.task
        assert row.measure
        assert row.value is None or 0 <= row.value <= 1
    assert il.human_baseline("gvt_hot_hand_fans").value == 0.91
    with pytest.raises(ValueError, match="name"):
        il.human_baseline("nope")


@pytest.mark.slow
def test_layout_scores_equal_one_query_per_item():
    # the shared-prompt layout gives each query's log-likelihoods as scoring it alone
    import jaxlab.lm as lm

    model, tok = lm.load("smollm2")
    s = il.make_stimuli(key=jax.random.key(0), counts=((2, 1), (1, 1)))
    qs = il.correlation_queries(s, traits=())[:3]
    lay = il.layout_queries(tok, [s.context], [qs], max_options=4)
    got = il.query_logliks(lm.score(model, tok, lay.prompts, lay.continuations).sum, lay)
    for q, g in zip(qs, got, strict=True):
        one = il.layout_queries(tok, [s.context], [[q]])
        ref = lm.score(model, tok, one.prompts, one.continuations).sum[0]
        np.testing.assert_allclose(g, ref, atol=2e-4)
