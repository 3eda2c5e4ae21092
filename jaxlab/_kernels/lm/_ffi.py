"""`QuantMatmulLibrary`: build, register and call one of `kernels/lm`'s quantised-matmul
libraries (the shared part of `_cpu.py` and `_q8.py`).

Each library is one C++ source (with `lm_matmul.h`) compiled on first use with
`-march=native` (cached per CPU model, `jaxlab._kernels._build`) and registered as an XLA
FFI target for the CPU platform; `portable=True` builds a second library with
`-DJAXLAB_LM_PORTABLE` (the portable C++ loop whatever the CPU) so the tests can check
it too. The library exports the FFI handler and a `...Isa()` function naming the vector
path it compiled.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .._build import build_shared_library, cpu_tag, load_cpu_targets, source_dir
from ._stack import stack_layer

_HEADER_NAMES = ("lm_matmul.h",)


@dataclasses.dataclass(frozen=True)
class QuantMatmulLibrary:
    """One kernel library: `name` ("qmatmul"), its C++ `source`, FFI `handler` and `isa`
    symbols, and extra compiler `flags`."""

    name: str
    source: str
    handler: str
    isa_symbol: str
    flags: tuple[str, ...] = ()

    def target(self, portable: bool) -> str:
        return f"jaxlab_lm_{self.name}{'_portable' if portable else ''}_f32"

    def build(self, *, portable: bool = False, force: bool = False) -> Path:
        d = source_dir("lm", [self.source, *_HEADER_NAMES])
        flags = ["-march=native", *self.flags]
        return build_shared_library(
            f"lm_{self.name}{'_portable' if portable else ''}",
            [d / self.source],
            [d / h for h in _HEADER_NAMES],
            flags=[*flags, "-DJAXLAB_LM_PORTABLE"] if portable else flags,
            tag_extra=cpu_tag(),
            force=force,
        )

    def register(self, portable: bool) -> ctypes.CDLL | None:
        return _register(self, portable)

    def available(self, *, portable: bool = False) -> bool:
        return self.register(portable) is not None

    def _library(self, caller: str, portable: bool) -> ctypes.CDLL:
        lib = self.register(portable)
        if lib is None:
            raise RuntimeError(f"{caller}: the C++ kernel is unavailable (no compiler?)")
        return lib

    def isa(self, caller: str, *, portable: bool = False) -> str:
        fn = getattr(self._library(caller, portable), self.isa_symbol)
        fn.restype = ctypes.c_char_p
        return fn().decode()

    def call(self, caller: str, x, q, scale, offset, *, bits: int, layer, portable: bool):
        self._library(caller, portable)
        if jnp.dtype(q.dtype) not in (jnp.int8, jnp.uint8):
            raise ValueError(f"q: expected int8 or uint8 levels, received {jnp.dtype(q.dtype)}")
        layer = stack_layer(caller, q, scale, offset, layer)
        out = jax.ShapeDtypeStruct((x.shape[0], q.shape[-2]), jnp.float32)
        ffi = jax.ffi.ffi_call(self.target(portable), out)
        return ffi(x, q, scale, offset, layer, bits=np.int32(bits))


@functools.cache
def _register(lib: QuantMatmulLibrary, portable: bool) -> ctypes.CDLL | None:
    return load_cpu_targets(
        functools.partial(lib.build, portable=portable), {lib.target(portable): lib.handler}
    )
