"""P5 cells: LeCellModel — JEPA with SIGReg on single-cell expression.

AnnData in, AnnData out (`fit`), the SIGReg regulariser, JEPA-SCORE per cell and
its gene attribution, an scVI-like negative-binomial VAE baseline, kNN density,
the real PBMC data shipped in scanpy's wheel, and a documented count simulator
with planted cell types, batches and a rare stimulated state.

Example: `examples/cells.py` (a jupytext notebook; rendered in the docs site).
"""

from ._data import INTERFERON_PROGRAM as INTERFERON_PROGRAM
from ._data import counts_matrix as counts_matrix
from ._data import load_pbmc68k as load_pbmc68k
from ._data import log_normalize as log_normalize
from ._data import simulate_batches as simulate_batches
from ._data import spike_program as spike_program
from ._density import knn_atypicality as knn_atypicality
from ._fit import LeCellStep as LeCellStep
from ._fit import annotate as annotate
from ._fit import batch_offsets as batch_offsets
from ._fit import fit as fit
from ._fit import train_lecell as train_lecell
from ._likelihood import simulated_log_likelihood as simulated_log_likelihood
from ._model import LeCellModel as LeCellModel
from ._model import augment as augment
from ._model import jepa_loss as jepa_loss
from ._score import Encoder as Encoder
from ._score import gene_attribution as gene_attribution
from ._score import jepa_score as jepa_score
from ._score import jepa_score_sketched as jepa_score_sketched
from ._sigreg import epps_pulley as epps_pulley
from ._sigreg import epps_pulley_null_mean as epps_pulley_null_mean
from ._sigreg import sigreg as sigreg
from ._simulate import simulate_counts as simulate_counts
from ._vae import NBVAE as NBVAE
from ._vae import NBVAEStep as NBVAEStep
from ._vae import nb_log_likelihood as nb_log_likelihood
from ._vae import train_nbvae as train_nbvae
