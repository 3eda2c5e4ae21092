"""`Claim`: one headline claim of a paper checked by a run, as data a reviewer can audit.

A protocol claim records the statement, the paper's value, the `Estimate` measured, the
null or baseline it is compared against (by name), the preset margin or bar, the test and
its alpha, and a four-valued verdict:

- `holds`: the interval clears the claimed effect (e.g. its lower end > -margin);
- `fails`: the interval excludes the claimed effect (e.g. its upper end <= -margin);
- `inconclusive`: the interval spans the margin;
- `untestable`: a named precondition failed (a competence gate, too few positives, a data
  set missing, an interval that could not be computed).

Build one with a constructor, never by hand: `superior`, `noninferior`, `equivalent`
(a difference `method - baseline`), `at_least` / `at_most` (an estimate against a bar),
`excludes` (an estimate against a null value), `rejects` / `consistent_with` (a
test's p-value against the config's alpha, where the claim is a test: a Monte-Carlo test
against simulated nulls, a goodness of fit), `gated` (a precondition), `at_scale` (the
scale the paper's claim is about: below it a decisive verdict is `inconclusive`), `all_of` (a
conjunction: every part must hold) and `best_of` (the best of several framings, models or
layers, with Holm's correction over them). Margins and bars come from the experiment's
config, fixed before the run: never derive one from the run's own numbers.

One-sided claims (superior, non-inferior, at least/most) read one end of the estimate's
two-sided interval at `level`, a test at `alpha = (1 - level) / 2`; `equivalent` is the
two one-sided tests (TOST) at the same alpha; `excludes` is two-sided, `alpha = 1 - level`.
An exact point value (`Estimate.point`, level 1) is compared as is (alpha 0: no
sampling). One measurement of a random quantity (`Estimate.single`: one timing run, one
fit, one image pair) gives `inconclusive` from every constructor, never holds / fails: the
row says "one measurement, no interval" and what the raw comparison of the value would
have said; `gated`, `at_scale`, `all_of` and `best_of` compose it as any inconclusive part.

Legacy claims, `Claim(claim, paper, measured, holds)`, stay constructible while the
experiments migrate: they carry `protocol=False` and a verdict of only "holds" / "fails".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

from ._estimate import Estimate

__all__ = [
    "VERDICTS",
    "KINDS",
    "SINGLE_NOTE",
    "TIMING_FIELDS",
    "Claim",
    "Precondition",
    "superior",
    "noninferior",
    "equivalent",
    "at_least",
    "at_most",
    "excludes",
    "rejects",
    "consistent_with",
    "gated",
    "at_scale",
    "all_of",
    "best_of",
]

VERDICTS = ("holds", "fails", "inconclusive", "untestable")
KINDS = (
    "superior",
    "noninferior",
    "equivalent",
    "at_least",
    "at_most",
    "excludes",
    "rejects",
    "consistent_with",
    "all_of",
)
_ONE_SIDED = ("superior", "noninferior", "at_least", "at_most")
# the record fields of a timing claim that differ between two runs of one seed
TIMING_FIELDS = ("measured", "holds", "verdict", "estimate", "gate", "parts")


@dataclasses.dataclass(frozen=True)
class Precondition:
    """A named condition a claim needs to be testable: `passed`, and what was measured
    (e.g. `Precondition("model solves the task", acc > 0.8, f"accuracy {acc:.2f}")`)."""

    name: str
    passed: bool
    measured: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"name: expected a non-empty string, received {self.name!r}")
        object.__setattr__(self, "passed", bool(self.passed))

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "measured": self.measured}


@dataclasses.dataclass(frozen=True)
class Claim:
    """One headline claim: what the paper reports vs what this run measured.

    Protocol claims come from the constructors (`superior`, `noninferior`, `equivalent`,
    `at_least`, `at_most`, `excludes`, `gated`, `all_of`, `best_of`); their fields:

    - `claim`: the statement; `paper`: the paper's value or statement.
    - `measured`: human-readable summary (written by the constructor from the estimate,
      plus the caller's `detail`).
    - `verdict`: one of `VERDICTS`; `holds` is `verdict == "holds"` (kept for old readers).
    - `kind`: one of `KINDS`; `estimate`: the `Estimate` (of the difference
      `subject - null` for superior / noninferior / equivalent).
    - `subject`: what is claimed (e.g. "HOPSE"); `null`: the named null or baseline
      (e.g. "HOMP", "chance 1/8"); required: a claim without one raises `ValueError`.
    - `reference`: the number the estimate is compared with (0 for a difference, the bar,
      the null value); `margin`: the preset margin (config, >= 0).
    - `higher_is_better`: orientation of the estimate.
    - `test`, `alpha`: the test the verdict amounts to and its level.
    - `gate`: the `Precondition` (if any); failed means `untestable`.
    - `scale`: the `Precondition` "run at the paper's scale" (if any, from `at_scale`);
      failed means a decisive interval (holds/fails) is reported as `inconclusive`.
    - `adjustment`: multiplicity (Holm over the candidates of `best_of`) or the
      conjunction of `all_of`; `parts`: `(name, verdict, unadjusted verdict)` of each.
    - `timing`: the claim is about wall-clock speed (its measured value and verdict vary
      between runs of one seed).

    Legacy form `Claim(claim, paper, measured, holds, timing=False)`: `protocol` is False
    and `verdict` only "holds" / "fails".
    """

    claim: str
    paper: str
    measured: str = ""
    holds: bool | None = None
    timing: bool = False
    _: dataclasses.KW_ONLY
    verdict: str | None = None
    kind: str | None = None
    estimate: Estimate | None = None
    subject: str | None = None
    null: str | None = None
    reference: float | None = None
    margin: float | None = None
    higher_is_better: bool = True
    test: str | None = None
    alpha: float | None = None
    gate: Precondition | None = None
    scale: Precondition | None = None
    adjustment: str | None = None
    parts: tuple[tuple[str, str, str], ...] = ()

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "timing", bool(self.timing))
        if self.kind is None:  # legacy
            extra = [
                f.name
                for f in dataclasses.fields(self)
                if f.name in ("estimate", "null", "test", "alpha", "gate", "scale", "adjustment")
                and getattr(self, f.name) is not None
            ]
            if extra:
                raise ValueError(
                    f"kind: a claim with {extra} is a protocol claim: build it with superior, "
                    "noninferior, equivalent, at_least, at_most, excludes (kind missing)"
                )
            if self.holds is None:
                raise ValueError("holds: a legacy Claim(claim, paper, measured, holds) needs holds")
            set_(self, "holds", bool(self.holds))
            want = "holds" if self.holds else "fails"
            if self.verdict not in (None, want):
                raise ValueError(
                    f"verdict: a legacy claim's verdict follows holds ({want!r}), "
                    f"received {self.verdict!r}"
                )
            set_(self, "verdict", want)
            return
        if self.kind not in KINDS:
            raise ValueError(f"kind: expected one of {KINDS}, received {self.kind!r}")
        if not isinstance(self.null, str) or not self.null.strip():
            raise ValueError(
                "null: a protocol claim names the null or baseline it is compared against "
                f"(e.g. 'HOMP', 'chance 1/8'), received {self.null!r}"
            )
        if not isinstance(self.estimate, Estimate):
            raise ValueError(f"estimate: expected an Estimate, received {self.estimate!r}")
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict: expected one of {VERDICTS}, received {self.verdict!r}")
        if self.margin is None or not math.isfinite(self.margin) or self.margin < 0:
            raise ValueError(f"margin: expected a finite number >= 0, received {self.margin!r}")
        if self.alpha is None or not 0 <= self.alpha < 1:
            raise ValueError(f"alpha: expected a number in [0, 1), received {self.alpha!r}")
        if not self.test:
            raise ValueError("test: a protocol claim names its test")
        failed_gate = self.gate is not None and not self.gate.passed
        if failed_gate != (self.verdict == "untestable"):
            raise ValueError(
                "verdict, gate: 'untestable' exactly when a named precondition failed "
                f"(verdict {self.verdict!r}, gate {self.gate!r})"
            )
        if self.scale is not None and not self.scale.passed and self.verdict in ("holds", "fails"):
            raise ValueError(
                "verdict, scale: below the paper's scale a verdict is 'inconclusive' or "
                f"'untestable' (verdict {self.verdict!r}, scale {self.scale!r})"
            )
        if self.estimate.is_single and self.verdict in ("holds", "fails"):
            raise ValueError(
                "verdict, estimate: one measurement (Estimate.single) has no interval, its "
                f"verdict is 'inconclusive' or 'untestable', received {self.verdict!r}"
            )
        holds = self.verdict == "holds"
        if self.holds is not None and bool(self.holds) != holds:
            raise ValueError(f"holds: follows the verdict {self.verdict!r}, received {self.holds}")
        set_(self, "holds", holds)

    @property
    def protocol(self) -> bool:
        """Built by a protocol constructor (False: a legacy claim, verdict from `holds`)."""
        return self.kind is not None

    def as_dict(self, paper_id: str) -> dict[str, Any]:
        """The claim's record in metrics.json (legacy keys first)."""
        est = self.estimate.as_dict() if self.estimate is not None else None
        return {
            "claim": self.claim,
            "paper": self.paper,
            "measured": self.measured,
            "holds": bool(self.holds),
            "timing": self.timing,
            "paper_id": paper_id,
            "protocol": self.protocol,
            "verdict": self.verdict,
            "kind": self.kind,
            "estimate": est,
            "subject": self.subject,
            "null": self.null,
            "reference": self.reference,
            "margin": self.margin,
            "higher_is_better": self.higher_is_better if self.protocol else None,
            "test": self.test,
            "alpha": self.alpha,
            "gate": self.gate.as_dict() if self.gate is not None else None,
            "scale": self.scale.as_dict() if self.scale is not None else None,
            "adjustment": self.adjustment,
            "parts": [{"name": n, "verdict": v, "unadjusted": u} for n, v, u in self.parts],
        }

    def _clearance(self) -> float:
        """How far the decisive end of the interval lies past the threshold (in the
        estimate's units; negative: not cleared). Orders the parts of `all_of`."""
        e = self.estimate
        if e is None or not e.finite:
            return -math.inf
        lo, hi = (e.low, e.high) if self.higher_is_better else (-e.high, -e.low)
        m, ref = self.margin or 0.0, self.reference or 0.0
        if self.kind == "superior":
            return lo - m
        if self.kind == "noninferior":
            return lo + m
        if self.kind == "equivalent":
            return min(m - e.high, e.low + m)
        if self.kind in ("at_least", "at_most"):
            return lo - (ref if self.higher_is_better else -ref)
        if self.kind == "excludes":
            return max(e.low - ref, ref - e.high) - m
        if self.kind == "rejects":
            return (self.alpha or 0.0) - e.value
        if self.kind == "consistent_with":
            return e.value - (self.alpha or 0.0)
        return -math.inf


# ---------------------------------------------------------------- helpers


def _text(name: str, v) -> str:
    if not isinstance(v, str) or not v.strip():
        raise ValueError(f"{name}: expected a non-empty string, received {v!r}")
    return v


def _number(name: str, v, *, positive: bool = False, nonneg: bool = False) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name}: expected a number, received {v!r}") from e
    if not math.isfinite(x) or (positive and x <= 0) or (nonneg and x < 0):
        need = "> 0" if positive else ">= 0" if nonneg else "finite"
        raise ValueError(f"{name}: expected a finite number {need}, received {v!r}")
    return x


def _alpha(kind: str, est: Estimate) -> float:
    if not est.has_interval:
        return 0.0
    a = (1 - est.level) / 2 if kind in (*_ONE_SIDED, "equivalent") else 1 - est.level
    return round(a, 12)


SINGLE_NOTE = "one measurement, no interval"


def _test(kind: str, est: Estimate, rule: str) -> str:
    if est.is_single:
        return (
            f"{SINGLE_NOTE} ({est.method}): inconclusive whatever its value (were it an "
            f"interval: {rule})"
        )
    if not est.has_interval:
        return f"point value ({est.method}, no sampling interval): {rule}"
    a = _alpha(kind, est)
    side = {
        "equivalent": "two one-sided tests (TOST)",
        "excludes": "two-sided",
    }.get(kind, "one-sided")
    return f"{side}, alpha {a:.3g}, from the {est.level:.3g} {est.method} interval: {rule}"


def _untestable_gate(est: Estimate) -> Precondition | None:
    if est.finite:
        return None
    return Precondition(
        "finite estimate",
        False,
        f"value {est.value}, interval [{est.low}, {est.high}] ({est.method}, n={est.n})",
    )


def _make(
    kind: str,
    est: Estimate,
    verdict: str,
    *,
    claim,
    paper,
    subject,
    null,
    reference,
    margin,
    higher_is_better,
    rule: str,
    summary: str,
    detail: str,
    timing: bool,
) -> Claim:
    if not isinstance(est, Estimate):
        raise ValueError(f"estimate: expected an Estimate, received {type(est).__name__}")
    gate = _untestable_gate(est)
    if gate is not None:
        verdict = "untestable"
    elif est.is_single:
        summary += f"; inconclusive: {SINGLE_NOTE} (the value alone: {verdict})"
        verdict = "inconclusive"
    measured = summary + (f"; {detail}" if detail else "")
    return Claim(
        _text("claim", claim),
        _text("paper", paper),
        measured,
        timing=timing,
        verdict=verdict,
        kind=kind,
        estimate=est,
        subject=subject,
        null=_text("null", null),
        reference=reference,
        margin=margin,
        higher_is_better=bool(higher_is_better),
        test=_test(kind, est, rule),
        alpha=_alpha(kind, est),
        gate=gate,
    )


def _oriented(est: Estimate, higher_is_better: bool) -> tuple[float, float]:
    return (est.low, est.high) if higher_is_better else (-est.high, -est.low)


def _difference(
    kind: str,
    diff: Estimate,
    method: str,
    baseline: str,
    margin: float,
    *,
    claim,
    paper,
    higher_is_better: bool,
    detail: str,
    timing: bool,
) -> Claim:
    method, baseline = _text("method", method), _text("baseline", baseline)
    lo, hi = _oriented(diff, higher_is_better)
    better = "higher" if higher_is_better else "lower"
    if kind == "superior":
        margin = _number("margin", margin, nonneg=True)
        verdict = "holds" if lo > margin else "fails" if hi <= margin else "inconclusive"
        rule = (
            f"holds if {method} beats {baseline} by more than {margin:g} ({better} is better) "
            "over the whole interval, fails if no part of it does"
        )
    elif kind == "noninferior":
        margin = _number("margin", margin, positive=True)
        verdict = "holds" if lo > -margin else "fails" if hi <= -margin else "inconclusive"
        rule = (
            f"null: {method} worse than {baseline} by >= {margin:g} ({better} is better); "
            "holds if the whole interval is inside the margin, fails if it lies beyond it"
        )
    else:  # equivalent
        margin = _number("margin", margin, positive=True)
        e = diff
        if -margin < e.low and e.high < margin:
            verdict = "holds"
        elif e.low >= margin or e.high <= -margin:
            verdict = "fails"
        else:
            verdict = "inconclusive"
        rule = f"holds if the interval lies within +-{margin:g}, fails if it lies outside"
    summary = f"{method} - {baseline} = {diff} ({_describe(diff)})"
    return _make(
        kind, diff, verdict, claim=claim, paper=paper, subject=method, null=baseline,
        reference=0.0, margin=margin, higher_is_better=higher_is_better, rule=rule,
        summary=summary, detail=detail, timing=timing,
    )  # fmt: skip


def _describe(est: Estimate) -> str:
    if est.is_single:
        return f"{SINGLE_NOTE}: {est.method}, n={est.n}"
    if not est.has_interval:
        return f"{est.method}, n={est.n}"
    return f"{est.level:.3g} {est.method} interval, n={est.n}"


# ---------------------------------------------------------------- constructors


def superior(
    diff: Estimate,
    method: str,
    baseline: str,
    margin: float = 0.0,
    *,
    claim: str,
    paper: str,
    higher_is_better: bool = True,
    detail: str = "",
    timing: bool = False,
) -> Claim:
    """`method` is better than `baseline` by more than `margin` (>= 0, from the config).

    `diff` estimates `method - baseline` (e.g. `paired_bootstrap(err_a, err_b)`); with
    `higher_is_better=False` (errors, losses) better means a negative difference.
    Holds if the whole interval lies beyond the margin on the better side, fails if none
    of it does, inconclusive otherwise."""
    return _difference(
        "superior", diff, method, baseline, margin, claim=claim, paper=paper,
        higher_is_better=higher_is_better, detail=detail, timing=timing,
    )  # fmt: skip


def noninferior(
    diff: Estimate,
    method: str,
    baseline: str,
    margin: float,
    *,
    claim: str,
    paper: str,
    higher_is_better: bool = True,
    detail: str = "",
    timing: bool = False,
) -> Claim:
    """`method` is not worse than `baseline` by `margin` or more (`margin` > 0, fixed in
    the config before the run). Null: worse by >= margin. Holds if the interval of
    `diff = method - baseline` lies entirely on the good side of `-margin` (oriented by
    `higher_is_better`), fails if entirely beyond it, inconclusive if it spans it."""
    return _difference(
        "noninferior", diff, method, baseline, margin, claim=claim, paper=paper,
        higher_is_better=higher_is_better, detail=detail, timing=timing,
    )  # fmt: skip


def equivalent(
    diff: Estimate,
    method: str,
    baseline: str,
    margin: float,
    *,
    claim: str,
    paper: str,
    detail: str = "",
    timing: bool = False,
) -> Claim:
    """`method` and `baseline` agree within +-`margin` (> 0, from the config): TOST.
    Holds if the interval of `diff` lies inside (-margin, margin), fails if it lies
    entirely outside, inconclusive otherwise."""
    return _difference(
        "equivalent", diff, method, baseline, margin, claim=claim, paper=paper,
        higher_is_better=True, detail=detail, timing=timing,
    )  # fmt: skip


def _bar(kind: str, est: Estimate, bar, *, null, claim, paper, detail, timing, subject) -> Claim:
    bar = _number("bar", bar)
    at_least_ = kind == "at_least"
    if at_least_:
        verdict = "holds" if est.low >= bar else "fails" if est.high < bar else "inconclusive"
        rule = f"holds if the interval lies at or above {bar:g}, fails if it lies below"
    else:
        verdict = "holds" if est.high <= bar else "fails" if est.low > bar else "inconclusive"
        rule = f"holds if the interval lies at or below {bar:g}, fails if it lies above"
    sign = ">=" if at_least_ else "<="
    summary = f"{subject + ' ' if subject else ''}{est} ({_describe(est)}); bar {sign} {bar:g}"
    return _make(
        kind, est, verdict, claim=claim, paper=paper, subject=subject, null=null,
        reference=bar, margin=0.0, higher_is_better=at_least_, rule=rule, summary=summary,
        detail=detail, timing=timing,
    )  # fmt: skip


def at_least(
    estimate: Estimate,
    bar: float,
    *,
    null: str,
    claim: str,
    paper: str,
    subject: str | None = None,
    detail: str = "",
    timing: bool = False,
) -> Claim:
    """The estimate is at least `bar` (from the config or the paper; `null` names it,
    e.g. "chance 1/8", "the paper's 0.8"). Holds if `low >= bar`, fails if `high < bar`."""
    return _bar(
        "at_least", estimate, bar, null=null, claim=claim, paper=paper, detail=detail,
        timing=timing, subject=subject,
    )  # fmt: skip


def at_most(
    estimate: Estimate,
    bar: float,
    *,
    null: str,
    claim: str,
    paper: str,
    subject: str | None = None,
    detail: str = "",
    timing: bool = False,
) -> Claim:
    """The estimate is at most `bar` (an error tolerance, a slope bound). Holds if
    `high <= bar`, fails if `low > bar`."""
    return _bar(
        "at_most", estimate, bar, null=null, claim=claim, paper=paper, detail=detail,
        timing=timing, subject=subject,
    )  # fmt: skip


def excludes(
    estimate: Estimate,
    value: float,
    *,
    null: str,
    claim: str,
    paper: str,
    margin: float = 0.0,
    subject: str | None = None,
    detail: str = "",
    timing: bool = False,
) -> Claim:
    """The estimate differs from the null `value` (two-sided; `null` names it, e.g.
    "no correlation"). Holds if the interval excludes `value`. Fails only with a
    `margin` > 0 (from the config): when the interval lies within `value +- margin`;
    with margin 0 a non-excluding interval is inconclusive (absence of evidence)."""
    value = _number("value", value)
    margin = _number("margin", margin, nonneg=True)
    e = estimate
    if e.low > value or e.high < value:
        verdict = "holds"
    elif margin > 0 and value - margin <= e.low and e.high <= value + margin:
        verdict = "fails"
    else:
        verdict = "inconclusive"
    rule = f"holds if the interval excludes {value:g}" + (
        f", fails if it lies within {value:g} +- {margin:g}" if margin > 0 else ""
    )
    summary = f"{subject + ' ' if subject else ''}{e} ({_describe(e)}); null {value:g}"
    return _make(
        "excludes", e, verdict, claim=claim, paper=paper, subject=subject, null=null,
        reference=value, margin=margin, higher_is_better=True, rule=rule, summary=summary,
        detail=detail, timing=timing,
    )  # fmt: skip


def _p_value_claim(
    kind: str, p, alpha, *, test, null, claim, paper, subject, detail, n, timing
) -> Claim:
    try:
        p = float(p)  # nan: the test could not be computed (untestable)
    except (TypeError, ValueError):
        raise ValueError(f"p: expected a p-value in [0, 1], received {p!r}") from None
    alpha = _number("alpha", alpha)
    if not (0 <= p <= 1 or math.isnan(p)):
        raise ValueError(f"p: expected a p-value in [0, 1], received {p!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: expected a level in (0, 1), received {alpha!r}")
    est = Estimate.point(p, n=n, method=f"{_text('test', test)} p-value")
    rejected = p <= alpha
    if kind == "rejects":
        verdict = "holds" if rejected else "inconclusive"
        rule = f"holds if p <= {alpha:g}; otherwise inconclusive (not rejecting is no evidence)"
    else:
        verdict = "fails" if rejected else "inconclusive"
        rule = (
            f"fails if p <= {alpha:g} (the data reject it); otherwise inconclusive (not "
            "rejecting a model does not show that it fits: that needs an equivalence margin)"
        )
    gate = _untestable_gate(est)
    if gate is not None:
        verdict = "untestable"
    summary = f"{subject + ' ' if subject else ''}p = {p:.3g} ({test}, n={n}); alpha {alpha:g}"
    return Claim(
        _text("claim", claim),
        _text("paper", paper),
        summary + (f"; {detail}" if detail else ""),
        timing=timing,
        verdict=verdict,
        kind=kind,
        estimate=est,
        subject=subject,
        null=_text("null", null),
        reference=alpha,
        margin=0.0,
        higher_is_better=kind == "consistent_with",
        test=f"{test}: {rule}",
        alpha=alpha,
        gate=gate,
    )


def rejects(
    p: float,
    alpha: float,
    *,
    test: str,
    null: str,
    claim: str,
    paper: str,
    n: int = 1,
    subject: str | None = None,
    detail: str = "",
    timing: bool = False,
) -> Claim:
    """A test (`test`, e.g. "Monte-Carlo test against 999 simulated nulls") rejects the
    null `null` at level `alpha` (from the config): holds if `p <= alpha`, inconclusive
    otherwise (failing to reject is absence of evidence, never a "fails"). For claims
    with an effect size, prefer `excludes` / `superior` on an interval."""
    return _p_value_claim(
        "rejects", p, alpha, test=test, null=null, claim=claim, paper=paper,
        subject=subject, detail=detail, n=n, timing=timing,
    )  # fmt: skip


def consistent_with(
    p: float,
    alpha: float,
    *,
    test: str,
    null: str,
    claim: str,
    paper: str,
    n: int = 1,
    subject: str | None = None,
    detail: str = "",
    timing: bool = False,
) -> Claim:
    """A goodness-of-fit claim: the data are consistent with the model `null` (e.g. "the
    fitted model's simulated networks"). Fails if the test rejects it (`p <= alpha`);
    otherwise inconclusive: a p-value alone never shows that a model fits (that needs an
    equivalence margin on a discrepancy, `equivalent`). Never holds."""
    return _p_value_claim(
        "consistent_with", p, alpha, test=test, null=null, claim=claim, paper=paper,
        subject=subject, detail=detail, n=n, timing=timing,
    )  # fmt: skip


def gated(claim: Claim, precondition: Precondition) -> Claim:
    """`claim`, testable only if `precondition` passed: a failed precondition makes the
    verdict `untestable` and names the gate; a passed one is recorded with the claim.
    A claim already untestable keeps its first failed gate (a failed `precondition` names
    the cause of a non-finite estimate instead of the generic "finite estimate" gate)."""
    _check_conditioned(claim, precondition)
    if claim.gate is not None and not claim.gate.passed:
        if claim.gate.name != "finite estimate" or precondition.passed:
            return claim
        # an interim verdict (replaced below): inconclusive is valid for every estimate
        claim = dataclasses.replace(claim, holds=None, verdict="inconclusive", gate=None)
    if precondition.passed:
        return dataclasses.replace(claim, holds=None, gate=precondition)
    note = f"untestable: {precondition.name} failed ({precondition.measured})"
    return _with_verdict(claim, "untestable", note, gate=precondition)


def at_scale(claim: Claim, precondition: Precondition) -> Claim:
    """`claim`, about the scale `precondition` names (e.g. `Precondition("paper scale:
    >= 4000 training steps at 128 px", steps >= 4000 and size >= 128, "300 steps, 64 px")`).

    A paper's claim about a method trained at its scale is not tested by a smaller run: an
    undertrained model's "fails" is no evidence against it, nor its "holds" for it. Below
    the scale (`precondition.passed` false) a decisive verdict (holds / fails) becomes
    `inconclusive`; the interval is kept and the measured text says what the verdict at
    this scale was. At scale the precondition is recorded and the verdict stands.
    `untestable` and `inconclusive` claims are unchanged apart from the record."""
    _check_conditioned(claim, precondition)
    if precondition.passed or claim.verdict not in ("holds", "fails"):
        return dataclasses.replace(claim, holds=None, scale=precondition)
    note = (
        f"inconclusive below the paper's scale: {precondition.name} not met "
        f"({precondition.measured}); at this scale the interval {claim.verdict}"
    )
    return _with_verdict(claim, "inconclusive", note, scale=precondition)


def _check_conditioned(claim, precondition) -> None:
    """The arguments of `gated` / `at_scale`: a protocol claim and a `Precondition`."""
    if not isinstance(claim, Claim) or not claim.protocol:
        raise ValueError("claim: expected a protocol Claim (from superior, at_least, ...)")
    if not isinstance(precondition, Precondition):
        raise ValueError(f"precondition: expected a Precondition, received {precondition!r}")


def _with_verdict(claim: Claim, verdict: str, note: str, **fields) -> Claim:
    """`claim` with a new `verdict`, `note` appended to its measured text, and `fields`."""
    measured = f"{claim.measured}; {note}" if claim.measured else note
    return dataclasses.replace(claim, holds=None, verdict=verdict, measured=measured, **fields)


_PRECEDENCE = {"untestable": 0, "fails": 1, "inconclusive": 2, "holds": 3}


def _combine_fields(parts: Mapping[str, Claim], what: str) -> dict[str, Any]:
    kinds = {c.kind for c in parts.values()}
    margins = {c.margin for c in parts.values()}
    return {
        "kind": kinds.pop() if len(kinds) == 1 else what,
        "margin": margins.pop() if len(margins) == 1 else 0.0,
    }


def all_of(parts: Mapping[str, Claim], *, claim: str, paper: str, detail: str = "") -> Claim:
    """A conjunction: the claim holds only if every part holds (an intersection-union
    test: no multiplicity correction needed). Verdict: untestable if any part is, else
    fails if any part fails, else holds if all hold, else inconclusive. The record's
    estimate is the deciding part's: the one of the worst verdict that is closest to
    failing (in its own units); `parts` lists every part's verdict."""
    parts = dict(parts)
    if not parts or not all(isinstance(c, Claim) and c.protocol for c in parts.values()):
        raise ValueError("parts: expected a non-empty mapping of name -> protocol Claim")
    worst = min(_PRECEDENCE[c.verdict] for c in parts.values())
    verdict = next(v for v, p in _PRECEDENCE.items() if p == worst)
    name, decisive = min(
        ((k, c) for k, c in parts.items() if c.verdict == verdict),
        key=lambda kc: kc[1]._clearance(),
    )
    summary = "; ".join(
        f"{k}: {c.measured.split('; ')[0]} -> {c.verdict}" for k, c in parts.items()
    )
    nulls = list(dict.fromkeys(c.null for c in parts.values()))
    gate = decisive.gate if verdict == "untestable" else None
    return Claim(
        _text("claim", claim),
        _text("paper", paper),
        summary + (f"; {detail}" if detail else ""),
        timing=any(c.timing for c in parts.values()),
        verdict=verdict,
        estimate=decisive.estimate,
        subject=decisive.subject,
        null=", ".join(str(n) for n in nulls),
        reference=decisive.reference,
        higher_is_better=decisive.higher_is_better,
        test=f"all of {len(parts)} (intersection-union, no correction): {decisive.test}",
        alpha=decisive.alpha,
        gate=gate,
        adjustment=f"all of {len(parts)} parts must hold; deciding part: {name}",
        parts=tuple((k, c.verdict, c.verdict) for k, c in parts.items()),
        **_combine_fields(parts, "all_of"),
    )


def best_of(
    candidates: Mapping[str, Callable[[float], Claim]],
    *,
    level: float = 0.95,
    claim: str | None = None,
    paper: str | None = None,
    detail: str = "",
) -> Claim:
    """The claim for the best of several candidates (framings, models, layers), with
    Holm's step-down correction over them (Holm 1979).

    Each candidate is a function `level -> Claim` (one constructor call on that
    candidate's data, its estimate computed at `level`). The family alpha is the
    candidates' alpha at `level`. Holm in interval form: with `r` candidates not yet
    rejected, every one that holds at `alpha / r` (its estimate recomputed at the matching
    level) is rejected, and `r` shrinks, until none is. The claim holds if any candidate
    is rejected; fails if every candidate fails at the Bonferroni level `alpha / m`;
    untestable if every candidate is; inconclusive otherwise. The record is the best
    rejected candidate's claim (else the best point value's at `alpha / m`), with
    `adjustment` saying so and `parts` listing each candidate's Holm-adjusted and
    unadjusted verdicts.
    """
    cands = dict(candidates)
    if not cands:
        raise ValueError("candidates: expected at least one name -> (level -> Claim)")
    base = {k: f(level) for k, f in cands.items()}
    if not all(isinstance(c, Claim) and c.protocol for c in base.values()):
        raise ValueError("candidates: each must return a protocol Claim")
    kinds = {c.kind for c in base.values()}
    if len(kinds) != 1 or kinds == {"all_of"}:
        raise ValueError(f"candidates: expected one kind of claim, received {sorted(kinds)}")
    kind = kinds.pop()
    # the family alpha: the candidates' with an interval (a point or single one has alpha 0,
    # and a single one stays inconclusive at every level)
    alpha = max(c.alpha or 0.0 for c in base.values())
    m = len(cands)

    def at(a: float) -> float:
        return 1 - 2 * a if kind in (*_ONE_SIDED, "equivalent") else 1 - a

    if alpha == 0:  # point values: nothing to correct
        adjusted = dict(base)
        first = dict(base)
    else:
        first = {k: f(at(alpha / m)) for k, f in cands.items()}
        adjusted = {}
        remaining = list(cands)
        step = first
        while remaining:
            new = [k for k in remaining if step[k].verdict == "holds"]
            if not new:
                break
            adjusted.update({k: step[k] for k in new})
            remaining = [k for k in remaining if k not in new]
            if remaining:
                step = {k: cands[k](at(alpha / len(remaining))) for k in remaining}
        for k in cands:
            adjusted.setdefault(k, first[k])
    held = [k for k in cands if adjusted[k].verdict == "holds"]

    def goodness(c: Claim) -> float:
        v = c.estimate.value if c.estimate is not None else -math.inf
        if c.verdict == "untestable" or not math.isfinite(v):
            return -math.inf
        return v if c.higher_is_better else -v

    if held:
        verdict = "holds"
        chosen = max(held, key=lambda k: goodness(adjusted[k]))
    else:
        vs = {first[k].verdict for k in cands}
        verdict = vs.pop() if len(vs) == 1 and vs <= {"fails", "untestable"} else "inconclusive"
        chosen = max(cands, key=lambda k: goodness(first[k]))
    rec = adjusted[chosen] if held else first[chosen]
    names = ", ".join(cands)
    unadjusted = base[chosen].verdict
    note = (
        f"best of {m} candidates ({names}): {chosen}; Holm over the {m} at family alpha "
        f"{alpha:.3g}: holds for {', '.join(held) if held else 'none'}; "
        f"{chosen} unadjusted: {unadjusted}"
    )
    gate = rec.gate if verdict == "untestable" else None
    return dataclasses.replace(
        rec,
        claim=_text("claim", claim) if claim is not None else rec.claim,
        paper=_text("paper", paper) if paper is not None else rec.paper,
        measured=f"{chosen}: {rec.measured}" + (f"; {detail}" if detail else ""),
        holds=None,
        verdict=verdict,
        gate=gate if gate is not None else (rec.gate if rec.gate and rec.gate.passed else None),
        alpha=alpha,
        test=f"Holm over {m} candidates: {rec.test}",
        adjustment=note,
        parts=tuple((k, adjusted[k].verdict, base[k].verdict) for k in cands),
    )
