"""Which vector sits in which row: the canonical order of {m_r, n_r, I_k, w}."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool

from jaxlab._core import check_positive_int

__all__ = ["OverlapLayout"]


class OverlapLayout(eqx.Module):
    """Row order of the stacked connectivity vectors of a rank-`R` RNN with `K` inputs.

    The vectors are stacked as `V = [m_1..m_R, n_1..n_R, I_1..I_K, w]`, shape
    `(P, N)` with `P = 2R + K + 1`, and the overlap (Gram) matrix is
    `G = V V^T / N`, shape `(P, P)` (paper P1: the reduced overlap space).

    **Arguments:**

    - `rank`: the rank `R >= 1` of `J = (1/N) sum_r m_r n_r^T`.
    - `n_inputs`: the number `K >= 1` of input vectors `I_k`.
    """

    rank: int = eqx.field(static=True)
    n_inputs: int = eqx.field(static=True)

    def __init__(self, rank: int, n_inputs: int):
        self.rank = check_positive_int("rank", rank)
        self.n_inputs = check_positive_int("n_inputs", n_inputs)

    @property
    def size(self) -> int:
        """`P = 2R + K + 1`, the number of vectors."""
        return 2 * self.rank + self.n_inputs + 1

    @property
    def m_rows(self) -> np.ndarray:
        return np.arange(self.rank)

    @property
    def n_rows(self) -> np.ndarray:
        return np.arange(self.rank, 2 * self.rank)

    @property
    def input_rows(self) -> np.ndarray:
        return np.arange(2 * self.rank, 2 * self.rank + self.n_inputs)

    @property
    def readout_row(self) -> int:
        return 2 * self.rank + self.n_inputs

    @property
    def state_rows(self) -> np.ndarray:
        """Rows spanning the activity `x`: `[m_1..m_R, I_1..I_K]`."""
        return np.concatenate([self.m_rows, self.input_rows])

    @property
    def labels(self) -> tuple[str, ...]:
        """Names of the vectors in row order, e.g. `("m1", "n1", "I1", "w")`."""
        r, k = self.rank, self.n_inputs
        return (
            tuple(f"m{i + 1}" for i in range(r))
            + tuple(f"n{i + 1}" for i in range(r))
            + tuple(f"I{i + 1}" for i in range(k))
            + ("w",)
        )

    def overlap_names(self) -> list[str]:
        """Names `"a.b"` of the `P(P+1)/2` distinct overlaps, upper triangle row-major."""
        lab = self.labels
        iu, ju = np.triu_indices(self.size)
        return [f"{lab[i]}.{lab[j]}" for i, j in zip(iu, ju, strict=True)]

    def trained_mask(
        self, *, m: bool = True, n: bool = True, inputs: bool = False, readout: bool = False
    ) -> Bool[Array, " P"]:
        """Boolean mask `(P,)` of the vectors trained by gradient descent."""
        mask = np.zeros(self.size, dtype=bool)
        mask[self.m_rows] = m
        mask[self.n_rows] = n
        mask[self.input_rows] = inputs
        mask[self.readout_row] = readout
        return jnp.asarray(mask)
