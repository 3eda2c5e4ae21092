"""biophys.hh_reference_voltage refuses a sample count larger than memory (the contract
fuzz of issue #59: steps=10**9 ran out of memory inside XLA)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxlab.biophys as bp


def test_hh_reference_voltage_bounds_steps_before_allocating():
    with jax.enable_x64(True):
        v = bp.hh_reference_voltage(bp.HodgkinHuxley(), np.array([10.0]), steps=4, dt=0.025)
        assert v.shape == (1, 4)
        assert np.isfinite(np.asarray(v)).all()
        with pytest.raises(ValueError, match="^steps: needs about"):
            bp.hh_reference_voltage(bp.HodgkinHuxley(), np.array([10.0]), steps=10**12, dt=0.025)
