"""Synthetic serial-section EM images of neural tissue with instance ground truth (P11).

No EM data of neural tissue ships offline, so P11's experiments run on this
documented, parameterised generator. One sample is built in three stages:

1. `tessellate` (JAX, jit-able): neuron cross-sections as a curved power
   (weighted Voronoi) tessellation of jittered-grid seeds. Pixel positions are
   domain-warped by a smooth random field before the nearest-seed lookup (large,
   cell-scale warp -> curved boundaries; small-scale jitter -> wiggly membranes),
   and seed weights vary cell sizes (thin axons next to large dendrites).
2. `clean_labels` (NumPy/scikit-image): a warped tessellation can split a cell
   into pieces and leave slivers, so every 4-connected piece gets its own id and
   pieces smaller than a tenth of the mean cell area merge into a neighbour.
3. `render_em` (JAX, jit-able, vmap-able): membranes are the pixels whose
   4-neighbourhood crosses an instance change, dilated to a spatially varying
   thickness; they are dark (`membrane_contrast`). Cells get a per-cell grey
   level and a multi-scale intracellular texture, mitochondria (dark elongated
   ellipses with a darker outer membrane and cristae stripes) and clustered
   synaptic vesicles (small dark rings), never crossing a membrane. Then the
   imaging model: Gaussian blur (`blur_sigma`) and signal-dependent Gaussian
   (Poisson-like shot) noise, clipped to `[0, 1]`.

`generate_em` / `generate_em_dataset` chain the three stages (NumPy-level
wrappers around the jitted JAX cores; the dataset version vmaps both cores).
For generation entirely inside `jit` (e.g. on-device training data), use
`render_em(regime, tessellate(regime, size, key=k1), key=k2)`: the same images
without stage 2, so ids are not sequential and, rarely, a cell is split into
pieces or leaves a sliver.
Ground truth follows the CREMI convention of dense labels: every pixel belongs
to a cell (ids >= 1), membrane pixels belong to the cell they border, and the
boundary map marks the membranes.

Paper: P11 (synthetic substitute for CREMI / SNEMI-style EM volumes).
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import NamedTuple

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxlab._core import as_array, check_memory, check_positive_int, short_repr

from ._degrade import gaussian_blur
from ._segment import merge_small_segments, relabel_connected

__all__ = [
    "EMRegime",
    "REGIMES",
    "EMSample",
    "tessellate",
    "clean_labels",
    "render_em",
    "label_boundaries",
    "generate_em",
    "generate_em_dataset",
]

_SEED_JITTER = 0.9  # seed displacement inside its grid cell, fraction of the spacing
_GRID_MARGIN = 3  # seed rows/columns beyond each image edge
_THICKNESS_SCALE = 6.0  # correlation length (px) of the membrane-thickness field
_MIN_SIZE = 16  # smallest image side accepted by the generator


@dataclasses.dataclass(frozen=True)
class EMRegime:
    """Parameters of one synthetic EM "data set" (all lengths in high-res pixels).

    Frozen and hashable: it is a static argument of the jitted cores.

    **Fields:**

    - `density`: mean number of cells per 1000 px^2 (cell spacing `sqrt(1000 / density)`).
    - `size_variation`: spread of cell sizes in `[0, 1)` (power-diagram seed weights).
    - `warp`: amplitude of the smooth, cell-scale domain warp as a fraction of the
      cell spacing (boundary curvature), `[0, 1]`.
    - `jitter`: amplitude (px) of the small-scale boundary jitter, `>= 0`.
    - `smoothing`: correlation length (px) of that jitter, `> 0` (larger = smoother).
    - `membrane_thickness`: mean membrane thickness (px), `>= 2` (both sides of an
      instance change are membrane).
    - `thickness_variation`: relative std of the thickness along membranes, `[0, 1)`.
    - `membrane_contrast`: relative darkening of membranes, `(0, 1]`.
    - `texture`: std of the intracellular grey-level texture, `[0, 0.3]`.
    - `mito_rate`: mitochondria per 1000 px^2, `>= 0`.
    - `vesicle_rate`: synaptic vesicles per 1000 px^2, `>= 0` (they come in clusters).
    - `blur_sigma`: imaging point-spread std (px), `>= 0`.
    - `noise_sigma`: noise std at mid-grey (signal-dependent, Poisson-like), `>= 0`.
    """

    density: float = 2.0
    size_variation: float = 0.5
    warp: float = 0.25
    jitter: float = 0.8
    smoothing: float = 3.0
    membrane_thickness: float = 3.0
    thickness_variation: float = 0.3
    membrane_contrast: float = 0.6
    texture: float = 0.04
    mito_rate: float = 0.5
    vesicle_rate: float = 2.0
    blur_sigma: float = 0.7
    noise_sigma: float = 0.04

    def __post_init__(self):
        ranges = {
            "density": (0.05, 50.0),
            "size_variation": (0.0, 0.99),
            "warp": (0.0, 1.0),
            "jitter": (0.0, 10.0),
            "smoothing": (0.5, 100.0),
            "membrane_thickness": (2.0, 12.0),
            "thickness_variation": (0.0, 0.99),
            "membrane_contrast": (0.01, 1.0),
            "texture": (0.0, 0.3),
            "mito_rate": (0.0, 20.0),
            "vesicle_rate": (0.0, 50.0),
            "blur_sigma": (0.0, 10.0),
            "noise_sigma": (0.0, 1.0),
        }
        for name, (lo, hi) in ranges.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
                raise ValueError(f"EMRegime.{name}: expected a number, received {value!r}")
            if not (math.isfinite(value) and lo <= value <= hi):
                raise ValueError(
                    f"EMRegime.{name}: expected a value in [{lo}, {hi}], received {value!r}"
                )

    @property
    def spacing(self) -> float:
        """Mean distance between neighbouring cell seeds (px)."""
        return math.sqrt(1000.0 / self.density)


REGIMES: dict[str, EMRegime] = {
    # CREMI-like: medium-size neurites, clear membranes, moderate noise.
    "cremi_like": EMRegime(),
    # dense neuropil: many small neurites, thin low-contrast membranes, more organelles.
    "dense": EMRegime(
        density=4.5,
        size_variation=0.6,
        warp=0.3,
        membrane_thickness=2.4,
        thickness_variation=0.25,
        membrane_contrast=0.45,
        texture=0.05,
        mito_rate=0.8,
        vesicle_rate=3.0,
        blur_sigma=0.7,
        noise_sigma=0.04,
    ),
    # noisy acquisition: larger cells, weak contrast, strong blur and shot noise.
    "noisy": EMRegime(
        density=1.5,
        membrane_thickness=3.5,
        thickness_variation=0.4,
        membrane_contrast=0.4,
        texture=0.06,
        mito_rate=0.4,
        blur_sigma=1.2,
        noise_sigma=0.12,
    ),
}
"""Named generator regimes ("data sets"): different density / contrast / noise."""


class EMSample(NamedTuple):
    """One synthetic EM image with ground truth (a leading batch axis when stacked).

    - `image`: float32 `[S, S]` in `[0, 1]` (membranes dark).
    - `labels`: int32 `[S, S]` instance ids `>= 1`; every pixel belongs to a cell.
    - `boundaries`: float32 `[S, S]` in `{0, 1}`: membrane pixels (instance changes in
      the 4-neighbourhood, dilated to the membrane thickness).
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    image: Float[Array, "S S"]
    labels: Int[Array, "S S"]
    boundaries: Float[Array, "S S"]


def _as_regime(regime) -> EMRegime:
    if isinstance(regime, str):
        if regime not in REGIMES:
            raise ValueError(f"regime: unknown name {regime!r}; known: {sorted(REGIMES)}")
        return REGIMES[regime]
    if not isinstance(regime, EMRegime):
        raise ValueError(
            f"regime: expected an EMRegime or a name in {sorted(REGIMES)}, "
            f"received {type(regime).__name__}"
        )
    return regime


def _check_size(size) -> int:
    """An image side >= `_MIN_SIZE` whose tessellation fits in memory."""
    size = check_positive_int("size", size)
    if size < _MIN_SIZE:
        raise ValueError(f"size: expected at least {_MIN_SIZE} pixels, received {size}")
    check_memory("size", _BYTES_PER_PIXEL * size * size)
    return size


# the tessellation's (size, size, 25) candidate ids, indices and distances, with slack
_BYTES_PER_PIXEL = 4.0 * 25 * 6


def _bspline_matrix(n_out: int, n_in: int, scale: float) -> np.ndarray:
    """Cubic B-spline interpolation weights `[n_out, n_in]` (knots `scale` px apart)."""
    t = (np.arange(n_out) + 0.5) / scale  # output pixel centres in knot units
    d = np.abs(t[:, None] - np.arange(n_in)[None, :] + 1.0)
    w = np.where(
        d < 1.0, 2.0 / 3.0 - d**2 + d**3 / 2.0, np.where(d < 2.0, (2.0 - d) ** 3 / 6.0, 0.0)
    )
    return (w / w.sum(axis=1, keepdims=True)).astype(np.float32)


class _Draws:
    """All random numbers of one jitted core from a single uniform draw.

    Each `jax.random` call costs a separate threefry compilation (~0.4 s on CPU),
    so the cores declare what they need, draw once, and slice.
    """

    def __init__(self, key: PRNGKeyArray, uniform: dict, normal: dict):
        self._shapes = {**uniform, **normal}
        self._normal = set(normal)
        sizes = [math.prod(sh) for sh in self._shapes.values()]
        tiny = float(np.finfo(np.float32).eps)
        flat = jax.random.uniform(key, (max(1, sum(sizes)),), jnp.float32, tiny, 1.0)
        self._arrays, start = {}, 0
        for (name, sh), n in zip(self._shapes.items(), sizes, strict=True):
            self._arrays[name] = flat[start : start + n].reshape(sh)
            start += n

    def __getitem__(self, name: str) -> Array:
        u = self._arrays[name]
        if name in self._normal:  # inverse-CDF transform, as jax.random.normal does
            return jnp.float32(math.sqrt(2.0)) * jax.lax.erf_inv(2.0 * u - 1.0)
        return u


def _knots(shape: tuple[int, int], scale: float) -> tuple[int, int]:
    return (math.ceil(shape[0] / scale) + 3, math.ceil(shape[1] / scale) + 3)


def _smooth_fields(z: Array, shape: tuple[int, int], scale: float) -> Array:
    """Zero-mean, unit-std random fields `[n, H, W]`, correlation length ~ `scale` px.

    Standard-normal knot values `z` `[n, *_knots(shape, scale)]` on a grid `scale` px
    apart, interpolated by cubic B-splines (two small matrix products).
    """
    low = z.shape[1:]
    wy = jnp.asarray(_bspline_matrix(shape[0], low[0], scale))
    wx = jnp.asarray(_bspline_matrix(shape[1], low[1], scale))
    f = jnp.einsum("yi,nij,xj->nyx", wy, z, wx)
    f = f - jnp.mean(f, axis=(1, 2), keepdims=True)
    return f / (jnp.std(f, axis=(1, 2), keepdims=True) + 1e-6)


@partial(jax.jit, static_argnames=("regime", "size"))
def _tessellate(regime: EMRegime, size: int, key: PRNGKeyArray) -> Array:
    sp = regime.spacing
    m = _GRID_MARGIN
    g = math.ceil(size / sp) + 2 * m
    shape = (size, size)
    rnd = _Draws(
        key,
        {"seed": (3, g, g)},
        {"warp": (2, *_knots(shape, sp)), "jit": (2, *_knots(shape, regime.smoothing))},
    )
    idx = jnp.arange(g, dtype=jnp.float32)
    base_y, base_x = jnp.meshgrid(idx, idx, indexing="ij")
    u = rnd["seed"]
    sy = (base_y - m + 0.5 + (u[0] - 0.5) * _SEED_JITTER) * sp
    sx = (base_x - m + 0.5 + (u[1] - 0.5) * _SEED_JITTER) * sp
    weight = (u[2] - 0.5) * (regime.size_variation * sp**2)

    pix = jnp.arange(size, dtype=jnp.float32) + 0.5
    py, px = jnp.meshgrid(pix, pix, indexing="ij")
    disp = (regime.warp * sp) * _smooth_fields(rnd["warp"], shape, sp) + regime.jitter * (
        _smooth_fields(rnd["jit"], shape, regime.smoothing)
    )
    qy, qx = py + disp[0], px + disp[1]

    # nearest seed (power distance) among the 5 x 5 grid cells around the warped position
    ci = jnp.floor(qy / sp).astype(jnp.int32) + m
    cj = jnp.floor(qx / sp).astype(jnp.int32) + m
    offs = jnp.arange(-2, 3, dtype=jnp.int32)
    grid = (size, size, 5, 5)
    ii = jnp.broadcast_to(
        jnp.clip(ci[:, :, None, None] + offs[None, None, :, None], 0, g - 1), grid
    )
    jj = jnp.broadcast_to(
        jnp.clip(cj[:, :, None, None] + offs[None, None, None, :], 0, g - 1), grid
    )
    ii, jj = ii.reshape(size, size, 25), jj.reshape(size, size, 25)
    d = (qy[..., None] - sy[ii, jj]) ** 2 + (qx[..., None] - sx[ii, jj]) ** 2 - weight[ii, jj]
    best = jnp.argmin(d, axis=-1)[..., None]
    ids = ii * g + jj + 1
    return jnp.take_along_axis(ids, best, axis=-1)[..., 0]


def tessellate(regime: EMRegime | str, size: int, *, key: PRNGKeyArray) -> Int[Array, "S S"]:
    """Raw curved tessellation (stage 1): int32 seed ids `[size, size]` (jit-compiled).

    Ids are not sequential and a cell may occasionally be split into pieces by the
    warp; `clean_labels` fixes both. vmap-able over `key`.

    **Arguments:**

    - `regime`: an `EMRegime` or a name in `REGIMES`.
    - `size`: image side in pixels (>= 16).
    - `key`: PRNG key.

    **Returns:** int32 array `[size, size]`.
    """
    return _tessellate(_as_regime(regime), _check_size(size), key)


def clean_labels(labels, regime: EMRegime | str) -> np.ndarray:
    """Make instances connected and drop slivers (stage 2, NumPy).

    Every 4-connected piece of a tessellation cell becomes an instance; pieces
    smaller than a tenth of the regime's mean cell area (at least 4 px) merge into
    the neighbour they share the longest border with.

    **Arguments:**

    - `labels`: integer array `[S, S]`.
    - `regime`: an `EMRegime` or a name in `REGIMES`.

    **Returns:** int32 array `[S, S]`, ids `1..K`, every instance 4-connected.
    """
    regime = _as_regime(regime)
    min_size = max(4, int(0.1 * 1000.0 / regime.density))
    return merge_small_segments(relabel_connected(np.asarray(labels)), min_size)


def label_boundaries(labels: Int[Array, "H W"]) -> Array:
    """Pixels whose 4-neighbourhood contains a different label (bool `[H, W]`).

    Both pixels of every instance change are marked; image edges are not boundaries.
    """
    labels = as_array("labels", labels, ndim=2, dtype=jnp.integer)
    diff_v = labels[1:, :] != labels[:-1, :]
    diff_h = labels[:, 1:] != labels[:, :-1]
    out = jnp.zeros(labels.shape, bool)
    out = out.at[1:, :].max(diff_v).at[:-1, :].max(diff_v)
    return out.at[:, 1:].max(diff_h).at[:, :-1].max(diff_h)


def _distance_to(mask: Array, radius: int) -> Array:
    """Euclidean distance to the nearest True pixel, exact up to `radius` (else inf).

    Separable: the squared distance is the minimum over row offsets `dy` of
    `dy^2 + (horizontal distance within row y + dy)^2`.
    """
    h, w = mask.shape
    big = jnp.float32(jnp.inf)
    padded = jnp.pad(mask, ((0, 0), (radius, radius)))
    row_d2 = jnp.where(mask, 0.0, big).astype(jnp.float32)
    for dx in range(1, radius + 1):
        hit = padded[:, radius + dx : radius + dx + w] | padded[:, radius - dx : radius - dx + w]
        row_d2 = jnp.minimum(row_d2, jnp.where(hit, jnp.float32(dx * dx), big))
    padded = jnp.pad(row_d2, ((radius, radius), (0, 0)), constant_values=big)
    d2 = row_d2
    for dy in range(1, radius + 1):
        below, above = padded[radius + dy : radius + dy + h], padded[radius - dy : radius - dy + h]
        nearer = jnp.minimum(below, above)
        d2 = jnp.minimum(d2, nearer + jnp.float32(dy * dy))
    return jnp.where(d2 <= radius * radius, jnp.sqrt(d2), big)


@partial(jax.jit, static_argnames=("regime",))
def _render(regime: EMRegime, labels: Array, key: PRNGKeyArray) -> EMSample:
    h, w = labels.shape
    shape = (h, w)
    area = float(h * w) / 1000.0
    n_mito = round(regime.mito_rate * area)
    n_ves = round(regime.vesicle_rate * area)
    n_clusters = max(1, n_ves // 8)
    rnd = _Draws(
        key,
        {
            "cell": (h * w + 1,),
            "mito": (5, max(n_mito, 1)),
            "cluster": (n_clusters, 2),
            "ves": (2, max(n_ves, 1)),
        },
        {
            "thick": (1, *_knots(shape, _THICKNESS_SCALE)),
            "tex_fine": (1, *_knots(shape, 1.5)),
            "tex_mid": (1, *_knots(shape, 4.0)),
            "ves_off": (max(n_ves, 1), 2),
            "noise": shape,
        },
    )
    t_max = regime.membrane_thickness * (1.0 + 2.0 * regime.thickness_variation)
    radius = math.ceil(t_max / 2.0) + 3

    # membranes: distance to the instance-change pixels vs a varying half-thickness
    crossing = label_boundaries(labels)
    dist = _distance_to(crossing, radius)
    thick = regime.membrane_thickness * (
        1.0 + regime.thickness_variation * _smooth_fields(rnd["thick"], shape, _THICKNESS_SCALE)[0]
    )
    thick = jnp.clip(thick, 2.0, t_max)
    half = thick / 2.0 - 1.0  # the crossing itself is 2 px wide
    boundaries = (dist <= half).astype(jnp.float32)
    membrane = jnp.clip(half + 1.0 - dist, 0.0, 1.0)
    clear = dist > half + 1.5  # organelles keep this far from membranes

    # cytoplasm: per-cell grey level + multi-scale texture
    cyto = 0.62 + 0.16 * rnd["cell"][jnp.clip(labels, 0, h * w)]  # per-instance grey level
    tex = (
        0.6 * _smooth_fields(rnd["tex_fine"], shape, 1.5)[0]
        + 0.4 * _smooth_fields(rnd["tex_mid"], shape, 4.0)[0]
    )
    img = cyto + regime.texture * tex

    yy, xx = jnp.meshgrid(
        jnp.arange(h, dtype=jnp.float32) + 0.5,
        jnp.arange(w, dtype=jnp.float32) + 0.5,
        indexing="ij",
    )

    # mitochondria: dark ellipses, darker double membrane, cristae stripes
    if n_mito > 0:
        u = rnd["mito"]
        cy, cx, ang = u[0] * float(h), u[1] * float(w), u[2] * math.pi
        semi_a = 5.0 + 5.0 * u[3]
        semi_b = 2.5 + 2.0 * u[4]

        def add_mito(i, carry):
            alpha, value = carry
            c, s = jnp.cos(ang[i]), jnp.sin(ang[i])
            du, dv = xx - cx[i], yy - cy[i]
            u = du * c + dv * s
            v = -du * s + dv * c
            rho = jnp.sqrt((u / semi_a[i]) ** 2 + (v / semi_b[i]) ** 2)
            own = labels[
                jnp.clip(cy[i].astype(jnp.int32), 0, h - 1),
                jnp.clip(cx[i].astype(jnp.int32), 0, w - 1),
            ]
            inside = (labels == own) & clear
            a = jnp.where(inside, jnp.clip((1.0 - rho) * semi_b[i], 0.0, 1.0), 0.0)
            cristae = 0.36 + 0.08 * jnp.cos(2.0 * math.pi * u / 2.5)
            val = jnp.where(rho > 0.7, 0.24, cristae)
            take = a > alpha
            return jnp.maximum(alpha, a), jnp.where(take, val, value)

        zeros = jnp.zeros(shape, jnp.float32)
        m_alpha, m_val = jax.lax.fori_loop(0, n_mito, add_mito, (zeros, zeros))
        img = img + m_alpha * (m_val - img)
    else:
        m_alpha = jnp.zeros(shape, jnp.float32)

    # synaptic vesicles: small dark rings in clusters
    if n_ves > 0:
        centres = rnd["cluster"] * jnp.asarray([float(h), float(w)], jnp.float32)[None]
        u = rnd["ves"]
        which = jnp.minimum((u[0] * n_clusters).astype(jnp.int32), n_clusters - 1)
        pos = centres[which] + 4.0 * rnd["ves_off"]
        rad = 1.2 + u[1]

        def add_vesicle(i, alpha):
            r = jnp.sqrt((yy - pos[i, 0]) ** 2 + (xx - pos[i, 1]) ** 2)
            ring = jnp.clip(1.3 - jnp.abs(r - rad[i]) / 0.6, 0.0, 1.0)
            own = labels[
                jnp.clip(pos[i, 0].astype(jnp.int32), 0, h - 1),
                jnp.clip(pos[i, 1].astype(jnp.int32), 0, w - 1),
            ]
            return jnp.maximum(alpha, jnp.where((labels == own) & clear, ring, 0.0))

        v_alpha = jax.lax.fori_loop(0, n_ves, add_vesicle, jnp.zeros(shape, jnp.float32))
        v_alpha = v_alpha * (1.0 - m_alpha)
        img = img + v_alpha * (0.36 - img)

    img = img * (1.0 - regime.membrane_contrast * membrane)

    # imaging: point-spread blur, then signal-dependent (shot-like) noise
    img = gaussian_blur(img, regime.blur_sigma)
    std = regime.noise_sigma * jnp.sqrt(jnp.clip(img, 0.02, 1.0) / 0.5)
    img = img + std * rnd["noise"]
    img = jnp.clip(img, 0.0, 1.0).astype(jnp.float32)
    return EMSample(img, labels.astype(jnp.int32), boundaries)


def render_em(regime: EMRegime | str, labels: Int[Array, "S S"], *, key: PRNGKeyArray) -> EMSample:
    """Render an EM image and boundary map for given instance labels (stage 3, jit-able).

    jit-compiled with `regime` static; vmap-able over `labels` and `key`.

    **Arguments:**

    - `regime`: an `EMRegime` or a name in `REGIMES`.
    - `labels`: integer array `[H, W]` of instance ids (>= 1; connected instances
      give a boundary map that separates every instance).
    - `key`: PRNG key.

    **Returns:** `EMSample(image, labels, boundaries)`.

    Paper: P11.
    """
    regime = _as_regime(regime)
    labels = as_array("labels", labels, ndim=2, dtype=jnp.integer, nonempty=True)
    if not isinstance(labels, jax.core.Tracer) and np.asarray(labels).min() < 1:
        raise ValueError("labels: expected instance ids >= 1, received a value < 1")
    return _render(regime, jnp.asarray(labels, jnp.int32), key)


def generate_em(regime: EMRegime | str, size: int, *, key: PRNGKeyArray) -> EMSample:
    """One synthetic EM image with instance labels and boundary map.

    NumPy-level wrapper: `tessellate` (jitted JAX) -> `clean_labels` (NumPy) ->
    `render_em` (jitted JAX). Deterministic per `key`; for batches use
    `generate_em_dataset`, which vmaps the JAX stages (sample `i` of
    `generate_em_dataset(regime, n, size, key=key)` equals
    `generate_em(regime, size, key=jax.random.split(key, n)[i])`).

    **Arguments:**

    - `regime`: an `EMRegime` or a name in `REGIMES`.
    - `size`: image side in pixels (>= 16).
    - `key`: PRNG key.

    **Returns:** `EMSample` with `image` f32 `[size, size]` in `[0, 1]`, `labels` int32
    `[size, size]` (connected instances, ids `1..K`), `boundaries` f32 `[size, size]`.

    Paper: P11 (synthetic EM of neural tissue).
    """
    regime = _as_regime(regime)
    size = _check_size(size)
    k_tess, k_render = jax.random.split(key)
    labels = clean_labels(_tessellate(regime, size, k_tess), regime)
    return _render(regime, jnp.asarray(labels), k_render)


def generate_em_dataset(
    regime: EMRegime | str, n: int, size: int, *, key: PRNGKeyArray
) -> EMSample:
    """`n` synthetic EM samples stacked on a leading axis (JAX stages vmapped).

    **Arguments:**

    - `regime`: an `EMRegime` or a name in `REGIMES`.
    - `n`: number of samples (>= 1).
    - `size`: image side in pixels (>= 16).
    - `key`: PRNG key; sample `i` uses `jax.random.split(key, n)[i]`.

    **Returns:** `EMSample` with arrays `[n, size, size]`.

    Paper: P11.
    """
    regime = _as_regime(regime)
    n = check_positive_int("n", n)
    size = _check_size(size)
    check_memory("n", _BYTES_PER_PIXEL * n * size * size)  # the vmapped tessellations
    keys = jax.random.split(key, n)
    split = jax.vmap(jax.random.split)(keys)
    raw = np.asarray(jax.vmap(lambda k: _tessellate(regime, size, k))(split[:, 0]))
    labels = np.stack([clean_labels(lab, regime) for lab in raw])
    return jax.vmap(lambda lab, k: _render(regime, lab, k))(jnp.asarray(labels), split[:, 1])
