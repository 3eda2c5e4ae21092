"""topology's encodings refuse a complex adjacency (the contract fuzz of issue #59: its
imaginary part was dropped with only a ComplexWarning)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import jaxlab.topology as tp
from jaxlab.topology._encodings import RWSE_MAX_STEPS

PATH3 = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])


def test_encodings_refuse_a_complex_adjacency():
    # by hand: from an end, 2 steps return with probability 1 * 1/2; from the middle, 1
    np.testing.assert_allclose(tp.rwse(PATH3, 2)[:, 1], [0.5, 1.0, 0.5])
    for adj in (PATH3 + 1j, sp.csr_array(PATH3 + 1j)):
        with pytest.raises(ValueError, match="adj: expected real weights"):
            tp.rwse(adj, 2)
        with pytest.raises(ValueError, match="adj: expected real weights"):
            tp.lap_pe(adj, 1)


def test_huge_steps_and_k_are_refused_before_allocation():
    """Issue #59 (contract fuzz): steps=10**9 / k=10**9 allocated [n, steps] / [n, 2k]."""
    assert tp.lap_pe(PATH3, 1).shape == (3, 2)
    with pytest.raises(ValueError, match=f"^steps: expected at most {RWSE_MAX_STEPS}"):
        tp.rwse(PATH3, 10**9)
    with pytest.raises(ValueError, match="^k: needs about"):
        tp.lap_pe(PATH3, 10**12)
