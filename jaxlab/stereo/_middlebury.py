"""The real Middlebury 2014 'motorcycle' pair that scikit-image's wheel ships.

Files `skimage/data/motorcycle_{left,right}.png` and `motorcycle_disp.npz`
(left-view ground-truth disparity, inf where unknown), located through
`importlib.metadata`; scikit-image itself is not imported.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np

from jaxlab._core import check_positive_int

__all__ = ["load_motorcycle"]


def _file(name: str):
    try:
        dist = importlib.metadata.distribution("scikit-image")
    except importlib.metadata.PackageNotFoundError as e:
        raise FileNotFoundError(
            "the Middlebury pair ships in the 'scikit-image' wheel: pip install scikit-image"
        ) from e
    for f in dist.files or []:
        if str(f).endswith(f"skimage/data/{name}"):
            return Path(str(dist.locate_file(f)))
    raise FileNotFoundError(f"scikit-image is installed but skimage/data/{name} is missing")


def load_motorcycle(scale: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(left, right, disparity): grey images in [0, 1] (H, W) and ground-truth disparity.

    `scale` > 1 box-downsamples the images by that factor and divides disparities by it:
    a positive integer (not a bool) up to the shorter image side (a larger one would
    leave no pixel; ValueError naming it).
    """
    from PIL import Image

    scale = check_positive_int("scale", scale)
    imgs = [
        np.asarray(Image.open(_file(f"motorcycle_{s}.png")).convert("L"), np.float64) / 255
        for s in ("left", "right")
    ]
    disp = np.load(_file("motorcycle_disp.npz"))["arr_0"].astype(np.float64)
    if scale > min(disp.shape):
        raise ValueError(
            f"scale: expected at most {min(disp.shape)} (the shorter image side), received {scale}"
        )
    if scale > 1:
        h, w = (disp.shape[0] // scale) * scale, (disp.shape[1] // scale) * scale

        def down(a):
            return a[:h, :w].reshape(h // scale, scale, w // scale, scale).mean((1, 3))

        imgs = [down(i) for i in imgs]
        disp = down(disp) / scale  # any unknown (inf) pixel in a block stays inf
    return imgs[0], imgs[1], disp
