"""The built wheel: one top-level package, `jaxlab`, with the C++ kernel sources inside it;
the kernels build and load from an installed wheel as from the repository checkout."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KERNEL_SOURCES = sorted(
    p.name for p in (ROOT / "kernels" / "laplex").iterdir() if p.suffix in (".cc", ".h")
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("hatchling")  # the build backend, from the `test` extra
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (whl,) = out.glob("jaxlab-*.whl")
    return whl


def test_wheel_has_one_top_level_package_with_the_kernel_sources(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"jaxlab"}
    assert not any(n.startswith(("kernels/", "experiments/", "tests/")) for n in names)
    assert len(KERNEL_SOURCES) >= 5  # laplex_{scan,fused,plan}.cc and two headers
    shipped = {n.rsplit("/", 1)[1] for n in names if n.startswith("jaxlab/_kernels/laplex/")}
    assert set(KERNEL_SOURCES) <= shipped
    assert "_cpu.py" in shipped
    assert "jaxlab/_kernels/stereo/stereo_sgm.cc" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)


def test_checkout_compiles_the_repository_sources():
    from jaxlab._kernels.laplex import source_dir

    assert source_dir() == ROOT / "kernels" / "laplex"


@pytest.mark.slow  # a fresh interpreter imports jax and the library from the wheel: ~15 s
def test_kernels_build_and_load_from_the_installed_wheel(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    code = (
        "import jax, jax.numpy as jnp, numpy as np\n"
        "jax.config.update('jax_enable_x64', True)\n"
        "import jaxlab, jaxlab.laplex as L\n"
        "from jaxlab._kernels.laplex import source_dir\n"
        "print(jaxlab.__file__); print(source_dir()); assert L.cpu_kernel_available()\n"
        "rng = np.random.default_rng(0)\n"
        "t = jnp.asarray(np.sort(rng.uniform(0, 1, (1, 40)), 1)); a = c = jnp.ones(1)\n"
        "v = jnp.asarray(rng.normal(size=40))\n"
        "y = L.matvec(v, t, t, a, c=c, scan=L.CpuScan())\n"
        "print(float(jnp.max(jnp.abs(y - L.dense_matrix(t, t, a, c=c) @ v))))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    where, sources, err = proc.stdout.split()
    assert where == str(target / "jaxlab" / "__init__.py")
    assert sources == str(target / "jaxlab" / "_kernels" / "laplex")
    assert float(err) < 1e-12


def test_sweep_is_public():
    import jax.numpy as jnp
    import numpy as np

    import jaxlab

    out = jaxlab.sweep(lambda x: {"sq": x**2}, jnp.arange(5.0))
    np.testing.assert_array_equal(out["sq"], np.arange(5.0) ** 2)


def test_readme_install_path_works_outside_make_and_docs_are_in_the_repo():
    readme = (ROOT / "README.md").read_text()
    assert "shared folder" not in readme
    assert "(docs/design.md)" in readme
    assert (ROOT / "docs" / "design.md").is_file()
    section = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    assert 'pip install -e ".[all]"' in section
    assert "python -m jaxlab.data install" in section
    # every data entry the README names exists in the catalogue
    from jaxlab.data import CATALOGUE

    names = {d.name for d in CATALOGUE}
    for word in re.findall(r"jaxlab\.data install --only ([\w.-]+)", readme):
        assert word in names, word
