"""Activation stores: chosen sites/layers of many texts, written to memory-mapped shards.

`collect` runs the model over texts (or token lists, or prompt/completion pairs)
and writes the activations of the requested (site, layer) pairs, at the requested
positions, to `.npy` shards in one folder, with a JSON manifest that records the
model's identity (config and a hash of its weights), the request, the hash of every
source item, and the completed shards (with their files' SHA-256). Only one
site of one layer is the common case: nothing else is kept, in memory or on disk.

Resuming. The shard plan (which items go to which shard, and in which batches) is
fixed from the token counts before anything runs, so every shard is computed from
the same padded batches whether or not the run was interrupted. Each shard file is
written atomically (temp file + rename) and a shard counts only once the manifest
lists it; a kill at any point therefore loses at most the shard in progress, and a
resumed run writes the same shard files as an uninterrupted one.

`ActivationStore` opens a finished store by path, validates the manifest and the
shard files against it (names confined to the folder, shapes and dtypes from the
`.npy` headers, optionally SHA-256), and reads it back memory-mapped or as a
shuffled stream of batches for training probes and sparse autoencoders.

Background: the TransformerLens-style "cache everything" run that this avoids
(Nanda & Bloom 2022); activation stores as in SAELens (Bloom et al. 2024).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._core import (
    AbstractProgress,
    NoProgress,
    atomic_write,
    check_positive_int,
    write_json,
)

from ._forward import positions_from_mask
from ._generate import prompt_bucket
from ._model import SITES, KVCache, Transformer

__all__ = ["collect", "ActivationStore", "POSITIONS"]

#: which token positions of each item `collect` keeps.
POSITIONS = ("all", "last_prompt", "generated")
"""Which token positions of each item `collect` keeps: every position, the last prompt token,
or the generated tokens."""

_FORMAT = "jaxlab.lm.activations/1"
_MANIFEST = "manifest.json"
_DTYPES = ("float32", "float16")
_SHARD_RE = re.compile(r"^shard_\d{5}\.[A-Za-z0-9_.]+\.npy$")


def _sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def model_fingerprint(model: Transformer) -> str:
    """SHA-256 over the model's static config and every array leaf (dtype, shape, bytes)."""
    h = hashlib.sha256(repr(model.config).encode())
    for leaf in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array)):
        a = np.ascontiguousarray(np.asarray(leaf))
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.view(np.uint8).reshape(-1).data if a.size else b"")
    return h.hexdigest()


def _items(texts_or_tokens, tokenizer, vocab_size):
    """Normalise the inputs to (tokens, prompt_length, source hash) per item."""
    if isinstance(texts_or_tokens, str | bytes) or not isinstance(texts_or_tokens, Sequence):
        raise ValueError(
            "texts_or_tokens must be a list of strings, token lists or "
            f"(prompt, completion) pairs, got {type(texts_or_tokens).__name__}"
        )
    if len(texts_or_tokens) == 0:
        raise ValueError("texts_or_tokens must not be empty")

    def encode(part, first):
        if isinstance(part, str):
            if tokenizer is None:
                raise ValueError("tokenizer is required when texts_or_tokens holds strings")
            return tokenizer.encode(part) if first else tokenizer.encode(part, add_bos=False)
        arr = np.asarray(part)
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise ValueError(
                f"texts_or_tokens: a token list must be 1-D integers, got {arr.dtype}{arr.shape}"
            )
        return [int(t) for t in arr]

    out = []
    for i, item in enumerate(texts_or_tokens):
        if isinstance(item, tuple):
            if len(item) != 2:
                raise ValueError(
                    f"texts_or_tokens[{i}]: a pair must be (prompt, completion), "
                    f"got a tuple of {len(item)}"
                )
            prompt, completion = encode(item[0], True), encode(item[1], False)
            toks, n_prompt = prompt + completion, len(prompt)
            if n_prompt == 0:
                raise ValueError(f"texts_or_tokens[{i}]: the prompt must not be empty")
        else:
            toks = encode(item, True)
            n_prompt = len(toks)
        if not toks:
            raise ValueError(f"texts_or_tokens[{i}] is empty (no tokens)")
        bad = [t for t in toks if not 0 <= t < vocab_size]
        if bad:
            raise ValueError(
                f"texts_or_tokens[{i}]: token ids must lie in [0, {vocab_size}), got {bad[:5]}"
            )
        src = json.dumps([item if isinstance(item, str) else None, toks, n_prompt]).encode()
        out.append((toks, n_prompt, _sha256_bytes(src)))
    return out


def _kept_positions(
    tokens: Sequence[int],
    n_prompt: int,
    positions: str,
    skip_first: bool = False,
    excluded: frozenset[int] = frozenset(),
) -> np.ndarray:
    n_tokens = len(tokens)
    if positions == "last_prompt":  # one chosen position per item: never filtered
        return np.asarray([n_prompt - 1])
    keep = np.arange(0 if positions == "all" else n_prompt, n_tokens)
    if skip_first:
        keep = keep[keep > 0]
    if excluded:
        toks = np.asarray(tokens)
        keep = keep[~np.isin(toks[keep], np.fromiter(excluded, np.int64))]
    return keep


def _plan(items, positions, shard_rows, batch_tokens, skip_first, excluded):
    """Deterministic shards (item ranges) and, inside each, batches of item indices."""
    shards, start, rows = [], 0, 0
    for i, (toks, n_prompt, _) in enumerate(items):
        rows += len(_kept_positions(toks, n_prompt, positions, skip_first, excluded))
        if rows >= shard_rows or i == len(items) - 1:
            shards.append((start, i + 1))
            start, rows = i + 1, 0
    plan = []
    for a, b in shards:
        order = sorted(range(a, b), key=lambda j: (prompt_bucket(len(items[j][0])), j))
        batches, cur, cur_len = [], [], 0
        for j in order:
            length = prompt_bucket(len(items[j][0]))
            if cur and (length != cur_len or (len(cur) + 1) * length > batch_tokens):
                batches.append(cur)
                cur = []
            cur, cur_len = [*cur, j], length
        batches.append(cur)
        plan.append({"items": [a, b], "batches": batches})
    return plan


@eqx.filter_jit
def _activations_jit(model, tokens, mask, capture, layers):
    def one(tok, m):
        cache = KVCache.empty(model.config, tok.shape[0], model.dtype)
        pos = positions_from_mask(m)
        _, acts, _ = model.run(tok, pos, cache, capture=capture, capture_layers=tuple(layers))
        return acts

    return jax.vmap(one)(tokens, mask)


def _column(site: str, layer: int) -> str:
    return f"{site}.L{layer}"


def _shard_files(k: int, columns: Sequence[str]) -> dict[str, str]:
    names = {c: f"shard_{k:05d}.{c}.npy" for c in columns}
    for meta in ("text_index", "position", "token"):
        names[meta] = f"shard_{k:05d}.{meta}.npy"
    return names


def _save_npy(path: Path, arr: np.ndarray) -> None:
    with atomic_write(path, "wb") as f:
        np.save(f, arr, allow_pickle=False)


def _compute_shard(
    model, items, shard, columns, sites, layers, positions, dtype, skip_first, excluded
):
    a, b = shard["items"]
    per_item: dict[int, dict[str, np.ndarray]] = {}
    for batch in shard["batches"]:
        length = prompt_bucket(max(len(items[j][0]) for j in batch))
        # rows padded to a power of two (empty rows are fully masked): few compiles
        n_rows = 1 << max(0, len(batch) - 1).bit_length()
        toks = np.zeros((n_rows, length), np.int32)
        mask = np.zeros((n_rows, length), np.int32)
        for r, j in enumerate(batch):
            t = items[j][0]
            toks[r, length - len(t) :] = t
            mask[r, length - len(t) :] = 1
        acts = _activations_jit(model, jnp.asarray(toks), jnp.asarray(mask), sites, layers)
        acts = {s: np.asarray(v) for s, v in acts.items()}
        for r, j in enumerate(batch):
            t, n_prompt, _ = items[j]
            keep = _kept_positions(t, n_prompt, positions, skip_first, excluded)
            cols = length - len(t) + keep
            rec = {
                _column(s, layer): acts[s][r, li, cols].astype(dtype)
                for s in sites
                for li, layer in enumerate(layers)
            }
            rec["text_index"] = np.full(len(keep), j, np.int64)
            rec["position"] = keep.astype(np.int32)
            rec["token"] = np.asarray(t, np.int32)[keep]
            per_item[j] = rec
    d = model.config.d_model
    out = {}
    for name in [*columns, "text_index", "position", "token"]:
        parts = [per_item[j][name] for j in range(a, b)]
        if name in columns:
            out[name] = np.concatenate(parts) if parts else np.zeros((0, d), dtype)
        else:
            out[name] = np.concatenate(parts)
    return out


def _excluded_ids(exclude_special, tokenizer, vocab_size) -> frozenset[int]:
    """The token ids whose rows `collect` leaves out."""
    if exclude_special is False or exclude_special is None:
        return frozenset()
    if exclude_special is True:
        return (
            frozenset(getattr(tokenizer, "special_ids", ()))
            if tokenizer is not None
            else frozenset()
        )
    if isinstance(exclude_special, str | bytes) or not isinstance(exclude_special, Sequence):
        raise ValueError(
            "exclude_special must be True, False or a sequence of token ids, got "
            f"{type(exclude_special).__name__}"
        )
    ids = list(exclude_special)
    if any(not isinstance(i, int | np.integer) or not 0 <= i < vocab_size for i in ids):
        raise ValueError(f"exclude_special: token ids must be ints in [0, {vocab_size}), got {ids}")
    return frozenset(int(i) for i in ids)


def collect(
    model: Transformer,
    tokenizer,
    texts_or_tokens: Sequence[Any],
    *,
    sites: Sequence[str] = ("resid_post",),
    layers: Sequence[int],
    path: str | os.PathLike,
    positions: str = "all",
    skip_first: bool = True,
    exclude_special: bool | Sequence[int] = True,
    dtype: str = "float32",
    shard_rows: int = 32768,
    batch_tokens: int = 4096,
    progress: AbstractProgress | None = None,
) -> ActivationStore:
    """Write the activations of chosen sites/layers of many items to a resumable store.

    **Arguments:**

    - `model`: a `Transformer` (float32 or quantised weights; the weights' hash is
      part of the store's identity).
    - `tokenizer`: the model's `Tokenizer` (only needed for string inputs; else None).
    - `texts_or_tokens`: N items, each a string, a list of token ids, or a
      `(prompt, completion)` pair of strings or token lists (the pair's boundary is
      what `positions="last_prompt"` / `"generated"` refer to; a plain item is all
      prompt). Strings are encoded with the tokenizer's default BOS; completions
      without one.
    - `sites`: activation sites among `jaxlab.lm.SITES`.
    - `layers`: layer indices; every (site, layer) pair becomes one column.
    - `path`: the store's folder (created; an existing store there is resumed if it
      was made by the same request, else `ValueError`).
    - `positions`: `"all"` tokens, `"last_prompt"` (the last prompt token of each
      item) or `"generated"` (the completion's tokens only).
    - `skip_first`: leave out each item's first position (default on). Position 0 is
      the attention sink: its residual norm is orders of magnitude above the others
      (SmolLM2-135M: ~24,000 against a median of ~200), and an SAE or probe trained with
      these rows fits them and reports a misleadingly high explained variance. SAELens
      drops them too (its `exclude_special_tokens`). `False` keeps them.
    - `exclude_special`: leave out the rows whose token is a special token (default
      on): `True` = the tokenizer's `special_ids` (BOS, EOS, padding, chat control
      tokens; none are known when `tokenizer` is None), a sequence = these token ids,
      `False` = keep every token. Neither filter applies to `positions="last_prompt"`
      (one chosen row per item). The store records both (its `metadata` has
      `skip_first` and `excluded_ids` whenever a filter applies); `positions` tells
      which rows were kept.
    - `dtype`: `"float32"` or `"float16"` on disk.
    - `shard_rows`: a shard closes once it holds at least this many rows.
    - `batch_tokens`: padded tokens per forward batch.
    - `progress`: a progress strategy over shards (`jaxlab.TqdmProgress()` for a
      bar; default `NoProgress()`).

    **Returns:** the finished `ActivationStore`.
    """
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a jaxlab.lm.Transformer, got {type(model).__name__}")
    cfg = model.config
    sites = tuple(sites)
    if not sites or any(s not in SITES for s in sites) or len(set(sites)) != len(sites):
        raise ValueError(f"sites must be distinct names among {SITES}, got {sites}")
    if isinstance(layers, int | np.integer):
        layers = (int(layers),)
    layers = tuple(layers)
    if (
        not layers
        or len(set(layers)) != len(layers)
        or any(not isinstance(i, int | np.integer) or not 0 <= i < cfg.n_layers for i in layers)
    ):
        raise ValueError(f"layers must be distinct ints in [0, {cfg.n_layers}), got {layers}")
    layers = tuple(int(i) for i in layers)
    if positions not in POSITIONS:
        raise ValueError(f"positions must be one of {POSITIONS}, got {positions!r}")
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {_DTYPES}, got {dtype!r}")
    if not isinstance(skip_first, bool | np.bool_):
        raise ValueError(f"skip_first must be True or False, got {skip_first!r}")
    excluded = _excluded_ids(exclude_special, tokenizer, cfg.vocab_size)
    shard_rows = check_positive_int("shard_rows", shard_rows)
    batch_tokens = check_positive_int("batch_tokens", batch_tokens)
    items = _items(texts_or_tokens, tokenizer, cfg.vocab_size)
    longest = max(len(t) for t, _, _ in items)
    if longest > cfg.context_length:
        raise ValueError(
            f"texts_or_tokens: an item has {longest} tokens, more than the "
            f"context length {cfg.context_length}"
        )
    if positions == "generated" and all(n == len(t) for t, n, _ in items):
        raise ValueError(
            "positions='generated' needs (prompt, completion) pairs in "
            "texts_or_tokens; every item here is prompt only"
        )
    batch_tokens = max(batch_tokens, prompt_bucket(longest))
    columns = [_column(s, layer) for s in sites for layer in layers]
    # the filters that change which rows are kept (none for one chosen row per item, and
    # position 0 is never a completion token): recorded only then, so a store made
    # before the filters existed keeps its identity
    skip_first = bool(skip_first) and positions == "all"
    if positions == "last_prompt":
        excluded = frozenset()
    request = {
        "model": {
            "name": cfg.name,
            "arch": cfg.arch,
            "config": repr(cfg),
            "sha256": model_fingerprint(model),
        },
        "sites": list(sites),
        "layers": list(layers),
        "positions": positions,
        "dtype": dtype,
        "d": cfg.d_model,
        "shard_rows": shard_rows,
        "batch_tokens": batch_tokens,
        "sources_sha256": _sha256_bytes("".join(h for _, _, h in items).encode()),
    }
    if skip_first:
        request["skip_first"] = True
    if excluded:
        request["excluded_ids"] = sorted(excluded)
    kept = sum(len(_kept_positions(t, n, positions, skip_first, excluded)) for t, n, _ in items)
    if kept == 0:
        raise ValueError(
            "texts_or_tokens: no row is left once skip_first / exclude_special are applied "
            "(every item is one token long or only special tokens); pass skip_first=False "
            "or exclude_special=False to keep them"
        )
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    manifest_path = folder / _MANIFEST
    if manifest_path.exists():
        try:
            manifest = json.loads(manifest_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"path: {manifest_path} is not a valid manifest: {e}") from None
        old = manifest.get("request") if isinstance(manifest, dict) else None
        if not isinstance(old, dict) or manifest.get("format") != _FORMAT:
            raise ValueError(f"path: {manifest_path} is not a jaxlab activation store manifest")
        diff = sorted(k for k in set(old) | set(request) if old.get(k) != request.get(k))
        if diff:
            raise ValueError(
                f"path: the store at {folder} was made by a different request "
                f"(differs in {diff}); use another path or delete it"
            )
    else:
        manifest = {
            "format": _FORMAT,
            "request": request,
            "sources": [h for _, _, h in items],
            "columns": columns,
            "shards": [],
            "complete": False,
        }
        write_json(manifest_path, manifest)
    plan = _plan(items, positions, shard_rows, batch_tokens, skip_first, excluded)
    done = {s["index"] for s in manifest["shards"]}
    todo = [k for k in range(len(plan)) if k not in done]
    progress = NoProgress() if progress is None else progress
    progress.start(len(plan), len(plan) - len(todo))
    try:
        for k in todo:
            arrays = _compute_shard(
                model,
                items,
                plan[k],
                columns,
                sites,
                layers,
                positions,
                np.dtype(dtype),
                skip_first,
                excluded,
            )
            files = _shard_files(k, columns)
            entry = {
                "index": k,
                "items": plan[k]["items"],
                "rows": int(arrays["text_index"].shape[0]),
                "files": {},
            }
            for name, fname in files.items():
                _save_npy(folder / fname, arrays[name])
                entry["files"][name] = {"name": fname, "sha256": _file_sha256(folder / fname)}
            manifest["shards"] = sorted([*manifest["shards"], entry], key=lambda s: s["index"])
            write_json(manifest_path, manifest)
            progress.update(1)
    finally:
        progress.close()
    manifest["complete"] = True
    manifest["n_tokens"] = sum(s["rows"] for s in manifest["shards"])
    write_json(manifest_path, manifest)
    for stray in folder.glob(".shard_*.tmp"):  # temp files of a killed run
        with contextlib.suppress(OSError):
            stray.unlink()
    return ActivationStore(folder)


class ActivationStore:
    """A finished activation store on disk (see `collect`), read memory-mapped.

    **Arguments:**

    - `path`: the store's folder.
    - `verify`: also check every shard file's SHA-256 against the manifest (reads all
      data once); by default names, shapes and dtypes are checked from the headers.

    **Attributes:** `n_tokens` (rows), `d` (width), `columns` ("site.Llayer" names),
    `metadata` (the manifest's request: model identity, sites, layers, positions,
    dtype, source hashes), `text_index` / `positions` / `tokens` ((n_tokens,) per row:
    the item each row came from, its position in the item and its token id).
    """

    def __init__(self, path: str | os.PathLike, *, verify: bool = False):
        self.path = Path(path)
        mpath = self.path / _MANIFEST
        if not mpath.is_file():
            raise ValueError(f"path: no activation store manifest at {mpath}")
        try:
            m = json.loads(mpath.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"path: {mpath} is not valid JSON: {e}") from None
        if not isinstance(m, dict) or m.get("format") != _FORMAT:
            raise ValueError(f"path: {mpath} is not a jaxlab activation store manifest")
        if not m.get("complete"):
            raise ValueError(
                f"path: the store at {self.path} is incomplete (interrupted); "
                "run lm.collect with the same arguments to resume it"
            )
        req = m["request"]
        self.metadata: dict[str, Any] = dict(req)
        self.columns: tuple[str, ...] = tuple(m["columns"])
        self.d: int = int(req["d"])
        dtype = np.dtype(req["dtype"])
        root = self.path.resolve()
        self._shards: list[dict[str, np.ndarray]] = []
        indices = [s["index"] for s in m["shards"]]
        if indices != list(range(len(indices))):
            raise ValueError(f"path: {mpath} lists shards {indices}, expected 0..n-1")
        for s in m["shards"]:
            rows = int(s["rows"])
            arrays = {}
            for name in [*self.columns, "text_index", "position", "token"]:
                info = s["files"].get(name)
                if info is None or not _SHARD_RE.match(str(info.get("name", ""))):
                    raise ValueError(
                        f"path: shard {s['index']} of {mpath} lacks a valid file name for {name!r}"
                    )
                f = (self.path / info["name"]).resolve()
                if f.parent != root or not f.is_file():
                    raise ValueError(
                        f"path: shard file {info['name']!r} is missing or outside {self.path}"
                    )
                if verify and _file_sha256(f) != info["sha256"]:
                    raise ValueError(f"path: shard file {f} does not match its SHA-256")
                try:
                    a = np.load(f, mmap_mode="r", allow_pickle=False)
                except (ValueError, OSError) as e:
                    raise ValueError(f"path: shard file {f} is not a valid .npy: {e}") from None
                want = ((rows, self.d), dtype) if name in self.columns else ((rows,), None)
                if a.shape != want[0] or (want[1] is not None and a.dtype != want[1]):
                    raise ValueError(
                        f"path: shard file {f} has {a.dtype}{a.shape}, the "
                        f"manifest says {want[1] or 'int'}{want[0]}"
                    )
                arrays[name] = a
            self._shards.append(arrays)
        self.n_tokens: int = sum(int(s["rows"]) for s in m["shards"])
        self.text_index: np.ndarray = self._meta("text_index", np.int64)
        self.positions: np.ndarray = self._meta("position", np.int32)
        self.tokens: np.ndarray = self._meta("token", np.int32)

    def _meta(self, name, dt):
        parts = [np.asarray(s[name], dt) for s in self._shards]
        return np.concatenate(parts) if parts else np.zeros((0,), dt)

    def _col(self, site, layer) -> str:
        if site is None and layer is None:
            if len(self.columns) != 1:
                raise ValueError(f"site/layer: the store holds {self.columns}; name one")
            return self.columns[0]
        matches = [
            c
            for c in self.columns
            if (site is None or c.split(".L")[0] == site)
            and (layer is None or c.endswith(f".L{int(layer)}"))
        ]
        if len(matches) != 1:
            raise ValueError(f"site={site!r}, layer={layer!r}: expected one of {self.columns}")
        return matches[0]

    def shards(self, site: str | None = None, layer: int | None = None) -> list[np.ndarray]:
        """The (rows_k, d) memory-mapped arrays of one column, shard by shard."""
        col = self._col(site, layer)
        return [s[col] for s in self._shards]

    def array(self, site: str | None = None, layer: int | None = None) -> np.ndarray:
        """All rows of one (site, layer) column as an (n_tokens, d) array.

        Memory-mapped (no copy) when the store has one shard; otherwise the shards
        are concatenated in memory (use `shards` or `batches` for stores larger
        than memory). `site`/`layer` may be omitted when the store holds one column.
        """
        parts = self.shards(site, layer)
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros((0, self.d), np.float32)

    def batches(
        self,
        batch_size: int,
        *,
        key: jax.Array | None = None,
        shuffle: bool = True,
        buffer: int = 65536,
        site: str | None = None,
        layer: int | None = None,
        drop_last: bool = True,
        with_index: bool = False,
    ) -> Iterator[jax.Array | tuple[jax.Array, jax.Array]]:
        """A stream of (batch_size, d) float32 batches for training.

        **Arguments:**

        - `batch_size`: rows per batch.
        - `key`: PRNG key (keyword-only), required when `shuffle`.
        - `shuffle`: shards in a random order, and rows shuffled within a buffer of
          `buffer` rows (a buffer at least as large as the store gives a uniform
          permutation); otherwise rows in store order.
        - `site`, `layer`: the column (may be omitted for a one-column store).
        - `drop_last`: drop the last incomplete batch (static shapes for jit).
        - `with_index`: yield (x, text_index) pairs, for grouped splits downstream.

        **Returns:** an iterator of float32 `jax.Array`s (batch_size, d).
        """
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if not isinstance(buffer, int) or buffer < batch_size:
            raise ValueError(f"buffer must be an int >= batch_size ({batch_size}), got {buffer!r}")
        if shuffle and key is None:
            raise ValueError("key is required when shuffle=True")
        col = self._col(site, layer)
        rng = None
        if shuffle:
            assert key is not None  # checked above
            rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())
        order = rng.permutation(len(self._shards)) if rng is not None else range(len(self._shards))

        def chunks():
            for k in order:
                s = self._shards[k]
                n = s[col].shape[0]
                for a in range(0, n, buffer):
                    yield (
                        np.asarray(s[col][a : a + buffer], np.float32),
                        np.asarray(s["text_index"][a : a + buffer], np.int64),
                    )

        xs, idx, held = [], [], 0
        for x, ti in chunks():
            xs.append(x)
            idx.append(ti)
            held += x.shape[0]
            if held < buffer:
                continue
            x_all, i_all = np.concatenate(xs), np.concatenate(idx)
            if rng is not None:
                perm = rng.permutation(x_all.shape[0])
                x_all, i_all = x_all[perm], i_all[perm]
            n_full = (x_all.shape[0] // batch_size) * batch_size
            for a in range(0, n_full, batch_size):
                yield self._out(x_all[a : a + batch_size], i_all[a : a + batch_size], with_index)
            xs, idx, held = [x_all[n_full:]], [i_all[n_full:]], x_all.shape[0] - n_full
        if held:
            x_all, i_all = np.concatenate(xs), np.concatenate(idx)
            if rng is not None:
                perm = rng.permutation(x_all.shape[0])
                x_all, i_all = x_all[perm], i_all[perm]
            stop = (held // batch_size) * batch_size if drop_last else held
            for a in range(0, stop, batch_size):
                yield self._out(x_all[a : a + batch_size], i_all[a : a + batch_size], with_index)

    @staticmethod
    def _out(x, ti, with_index):
        x = jnp.asarray(x, jnp.float32)
        return (x, jnp.asarray(ti.astype(np.int32))) if with_index else x

    def __repr__(self) -> str:
        return (
            f"ActivationStore({str(self.path)!r}, n_tokens={self.n_tokens}, d={self.d}, "
            f"columns={self.columns})"
        )
