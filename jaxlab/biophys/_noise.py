"""Recording noise: white + 1/f (per site) + spatially correlated 1/f background.

`NoiseModel.sample(probe, n_samples, fs=..., key=...)` returns `(T, S)` uV.
The 1/f components are white Gaussian noise shaped in the Fourier domain by
`1/sqrt(f)` (power ~ 1/f above `f_min`) and normalised to unit variance; the
correlated component mixes sites with the Cholesky factor of
`exp(-distance / length_scale)`. Every component is seeded by `key`.
Realistic-noise model for P12's synthetic Neuropixels recordings.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxlab._core import check_memory, check_positive_int, check_range, check_real

from ._probe import Probe

__all__ = ["NoiseModel", "pink_noise"]


def pink_noise(
    n_samples: int,
    n_channels: int,
    *,
    fs: float,
    f_min: float = 1.0,
    key: PRNGKeyArray,
    dtype=jnp.float32,
) -> Float[Array, "T S"]:
    """Unit-variance 1/f noise `(n_samples, n_channels)`, independent across channels.

    **Arguments:** `n_samples`, `n_channels` (positive ints); `fs` the sampling rate (Hz,
    > 0); `f_min` (Hz, > 0): below it the spectrum is flat; `key`; `dtype`.
    """
    n_samples = check_positive_int("n_samples", n_samples)
    n_channels = check_positive_int("n_channels", n_channels)
    fs = check_real("fs", fs, low=0.0, low_inclusive=False)
    f_min = check_real("f_min", f_min, low=0.0, low_inclusive=False)
    # white noise, its spectrum (complex) and the result, float64 at most: one sample of
    # every channel, then all samples
    check_memory("n_channels", 8.0 * 4 * n_channels)
    check_memory("n_samples", 8.0 * 4 * n_samples * n_channels)
    white = jax.random.normal(key, (n_samples, n_channels), dtype=dtype)
    spec = jnp.fft.rfft(white, axis=0)
    f = jnp.fft.rfftfreq(n_samples, d=1.0 / fs).astype(dtype)
    shape = jnp.where(f > 0, 1.0 / jnp.sqrt(jnp.maximum(f, f_min)), 0.0).astype(dtype)
    x = jnp.fft.irfft(spec * shape[:, None].astype(spec.dtype), n=n_samples, axis=0)
    return (x / (jnp.std(x, axis=0, keepdims=True) + 1e-12)).astype(dtype)


class NoiseModel(eqx.Module):
    """Additive extracellular noise; all amplitudes are standard deviations in uV.

    - `white_uv`: independent white (thermal/amplifier) noise per site.
    - `pink_uv`: independent 1/f noise per site.
    - `correlated_uv`: 1/f noise shared across sites with spatial correlation
      `exp(-d / length_scale_um)` (background activity of distant cells).
    """

    white_uv: float = 6.0
    pink_uv: float = 2.0
    correlated_uv: float = 3.0
    length_scale_um: float = 100.0
    f_min: float = 1.0

    def __check_init__(self):
        for name in ("white_uv", "pink_uv", "correlated_uv"):
            check_range(name, getattr(self, name), low=0.0)
        check_range("length_scale_um", self.length_scale_um, low=0.0, low_inclusive=False)

    @property
    def total_std(self) -> float:
        """Per-site standard deviation of the sum (uV)."""
        return float((self.white_uv**2 + self.pink_uv**2 + self.correlated_uv**2) ** 0.5)

    def sample(
        self, probe: Probe, n_samples: int, *, fs: float, key: PRNGKeyArray
    ) -> Float[Array, "T S"]:
        """Draw `(n_samples, probe.n_sites)` noise at sampling rate `fs` (Hz)."""
        n_samples = check_positive_int("n_samples", n_samples)
        check_range("fs", fs, low=0.0, low_inclusive=False)
        dtype = probe.positions.dtype
        s = probe.n_sites
        k1, k2, k3 = jax.random.split(key, 3)
        out = self.white_uv * jax.random.normal(k1, (n_samples, s), dtype=dtype)
        out = out + self.pink_uv * pink_noise(
            n_samples, s, fs=fs, f_min=self.f_min, key=k2, dtype=dtype
        )
        d = jnp.linalg.norm(probe.positions[:, None, :] - probe.positions[None, :, :], axis=-1)
        cov = jnp.exp(-d / self.length_scale_um) + 1e-6 * jnp.eye(s, dtype=dtype)
        chol = jnp.linalg.cholesky(cov)
        shared = pink_noise(n_samples, s, fs=fs, f_min=self.f_min, key=k3, dtype=dtype)
        return out + self.correlated_uv * (shared @ chol.T)
