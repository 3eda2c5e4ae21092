"""`to_str_tokens`: one string per token, as TransformerLens' `model.to_str_tokens`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jaxlab._core import check_ids

from ._tokenizer import Tokenizer

__all__ = ["to_str_tokens"]


def to_str_tokens(
    tokenizer: Tokenizer,
    text_or_tokens: str | Sequence[int] | np.ndarray,
    *,
    prepend_bos: bool | None = None,
) -> list[str]:
    """The text of each token, one string per position (TransformerLens' `to_str_tokens`).

    **Arguments:**

    - `tokenizer`: the model's `Tokenizer`.
    - `text_or_tokens`: a string (encoded first) or 1-D token ids, each in
      [0, vocab_size) (an out-of-range id is refused naming `text_or_tokens`).
    - `prepend_bos`: for a string, prepend BOS (default: the tokenizer's setting, as
      `Tokenizer.encode`); ignored for token ids, which are shown as given.

    **Returns:** a list of strings, one per token, special tokens included as their text
    (e.g. `"<|im_start|>"`). A token that is part of a multi-byte character decodes to
    U+FFFD on its own, as in TransformerLens.
    """
    if not isinstance(tokenizer, Tokenizer):
        raise ValueError(
            f"tokenizer: expected a jaxlab.lm.Tokenizer, got {type(tokenizer).__name__}"
        )
    if isinstance(text_or_tokens, str):
        ids = tokenizer.encode(text_or_tokens, add_bos=prepend_bos)
    else:
        arr = np.asarray(text_or_tokens)
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise ValueError(
                "text_or_tokens: expected a string or 1-D integer token ids, received "
                f"{arr.dtype}{arr.shape}"
            )
        ids = check_ids("text_or_tokens", arr, tokenizer.vocab_size, what="token ids").tolist()
    return [tokenizer.decode([t], skip_special_tokens=False) for t in ids]
