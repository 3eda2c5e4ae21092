"""P2 observers: provably stable neural-network observers (two-stage training, LMI certificate).

Example: `examples/observers.py` (a jupytext notebook; rendered in the docs site).
"""

from ._certify import Certificate as Certificate
from ._certify import certify_lmi as certify_lmi
from ._certify import check_certificate as check_certificate
from ._certify import coverage_bound as coverage_bound
from ._certify import local_stability_radius as local_stability_radius
from ._certify import numpy_lmi_blocks as numpy_lmi_blocks
from ._certify import sampled_decrease as sampled_decrease
from ._direct import train_direct_sdp as train_direct_sdp
from ._lmi import LyapunovMatrix as LyapunovMatrix
from ._lmi import decrease_bound as decrease_bound
from ._lmi import implicit_blocks as implicit_blocks
from ._lmi import lmi_matrix as lmi_matrix
from ._lmi import lmi_penalty as lmi_penalty
from ._lmi import lyapunov_hinge as lyapunov_hinge
from ._observer import AbstractObserver as AbstractObserver
from ._observer import ExtendedKalmanFilter as ExtendedKalmanFilter
from ._observer import LuenbergerObserver as LuenbergerObserver
from ._observer import NeuralObserver as NeuralObserver
from ._observer import place_gain as place_gain
from ._observer import trainable_filter as trainable_filter
from ._rollout import rollout as rollout
from ._rollout import rollout_estimation as rollout_estimation
from ._rollout import rollout_mse as rollout_mse
from ._simulate import Trajectory as Trajectory
from ._simulate import simulate as simulate
from ._simulate import state_mse as state_mse
from ._systems import AbstractPlant as AbstractPlant
from ._systems import DisturbedPendulum as DisturbedPendulum
from ._systems import Duffing as Duffing
from ._systems import LinearPlant as LinearPlant
from ._systems import VanDerPol as VanDerPol
from ._systems import extended_error_model as extended_error_model
from ._systems import linear_model as linear_model
from ._systems import total_disturbance as total_disturbance
from ._systems import x29_lateral as x29_lateral
from ._systems import x29_longitudinal as x29_longitudinal
from ._train import CertifiedObserver as CertifiedObserver
from ._train import ObserverTrainConfig as ObserverTrainConfig
from ._train import StageStep as StageStep
from ._train import TrainState as TrainState
from ._train import estimation_loss as estimation_loss
from ._train import fit as fit
from ._train import lmi_loss as lmi_loss
from ._train import lyapunov_warm_start as lyapunov_warm_start
from ._train import max_lmi_eigenvalue as max_lmi_eigenvalue
from ._train import normalised_lmi as normalised_lmi
from ._train import point_loss as point_loss
from ._train import sample_errors as sample_errors
from ._train import stage_init as stage_init
from ._train import stage_step as stage_step
