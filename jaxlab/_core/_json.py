"""Reading JSON from files a user or a data wheel supplies: bounded, and every failure a
`ValueError` that names the file.

`json.loads` on untrusted text can fail four ways besides a clean parse: invalid JSON
(`JSONDecodeError`, already a `ValueError` but without the file's name), invalid UTF-8,
nesting deeper than the interpreter's recursion limit (`RecursionError`, which escapes
`except ValueError` and can take a long time to unwind), and a file far larger than any
real one (memory). `parse_json` and `read_json` turn each into
`ValueError("<where>: ...")`; the size is checked before the text is read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["parse_json", "read_json", "JSON_MAX_BYTES"]

# no JSON file jaxlab reads is near this (the largest, a KramaBench workload, is ~1 MB)
JSON_MAX_BYTES = 256 << 20


def parse_json(text: str | bytes, *, where: str, max_bytes: int = JSON_MAX_BYTES) -> Any:
    """`json.loads(text)`, with every failure a `ValueError` naming `where`.

    **Arguments:** `text` the JSON text; `where` names its source in messages (a path,
    "line 3 of tasks.jsonl"); `max_bytes` the largest text accepted.
    """
    if len(text) > max_bytes:
        raise ValueError(f"{where}: {len(text)} bytes of JSON, more than the {max_bytes} accepted")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{where}: JSON nested too deeply to read") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{where}: not UTF-8 text ({e.reason})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: invalid JSON ({e.msg} at line {e.lineno})") from None


def read_json(path: str | Path, *, max_bytes: int = JSON_MAX_BYTES) -> Any:
    """The JSON value of the file at `path`, its size checked before it is read
    (`parse_json`'s errors; a missing file is `FileNotFoundError`)."""
    path = Path(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{path}: {size} bytes of JSON, more than the {max_bytes} accepted")
    return parse_json(path.read_bytes(), where=str(path), max_bytes=max_bytes)
