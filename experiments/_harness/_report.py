"""REPORT.md and report.html from the metrics.json files of a results folder, and the
claims and benchmark tables (Markdown) that README and the docs show."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jaxlab._core import atomic_write

from ._claim import SINGLE_NOTE
from ._papers import PAPERS, citation, paper_sort_key
from ._snapshot import is_legacy, load_benches, load_records, verdict

__all__ = [
    "write_report",
    "load_records",
    "claims_table",
    "bench_table",
    "failed_smoke",
    "estimate_text",
    "null_text",
    "verdict_text",
    "seconds_text",
]


def _load_benches(out: Path) -> list[dict[str, Any]]:
    return load_benches(out / "bench")


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _cell(x: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(x).replace("|", "\\|").replace("\n", " ")


def _group(records, failures, benches) -> dict[str, dict[str, list]]:
    by_paper: dict[str, dict[str, list]] = {}
    for kind, items in (("ok", records), ("failed", failures), ("bench", benches)):
        for r in items:
            p = r.get("paper", "?")
            by_paper.setdefault(p, {"ok": [], "failed": [], "bench": []})[kind].append(r)
    return dict(sorted(by_paper.items(), key=lambda kv: paper_sort_key(kv[0])))


def _title(paper: str) -> str:
    comp, title = PAPERS.get(paper, ("?", "unknown paper"))
    return f"{paper} {comp} — {title}"


def _cited(paper: str) -> str:
    return f"Paper: {citation(paper)}" if paper in PAPERS else "Paper: unknown"


def _markdown(groups, out: Path, header: str) -> str:
    lines = ["# jaxlab report", "", header, ""]
    for paper, g in groups.items():
        lines += [f"## {_title(paper)}", "", _cited(paper), ""]
        for f in g["failed"]:
            lines += [
                f"### {f['experiment']} — FAILED",
                "",
                f"`{f['error']}`",
                "",
                "```",
                f["traceback"],
                "```",
                "",
            ]
        for r in g["ok"]:
            lines += [
                f"### {r['experiment']} ({r['config']}, seed {r['seed']}, {r['runtime_s']:.1f} s)",
                "",
                r.get("description", ""),
                "",
            ]
            if r["claims"]:
                lines += [
                    "| claim | paper | measured | estimate [interval] | null / baseline "
                    "| verdict |",
                    "|---|---|---|---|---|---|",
                ]
                for c in r["claims"]:
                    lines.append(
                        f"| {_cell(c['claim'])} | {_cell(c['paper'])} | "
                        f"{_cell(c['measured'])} | {_cell(estimate_text(c))} | "
                        f"{_cell(null_text(c))} | {_cell(verdict_text(c))} |"
                    )
                lines.append("")
            if r["metrics"]:
                lines += ["| metric | value |", "|---|---|"]
                lines += [f"| {_cell(k)} | {_fmt(v)} |" for k, v in r["metrics"].items()]
                lines.append("")
            if r.get("notes"):
                lines += [r["notes"], ""]
            for fig in r.get("figures", []):
                lines += [f"![{fig}]({r['experiment']}/{fig})", ""]
        for b in g["bench"]:
            lines += [
                f"### benchmark {b['bench']} ({b['config']})",
                "",
                f"size: `{json.dumps(b['size'])}`",
                "",
                "| implementation | median s | min s | max s |",
                "|---|---|---|---|",
            ]
            for impl, t in b["timings"].items():
                lines.append(
                    f"| {impl} | {t['median_s']:.4g} | {t['min_s']:.4g} | {t['max_s']:.4g} |"
                )
            lines += ["", "| ratio (peer median / ours median) | value |", "|---|---|"]
            lines += [f"| {k} | {v:.3g} |" for k, v in b["ratios"].items()]
            lines.append("")
    return "\n".join(lines) + "\n"


def failed_smoke(status_file: str | Path) -> set[str]:
    """The experiments that failed the smoke tier, from the status file `make smoke` writes
    (`{"experiments": {NAME: "passed" | "failed"}, ...}`)."""
    data = json.loads(Path(status_file).read_text())
    runs = data.get("experiments") if isinstance(data, dict) else None
    if not isinstance(runs, dict):
        raise ValueError(f"{status_file}: expected the smoke status JSON of `make smoke`")
    return {name for name, outcome in runs.items() if outcome != "passed"}


def estimate_text(claim: Mapping[str, Any]) -> str:
    """`value [low, high]` with the level, method and n of a protocol claim's `estimate`
    ("—" when it has none); one measurement (`"single": true`, `Estimate.single`) shows as
    `value (one measurement, no interval: method, n=N)`. A record written before the
    `single` key existed shows as it did."""
    e = claim.get("estimate")
    if not e:
        return "—"
    if e.get("single"):
        return f"{_fmt(e.get('value'))} ({SINGLE_NOTE}: {e.get('method')}, n={e.get('n')})"
    text = f"{_fmt(e.get('value'))} [{_fmt(e.get('low'))}, {_fmt(e.get('high'))}]"
    details = []
    if e.get("level") is not None:
        details.append(f"{e['level']:.0%}")
    if e.get("method"):
        details.append(str(e["method"]))
    if e.get("n") is not None:
        details.append(f"n={e['n']}")
    return text + (f" ({' '.join(details)})" if details else "")


def null_text(claim: Mapping[str, Any]) -> str:
    """The null or baseline a protocol claim is compared against, with its margin, test and
    alpha ("—" for a legacy claim)."""
    if is_legacy(claim) or claim.get("null") is None:
        return "—"
    parts = [str(claim["null"])]
    if claim.get("margin") is not None:
        parts.append(f"margin {_fmt(claim['margin'])}")
    if claim.get("test"):
        parts.append(str(claim["test"]))
    if claim.get("alpha") is not None:
        parts.append(f"alpha {_fmt(claim['alpha'])}")
    return "; ".join(parts)


def verdict_text(claim: Mapping[str, Any]) -> str:
    """The verdict as a table shows it: `holds`, `**fails**`, `inconclusive`, `untestable`
    (with the failed precondition when the record names it), or `holds (legacy)` /
    `**no** (legacy)` for a record without the protocol's verdict."""
    v = verdict(claim)
    if v == "fails":
        return "**fails**"
    if v == "no (legacy)":
        return "**no** (legacy)"
    gate, scale = claim.get("gate"), claim.get("scale")
    if v == "untestable" and gate:
        return f"untestable ({_precondition_text(gate)})"
    if v == "inconclusive" and isinstance(scale, Mapping) and not scale.get("passed", True):
        return f"inconclusive (below the paper's scale: {_precondition_text(scale)})"
    est = claim.get("estimate")
    if v == "inconclusive" and isinstance(est, Mapping) and est.get("single"):
        return f"inconclusive ({SINGLE_NOTE})"
    return v


def _precondition_text(p) -> str:
    """A failed precondition as `name: measured` (a record's dict, or an older string)."""
    if not isinstance(p, Mapping):
        return str(p)
    name, measured = p.get("name", ""), p.get("measured", "")
    return f"{name}: {measured}" if measured else str(name)


def seconds_text(t: float | None) -> str:
    """A duration with a readable unit: 12.3 s, 45.6 ms, 7.8 us."""
    if t is None:
        return "n/a"
    if t >= 1:
        return f"{t:.3g} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3g} ms"
    return f"{t * 1e6:.3g} us"


CLAIMS_HEADER = (
    "| paper | experiment | claim | paper value | measured | estimate [interval] "
    "| null / baseline | verdict |"
)


def claims_table(
    records: Sequence[Mapping[str, Any]],
    *,
    stale: set[str] | frozenset[str] = frozenset(),
) -> str:
    """One Markdown table of every claim (paper, experiment, claim, paper value, measured,
    the estimate with its interval, the null or baseline, the verdict), papers in order.

    `stale`: experiments whose current code fails the smoke tier (`failed_smoke`): their
    rows say "stale" instead of a verdict, since the code that produced them no longer runs.
    """
    rows = [CLAIMS_HEADER, "|---|---|---|---|---|---|---|---|"]
    ordered = sorted(records, key=lambda r: (paper_sort_key(r.get("paper", "?")), r["experiment"]))
    for r in ordered:
        for c in r["claims"]:
            v = verdict_text(c)
            if r["experiment"] in stale:
                v = "stale (its code fails the smoke tier)"
            rows.append(
                f"| {r.get('paper', '?')} | {r['experiment']} | {_cell(c['claim'])} | "
                f"{_cell(c['paper'])} | {_cell(c['measured'])} | {_cell(estimate_text(c))} | "
                f"{_cell(null_text(c))} | {_cell(v)} |"
            )
    return "\n".join(rows) + "\n"


def _size_text(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


SIZE_CELL_ITEMS = 8  # a summary row's size cell: at most this many short entries


def _size_cell(size: Mapping[str, Any]) -> str:
    """The summary row's size: scalar entries only (numbers, short strings), at most
    `SIZE_CELL_ITEMS`; a cut ends in "..." (the benchmark's own section lists all of it)."""
    short = [
        f"{k} {_size_text(v)}"
        for k, v in size.items()
        if isinstance(v, int | float) or (isinstance(v, str) and len(v) <= 24)
    ]
    shown = short[:SIZE_CELL_ITEMS]
    if len(shown) < len(size):
        shown.append("...")
    return ", ".join(shown)


def _pair(key: str, ours: Sequence[str], timings: Mapping[str, Any]) -> tuple[str, str] | None:
    """(ours, peer) of a ratio key `OURS_vs_PEER` (the longest `ours` name that fits)."""
    for o in sorted(ours, key=len, reverse=True):
        peer = key.removeprefix(f"{o}_vs_")
        if key.startswith(f"{o}_vs_") and peer in timings:
            return o, peer
    return None


def bench_table(benches: Sequence[Mapping[str, Any]]) -> str:
    """One Markdown row per benchmark: its paper, size, the median of our main
    implementation (the first of `ours`), the peers' medians, and the ratios of ours to each
    peer (peer median / ours median: > 1 means ours is faster); benchmarks ordered by paper
    then name. A benchmark that names its own (ours, peer) pairs (not every ours against
    every peer: e.g. one pair per size) shows every pair, ours' median of each. Every
    implementation's timing and every ratio: `python -m experiments bench` prints them,
    the benchmarks page lists them."""
    rows = [
        "| benchmark | paper | size | ours (median) | peers (median) | ratio peer / ours |",
        "|---|---|---|---|---|---|",
    ]
    ordered = sorted(benches, key=lambda b: (paper_sort_key(b.get("paper", "?")), b["bench"]))
    for b in ordered:
        ours = [i for i in b.get("ours", ()) if i in b["timings"]]
        main = ours[0] if ours else None
        peers = [i for i in b["timings"] if i not in ours]
        med = {i: seconds_text(t["median_s"]) for i, t in b["timings"].items()}
        size = _size_cell(b.get("size", {}))
        ratios = b.get("ratios", {})
        pairs = {k: _pair(k, ours, b["timings"]) for k in ratios}
        chosen = bool(ratios) and all(pairs.values()) and len(ratios) < len(ours) * len(peers)
        if chosen:  # the benchmark's own pairs: each one
            shown_ours = list(dict.fromkeys(p[0] for p in pairs.values() if p))
            shown = "; ".join(f"{p[0]} vs {p[1]} {ratios[k]:.3g}x" for k, p in pairs.items() if p)
        else:
            shown_ours = [main] if main else []
            mine = {k: v for k, v in ratios.items() if main and k.startswith(f"{main}_vs_")}
            shown = "; ".join(
                f"{k.removeprefix(f'{main}_vs_') if k in mine else k} {v:.3g}x"
                for k, v in (mine or ratios).items()
            )
        rows.append(
            f"| {b['bench']} | {b.get('paper', '?')} | {_cell(size) or '—'} | "
            f"{_cell(', '.join(f'{i} {med[i]}' for i in shown_ours)) or '—'} | "
            f"{_cell(', '.join(f'{i} {med[i]}' for i in peers)) or '—'} | "
            f"{_cell(shown) or '—'} |"
        )
    return "\n".join(rows) + "\n"


def _css(claim: Mapping[str, Any]) -> str:
    return {"holds": "yes", "holds (legacy)": "yes", "fails": "no", "no (legacy)": "no"}.get(
        verdict(claim), "open"
    )


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def _html(groups, out: Path, header: str) -> str:
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>jaxlab report</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;"
        "padding:3px 8px;text-align:left}.no{color:#b00;font-weight:bold}.yes{color:#070}"
        ".open{color:#a60}.failed{color:#b00}pre{background:#f6f6f6;padding:.5em;overflow:auto}"
        "img{max-width:100%}</style></head><body>",
        "<h1>jaxlab report</h1>",
        f"<p>{e(header)}</p>",
    ]
    for paper, g in groups.items():
        parts.append(f"<h2 id='{e(paper)}'>{e(_title(paper))}</h2><p>{e(_cited(paper))}</p>")
        for f in g["failed"]:
            parts.append(
                f"<h3 class='failed'>{e(f['experiment'])} — FAILED</h3>"
                f"<p><code>{e(f['error'])}</code></p><pre>{e(f['traceback'])}</pre>"
            )
        for r in g["ok"]:
            parts.append(
                f"<h3>{e(r['experiment'])} <small>({e(r['config'])}, seed {r['seed']}, "
                f"{r['runtime_s']:.1f} s)</small></h3>"
                f"<p>{e(r.get('description', ''))}</p>"
            )
            if r["claims"]:
                rows = [
                    [
                        e(c["claim"]),
                        e(str(c["paper"])),
                        e(str(c["measured"])),
                        e(estimate_text(c)),
                        e(null_text(c)),
                        f"<span class='{_css(c)}'>{e(verdict(c))}</span>",
                    ]
                    for c in r["claims"]
                ]
                head = ["claim", "paper", "measured", "estimate [interval]", "null / baseline"]
                parts.append(_table([*head, "verdict"], rows))
            if r["metrics"]:
                rows = [[e(k), e(_fmt(v))] for k, v in r["metrics"].items()]
                parts.append(_table(["metric", "value"], rows))
            if r.get("notes"):
                parts.append(f"<p>{e(r['notes'])}</p>")
            for fig in r.get("figures", []):
                png = out / r["experiment"] / fig
                if png.is_file():
                    b64 = base64.b64encode(png.read_bytes()).decode()
                    parts.append(
                        f"<figure><img alt='{e(fig)}' src='data:image/png;base64,{b64}'>"
                        f"<figcaption>{e(fig)}</figcaption></figure>"
                    )
        for b in g["bench"]:
            parts.append(
                f"<h3>benchmark {e(b['bench'])} <small>({e(b['config'])})</small></h3>"
                f"<p>size: <code>{e(json.dumps(b['size']))}</code></p>"
            )
            rows = [
                [e(i), f"{t['median_s']:.4g}", f"{t['min_s']:.4g}", f"{t['max_s']:.4g}"]
                for i, t in b["timings"].items()
            ]
            parts.append(_table(["implementation", "median s", "min s", "max s"], rows))
            rows = [[e(k), f"{v:.3g}"] for k, v in b["ratios"].items()]
            parts.append(_table(["ratio (peer median / ours median)", "value"], rows))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(
    out: str | Path,
    *,
    names: Sequence[str] | None = None,
    failures: Sequence[dict[str, Any]] = (),
    header: str = "",
) -> tuple[Path, Path]:
    """Write DIR/REPORT.md and DIR/report.html; a failure hides an older success."""
    out = Path(out)
    failed_names = {f["experiment"] for f in failures}
    records = [r for r in load_records(out, names) if r["experiment"] not in failed_names]
    groups = _group(records, list(failures), _load_benches(out))
    md, page = out / "REPORT.md", out / "report.html"
    with atomic_write(md) as f:
        f.write(_markdown(groups, out, header))
    with atomic_write(page) as f:
        f.write(_html(groups, out, header))
    return md, page
