"""Compiling the C++ XLA-FFI kernels on first use, into a per-user cache (shared by
`jaxlab._kernels.laplex` and `jaxlab._kernels.lm`).

The C++ sources live in the repository's `kernels/<component>/` and ship inside the
wheel beside the Python module that loads them (`jaxlab/_kernels/<component>/`);
`source_dir` finds them in either place.

The shared library is named by a hash of its sources, headers, compiler flags and
the jaxlib version, built with the system C++ compiler against the FFI headers
that jaxlib ships (`jax.ffi.include_dir()`), and published atomically (temp file +
rename), so concurrent processes are safe.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import jax
import jaxlib.version

__all__ = ["build_shared_library", "cpu_tag", "kernel_cache_dir", "source_dir"]


def kernel_cache_dir() -> Path:
    """`$JAXLAB_CACHE_DIR/kernels` (else `$XDG_CACHE_HOME/jaxlab/kernels`, else
    `~/.cache/jaxlab/kernels`): beside every other cache of jaxlab and its experiments."""
    if root := os.environ.get("JAXLAB_CACHE_DIR"):
        return Path(root) / "kernels"
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "jaxlab" / "kernels"


def cpu_tag() -> bytes:
    """The machine name and the CPU's flags (for libraries built with `-march=native`)."""
    try:
        with open("/proc/cpuinfo", "rb") as f:
            flags = next((ln for ln in f if ln.startswith(b"flags")), b"")
    except OSError:
        flags = b""
    return platform.machine().encode() + flags


def source_dir(component: str, names: Sequence[str]) -> Path:
    """The folder holding the C++ sources `names` of `component`: beside its module in an
    installed wheel, or the repository's `kernels/<component>/` in a source checkout
    (editable installs included). Raises `RuntimeError` naming the folders looked in."""
    here = Path(__file__).resolve().parent / component
    candidates = (here, Path(__file__).resolve().parents[2] / "kernels" / component)
    for d in candidates:
        if all((d / f).is_file() for f in names):
            return d
    raise RuntimeError(
        f"{component} CPU kernel: C++ sources "
        + ", ".join(names)
        + " not found in "
        + " or ".join(map(str, candidates))
    )


def build_shared_library(
    stem: str,
    sources: Sequence[Path],
    headers: Sequence[Path] = (),
    *,
    flags: Sequence[str] = (),
    tag_extra: bytes = b"",
    force: bool = False,
) -> Path:
    """Compile `sources` into `<cache>/<stem>_<hash>.so` unless it exists; returns its path.

    Raises `RuntimeError` with the compiler output when no compiler is found or
    compilation fails.
    """
    src = b"".join(Path(p).read_bytes() for p in (*sources, *headers))
    flags = ["-O3", "-std=c++17", *flags]
    key = src + jaxlib.version.__version__.encode() + " ".join(flags).encode() + tag_extra
    tag = hashlib.sha256(key).hexdigest()[:16]
    out = kernel_cache_dir() / f"{stem}_{tag}.so"
    if out.exists() and not force:
        return out
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        raise RuntimeError(f"{stem}: no C++ compiler found (set CXX)")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
    os.close(fd)
    cmd = [
        cxx,
        *flags,
        "-shared",
        "-fPIC",
        "-pthread",
        "-w",
        f"-I{jax.ffi.include_dir()}",
        *map(str, sources),
        "-o",
        tmp,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        os.unlink(tmp)
        raise RuntimeError(f"{stem}: compilation failed:\n{proc.stderr[-4000:]}")
    os.replace(tmp, out)
    return out


def load_cpu_targets(build: Callable[[], Path], targets: Mapping[str, str]) -> ctypes.CDLL | None:
    """Build (cached) and load a kernel library, registering `targets` (FFI target name ->
    exported symbol) on the CPU platform; None when it cannot be built or loaded."""
    try:
        lib = ctypes.cdll.LoadLibrary(str(build()))
    except (RuntimeError, OSError):
        return None
    for name, symbol in targets.items():
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
    return lib
