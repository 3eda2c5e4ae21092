"""Issue 30 finding 10 (cells): `train_lecell` rejects NaN, inf, negative and non-numeric
counts itself (its caller `counts_matrix` did; the public function must too)."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab import cells


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.nan, "^counts: expected finite values, received 1 NaN/inf"),
        (np.inf, "^counts: expected finite values, received 1 NaN/inf"),
        (-3.0, r"^counts: expected values in \[0.0, inf\], received min -3.0"),
    ],
)
def test_train_lecell_rejects_nan_inf_negative_counts(getkey, value, match):
    counts = np.random.default_rng(0).poisson(2.0, (16, 6)).astype(np.float64)
    counts[3, 2] = value
    with pytest.raises(ValueError, match=match):
        cells.train_lecell(counts, key=getkey(), steps=1)


def test_train_lecell_rejects_non_numeric_and_wrong_rank(getkey):
    with pytest.raises(ValueError, match="^counts: expected numeric counts"):
        cells.train_lecell(np.full((4, 3), "x"), key=getkey(), steps=1)
    with pytest.raises(ValueError, match=r"^counts: expected \(cells, genes\)"):
        cells.train_lecell(np.zeros(5), key=getkey(), steps=1)
    with pytest.raises(ValueError, match=r"^counts: expected \(cells, genes\)"):
        cells.train_lecell(None, key=getkey(), steps=1)
