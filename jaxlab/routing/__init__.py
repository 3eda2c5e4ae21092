"""Routing (P6 LatentRouter, P19 HAPS): tables, metrics, routers.

- `RoutingTable`: queries x candidates outcomes (quality, cost, tokens, latency, features,
  task group), saved as .npz + JSON; `from_routerbench` / `from_vl_routerbench` read those
  benchmarks' layouts; `hashed_bow` query features.
- Metrics: `cost_quality_hull`, `aiq` (jaxlab's normalisation by default,
  `cost_range="routerbench"` for RouterBench's released `calc_AIQ`), `zero_router_curve`
  (RouterBench), `pgr`, `apgr`,
  `call_performance_threshold` (RouteLLM), `rank_score` (VL-RouterBench),
  `accuracy_at_cost`, `routed_outcome`, `oracle_choice`.
- Routers behind `AbstractRouter` (`predict_quality`, `predict_utilities`, `route`):
  `FixedRouter`, `KNNRouter`, `MLPRouter`, `MatrixFactorisationRouter`, `EmbedLLMRouter`,
  `LatentRouter`;
  `threshold_route` (cost-aware thresholding) and `calibrate_threshold` (RouteLLM: the
  threshold that sends a chosen share of held-out queries to the strong model);
  `QualityFitStep` / `fit_router` train them
  through `jaxlab.run_steps`; `select_router` picks a router's settings (and
  stopping point) by validation AIQ (`router_aiq`) on a split of its training table ->
  `RouterSelection`.
- Our own multimodal pool (P6, on the `easy-vqa` wheel): `load_easy_vqa` -> `VQAData`
  (`QUESTION_TYPES`); pool members `VQAModel` that see an image through a `VQAView`
  (resolution, colour/grey, centre crop, or blind), trained by `VQAFitStep` / `fit_vqa`,
  answered with `vqa_predict`, costed by `vqa_flops`; router image features from an
  `ImageEncoder` (convolutional autoencoder; `ImageEncoderFitStep`, `fit_image_encoder`,
  `encode_images`).
- P19 HAPS: `HAPS` (router over architectures + shared trunk + per-architecture
  `LoRAGenerator` heads emitting input-conditioned `jaxlab.lm.LoRA`), trained by `HAPSStep` /
  `fit_haps` (reward-augmented objective, `reinforce_surrogate`), `haps_predict`; the
  frozen prefix of a query cached as `AdaptedInputs` (`adapted_inputs`,
  `adapted_option_logits`); `pad_lora` extends a top-block adapter to the whole model.

Example: `examples/routing.py` (a jupytext notebook; rendered in the docs site).
"""

from ._adapted import AdaptedInputs as AdaptedInputs
from ._adapted import adapted_inputs as adapted_inputs
from ._adapted import adapted_option_logits as adapted_option_logits
from ._baselines import EmbedLLMRouter as EmbedLLMRouter
from ._baselines import FixedRouter as FixedRouter
from ._baselines import KNNRouter as KNNRouter
from ._baselines import MatrixFactorisationRouter as MatrixFactorisationRouter
from ._baselines import MLPRouter as MLPRouter
from ._calibrate import calibrate_threshold as calibrate_threshold
from ._features import hashed_bow as hashed_bow
from ._haps import HAPS as HAPS
from ._haps_train import HAPSStep as HAPSStep
from ._haps_train import fit_haps as fit_haps
from ._haps_train import haps_predict as haps_predict
from ._hypernet import LoRAGenerator as LoRAGenerator
from ._hypernet import pad_lora as pad_lora
from ._latent import LatentRouter as LatentRouter
from ._loaders import from_routerbench as from_routerbench
from ._loaders import from_vl_routerbench as from_vl_routerbench
from ._metrics import RoutedOutcome as RoutedOutcome
from ._metrics import accuracy_at_cost as accuracy_at_cost
from ._metrics import aiq as aiq
from ._metrics import apgr as apgr
from ._metrics import call_performance_threshold as call_performance_threshold
from ._metrics import cost_quality_hull as cost_quality_hull
from ._metrics import oracle_choice as oracle_choice
from ._metrics import pgr as pgr
from ._metrics import rank_score as rank_score
from ._metrics import routed_outcome as routed_outcome
from ._metrics import zero_router_curve as zero_router_curve
from ._reinforce import reinforce_surrogate as reinforce_surrogate
from ._router import AbstractRouter as AbstractRouter
from ._router import route as route
from ._router import threshold_route as threshold_route
from ._select import RouterSelection as RouterSelection
from ._select import router_aiq as router_aiq
from ._select import select_router as select_router
from ._table import RoutingTable as RoutingTable
from ._train import QualityFitStep as QualityFitStep
from ._train import fit_router as fit_router
from ._vqa import VQAFitStep as VQAFitStep
from ._vqa import VQAModel as VQAModel
from ._vqa import VQAView as VQAView
from ._vqa import fit_vqa as fit_vqa
from ._vqa import vqa_flops as vqa_flops
from ._vqa import vqa_predict as vqa_predict
from ._vqa_data import QUESTION_TYPES as QUESTION_TYPES
from ._vqa_data import VQAData as VQAData
from ._vqa_data import load_easy_vqa as load_easy_vqa
from ._vqa_encoder import ImageEncoder as ImageEncoder
from ._vqa_encoder import ImageEncoderFitStep as ImageEncoderFitStep
from ._vqa_encoder import encode_images as encode_images
from ._vqa_encoder import fit_image_encoder as fit_image_encoder
