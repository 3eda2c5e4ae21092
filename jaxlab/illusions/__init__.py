"""Illusory pattern perception in small LLMs against human baselines (P14).

- Illusory correlation (Hamilton & Gifford 1976): `make_stimuli` (18/8 vs 9/4 statements
  from templates, randomised by `key`; `VARIANTS` name the groups), `contingency_table`,
  `correlation_queries` / `read_correlation` (attribution phi, frequency estimates,
  trait ratings from option likelihoods; rating scales up to `MAX_SCALE`).
- Statistics: `phi_coefficient`, `attribution_table`, `attribution_phi`,
  `option_probabilities`, `expected_answer`, `frequency_bias`, `mean_ci`.
- Randomness: `random_sequence`, `periodic_sequence`, `final_run_length`,
  `render_sequence`, `randomness_queries`, `streak_slope` (gambler's fallacy vs hot hand).
- Causal narratives: `causal_pairs`, `causal_query`, `FRAMINGS`, `CAUSAL_PAIRS`,
  `read_corr2cause` (the `evals` wheel's Corr2Cause items).
- Scoring many questions about one context with `jaxlab.lm.score`: `Query`,
  `layout_queries`, `query_logliks`.
- SAE analysis: `option_logprobs` (single-token choice under `intervene=`), `ablation`
  (`interp.ablate_features` at one layer; no latents = plain forward), `matched_latents`
  (random and frequency-matched control latents).
- Framing: `INSTRUCTIONS` (none / analytic / holistic instruction paragraphs),
  `framed_context`, `framing_feature_shift` (latents whose mean activation moves most
  between two framings of the same prompts: family-wise sign-flip p-values, bootstrap
  intervals), `latent_overlap` (overlap of two latent sets vs a hypergeometric null).
- `HUMAN_BASELINES`: the human numbers used, each with its source.

Example: `examples/illusions.py` (a jupytext notebook; rendered in the docs site).
"""

from ._ablation import ablation as ablation
from ._ablation import matched_latents as matched_latents
from ._ablation import option_logprobs as option_logprobs
from ._baselines import HUMAN_BASELINES as HUMAN_BASELINES
from ._baselines import HumanBaseline as HumanBaseline
from ._baselines import human_baseline as human_baseline
from ._causal import CAUSAL_PAIRS as CAUSAL_PAIRS
from ._causal import FRAMINGS as FRAMINGS
from ._causal import Corr2CauseItem as Corr2CauseItem
from ._causal import causal_pairs as causal_pairs
from ._causal import causal_query as causal_query
from ._causal import read_corr2cause as read_corr2cause
from ._correlation import MAX_SCALE as MAX_SCALE
from ._correlation import TRAITS as TRAITS
from ._correlation import correlation_queries as correlation_queries
from ._correlation import read_correlation as read_correlation
from ._design import DESIRABLE as DESIRABLE
from ._design import UNDESIRABLE as UNDESIRABLE
from ._design import VARIANTS as VARIANTS
from ._design import Stimuli as Stimuli
from ._design import Variant as Variant
from ._design import contingency_table as contingency_table
from ._design import make_stimuli as make_stimuli
from ._framing import INSTRUCTIONS as INSTRUCTIONS
from ._framing import framed_context as framed_context
from ._framing import framing_feature_shift as framing_feature_shift
from ._framing import latent_overlap as latent_overlap
from ._query import Layout as Layout
from ._query import Query as Query
from ._query import layout_queries as layout_queries
from ._query import query_logliks as query_logliks
from ._randomness import KINDS as KINDS
from ._randomness import MAX_SEQUENCE_LENGTH as MAX_SEQUENCE_LENGTH
from ._randomness import final_run_length as final_run_length
from ._randomness import periodic_sequence as periodic_sequence
from ._randomness import random_sequence as random_sequence
from ._randomness import randomness_queries as randomness_queries
from ._randomness import render_sequence as render_sequence
from ._randomness import streak_slope as streak_slope
from ._stats import attribution_phi as attribution_phi
from ._stats import attribution_table as attribution_table
from ._stats import expected_answer as expected_answer
from ._stats import frequency_bias as frequency_bias
from ._stats import mean_ci as mean_ci
from ._stats import option_probabilities as option_probabilities
from ._stats import phi_coefficient as phi_coefficient
