"""The eeg experiment modules run the deep models at QUICK size and resume deep training
from checkpoints when the runner says so (their TINY runs, metric keys and FULL dry runs:
tests/smoke)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import types

import pytest

from experiments._harness._registry import find
from experiments._harness._runner import run_experiment


def test_quick_configs_run_the_deep_models():
    state = importlib.import_module("experiments.eeg.state").QUICK
    assert {"eegnet", "shallow"} <= set(state.deep_models)
    for name in ("eeg_technique", "eeg_cross_session"):
        assert {"eegnet", "shallow"} <= set(find(name).QUICK.deep_models)


def _tiny(name, **extra):
    """The module with its TINY config (changed by `extra`) as QUICK."""
    mod = find(name)
    return types.SimpleNamespace(
        NAME=mod.NAME,
        PAPER=mod.PAPER,
        DESCRIPTION=mod.DESCRIPTION,
        QUICK=dataclasses.replace(mod.TINY, **extra),
        FULL=mod.FULL,
        run=mod.run,
    )


@pytest.mark.slow  # trains two small deep models twice: ~30 s idle
def test_cross_session_deep_keys_and_resume(tmp_path):
    mod = _tiny("eeg_cross_session", models=("lda",), deep_models=("shallow", "deep"))
    first = run_experiment(mod, out=tmp_path)
    m = first["metrics"]
    for model in ("lda", "shallow", "deep"):
        for prefix in ("bacc_within", "bacc_cross", "bacc_within_aligned", "bacc_cross_aligned"):
            assert 0.0 <= m[f"{prefix}_{model}"] <= 1.0
    ckpts = sorted(p.name for p in (tmp_path / "eeg_cross_session" / "checkpoints").iterdir())
    assert "eeg_cross_bacc_within_shallow_fold0.eqx" in ckpts
    # the aligned training scores within + EA and cross + EA (one training per fold)
    assert "eeg_aligned_bacc_within_aligned_deep_fold1.eqx" in ckpts
    # resuming from the finished checkpoints reproduces every metric without retraining
    again = run_experiment(mod, out=tmp_path, resume=True)
    assert again["metrics"] == first["metrics"]
    assert (
        json.loads((tmp_path / "eeg_cross_session" / "metrics.json").read_text())["metrics"]
        == first["metrics"]
    )
