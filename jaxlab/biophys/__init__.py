"""P12 biophys: differentiable neuron models, volume conductor, Neuropixels probe, inverse fit.

Example: `examples/biophys.py` (a jupytext notebook; rendered in the docs site).
"""

from ._conductor import SIGMA_CORTEX as SIGMA_CORTEX
from ._conductor import line_source_gain as line_source_gain
from ._conductor import line_source_potential as line_source_potential
from ._conductor import point_source_gain as point_source_gain
from ._conductor import point_source_potential as point_source_potential
from ._forward import Recording as Recording
from ._forward import cell_gain as cell_gain
from ._forward import population_sources as population_sources
from ._forward import population_traces as population_traces
from ._forward import record as record
from ._inverse import CurrentBasis as CurrentBasis
from ._inverse import FitParams as FitParams
from ._inverse import FitProblem as FitProblem
from ._inverse import FitResult as FitResult
from ._inverse import FitState as FitState
from ._inverse import FitStep as FitStep
from ._inverse import SpikeAnchor as SpikeAnchor
from ._inverse import default_optimizer as default_optimizer
from ._inverse import firing_rate_curve as firing_rate_curve
from ._inverse import fit as fit
from ._inverse import fit_loss as fit_loss
from ._inverse import fit_step as fit_step
from ._inverse import init_fit as init_fit
from ._inverse import make_fit_problem as make_fit_problem
from ._inverse import rate_initial_current as rate_initial_current
from ._neurons import LIF as LIF
from ._neurons import AbstractNeuron as AbstractNeuron
from ._neurons import AdEx as AdEx
from ._neurons import BallAndStick as BallAndStick
from ._neurons import HodgkinHuxley as HodgkinHuxley
from ._neurons import WangBuzsaki as WangBuzsaki
from ._noise import NoiseModel as NoiseModel
from ._noise import pink_noise as pink_noise
from ._population import simulate_hh_population as simulate_hh_population
from ._probe import Probe as Probe
from ._probe import neuropixels_1 as neuropixels_1
from ._reference import hh_reference_voltage as hh_reference_voltage
from ._simulate import Trajectory as Trajectory
from ._simulate import simulate as simulate
from ._spiketrain import match_fraction as match_fraction
from ._spiketrain import spike_indices as spike_indices
from ._surrogate import spike_surrogate as spike_surrogate
from ._triangulation import monopolar_triangulation as monopolar_triangulation
from ._triangulation import template_ptp as template_ptp
