"""P16 bandits: TDGE (task-dimension-guided exploration) over contextual-bandit backbones.

Example: `examples/bandits.py` (a jupytext notebook; rendered in the docs site).
"""

from ._backbone import AbstractBackbone as AbstractBackbone
from ._backbone import AbstractChoice as AbstractChoice
from ._backbone import DisjointLinUCB as DisjointLinUCB
from ._backbone import DisjointState as DisjointState
from ._backbone import EpsilonGreedy as EpsilonGreedy
from ._backbone import LinearState as LinearState
from ._backbone import LinearTS as LinearTS
from ._backbone import LinUCB as LinUCB
from ._backbone import Selection as Selection
from ._backbone import sherman_morrison as sherman_morrison
from ._data import MovieLens as MovieLens
from ._data import OpenBanditLog as OpenBanditLog
from ._data import load_movielens_100k as load_movielens_100k
from ._data import load_open_bandit as load_open_bandit
from ._data import movielens_item_dimensions as movielens_item_dimensions
from ._neural import NeuralLinear as NeuralLinear
from ._neural import NeuralLinearState as NeuralLinearState
from ._offpolicy import OffPolicyEstimate as OffPolicyEstimate
from ._offpolicy import doubly_robust as doubly_robust
from ._offpolicy import doubly_robust_terms as doubly_robust_terms
from ._offpolicy import estimate_with_ci as estimate_with_ci
from ._offpolicy import ips as ips
from ._offpolicy import snips as snips
from ._play import ReplayResult as ReplayResult
from ._play import Trajectory as Trajectory
from ._play import play as play
from ._play import replay as replay
from ._tdge import TDGE as TDGE
from ._tdge import TDGEChoice as TDGEChoice
from ._tdge import TDGEState as TDGEState
from ._tdge import dimension_relevance as dimension_relevance
from ._world import DimensionWorld as DimensionWorld
from ._world import make_dimension_world as make_dimension_world
from ._world import one_hot_items as one_hot_items
