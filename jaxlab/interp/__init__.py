"""Probes, sparse autoencoders and steering on model activations (shared by P13 P14 P17).

- Probes: `fit_ridge`, `ridge_gcv`, `ridge_kfold`, `fit_logistic` (`LogisticStep`),
  `probe_sweep` (every layer in one jitted call); metrics `r2_score`, `spearman`,
  `accuracy`, `auroc` with `bootstrap_ci`; grouped splits `group_split`, `group_kfold`.
- Sparse autoencoders: `TopKSAE`, `ReLUSAE`, `BatchTopKSAE`, trained by `SAEStep` through
  `jaxlab.run_steps` (`fit_sae` streams an array or an activation store);
  `TopKPCA` baseline; `sae_metrics`, `density_histogram`, `ce_loss_score` (via `Splice`).
  `fit_sae(normalize_activations=...)` takes SAELens' `"none"` / `"expected_average_only_in"`
  (`norm_scaling_factor`, `fold_scaling_factor`); `save_sae` / `load_sae` read and write
  SAELens' folder format (`cfg.json` + `sae_weights.safetensors`). Activation stores
  (`jaxlab.lm.collect`) leave out the first position (attention sink, `skip_first=True`)
  and special tokens (`exclude_special=True`) by default.
- Steering: `mean_difference`, `steer`, `SteerAt`, `project_out`, `ClampFeatures`,
  `ablate_features`, `dose_response`.
- Inspection: `top_activating_contexts`, `feature_label_association`.

Example: `examples/interp.py` (a jupytext notebook; rendered in the docs site).
"""

from ._baseline import TopKPCA as TopKPCA
from ._fit import NORMALIZE_ACTIVATIONS as NORMALIZE_ACTIVATIONS
from ._fit import fit_sae as fit_sae
from ._fit import fold_scaling_factor as fold_scaling_factor
from ._fit import norm_scaling_factor as norm_scaling_factor
from ._inspect import feature_label_association as feature_label_association
from ._inspect import top_activating_contexts as top_activating_contexts
from ._metrics import density_histogram as density_histogram
from ._metrics import sae_metrics as sae_metrics
from ._probe import LogisticProbe as LogisticProbe
from ._probe import LogisticState as LogisticState
from ._probe import LogisticStep as LogisticStep
from ._probe import RidgeProbe as RidgeProbe
from ._probe import fit_logistic as fit_logistic
from ._probe import fit_ridge as fit_ridge
from ._probe import probe_sweep as probe_sweep
from ._probe import ridge_gcv as ridge_gcv
from ._probe import ridge_kfold as ridge_kfold
from ._sae import AbstractSAE as AbstractSAE
from ._sae import BatchTopKSAE as BatchTopKSAE
from ._sae import ReLUSAE as ReLUSAE
from ._sae import TopKSAE as TopKSAE
from ._sae import normalize_decoder as normalize_decoder
from ._saelens import SAE_CFG_FILENAME as SAE_CFG_FILENAME
from ._saelens import SAE_WEIGHTS_FILENAME as SAE_WEIGHTS_FILENAME
from ._saelens import load_sae as load_sae
from ._saelens import save_sae as save_sae
from ._splice import Splice as Splice
from ._splice import ce_loss_score as ce_loss_score
from ._stats import accuracy as accuracy
from ._stats import auroc as auroc
from ._stats import bootstrap_ci as bootstrap_ci
from ._stats import group_kfold as group_kfold
from ._stats import group_split as group_split
from ._stats import r2_score as r2_score
from ._stats import spearman as spearman
from ._steer import ClampFeatures as ClampFeatures
from ._steer import MeanDifference as MeanDifference
from ._steer import SteerAt as SteerAt
from ._steer import ablate_features as ablate_features
from ._steer import dose_response as dose_response
from ._steer import mean_difference as mean_difference
from ._steer import project_out as project_out
from ._steer import steer as steer
from ._train import SAEState as SAEState
from ._train import SAEStep as SAEStep
