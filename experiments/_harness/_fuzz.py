"""The committed bad-input fuzz totals (issue #59): `results/fuzz/<suite>.json`.

Two suites write them when run with `JAXLAB_FUZZ_DIR=results/fuzz` (see
`tests/test_fuzz_public_api.py`, `record_fuzz_counts`): `public_api` (hand-chosen bad
values per argument kind) and `contracts` (values generated from each function's declared
argument kinds, and sizes of 10**9 in a memory-limited child). Each holds, per component,
the number of public functions its table declares (`functions`, of the
`public_functions` in the component's `__all__`) and the counts of one
full sweep (`tried` = `refused` + `documented` + `accepted` + `other`),
the test tier that ran it, its date and git commit. `_pages` turns them into the totals
block of docs/status.md and the one-line total of README.md; nothing is typed by hand.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["FUZZ_SUITES", "FUZZ_KEYS", "load_fuzz", "fuzz_totals_block", "fuzz_summary_line"]

FUZZ_SUITES = {
    "public_api": "public-API fuzz (`tests/test_fuzz_public_api.py`)",
    "contracts": "contract fuzz (`tests/test_fuzz_contracts.py`)",
}
FUZZ_KEYS = ("tried", "refused", "documented", "accepted", "other")
COMMAND = (
    "JAXLAB_FUZZ_DIR=results/fuzz python -m pytest -m 'slow or not slow' "
    "tests/test_fuzz_public_api.py tests/test_fuzz_contracts.py"
)


def load_fuzz(folder: str | Path) -> dict[str, dict[str, Any]]:
    """Suite -> its record (`{"components": {name: counts}}`) for each file present; a
    malformed file is a `ValueError` naming it."""
    out = {}
    for suite in FUZZ_SUITES:
        path = Path(folder) / f"{suite}.json"
        if not path.is_file():
            continue
        try:
            rec = json.loads(path.read_text())
            comps = rec["components"]
            for name, c in comps.items():
                for k in FUZZ_KEYS:
                    if not isinstance(c.get(k), int):
                        raise ValueError(f"component {name!r}: {k!r} is not an integer")
                if sum(c[k] for k in FUZZ_KEYS[1:]) != c["tried"]:
                    raise ValueError(f"component {name!r}: the counts do not add up to tried")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"{path}: not a fuzz totals file ({e})") from None
        out[suite] = rec
    return out


def _sum(comps: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    return {k: sum(int(c[k]) for c in comps.values()) for k in FUZZ_KEYS}


def _huge(comps: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    verdicts = [v for c in comps.values() for v in c.get("size_1e9", {}).values()]
    return {k: verdicts.count(k) for k in ("refused", "accepted", "other")} | {
        "tried": len(verdicts)
    }


def _provenance(comps: Mapping[str, Mapping[str, Any]]) -> str:
    dates = sorted(str(c.get("date_utc", "?"))[:10] for c in comps.values())
    commits = sorted({str(c.get("git_commit") or "?")[:10] for c in comps.values()})
    dirty = any(c.get("git_dirty") for c in comps.values())
    span = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    return f"run {span} at commit {', '.join(commits)}" + (
        " (uncommitted changes)" if dirty else ""
    )


def fuzz_totals_block(fuzz: Mapping[str, Mapping[str, Any]]) -> str:
    """The docs/status.md block: per suite, a table of every component's counts."""
    if not fuzz:
        return "No fuzz totals are committed yet (`results/fuzz`); `" + COMMAND + "` writes them.\n"
    lines = [
        "Each bad input ends *refused* (a `ValueError`/`TypeError` naming the argument), "
        "*documented* (an exception or acceptance the suite's table documents with its "
        "reason), *accepted* (a valid input, such as a list, answered without NaN/inf) or "
        "*other* (anything else: unhandled; each test requires 0). Written by `"
        + COMMAND
        + "` (the committed copy is `results/fuzz`).",
        "",
    ]
    for suite, title in FUZZ_SUITES.items():
        if suite not in fuzz:
            lines += [f"{title[0].upper()}{title[1:]}: not in `results/fuzz` yet.", ""]
            continue
        comps = fuzz[suite]["components"]
        lines += [f"{title[0].upper()}{title[1:]}, {_provenance(comps)}:", ""]
        lines += [
            "| component | tier | functions fuzzed | tried | refused | documented | accepted "
            "| other |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name in sorted(comps):
            c = comps[name]
            counts = " | ".join(str(c[k]) for k in FUZZ_KEYS)
            fns = f"{c.get('functions', '?')} of {c.get('public_functions', '?')}"
            lines.append(f"| `jaxlab.{name}` | {c.get('tier', '?')} | {fns} | {counts} |")
        t = _sum(comps)
        fns = " of ".join(
            str(sum(int(c.get(k, 0)) for c in comps.values()))
            for k in ("functions", "public_functions")
        )
        total = " | ".join(str(t[k]) for k in FUZZ_KEYS)
        lines.append(f"| **total** ({len(comps)}) | | {fns} | {total} |")
        h = _huge(comps)
        if h["tried"]:
            lines += [
                "",
                f"Sizes of 10**9 (slow tier, each in a child process limited to 4 GiB and "
                f"90 s): {h['tried']} tried, {h['refused']} refused, {h['accepted']} "
                f"answered within the limits, {h['other']} other.",
            ]
        lines.append("")
    return "\n".join(lines)


def fuzz_summary_line(fuzz: Mapping[str, Mapping[str, Any]], *, status_link: str) -> str:
    """README's one line: both suites' totals, linking the per-component tables."""
    if not fuzz:
        return f"Bad-input fuzz totals: none committed yet ([status]({status_link})).\n"
    parts = []
    for suite, comps in ((s, fuzz[s]["components"]) for s in FUZZ_SUITES if s in fuzz):
        t = _sum(comps)
        fns = sum(int(c.get("functions", 0)) for c in comps.values())
        public = sum(int(c.get("public_functions", 0)) for c in comps.values())
        parts.append(
            f"{suite.replace('_', '-')} {t['tried']} inputs to {fns} of {public} public "
            f"functions in {len(comps)} components ({t['refused']} refused naming the "
            f"argument, {t['documented']} documented, {t['accepted']} accepted, "
            f"**{t['other']} other**)"
        )
    return (
        "Bad-input fuzz (`results/fuzz`, [per component]("
        + status_link
        + "#bad-input-fuzz)): "
        + "; ".join(parts)
        + ".\n"
    )
