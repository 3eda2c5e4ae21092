"""observers.coverage_bound refuses a complex confidence with a ValueError naming it (the
contract fuzz of issue #59 met a TypeError from float() before)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxlab.observers as ob


def test_coverage_bound_refuses_a_complex_confidence():
    # no failures: (1 - confidence)^(1/N), the documented closed form
    assert ob.coverage_bound(100, 0, 0.99) == pytest.approx(0.01 ** (1 / 100))
    with pytest.raises(ValueError, match="confidence: expected (real values|dtype floating)"):
        ob.coverage_bound(100, 0, 0.99 + 1j)


# issue #59: the functions newly declared in the fuzz table refuse bad inputs by name
# (before: AttributeError/TypeError from inside, or a silent NaN/inf result)


def test_lmi_penalty_refuses_nan_and_a_string_margin():
    # eigenvalues -0.5 + margin 0.1 = -0.4: three log-barrier terms -1e-3 log(0.4)
    assert float(ob.lmi_penalty(-0.5 * np.eye(3), margin=0.1)) == pytest.approx(
        -3e-3 * np.log(0.4), rel=1e-5
    )
    with pytest.raises(ValueError, match="H: expected finite"):
        ob.lmi_penalty(np.array([[np.nan, 0.0], [0.0, -1.0]]), margin=0.1)
    with pytest.raises(ValueError, match="H: expected a square"):
        ob.lmi_penalty(np.zeros((2, 3)), margin=0.1)
    with pytest.raises(ValueError, match="margin"):
        ob.lmi_penalty(-np.eye(2), margin="abc")


def test_extended_error_model_refuses_none_and_mismatched_shapes():
    A, C, E = np.array([[0.0, 1.0], [-2.0, -0.5]]), np.array([[1.0, 0.0]]), np.eye(2)[:, 1:]
    A_eps, C_eps, D = ob.extended_error_model(A, C, E, 0.1)
    assert A_eps.shape == (3, 3)
    assert C_eps.shape == (1, 3)
    assert D.shape == (3, 1)
    with pytest.raises(ValueError, match="A: expected an array"):
        ob.extended_error_model(None, C, E, 0.1)
    with pytest.raises(ValueError, match="E"):
        ob.extended_error_model(A, C, np.ones((3, 1)), 0.1)
    with pytest.raises(ValueError, match="epsilon"):
        ob.extended_error_model(A, C, E, float("nan"))


def test_sample_errors_refuses_bad_sizes_and_radii():
    key = jax.random.key(0)
    assert ob.sample_errors(4, 3, key=key, radius=1.0, min_radius=0.1).shape == (4, 3)
    with pytest.raises(ValueError, match="num"):
        ob.sample_errors(0, 3, key=key, radius=1.0, min_radius=0.1)
    with pytest.raises(ValueError, match="dim"):
        ob.sample_errors(4, 2.5, key=key, radius=1.0, min_radius=0.1)
    with pytest.raises(ValueError, match="num x dim: needs about"):  # before: abort in XLA
        ob.sample_errors(10**9, 10**9, key=key, radius=1.0, min_radius=0.1)
    with pytest.raises(ValueError, match="radius"):
        ob.sample_errors(4, 3, key=key, radius=float("inf"), min_radius=0.1)
    with pytest.raises(ValueError, match="min_radius"):
        ob.sample_errors(4, 3, key=key, radius=1.0, min_radius=2.0)


def test_x29_refuses_a_string_uncertainty_and_a_nan_reference():
    with pytest.raises(ValueError, match="uncertainty"):
        ob.x29_lateral("abc")
    with pytest.raises(ValueError, match="ref_amp"):
        ob.x29_longitudinal(ref_amp=float("nan"))
    with pytest.raises(ValueError, match="ref_amp"):
        ob.x29_lateral(ref_amp=None)
    with pytest.raises(ValueError, match="ref_freq: expected a scalar or shape"):
        ob.x29_lateral(ref_freq=(0.1, 0.2, 0.3))
