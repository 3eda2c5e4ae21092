"""`--set KEY=VALUE` config overrides: parsed as JSON, checked against the config's fields."""

import dataclasses
import json
import types

import pytest

from experiments import __main__ as cli
from experiments._harness import _registry
from experiments._harness._api import Result
from experiments._harness._config import with_overrides
from experiments._harness._runner import run_experiment


@dataclasses.dataclass(frozen=True)
class _Config:
    n: int = 3
    rate: float = 0.5
    names: tuple[str, ...] = ("a", "b")
    flag: bool = False
    tag: str = "x"


def test_overrides_replace_fields_with_json_values():
    c = with_overrides(_Config(), ["n=7", "rate=2", 'names=["c"]', "flag=true", "tag=hello world"])
    assert c == _Config(n=7, rate=2, names=("c",), flag=True, tag="hello world")
    assert with_overrides(_Config(), []) == _Config()
    assert with_overrides(_Config(), ["tag=1=2"]).tag == "1=2"  # split at the first '='


@pytest.mark.parametrize(
    ("item", "match"),
    [
        ("m=3", "unknown key"),
        ("n", "expected KEY=VALUE"),
        ("=3", "expected KEY=VALUE"),
        ("n=1.5", "expected a value like 3"),
        ("n=true", "expected a value like 3"),
        ("names=3", "expected a value like"),
        ("rate=[1]", "expected a value like 0.5"),
        ("flag=1", "expected a value like False"),
    ],
)
def test_bad_overrides_are_value_errors(item, match):
    with pytest.raises(ValueError, match=match):
        with_overrides(_Config(), [item])


def _module():
    mod = types.ModuleType("test_exp_over")
    mod.NAME, mod.PAPER, mod.DESCRIPTION = "over", "P9", "test experiment over"
    mod.QUICK, mod.FULL = _Config(), _Config(n=30)
    mod.run = lambda config, key, ctx: Result(metrics={"n": config.n, "k": len(config.names)})
    return _registry.validate_module(mod)


def test_run_records_the_overridden_config(tmp_path):
    rec = run_experiment(_module(), out=tmp_path, overrides=["n=5", 'names=["z"]'])
    data = json.loads((tmp_path / "over" / "metrics.json").read_text())
    assert data == json.loads(json.dumps(rec))
    assert data["config"] == "quick+overrides"
    assert data["metrics"] == {"n": 5, "k": 1}
    assert data["config_values"]["n"] == 5
    assert data["config_values"]["names"] == ["z"]
    assert run_experiment(_module(), out=tmp_path)["config"] == "quick"


def test_cli_set_flag_and_bad_override_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(_registry, "find", lambda name, bench=False: _module())
    assert cli.main(["run", "over", "--out", str(tmp_path), "--set", "n=9"]) == 0
    assert json.loads((tmp_path / "over" / "metrics.json").read_text())["metrics"]["n"] == 9
    assert cli.main(["run", "over", "--out", str(tmp_path / "b"), "--set", "nn=9"]) == 2
    assert "override 'nn': unknown key" in capsys.readouterr().err
    assert not (tmp_path / "b" / "over").exists()  # refused before anything ran


@pytest.mark.parametrize("value", ["-5", "0", "100000", "true"])
def test_lm_sanity_refuses_a_bad_kv_tokens_before_loading_a_model(value, tmp_path, capsys):
    """Issue #60: `--set kv_tokens=-5` ran 18 s and died with a traceback; now a usage
    error (exit 2) before anything runs, naming the field and its range."""
    out = tmp_path / "out"
    assert cli.main(["run", "lm_sanity", "--out", str(out), "--set", f"kv_tokens={value}"]) == 2
    assert "kv_tokens" in capsys.readouterr().err
    assert not (out / "lm_sanity").exists()
