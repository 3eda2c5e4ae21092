"""The README's install-without-make path on a fresh venv (slow: builds a venv).

Fresh venv, `pip install -e ".[lm]"`, `python -m jaxlab.data install --only smollm2 gemma3`,
`python -m jaxlab.data status`, then one experiment (`lm_sanity`) writes its metrics.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args, ok=(0,), **kw):
    out = subprocess.run(args, capture_output=True, text=True, timeout=1800, **kw)
    assert out.returncode in ok, f"{args}\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    return out.stdout


@pytest.mark.slow
def test_readme_install_path_on_a_fresh_venv(tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    _run([py, "-m", "pip", "install", "-q", "-e", f"{ROOT}[lm]"])
    _run([py, "-m", "jaxlab.data", "install", "--only", "smollm2", "gemma3"])
    status = _run([py, "-m", "jaxlab.data", "status"], ok=(0, 1))  # 1: some entries missing
    rows = {tuple(line.split()[:2]) for line in status.splitlines()}
    assert ("ok", "smollm2") in rows
    assert ("ok", "gemma3") in rows
    env = {**os.environ, "JAXLAB_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTHONPATH", None)
    _run(
        [py, "-m", "experiments", "run", "lm_sanity", "--out", str(tmp_path / "res")],
        cwd=ROOT,
        env=env,
    )
    metrics = json.loads((tmp_path / "res" / "lm_sanity" / "metrics.json").read_text())
    assert metrics["claims"]
    assert any("Paris" in c["measured"] for c in metrics["claims"])
