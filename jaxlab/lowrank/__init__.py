"""Learning dynamics of low-rank RNNs as closed ODEs in overlap space (paper P1).

Gradient descent on the connectivity vectors `{m_r, n_r, I_k, w}` of a low-rank
RNN closes on their overlap (Gram) matrix `G = V V^T / N`:
`dG/dt = -(D S_hat G + G S_hat D)` with `S_hat` the autodiff gradient of the
loss written as a function of `G` — exact for linear units, the large-N
Gaussian limit for tanh. Overlaps split into loss-visible and loss-invisible
(`classify_overlaps`). Linear rank-1, one input, vectors (m, n, I, w): visible
n.m, n.I, w.m, w.I; invisible m.m, n.n, I.I, w.w, m.I, n.w
(`linear_rank1_visibility`). For tanh units the activity variance makes m.m,
m.I, I.I visible as well; n.n, n.w, w.w stay invisible.

Example: `examples/lowrank.py` (a jupytext notebook; rendered in the docs site).
"""

from ._activation import AbstractActivation as AbstractActivation
from ._activation import Linear as Linear
from ._activation import Tanh as Tanh
from ._flow import overlap_flow as overlap_flow
from ._flow import overlap_gd as overlap_gd
from ._flow import overlap_gd_step as overlap_gd_step
from ._flow import solve_overlap_flow as solve_overlap_flow
from ._gram import gaussian_vectors as gaussian_vectors
from ._gram import gram as gram
from ._gram import vectors_from_gram as vectors_from_gram
from ._history import train_history as train_history
from ._layout import OverlapLayout as OverlapLayout
from ._losses import NetworkLoss as NetworkLoss
from ._losses import OverlapLoss as OverlapLoss
from ._network import LowRankRNN as LowRankRNN
from ._network import network_loss as network_loss
from ._network import network_outputs as network_outputs
from ._network_gd import NetworkGDState as NetworkGDState
from ._network_gd import NetworkGDStep as NetworkGDStep
from ._network_gd import network_flow as network_flow
from ._network_gd import network_gd as network_gd
from ._network_gd import network_gd_init as network_gd_init
from ._network_gd import network_gd_step as network_gd_step
from ._network_gd import solve_network_flow as solve_network_flow
from ._reduced import overlap_loss as overlap_loss
from ._reduced import overlap_outputs as overlap_outputs
from ._tasks import Task as Task
from ._tasks import context_task as context_task
from ._tasks import fixed_point_task as fixed_point_task
from ._tasks import flip_flop_task as flip_flop_task
from ._tasks import ramp_task as ramp_task
from ._visibility import classify_overlaps as classify_overlaps
from ._visibility import linear_rank1_visibility as linear_rank1_visibility
from ._visibility import overlap_sensitivity as overlap_sensitivity
from ._visibility import random_overlaps as random_overlaps
from ._visibility import visibility_table as visibility_table
