r"""RoPE frequency scaling: Llama-3's frequency-dependent rule and linear interpolation.

Rotary embeddings rotate pair $j$ of a head ($j = 0 .. d/2 - 1$, $d$ = head_dim) at
position $p$ by the angle $p\,\omega_j$ with $\omega_j = b^{-2j/d}$ ($b$ = the RoPE base).
Context-extension schemes divide the frequencies by a per-pair factor $s_j \ge 1$:
$\omega_j \to \omega_j / s_j$. jaxlab keeps the factors (one per pair and layer, in
`LMConfig.rope_freq_factors`), which is also how llama.cpp stores them (the GGUF tensor
`rope_freqs.weight`).

- **linear** ("position interpolation"): $s_j = f$ for every pair, so the model at
  position $f p$ sees the angles the unscaled model sees at $p$.
- **llama3** (Llama 3.1-3.3): with the original context $L$, the factor $f$ and the
  wavelength bounds $\lambda_{hi} = L / \text{high\_freq\_factor}$ and
  $\lambda_{lo} = L / \text{low\_freq\_factor}$, pair $j$ with wavelength
  $\lambda_j = 2\pi / \omega_j$ keeps its frequency if $\lambda_j < \lambda_{hi}$, is
  divided by $f$ if $\lambda_j > \lambda_{lo}$, and in between is interpolated,

  $$\omega_j' = (1 - \gamma_j)\,\omega_j / f + \gamma_j\,\omega_j, \qquad
  \gamma_j = \frac{L / \lambda_j - \text{low\_freq\_factor}}
  {\text{high\_freq\_factor} - \text{low\_freq\_factor}},$$

  i.e. $s_j = 1 / ((1 - \gamma_j)/f + \gamma_j)$.

Other schemes (YaRN, dynamic NTK, LongRoPE) also rescale attention or depend on the
sequence length: they are refused by name, never ignored.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["linear_factors", "llama3_factors", "hf_rope_factors", "gguf_rope_factors"]

_NONE = (None, "default", "none")


def _positive(spec: dict, key: str, where: str, *, at_least: float = 0.0) -> float:
    v = spec.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"{where}: rope_scaling[{key!r}] must be a finite number, got {v!r}")
    if not (v > at_least if at_least == 0.0 else v >= at_least):
        bound = "> 0" if at_least == 0.0 else f">= {at_least:g}"
        raise ValueError(f"{where}: rope_scaling[{key!r}] must be {bound}, got {v!r}")
    return float(v)


def linear_factors(head_dim: int, factor: float) -> tuple[float, ...]:
    """Linear position interpolation: every one of the `head_dim / 2` pairs divided by
    `factor` (a finite number >= 1)."""
    if not (math.isfinite(factor) and factor >= 1.0):
        raise ValueError(f"factor must be a finite number >= 1, got {factor!r}")
    return (float(factor),) * (head_dim // 2)


def llama3_factors(
    head_dim: int,
    base: float,
    factor: float,
    low_freq_factor: float,
    high_freq_factor: float,
    original_context: int,
) -> tuple[float, ...]:
    """Llama-3's per-pair frequency divisors (module docstring), one per pair of a head.

    **Raises:**
        ValueError: `factor < 1`, `low_freq_factor <= 0`, `high_freq_factor <=
            low_freq_factor`, a non-positive `original_context` (the message names it).
    """
    if not (math.isfinite(factor) and factor >= 1.0):
        raise ValueError(f"factor must be a finite number >= 1, got {factor!r}")
    if not (math.isfinite(low_freq_factor) and low_freq_factor > 0):
        raise ValueError(f"low_freq_factor must be a finite number > 0, got {low_freq_factor!r}")
    if not (math.isfinite(high_freq_factor) and high_freq_factor > low_freq_factor):
        raise ValueError(
            f"high_freq_factor must be a finite number > low_freq_factor={low_freq_factor}, "
            f"got {high_freq_factor!r}"
        )
    if isinstance(original_context, bool) or not (
        isinstance(original_context, int) and original_context > 0
    ):
        raise ValueError(f"original_context must be a positive int, got {original_context!r}")
    omega = float(base) ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelen = 2 * np.pi / omega
    gamma = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    mid = 1.0 / ((1.0 - gamma) / factor + gamma)
    s = np.where(
        wavelen < original_context / high_freq_factor,
        1.0,
        np.where(wavelen > original_context / low_freq_factor, factor, mid),
    )
    return tuple(float(v) for v in s)


def hf_rope_factors(spec: Any, head_dim: int, base: float, where: str) -> tuple[float, ...] | None:
    """The per-pair divisors a Hugging Face `rope_scaling` entry asks for (None: no
    scaling). Supported: absent / "default", "linear" (`factor`), "llama3" (`factor`,
    `low_freq_factor`, `high_freq_factor`, `original_max_position_embeddings`).

    **Raises:**
        ValueError: another `rope_type` (named), a missing or invalid field (named).
    """
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise ValueError(f"{where}: rope_scaling must be an object or null, got {spec!r}")
    kind = spec.get("rope_type", spec.get("type"))
    if kind in _NONE:
        return None
    if kind == "linear":
        return linear_factors(head_dim, _positive(spec, "factor", where, at_least=1.0))
    if kind == "llama3":
        ctx = spec.get("original_max_position_embeddings")
        if isinstance(ctx, bool) or not (isinstance(ctx, int) and 0 < ctx < 2**31):
            raise ValueError(
                f"{where}: rope_scaling['original_max_position_embeddings'] must be a "
                f"positive int, got {ctx!r}"
            )
        low = _positive(spec, "low_freq_factor", where)
        high = _positive(spec, "high_freq_factor", where)
        if not high > low:
            raise ValueError(
                f"{where}: rope_scaling['high_freq_factor']={high} must exceed "
                f"low_freq_factor={low}"
            )
        factor = _positive(spec, "factor", where, at_least=1.0)
        return llama3_factors(head_dim, base, factor, low, high, ctx)
    raise ValueError(
        f"{where}: rope_scaling type {kind!r} is not supported (supported: none, "
        "'linear', 'llama3'); refusing rather than running the model without it"
    )


def gguf_rope_factors(gguf_file, arch: str, head_dim: int) -> tuple[float, ...] | None:
    """The per-pair divisors a GGUF file asks for: its `rope_freqs.weight` tensor
    (llama.cpp's Llama-3 factors) times the linear factor of `{arch}.rope.scaling.type`
    = "linear" (`{arch}.rope.scaling.factor`, or the older `{arch}.rope.scale_linear`).
    None when the file asks for no scaling.

    **Raises:**
        ValueError: another scaling type (named), a factor that is not a finite number
            >= 1, a `rope_freqs.weight` of the wrong shape or with a non-finite or
            non-positive entry (the message names the file).
    """
    where = f"GGUF file {str(gguf_file.path)!r}"
    out = np.ones(head_dim // 2)
    scaled = False
    info = gguf_file.tensors.get("rope_freqs.weight")
    if info is not None:
        if tuple(info.shape) != (head_dim // 2,):
            raise ValueError(
                f"{where}: tensor 'rope_freqs.weight' has shape {tuple(info.shape)}, "
                f"expected ({head_dim // 2},) (head_dim / 2)"
            )
        freqs = np.asarray(gguf_file.array("rope_freqs.weight", np.float32), np.float64)
        if not (np.all(np.isfinite(freqs)) and np.all(freqs > 0)):
            raise ValueError(f"{where}: tensor 'rope_freqs.weight' must be finite and > 0")
        out, scaled = out * freqs, True
    kind = gguf_file.get(f"{arch}.rope.scaling.type", None)
    factor = gguf_file.get(f"{arch}.rope.scale_linear", None)
    if kind not in (None, "none", "linear"):
        raise ValueError(
            f"{where}: {arch}.rope.scaling.type={kind!r} is not supported (none, linear); "
            "refusing rather than running the model without it"
        )
    if kind == "linear":
        factor = gguf_file.get(f"{arch}.rope.scaling.factor", factor)
    if factor is not None:
        if isinstance(factor, bool) or not isinstance(factor, int | float):
            raise ValueError(f"{where}: the linear RoPE scaling factor must be a number")
        if not (math.isfinite(factor) and factor >= 1.0):
            raise ValueError(
                f"{where}: the linear RoPE scaling factor must be a finite number >= 1, "
                f"got {factor!r}"
            )
        if factor != 1.0:
            out, scaled = out * float(factor), True
    return tuple(float(v) for v in out) if scaled else None
