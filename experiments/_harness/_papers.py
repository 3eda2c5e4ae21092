"""The nineteen papers (and the shared LM runtime) the experiments re-check.

One data file, `experiments/papers.toml`, holds each paper's citation as far as it is
known (title, authors, venue/year, arXiv/DOI, code link); every experiment's PAPER is
one of its ids. `PAPERS` maps id -> (component, title) for the report headings;
`citation(id)`, `bibtex(id)` and `papers_table()` render it.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["PAPERS", "paper_info", "citation", "bibtex", "papers_table", "paper_sort_key"]

PAPERS_FILE = Path(__file__).resolve().parents[1] / "papers.toml"
_FIELDS = ("component", "title", "title_given", "authors", "venue", "year", "identifier", "code")


def _load() -> dict[str, dict[str, Any]]:
    with open(PAPERS_FILE, "rb") as f:
        data = tomllib.load(f)
    for pid, entry in data.items():
        missing = [k for k in _FIELDS if k not in entry]
        if missing:
            raise ValueError(f"{PAPERS_FILE}: [{pid}] lacks {', '.join(missing)}")
    return data


_INFO = _load()
PAPERS: dict[str, tuple[str, str]] = {k: (v["component"], v["title"]) for k, v in _INFO.items()}


def paper_info(paper: str) -> dict[str, Any]:
    """The papers.toml entry of `paper` (`KeyError` naming the known ids otherwise)."""
    try:
        return _INFO[paper]
    except KeyError:
        raise KeyError(f"unknown paper {paper!r}; known: {', '.join(_INFO)}") from None


def citation(paper: str) -> str:
    """One line: title (marked when it is jaxlab's description), authors, venue, year,
    identifier and code link."""
    e = paper_info(paper)
    title = e["title"] if e["title_given"] else f"{e['title']} (descriptive title)"
    parts = [title, e["authors"], f"{e['venue']}, {e['year']}", e["identifier"]]
    if e["code"]:
        parts.append(f"code: {e['code']}")
    return "; ".join(parts)


def bibtex(paper: str) -> str:
    """A BibTeX entry for `paper`: `@misc` with the fields known, the rest in `note`."""
    e = paper_info(paper)
    notes = []
    if not e["title_given"]:
        notes.append("descriptive title by jaxlab; the paper's title is not given")
    notes.append(f"authors: {e['authors']}")
    notes.append(e["identifier"])
    if e.get("opening"):
        notes.append(f"abstract opens: {e['opening']}")
    fields = {"title": e["title"], "howpublished": e["venue"], "year": str(e["year"])}
    if e["code"]:
        fields["url"] = e["code"]
    fields["note"] = "; ".join(notes)
    body = ",\n".join(f"  {k} = {{{_bib_escape(v)}}}" for k, v in fields.items())
    return f"@misc{{jaxlab_{paper.lower()},\n{body}\n}}"


def _bib_escape(text: str) -> str:
    return re.sub(r"([&%#_$])", r"\\\1", str(text))


def papers_table() -> str:
    """Markdown table of every paper: id, component, title, authors, venue/year,
    identifier, code (README's papers table)."""
    rows = [
        "| paper | component | title | authors | venue, year | arXiv / DOI | code |",
        "|---|---|---|---|---|---|---|",
    ]
    for pid in sorted(_INFO, key=paper_sort_key):
        e = _INFO[pid]
        title = e["title"] if e["title_given"] else f"{e['title']} (descriptive)"
        code = f"<{e['code']}>" if e["code"] else "—"
        rows.append(
            f"| {pid} | `jaxlab.{e['component']}` | {title} | {e['authors']} | "
            f"{e['venue']}, {e['year']} | {e['identifier']} | {code} |"
        )
    return "\n".join(rows) + "\n"


def paper_sort_key(paper: str) -> int:
    """P1 < P2 < ... < P19 (numeric, not lexical), then the other sections in papers.toml's
    order (jaxlab's own targets, the shared LM runtime); unknown papers last."""
    if re.fullmatch(r"P\d+", paper):
        return int(paper[1:])
    if paper in PAPERS:
        return 1_000 + list(PAPERS).index(paper)
    return 10_000
