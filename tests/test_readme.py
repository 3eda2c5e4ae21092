"""README.md as a user guide: short, its links resolve, its example runs, its claims
summary is the generated one (tests/experiments/test_snapshot.py checks the numbers)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_is_a_short_user_guide():
    assert len(README.encode()) <= 12 * 1024
    heads = re.findall(r"^## (.+)$", README, flags=re.M)
    for want in ("Install", "The two commands", "A quick example", "Components", "Claims"):
        assert want in heads
    assert "Citation" in heads
    # the two commands, and the smoke / dry-run lines
    assert "make reproduce" in README
    assert "make test" in README
    assert "--tiny" in README
    assert "--full --dry-run" in README


def test_readme_links_resolve():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert links
    missing = [u for u in links if "://" not in u and not (ROOT / u).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_readme_component_table_links_every_component_page():
    section = README.split("## Components", 1)[1].split("\n## ", 1)[0]
    linked = set(re.findall(r"\(docs/components/(\w+)\.md\)", section))
    pages = {p.stem for p in (ROOT / "docs" / "components").glob("*.md") if p.stem != "index"}
    assert linked == pages
    packages = {p.name for p in (ROOT / "jaxlab").iterdir() if (p / "__init__.py").exists()} - {
        "_core",
        "_kernels",
    }
    assert linked == {p for p in packages if not p.startswith("_")}


def test_readme_claims_summary_is_a_generated_block():
    section = README.split("## Claims", 1)[1].split("\n## ", 1)[0]
    assert "<!-- claims-summary:begin" in section
    assert "<!-- claims-summary:end -->" in section
    assert re.search(r"\d+ of 63 experiments are in the snapshot", section)
    assert "| holds | fails | inconclusive | untestable | legacy |" in section


def test_readme_quick_example_runs():
    (code,) = re.findall(r"## A quick example\n\n```python\n(.*?)```", README, flags=re.S)
    # the same calls at a smaller size, run here, then checked against the dense matrix
    ns: dict = {}
    exec(compile(code.replace("100_000", "300"), "README.md", "exec"), ns)
    t, v, y, g = (np.asarray(ns[k], np.float64) for k in ("t", "v", "y", "g"))
    dense = np.exp(-3.0 * np.abs(t[0][:, None] - t[0][None, :])) @ v
    np.testing.assert_allclose(y, dense, rtol=1e-4, atol=1e-4)
    assert g.shape == t.shape
    assert np.isfinite(g).all()
