"""P17: is the remaining output length linearly decodable from hidden states?

- Completion families as data (`FAMILIES`, `make_prompts`): synthetic ones with lengths
  known by construction (count a..b, list N items, repeat a word k times, chain sums) and
  natural ones from the `evals` wheel (LogiQA with explanations, math word problems,
  claim summaries, summaries and fact lists of real paragraphs).
- `generate_completions` -> `CompletionSet`: greedy `lm.generate` in cached, resumable
  batches, with the reason each completion stopped (`stop_reason`, `STOP_REASONS`).
- `completion_states`: residual states of the prompt-last position and of every generated
  token (two `lm.collect` stores); targets `total_length`, `remaining_length`.
- Probes `cross_fit` (ridge over layers, out-of-fold), `transfer_matrix`,
  `directional_transfer`; baselines `family_mean`, `prompt_length_fit`, `bag_of_words`,
  `position_only`; metrics `length_metrics` (MAE, normalised MAE, log R^2, Spearman with
  bootstrap CIs over prompts).
- `find_retractions`: token positions of retraction events ("Wait", "Actually", a repeated
  line); forced events (claim 3): `cut_point`, `insert_phrase` (a retraction phrase or a
  `same_length_filler` inserted into the model's own partial solution) and `estimate_jump`
  (the remaining-length estimate after minus before, in tokens).

Example: `examples/lengthprobe.py` (a jupytext notebook; rendered in the docs site).
"""

from ._baselines import bag_of_words as bag_of_words
from ._baselines import bow_features as bow_features
from ._baselines import family_mean as family_mean
from ._baselines import position_only as position_only
from ._baselines import prompt_length_fit as prompt_length_fit
from ._completions import STOP_REASONS as STOP_REASONS
from ._completions import CompletionSet as CompletionSet
from ._completions import encode_prompt as encode_prompt
from ._completions import generate_completions as generate_completions
from ._completions import stop_reason as stop_reason
from ._families import FAMILIES as FAMILIES
from ._families import NATURAL as NATURAL
from ._families import SYNTHETIC as SYNTHETIC
from ._families import CompletionPrompt as CompletionPrompt
from ._families import Family as Family
from ._families import make_prompts as make_prompts
from ._families import reference_length as reference_length
from ._metrics import length_metrics as length_metrics
from ._metrics import log_r2 as log_r2
from ._metrics import mae as mae
from ._metrics import normalised_mae as normalised_mae
from ._probe import cross_fit as cross_fit
from ._probe import directional_transfer as directional_transfer
from ._probe import transfer_matrix as transfer_matrix
from ._retraction import RETRACTION_PHRASES as RETRACTION_PHRASES
from ._retraction import cut_point as cut_point
from ._retraction import estimate_jump as estimate_jump
from ._retraction import find_retractions as find_retractions
from ._retraction import insert_phrase as insert_phrase
from ._retraction import same_length_filler as same_length_filler
from ._states import completion_states as completion_states
from ._states import remaining_length as remaining_length
from ._states import total_length as total_length
