"""The `layer` operand of the LM matmul kernels: one layer of a stacked weight, by index.

A model's per-layer weights are stacked on a leading layer axis L and its layers run
under `lax.scan`. Slicing `q[i]` there and handing the slice to a custom call makes XLA
copy the slice on every step (a custom call needs its operand as a buffer of its own),
which doubles the bytes a memory-bound decode step moves. So the kernels also take the
whole stack, q (L, N, K') with scale and offset (L, N, K/32), plus a scalar int32
`layer` (a traced value: the scan counter), and offset their pointers to layer
`layer` in C++; an index outside [0, L) is an error of the call, never a wild read.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

__all__ = ["stack_layer"]


def stack_layer(name: str, q, scale, offset, layer):
    """The `layer` operand for weights (N, K') or a stack (L, N, K'), checked.

    **Arguments:**

    - `name`: the calling kernel (for error messages).
    - `q`, `scale`, `offset`: (N, K'), (N, K/32), (N, K/32), or each with a leading L.
    - `layer`: None for 2-D weights; a scalar int (may be traced) for a stack.

    **Returns:** a scalar int32 (0 for 2-D weights). Raises ValueError naming `layer`
    (missing for a stack, given for 2-D weights, not a scalar integer) or `q` (rank).
    """
    if q.ndim not in (2, 3) or scale.ndim != q.ndim or offset.ndim != q.ndim:
        raise ValueError(
            f"{name}: q, scale, offset: expected (N, K'), (N, K/32) or a layer stack "
            f"(L, N, K'), (L, N, K/32), received {q.shape}, {scale.shape}, {offset.shape}"
        )
    if q.ndim == 2:
        if layer is not None:
            raise ValueError(f"{name}: layer: only for a stacked (L, N, K') q, got 2-D q")
        return np.int32(0)
    if layer is None:
        raise ValueError(f"{name}: layer: a stacked (L, N, K') q needs the layer index")
    lay = jnp.asarray(layer)
    if lay.ndim != 0 or not jnp.issubdtype(lay.dtype, jnp.integer):
        got = f"{lay.dtype}{lay.shape}"
        raise ValueError(f"{name}: layer: expected a scalar integer, received {got}")
    return lay.astype(jnp.int32)
