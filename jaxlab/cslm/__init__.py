"""P7 cslm: token complexity, the generate-solve-verify triad and reliability laws, measured.

"Computer Science of Language Models" (position paper, P7) proposes token complexity as
the core quantity of LM computation. This component makes its concepts measurable:

- sized task families with programmatic verifiers (`FAMILIES`, `make_task`, `verify`,
  `extract_answer`);
- accuracy(n, B) from one generation per item: truncate the reasoning at budgets B and
  force an answer (`truncated_reasoning`, `forced_answer_prompts`, `budget_scores`);
- token complexity B*(n, p) with bootstrap intervals (`min_budget`, `min_budget_ci`) and
  growth-class fits by weighted least squares with AIC (`fit_growth`);
- generate-solve-verify: best-of-k with a verifier, majority vote, single sample, accuracy
  at equal tokens, verifier precision/recall (`best_of_k`, `majority_vote`, ...);
- reliability: per-step error from accuracy ~ (1 - epsilon)^steps (`fit_step_error`) and
  calibration of option-likelihood confidence (`expected_calibration_error`).

Example: `examples/cslm.py` (a jupytext notebook; rendered in the docs site).
"""

from ._answers import Answer as Answer
from ._answers import extract_answer as extract_answer
from ._answers import format_answer as format_answer
from ._budget import ANSWER_CUE as ANSWER_CUE
from ._budget import answer_continuation as answer_continuation
from ._budget import budget_accuracy as budget_accuracy
from ._budget import budget_scores as budget_scores
from ._budget import check_budgets as check_budgets
from ._budget import forced_answer_prompts as forced_answer_prompts
from ._budget import generate_reasoning as generate_reasoning
from ._budget import prompt_ids as prompt_ids
from ._budget import truncated_reasoning as truncated_reasoning
from ._complexity import GROWTH_CLASSES as GROWTH_CLASSES
from ._complexity import BudgetEstimate as BudgetEstimate
from ._complexity import GrowthFit as GrowthFit
from ._complexity import fit_growth as fit_growth
from ._complexity import min_budget as min_budget
from ._complexity import min_budget_ci as min_budget_ci
from ._reliability import StepErrorFit as StepErrorFit
from ._reliability import expected_calibration_error as expected_calibration_error
from ._reliability import fit_step_error as fit_step_error
from ._reliability import option_confidence as option_confidence
from ._tasks import FAMILIES as FAMILIES
from ._tasks import Family as Family
from ._tasks import Task as Task
from ._tasks import make_task as make_task
from ._tasks import make_tasks as make_tasks
from ._tasks import perturbed_answers as perturbed_answers
from ._tasks import verify as verify
from ._triad import VERIFIER_OPTIONS as VERIFIER_OPTIONS
from ._triad import accuracy_at_tokens as accuracy_at_tokens
from ._triad import answer_ids as answer_ids
from ._triad import best_of_k as best_of_k
from ._triad import majority_vote as majority_vote
from ._triad import verification_prompt as verification_prompt
from ._triad import verifier_precision_recall as verifier_precision_recall
