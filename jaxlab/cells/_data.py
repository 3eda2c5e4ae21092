"""Single-cell data: the real PBMC data set scanpy's wheel ships, AnnData checks,
documented synthetic batch effects and a spiked interferon-response program.

`load_pbmc68k()` reads `scanpy/datasets/10x_pbmc68k_reduced.h5ad` (700 real
PBMCs x 765 genes, cell types in `obs["bulk_labels"]`) through
`importlib.metadata` — scanpy itself is not imported. The file stores
log1p(counts / n_counts * 1e4) in `.raw`; counts are recovered exactly as
round(expm1(raw) * n_counts / 1e4) (a count of 1 maps to 1e4 / n_counts).

Paper: P5 (LeCellModel).
"""

from __future__ import annotations

import importlib.metadata
import warnings
from typing import Any

import jax
import numpy as np

from jaxlab._core import (
    as_array,
    check_positive_int,
    check_real,
    check_size,
    check_strings,
    numpy_rng,
)

__all__ = [
    "load_pbmc68k",
    "counts_matrix",
    "simulate_batches",
    "spike_program",
    "INTERFERON_PROGRAM",
    "log_normalize",
]

# Interferon-stimulated genes present among the 765 genes of pbmc68k_reduced
# (canonical ISGs; PSME2 and TYMP are IFN-gamma/alpha inducible).
INTERFERON_PROGRAM = (
    "OAS1",
    "LY6E",
    "BST2",
    "IRF7",
    "IRF1",
    "ISG20",
    "IFITM1",
    "IFITM2",
    "IFITM3",
    "SP110",
    "SP100",
    "GBP2",
    "IRF8",
    "IFI30",
    "PSME2",
    "TYMP",
)
"""Interferon-stimulated genes present among the 765 genes of pbmc68k_reduced (the perturbation
program of the cells experiments)."""


def _anndata():
    import anndata

    return anndata


def load_pbmc68k():
    """Real PBMCs from scanpy's wheel, as AnnData with pseudo-exact counts in `X`.

    Returns AnnData (700 x 765): `X` counts (float32), `layers["logcounts"]`
    the file's log-normalised values, `obs` with `bulk_labels` and `n_counts`.
    """
    try:
        dist = importlib.metadata.distribution("scanpy")
    except importlib.metadata.PackageNotFoundError as e:
        raise FileNotFoundError(
            "the PBMC data ship inside the 'scanpy' wheel: pip install scanpy"
        ) from e
    files = [f for f in (dist.files or []) if str(f).endswith("10x_pbmc68k_reduced.h5ad")]
    if not files:
        raise FileNotFoundError("scanpy is installed but 10x_pbmc68k_reduced.h5ad is missing")
    with warnings.catch_warnings():
        # The shipped file predates anndata's current on-disk encoding (no encoding metadata,
        # graphs in uns rather than obsp): anndata converts it and warns; the data are intact.
        # Scoped to this one read of a known file.
        warnings.simplefilter("ignore")
        # Any: anndata types .raw.X / .obs loosely (a union of backed and in-memory types).
        src: Any = _anndata().read_h5ad(str(dist.locate_file(files[0])))
    raw = src.raw.X
    raw = raw.toarray() if hasattr(raw, "toarray") else np.asarray(raw)
    n_counts = src.obs["n_counts"].to_numpy(dtype=np.float64)
    counts = np.rint(np.expm1(raw.astype(np.float64)) * n_counts[:, None] / 1e4)
    out = _anndata().AnnData(
        X=counts.astype(np.float32),
        obs=src.obs[["bulk_labels", "n_counts", "louvain"]].copy(),
        var=src.raw.var[[]].copy(),
    )
    out.layers["logcounts"] = raw.astype(np.float32)
    out.uns["source"] = "scanpy wheel: datasets/10x_pbmc68k_reduced.h5ad (10x Genomics PBMC)"
    return out


def _check_adata(adata) -> None:
    """An AnnData-like object (`X`, `layers`, `obs`, `var_names`), else a ValueError."""
    if not all(hasattr(adata, a) for a in ("X", "layers", "obs", "var_names")):
        raise ValueError(f"adata: expected an AnnData, received {type(adata).__name__}")


def counts_matrix(adata, layer: str | None = None, *, min_cells: int = 10) -> np.ndarray:
    """Dense float32 counts from `adata.X` or `adata.layers[layer]`, validated.

    Accepts an AnnData, a `layer` among `adata.layers` (or None: `X`) and a positive
    integer `min_cells`. Raises ValueError for anything else, too few cells, negative
    or non-finite values.
    """
    _check_adata(adata)
    check_positive_int("min_cells", min_cells)
    if layer is not None and layer not in adata.layers:
        raise ValueError(
            f"layer: expected one of {sorted(adata.layers)} or None, received {layer!r}"
        )
    x = adata.X if layer is None else adata.layers[layer]
    if x.shape[0] < min_cells:  # before the dense copy below
        raise ValueError(
            f"adata / min_cells: expected at least min_cells={min_cells} cells, received "
            f"{x.shape[0]}"
        )
    x = x.toarray() if hasattr(x, "toarray") else np.asarray(x)
    x = x.astype(np.float32)
    if not np.all(np.isfinite(x)):
        raise ValueError("adata: expected finite counts, received NaN/inf entries")
    if np.any(x < 0):
        raise ValueError(
            "adata: expected non-negative counts, received negative values "
            "(pass raw counts, not scaled data)"
        )
    return x


def log_normalize(counts: np.ndarray, target: float = 1e4) -> np.ndarray:
    """log1p(counts / library size * target), the scanpy convention.

    **Arguments:** `counts` `(N, G)` finite, non-negative; `target` a finite number > 0.
    Anything else raises a `ValueError` naming the argument. Fractional counts are
    accepted (ambient-corrected or rescaled matrices, as in scanpy), and no cells,
    `(0, G)`, gives an empty `(0, G)` result.
    """
    as_array("counts", counts, ndim=2, finite=True, low=0.0)
    counts = np.asarray(counts)
    target = check_real("target", target, low=0.0, low_inclusive=False)
    lib = np.maximum(counts.sum(1, keepdims=True), 1.0)
    return np.log1p(counts / lib * target).astype(np.float32)


def simulate_batches(adata, n_batches: int = 3, *, key: jax.Array, strength: float = 1.0):
    """Split cells at random into batches and apply documented technical effects.

    `key` (keyword-only) is the only randomness (a NumPy generator seeded by its bits).

    Per batch b: library size scaled by exp(N(0, 0.4 * strength)); each gene scaled
    by exp(N(0, 0.3 * strength)) (capture efficiency); extra dropout of non-zero
    counts with probability 0.1 * b * strength; counts re-drawn as Poisson. Returns a
    copy with `obs["batch"]` (categorical).

    Accepts `n_batches` a positive integer at most the number of cells and `strength` a
    finite number >= 0; anything else raises a `ValueError` naming the argument.
    """
    strength = check_real("strength", strength, low=0.0)
    x = counts_matrix(adata)
    n_batches = check_size("n_batches", n_batches, cap=x.shape[0], why="the number of cells")
    rng = numpy_rng(key)
    batch = rng.integers(0, n_batches, size=x.shape[0])
    out = np.empty_like(x)
    for b in range(n_batches):
        rows = batch == b
        lib = np.exp(rng.normal(0, 0.4 * strength))
        gene = np.exp(rng.normal(0, 0.3 * strength, size=x.shape[1]))
        mean = x[rows] * lib * gene[None, :]
        drop = rng.random(mean.shape) < 0.1 * b * strength
        out[rows] = rng.poisson(np.where(drop, 0.0, mean)).astype(np.float32)
    res = adata.copy()
    res.X = out
    res.obs["batch"] = np.asarray([f"batch{b}" for b in batch])
    res.obs["batch"] = res.obs["batch"].astype("category")
    return res


def spike_program(
    adata,
    fraction: float,
    *,
    genes: tuple[str, ...] = INTERFERON_PROGRAM,
    doses: tuple[float, ...] = (1.0, 2.0, 4.0),
    key: jax.Array,
):
    """Spike an expression program into a random `fraction` of cells.

    `key` (keyword-only) is the only randomness (a NumPy generator seeded by its bits).

    Each stimulated cell gets a dose d from `doses`; its program genes' counts are
    re-drawn as Poisson(x * (1 + d) + d) (fold-up-shift plus baseline induction).
    Returns a copy with `obs["stimulated"]` (bool) and `obs["dose"]` (0 if not).

    Accepts `fraction` in (0, 1), `genes` a non-empty sequence of names in
    `adata.var_names` (not a bare string), `doses` a non-empty 1-D sequence of finite
    numbers > 0; anything else raises a `ValueError` naming the argument.
    """
    _check_adata(adata)
    check_real("fraction", fraction, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    genes = check_strings("genes", genes)
    dose_values = np.asarray(
        as_array("doses", doses, ndim=1, nonempty=True, finite=True, low=0.0, low_inclusive=False),
        dtype=np.float64,
    )
    missing = [g for g in genes if g not in adata.var_names]
    if missing:
        raise ValueError(f"genes: not in adata.var_names: {missing}")
    rng = numpy_rng(key)
    x = counts_matrix(adata).copy()
    n = x.shape[0]
    k = max(1, int(round(fraction * n)))
    cells = rng.choice(n, size=k, replace=False)
    dose = np.zeros(n)
    dose[cells] = rng.choice(dose_values, size=k)
    cols = np.asarray([adata.var_names.get_loc(g) for g in genes])
    sub = x[np.ix_(cells, cols)]
    x[np.ix_(cells, cols)] = rng.poisson(sub * (1 + dose[cells, None]) + dose[cells, None])
    res = adata.copy()
    res.X = x
    res.obs["stimulated"] = dose > 0
    res.obs["dose"] = dose
    return res
