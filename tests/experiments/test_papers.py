"""The papers data file, its renderings (the docs' papers table, BibTeX, report) and that
every experiment, snapshot record and README summary row names its paper consistently."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from experiments import __main__ as cli
from experiments._harness import _papers, _snapshot
from experiments._harness._report import write_report

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PAPERS_PAGE = (ROOT / "docs" / "papers.md").read_text()


def _module_papers() -> dict[str, str]:
    """NAME -> PAPER of every experiment module, read from the source (nothing imported)."""
    out = {}
    for path in (ROOT / "experiments").glob("*/[!_]*.py"):
        if path.parent.name in ("bench", "_harness"):
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["PAPER"]:
                out[f"{path.parent.name}_{path.stem}"] = node.value.value
    return out


def test_every_paper_has_a_complete_entry_and_no_guessed_identifier():
    ids = [f"P{i}" for i in range(1, 20)]
    assert list(_papers.PAPERS) == [*ids, "interp", "LM"]
    for pid in _papers.PAPERS:
        e = _papers.paper_info(pid)
        ident = e["identifier"]
        # an identifier is either stated as missing or has the form of an arXiv id / DOI
        assert ident == "identifier not given" or re.fullmatch(
            r"arXiv:\d{4}\.\d{4,5}(v\d+)?|10\.\d{4,9}/\S+", ident
        ), (pid, ident)
        assert e["code"] == "" or e["code"].startswith("https://"), pid
        assert e["title_given"] or "(descriptive" in _papers.citation(pid)


def test_every_experiment_names_a_known_paper_and_readme_agrees():
    papers = _module_papers()
    assert len(papers) >= 37
    assert set(papers.values()) <= set(_papers.PAPERS)
    # every record of the results snapshot names its experiment's paper
    records = _snapshot.load_records(_snapshot.SNAPSHOT_DIR)
    wrong = sorted(
        (r["experiment"], r.get("paper"), papers.get(r["experiment"]))
        for r in records
        if r.get("paper") != papers.get(r["experiment"])
        or any(c.get("paper_id", r.get("paper")) != r.get("paper") for c in r.get("claims", []))
    )
    assert not wrong, f"snapshot records with another paper than the experiment: {wrong}"
    # README's claims summary has one row per paper that has experiments, in order
    summary = README.split("<!-- claims-summary:begin", 1)[1].split("<!-- claims-summary:end", 1)[0]
    rows = re.findall(r"^\| \[(P\d+|interp|LM)\]\(docs/results\.md#(\w+)\) \|", summary, flags=re.M)
    want = sorted(set(papers.values()), key=_papers.paper_sort_key)
    assert [p for p, _ in rows] == want
    assert all(anchor == p.lower() for p, anchor in rows)


def test_docs_papers_table_is_the_generated_one():
    table = PAPERS_PAGE.split("<!-- papers-table:begin", 1)[1].split("-->\n", 1)[1]
    table = table.split("<!-- papers-table:end -->", 1)[0]
    assert table == _papers.papers_table()
    assert "(docs/papers.md)" in README


def test_papers_cli_prints_the_table_and_bibtex(capsys):
    assert cli.main(["papers"]) == 0
    out = capsys.readouterr().out
    assert out == _papers.papers_table()
    assert "https://anonymous.4open.science/r/TopoBench-BF89" in out  # P18's code link
    assert cli.main(["papers", "--bibtex"]) == 0
    bib = capsys.readouterr().out
    entries = re.findall(r"^@misc\{jaxlab_(\w+),", bib, flags=re.M)
    assert entries == [p.lower() for p in _papers.PAPERS]
    assert bib.count("{") == bib.count("}")
    assert "identifier not given" in bib
    assert "url = {https://anonymous.4open.science" in bib


def test_report_sections_cite_their_paper(tmp_path):
    rec = {
        "experiment": "laplex_fake",
        "paper": "P9",
        "description": "d",
        "config": "quick",
        "seed": 0,
        "runtime_s": 1.0,
        "claims": [],
        "metrics": {},
        "figures": [],
    }
    (tmp_path / "laplex_fake").mkdir()
    (tmp_path / "laplex_fake" / "metrics.json").write_text(json.dumps(rec))
    md, page = write_report(tmp_path, names=["laplex_fake"], header="h")
    text = md.read_text()
    assert f"Paper: {_papers.citation('P9')}" in text
    assert "identifier not given" in page.read_text()


def test_citation_file_for_jaxlab_names_the_package_version():
    cff = (ROOT / "CITATION.cff").read_text()
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert "cff-version: 1.2.0" in cff
    assert f"version: {version.group(1)}" in cff
    assert "license: Apache-2.0" in cff
    assert "experiments/papers.toml" in cff
