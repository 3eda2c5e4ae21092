"""Super-resolution and neuron-segmentation metrics of P11 (scikit-image based).

Image quality: PSNR and SSIM. Instance segmentation, as in the CREMI challenge:
variation of information split into its over-segmentation (split) and
under-segmentation (merge) parts, adapted Rand error, and the CREMI score
`sqrt(ARAND * (VOI_split + VOI_merge))`; a structural metric, boundary F1 with a
pixel tolerance (precision and recall of the instance boundaries). NumPy (or JAX)
arrays in, Python floats out.

Conventions: `VOI_split = H(pred | true)` grows when a true cell is cut into
several predicted segments; `VOI_merge = H(true | pred)` grows when one predicted
segment covers several true cells (entropies in bits, as scikit-image computes
them). All pixels count (the synthetic ground truth has no background).

Paper: P11 (PSNR/SSIM for SR; VOI, ARAND, CREMI score for segmentation).
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np

from jaxlab._core import check_array, check_finite, check_real

__all__ = [
    "psnr",
    "ssim",
    "variation_of_information",
    "adapted_rand_error",
    "cremi_score",
    "segmentation_scores",
    "boundary_f1",
]


def _images(pred, target) -> tuple[np.ndarray, np.ndarray]:
    pred, target = np.asarray(pred), np.asarray(target)
    sizes = check_array("target", target, ndim=2, dtype=np.floating)
    check_array(
        "pred", pred, shape=(target.shape[0], target.shape[1]), dtype=np.floating, sizes=sizes
    )
    check_finite("pred", pred)
    check_finite("target", target)
    return pred.astype(np.float64), target.astype(np.float64)


def _data_range(data_range) -> float:
    data_range = float(data_range)
    if not (math.isfinite(data_range) and data_range > 0):
        raise ValueError(f"data_range: expected a finite value > 0, received {data_range!r}")
    return data_range


def _segmentations(pred_labels, true_labels) -> tuple[np.ndarray, np.ndarray]:
    pred, true = np.asarray(pred_labels), np.asarray(true_labels)
    check_array("true_labels", true, dtype=np.integer)
    check_array("pred_labels", pred, shape=true.shape, dtype=np.integer)
    if true.ndim not in (2, 3):
        raise ValueError(f"true_labels: expected a 2-D or 3-D array, received shape {true.shape}")
    return pred, true


def psnr(pred, target, data_range: float = 1.0) -> float:
    """Peak signal-to-noise ratio `10 log10(data_range^2 / MSE)` in dB (`inf` if equal).

    **Arguments:**

    - `pred`, `target`: float arrays `[H, W]`.
    - `data_range`: the dynamic range of the images (1 for images in `[0, 1]`).

    **Returns:** Python float.
    """
    from skimage.metrics import peak_signal_noise_ratio

    pred, target = _images(pred, target)
    data_range = _data_range(data_range)
    if np.array_equal(pred, target):
        return math.inf
    return float(peak_signal_noise_ratio(target, pred, data_range=data_range))


def ssim(pred, target, data_range: float = 1.0) -> float:
    """Structural similarity (scikit-image, 7 x 7 uniform window), 1 for identical images.

    **Arguments:**

    - `pred`, `target`: float arrays `[H, W]`, both sides >= 7.
    - `data_range`: the dynamic range of the images.

    **Returns:** Python float in `[-1, 1]`.
    """
    from skimage.metrics import structural_similarity

    pred, target = _images(pred, target)
    data_range = _data_range(data_range)
    if min(target.shape) < 7:
        raise ValueError(f"target: SSIM needs both sides >= 7, received shape {target.shape}")
    # without full= / gradient= skimage returns the mean SSIM alone
    return float(cast(float, structural_similarity(target, pred, data_range=data_range)))


def variation_of_information(pred_labels, true_labels) -> tuple[float, float]:
    """Variation of information split into `(split, merge)` (bits).

    `split = H(pred | true)` (over-segmentation), `merge = H(true | pred)`
    (under-segmentation); their sum is the VOI.

    **Arguments:**

    - `pred_labels`, `true_labels`: integer arrays of the same shape (2-D or 3-D).

    **Returns:** `(split, merge)` Python floats.
    """
    from skimage.metrics import variation_of_information as sk_voi

    pred, true = _segmentations(pred_labels, true_labels)
    # skimage returns (H(image1 | image0), H(image0 | image1)) (checked by a hand-made
    # split in the tests); no label is ignored.
    split, merge = sk_voi(true, pred, ignore_labels=())
    return max(float(split), 0.0), max(float(merge), 0.0)


def adapted_rand_error(pred_labels, true_labels) -> float:
    """Adapted Rand error `1 - F` of the Rand precision and recall (0 = perfect).

    **Arguments:**

    - `pred_labels`, `true_labels`: integer arrays of the same shape (2-D or 3-D).

    **Returns:** Python float in `[0, 1]`.
    """
    from skimage.metrics import adapted_rand_error as sk_arand

    pred, true = _segmentations(pred_labels, true_labels)
    error, _, _ = sk_arand(true, pred, ignore_labels=())
    return max(float(error), 0.0)


def cremi_score(arand: float, voi_split: float, voi_merge: float) -> float:
    """CREMI score `sqrt(ARAND * (VOI_split + VOI_merge))` (lower is better).

    **Arguments:** the three non-negative error values.

    **Returns:** Python float.
    """
    arand = check_real("arand", arand, low=0.0)
    voi_split = check_real("voi_split", voi_split, low=0.0)
    voi_merge = check_real("voi_merge", voi_merge, low=0.0)
    return math.sqrt(arand * (voi_split + voi_merge))


def segmentation_scores(pred_labels, true_labels) -> dict[str, float]:
    """All segmentation metrics: `voi_split`, `voi_merge`, `voi`, `arand`, `cremi` (lower
    is better) and `boundary_f1` (tolerance 2 pixels, higher is better).

    **Arguments:**

    - `pred_labels`, `true_labels`: integer arrays of the same shape (2-D or 3-D).

    **Returns:** dict of Python floats.
    """
    split, merge = variation_of_information(pred_labels, true_labels)
    arand = adapted_rand_error(pred_labels, true_labels)
    return {
        "voi_split": split,
        "voi_merge": merge,
        "voi": split + merge,
        "arand": arand,
        "cremi": cremi_score(arand, split, merge),
        "boundary_f1": boundary_f1(pred_labels, true_labels),
    }


def _boundaries(labels: np.ndarray) -> np.ndarray:
    """Pixels whose label differs from a 4-neighbour's (both sides of each contact)."""
    b = np.zeros(labels.shape, bool)
    for axis in range(labels.ndim):
        lo = [slice(None)] * labels.ndim
        hi = [slice(None)] * labels.ndim
        lo[axis], hi[axis] = slice(None, -1), slice(1, None)
        diff = labels[tuple(lo)] != labels[tuple(hi)]
        b[tuple(lo)] |= diff
        b[tuple(hi)] |= diff
    return b


def boundary_f1(pred_labels, true_labels, tolerance: float = 2.0) -> float:
    """Boundary F1 of two instance segmentations (a structural metric, higher is better).

    The boundary of a segmentation is every pixel with a 4-neighbour of another label.
    Precision: the fraction of predicted boundary pixels within Euclidean distance
    `tolerance` of a true boundary pixel; recall: the fraction of true boundary pixels
    within `tolerance` of a predicted one; F1 their harmonic mean. Two segmentations
    without boundaries score 1; exactly one without boundaries scores 0.

    **Arguments:**

    - `pred_labels`, `true_labels`: integer arrays of the same shape (2-D or 3-D).
    - `tolerance`: finite distance in pixels, >= 0.

    **Returns:** Python float in `[0, 1]`.
    """
    from scipy.ndimage import distance_transform_edt

    pred, true = _segmentations(pred_labels, true_labels)
    tolerance = float(tolerance)
    if not (math.isfinite(tolerance) and tolerance >= 0.0):
        raise ValueError(f"tolerance: expected a finite value >= 0, received {tolerance!r}")
    bp, bt = _boundaries(pred), _boundaries(true)
    if not bp.any() and not bt.any():
        return 1.0
    if not bp.any() or not bt.any():
        return 0.0
    dist_to_true = distance_transform_edt(~bt)
    dist_to_pred = distance_transform_edt(~bp)
    precision = float(np.mean(cast(np.ndarray, dist_to_true)[bp] <= tolerance))
    recall = float(np.mean(cast(np.ndarray, dist_to_pred)[bt] <= tolerance))
    if precision + recall == 0.0:
        return 0.0
    return 2.0 * precision * recall / (precision + recall)
