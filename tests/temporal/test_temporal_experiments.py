"""temporal_sociopatterns' parameter-space claims: point values against the model's
bounds (p in [0, 1], alpha, gamma >= 0)."""

import numpy as np

from experiments.temporal import sociopatterns


def test_in_space_holds_inside_and_fails_outside_the_parameter_space():
    inside = sociopatterns._in_space("net", np.array([1.0, 0.1, 0.6, 1.5, 0.0]))
    assert len(inside) == 4
    assert {c.verdict for c in inside.values()} == {"holds"}
    for theta, bad in (
        ([1.0, 0.1, 1.2, 1.5, 1.0], "persistence <= 1"),
        ([1.0, 0.1, -0.1, 1.5, 1.0], "persistence >= 0"),
        ([1.0, 0.1, 0.6, -0.2, 1.0], "formation >= 0"),
        ([1.0, 0.1, 0.6, 1.5, -1e-3], "closure >= 0"),
    ):
        claims = sociopatterns._in_space("net", np.array(theta))
        assert {k for k, c in claims.items() if c.verdict == "fails"} == {f"net {bad}"}
        assert all(c.verdict == "holds" for k, c in claims.items() if k != f"net {bad}")
