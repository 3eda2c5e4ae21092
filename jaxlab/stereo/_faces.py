"""Synthetic face stereo data (a small HumanStereo-style generator, P15), all in JAX.

A face scene is a parametric head signed-distance function (SDF) in a head frame
(x right, y down, z away from the camera; the face looks toward -z):

* skull: ellipsoid with radii `skull` (mm);
* eye sockets: spheres of radius 1.3 r_eye smoothly subtracted around each eyeball;
* eyeballs: spheres of radius `eye_r` at +-`eye_sep`/2, with procedural iris and pupil;
* nose: capsule from the bridge to the tip (`nose_len` down, `nose_prot` out, `nose_r`);
* lips: two ellipsoids (`mouth_w`, `lip_t`) `mouth_gap` below the nose tip;
* ears: flattened ellipsoids of height `ear_h` on the skull sides;

smoothly unioned (polynomial smooth-min), posed by `centre` and `yaw`, in front of a
textured wall (the "indoor environment": wall distance, wall texture, light direction
and ambient level). Skin, lips and wall carry solid (3-D) sinusoidal textures, so the
left and right views are consistent. Random draws of these parameters are the avatars
(`sample_face_scene`); rectified rig configurations (baseline x distance x zoom) come
from `rig_configurations`. Rendering (`render_pair`) sphere-traces both cameras with
Lambertian shading, jit-compiled and vmapped over pixels (and over pairs by
`render_dataset`). Landmarks are the visible surface points on the left-camera rays
through the nominal anatomical points (so they lie on the rendered depth map).

Paper: P15 (synthetic stereo faces with depth, normals, masks and landmarks).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from jaxlab._core import (
    as_array,
    atomic_write,
    check_instance,
    check_memory,
    check_positive_int,
    check_real,
    check_size,
    read_json,
    read_npz,
    write_json,
)

from ._render import (
    MAX_TRACE_STEPS,
    StereoRig,
    camera_rays,
    check_image_size,
    check_rig,
    project_points,
    sdf_normals,
    sphere_trace,
)

__all__ = [
    "FaceScene",
    "LANDMARK_NAMES",
    "rig_configurations",
    "sample_face_scene",
    "face_sdf",
    "face_landmarks",
    "render_pair",
    "render_dataset",
    "write_face_shards",
    "FaceStereoDataset",
]

LANDMARK_NAMES = (
    "pupil_left",
    "pupil_right",
    "eye_outer_left",
    "eye_inner_left",
    "eye_inner_right",
    "eye_outer_right",
    "nose_tip",
    "mouth_left",
    "mouth_right",
)
"""Landmark order; "left"/"right" are image-left/right (the head's right/left)."""

N_TEX = 8
MAT_WALL, MAT_SKIN, MAT_LIPS, MAT_EYE = 0, 1, 2, 3


class FaceScene(eqx.Module):
    """Shape, pose, appearance and environment of one avatar scene (lengths in mm)."""

    centre: Float[Array, " 3"]
    yaw: Float[Array, ""]
    skull: Float[Array, " 3"]
    eye_sep: Float[Array, ""]
    eye_y: Float[Array, ""]
    eye_r: Float[Array, ""]
    nose_len: Float[Array, ""]
    nose_prot: Float[Array, ""]
    nose_r: Float[Array, ""]
    mouth_w: Float[Array, ""]
    lip_t: Float[Array, ""]
    mouth_gap: Float[Array, ""]
    ear_h: Float[Array, ""]
    skin: Float[Array, " 3"]
    iris: Float[Array, " 3"]
    lips: Float[Array, " 3"]
    tex_freq: Float[Array, "T 3"]
    tex_phase: Float[Array, " T"]
    wall_z: Float[Array, ""]
    wall_rgb: Float[Array, " 3"]
    wall_freq: Float[Array, "T 3"]
    wall_phase: Float[Array, " T"]
    light: Float[Array, " 3"]
    ambient: Float[Array, ""]


def rig_configurations(
    width: int, baselines=(40.0, 60.0, 80.0), distances=(400.0, 500.0, 600.0), zooms=(1.0, 1.15)
) -> Float[Array, "C 3"]:
    """Grid of rectified, vergence-free configurations: rows (focal_px, baseline_mm,
    distance_mm) with focal = zoom * width * distance / 300 (the face keeps a similar size).

    `width` a positive integer; `baselines`, `distances`, `zooms` non-empty 1-D sequences
    of finite values > 0 (ValueErrors naming the argument otherwise)."""
    width = check_positive_int("width", width)
    grid = [
        np.asarray(
            as_array(
                name,
                v,
                ndim=1,
                dtype=jnp.floating,
                finite=True,
                nonempty=True,
                low=0.0,
                low_inclusive=False,
            )
        ).tolist()
        for name, v in (("baselines", baselines), ("distances", distances), ("zooms", zooms))
    ]
    baselines, distances, zooms = grid
    check_memory("baselines, distances, zooms", 24.0 * len(baselines) * len(distances) * len(zooms))
    rows = [(z * width * d / 300.0, b, d) for b in baselines for d in distances for z in zooms]
    return jnp.asarray(rows, float)


def _u(key, low, high, shape=()):
    return jax.random.uniform(key, shape, minval=low, maxval=high)


def sample_face_scene(baseline, distance, *, key: PRNGKeyArray) -> FaceScene:
    """Random avatar + environment; the face front is about `distance` mm from the rig,
    centred between the two cameras. `baseline`, `distance` (mm): finite numbers > 0
    (checked when concrete; traced values pass, as inside `render_dataset`)."""
    baseline = check_real("baseline", baseline, low=0.0, low_inclusive=False)
    distance = check_real("distance", distance, low=0.0, low_inclusive=False)
    k = iter(jax.random.split(key, 32))
    skull = jnp.stack([_u(next(k), 66.0, 80.0), _u(next(k), 92.0, 112.0), _u(next(k), 86.0, 100.0)])
    centre = jnp.stack(
        [baseline / 2 + _u(next(k), -8.0, 8.0), _u(next(k), -6.0, 10.0), distance + skull[2]]
    )

    def freqs(kk, lo, hi):
        ka, kb = jax.random.split(kk)
        dirs = jax.random.normal(ka, (N_TEX, 3))
        dirs = dirs / jnp.linalg.norm(dirs, axis=-1, keepdims=True)
        return dirs * _u(kb, lo, hi, (N_TEX, 1))

    light = jnp.stack([_u(next(k), -0.6, 0.6), _u(next(k), -0.7, -0.1), -1.0])
    return FaceScene(
        centre=centre,
        yaw=_u(next(k), -0.25, 0.25),
        skull=skull,
        eye_sep=_u(next(k), 54.0, 70.0),
        eye_y=_u(next(k), -22.0, -8.0),
        eye_r=_u(next(k), 11.0, 12.5),
        nose_len=_u(next(k), 38.0, 52.0),
        nose_prot=_u(next(k), 14.0, 24.0),
        nose_r=_u(next(k), 6.0, 9.0),
        mouth_w=_u(next(k), 40.0, 56.0),
        lip_t=_u(next(k), 4.0, 7.0),
        mouth_gap=_u(next(k), 14.0, 22.0),
        ear_h=_u(next(k), 52.0, 66.0),
        skin=jnp.array([0.85, 0.65, 0.52]) * _u(next(k), 0.45, 1.1),
        iris=_u(next(k), 0.1, 0.6, (3,)),
        lips=jnp.array([0.7, 0.35, 0.35]) * _u(next(k), 0.6, 1.1),
        tex_freq=freqs(next(k), 0.12, 0.7),
        tex_phase=_u(next(k), 0.0, 2 * jnp.pi, (N_TEX,)),
        wall_z=distance + 2 * skull[2] + _u(next(k), 120.0, 400.0),
        wall_rgb=_u(next(k), 0.35, 0.9, (3,)),
        wall_freq=freqs(next(k), 0.03, 0.25),
        wall_phase=_u(next(k), 0.0, 2 * jnp.pi, (N_TEX,)),
        light=light / jnp.linalg.norm(light),
        ambient=_u(next(k), 0.2, 0.45),
    )


# --- SDF primitives --------------------------------------------------------------------


def _ellipsoid(q, r):
    k0 = jnp.linalg.norm(q / r)
    k1 = jnp.linalg.norm(q / (r * r))
    return k0 * (k0 - 1.0) / jnp.maximum(k1, 1e-12)


def _capsule(q, a, b, r):
    pa, ba = q - a, b - a
    h = jnp.clip(jnp.dot(pa, ba) / jnp.dot(ba, ba), 0.0, 1.0)
    return jnp.linalg.norm(pa - h * ba) - r


def _smin(a, b, k):
    h = jnp.clip(0.5 + 0.5 * (b - a) / k, 0.0, 1.0)
    return b + (a - b) * h - k * h * (1.0 - h)


def _rot(yaw):
    c, s = jnp.cos(yaw), jnp.sin(yaw)
    z, o = jnp.zeros_like(c), jnp.ones_like(c)
    return jnp.stack([jnp.stack([c, z, s]), jnp.stack([z, o, z]), jnp.stack([-s, z, c])])


def _front_z(s: FaceScene, x, y):
    """z of the skull ellipsoid's front surface above (x, y) (head frame)."""
    ax, ay, az = s.skull[0], s.skull[1], s.skull[2]
    return -az * jnp.sqrt(jnp.maximum(1.0 - (x / ax) ** 2 - (y / ay) ** 2, 0.05))


def _parts(s: FaceScene):
    """Anchor points of the parts (head frame)."""
    ex = s.eye_sep / 2
    eyes = [
        jnp.stack([sx * ex, s.eye_y, _front_z(s, sx * ex, s.eye_y) + 0.35 * s.eye_r])
        for sx in (-1.0, 1.0)
    ]
    by = s.eye_y + 4.0
    bridge = jnp.stack([0.0 * by, by, _front_z(s, 0.0, by) + 2.0])
    ty = s.eye_y + s.nose_len
    tip = jnp.stack([0.0 * ty, ty, _front_z(s, 0.0, ty) - s.nose_prot])
    my = ty + s.mouth_gap
    mouth = jnp.stack([0.0 * my, my, _front_z(s, 0.0, my)])
    return eyes, bridge, tip, mouth


def _head_local(q, s: FaceScene):
    """(distance, distance to eyeballs, distance to lips) in the head frame."""
    eyes, bridge, tip, mouth = _parts(s)
    h = _ellipsoid(q, s.skull)
    h = _smin(h, _capsule(q, bridge, tip, s.nose_r), 6.0)
    lip_r = jnp.stack([s.mouth_w / 2, s.lip_t, 1.4 * s.lip_t])
    upper = _ellipsoid(q - (mouth + jnp.stack([0.0, -0.7 * s.lip_t, 0.4 * s.lip_t])), lip_r)
    lower = _ellipsoid(
        q - (mouth + jnp.stack([0.0, 0.8 * s.lip_t, 0.4 * s.lip_t])),
        lip_r * jnp.array([0.92, 1.1, 1.0]),
    )
    lips = jnp.minimum(upper, lower)
    h = _smin(h, lips, 2.0)
    ear_r = jnp.stack([6.0 + 0.0 * s.ear_h, s.ear_h / 2, 13.0 + 0.0 * s.ear_h])
    for sx in (-1.0, 1.0):
        ear_c = jnp.stack([sx * s.skull[0] * 0.97, s.eye_y + 14.0, 6.0 + 0.0 * s.eye_y])
        h = _smin(h, _ellipsoid(q - ear_c, ear_r), 3.0)
    eyeballs = jnp.inf
    for c in eyes:
        socket = jnp.linalg.norm(q - c) - 1.3 * s.eye_r
        h = -_smin(-h, socket, 2.0)  # smooth subtraction
        eyeballs = jnp.minimum(eyeballs, jnp.linalg.norm(q - c) - s.eye_r)
    return jnp.minimum(h, eyeballs), eyeballs, lips


def _to_local(p, s: FaceScene):
    return _rot(s.yaw).T @ (p - s.centre)


def face_sdf(p: Float[Array, " 3"], s: FaceScene) -> Float[Array, ""]:
    """Scene SDF at a left-camera point (mm): min(head, wall plane z = wall_z). `p`: a
    finite point `(3,)`; `s`: a `FaceScene`."""
    check_instance("s", s, FaceScene)
    p = as_array("p", p, shape=(3,), dtype=jnp.floating, finite=True)
    head, _, _ = _head_local(_to_local(p, s), s)
    return jnp.minimum(head, s.wall_z - p[2])


def _material(p, s: FaceScene):
    head, eyes, lips = _head_local(_to_local(p, s), s)
    wall = s.wall_z - p[2]
    mat = jnp.where(lips < 0.8, MAT_LIPS, MAT_SKIN)
    mat = jnp.where(eyes <= head + 1e-6, MAT_EYE, mat)
    return jnp.where(wall < head, MAT_WALL, mat)


def _noise(q, freq, phase):
    return jnp.sqrt(2.0 / freq.shape[0]) * jnp.sum(jnp.sin(freq @ q + phase))


def _albedo(p, s: FaceScene):
    q = _to_local(p, s)
    mat = _material(p, s)
    skin = s.skin * (1.0 + 0.35 * _noise(q, s.tex_freq, s.tex_phase))
    lips = s.lips * (1.0 + 0.2 * _noise(q, s.tex_freq, s.tex_phase))
    wall = s.wall_rgb * (1.0 + 0.5 * _noise(p, s.wall_freq, s.wall_phase))
    eyes, _, _, _ = _parts(s)
    c = jnp.where(q[0] < 0, eyes[0], eyes[1])
    cosang = -(q - c)[2] / jnp.maximum(jnp.linalg.norm(q - c), 1e-9)  # gaze is -z
    ang = jnp.arccos(jnp.clip(cosang, -1.0, 1.0))
    iris = s.iris * (0.75 + 0.25 * jnp.sin(40.0 * jnp.arctan2((q - c)[1], (q - c)[0])))
    eye = jnp.where(
        ang < 0.16,
        jnp.array([0.03, 0.03, 0.03]),
        jnp.where(ang < 0.48, iris, jnp.array([0.92, 0.9, 0.88])),
    )
    table = jnp.stack([wall, skin, lips, eye])
    return table[mat], mat


def face_landmarks(s: FaceScene) -> Float[Array, "K 3"]:
    """Nominal landmark points (left-camera frame) before snapping to the visible surface."""
    check_instance("s", s, FaceScene)
    eyes, _, tip, mouth = _parts(s)
    r = s.eye_r
    pts = [eyes[0] + jnp.stack([0.0 * r, 0.0 * r, -r]), eyes[1] + jnp.stack([0.0 * r, 0.0 * r, -r])]
    for c, outer in ((eyes[0], -1.0), (eyes[1], 1.0)):
        o = c + jnp.stack([outer * 1.15 * r, 0.0 * r, -0.2 * r])
        i = c + jnp.stack([-outer * 1.15 * r, 0.0 * r, -0.2 * r])
        pts += [o, i] if outer < 0 else [i, o]
    pts.append(tip + jnp.stack([0.0 * r, 0.0 * r, -s.nose_r]))
    for sx in (-1.0, 1.0):
        x = sx * 0.48 * s.mouth_w
        pts.append(jnp.stack([x, mouth[1], _front_z(s, x, mouth[1])]))
    local = jnp.stack(pts)
    return local @ _rot(s.yaw).T + s.centre[None]


_RENDER_BYTES_PER_PIXEL = 2 * 64 * 8  # both views: rays, points, normals, colours (f64)
_OUTPUT_BYTES_PER_PIXEL = 12 * 8  # left, right, normals (3 each), depth, disparity, mask


def render_pair(s: FaceScene, rig: StereoRig, height: int, width: int, *, n_steps: int = 160):
    """Render one rectified stereo pair of a face scene.

    **Arguments:**
        s: the scene (one avatar); rig: the stereo rig; height, width: image size (static).
    **Returns:**
        dict with left, right (H, W, 3) in [0, 1]; depth (H, W) metric Z of the left view in
        mm (NaN where a ray did not converge); disparity (H, W) = f B / depth; normals
        (H, W, 3); mask (H, W) bool (head pixels); landmarks_3d (K, 3) in mm (left camera
        frame, on the visible surface); landmarks_px (K, 3) columns (u_left, u_right, v);
        landmarks_visible (K,) bool (surface hit within 12 mm of
        the nominal point); camera (4,) = (focal, cx, cy, baseline).

    `height`, `width`: positive integers whose rendering fits in memory; `n_steps`: a
    positive integer up to `MAX_TRACE_STEPS`; `rig` as in `check_rig` (ValueErrors).
    """
    check_instance("s", s, FaceScene)
    rig = check_rig(rig)
    height, width = check_image_size(height, width, bytes_per_pixel=_RENDER_BYTES_PER_PIXEL)
    check_size("n_steps", n_steps, cap=MAX_TRACE_STEPS, why="MAX_TRACE_STEPS")
    sdf = lambda p: face_sdf(p, s)  # noqa: E731
    t_max = 1.5 * s.wall_z + 1.0
    npx = height * width
    ol, dl = camera_rays(rig, height, width)
    orr, dr = camera_rays(rig, height, width, right=True)
    nominal = face_landmarks(s)
    dn = nominal / jnp.linalg.norm(nominal, axis=-1, keepdims=True)
    # one trace for both views and the landmark rays (one compiled loop body)
    o = jnp.concatenate([ol, orr, jnp.zeros_like(dn)])
    d = jnp.concatenate([dl, dr, dn])
    t, hit = sphere_trace(sdf, o, d, t_max=t_max, n_steps=n_steps, eps=1e-4, step_scale=0.9)
    p = o[: 2 * npx] + t[: 2 * npx, None] * d[: 2 * npx]
    n = sdf_normals(sdf, p)
    albedo, mat = jax.vmap(lambda x: _albedo(x, s))(p)
    shade = s.ambient + (1 - s.ambient) * jnp.maximum(n @ s.light * -1.0, 0.0)
    img = jnp.clip(albedo * shade[:, None], 0.0, 1.0)
    left = img[:npx].reshape(height, width, 3)
    right = img[npx:].reshape(height, width, 3)
    hit_l, mat, n = hit[:npx], mat[:npx], n[:npx]
    depth = jnp.where(hit_l, p[:npx, 2], jnp.nan).reshape(height, width)
    lm = t[2 * npx :, None] * dn
    visible = hit[2 * npx :] & (jnp.linalg.norm(lm - nominal, axis=-1) < 12.0)
    return {
        "left": left,
        "right": right,
        "depth": depth,
        "disparity": rig.focal * rig.baseline / depth,
        "normals": n.reshape(height, width, 3),
        "mask": ((mat != MAT_WALL) & hit_l).reshape(height, width),
        "landmarks_3d": lm,
        "landmarks_px": project_points(rig, lm),
        "landmarks_visible": visible,
        "camera": jnp.stack([rig.focal, rig.cx, rig.cy, rig.baseline]),
    }


def render_dataset(
    n_pairs: int,
    height: int,
    width: int,
    *,
    key: PRNGKeyArray,
    configs: Float[Array, "C 3"] | None = None,
    batch: int = 8,
    n_steps: int = 160,
) -> dict[str, np.ndarray]:
    """Render `n_pairs` random avatars; pair i uses configuration i mod C.

    Returns numpy arrays stacked over pairs (keys of `render_pair` plus `config` (N,)
    index and `ipd_mm` (N,), the true inter-pupillary distance of the rendered pupils).
    Pairs are vmapped `batch` at a time under one jit.

    `n_pairs`, `height`, `width`, `batch`: positive integers whose output and working
    set fit in memory (`check_memory`, before rendering); `n_steps` up to
    `MAX_TRACE_STEPS`; `configs` (default `rig_configurations(width)`): `(C, 3)` rows of
    finite (focal, baseline, distance) > 0.
    """
    n_pairs = check_positive_int("n_pairs", n_pairs)
    height, width = check_image_size(height, width, bytes_per_pixel=_RENDER_BYTES_PER_PIXEL)
    batch = check_positive_int("batch", batch)
    n_steps = check_size("n_steps", n_steps, cap=MAX_TRACE_STEPS, why="MAX_TRACE_STEPS")
    check_memory("n_pairs", float(n_pairs) * height * width * _OUTPUT_BYTES_PER_PIXEL)
    check_memory("batch", float(batch) * height * width * _RENDER_BYTES_PER_PIXEL)
    configs = (
        rig_configurations(width)
        if configs is None
        else as_array(
            "configs",
            configs,
            shape=(None, 3),
            dtype=jnp.floating,
            finite=True,
            nonempty=True,
            low=0.0,
            low_inclusive=False,
        )
    )

    @jax.jit
    def one_batch(keys, cfg):
        def single(k, c):
            f, b, dist = c[0], c[1], c[2]
            rig = StereoRig(
                f, jnp.asarray((width - 1) / 2, f.dtype), jnp.asarray((height - 1) / 2, f.dtype), b
            )
            return render_pair(
                sample_face_scene(b, dist, key=k), rig, height, width, n_steps=n_steps
            )

        return jax.vmap(single)(keys, cfg)

    idx = np.arange(n_pairs) % configs.shape[0]
    keys = jax.random.split(key, n_pairs)
    chunks = []
    for start in range(0, n_pairs, batch):
        sl = slice(start, min(start + batch, n_pairs))
        k, c = keys[sl], configs[idx[sl]]
        pad = batch - k.shape[0]  # keep one compiled shape
        if pad:
            k = jnp.concatenate([k, jnp.repeat(k[-1:], pad, 0)])
            c = jnp.concatenate([c, jnp.repeat(c[-1:], pad, 0)])
        out = one_batch(k, c)
        chunks.append({kk: np.asarray(v)[: batch - pad] for kk, v in out.items()})
    data = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
    data["config"] = idx
    lm = data["landmarks_3d"]
    data["ipd_mm"] = np.linalg.norm(lm[:, 0] - lm[:, 1], axis=-1)
    return data


def write_face_shards(
    directory: str | os.PathLike, data: dict[str, np.ndarray], shard_size: int = 64, configs=None
) -> Path:
    """Write a rendered set as `shard_XXXXX.npz` files plus `index.json` (atomic writes).

    `data`: a non-empty dict of numeric arrays (stored as given: a rendered depth is NaN
    where a ray found no surface) sharing one leading length >= 1; `shard_size` a
    positive integer. Values are refused with a ValueError naming `data[<key>]`."""
    shard_size = check_positive_int("shard_size", shard_size)
    directory = Path(directory)
    check_instance("data", data, dict)
    if not data:
        raise ValueError("data: expected at least one array, received an empty dict")
    arrays = {}
    for k, v in data.items():
        if not isinstance(k, str):
            raise ValueError(f"data: expected string keys, received {k!r:.60}")
        name = f"data[{k!r}]"
        as_array(name, v, nonempty=True)  # numeric, not None/str/ragged/complex
        arrays[k] = np.asarray(v)  # stored as given (dtype kept)
        if arrays[k].ndim < 1:
            raise ValueError(f"{name}: expected an array with a leading axis, received a scalar")
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(
            "data: expected arrays with the same leading length, received "
            + ", ".join(f"data[{k!r}]={n}" for k, n in lengths.items())
        )
    data = arrays
    n = len(next(iter(data.values())))
    shards = []
    for i, start in enumerate(range(0, n, shard_size)):
        name = f"shard_{i:05d}.npz"
        # Any: numpy types **kwds of savez like allow_pickle
        shard: dict[str, Any] = {k: v[start : start + shard_size] for k, v in data.items()}
        with atomic_write(directory / name, "wb") as f:
            np.savez(f, **shard)
        shards.append({"file": name, "start": start, "count": min(shard_size, n - start)})
    write_json(
        directory / "index.json",
        {
            "n_pairs": n,
            "keys": sorted(data),
            "landmark_names": list(LANDMARK_NAMES),
            "shards": shards,
            "configs": None if configs is None else np.asarray(configs).tolist(),
        },
    )
    return directory


class FaceStereoDataset:
    """Indexed reader of `write_face_shards` output: `len(ds)`, `ds[i]` (dict of one pair),
    `ds.arrays()` (everything stacked). Shards are read with allow_pickle=False."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        index = self.directory / "index.json"
        if not index.is_file():
            raise ValueError(
                f"directory: expected a face shard set with index.json, received {str(directory)!r}"
            )
        try:
            self.index = read_json(index)
        except ValueError as e:
            raise ValueError(f"{index}: not a valid index.json ({e})") from None
        self._check_index(index)
        self._cache: tuple[str, dict] | None = None

    def _check_index(self, index: Path) -> None:
        """Types, contiguous shard ranges, and shard files confined to the directory."""
        idx = self.index
        n = idx.get("n_pairs") if isinstance(idx, dict) else None
        shards = idx.get("shards") if isinstance(idx, dict) else None
        if isinstance(n, bool) or not isinstance(n, int) or n < 0 or not isinstance(shards, list):
            raise ValueError(f"{index}: expected n_pairs (int >= 0) and a shards list")
        root = self.directory.resolve()
        start = 0
        for j, e in enumerate(shards):
            ok = (
                isinstance(e, dict)
                and isinstance(e.get("file"), str)
                and all(
                    isinstance(e.get(k), int) and not isinstance(e.get(k), bool)
                    for k in ("start", "count")
                )
            )
            if not ok or e["start"] != start or e["count"] < 1:
                raise ValueError(
                    f"{index}: shards[{j}] must be {{file, start={start}, count >= 1}}, got {e!r}"
                )
            target = (self.directory / e["file"]).resolve()
            if Path(e["file"]).name != e["file"] or not target.is_relative_to(root):
                raise ValueError(
                    f"{index}: shards[{j}].file {e['file']!r} is not a file inside {root} "
                    "(paths are confined to the shard folder)"
                )
            start += e["count"]
        if start != n:
            raise ValueError(f"{index}: shards cover {start} pairs but n_pairs is {n}")

    def __len__(self) -> int:
        return int(self.index["n_pairs"])

    def _shard(self, entry) -> dict[str, np.ndarray]:
        if self._cache is None or self._cache[0] != entry["file"]:
            path = self.directory / entry["file"]
            arrays = read_npz(path, "face shard")
            keys = self.index.get("keys")
            if isinstance(keys, list) and sorted(arrays) != sorted(keys):
                raise ValueError(
                    f"{path}: arrays {sorted(arrays)} differ from index.json's keys {sorted(keys)}"
                )
            if any(len(v) != entry["count"] for v in arrays.values()):
                raise ValueError(f"{path}: arrays do not hold count={entry['count']} pairs")
            self._cache = (entry["file"], arrays)
        return self._cache[1]

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"i: expected an index below {len(self)}, received {i}")
        i = i % len(self)
        for entry in self.index["shards"]:
            if entry["start"] <= i < entry["start"] + entry["count"]:
                return {k: v[i - entry["start"]] for k, v in self._shard(entry).items()}
        raise IndexError(i)

    def arrays(self) -> dict[str, np.ndarray]:
        parts = [self._shard(e) for e in self.index["shards"]]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
