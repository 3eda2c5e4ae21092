"""The routing competence gate (`experiments.routing._gate`): a planted competent pool passes;
chance-level guessers, and competent but identical candidates (no oracle headroom), are
refused; the guessers' oracle against a simulation, the Wilson bound against its formula."""

from __future__ import annotations

import math

import numpy as np
import pytest

from experiments._harness import Precondition, at_least, gated
from experiments._harness._estimate import Estimate
from experiments.routing import _gate
from jaxlab import routing


def _table(quality, groups, group_names):
    n, m = quality.shape
    return routing.RoutingTable(
        quality=quality.astype(float),
        cost=np.tile(np.arange(1, m + 1.0), (n, 1)),
        candidates=[f"m{j}" for j in range(m)],
        features=np.zeros((n, 2)),
        groups=np.asarray(groups, np.int64),
        group_names=group_names,
    )


def _guessers(n, m, k, seed):
    """n queries x m candidates that guess uniformly among k options (4: medmcqa)."""
    rng = np.random.default_rng(seed)
    return _table(rng.integers(0, k, size=(n, m)) == 0, np.zeros(n), ("medmcqa",))


def _competent(n, seed):
    """Three specialists on 4-option queries: candidate j right on its third of the
    queries (and on 25% of the rest by guessing); oracle ~1."""
    rng = np.random.default_rng(seed)
    own = np.arange(n) % 3
    q = rng.uniform(size=(n, 3)) < 0.25
    q[np.arange(n), own] = True
    return _table(q, np.zeros(n), ("logiqa",))


def test_competent_pool_passes():
    c = _gate.competence(_competent(300, 0), label="planted")
    assert c.precondition.passed, c.precondition.measured
    assert c.below_chance == ()
    assert c.excess.low > 0.1
    assert c.metrics["gate/chance_rate"] == pytest.approx(0.25)


@pytest.mark.parametrize("seed", range(3))
def test_guessers_refused(seed):
    c = _gate.competence(_guessers(600, 6, 4, seed))
    assert not c.precondition.passed
    assert c.below_chance  # at least one guesser's Wilson bound reaches chance
    assert c.excess.low <= 0  # the oracle of guessers is the guessers' oracle


def test_identical_competent_candidates_refused_by_oracle_part():
    """Six copies of one 60%-accurate candidate: each is above chance, but their oracle (0.6)
    is below six guessers' (1 - 0.75^6 = 0.822): no routing headroom."""
    rng = np.random.default_rng(1)
    col = rng.uniform(size=400) < 0.6
    c = _gate.competence(_table(np.tile(col[:, None], (1, 6)), np.zeros(400), ("reclor",)))
    assert c.below_chance == ()
    assert not c.precondition.passed
    assert c.excess.high < 0


def test_guessers_oracle_against_simulation():
    """G = mean_q 1 - (1 - 1/K_q)^M against M simulated uniform guesses per query."""
    groups = np.array([0] * 200 + [1] * 100 + [2] * 100)
    names = ("shape", "colour", "yes_no")  # 3, 8, 2 options
    t = _table(np.zeros((400, 5), bool), groups, names)
    c = _gate.competence(t)
    rng = np.random.default_rng(0)
    k = np.array([3, 8, 2])[groups]
    sims = rng.integers(0, k[None, :, None], size=(4000, 400, 5)) == 0  # option 0 right
    assert c.metrics["gate/oracle_of_guessers"] == pytest.approx(sims.any(2).mean(), abs=0.005)
    assert c.metrics["gate/chance_rate"] == pytest.approx((200 / 3 + 100 / 8 + 100 / 2) / 400)


def test_wilson_bound_against_formula():
    """The per-candidate bound is the Wilson score interval's lower end (closed form)."""
    t = _competent(300, 2)
    c = _gate.competence(t)
    for j, name in enumerate(t.candidates):
        k, n, z = t.quality[:, j].sum(), t.n_queries, 1.959963984540054
        p = k / n
        lo = (p + z * z / (2 * n) - z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / (
            1 + z * z / n
        )
        assert c.metrics[f"gate/accuracy/{name}"].low == pytest.approx(lo, abs=1e-9)


def test_failed_gate_makes_a_claim_untestable():
    c = _gate.competence(_guessers(600, 6, 4, 0), label="guessers")
    claim = at_least(Estimate(0.1, 0.05, 0.15, 0.95, "t", 10), 0.0, null="0", claim="x", paper="y")
    out = gated(claim, c.precondition)
    assert out.verdict == "untestable"
    assert out.gate.name.startswith(_gate.GATE_NAME)
    assert gated(claim, _gate.competence(_competent(300, 0)).precondition).verdict == "holds"
    assert isinstance(c.precondition, Precondition)


def test_bad_inputs():
    t = _guessers(50, 2, 4, 0)
    with pytest.raises(ValueError, match="binary"):
        _gate.competence(_table(np.full((50, 2), 0.5), np.zeros(50), ("medmcqa",)))
    with pytest.raises(ValueError, match="option count"):
        _gate.competence(_table(t.quality, np.zeros(50), ("unknown",)))


def test_haps_sharing_ablation_routing_precondition():
    """routing_haps_ablation's sharing claim: refused when both arms send every held-out
    query to one model on some seed, passed when one arm routes on every seed."""
    from experiments.routing import haps_ablation

    one, two = np.array([0, 9, 0]), np.array([4, 5, 0])
    ok = haps_ablation.routing_precondition([two, one, two], [one, two, one])
    assert ok.passed, ok.measured
    bad = haps_ablation.routing_precondition([two, one], [one, one])
    assert not bad.passed
    assert "seeds [1]" in bad.measured
    with pytest.raises(ValueError, match="per-seed"):
        haps_ablation.routing_precondition([two], [])
