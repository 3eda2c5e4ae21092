"""HOT-3 belief dominance in small LLMs (P13): belief directions, a dominance metric over
generation, causal steering and self-report under conflict.

- Tasks: `make_scenarios` (which box / door / suspect, k_A and k_B in 0..4 evidence
  sentences, balanced over the cells), `make_factual` (a misleading context against the
  model's prior), `read_tomi` / `read_hitom` (the `evals` wheel's false-belief stories),
  all as `BeliefItem`s with options, evidence balance and answer; `evidence_counts`.
- Belief representations: `fit_directions` (difference of means or a logistic probe per
  layer, training items only) -> `BeliefDirections`; `belief_state` (projection).
- `generation_states`: residual states at the last prompt token and each generated token.
- Dominance over a generated sequence: `dominance` -> `Dominance` (signed margin per
  position, its mean, final value and the fraction of positions dominated).
- Causal tests: `option_logprobs` (single-token options under steering / ablation of the
  last prompt token, one KV-cached prefix per prompt), `dose_slope`.
- Self-report: `expected_rating` (verbal scale by option likelihood),
  `partial_correlation`.

Example: `examples/beliefs.py` (a jupytext notebook; rendered in the docs site).
"""

from ._directions import BeliefDirections as BeliefDirections
from ._directions import belief_state as belief_state
from ._directions import fit_directions as fit_directions
from ._dominance import Dominance as Dominance
from ._dominance import dominance as dominance
from ._monitoring import expected_rating as expected_rating
from ._monitoring import partial_correlation as partial_correlation
from ._states import generation_states as generation_states
from ._steering import MODES as MODES
from ._steering import dose_slope as dose_slope
from ._steering import option_logprobs as option_logprobs
from ._tasks import SCENARIOS as SCENARIOS
from ._tasks import BeliefItem as BeliefItem
from ._tasks import evidence_counts as evidence_counts
from ._tasks import make_factual as make_factual
from ._tasks import make_scenarios as make_scenarios
from ._tom import read_hitom as read_hitom
from ._tom import read_tomi as read_tomi
