"""SAEs on disk in SAELens' format: `save_sae` and `load_sae`.

A SAELens SAE is a folder with two files (SAELens `SAE.save_model` / `SAE.load_from_disk`):

- `sae_weights.safetensors`: the tensors `W_enc` (d_in, d_sae), `W_dec` (d_sae, d_in),
  `b_enc` (d_sae,), `b_dec` (d_in,), and for a JumpReLU SAE `threshold` (d_sae,);
- `cfg.json`: `architecture` (`"standard"`: ReLU, `"topk"`, `"jumprelu"`), `d_in`,
  `d_sae`, `dtype`, `device`, `apply_b_dec_to_input`, `normalize_activations`,
  `reshape_activations`, `k` (topk), `rescale_acts_by_decoder_norm` (topk) and `meta`
  (`model_name`, `hook_name`, `hook_layer`, `prepend_bos`, `exclude_special_tokens`,
  `context_size`, ...). Configs of SAELens before v6 (no `architecture`-specific fields;
  `activation_fn_str` = `"relu"` / `"topk"` with `activation_fn_kwargs: {"k": ...}`, and
  `model_name` / `hook_name` / `hook_layer` at the top level) load too.

SAELens computes `z = act((x - b_dec * apply_b_dec_to_input) @ W_enc + b_enc)` and
`x_hat = z @ W_dec + b_dec`, jaxlab's convention (`AbstractSAE`) with
`apply_b_dec_to_input=True`; a file with `False` loads with `b_enc + b_dec @ W_enc` as
its encoder bias, the same function. A `BatchTopKSAE` is saved as SAELens saves its own
BatchTopK SAEs for inference: a `"jumprelu"` SAE whose `threshold` is the learnt scalar
threshold repeated per latent (`k` kept in the config as `batchtopk_k`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._core import check_nonnegative_int
from ._sae import AbstractSAE, BatchTopKSAE, ReLUSAE, TopKSAE

__all__ = ["save_sae", "load_sae", "SAE_CFG_FILENAME", "SAE_WEIGHTS_FILENAME"]

SAE_CFG_FILENAME = "cfg.json"
"""The config file of a SAELens SAE folder."""
SAE_WEIGHTS_FILENAME = "sae_weights.safetensors"
"""The weights file of a SAELens SAE folder (safetensors)."""

_META = ("model_name", "hook_name", "hook_layer", "hook_head_index", "prepend_bos")
_META += ("exclude_special_tokens", "context_size", "dataset_path", "model_class_name")
_META += ("seqpos_slice", "neuronpedia_id", "model_from_pretrained_kwargs")
# SAELens' `SAEMetadata` fields; SAELens releases where it is a dataclass refuse any other
# key in `meta`, while unknown top-level keys are filtered out (`from_dict`)


def _architecture(sae: AbstractSAE) -> tuple[str, dict[str, Any]]:
    if isinstance(sae, TopKSAE):
        return "topk", {"k": sae.k, "rescale_acts_by_decoder_norm": False}
    if isinstance(sae, BatchTopKSAE):
        return "jumprelu", {"batchtopk_k": sae.k}
    if isinstance(sae, ReLUSAE):
        return "standard", {}
    raise ValueError(
        f"sae: expected a TopKSAE, BatchTopKSAE or ReLUSAE, received {type(sae).__name__}"
    )


def save_sae(
    sae: AbstractSAE,
    path: str | os.PathLike,
    *,
    model_name: str | None = None,
    hook_name: str | None = None,
    hook_layer: int | None = None,
    **meta: Any,
) -> Path:
    """Write `sae` as a SAELens SAE folder (`cfg.json` + `sae_weights.safetensors`).

    **Arguments:**

    - `sae`: a `TopKSAE` (SAELens `"topk"`), `ReLUSAE` (`"standard"`) or `BatchTopKSAE`
      (`"jumprelu"` with its threshold per latent).
    - `path`: the folder (created).
    - `model_name`, `hook_name`, `hook_layer`: SAELens' `meta` fields naming where the
      SAE reads its activations (e.g. `"blocks.15.hook_resid_post"`); `hook_layer` an
      int >= 0 or None.
    - `**meta`: further `meta` fields among SAELens' `SAEMetadata` (`prepend_bos`,
      `context_size`, `exclude_special_tokens`, `seqpos_slice` (e.g. `(1, None)` for an
      SAE trained without the first position, `lm.collect`'s default), ...).

    Weights are written float32; `normalize_activations` is `"none"` (an SAE trained on
    scaled inputs by `fit_sae(normalize_activations="expected_average_only_in")` comes
    back with the scale folded into its weights, as SAELens folds it before saving).

    **Returns:** the folder's `Path`.
    """
    from safetensors.numpy import save_file

    arch, extra = _architecture(sae)
    if not isinstance(path, str | os.PathLike):
        raise ValueError(f"path: expected a folder path, received {type(path).__name__}")
    if hook_layer is not None:
        hook_layer = check_nonnegative_int("hook_layer", hook_layer)
    unknown = sorted(set(meta) - set(_META))
    if unknown:
        raise ValueError(f"meta: unknown SAELens meta fields {unknown}; expected among {_META}")
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {
        name: np.ascontiguousarray(np.asarray(getattr(sae, name), np.float32))
        for name in ("W_enc", "W_dec", "b_enc", "b_dec")
    }
    if isinstance(sae, BatchTopKSAE):
        tensors["threshold"] = np.full((sae.d_sae,), float(sae.threshold), np.float32)
    cfg = {
        "architecture": arch,
        "d_in": sae.d_in,
        "d_sae": sae.d_sae,
        "dtype": "float32",
        "device": "cpu",
        "apply_b_dec_to_input": True,
        "normalize_activations": "none",
        "reshape_activations": "none",
        **extra,
        "meta": {
            "model_name": model_name,
            "hook_name": hook_name,
            "hook_layer": hook_layer,
            **meta,
        },
        "saved_by": "jaxlab",
    }
    save_file(tensors, str(folder / SAE_WEIGHTS_FILENAME))
    (folder / SAE_CFG_FILENAME).write_text(json.dumps(cfg, indent=2) + "\n")
    return folder


def _read_cfg(folder: Path) -> dict[str, Any]:
    cpath = folder / SAE_CFG_FILENAME
    if not cpath.is_file():
        raise ValueError(f"path: no {SAE_CFG_FILENAME} in {folder}")
    try:
        cfg = json.loads(cpath.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"path: {cpath} is not valid JSON: {e}") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"path: {cpath} must hold a JSON object")
    return cfg


def _kind(cfg: dict[str, Any]) -> tuple[str, int | None]:
    """(architecture, k) of a v6 or a pre-v6 SAELens config."""
    arch = cfg.get("architecture")
    fn = cfg.get("activation_fn_str")
    if arch in (None, "standard") and fn == "topk":  # pre-v6 TopK
        k = (cfg.get("activation_fn_kwargs") or {}).get("k")
        return "topk", k
    if arch is None:
        arch = "standard"
    if arch == "topk":
        return arch, cfg.get("k")
    if arch == "jumprelu":
        return arch, cfg.get("batchtopk_k")
    if arch == "standard":
        if fn not in (None, "relu"):
            raise ValueError(f"cfg.json: activation_fn_str {fn!r} is not supported (relu, topk)")
        return arch, None
    raise ValueError(
        f"cfg.json: architecture {arch!r} is not supported; expected 'standard', 'topk' "
        "or 'jumprelu' (with one threshold for all latents)"
    )


_MAX_DIM = 1 << 24  # d_in, d_sae: far above any SAE published (Gemma Scope: 2^20 latents)
_MAX_HEADER = 100 << 20  # bytes; the safetensors library's own limit
_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8")}
_DTYPES["BF16"] = np.dtype("<u2")  # bfloat16: the upper half of a float32, widened below


def _entry(wpath: Path, name: str, info: Any) -> tuple[tuple[int, ...], int, tuple[int, int]]:
    """(shape, byte count, data offsets) of one safetensors header entry, validated."""
    bad = ValueError(
        f"path: {wpath}: tensor {name!r} has an invalid header entry (dtype among "
        f"{sorted(_DTYPES)}, shape, data_offsets): {info!r}"
    )
    if not isinstance(info, dict) or info.get("dtype") not in _DTYPES:
        raise bad
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if not isinstance(shape, list) or not all(isinstance(v, int) and v >= 0 for v in shape):
        raise bad
    if not isinstance(offsets, list) or len(offsets) != 2:
        raise bad
    lo, hi = offsets
    if not isinstance(lo, int) or not isinstance(hi, int) or not 0 <= lo <= hi:
        raise bad
    nbytes = _DTYPES[info["dtype"]].itemsize
    for v in shape:
        nbytes *= v
    return tuple(shape), nbytes, (lo, hi)


def _read_header(wpath: Path) -> tuple[dict[str, Any], int]:
    """The safetensors header of `wpath` (name -> dtype, shape, data_offsets), validated
    against the file's size, and the offset of its data section."""
    size = wpath.stat().st_size
    with open(wpath, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 2 <= n <= min(_MAX_HEADER, size - 8):
            raise ValueError(f"path: {wpath} is not a safetensors file (header length {n})")
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"path: {wpath} has an unreadable safetensors header: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"path: {wpath}: the safetensors header must be a JSON object")
    header.pop("__metadata__", None)
    data_size = size - 8 - n
    for name, info in header.items():
        shape, nbytes, offsets = _entry(wpath, name, info)
        if offsets[1] - offsets[0] != nbytes or offsets[1] > data_size:
            raise ValueError(
                f"path: {wpath}: tensor {name!r} ({info['dtype']}{shape}) needs "
                f"{nbytes} bytes at {list(offsets)}; the file holds {data_size} data bytes"
            )
    return header, 8 + n


def _read_tensor(wpath: Path, header: dict[str, Any], data_start: int, name: str) -> np.ndarray:
    info = header[name]
    dt = _DTYPES[info["dtype"]]
    count = int(np.prod(info["shape"], dtype=np.int64))
    a = np.fromfile(wpath, dtype=dt, count=count, offset=data_start + info["data_offsets"][0])
    if info["dtype"] == "BF16":
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32).reshape(info["shape"])


def load_sae(path: str | os.PathLike) -> AbstractSAE:
    """Read a SAELens SAE folder (`cfg.json` + `sae_weights.safetensors`) as a jaxlab SAE.

    `"standard"` -> `ReLUSAE`, `"topk"` -> `TopKSAE`, `"jumprelu"` with one threshold
    shared by all latents -> `BatchTopKSAE` (per-latent thresholds: `ValueError`).
    Refused with a `ValueError` naming the field: the run-time normalisations
    `normalize_activations="constant_norm_rescale"` / `"layer_norm"` (per-token
    transforms the SAE itself would have to apply), `rescale_acts_by_decoder_norm`,
    `reshape_activations="hook_z"`, and tensors whose shapes disagree with `d_in` /
    `d_sae`. `"expected_average_only_in"` loads as is (SAELens applies no run-time
    transform for it; the caller scales inputs as in training).

    Sizes are bounded before anything is allocated: `d_in` / `d_sae` from cfg.json must
    be ints in [1, 2^24], and the safetensors header's names, shapes and byte ranges are
    checked against cfg.json and the file's size (a missing tensor or a shape that
    disagrees is named in a `ValueError`) before a tensor is read. Tensors may be
    float32, float16, bfloat16 or float64 (SAELens saves in its config's `dtype`).

    **Arguments:** `path`: the SAE's folder.

    **Returns:** the SAE (float32), whose `encode` / `decode` / `__call__` compute what
    SAELens' `encode` / `decode` / `forward` compute.
    """
    folder = Path(path)
    cfg = _read_cfg(folder)
    arch, k = _kind(cfg)
    for field, ok in (
        ("normalize_activations", ("none", "expected_average_only_in", None)),
        ("reshape_activations", ("none", None)),
        ("rescale_acts_by_decoder_norm", (False, None)),
    ):
        if cfg.get(field) not in ok:
            raise ValueError(
                f"cfg.json: {field}={cfg.get(field)!r} is not supported by jaxlab's SAEs "
                f"(expected one of {[v for v in ok if v is not None]})"
            )
    d_in, d_sae = cfg.get("d_in"), cfg.get("d_sae")
    for name, v in (("d_in", d_in), ("d_sae", d_sae)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= _MAX_DIM:
            raise ValueError(f"cfg.json: {name} must be an int in [1, {_MAX_DIM}], got {v!r}")
    assert isinstance(d_in, int)  # checked above
    assert isinstance(d_sae, int)
    wpath = folder / SAE_WEIGHTS_FILENAME
    if not wpath.is_file():
        raise ValueError(f"path: no {SAE_WEIGHTS_FILENAME} in {folder}")
    shapes = {"W_enc": (d_in, d_sae), "W_dec": (d_sae, d_in), "b_enc": (d_sae,), "b_dec": (d_in,)}
    if arch == "jumprelu":
        shapes["threshold"] = (d_sae,)
    # the header's names, shapes and byte ranges are checked against cfg.json and the
    # file's size before any tensor is read: nothing is allocated that the file only claims
    header, data_start = _read_header(wpath)
    missing = [n for n in shapes if n not in header]
    if missing:
        raise ValueError(
            f"path: {wpath} lacks the tensors {missing} (a {arch!r} SAE needs {list(shapes)})"
        )
    for name, shape in shapes.items():
        if tuple(header[name]["shape"]) != shape:
            raise ValueError(
                f"path: {wpath}: {name} has shape {tuple(header[name]['shape'])}, "
                f"cfg.json (d_in={d_in}, d_sae={d_sae}) says {shape}"
            )
    w = {n: _read_tensor(wpath, header, data_start, n) for n in shapes}
    W_enc, W_dec, b_enc, b_dec = (jnp.asarray(w[n]) for n in ("W_enc", "W_dec", "b_enc", "b_dec"))
    if cfg.get("apply_b_dec_to_input") is False:  # x @ W_enc + b_enc == (x - b_dec) @ W_enc + b'
        b_enc = b_enc + b_dec @ W_enc
    key = jax.random.key(0)
    # the module's structure only (eval_shape: no initial weights are drawn); every array
    # leaf is replaced by the file's tensors below
    if arch == "topk":
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= d_sae:
            raise ValueError(f"cfg.json: k must be an int in [1, d_sae={d_sae}], got {k!r}")
        sae: AbstractSAE = eqx.filter_eval_shape(TopKSAE, d_in, d_sae, k, key=key)
    elif arch == "standard":
        sae = eqx.filter_eval_shape(ReLUSAE, d_in, d_sae, key=key)
    else:
        thr = w["threshold"]
        if not np.all(thr == thr[0]):
            raise ValueError(
                f"path: a jumprelu SAE loads only with one threshold shared by all {d_sae} "
                "latents (a BatchTopK SAE); this file's thresholds differ"
            )
        k = k if isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= d_sae else 1
        sae = eqx.filter_eval_shape(BatchTopKSAE, d_in, d_sae, k, key=key)
        sae = eqx.tree_at(lambda s: s.threshold, sae, jnp.asarray(thr[0], jnp.float32))
    return eqx.tree_at(
        lambda s: (s.W_enc, s.b_enc, s.W_dec, s.b_dec), sae, (W_enc, b_enc, W_dec, b_dec)
    )
