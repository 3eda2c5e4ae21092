"""Human baselines from the literature, in one table, each row with its source.

Only numbers the authors of this module were confident of; `approximate=True` marks
numbers quoted from memory of the publication or rounded (check the source before
citing them elsewhere). Rows without a number (`value=None`) are qualitative findings.
"""

from __future__ import annotations

import dataclasses

__all__ = ["HumanBaseline", "HUMAN_BASELINES", "human_baseline"]


@dataclasses.dataclass(frozen=True)
class HumanBaseline:
    """One human result: `name` (id used by the experiments), `task`, `measure`, `value`
    (float or None), `source` (citation), `approximate`, `note`."""

    name: str
    task: str
    measure: str
    value: float | None
    source: str
    approximate: bool
    note: str = ""


_HG = (
    "Hamilton, D. L. & Gifford, R. K. (1976). Illusory correlation in interpersonal "
    "perception. J. Exp. Soc. Psychol. 12, 392-407, Experiment 1"
)
# H&G 1976 Exp. 1 mean attributions (as usually reproduced from its Table 1):
# majority 17.52 desirable / 5.79 undesirable, minority 9.48 / 6.21
_A_D, _A_U, _B_D, _B_U = 17.52, 5.79, 9.48, 6.21
_PHI_HG = (_A_D * _B_U - _A_U * _B_D) / (
    ((_A_D + _A_U) * (_B_D + _B_U) * (_A_D + _B_D) * (_A_U + _B_U)) ** 0.5
)

HUMAN_BASELINES: tuple[HumanBaseline, ...] = (
    HumanBaseline(
        "hg_minority_share_undesirable",
        "illusory correlation",
        "share of the 12 undesirable behaviours attributed to the minority (true 1/3)",
        _B_U / (_A_U + _B_U),
        _HG,
        True,
        "6.21 of 12 mean attributions; quoted from memory of Table 1 (not re-checked here)",
    ),
    HumanBaseline(
        "hg_minority_share_desirable",
        "illusory correlation",
        "share of the 27 desirable behaviours attributed to the minority (true 1/3)",
        _B_D / (_A_D + _B_D),
        _HG,
        True,
        "9.48 of 27 mean attributions; quoted from memory of Table 1 (not re-checked here)",
    ),
    HumanBaseline(
        "hg_phi_attribution",
        "illusory correlation",
        "phi of the mean attribution table (true phi 0)",
        _PHI_HG,
        _HG,
        True,
        "phi computed by us from the four mean attributions above (phi of the mean table, "
        "not the paper's mean of per-participant phi)",
    ),
    HumanBaseline(
        "hg_frequency_direction",
        "illusory correlation",
        "frequency estimates: the minority's undesirable behaviours over-estimated",
        None,
        _HG,
        False,
        "direction only (we do not quote the estimate means)",
    ),
    HumanBaseline(
        "mullen_johnson_meta",
        "illusory correlation",
        "distinctiveness-based illusory correlation across studies",
        None,
        "Mullen, B. & Johnson, C. (1990). Distinctiveness-based illusory correlations and "
        "stereotyping: a meta-analytic integration. Br. J. Soc. Psychol. 29, 11-28",
        False,
        "reliable, small-to-moderate effect across studies; strongest for infrequent "
        "undesirable behaviours (no effect size quoted here)",
    ),
    HumanBaseline(
        "gvt_hot_hand_fans",
        "randomness",
        "fraction of basketball fans who believe a player is more likely to score after "
        "two or three hits than after two or three misses",
        0.91,
        "Gilovich, T., Vallone, R. & Tversky, A. (1985). The hot hand in basketball: on the "
        "misperception of random sequences. Cogn. Psychol. 17, 295-314 (survey of 100 fans)",
        False,
        "a belief in streaks (hot hand), for basketball shots, not coins",
    ),
    HumanBaseline(
        "gvt_hot_hand_free_throws",
        "randomness",
        "fraction of fans who believe the same for free throws",
        0.68,
        "Gilovich, Vallone & Tversky (1985), same survey",
        False,
    ),
    HumanBaseline(
        "falk_konold_alternation",
        "randomness",
        "alternation probability of the binary sequences people judge most random "
        "(a fair coin's is 0.5)",
        0.6,
        "Falk, R. & Konold, C. (1997). Making sense of randomness: implicit encoding as a "
        "basis for judgment. Psychol. Rev. 104, 301-318",
        True,
        "peak near 0.6-0.7: people expect too many alternations (the gambler's fallacy)",
    ),
    HumanBaseline(
        "tversky_kahneman_small_numbers",
        "randomness",
        "after a run of one outcome people expect the other (gambler's fallacy)",
        None,
        "Tversky, A. & Kahneman, D. (1971). Belief in the law of small numbers. Psychol. "
        "Bull. 76, 105-110",
        False,
        "qualitative",
    ),
    HumanBaseline(
        "einhorn_hogarth_cues",
        "causal narratives",
        "temporal order and contiguity are taken as cues to causation",
        None,
        "Einhorn, H. J. & Hogarth, R. M. (1986). Judging probable cause. Psychol. Bull. 99, 3-19",
        False,
        "qualitative; the Corr2Cause items carry no human answers",
    ),
)
"""The human results the experiments compare with, each a `HumanBaseline` with its source."""


def human_baseline(name: str) -> HumanBaseline:
    """The row of `HUMAN_BASELINES` with this `name`."""
    for row in HUMAN_BASELINES:
        if row.name == name:
            return row
    raise ValueError(
        f"name: expected one of {[r.name for r in HUMAN_BASELINES]}, received {name!r}"
    )
