"""Neuron models as equinox modules: LIF, AdEx, Hodgkin–Huxley, Wang–Buzsaki, ball-and-stick.

Each model exposes its state as a flat vector `y`, a vector field
`vector_field(t, y, current)` that `diffrax` solvers integrate (the input
current is constant over one step, passed as `args`), and
`spike_and_reset(y_prev, y_next) -> (y, spike)` applied after every step.
Integrate-and-fire models spike and reset through `spike_surrogate`
(Heaviside forward, SuperSpike derivative backward); Hodgkin–Huxley models are
smooth and differentiable as they are, and report a spike as an upward
crossing of `spike_threshold`.

Units: mV, ms; LIF/AdEx/ball-and-stick currents in nA; Hodgkin–Huxley and
Wang–Buzsaki (single compartment) current density in uA/cm^2. Method of P12 (differentiable
biophysical simulator coupled to a volume conductor).
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._surrogate import spike_surrogate

__all__ = ["AbstractNeuron", "LIF", "AdEx", "HodgkinHuxley", "WangBuzsaki", "BallAndStick"]


class AbstractNeuron(eqx.Module):
    """A point or compartmental neuron integrated step by step by `simulate`."""

    @abc.abstractmethod
    def init_state(self) -> Float[Array, " D"]:
        """Resting state vector `y0`."""

    @abc.abstractmethod
    def vector_field(
        self, t: Float[ArrayLike, ""], y: Float[Array, " D"], current: Float[ArrayLike, ""]
    ) -> Float[Array, " D"]:
        """`dy/dt` at time `t` (ms) under the input `current` held over the step."""

    @abc.abstractmethod
    def voltage(self, y: Float[Array, " D"]) -> Float[Array, ""]:
        """Somatic membrane potential (mV) of state `y`."""

    @abc.abstractmethod
    def spike_and_reset(
        self, y_prev: Float[Array, " D"], y_next: Float[Array, " D"]
    ) -> tuple[Float[Array, " D"], Float[Array, ""]]:
        """Apply threshold/reset after one step; returns the new state and the spike (0/1)."""


class LIF(AbstractNeuron):
    """Leaky integrate-and-fire: `tau dv/dt = -(v - v_rest) + r_m I`, reset at threshold.

    Current in nA, `r_m` in MOhm (nA * MOhm = mV).
    """

    tau_m: Float[ArrayLike, ""] = 10.0
    r_m: Float[ArrayLike, ""] = 100.0
    v_rest: Float[ArrayLike, ""] = -70.0
    v_threshold: Float[ArrayLike, ""] = -50.0
    v_reset: Float[ArrayLike, ""] = -70.0
    surrogate_slope: float = eqx.field(static=True, default=2.0)

    def init_state(self):
        return jnp.full((1,), self.v_rest, dtype=jnp.result_type(float))

    def vector_field(self, t, y, current):
        return (-(y - self.v_rest) + self.r_m * current) / self.tau_m

    def voltage(self, y):
        return y[0]

    def spike_and_reset(self, y_prev, y_next):
        s = spike_surrogate(y_next[0] - self.v_threshold, self.surrogate_slope)
        v = y_next[0] - s * (y_next[0] - self.v_reset)
        return v[None], s


class AdEx(AbstractNeuron):
    """Adaptive exponential integrate-and-fire (Brette & Gerstner 2005).

    `C dv/dt = -g_L (v - E_L) + g_L dT exp((v - V_T)/dT) - w + I`,
    `tau_w dw/dt = a (v - E_L) - w`; at `v >= v_peak`: `v <- v_reset`, `w <- w + b`.
    Units: pF, nS, mV, ms, `w` in pA, input current in nA. Default parameters are
    the paper's regular-spiking cell; `v_peak = V_T + 5 dT` as they recommend.
    The exponent is capped at 10 so a surrogate-gradient step never overflows.
    """

    c_m: Float[ArrayLike, ""] = 281.0
    g_l: Float[ArrayLike, ""] = 30.0
    e_l: Float[ArrayLike, ""] = -70.6
    v_t: Float[ArrayLike, ""] = -50.4
    delta_t: Float[ArrayLike, ""] = 2.0
    tau_w: Float[ArrayLike, ""] = 144.0
    a: Float[ArrayLike, ""] = 4.0
    b: Float[ArrayLike, ""] = 80.5
    v_reset: Float[ArrayLike, ""] = -70.6
    v_peak: Float[ArrayLike, ""] = -40.4
    surrogate_slope: float = eqx.field(static=True, default=2.0)

    def init_state(self):
        return jnp.asarray([self.e_l, 0.0], dtype=jnp.result_type(float))

    def vector_field(self, t, y, current):
        v, w = y[0], y[1]
        expo = jnp.exp(jnp.minimum((v - self.v_t) / self.delta_t, 10.0))
        dv = (
            -(self.g_l * (v - self.e_l)) + self.g_l * self.delta_t * expo - w + 1000.0 * current
        ) / self.c_m
        dw = (self.a * (v - self.e_l) - w) / self.tau_w
        return jnp.stack([dv, dw])

    def voltage(self, y):
        return y[0]

    def spike_and_reset(self, y_prev, y_next):
        v, w = y_next[0], y_next[1]
        s = spike_surrogate(v - self.v_peak, self.surrogate_slope)
        return jnp.stack([v - s * (v - self.v_reset), w + s * self.b]), s


def _vtrap(x: Array, k: float) -> Array:
    """`x / (1 - exp(-x/k))` with its removable singularity at 0 (and a finite gradient)."""
    small = jnp.abs(x) < 1e-6
    safe = jnp.where(small, jnp.ones_like(x), x)
    return jnp.where(small, k + x / 2, safe / -jnp.expm1(-safe / k))


def _hh_rates(v: Array) -> tuple[Array, Array, Array, Array, Array, Array]:
    """Hodgkin–Huxley (1952) rate functions (1/ms) in the modern convention (rest -65 mV)."""
    am = 0.1 * _vtrap(v + 40.0, 10.0)
    bm = 4.0 * jnp.exp(-(v + 65.0) / 18.0)
    ah = 0.07 * jnp.exp(-(v + 65.0) / 20.0)
    bh = 1.0 / (1.0 + jnp.exp(-(v + 35.0) / 10.0))
    an = 0.01 * _vtrap(v + 55.0, 10.0)
    bn = 0.125 * jnp.exp(-(v + 65.0) / 80.0)
    return am, bm, ah, bh, an, bn


class _ConductanceSoma(AbstractNeuron):
    """A single-compartment conductance-based soma, state `[v, gates...]`:
    `c_m dv/dt = current - ionic_current(y)`, the gates from `gate_derivatives(y)`; a
    spike is the (surrogate) upward crossing of `spike_threshold`, with no reset. The
    subclass provides the fields `c_m`, `spike_threshold` and the two methods."""

    c_m: eqx.AbstractVar[Float[ArrayLike, ""]]
    spike_threshold: eqx.AbstractVar[Float[ArrayLike, ""]]

    @abc.abstractmethod
    def ionic_current(self, y: Float[Array, " D"]) -> Float[Array, ""]:
        """Total ionic current density at state `y`."""

    @abc.abstractmethod
    def gate_derivatives(self, y: Float[Array, " D"]) -> Float[Array, " G"]:
        """`d(gates)/dt` at state `y`."""

    def vector_field(self, t, y, current):
        dv = (current - self.ionic_current(y)) / self.c_m
        return jnp.concatenate([dv[None], self.gate_derivatives(y)])

    def voltage(self, y):
        return y[0]

    def spike_and_reset(self, y_prev, y_next):
        s = spike_surrogate(y_next[0] - self.spike_threshold) * (
            1.0 - spike_surrogate(y_prev[0] - self.spike_threshold)
        )
        return y_next, s


class HodgkinHuxley(_ConductanceSoma):
    """Single-compartment Hodgkin–Huxley neuron (squid axon, 6.3 degC).

    State `[v, m, h, n]`; conductances in mS/cm^2, `c_m` in uF/cm^2, input
    current density in uA/cm^2. Smooth: no surrogate is needed for gradients.
    """

    c_m: Float[ArrayLike, ""] = 1.0
    g_na: Float[ArrayLike, ""] = 120.0
    g_k: Float[ArrayLike, ""] = 36.0
    g_l: Float[ArrayLike, ""] = 0.3
    e_na: Float[ArrayLike, ""] = 50.0
    e_k: Float[ArrayLike, ""] = -77.0
    e_l: Float[ArrayLike, ""] = -54.387
    spike_threshold: Float[ArrayLike, ""] = 0.0

    def gates_at_rest(self, v: Float[ArrayLike, ""]) -> Float[Array, " 3"]:
        """Steady-state `[m, h, n]` at voltage `v`."""
        am, bm, ah, bh, an, bn = _hh_rates(jnp.asarray(v, dtype=jnp.result_type(float)))
        return jnp.stack([am / (am + bm), ah / (ah + bh), an / (an + bn)])

    def init_state(self):
        v0 = jnp.asarray(-65.0, dtype=jnp.result_type(float))
        return jnp.concatenate([v0[None], self.gates_at_rest(v0)])

    def ionic_current(self, y: Float[Array, " 4"]) -> Float[Array, ""]:
        """Outward ionic current density (uA/cm^2) of state `y = [v, m, h, n]`."""
        v, m, h, n = y[0], y[1], y[2], y[3]
        return jnp.asarray(
            self.g_na * m**3 * h * (v - self.e_na)
            + self.g_k * n**4 * (v - self.e_k)
            + self.g_l * (v - self.e_l)
        )

    def gate_derivatives(self, y: Float[Array, " 4"]) -> Float[Array, " 3"]:
        am, bm, ah, bh, an, bn = _hh_rates(y[0])
        m, h, n = y[1], y[2], y[3]
        return jnp.stack([am * (1 - m) - bm * m, ah * (1 - h) - bh * h, an * (1 - n) - bn * n])


def _wb_rates(v: Array) -> tuple[Array, Array, Array, Array, Array, Array]:
    """Wang & Buzsaki (1996) rate functions (1/ms), before the temperature factor `phi`."""
    am = 0.1 * _vtrap(v + 35.0, 10.0)
    bm = 4.0 * jnp.exp(-(v + 60.0) / 18.0)
    ah = 0.07 * jnp.exp(-(v + 58.0) / 20.0)
    bh = 1.0 / (1.0 + jnp.exp(-0.1 * (v + 28.0)))
    an = 0.01 * _vtrap(v + 34.0, 10.0)
    bn = 0.125 * jnp.exp(-(v + 44.0) / 80.0)
    return am, bm, ah, bh, an, bn


class WangBuzsaki(_ConductanceSoma):
    """Wang–Buzsaki (1996) fast-spiking interneuron: a class-I Hodgkin–Huxley-type cell.

    `c_m dv/dt = I - g_na m_inf(v)^3 h (v - e_na) - g_k n^4 (v - e_k) - g_l (v - e_l)`,
    `dx/dt = phi (alpha_x(v) (1 - x) - beta_x(v) x)` for `x in {h, n}`, with the
    sodium activation instantaneous, `m_inf = alpha_m / (alpha_m + beta_m)`, and

    - `alpha_m = 0.1 (v + 35) / (1 - exp(-(v + 35) / 10))`, `beta_m = 4 exp(-(v + 60) / 18)`,
    - `alpha_h = 0.07 exp(-(v + 58) / 20)`, `beta_h = 1 / (1 + exp(-(v + 28) / 10))`,
    - `alpha_n = 0.01 (v + 34) / (1 - exp(-(v + 34) / 10))`, `beta_n = 0.125 exp(-(v + 44) / 80)`.

    State `[v, h, n]`; conductances mS/cm^2, `c_m` uF/cm^2, current density uA/cm^2.
    Its onset of repetitive firing is a saddle-node on an invariant circle: the rate
    rises continuously from 0 Hz at rheobase (class I), unlike `HodgkinHuxley`, whose
    Hopf onset jumps to ~50 Hz (class II), so the firing rate reports the input current
    over a wide range. It has the soma interface of `HodgkinHuxley` (`gates_at_rest`,
    `ionic_current`, `gate_derivatives`), so it can be the soma of a `BallAndStick`.
    """

    c_m: Float[ArrayLike, ""] = 1.0
    g_na: Float[ArrayLike, ""] = 35.0
    g_k: Float[ArrayLike, ""] = 9.0
    g_l: Float[ArrayLike, ""] = 0.1
    e_na: Float[ArrayLike, ""] = 55.0
    e_k: Float[ArrayLike, ""] = -90.0
    e_l: Float[ArrayLike, ""] = -65.0
    phi: Float[ArrayLike, ""] = 5.0
    spike_threshold: Float[ArrayLike, ""] = 0.0

    def gates_at_rest(self, v: Float[ArrayLike, ""]) -> Float[Array, " 2"]:
        """Steady-state `[h, n]` at voltage `v`."""
        _, _, ah, bh, an, bn = _wb_rates(jnp.asarray(v, dtype=jnp.result_type(float)))
        return jnp.stack([ah / (ah + bh), an / (an + bn)])

    def init_state(self):
        v0 = jnp.asarray(-65.0, dtype=jnp.result_type(float))
        return jnp.concatenate([v0[None], self.gates_at_rest(v0)])

    def ionic_current(self, y: Float[Array, " 3"]) -> Float[Array, ""]:
        """Outward ionic current density (uA/cm^2) of state `y = [v, h, n]`."""
        v, h, n = y[0], y[1], y[2]
        am, bm, *_ = _wb_rates(v)
        m_inf = am / (am + bm)
        return jnp.asarray(
            self.g_na * m_inf**3 * h * (v - self.e_na)
            + self.g_k * n**4 * (v - self.e_k)
            + self.g_l * (v - self.e_l)
        )

    def gate_derivatives(self, y: Float[Array, " 3"]) -> Float[Array, " 2"]:
        _, _, ah, bh, an, bn = _wb_rates(y[0])
        h, n = y[1], y[2]
        return jnp.stack([ah * (1 - h) - bh * h, an * (1 - n) - bn * n]) * self.phi


class BallAndStick(AbstractNeuron):
    """Ball-and-stick cell: Hodgkin–Huxley-type soma plus a passive cable dendrite.

    Compartment 0 is the spherical soma (diameter `soma_diameter` um, the
    channels of `soma`: `HodgkinHuxley`, class II, or `WangBuzsaki`, class I);
    compartments 1..`n_dendrite` split a cylinder of `dendrite_length` x
    `dendrite_diameter` um with a passive leak. Neighbours are coupled by axial
    conductances from `axial_resistivity` (Ohm cm): the discretised cable
    equation. State `[v_0..v_C-1, gates]` (C = 1 + n_dendrite; gates `m, h, n`
    of HH, `h, n` of WB). The input current (nA) enters the soma as a synaptic,
    i.e. transmembrane, current, so `transmembrane_currents` sums to zero (charge
    conservation) and the cell is a pure multipole source in the volume
    conductor. The dendrite points along `direction` from the soma centre.
    Defaults (30 um soma, 300 x 4 um dendrite in 3 compartments, 100 Ohm cm)
    give ~60 uV peak-to-peak spikes at 20 um, repetitive firing from ~0.3 nA
    (57-100 Hz, class II like HH) and are stable with explicit Euler at 30 kHz.
    A `WangBuzsaki` soma fires from ~0.01 nA with a 1 um dendrite (with 4 um the
    dendrite's load keeps it from firing).
    """

    soma: HodgkinHuxley | WangBuzsaki = HodgkinHuxley()
    soma_diameter: Float[ArrayLike, ""] = 30.0
    dendrite_length: Float[ArrayLike, ""] = 300.0
    dendrite_diameter: Float[ArrayLike, ""] = 4.0
    g_pas: Float[ArrayLike, ""] = 0.1
    e_pas: Float[ArrayLike, ""] = -65.0
    axial_resistivity: Float[ArrayLike, ""] = 100.0
    direction: Float[ArrayLike, " 3"] | tuple[float, float, float] = (0.0, 1.0, 0.0)
    n_dendrite: int = eqx.field(static=True, default=3)

    @property
    def n_compartments(self) -> int:
        return 1 + self.n_dendrite

    def areas_cm2(self) -> Float[Array, " C"]:
        """Membrane area of each compartment in cm^2."""
        seg = self.dendrite_length / self.n_dendrite
        soma = jnp.pi * jnp.asarray(self.soma_diameter, dtype=jnp.result_type(float)) ** 2
        dend = jnp.full(
            (self.n_dendrite,), jnp.pi * self.dendrite_diameter * seg, dtype=jnp.result_type(float)
        )
        return jnp.concatenate([soma[None], dend]) * 1e-8

    def axial_conductances(self) -> Float[Array, " C-1"]:
        """Conductance (uS) of the link between compartment k and k+1."""
        seg_cm = self.dendrite_length / self.n_dendrite * 1e-4
        cross = jnp.pi * (self.dendrite_diameter * 1e-4 / 2) ** 2
        r_seg = self.axial_resistivity * seg_cm / cross  # Ohm
        r = jnp.full((self.n_dendrite,), r_seg, dtype=jnp.result_type(float))
        r = r.at[0].set(r_seg / 2)  # soma centre to the middle of the first segment
        return 1e6 / r

    def init_state(self):
        v0 = jnp.asarray(-65.0, dtype=jnp.result_type(float))
        return jnp.concatenate([jnp.full((self.n_compartments,), v0), self.soma.gates_at_rest(v0)])

    def _split(self, y):
        c = self.n_compartments
        return y[:c], y[c:]

    def ionic_currents(self, y: Float[Array, " D"]) -> Float[Array, " C"]:
        """Outward ionic current (nA) of each compartment."""
        v, gates = self._split(y)
        soma_density = self.soma.ionic_current(jnp.concatenate([v[:1], gates]))
        dens = jnp.concatenate([soma_density[None], self.g_pas * (v[1:] - self.e_pas)])
        return dens * self.areas_cm2() * 1e3

    def transmembrane_currents(self, y: Float[Array, " D"]) -> Float[Array, " C"]:
        """Net outward transmembrane current (nA) per compartment (capacitive + ionic - input).

        Equal to the axial current flowing into each compartment; sums to zero.
        """
        v, _ = self._split(y)
        flow = self.axial_conductances() * (v[:-1] - v[1:])  # from k to k+1
        zero = jnp.zeros((1,), dtype=flow.dtype)
        return jnp.concatenate([zero, flow]) - jnp.concatenate([flow, zero])

    def vector_field(self, t, y, current):
        v, gates = self._split(y)
        cap_nf = self.areas_cm2() * 1e3 * self.soma.c_m
        inject = jnp.zeros_like(v).at[0].set(current)
        dv = (self.transmembrane_currents(y) - self.ionic_currents(y) + inject) / cap_nf
        dgates = self.soma.gate_derivatives(jnp.concatenate([v[:1], gates]))
        return jnp.concatenate([dv, dgates])

    def voltage(self, y):
        return y[0]

    def spike_and_reset(self, y_prev, y_next):
        th = self.soma.spike_threshold
        s = spike_surrogate(y_next[0] - th) * (1.0 - spike_surrogate(y_prev[0] - th))
        return y_next, s

    def geometry(
        self, position: Float[Array, " 3"]
    ) -> tuple[Float[Array, " 3"], Float[Array, "n 3"], Float[Array, "n 3"]]:
        """Soma centre and dendrite segment start/end points (um) for a soma at `position`."""
        u = jnp.asarray(self.direction, dtype=position.dtype)
        u = u / jnp.linalg.norm(u)
        seg = self.dendrite_length / self.n_dendrite
        offs = self.soma_diameter / 2 + seg * jnp.arange(self.n_dendrite + 1, dtype=position.dtype)
        pts = position[None, :] + offs[:, None] * u[None, :]
        return position, pts[:-1], pts[1:]
