"""P4 sensing: multimodal predictive coding of uncertainty-reduction maps (hawkmoth flowers).

Simulated flowers, a product-of-experts multimodal VAE over visual and
mechanosensory probes, expected-information-gain maps over the action space,
and an uncertainty-gated lexicographic policy with its baselines.

Example: `examples/sensing.py` (a jupytext notebook; rendered in the docs site).
"""

from ._flower import ACTION_DIM as ACTION_DIM
from ._flower import MECHANO_DIM as MECHANO_DIM
from ._flower import TUBE_RADIUS as TUBE_RADIUS
from ._flower import VISUAL_DIM as VISUAL_DIM
from ._flower import Flower as Flower
from ._flower import nectar_reward as nectar_reward
from ._flower import observe as observe
from ._flower import observe_mean as observe_mean
from ._flower import pattern_intensity as pattern_intensity
from ._flower import sample_flower as sample_flower
from ._flower import surface_height as surface_height
from ._infomap import action_grid as action_grid
from ._infomap import expected_reward as expected_reward
from ._infomap import grid_mask as grid_mask
from ._infomap import information_map as information_map
from ._infomap import linearized_information_gain as linearized_information_gain
from ._infomap import mc_information_gain as mc_information_gain
from ._model import GaussianExpert as GaussianExpert
from ._model import MultimodalVAE as MultimodalVAE
from ._model import elbo as elbo
from ._model import product_of_experts as product_of_experts
from ._policy import AbstractPolicy as AbstractPolicy
from ._policy import Episode as Episode
from ._policy import EpsilonGreedyPolicy as EpsilonGreedyPolicy
from ._policy import ExploitPolicy as ExploitPolicy
from ._policy import LexicographicPolicy as LexicographicPolicy
from ._policy import WeightedPolicy as WeightedPolicy
from ._policy import run_episode as run_episode
from ._train import ProbeData as ProbeData
from ._train import VAEStep as VAEStep
from ._train import random_actions as random_actions
from ._train import simulate_probes as simulate_probes
from ._train import train_model as train_model
