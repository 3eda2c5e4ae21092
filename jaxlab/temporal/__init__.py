"""P3: sparse size-varying temporal networks — model, cycle counts, moments.

Example: `examples/temporal.py` (a jupytext notebook; rendered in the docs site).
"""

from ._cycles import CycleCounts as CycleCounts
from ._cycles import cycle_counts as cycle_counts
from ._gof import BootstrapGofResult as BootstrapGofResult
from ._gof import GofResult as GofResult
from ._gof import bootstrap_gof as bootstrap_gof
from ._gof import monte_carlo_gof as monte_carlo_gof
from ._gof import one_step_counts as one_step_counts
from ._gof import two_sided_pvalues as two_sided_pvalues
from ._model import MAX_STEPS as MAX_STEPS
from ._model import PARAM_NAMES as PARAM_NAMES
from ._model import Capacity as Capacity
from ._model import Snapshot as Snapshot
from ._model import TemporalNetworkParams as TemporalNetworkParams
from ._model import default_capacity as default_capacity
from ._model import simulate as simulate
from ._model import stationary_mean_degree as stationary_mean_degree
from ._model import stationary_mean_size as stationary_mean_size
from ._model import transition as transition
from ._moments import MomentEstimate as MomentEstimate
from ._moments import confidence_intervals as confidence_intervals
from ._moments import estimate_moments as estimate_moments
from ._moments import estimating_functions as estimating_functions
from ._moments import moment_means as moment_means
from ._moments import plugin_covariance as plugin_covariance
from ._moments import sandwich_covariance as sandwich_covariance
from ._snapshots import SOCIOPATTERNS as SOCIOPATTERNS
from ._snapshots import Contacts as Contacts
from ._snapshots import SnapshotData as SnapshotData
from ._snapshots import contacts_to_snapshots as contacts_to_snapshots
from ._snapshots import graphs_to_sequence as graphs_to_sequence
from ._snapshots import read_contacts as read_contacts
from ._snapshots import sequence_to_graphs as sequence_to_graphs
from ._snapshots import sociopatterns_path as sociopatterns_path
from ._stats import TransitionStats as TransitionStats
from ._stats import sequence_transition_stats as sequence_transition_stats
from ._stats import simulate_transitions as simulate_transitions
from ._stats import transition_stats as transition_stats
