"""HOPSE (P18): message-passing-free higher-order positional and structural encodings.

Lift graphs to simplicial (clique) or cell (cycle) complexes, decompose them into
Hasse graphs per neighbourhood, encode every route once (LapPE, RWSE, HKdiagSE,
ElstaticPE, CycleGE), and learn with per-cell MLPs (`HOPSE`) or, as a baseline,
higher-order message passing (`HOMP`).

Example: `examples/topology.py` (a jupytext notebook; rendered in the docs site).
"""

from ._arrays import ComplexArrays as ComplexArrays
from ._arrays import complex_arrays as complex_arrays
from ._arrays import encoding_stats as encoding_stats
from ._arrays import lift_features as lift_features
from ._arrays import max_sizes as max_sizes
from ._arrays import source_rank as source_rank
from ._arrays import stack_complex_arrays as stack_complex_arrays
from ._arrays import standardize_encodings as standardize_encodings
from ._complex import Complex as Complex
from ._complex import betti_numbers as betti_numbers
from ._complex import chordless_cycles as chordless_cycles
from ._complex import clique_lift as clique_lift
from ._complex import cycle_lift as cycle_lift
from ._data import MolGraph as MolGraph
from ._data import load_freesolv as load_freesolv
from ._data import load_mutag as load_mutag
from ._data import load_zinc_subset as load_zinc_subset
from ._data import penalized_logp as penalized_logp
from ._data import smiles_to_graph as smiles_to_graph
from ._dataset import LiftSpec as LiftSpec
from ._dataset import default_cache_dir as default_cache_dir
from ._dataset import encode_complexes as encode_complexes
from ._dataset import lift_graph as lift_graph
from ._dataset import prepare_dataset as prepare_dataset
from ._encodings import EncodingSpec as EncodingSpec
from ._encodings import complex_encodings as complex_encodings
from ._encodings import cycle_ge as cycle_ge
from ._encodings import elstatic_pe as elstatic_pe
from ._encodings import graph_encodings as graph_encodings
from ._encodings import hkdiag_se as hkdiag_se
from ._encodings import lap_pe as lap_pe
from ._encodings import rwse as rwse
from ._hasse import ROUTES as ROUTES
from ._hasse import hasse_graph as hasse_graph
from ._hasse import rank_routes as rank_routes
from ._hasse import route_edges as route_edges
from ._model import HOMP as HOMP
from ._model import HOPSE as HOPSE
from ._model import ResidualBlock as ResidualBlock
from ._train import LOSSES as LOSSES
from ._train import HopseStep as HopseStep
from ._train import Trainer as Trainer
from ._train import TrainState as TrainState
from ._train import fit as fit
from ._train import predict as predict
