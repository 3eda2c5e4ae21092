"""Simulator of the L-FAME design (P10): 3 groups x 2 sessions x rest/meditation.

The real L-FAME recordings (74 participants; SA-TA-NA-MA mantra, Hare Krishna
mantra and Breath Focus groups; pre/post sessions six weeks apart) are not
public, so experiments use this documented generative model instead:

- background: per-channel 1/f^beta noise (subject-specific exponent), spatially
  smoothed over the 10-20 montage;
- rhythms: a frontal-midline theta source and a posterior alpha source with
  subject-specific peak frequencies and amplitudes;
- meditation effects (parameters, in *fractional power change*): frontal-midline
  theta power `+theta_effect`, posterior alpha power `+alpha_effect`; each
  subject's effect is scaled by a log-normal "responder" factor;
- technique signatures present only during meditation, with power
  `technique_effect` relative to `signature_uv**2`: SA-TA-NA-MA -> central
  beta (18 Hz, finger-movement mantra), Hare Krishna -> left-temporal 35 Hz
  (chanting), Breath Focus -> frontal alpha (10 Hz);
- session shift after six weeks (post session; every parameter in `SimulationConfig`):
  * changed meditation-effect size: theta/alpha state effects scaled by
    `1 + training_gain` (the technique signatures, motor/vocal components of the
    practice, keep their size);
  * trait effect: post-session *rest* carries `trait_effect` x the (trained) theta/alpha
    state effect, since practice raises resting theta/alpha (Cahn & Polich 2006; Lomas
    et al. 2015), so the pre-session rest/meditation boundary no longer fits and the
    post-session rest-vs-meditation contrast is smaller;
  * recording shift: electrode impedance changes as per-channel log-gain noise
    (`session_shift`), an overall amplitude scale per (subject, session) (log SD
    `session_scale`), a common change of the recording setup that scales every
    post-session recording by `exp(post_gain)` (e.g. another cap / gel batch), a cap
    re-placement that moves every source topography by a random per-(subject, session)
    displacement of SD `montage_shift` head radii (~0.9 cm per
    0.1), a 1/f exponent change `exponent_shift`, and a small change of the individual
    alpha peak frequency (SD `alpha_peak_shift` Hz; IAF test-retest ~0.2-0.4 Hz);
- artefacts at identical rates in both conditions (so that nothing but the
  effects separates them): eye blinks on frontal-polar channels, EMG bursts on
  temporal channels, 50 Hz line noise.

With every effect at zero, rest and meditation blocks are identically
distributed: a classifier must then score chance.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._core import check_instance, check_memory, check_positive_int, check_real

from ._data import EEGDataset
from ._montage import STANDARD_1020, channel_positions

__all__ = ["SimulationConfig", "simulate"]


class SimulationConfig(eqx.Module):
    """Parameters of the L-FAME simulator; effect sizes are reported by experiments.

    Defaults are literature-typical: frontal-midline theta and alpha power increases
    of 20-40 % during focused-attention meditation (Cahn & Polich 2006; Lomas et al.
    2015), i.e. Cohen's d of roughly 0.3-0.8 after inter-subject variability.
    """

    n_subjects: int = 74
    block_seconds: float = 60.0
    sfreq: float = 128.0
    theta_effect: float = 0.35
    alpha_effect: float = 0.25
    technique_effect: float = 1.0
    training_gain: float = 0.3
    trait_effect: float = 0.5
    session_shift: float = 0.2
    session_scale: float = 0.2
    post_gain: float = 0.3
    montage_shift: float = 0.08
    exponent_shift: float = 0.1
    alpha_peak_shift: float = 0.3
    responder_sd: float = 0.5
    background_uv: float = 10.0
    theta_uv: float = 4.0
    alpha_uv: float = 8.0
    signature_uv: float = 3.0
    blink_rate_hz: float = 0.25
    blink_uv: float = 80.0
    muscle_rate_hz: float = 0.05
    muscle_uv: float = 15.0
    line_uv: float = 2.0
    line_freq: float = 50.0

    def scaled(self, factor: float) -> SimulationConfig:
        """The same design with every meditation/technique/training effect times `factor`
        (the trait effect is a fraction of the state effect, so it vanishes with it; the
        recording shift is condition-independent and is kept)."""
        return eqx.tree_at(
            lambda c: (c.theta_effect, c.alpha_effect, c.technique_effect, c.training_gain),
            self,
            (
                self.theta_effect * factor,
                self.alpha_effect * factor,
                self.technique_effect * factor,
                self.training_gain * factor,
            ),
        )

    def effect_sizes(self) -> dict[str, float]:
        return {
            k: float(getattr(self, k))
            for k in (
                "theta_effect",
                "alpha_effect",
                "technique_effect",
                "training_gain",
                "trait_effect",
                "session_shift",
                "session_scale",
                "post_gain",
                "montage_shift",
                "exponent_shift",
                "alpha_peak_shift",
            )
        }


def _topography(pos, centre, width):
    d2 = jnp.sum((pos - jnp.broadcast_to(jnp.asarray(centre, pos.dtype), pos.shape)) ** 2, axis=-1)
    return jnp.exp(-d2 / (2 * width**2))


def _unit(x):
    return (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + 1e-12)


def _fft_filter(x, gain):
    """Multiply the spectrum of `x` (last axis) by the real `gain` (rfft bins)."""
    spec = jnp.fft.rfft(x, axis=-1)
    gain = jnp.broadcast_to(gain.astype(spec.dtype), spec.shape)
    return jnp.fft.irfft(spec * gain, n=x.shape[-1], axis=-1)


def _band_noise(key, shape, freqs, f0, bw, dtype):
    """Unit-variance Gaussian noise with a Gaussian spectral bump at `f0` (Hz)."""
    w = jax.random.normal(key, shape, dtype)
    return _unit(_fft_filter(w, jnp.exp(-0.5 * ((freqs - f0) / bw) ** 2)))


def _block(key, subj, session, condition, group, cfg: SimulationConfig, pos, n_t, dtype):
    """One (subject, session, condition) block, `(C, T)` microvolts."""
    c = pos.shape[0]
    sfreq = cfg.sfreq
    freqs = jnp.fft.rfftfreq(n_t, 1 / sfreq).astype(dtype)
    t = jnp.arange(n_t, dtype=dtype) / sfreq
    ks = jax.random.split(key, 12)
    sess = session.astype(dtype)
    med = condition.astype(dtype)
    gain = 1 + sess * cfg.training_gain
    resp = subj["responder"]
    # cap re-placement: every source topography moves with the electrodes
    pos = pos - subj["cap_shift"][session][None]
    # the trait effect: post-session rest carries part of the (trained) state effect
    state = med + (1 - med) * sess * cfg.trait_effect

    # 1/f background, spatially smoothed (volume conduction)
    expo = subj["exponent"] + sess * cfg.exponent_shift
    white = jax.random.normal(ks[0], (c, n_t), dtype)
    shaping = jnp.maximum(freqs, 0.5) ** (-expo / 2)
    bg = _unit(_fft_filter(white, shaping))
    d2 = jnp.sum((pos[:, None] - pos[None]) ** 2, -1)
    mix = jnp.exp(-d2 / (2 * 0.3**2))
    mix = mix / jnp.sqrt(jnp.sum(mix**2, axis=1, keepdims=True))
    x = cfg.background_uv * (mix @ bg)

    # frontal-midline theta and posterior alpha with meditation effects (power ratios)
    theta_pow = 1 + state * cfg.theta_effect * gain * resp
    alpha_pow = 1 + state * cfg.alpha_effect * gain * resp
    alpha_f = subj["alpha_f"] + sess * cfg.alpha_peak_shift * subj["alpha_f_change"]
    theta = _band_noise(ks[1], (n_t,), freqs, subj["theta_f"], 0.7, dtype)
    alpha = _band_noise(ks[2], (n_t,), freqs, alpha_f, 0.8, dtype)
    x = (
        x
        + (
            cfg.theta_uv
            * subj["theta_amp"]
            * jnp.sqrt(theta_pow)
            * _topography(pos, STANDARD_1020["Fz"], 0.35)
        )[:, None]
        * theta[None]
    )
    x = (
        x
        + (
            cfg.alpha_uv
            * subj["alpha_amp"]
            * jnp.sqrt(alpha_pow)
            * _topography(pos, (0.0, -0.75), 0.4)
        )[:, None]
        * alpha[None]
    )

    # technique-specific signature during meditation only
    sig_f = jnp.asarray([18.0, 35.0, 10.0], dtype)[group]
    sig_centre = jnp.asarray(
        [STANDARD_1020["Cz"], STANDARD_1020["T7"], STANDARD_1020["Fz"]], dtype
    )[group]
    sig = _band_noise(ks[3], (n_t,), freqs, sig_f, 1.5, dtype)
    sig_amp = cfg.signature_uv * jnp.sqrt(med * cfg.technique_effect * resp)
    x = x + (sig_amp * _topography(pos, sig_centre, 0.4))[:, None] * sig[None]

    # artefacts: blinks (frontal-polar), EMG bursts (temporal), line noise
    onsets = jax.random.bernoulli(ks[4], cfg.blink_rate_hz / sfreq, (n_t,)).astype(dtype)
    amps = cfg.blink_uv * jnp.exp(0.3 * jax.random.normal(ks[5], (n_t,), dtype))
    kern_t = (jnp.arange(n_t, dtype=dtype) - n_t // 2) / sfreq
    blink_kernel = jnp.roll(jnp.exp(-0.5 * (kern_t / 0.06) ** 2), -(n_t // 2))
    blinks = jnp.fft.irfft(jnp.fft.rfft(onsets * amps) * jnp.fft.rfft(blink_kernel), n=n_t)
    blinks = blinks.astype(dtype)
    x = x + _topography(pos, (0.0, 1.05), 0.3)[:, None] * blinks[None]
    m_on = jax.random.bernoulli(ks[6], cfg.muscle_rate_hz / sfreq, (n_t,)).astype(dtype)
    box = (jnp.arange(n_t) < int(0.5 * sfreq)).astype(dtype)
    env = jnp.clip(jnp.fft.irfft(jnp.fft.rfft(m_on) * jnp.fft.rfft(box), n=n_t), 0.0, 1.0)
    env = env.astype(dtype)
    emg = _band_noise(ks[7], (c, n_t), freqs, 40.0, 10.0, dtype)
    emg_topo = _topography(pos, STANDARD_1020["T7"], 0.35) + _topography(
        pos, STANDARD_1020["T8"], 0.35
    )
    x = x + cfg.muscle_uv * emg_topo[:, None] * env[None] * emg
    phase = jax.random.uniform(ks[8], (), dtype, 0, 2 * jnp.pi)
    x = x + cfg.line_uv * jnp.sin(2 * jnp.pi * cfg.line_freq * t + phase)[None]

    # electrode gains: subject-specific and session-specific (recording shift)
    sess_gain = jnp.exp(
        cfg.session_shift * subj["session_gain_noise"][session]
        + cfg.session_scale * subj["session_scale_noise"][session]
        + sess * cfg.post_gain
    )
    return x * (subj["channel_gain"] * sess_gain)[:, None]


def simulate(
    config: SimulationConfig, *, key, ch_names=tuple(STANDARD_1020), dtype=jnp.float32
) -> EEGDataset:
    """Simulate an L-FAME-style data set (P10).

    **Arguments:**

    - `config`: a `SimulationConfig` (subjects, block length, sampling rate, effect sizes).
    - `key`: PRNG key (keyword-only).
    - `ch_names`: channels from the 10-20 montage (default: all 19).
    - `dtype`: floating dtype of the signals.

    **Returns:** an `EEGDataset` with `signals` of shape
    `(n_subjects, 2, 2, len(ch_names), round(block_seconds * sfreq))`; groups are
    balanced and randomly assigned (74 subjects -> 25/25/24).

    **Raises:** `ValueError` naming the `config` field: `n_subjects` not an int >= 3,
    `sfreq`, `line_freq`, `block_seconds` not finite and > 0 (a block of at least one
    sample), a signal array that would not fit in memory, effect sizes not finite >= 0.
    """
    check_instance("config", config, SimulationConfig)
    n_subjects = check_positive_int("config.n_subjects", config.n_subjects)
    if n_subjects < 3:
        raise ValueError(f"config.n_subjects: expected an int >= 3, got {config.n_subjects!r}")
    sfreq = check_real("config.sfreq", config.sfreq, low=0.0, low_inclusive=False)
    line_freq = check_real("config.line_freq", config.line_freq, low=0.0, low_inclusive=False)
    check_real("config.block_seconds", config.block_seconds, low=0.0, low_inclusive=False)
    if not sfreq > 2 * max(line_freq, 45.0):
        raise ValueError(
            f"config.sfreq: sampling rate {config.sfreq} Hz is too low for the simulated "
            f"50 Hz line noise and 40 Hz EMG; use >= 2*max(line_freq, 45) Hz"
        )
    if not config.block_seconds > 0:
        raise ValueError(f"config.block_seconds: expected > 0, got {config.block_seconds}")
    for name, val in config.effect_sizes().items():  # all must be finite and >= 0
        if not (np.isfinite(val) and val >= 0):
            raise ValueError(f"config.{name}: expected a finite value >= 0, got {val}")
    pos = jnp.asarray(channel_positions(ch_names), dtype)
    c, s = len(ch_names), n_subjects
    n_t = int(round(float(config.block_seconds) * sfreq))
    if n_t < 1:
        raise ValueError(f"config.block_seconds: {config.block_seconds} s is less than one sample")
    # the (S, 2, 2, C, T) signals and a few same-sized temporaries, refused before allocation
    check_memory("config.n_subjects x config.block_seconds", 8.0 * 4 * s * 2 * 2 * c * n_t)
    k_group, k_subj, k_blocks = jax.random.split(key, 3)
    group = jax.random.permutation(k_group, jnp.arange(s) % 3)
    ks = jax.random.split(k_subj, 12)
    subjects = {
        "alpha_f": 10.0 + 1.0 * jax.random.normal(ks[0], (s,), dtype),
        "theta_f": 6.0 + 0.5 * jax.random.normal(ks[1], (s,), dtype),
        "alpha_amp": jnp.exp(0.4 * jax.random.normal(ks[2], (s,), dtype)),
        "theta_amp": jnp.exp(0.3 * jax.random.normal(ks[3], (s,), dtype)),
        "exponent": 1.5 + 0.2 * jax.random.normal(ks[4], (s,), dtype),
        "responder": jnp.exp(config.responder_sd * jax.random.normal(ks[5], (s,), dtype)),
        "channel_gain": jnp.exp(0.2 * jax.random.normal(ks[6], (s, c), dtype)),
        "session_gain_noise": jax.random.normal(ks[7], (s, 2, c), dtype),
        "session_scale_noise": jax.random.normal(ks[8], (s, 2), dtype),
        "cap_shift": config.montage_shift * jax.random.normal(ks[9], (s, 2, 2), dtype),
        "alpha_f_change": jax.random.normal(ks[10], (s,), dtype),
    }
    sess_idx = jnp.asarray([0, 0, 1, 1])
    cond_idx = jnp.asarray([0, 1, 0, 1])

    @jax.jit
    def one_subject(args):
        k, subj, g = args
        blocks = jax.vmap(lambda kk, se, co: _block(kk, subj, se, co, g, config, pos, n_t, dtype))(
            jax.random.split(k, 4), sess_idx, cond_idx
        )
        return blocks.reshape(2, 2, c, n_t)

    signals = jax.lax.map(one_subject, (jax.random.split(k_blocks, s), subjects, group))
    return EEGDataset(
        signals=signals, group=group, sfreq=float(config.sfreq), ch_names=tuple(ch_names)
    )
