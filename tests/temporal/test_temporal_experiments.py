"""temporal_sociopatterns' parameter-space claims: each bound read from the parameter's
95% plug-in interval (p in [0, 1], alpha, gamma >= 0), never from a point value."""

import numpy as np
import pytest

from experiments._harness import Estimate
from experiments.temporal import sociopatterns


def _ci(values, half):
    return [
        Estimate(v, v - h, v + h, 0.95, "normal, plug-in", 100)
        for v, h in zip(values, np.broadcast_to(half, len(values)), strict=True)
    ]


def test_in_space_holds_inside_and_fails_outside_the_parameter_space():
    inside = sociopatterns._in_space("net", _ci([1.0, 0.1, 0.6, 1.5, 0.2], 0.05))
    assert len(inside) == 4
    assert {c.verdict for c in inside.values()} == {"holds"}
    assert all(c.estimate is not None and c.estimate.has_interval for c in inside.values())
    assert all((c.alpha or 0) > 0 for c in inside.values())
    for theta, bad in (
        ([1.0, 0.1, 1.2, 1.5, 1.0], "persistence <= 1"),
        ([1.0, 0.1, -0.1, 1.5, 1.0], "persistence >= 0"),
        ([1.0, 0.1, 0.6, -0.2, 1.0], "formation >= 0"),
        ([1.0, 0.1, 0.6, 1.5, -0.1], "closure >= 0"),
    ):
        claims = sociopatterns._in_space("net", _ci(theta, 0.05))
        assert {k for k, c in claims.items() if c.verdict == "fails"} == {f"net {bad}"}
        assert all(c.verdict == "holds" for k, c in claims.items() if k != f"net {bad}")


def test_in_space_is_inconclusive_when_the_interval_spans_a_bound():
    # a closure estimate of 1e-3 inside the space but with an interval across 0: the data
    # cannot tell; a point value would have said "holds"
    claims = sociopatterns._in_space("net", _ci([1.0, 0.1, 0.6, 1.5, 1e-3], 0.05))
    assert claims["net closure >= 0"].verdict == "inconclusive"
    assert {c.verdict for k, c in claims.items() if k != "net closure >= 0"} == {"holds"}


def test_in_space_refuses_point_values():
    with pytest.raises(ValueError, match="estimates"):
        sociopatterns._in_space("net", [Estimate.point(v) for v in (1.0, 0.1, 0.6, 1.5, 0.2)])
    with pytest.raises(ValueError, match="estimates"):
        sociopatterns._in_space("net", _ci([1.0, 0.1, 0.6], 0.05))
