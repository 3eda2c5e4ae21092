"""Hidden states of a completion set and its length targets.

`completion_states` stores, through `jaxlab.lm.collect`, the residual stream at chosen
layers for the last prompt token of every prompt (one row each) and for every content
token of every completion (one row per token), in two resumable activation stores.

Targets. With `L` content tokens, the state at the last prompt token has `L` tokens still
to come (`total_length`); the state at content token j (0-based, the input that predicts
token j + 1) has `L - 1 - j` (`remaining_length`; 0 at the last content token, whose next
token is the stop). Probes regress `log1p` of these (Piotrowski et al. 2025 regress
remaining tokens; the P17 paper log-length).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import lm
from .._core import AbstractProgress, check_ids, check_instance
from ._completions import CompletionSet

__all__ = ["completion_states", "total_length", "remaining_length"]


def completion_states(
    model: lm.Transformer,
    completions: CompletionSet,
    *,
    layers: Sequence[int],
    path: str | os.PathLike,
    site: str = "resid_post",
    dtype: str = "float16",
    progress: AbstractProgress | None = None,
) -> tuple[lm.ActivationStore, lm.ActivationStore]:
    """Collect the states of the prompt-last position and of every content token.

    **Arguments:**

    - `model`: the `Transformer` that generated `completions`.
    - `completions`: a `CompletionSet`.
    - `layers`: layer indices to store (each becomes a column; integers in
      [0, n_layers), never wrapped).
    - `path`: folder of the two stores (`prompt_last/`, `generated/`; resumable).
    - `site`: activation site among `jaxlab.lm.SITES` (default the residual stream).
    - `dtype`: on-disk dtype, "float16" (default) or "float32".
    - `progress`: a progress strategy over shards.

    **Returns:** (prompt-last store with N rows, generated store with one row per content
    token; its `text_index` is the completion's row and `positions` the token's position
    in prompt + completion).
    """
    if not isinstance(completions, CompletionSet):
        raise ValueError(
            f"completions: expected a CompletionSet, received {type(completions).__name__}"
        )
    if len(completions) == 0:
        raise ValueError("completions: expected a non-empty completion set, received 0 rows")
    if not isinstance(model, lm.Transformer):
        raise ValueError(
            f"model: expected a jaxlab.lm.Transformer, received {type(model).__name__}"
        )
    layer_ids = check_ids("layers", layers, model.config.n_layers, what="layer indices")
    if layer_ids.ndim != 1 or not layer_ids.size:
        raise ValueError(f"layers: expected a non-empty 1-D index list, received {layers!r:.60}")
    layers = layer_ids.tolist()
    folder = Path(path)
    common: dict[str, Any] = dict(
        sites=(site,), layers=tuple(layers), dtype=dtype, progress=progress
    )
    last = lm.collect(
        model,
        None,
        [list(p) for p in completions.prompts],
        path=folder / "prompt_last",
        positions="last_prompt",
        **common,
    )
    gen = lm.collect(
        model,
        None,
        [
            (list(p), list(c))
            for p, c in zip(completions.prompts, completions.completions, strict=True)
        ],
        path=folder / "generated",
        positions="generated",
        **common,
    )
    return last, gen


def total_length(completions: CompletionSet) -> np.ndarray:
    """Content tokens of every completion, the target of the prompt-last state.

    **Arguments:** `completions` a `CompletionSet` (anything else raises a `ValueError`
    naming it).

    **Returns:** (N,) int64.
    """
    check_instance("completions", completions, CompletionSet)
    return completions.lengths


def remaining_length(
    completions: CompletionSet, text_index: np.ndarray, positions: np.ndarray
) -> np.ndarray:
    """Tokens still to come after each content token of a generated-state store.

    **Arguments:** `completions`; `text_index` (n,) completion row of each state (integers
    in [0, N)); `positions` (n,) the state's position in prompt + completion (integers
    inside the row's completion; as `ActivationStore.text_index` / `.positions` of the
    generated store). Anything else raises a `ValueError` naming the argument.

    **Returns:** (n,) int64 `L - 1 - j` with j the position inside the completion.
    """
    if not isinstance(completions, CompletionSet):
        raise ValueError(
            f"completions: expected a CompletionSet, received {type(completions).__name__}"
        )
    ti = check_ids("text_index", text_index, len(completions), what="completion rows")
    pos = check_ids("positions", positions, None, what="positions")
    if ti.ndim != 1:
        raise ValueError(f"text_index: expected a 1-D array, received shape {ti.shape}")
    if ti.shape != pos.shape:
        raise ValueError(
            f"positions: expected the shape of text_index {ti.shape}, received {pos.shape}"
        )
    j = pos - completions.prompt_lengths[ti]
    lengths = completions.lengths[ti]
    if ti.size and (j.min() < 0 or np.any(j >= lengths)):
        raise ValueError("positions: expected positions inside each row's completion")
    return lengths - 1 - j
