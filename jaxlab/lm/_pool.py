"""`Pool`: several models (registry names, or local GGUF files / Hugging Face folders),
loaded lazily, iterated by the LM experiments."""

from __future__ import annotations

import collections
from collections.abc import Iterator, Sequence
from pathlib import Path

import jax.numpy as jnp

from ._describe import describe
from ._hf import is_hf_folder
from ._load import load
from ._model import Transformer
from ._registry import MODELS, ModelInfo, canonical_name
from ._tokenizer import Tokenizer

__all__ = ["Pool"]


class Pool:
    """A set of models, loaded on first use; at most `max_loaded` in memory.

    Iterating yields `(info, model, tokenizer)` per model in order; with the default
    `max_loaded=1` the previous model is released before the next one loads (so a
    pool of four fits in the memory of its largest member, as long as the caller
    does not keep references).

    **Arguments:**

    - `names`: registry names or aliases (default: every model in `MODELS`), or paths of
      a `.gguf` file or a local Hugging Face folder (their `ModelInfo` is made from
      `describe`: the file's architecture, parameter count and context length, with
      `dataset` "" and quantisation "file").
    - `dtype`: model dtype passed to `load` (float32, or bfloat16: parameters and compute).
    - `max_loaded`: how many loaded models to keep (least recently used dropped).
    """

    def __init__(
        self, names: Sequence[str] | None = None, *, dtype=jnp.float32, max_loaded: int = 1
    ):
        names = list(MODELS) if names is None else list(names)
        if not names:
            raise ValueError("names must list at least one model")
        resolved = []
        for n in names:
            key = canonical_name(n) if isinstance(n, str) else None
            if key is None and _is_model_file(n):
                key = str(n)
            if key is None:
                raise ValueError(
                    f"names: unknown model {n!r}; expected one of {sorted(MODELS)}, a .gguf "
                    "file or a Hugging Face folder"
                )
            resolved.append(key)
        if len(set(resolved)) != len(resolved):
            raise ValueError(f"names must not repeat a model, got {names}")
        if not isinstance(max_loaded, int) or max_loaded < 1:
            raise ValueError(f"max_loaded must be a positive int, got {max_loaded!r}")
        self.names: tuple[str, ...] = tuple(resolved)
        self.dtype = dtype
        self.max_loaded = max_loaded
        self._loaded: collections.OrderedDict[str, tuple[Transformer, Tokenizer]] = (
            collections.OrderedDict()
        )
        self._files: dict[str, ModelInfo] = {}

    def __len__(self) -> int:
        return len(self.names)

    def info(self, name: str) -> ModelInfo:
        """The `ModelInfo` of a member."""
        key = canonical_name(name) or str(name)
        if key not in self.names:
            raise ValueError(f"name: {name!r} is not in this pool {self.names}")
        if key in MODELS:
            return MODELS[key]
        if key not in self._files:
            card = describe(key)
            self._files[key] = ModelInfo(
                name=key,
                family=card.config.arch,
                n_params=card.n_params,
                context_length=card.config.context_length,
                chat_format="chatml" if card.tokenizer.chat_template else None,
                quantisation="file",
                dataset="",
                license="as the file's",
                upstream=key,
            )
        return self._files[key]

    def __getitem__(self, name: str) -> tuple[Transformer, Tokenizer]:
        """(model, tokenizer) of a member, loading it (and evicting the oldest) if needed."""
        key = self.info(name).name
        if key in self._loaded:
            self._loaded.move_to_end(key)
            return self._loaded[key]
        while len(self._loaded) >= self.max_loaded:
            self._loaded.popitem(last=False)
        self._loaded[key] = load(key, dtype=self.dtype, mesh="auto")
        return self._loaded[key]

    def __iter__(self) -> Iterator[tuple[ModelInfo, Transformer, Tokenizer]]:
        for name in self.names:
            model, tok = self[name]
            yield self.info(name), model, tok

    def release(self) -> None:
        """Drop every loaded model."""
        self._loaded.clear()


def _is_model_file(name) -> bool:
    try:
        p = Path(name)
    except TypeError:
        return False
    return is_hf_folder(p) or (p.suffix == ".gguf" and p.is_file())
