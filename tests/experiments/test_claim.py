"""The claims protocol (`experiments._harness._claim`): verdicts of each constructor, the
named null, preconditions, Holm's correction in `best_of` (against statsmodels), legacy
claims, and the runner's metrics / claims records."""

import json
import math
from typing import Any

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from experiments._harness import (
    Claim,
    Estimate,
    Precondition,
    Result,
    all_of,
    at_least,
    at_most,
    at_scale,
    best_of,
    equivalent,
    excludes,
    gated,
    noninferior,
    superior,
    t_mean,
)
from experiments._harness._runner import _claims_json, flatten_metrics

KW: dict[str, Any] = {"claim": "a claim", "paper": "the paper's value"}


def _est(lo, hi, value=None, level=0.9):
    return Estimate((lo + hi) / 2 if value is None else value, lo, hi, level, "t", 10)


# ---------------------------------------------------------------- verdicts


@pytest.mark.parametrize(
    ("lo", "hi", "higher", "want"),
    [
        (0.1, 0.3, True, "holds"),
        (-0.3, -0.1, True, "fails"),
        (-0.1, 0.3, True, "inconclusive"),
        (-0.3, -0.1, False, "holds"),  # an error: lower is better
        (0.1, 0.3, False, "fails"),
    ],
)
def test_superior_verdicts(lo, hi, higher, want):
    c = superior(_est(lo, hi), "A", "B", higher_is_better=higher, **KW)
    assert c.verdict == want
    assert c.holds == (want == "holds")
    assert (c.kind, c.subject, c.null, c.margin, c.reference) == ("superior", "A", "B", 0.0, 0.0)
    assert c.alpha == pytest.approx(0.05)  # one end of a 90% interval: one-sided 5%


def test_superior_with_a_margin():
    assert superior(_est(0.1, 0.3), "A", "B", 0.2, **KW).verdict == "inconclusive"
    assert superior(_est(0.1, 0.2), "A", "B", 0.2, **KW).verdict == "fails"


@pytest.mark.parametrize(
    ("lo", "hi", "higher", "want"),
    [
        (-0.04, 0.1, True, "holds"),
        (-0.2, -0.06, True, "fails"),
        (-0.08, 0.1, True, "inconclusive"),
        (-0.1, 0.04, False, "holds"),  # an error metric: +0.04 is within the 0.05 margin
        (0.06, 0.2, False, "fails"),
        (-0.1, 0.08, False, "inconclusive"),
    ],
)
def test_noninferior_verdicts(lo, hi, higher, want):
    c = noninferior(_est(lo, hi), "A", "B", 0.05, higher_is_better=higher, **KW)
    assert c.verdict == want
    assert "null: A worse than B by >= 0.05" in c.test


@pytest.mark.parametrize(
    ("lo", "hi", "want"),
    [
        (-0.04, 0.04, "holds"),
        (0.06, 0.2, "fails"),
        (-0.2, -0.06, "fails"),
        (-0.04, 0.2, "inconclusive"),
    ],
)
def test_equivalent_verdicts(lo, hi, want):
    assert equivalent(_est(lo, hi), "A", "B", 0.05, **KW).verdict == want


def test_bars_and_exclusion():
    assert at_least(_est(0.8, 0.9), 0.75, null="bar", **KW).verdict == "holds"
    assert at_least(_est(0.6, 0.7), 0.75, null="bar", **KW).verdict == "fails"
    assert at_least(_est(0.7, 0.8), 0.75, null="bar", **KW).verdict == "inconclusive"
    assert at_most(Estimate.point(1e-12, n=4), 1e-10, null="tol", **KW).verdict == "holds"
    assert at_most(Estimate.point(1e-9, n=4), 1e-10, null="tol", **KW).verdict == "fails"
    pt = at_most(Estimate.point(1e-12), 1e-10, null="tol", **KW)
    assert pt.alpha == 0
    assert pt.test.startswith("point value")
    assert excludes(_est(0.1, 0.3), 0.0, null="no effect", **KW).verdict == "holds"
    # without a margin an interval around the null is only inconclusive; with one it fails
    assert excludes(_est(-0.01, 0.01), 0.0, null="no effect", **KW).verdict == "inconclusive"
    c = excludes(_est(-0.01, 0.01), 0.0, null="no effect", margin=0.05, **KW)
    assert c.verdict == "fails"
    assert excludes(_est(0.1, 0.3, level=0.95), 0.0, null="x", **KW).alpha == pytest.approx(0.05)


def test_a_claim_without_a_named_null_cannot_be_built():
    with pytest.raises(ValueError, match="baseline"):
        superior(_est(0.1, 0.3), "A", "", **KW)
    with pytest.raises(ValueError, match="null"):
        at_least(_est(0.8, 0.9), 0.5, null="", **KW)
    with pytest.raises(ValueError, match="null"):
        Claim(
            "c", "p", "m", kind="superior", estimate=_est(0.1, 0.3), verdict="holds",
            margin=0.0, alpha=0.05, test="t",
        )  # fmt: skip
    with pytest.raises(ValueError, match="margin"):
        noninferior(_est(0.1, 0.3), "A", "B", 0.0, **KW)  # a margin of 0 is superiority
    with pytest.raises(ValueError, match="verdict"):
        Claim(
            "c", "p", "m", kind="superior", estimate=_est(0.1, 0.3), verdict="yes", null="B",
            margin=0.0, alpha=0.05, test="t",
        )  # fmt: skip


def test_a_non_finite_interval_is_untestable():
    nan = float("nan")
    c = superior(Estimate(nan, nan, nan, 0.9, "t", 1), "A", "B", **KW)
    assert c.verdict == "untestable"
    assert c.gate.name == "finite estimate"
    assert not c.holds


# ---------------------------------------------------------------- preconditions


def test_gated():
    c = superior(_est(0.1, 0.3), "A", "B", **KW)
    failed = gated(c, Precondition("model solves the task", False, "accuracy 0.31 < 0.8"))
    assert failed.verdict == "untestable"
    assert not failed.holds
    assert failed.gate.name == "model solves the task"
    assert "accuracy 0.31" in failed.measured
    passed = gated(c, Precondition("model solves the task", True, "accuracy 0.93"))
    assert passed.verdict == "holds"
    assert passed.gate.passed
    again = gated(failed, Precondition("second gate", False, "x"))
    assert again.gate.name == "model solves the task"  # the first failed gate is kept
    with pytest.raises(ValueError, match="protocol"):
        gated(Claim("c", "p", "m", True), Precondition("g", True))


def test_at_scale_makes_a_decisive_verdict_below_scale_inconclusive():
    from experiments._harness._report import verdict_text

    below = Precondition("paper scale: >= 4000 steps", False, "300 steps")
    at = Precondition("paper scale: >= 4000 steps", True, "4000 steps")
    holds = superior(_est(0.1, 0.3), "A", "B", **KW)
    fails = superior(_est(-0.3, -0.1), "A", "B", **KW)
    spans = superior(_est(-0.1, 0.3), "A", "B", **KW)
    for c in (holds, fails):
        small = at_scale(c, below)
        assert small.verdict == "inconclusive"
        assert not small.holds
        assert small.estimate == c.estimate  # the interval is kept
        assert f"the interval {c.verdict}" in small.measured
        record = small.as_dict("P0")
        assert record["scale"] == below.as_dict()
        assert verdict_text(record) == (
            "inconclusive (below the paper's scale: paper scale: >= 4000 steps: 300 steps)"
        )
        assert at_scale(c, at).verdict == c.verdict  # at scale the verdict stands
    assert at_scale(spans, below).verdict == "inconclusive"
    untestable = gated(holds, Precondition("gate", False, "x"))
    assert at_scale(untestable, below).verdict == "untestable"
    with pytest.raises(ValueError, match="scale"):
        Claim(**{**holds.__dict__, "scale": below})  # a decisive verdict below scale
    with pytest.raises(ValueError, match="protocol"):
        at_scale(Claim("c", "p", "m", True), at)


def test_verdict_text_names_a_failed_gate_by_name_and_measurement():
    from experiments._harness._report import verdict_text

    c = gated(superior(_est(0.1, 0.3), "A", "B", **KW), Precondition("solves it", False, "0.3"))
    assert verdict_text(c.as_dict("P0")) == "untestable (solves it: 0.3)"


# ---------------------------------------------------------------- all_of, best_of


def test_all_of_is_an_intersection_union():
    h = superior(_est(0.1, 0.3), "A", "B", **KW)
    weak = superior(_est(0.01, 0.3), "A", "C", **KW)
    i = superior(_est(-0.1, 0.3), "A", "D", **KW)
    f = superior(_est(-0.3, -0.1), "A", "E", **KW)
    both = all_of({"vs B": h, "vs C": weak}, **KW)
    assert both.verdict == "holds"
    assert both.null == "B, C"
    assert both.estimate == weak.estimate  # the part closest to failing
    assert all_of({"vs B": h, "vs D": i}, **KW).verdict == "inconclusive"
    assert all_of({"vs B": h, "vs D": i, "vs E": f}, **KW).verdict == "fails"
    assert [p[0] for p in all_of({"vs B": h, "vs D": i}, **KW).parts] == ["vs B", "vs D"]


def _t_candidate(x):
    def make(level):
        return superior(t_mean(x, level), "framing", "no effect", **KW)

    return make


def _with_t(n, t, rng):
    """n values whose one-sample t statistic is exactly t."""
    z = rng.normal(size=n)
    z = (z - z.mean()) / z.std(ddof=1)
    return z + t / math.sqrt(n)


def test_best_of_applies_holm_and_says_so():
    rng = np.random.default_rng(0)
    # one framing at t = 2.0 (one-sided p ~ 0.038 at df 9): holds alone at alpha 0.05,
    # not after Holm over three framings (needs p <= 0.05 / 3)
    cands = {
        "layer 3": _t_candidate(_with_t(10, 2.0, rng)),
        "layer 5": _t_candidate(_with_t(10, 0.3, rng)),
        "layer 7": _t_candidate(_with_t(10, -0.5, rng)),
    }
    unadjusted = cands["layer 3"](0.9)
    assert unadjusted.verdict == "holds"
    best = best_of(cands, level=0.9)
    assert best.verdict == "inconclusive"
    assert "Holm over the 3" in best.adjustment
    assert "layer 3 unadjusted: holds" in best.adjustment
    assert best.alpha == pytest.approx(0.05)
    assert best.estimate.level == pytest.approx(1 - 0.1 / 3)
    assert dict((n, (v, u)) for n, v, u in best.parts)["layer 3"] == ("inconclusive", "holds")


@pytest.mark.parametrize("seed", range(4))
def test_best_of_rejects_what_holm_rejects(seed):
    """Against statsmodels' Holm on the one-sided t-test p-values of the same data."""
    rng = np.random.default_rng(seed)
    ts = rng.uniform(0.5, 5.0, 5)
    data = {f"c{i}": _with_t(8, t, rng) for i, t in enumerate(ts)}
    p = [stats.ttest_1samp(x, 0.0, alternative="greater").pvalue for x in data.values()]
    reject = multipletests(p, alpha=0.05, method="holm")[0]
    best = best_of({k: _t_candidate(x) for k, x in data.items()}, level=0.9)
    got = [v == "holds" for _, v, _ in best.parts]
    assert got == list(reject)
    assert best.verdict == ("holds" if reject.any() else "inconclusive")


def test_best_of_step_down_rejects_more_than_bonferroni():
    rng = np.random.default_rng(1)
    # df 9: Bonferroni for 3 needs t > t_{1-0.05/3} = 2.43; after the first rejection
    # Holm needs t > t_{1-0.05/2} = 2.26 for the rest
    data = {"a": _with_t(10, 6.0, rng), "b": _with_t(10, 2.35, rng), "c": _with_t(10, 0.0, rng)}
    best = best_of({k: _t_candidate(x) for k, x in data.items()}, level=0.9)
    assert [(n, v) for n, v, _ in best.parts] == [
        ("a", "holds"),
        ("b", "holds"),
        ("c", "inconclusive"),
    ]
    assert best.verdict == "holds"
    # Bonferroni alone (the first Holm step) would not have rejected b
    assert best_of({"b": _t_candidate(data["b"])}, level=1 - 0.1 / 3).verdict != "holds"


# ---------------------------------------------------------------- legacy, records


def test_legacy_claims_stay_constructible_and_are_flagged():
    c = Claim("x is finite", "finite", "0.3", True)
    assert (c.protocol, c.verdict, c.holds) == (False, "holds", True)
    assert Claim("x", "p", "m", holds=False).verdict == "fails"
    with pytest.raises(ValueError, match="holds"):
        Claim("x", "p", "m")
    with pytest.raises(ValueError, match="protocol claim"):
        Claim("x", "p", "m", True, estimate=_est(0, 1))


def test_claims_json_has_every_field():
    res = Result(
        metrics={},
        claims=[
            noninferior(_est(-0.01, 0.02), "HOPSE", "HOMP", 0.05, detail="3 seeds", **KW),
            Claim("legacy", "p", "m", False, timing=True),
        ],
    )
    proto, legacy = json.loads(json.dumps(_claims_json(res, "P18")))
    assert {"claim", "paper", "measured", "holds", "timing", "paper_id"} <= set(proto)
    assert proto["verdict"] == "holds"
    assert proto["holds"] is True
    assert proto["protocol"] is True
    assert proto["null"] == "HOMP"
    assert proto["margin"] == 0.05
    assert proto["alpha"] == 0.05
    assert proto["estimate"] == {
        "value": 0.005, "low": -0.01, "high": 0.02, "level": 0.9, "method": "t", "n": 10,
    }  # fmt: skip
    assert proto["measured"].endswith("; 3 seeds")
    assert proto["test"].startswith("one-sided")
    assert legacy["protocol"] is False
    assert legacy["verdict"] == "fails"
    assert set(proto) == set(legacy)
    with pytest.raises(TypeError, match="claims"):
        _claims_json(Result(metrics={}, claims=["not a claim"]), "P1")


def test_flatten_metrics_writes_estimates_by_the_naming_rule():
    e = Estimate(0.5, 0.25, 0.75, 0.95, "t", 6)
    flat = flatten_metrics({"acc": e, "nested": {"diff": e}, "n": 3})
    assert flat == {
        "acc": 0.5, "acc_lo": 0.25, "acc_hi": 0.75, "acc_n": 6,
        "nested/diff": 0.5, "nested/diff_lo": 0.25, "nested/diff_hi": 0.75, "nested/diff_n": 6,
        "n": 3,
    }  # fmt: skip
    assert flatten_metrics({"x": Estimate(float("nan"), 0, 1, 0.9, "t", 2)})["x"] is None
    with pytest.raises(ValueError, match="acc_lo"):
        flatten_metrics({"acc": e, "acc_lo": 0.1})


# ---------------------------------------------------------------- p-value claims


@pytest.mark.parametrize(
    ("p", "rejects_verdict", "consistent_verdict"),
    [(0.001, "holds", "fails"), (0.05, "holds", "fails"), (0.2, "inconclusive", "inconclusive")],
)
def test_p_value_claims_never_read_absence_of_evidence_as_a_verdict(
    p, rejects_verdict, consistent_verdict
):
    from experiments._harness import consistent_with, rejects

    kw = dict(test="Monte-Carlo test, 99 nulls", null="no offset", claim="c", paper="p", n=99)
    r = rejects(p, 0.05, **kw)
    c = consistent_with(p, 0.05, **kw)
    assert (r.verdict, c.verdict) == (rejects_verdict, consistent_verdict)
    assert r.alpha == c.alpha == 0.05
    assert r.kind == "rejects"
    assert c.kind == "consistent_with"
    assert r.as_dict("P9")["estimate"]["value"] == p


def test_p_value_claims_check_their_inputs():
    from experiments._harness import rejects

    kw = dict(test="t", null="n", claim="c", paper="p")
    with pytest.raises(ValueError, match="p-value"):
        rejects(1.5, 0.05, **kw)
    with pytest.raises(ValueError, match="alpha"):
        rejects(0.01, 0.0, **kw)
    with pytest.raises(ValueError, match="null"):
        rejects(0.01, 0.05, **{**kw, "null": ""})
    assert rejects(float("nan"), 0.05, **kw).verdict == "untestable"


# ---------------------------------------------------------------- one measurement (#54)


def _one(value, method="one timing run"):
    return Estimate.single(value, method=method)


@pytest.mark.parametrize(
    "make",
    [
        lambda e: superior(e, "A", "B", **KW),
        lambda e: superior(e, "A", "B", higher_is_better=False, **KW),
        lambda e: noninferior(e, "A", "B", 0.05, **KW),
        lambda e: equivalent(e, "A", "B", 0.05, **KW),
        lambda e: at_least(e, 0.0, null="bar 0", **KW),
        lambda e: at_most(e, 0.0, null="bar 0", **KW),
        lambda e: excludes(e, 0.0, null="zero", **KW),
    ],
)
@pytest.mark.parametrize("value", [-3.0, 0.0, 3.0])
def test_a_single_measurement_is_inconclusive_from_every_constructor(make, value):
    exact = make(Estimate.point(value))
    assert exact.verdict in ("holds", "fails", "inconclusive")
    c = make(_one(value))
    assert c.verdict == "inconclusive"
    assert c.holds is False
    assert "one measurement, no interval" in c.measured
    assert f"(the value alone: {exact.verdict})" in c.measured
    assert c.test.startswith("one measurement, no interval (one timing run)")
    record = c.as_dict("P0")
    assert record["estimate"]["single"] is True
    assert "single" not in exact.as_dict("P0")["estimate"]  # exact points write as before


def test_a_single_measurement_cannot_be_given_a_decisive_verdict():
    c = superior(_one(2.0), "A", "B", **KW)
    import dataclasses

    with pytest.raises(ValueError, match="one measurement"):
        dataclasses.replace(c, holds=None, verdict="holds")
    # a non-finite single measurement is untestable, as any non-finite estimate
    nan = superior(_one(float("nan")), "A", "B", **KW)
    assert nan.verdict == "untestable"
    named = gated(nan, Precondition("fit converged", False, "diverged")).gate
    assert named is not None
    assert named.name == "fit converged"


def test_single_measurements_compose_through_gated_at_scale_all_of_best_of():
    one = superior(_one(2.0), "A", "B", **KW)
    assert gated(one, Precondition("ok", True)).verdict == "inconclusive"
    assert gated(one, Precondition("ok", False, "no")).verdict == "untestable"
    assert at_scale(one, Precondition("paper scale", False, "small")).verdict == "inconclusive"
    holds = superior(_est(0.1, 0.3), "A", "B", **KW)
    fails = superior(_est(-0.3, -0.1), "A", "B", **KW)
    both = all_of({"interval": holds, "one run": one}, **KW)
    assert both.verdict == "inconclusive"
    assert both.estimate is not None
    assert both.estimate.is_single
    assert all_of({"interval": fails, "one run": one}, **KW).verdict == "fails"
    # best_of: single candidates never hold; an interval candidate is Holm-corrected at the
    # family alpha of the candidates with an interval, whatever order they come in
    singles = best_of({"a": lambda lv: one, "b": lambda lv: one})
    assert singles.verdict == "inconclusive"
    mixed = best_of(
        {
            "one run": lambda lv: one,
            "seeds": lambda lv: superior(t_mean([0.2, 0.25, 0.3, 0.22], lv), "A", "B", **KW),
        },
        level=0.9,
    )
    assert mixed.alpha == pytest.approx(0.05)
    assert mixed.verdict == "holds"
    assert dict((n, v) for n, v, _ in mixed.parts)["one run"] == "inconclusive"


def test_single_measurements_render_as_one_measurement_and_old_records_as_before():
    from experiments._harness._report import estimate_text, verdict_text

    rec = superior(Estimate.single(1.5, method="one timing run"), "A", "B", **KW).as_dict("P0")
    assert estimate_text(rec) == "1.5 (one measurement, no interval: one timing run, n=1)"
    assert verdict_text(rec) == "inconclusive (one measurement, no interval)"
    old = superior(Estimate.point(1.5, method="one timing run"), "A", "B", **KW).as_dict("P0")
    assert estimate_text(old) == "1.5 [1.5, 1.5] (100% one timing run n=1)"
    assert verdict_text(old) == "holds"
