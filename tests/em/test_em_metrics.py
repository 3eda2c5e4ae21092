"""P11 metrics and watershed segmentation: hand-made segmentations and formula oracles."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
import scipy.ndimage as ndi

from jaxlab.em import (
    adapted_rand_error,
    cremi_score,
    generate_em,
    merge_small_segments,
    psnr,
    relabel_connected,
    segment_watershed,
    segmentation_scores,
    ssim,
    variation_of_information,
)


def _conditional_entropy_bits(a: np.ndarray, b: np.ndarray) -> float:
    """Oracle: H(a | b) in bits from the contingency table."""
    _, ia = np.unique(a.ravel(), return_inverse=True)
    _, ib = np.unique(b.ravel(), return_inverse=True)
    joint = np.zeros((ia.max() + 1, ib.max() + 1))
    np.add.at(joint, (ia, ib), 1.0)
    joint /= joint.sum()
    pb = joint.sum(axis=0)
    nz = joint > 0
    return float(-np.sum(joint[nz] * np.log2((joint / pb[None, :])[nz])))


def _arand_oracle(pred: np.ndarray, true: np.ndarray) -> float:
    """Oracle: 1 - F-score of Rand precision/recall over ordered pixel pairs."""
    _, ip = np.unique(pred.ravel(), return_inverse=True)
    _, it = np.unique(true.ravel(), return_inverse=True)
    n = pred.size
    table = np.zeros((ip.max() + 1, it.max() + 1))
    np.add.at(table, (ip, it), 1.0)
    together_both = np.sum(table**2) - n
    together_pred = np.sum(table.sum(axis=1) ** 2) - n
    together_true = np.sum(table.sum(axis=0) ** 2) - n
    precision = together_both / together_pred
    recall = together_both / together_true
    return 1.0 - 2 * precision * recall / (precision + recall)


@pytest.fixture
def two_cells():
    true = np.ones((12, 12), np.int32)
    true[:, 6:] = 2
    return true


def test_identical_segmentations_score_zero(two_cells):
    permuted = np.where(two_cells == 1, 7, 3).astype(np.int64)  # ids do not matter
    for pred in (two_cells, permuted):
        scores = segmentation_scores(pred, two_cells)
        assert scores == pytest.approx(
            {
                "voi_split": 0.0,
                "voi_merge": 0.0,
                "voi": 0.0,
                "arand": 0.0,
                "cremi": 0.0,
                "boundary_f1": 1.0,
            },
            abs=1e-12,
        )


def test_split_is_split_and_merge_is_merge(two_cells):
    pred = two_cells.copy()
    pred[:3, :6] = 5  # cut a quarter off cell 1: over-segmentation
    split, merge = variation_of_information(pred, two_cells)
    assert split > 0.0
    assert merge == pytest.approx(0.0, abs=1e-12)
    assert split == pytest.approx(_conditional_entropy_bits(pred, two_cells), rel=1e-9)
    merged = np.ones_like(two_cells)  # one segment over both cells: under-segmentation
    split, merge = variation_of_information(merged, two_cells)
    assert merge == pytest.approx(1.0, rel=1e-9)  # H(true | pred) = 1 bit for a 50/50 merge
    assert split == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_voi_and_arand_match_contingency_oracles(seed):
    rng = np.random.default_rng(seed)
    true = rng.integers(1, 5, (10, 10))
    pred = rng.integers(1, 4, (10, 10))
    split, merge = variation_of_information(pred, true)
    assert split == pytest.approx(_conditional_entropy_bits(pred, true), rel=1e-9)
    assert merge == pytest.approx(_conditional_entropy_bits(true, pred), rel=1e-9)
    assert adapted_rand_error(pred, true) == pytest.approx(_arand_oracle(pred, true), rel=1e-9)
    scores = segmentation_scores(pred, true)
    assert scores["voi"] == pytest.approx(split + merge)
    assert scores["cremi"] == pytest.approx(math.sqrt(scores["arand"] * (split + merge)))


def test_arand_of_hand_split(two_cells):
    true = np.ones((4, 4), np.int32)
    pred = true.copy()
    pred[3] = 2  # 12 / 4 split of a 16-pixel cell
    # pairs: both 144, pred 144, true 240 -> precision 1, recall 0.6, F 0.75
    assert adapted_rand_error(pred, true) == pytest.approx(0.25)
    assert adapted_rand_error(true, pred) == pytest.approx(0.25)


def test_cremi_score_formula():
    assert cremi_score(0.25, 1.0, 0.0) == pytest.approx(0.5)
    assert cremi_score(0.0, 3.0, 2.0) == 0.0
    with pytest.raises(ValueError, match="arand"):
        cremi_score(-0.1, 1.0, 1.0)
    with pytest.raises(ValueError, match="voi_merge"):
        cremi_score(0.1, 1.0, math.nan)


def test_psnr_matches_formula():
    rng = np.random.default_rng(4)
    target = rng.random((16, 16))
    pred = np.clip(target + 0.05 * rng.standard_normal(target.shape), 0, 1)
    mse = np.mean((pred - target) ** 2)
    assert psnr(pred, target) == pytest.approx(10 * np.log10(1.0 / mse), rel=1e-9)
    assert psnr(pred, target, data_range=2.0) == pytest.approx(10 * np.log10(4.0 / mse), rel=1e-9)
    assert psnr(target, target) == math.inf
    assert isinstance(psnr(pred.astype(np.float32), target.astype(np.float32)), float)


def test_ssim_properties():
    rng = np.random.default_rng(5)
    target = ndi.gaussian_filter(rng.random((32, 32)), 2.0)
    assert ssim(target, target) == pytest.approx(1.0)
    noisy = target + 0.05 * rng.standard_normal(target.shape)
    very_noisy = target + 0.2 * rng.standard_normal(target.shape)
    s1, s2 = ssim(noisy, target), ssim(very_noisy, target)
    assert 1.0 > s1 > s2
    assert ssim(target, noisy) == pytest.approx(s1)  # symmetric


def test_metric_bad_inputs(two_cells):
    img = np.zeros((16, 16))
    with pytest.raises(ValueError, match="pred"):
        psnr(np.zeros((16, 15)), img)
    with pytest.raises(ValueError, match="pred"):
        psnr(np.full((16, 16), np.nan), img)
    with pytest.raises(ValueError, match="target"):
        ssim(img, np.zeros((4, 16, 16)))
    with pytest.raises(ValueError, match="target"):
        ssim(np.zeros((5, 5)), np.zeros((5, 5)))
    with pytest.raises(ValueError, match="data_range"):
        psnr(img, img + 0.1, data_range=0.0)
    with pytest.raises(ValueError, match="pred_labels"):
        variation_of_information(two_cells[:, :5], two_cells)
    with pytest.raises(ValueError, match="pred_labels"):
        adapted_rand_error(two_cells.astype(np.float64), two_cells)
    with pytest.raises(ValueError, match="true_labels"):
        segmentation_scores(two_cells, two_cells.astype(np.float32))


# ---------------------------------------------------------------- segmentation


def test_relabel_and_merge_small_segments():
    labels = np.ones((10, 10), np.int64)
    labels[:, 4:6] = 2  # splits label 1 into two 4-connected pieces
    labels[8, 8] = 3  # a 1-pixel fragment inside the right piece of label 1
    pieces = relabel_connected(labels)
    assert pieces.dtype == np.int32
    assert len(np.unique(pieces)) == 4
    merged = merge_small_segments(pieces, 5)
    assert len(np.unique(merged)) == 3
    assert merged[8, 8] == merged[8, 7]
    assert merged.min() == 1
    assert merged.max() == 3


def test_watershed_two_cells(two_cells):
    true = np.ones((40, 40), np.int32)
    true[:, 20:] = 2
    prob = np.zeros((40, 40))
    prob[:, 19:21] = 1.0  # the 2-pixel membrane between the cells
    seg = segment_watershed(prob)
    assert seg.dtype == np.int32
    assert seg.min() == 1
    assert len(np.unique(seg)) == 2
    assert adapted_rand_error(seg, true) < 1e-9
    # a soft, noisy boundary map still gives two cells
    soft = ndi.gaussian_filter(prob, 1.0) + 0.05 * np.random.default_rng(6).random(prob.shape)
    seg = segment_watershed(soft / soft.max())
    assert len(np.unique(seg)) == 2
    assert adapted_rand_error(seg, true) < 0.01


def test_watershed_markers_elongated_cell_and_dumbbell():
    # an elongated cell (ridge with small bumps) stays one segment
    prob = np.ones((24, 80))
    prob[4:20, 4:76] = 0.0
    seg = segment_watershed(prob)
    assert len(np.unique(seg)) == 1
    # two round cells joined by a 2-px neck (a gap in the membrane) are split
    yy, xx = np.mgrid[0:40, 0:80]
    inside = ((yy - 20) ** 2 + (xx - 20) ** 2 < 15**2) | ((yy - 20) ** 2 + (xx - 58) ** 2 < 15**2)
    inside |= (abs(yy - 20) < 1) & (xx > 20) & (xx < 58)
    seg = segment_watershed(np.where(inside, 0.0, 1.0))
    assert len(np.unique(seg)) == 2
    assert seg[20, 20] != seg[20, 58]


@pytest.mark.parametrize("name", ["cremi_like", "dense"])
def test_watershed_on_generator_boundaries(name, getkey):
    sample = generate_em(name, 64, key=getkey())
    true = np.asarray(sample.labels)
    seg = segment_watershed(np.asarray(sample.boundaries))
    assert seg.shape == true.shape
    assert seg.min() >= 1
    scores = segmentation_scores(seg, true)
    assert scores["voi"] < 0.45, scores
    assert scores["arand"] < 0.08, scores
    # much better than a trivial one-segment answer
    trivial = segmentation_scores(np.ones_like(true), true)
    assert scores["voi"] < 0.2 * trivial["voi"]
    assert scores["boundary_f1"] > 0.8 > trivial["boundary_f1"] == 0.0


def test_watershed_bad_inputs():
    prob = np.zeros((16, 16))
    with pytest.raises(ValueError, match="boundary_prob"):
        segment_watershed(np.zeros((2, 16, 16)))
    with pytest.raises(ValueError, match="boundary_prob"):
        segment_watershed(np.full((16, 16), np.nan))
    with pytest.raises(ValueError, match="threshold"):
        segment_watershed(prob, threshold=0.0)
    with pytest.raises(ValueError, match="min_size"):
        segment_watershed(prob, min_size=0)
    with pytest.raises(ValueError, match="min_distance"):
        segment_watershed(prob, min_distance=1.5)
    # all-boundary map: one segment, every pixel labelled
    assert np.all(segment_watershed(np.ones((8, 8))) == 1)
    # jax arrays are accepted
    assert segment_watershed(jax.numpy.asarray(prob)).shape == (16, 16)
