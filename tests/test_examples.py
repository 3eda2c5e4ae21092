"""Every example in `examples/` runs: one subprocess per example at its default (tiny) size,
with the Agg backend, and it must write its figure. The examples are jupytext
percent-format scripts rendered into the docs site, so a library change that breaks one
fails here rather than on a reader's Colab.

The default suite runs the examples that take a few seconds of CPU; the others (a model
load plus several compilations, 15-40 s of CPU each on the shared 2-core machine) are
marked slow: `pytest -m slow tests/test_examples.py`.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
# CPU seconds measured on 2026-12-01 (2 shared cores, load 8-14), user time of the process:
# >= ~14 s. Each loads a model or compiles a training step (SmolLM2, a VAE, an SAE sweep).
SLOW = {
    "cells": 35,
    "cslm": 15,
    "eeg": 21,
    "illusions": 18,
    "interp": 24,
    "lengthprobe": 38,
    "lm": 14,
    "observers": 20,
    "scale": 14,  # 2026-12-06: 13 s user + sys on 1 device (load 16), SmolLM2 load + 3 compiles
    "sensing": 40,
    "topology": 23,
}
TIMEOUT_S = 300  # per example; the default ones take 3-11 s of CPU


def _params():
    for path in EXAMPLES:
        marks = [pytest.mark.slow] if path.stem in SLOW else []
        yield pytest.param(path, id=path.stem, marks=marks)


def test_every_component_has_an_example():
    # read from the source: importing every component would cost ~15 s
    comps = {
        p.parent.name for p in (ROOT / "jaxlab").glob("*/__init__.py") if p.parent.name[0] != "_"
    }
    # `data` is the catalogue of data wheels, shown on its page, not a method to demonstrate
    missing = sorted(comps - {"data"} - {p.stem for p in EXAMPLES})
    assert not missing, f"components without an example in examples/: {missing}"
    assert set(SLOW) <= {p.stem for p in EXAMPLES}
    for comp in comps - {"data"}:
        doc = ast.get_docstring(ast.parse((ROOT / "jaxlab" / comp / "__init__.py").read_text()))
        doc = doc or ""
        assert f"examples/{comp}.py" in doc, f"jaxlab.{comp}'s docstring does not name its example"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_layout(path):
    """A markdown title cell, a commented Colab install cell, a FULL switch, a core cell."""
    text = path.read_text()
    # jupytext turns "# !pip" into a live "!pip" in the notebook unless comment_magics is off
    assert text.startswith("# ---\n# jupyter:\n#   jupytext:\n#     comment_magics: false\n")
    cells = re.split(r"^# %%", text, flags=re.M)[1:]
    assert cells[0].startswith(" [markdown]\n# # "), "first cell: a markdown title"
    colab = cells[1]
    assert "Colab" in colab, "second cell: the Colab install"
    assert "# !pip install" in colab, "second cell: the Colab install"
    assert all(ln.startswith("#") for ln in colab.strip().splitlines()[1:]), "left commented"
    assert re.search(r'^FULL = os\.environ\.get\("JAXLAB_FULL"\) == "1"', text, flags=re.M)
    assert sum('tags=["core"]' in c.split("\n", 1)[0] for c in cells) == 1, "one core cell"
    assert f'"{path.stem}.png"' in text, "saves its figure as <name>.png"


@pytest.mark.parametrize("path", list(_params()))
def test_example_runs(path, tmp_path):
    env = {
        **os.environ,
        "MPLBACKEND": "Agg",
        "JAXLAB_EXAMPLE_OUT": str(tmp_path),
        "JAXLAB_FULL": "0",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, str(path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, (
        f"{path.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
    png = tmp_path / f"{path.stem}.png"
    assert png.exists(), f"{path.name} drew no figure"
    assert png.stat().st_size > 5000, f"{path.name}'s figure is empty"
