"""Boundary F1 (P11, issue 34 item 7's structural metric) against a brute-force oracle."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab import em


def _brute_f1(pred: np.ndarray, true: np.ndarray, tol: float) -> float:
    """Boundary pixels by explicit neighbour loops, distances by all pairs."""

    def bnd(lab):
        out = []
        h, w = lab.shape
        for i in range(h):
            for j in range(w):
                for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                    a, b = i + di, j + dj
                    if 0 <= a < h and 0 <= b < w and lab[a, b] != lab[i, j]:
                        out.append((i, j))
                        break
        return np.asarray(out, float).reshape(-1, 2)

    bp, bt = bnd(pred), bnd(true)
    if len(bp) == 0 and len(bt) == 0:
        return 1.0
    if len(bp) == 0 or len(bt) == 0:
        return 0.0
    d = np.sqrt(((bp[:, None, :] - bt[None, :, :]) ** 2).sum(-1))
    p = float(np.mean(d.min(1) <= tol))
    r = float(np.mean(d.min(0) <= tol))
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def _two_cells(col: int, shape=(12, 16)) -> np.ndarray:
    lab = np.zeros(shape, np.int32)
    lab[:, col:] = 1
    return lab


def test_identical_and_shifted_boundaries():
    true = _two_cells(8)
    assert em.boundary_f1(true, true) == 1.0
    # relabelling does not matter
    assert em.boundary_f1(true + 5, true) == 1.0
    # a boundary moved by 2 columns: within tolerance 2, outside tolerance 1
    moved = _two_cells(10)
    assert em.boundary_f1(moved, true, tolerance=2.0) == 1.0
    # true boundary pixels are columns 7, 8; moved ones 9, 10: at tolerance 1 only
    # column 8 <-> 9 match, so precision = recall = 1/2
    assert em.boundary_f1(moved, true, tolerance=1.0) == pytest.approx(0.5)
    assert em.boundary_f1(moved, true, tolerance=0.0) == 0.0


def test_no_boundaries():
    one = np.zeros((6, 6), np.int32)
    assert em.boundary_f1(one, one) == 1.0
    assert em.boundary_f1(one, _two_cells(3, (6, 6))) == 0.0
    assert em.boundary_f1(_two_cells(3, (6, 6)), one) == 0.0


@pytest.mark.parametrize("tol", [0.0, 1.0, 1.5, 3.0])
def test_matches_brute_force_on_random_segmentations(tol):
    rng = np.random.default_rng(0)
    for _ in range(5):
        # blocky random segmentations (labels on a coarse grid, upsampled)
        true = np.kron(rng.integers(0, 4, (4, 5)), np.ones((3, 3), np.int64))
        pred = np.kron(rng.integers(0, 4, (6, 5)), np.ones((2, 3), np.int64))
        assert em.boundary_f1(pred, true, tolerance=tol) == pytest.approx(
            _brute_f1(pred, true, tol), abs=1e-12
        )


def test_over_segmentation_lowers_precision_only():
    true = _two_cells(8)
    over = true.copy()
    over[6:, :] += 2  # an extra horizontal cut
    f1 = em.boundary_f1(over, true, tolerance=0.0)
    assert 0.0 < f1 < 1.0
    assert f1 == pytest.approx(_brute_f1(over, true, 0.0))


def test_bad_input():
    true = _two_cells(8)
    with pytest.raises(ValueError, match="tolerance"):
        em.boundary_f1(true, true, tolerance=float("nan"))
    with pytest.raises(ValueError, match="tolerance"):
        em.boundary_f1(true, true, tolerance=-1.0)
    with pytest.raises(ValueError, match="pred_labels"):
        em.boundary_f1(true[:, :5], true)
    with pytest.raises(ValueError, match="true_labels"):
        em.boundary_f1(true, true.astype(np.float32))
