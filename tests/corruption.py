"""Corrupted-file sweeps (issue 30, Build 3): one file reader, one real file, many damages.

A sweep truncates a copy of the file at many offsets (every field boundary its caller
lists, and a spread through the whole file) and flips bytes of its header fields, reads
each damaged copy and classifies the outcome:

- `value_error`: a `ValueError` whose message names the file (the one clear error);
- `documented`: the reader returned (or warned) and the caller's `accept` gives the
  documented reason (a field no reader uses, a string whose contents are free, a
  truncation the format allows and the reader reports with a warning);
- `unhandled`: any other exception, a `ValueError` not naming the file, a hang (over
  `timeout_s`), or a damaged file read without a documented reason (a silent wrong
  answer).

The damaged copy keeps the original's file name, so "names the file" is checked on the
name a user would see. Truncations run in descending order on one copy (`os.truncate`,
no rewrite of a 100 MB model per case) and flips are written and undone in place.
Totals go to the test report (`record_property("corruption", ...)`); the session
summary (tests/conftest.py) adds them up.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a file's layout: bytes `start .. start + size`, what it is, and its
    kind: "struct" (magic, version, counts, lengths, type ids, offsets, dims: damage must
    be caught), "value" (a metadata number: caught if anything uses it, else the read
    result is unchanged) or "payload" (string contents: any bytes are a valid string)."""

    start: int
    size: int
    label: str
    kind: str = "struct"


@dataclasses.dataclass(frozen=True)
class Damage:
    label: str
    kind: str  # "truncate" or the damaged field's kind
    cut: int | None = None  # truncate to this many bytes
    at: int | None = None  # or XOR the byte at this offset with `mask`
    mask: int = 0xFF


def cuts(fields: Sequence[Field], size: int, *, spread: int) -> list[Damage]:
    """Truncations at every field boundary (start and one byte in) and at `spread`
    offsets evenly through the file (its data included)."""
    out = {0: "empty file"}
    for f in fields:
        out.setdefault(f.start, f"at the start of {f.label}")
        if f.size > 1:
            out.setdefault(f.start + 1, f"inside {f.label}")
    for i in range(1, spread + 1):
        c = size * i // (spread + 1)
        out.setdefault(c, f"spread point {i}/{spread}")
    out.pop(size, None)
    return [Damage(f"truncated to {c} bytes ({w})", "truncate", cut=c) for c, w in out.items()]


def flips(fields: Sequence[Field]) -> list[Damage]:
    """XOR 0xFF on the first and the last byte of every struct/value field (for a
    little-endian number: its low byte and its high byte) and 0x01 on a middle byte of
    every payload (a changed character)."""
    out = []
    for f in fields:
        if f.kind == "payload":
            if f.size:
                at = f.start + f.size // 2
                out.append(Damage(f"byte {at} of {f.label} ^ 0x01", "payload", at=at, mask=0x01))
            continue
        for at in sorted({f.start, f.start + f.size - 1}):
            out.append(Damage(f"byte {at} of {f.label} ^ 0xff", f.kind, at=at))
    return out


def subset(items: Sequence[Any], n: int) -> list[Any]:
    """`n` items spread evenly over `items` (deterministic; first and last kept)."""
    if len(items) <= n:
        return list(items)
    step = (len(items) - 1) / (n - 1)
    return [items[round(i * step)] for i in range(n)]


class _Hang(BaseException):
    pass


def _alarm(signum, frame):
    raise _Hang


def sweep(
    path: Path,
    read: Callable[[Path], Any],
    damages: Iterable[Damage],
    accept: Callable[[Damage, Any, list[str]], str | None],
    *,
    timeout_s: float = 60.0,
) -> dict[str, Any]:
    """Apply every damage to `path` (restored afterwards) and classify `read(path)`.

    `accept(damage, result, warnings)` returns the documented reason for a read that
    succeeded, or None (then the case is unhandled: a silent wrong answer).
    """
    path = Path(path)
    original = path.read_bytes()
    damages = sorted(damages, key=lambda d: (d.cut is None, -(d.cut or 0)))
    res: dict[str, Any] = {"tried": 0, "value_error": 0, "documented": 0, "unhandled": 0}
    failures, docs = [], {}
    old = signal.signal(signal.SIGALRM, _alarm)
    whole = True
    try:
        for d in damages:
            if d.cut is not None:
                os.truncate(path, d.cut)  # descending: each cut shortens the last
                whole = False
            else:
                assert d.at is not None
                if not whole:  # the cuts are done (they sort first): restore it once
                    path.write_bytes(original)
                    whole = True
                with open(path, "r+b") as fh:
                    fh.seek(d.at)
                    fh.write(bytes([original[d.at] ^ d.mask]))
            res["tried"] += 1
            out, err, caught = None, None, []
            with warnings.catch_warnings(record=True) as rec:
                warnings.simplefilter("always")
                signal.setitimer(signal.ITIMER_REAL, timeout_s)
                try:
                    out = read(path)
                except _Hang:
                    err = f"hang (over {timeout_s} s)"
                except ValueError as e:
                    err = None if path.name in str(e) else f"ValueError not naming the file: {e}"
                    if err is None:
                        res["value_error"] += 1
                        out = e
                except Exception as e:  # noqa: BLE001 - classifying every outcome is the point
                    err = f"{type(e).__name__}: {str(e)[:160]}"
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                caught = [str(w.message) for w in rec]
            if err is None and not isinstance(out, ValueError):
                reason = accept(d, out, caught)
                if reason is None:
                    err = "read without an error (silent wrong answer)"
                else:
                    res["documented"] += 1
                    docs[reason] = docs.get(reason, 0) + 1
            if err is not None:
                res["unhandled"] += 1
                failures.append(f"{path.name}: {d.label}: {err}")
            if d.at is not None:
                with open(path, "r+b") as fh:
                    fh.seek(d.at)
                    fh.write(original[d.at : d.at + 1])
            del out  # a reader's memory map of the damaged file: never touched again
    finally:
        signal.signal(signal.SIGALRM, old)
        path.write_bytes(original)
    res["failures"] = failures
    res["documented_list"] = [f"{n} x {r}" for r, n in sorted(docs.items())]
    return res


def report(record_property, reader: str, res: dict[str, Any]) -> None:
    """Print the totals (shown with -rA / -s), hand them to the session summary, and
    fail on any unhandled case."""
    totals = {k: res[k] for k in ("tried", "value_error", "documented", "unhandled")}
    record_property("corruption", {"component": reader, **totals})
    print(
        f"\ncorruption {reader}: tried {res['tried']}, ValueError naming the file "
        f"{res['value_error']}, documented {res['documented']}, unhandled {res['unhandled']}"
    )
    for d in res["documented_list"]:
        print("  documented:", d)
    assert res["unhandled"] == 0, "\n".join(res["failures"][:40])


def zip_fields(data: bytes) -> list[Field]:
    """The layout of a stored (uncompressed) zip archive such as `np.savez` writes: per
    member its local header (signature, version, flags, method, time/date, CRC, sizes,
    name/extra lengths; "struct"), name, extra field, and data ("data": covered by the
    CRC, so a flip there must be caught too); the central directory entries and the
    end-of-central-directory record ("struct")."""
    import io
    import struct
    import zipfile

    def header(off: int, label: str, parts: Sequence[tuple[int, str]]) -> list[Field]:
        out, at = [], off
        for size, what in parts:
            out.append(Field(at, size, f"{what} of {label}"))
            at += size
        return out

    local = [(4, "signature"), (2, "version"), (2, "flags"), (2, "method"), (2, "time"),
             (2, "date"), (4, "CRC"), (4, "compressed size"), (4, "size"),
             (2, "name length"), (2, "extra length")]  # fmt: skip
    central = [(4, "signature"), (2, "version made by"), (2, "version"), (2, "flags"),
               (2, "method"), (2, "time"), (2, "date"), (4, "CRC"), (4, "compressed size"),
               (4, "size"), (2, "name length"), (2, "extra length"), (2, "comment length"),
               (2, "disk"), (2, "internal attributes"), (4, "external attributes"),
               (4, "local header offset")]  # fmt: skip
    out: list[Field] = []
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        infos = z.infolist()
    for k, zi in enumerate(infos):
        off = zi.header_offset
        label = f"member {k} ({zi.filename})"
        out += header(off, f"the local header of {label}", local)
        n_name, n_extra = struct.unpack_from("<HH", data, off + 26)
        out.append(Field(off + 30, n_name, f"name of {label}"))
        if n_extra:
            out.append(Field(off + 30 + n_name, n_extra, f"extra field of {label}"))
        out.append(Field(off + 30 + n_name + n_extra, zi.compress_size, f"data of {label}", "data"))
    eocd = data.rindex(b"PK\x05\x06")
    (cd,) = struct.unpack_from("<I", data, eocd + 16)
    at = cd
    for k in range(len(infos)):
        n_name, n_extra, n_comment = struct.unpack_from("<HHH", data, at + 28)
        out += header(at, f"central entry {k}", central)
        out.append(Field(at + 46, n_name, f"name in central entry {k}"))
        if n_extra:
            out.append(Field(at + 46 + n_name, n_extra, f"extra field of central entry {k}"))
        at += 46 + n_name + n_extra + n_comment
    out += header(
        eocd,
        "the end record",
        [(4, "signature"), (2, "disk"), (2, "central disk"), (2, "entries on disk"),
         (2, "entries"), (4, "central size"), (4, "central offset"), (2, "comment length")],
    )  # fmt: skip
    return out


def data_flips(fields: Sequence[Field], per_field: int = 3) -> list[Damage]:
    """XOR 0x01 on `per_field` bytes spread through every "data" field (bytes a checksum
    covers: each flip must be caught)."""
    out = []
    for f in fields:
        if f.kind != "data" or not f.size:
            continue
        for i in range(per_field):
            at = f.start + (f.size - 1) * i // max(per_field - 1, 1)
            out.append(Damage(f"byte {at} of {f.label} ^ 0x01", "data", at=at, mask=0x01))
    return sorted(set(out), key=lambda d: d.at or 0)
