"""Completion sets: prompts, greedy (or sampled) completions and why each one stopped,
generated in batches by `jaxlab.lm.generate` and cached on disk (resumable).

A completion's `length` is its number of content tokens: the stop token (EOS or end of
turn) is not counted, and a stop string ends the content at the token that completes it.
A row that reached `max_new_tokens` without stopping is `truncated` (its true length is
unknown, only bounded below); probes exclude such rows.

Caching. `generate_completions(..., path=folder)` plans the batches from the prompts before
anything runs, writes each finished batch atomically as `batch_<k>.json` and lists it in
`manifest.json` together with the request (model fingerprint, prompts' hash, sampler,
stop settings); a killed run resumes at the next missing batch, and a finished folder is
read back without any model call.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import numpy as np

from jaxlab._core import short_repr

from .. import lm
from .._core import (
    AbstractProgress,
    NoProgress,
    check_ids,
    check_positive_int,
    check_strings,
    read_json,
    write_json,
)

__all__ = [
    "STOP_REASONS",
    "CompletionSet",
    "encode_prompt",
    "stop_reason",
    "generate_completions",
]

#: why a completion ended: a stop token, a stop string, or the token budget (truncated).
STOP_REASONS = ("stop_token", "stop_string", "max_tokens")
"""Why a completion ended: a stop token, a stop string, or the token budget (truncated)."""

_FORMAT = "jaxlab.lengthprobe.completions/1"


def encode_prompt(tokenizer: lm.Tokenizer, text: str) -> list[int]:
    """Token ids of one user message: the model's chat template (one user turn, generation
    prompt added) when it ships one, else the plain text followed by a blank line.

    **Arguments:** `tokenizer` (`jaxlab.lm.Tokenizer`); `text` non-empty.

    **Returns:** the prompt's ids (with the tokenizer's BOS where it adds one).
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"text: expected a non-empty string, received {text!r}")
    if tokenizer.chat_template:
        return tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": text}]))
    return tokenizer.encode(text + "\n\n")


def _id_row(name: str, ids, n: int | None) -> list[int]:
    """A 1-D sequence of integer token ids in [0, n) (>= 0 when n is None) as a list."""
    arr = check_ids(name, ids, n, what="token ids")
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D id sequence, received shape {arr.shape}")
    return arr.tolist()


def stop_reason(
    generated: Sequence[int],
    *,
    stop_ids: Sequence[int],
    max_new_tokens: int,
    stop_strings: Sequence[str] = (),
    decode: Callable[[Sequence[int]], str] | None = None,
) -> tuple[list[int], str]:
    """Cut one generated row to its content and say why it stopped.

    **Arguments:**

    - `generated`: the row's generated ids (as `lm.generate` writes them: anything after
      the first stop token is padding and ignored).
    - `stop_ids`: ids that end a completion (kept out of the content).
    - `max_new_tokens`: the budget the row was generated with.
    - `stop_strings`: strings that end a completion; the content ends with the first token
      whose decoded prefix contains one (checked before the stop token).
    - `decode`: ids -> text, required with `stop_strings`.

    Ids are 1-D sequences of integers >= 0 and `stop_strings` a sequence (not a bare
    string); anything else raises a `ValueError` naming the argument.

    **Returns:** (content ids, reason in `STOP_REASONS`).
    """
    max_new_tokens = check_positive_int("max_new_tokens", max_new_tokens)
    row = _id_row("generated", generated, None)[:max_new_tokens]
    stops = set(_id_row("stop_ids", stop_ids, None))
    stop_strings = check_strings("stop_strings", stop_strings, nonempty=False)
    cut = next((j for j, t in enumerate(row) if t in stops), None)
    body = row if cut is None else row[:cut]
    if stop_strings:
        if decode is None:
            raise ValueError("decode: required with stop_strings, received None")
        if any(not isinstance(s, str) or not s for s in stop_strings):
            raise ValueError(f"stop_strings: expected non-empty strings, received {stop_strings!r}")
        if any(s in decode(body) for s in stop_strings):
            k = next(
                k
                for k in range(1, len(body) + 1)
                if any(s in decode(body[:k]) for s in stop_strings)
            )
            return body[:k], "stop_string"
    if cut is not None:
        return body, "stop_token"
    if len(row) < max_new_tokens:
        raise ValueError(
            f"generated: a row without a stop token must hold max_new_tokens={max_new_tokens} "
            f"ids, received {len(row)}"
        )
    return body, "max_tokens"


@dataclasses.dataclass(frozen=True)
class CompletionSet:
    """Prompts with their completions and stop reasons (see `generate_completions`).

    **Attributes:** `families` (N names), `prompts` (N prompt id tuples), `completions`
    (N content id tuples, stop token excluded), `reasons` (N entries of `STOP_REASONS`),
    `max_new_tokens`. Derived: `lengths` (N,) content tokens, `truncated` (N,) bool,
    `prompt_lengths` (N,), `family_ids` (N,) indices into `family_names`.
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    families: tuple[str, ...]
    prompts: tuple[tuple[int, ...], ...]
    completions: tuple[tuple[int, ...], ...]
    reasons: tuple[str, ...]
    max_new_tokens: int

    def __post_init__(self):
        n = len(self.prompts)
        for name in ("families", "completions", "reasons"):
            if len(getattr(self, name)) != n:
                raise ValueError(
                    f"{name}: expected {n} entries (one per prompt), "
                    f"received {len(getattr(self, name))}"
                )
        bad = sorted({r for r in self.reasons if r not in STOP_REASONS})
        if bad:
            raise ValueError(f"reasons: expected entries of {STOP_REASONS}, received {bad}")

    def __len__(self) -> int:
        return len(self.prompts)

    @property
    def lengths(self) -> np.ndarray:
        return np.asarray([len(c) for c in self.completions], np.int64)

    @property
    def prompt_lengths(self) -> np.ndarray:
        return np.asarray([len(p) for p in self.prompts], np.int64)

    @property
    def truncated(self) -> np.ndarray:
        return np.asarray([r == "max_tokens" for r in self.reasons])

    @property
    def family_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.families))

    @property
    def family_ids(self) -> np.ndarray:
        names = self.family_names
        return np.asarray([names.index(f) for f in self.families], np.int64)

    def to_json(self) -> dict:
        return {
            "format": _FORMAT,
            "families": list(self.families),
            "prompts": [list(p) for p in self.prompts],
            "completions": [list(c) for c in self.completions],
            "reasons": list(self.reasons),
            "max_new_tokens": self.max_new_tokens,
        }

    @classmethod
    def from_json(cls, obj: dict) -> CompletionSet:
        """Rebuild from `to_json` output (`ValueError` on a malformed object)."""
        if not isinstance(obj, dict) or obj.get("format") != _FORMAT:
            raise ValueError("obj: expected a jaxlab completion set (format field missing)")
        try:
            return cls(
                tuple(str(f) for f in obj["families"]),
                tuple(tuple(int(t) for t in p) for p in obj["prompts"]),
                tuple(tuple(int(t) for t in c) for c in obj["completions"]),
                tuple(str(r) for r in obj["reasons"]),
                int(obj["max_new_tokens"]),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"obj: malformed completion set ({e!r})") from None


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def _read_json(path: Path):
    try:
        return read_json(path)
    except (OSError, ValueError) as e:
        raise ValueError(f"path: {path} is not a readable JSON file ({e})") from None


def generate_completions(
    model: lm.Transformer,
    tokenizer: lm.Tokenizer | None,
    prompts: Sequence[Sequence[int]],
    *,
    families: Sequence[str],
    max_new_tokens: int,
    path: str | os.PathLike,
    key: jax.Array,
    sampler=lm.Greedy(),
    batch_size: int = 16,
    stop_ids: Sequence[int] | None = None,
    pad_id: int | None = None,
    stop_strings: Sequence[str] = (),
    progress: AbstractProgress | None = None,
) -> CompletionSet:
    """Generate one completion per prompt in cached, resumable batches.

    **Arguments:**

    - `model`: a `jaxlab.lm.Transformer`.
    - `tokenizer`: its `Tokenizer` (stop ids, pad id, decoding of stop strings); may be
      None when `stop_ids` and `pad_id` are given and there are no stop strings.
    - `prompts`: N non-empty prompt id lists (ids in [0, vocab_size); never wrapped).
    - `families`: N family names (strings; not a bare string). Batches never mix
      families, so short families stop early.
    - `max_new_tokens`: the token budget; rows reaching it are `truncated`.
    - `path`: the cache folder (created; resumed when it holds the same request, else
      `ValueError`).
    - `key`: PRNG key of stochastic samplers (batch k uses `fold_in(key, k)`).
    - `sampler`: `lm.Greedy()` (default) or `lm.Sample(...)`.
    - `batch_size`: rows per compiled batch (short batches are padded by repetition).
    - `stop_ids`, `pad_id`: override the tokenizer's.
    - `stop_strings`: strings that also end a completion (see `stop_reason`).
    - `progress`: a progress strategy over batches (`jaxlab.TqdmProgress()`).

    **Returns:** the `CompletionSet`, rows in the order of `prompts`.
    """
    if not isinstance(model, lm.Transformer):
        raise ValueError(
            f"model: expected a jaxlab.lm.Transformer, received {type(model).__name__}"
        )
    if prompts is None or isinstance(prompts, str | bytes) or not hasattr(prompts, "__len__"):
        raise ValueError(f"prompts: expected a sequence of id lists, received {prompts!r:.60}")
    vocab = model.config.vocab_size
    prompts = [_id_row("prompts", p, vocab) for p in prompts]
    if not prompts or any(not p for p in prompts):
        raise ValueError("prompts: expected a non-empty list of non-empty token lists")
    families = list(check_strings("families", families))
    if len(families) != len(prompts):
        raise ValueError(
            f"families: expected {len(prompts)} names (one per prompt), received {len(families)}"
        )
    max_new_tokens = check_positive_int("max_new_tokens", max_new_tokens)
    batch_size = check_positive_int("batch_size", batch_size)
    if (stop_ids is None or pad_id is None or stop_strings) and tokenizer is None:
        raise ValueError("tokenizer: required unless stop_ids and pad_id are given")
    if stop_ids is None:
        stop_ids = tokenizer.stop_ids  # pyright: ignore[reportOptionalMemberAccess]  (checked above)
    if pad_id is None:
        pad_id = tokenizer.pad_id  # pyright: ignore[reportOptionalMemberAccess]  (checked above)
    stop_ids = tuple(int(s) for s in stop_ids)
    pad_id = int(pad_id)
    if not stop_ids:
        raise ValueError("stop_ids: expected at least one stop id, received none")
    decode = tokenizer.decode if tokenizer is not None else None
    order = sorted(range(len(prompts)), key=lambda i: (families[i], len(prompts[i]), i))
    plan, cur = [], []
    for i in order:
        if cur and (len(cur) == batch_size or families[cur[0]] != families[i]):
            plan.append(cur)
            cur = []
        cur.append(i)
    plan.append(cur)
    request = {
        "model": {"config": repr(model.config), "sha256": lm.model_fingerprint(model)},
        "prompts_sha256": _hash([families, prompts]),
        "max_new_tokens": max_new_tokens,
        "sampler": repr(sampler),
        "key": np.asarray(jax.random.key_data(key)).tolist(),
        "stop_ids": list(stop_ids),
        "stop_strings": list(stop_strings),
        "batch_size": batch_size,
    }
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    mpath = folder / "manifest.json"
    if mpath.exists():
        manifest = _read_json(mpath)
        if not isinstance(manifest, dict) or manifest.get("request") != request:
            raise ValueError(
                f"path: the completions at {folder} were made by a different request; "
                "use another path or delete it"
            )
    else:
        manifest = {"format": _FORMAT, "request": request, "batches": []}
        write_json(mpath, manifest)
    done = set(manifest["batches"])
    todo = [k for k in range(len(plan)) if k not in done]
    progress = NoProgress() if progress is None else progress
    progress.start(len(plan), len(plan) - len(todo))
    try:
        for k in todo:
            idx = plan[k]
            batch = [prompts[i] for i in idx]
            batch += [batch[0]] * (batch_size - len(batch))
            gen = lm.generate(
                model,
                batch,
                max_new_tokens=max_new_tokens,
                sampler=sampler,
                stop_tokens=stop_ids,
                pad_id=pad_id,
                key=jax.random.fold_in(key, k),
            )
            toks = np.asarray(gen.tokens)
            rows = []
            for r, i in enumerate(idx):
                content, reason = stop_reason(
                    toks[r].tolist(),
                    stop_ids=stop_ids,
                    max_new_tokens=max_new_tokens,
                    stop_strings=stop_strings,
                    decode=decode,
                )
                rows.append({"index": i, "completion": content, "reason": reason})
            write_json(folder / f"batch_{k:05d}.json", rows)
            manifest["batches"] = sorted([*manifest["batches"], k])
            write_json(mpath, manifest)
            progress.update(1)
    finally:
        progress.close()
    completions: list[list[int] | None] = [None] * len(prompts)
    reasons: list[str] = [""] * len(prompts)
    for k in range(len(plan)):
        rows = _read_json(folder / f"batch_{k:05d}.json")
        if not isinstance(rows, list) or sorted(r.get("index") for r in rows) != sorted(plan[k]):
            raise ValueError(f"path: {folder}/batch_{k:05d}.json does not match its plan")
        for r in rows:
            completions[r["index"]] = [int(t) for t in r["completion"]]
            reasons[r["index"]] = str(r["reason"])
    return CompletionSet(
        tuple(families),
        tuple(tuple(p) for p in prompts),
        tuple(tuple(c) for c in completions),  # type: ignore[arg-type]
        tuple(reasons),
        max_new_tokens,
    )
