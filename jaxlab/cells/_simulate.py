"""A documented negative-binomial count simulator with planted cell types, batches and a
rare stimulated state (Splatter-style), the second data set of the P5 experiments.

No pip package checked ships a real single-cell count matrix with >= 5k cells, cell
types and batches inside its wheel (scanpy's PBMC file has 700 cells; the others
download at run time), so the larger data set is simulated, with every planted effect
returned beside the counts.

Paper: P5 (LeCellModel); the generative model follows Splatter (Zappia, Phipson and
Oshlack, Genome Biology 2017), simplified to a fixed inverse dispersion.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np

from jaxlab._core import (
    as_array,
    check_memory,
    check_positive_int,
    check_range,
    check_real,
    numpy_rng,
)

__all__ = ["simulate_counts"]


def simulate_counts(
    n_cells: int = 6000,
    n_genes: int = 1000,
    *,
    key: jax.Array,
    type_fractions: Sequence[float] = (0.35, 0.25, 0.15, 0.12, 0.08, 0.05),
    n_batches: int = 3,
    mean_shape: float = 0.6,
    mean_rate: float = 0.3,
    library_scale: float = 0.3,
    de_probability: float = 0.1,
    de_location: float = 0.5,
    de_scale: float = 0.4,
    batch_scale: float = 0.3,
    inverse_dispersion: float = 5.0,
    stimulated_fraction: float = 0.01,
    doses: Sequence[float] = (1.0, 2.0, 4.0),
    n_program: int = 16,
):
    """Simulate single-cell counts with known cell types, batches and a rare stimulated state.

    `key` (keyword-only) is the only randomness (a NumPy generator seeded by its bits):
    the same key and arguments give the same data.

    The model, per gene g and cell c (of type t(c), batch b(c), dose d(c) >= 0):

    - base mean m_g ~ Gamma(shape `mean_shape`, rate `mean_rate`);
    - cell type t(c) drawn with probabilities `type_fractions`; each type moves each gene
      with probability `de_probability` by a factor exp(s z), z ~ N(`de_location`,
      `de_scale`), s = +1 or -1 with probability 1/2 (up or down), else by 1;
    - batch b(c) uniform over `n_batches`; each batch scales each gene by
      exp(N(0, `batch_scale`)) (capture efficiency);
    - size factor s_c = exp(N(0, `library_scale`)) (library size);
    - a random `round(stimulated_fraction * n_cells)` cells, of any type, are stimulated
      with a dose d(c) drawn uniformly from `doses`; `n_program` programme genes, drawn
      among the genes with base mean above the median, are multiplied by 1 + d(c);
    - mean mu_cg = s_c m_g T[t(c), g] B[b(c), g] (1 + d(c) P_g) with P_g = 1 on programme
      genes; count x_cg ~ NB(mean mu_cg, inverse dispersion theta), drawn as
      Poisson(Gamma(theta, mu_cg / theta)): E x = mu, Var x = mu + mu^2 / theta.

    **Arguments:**

    - `n_cells`, `n_genes`: matrix shape (>= 2 each; `n_genes >= 2 n_program`).
    - `key`: a JAX PRNG key.
    - `type_fractions`: `(n_types,)` positive probabilities summing to 1.
    - the remaining numbers as in the model above (scales >= 0, others > 0;
      `stimulated_fraction` in [0, 1), 0 for none; `doses` positive).

    **Returns:** AnnData `(n_cells, n_genes)`: `X` float32 counts; `obs["cell_type"]`
    and `obs["batch"]` (categorical, `type0..`, `batch0..`), `obs["stimulated"]` (bool),
    `obs["dose"]` (0 when not stimulated), `obs["size_factor"]`; `var["base_mean"]`,
    `var["program"]` (bool); `varm["type_factor"]` `(n_genes, n_types)` and
    `varm["batch_factor"]` `(n_genes, n_batches)`, the planted effects; `uns["source"]`;
    `uns["simulator"]`: the cell-level parameters (type fractions, library scale, inverse
    dispersion, realised stimulated fraction, doses), which `simulated_log_likelihood` reads
    to give each cell's exact log-likelihood.
    """
    import anndata
    import pandas as pd

    n_cells = check_positive_int("n_cells", n_cells)
    n_genes = check_positive_int("n_genes", n_genes)
    n_batches = check_positive_int("n_batches", n_batches)
    n_program = check_positive_int("n_program", n_program)
    if n_cells < 2:
        raise ValueError(f"n_cells: expected >= 2, received {n_cells}")
    if n_genes < 2 * n_program:
        raise ValueError(
            f"n_genes: expected >= 2 * n_program = {2 * n_program}, received {n_genes}"
        )
    # the count matrix and its per-cell mean, gamma and Poisson draws (float64)
    check_memory("n_cells x n_genes", 8.0 * 5 * n_cells * n_genes)
    check_memory("n_batches x n_genes", 8.0 * 2 * n_batches * n_genes)
    fractions = np.asarray(as_array("type_fractions", type_fractions), dtype=np.float64)
    if fractions.ndim != 1 or fractions.size < 1:
        raise ValueError(
            f"type_fractions: expected a non-empty 1-D sequence, received shape {fractions.shape}"
        )
    check_range("type_fractions", fractions, low=0.0, low_inclusive=False)
    if abs(fractions.sum() - 1.0) > 1e-6:
        raise ValueError(f"type_fractions: expected a sum of 1, received {fractions.sum()}")
    dose_values = np.asarray(as_array("doses", doses), dtype=np.float64)
    if dose_values.ndim != 1 or dose_values.size < 1:
        raise ValueError(f"doses: expected a non-empty 1-D sequence, received {doses!r}")
    check_range("doses", dose_values, low=0.0, low_inclusive=False)
    if not np.all(np.isfinite(dose_values)):
        raise ValueError(f"doses: expected finite values, received {doses!r}")
    shape = check_real("mean_shape", mean_shape, low=0.0, low_inclusive=False)
    rate = check_real("mean_rate", mean_rate, low=0.0, low_inclusive=False)
    theta = check_real("inverse_dispersion", inverse_dispersion, low=0.0, low_inclusive=False)
    lib_scale = check_real("library_scale", library_scale, low=0.0)
    de_loc = check_real("de_location", de_location, low=0.0)
    de_sd = check_real("de_scale", de_scale, low=0.0)
    batch_sd = check_real("batch_scale", batch_scale, low=0.0)
    de_probability = check_real("de_probability", de_probability, low=0.0, high=1.0)
    stimulated_fraction = check_real(
        "stimulated_fraction", stimulated_fraction, low=0.0, high=1.0, high_inclusive=False
    )

    rng = numpy_rng(key)
    n_types = fractions.size
    base = rng.gamma(shape, 1.0 / rate, size=n_genes)
    moved = rng.random((n_types, n_genes)) < de_probability
    sign = np.where(rng.random((n_types, n_genes)) < 0.5, -1.0, 1.0)
    log_fold = sign * rng.normal(de_loc, de_sd, size=(n_types, n_genes))
    type_factor = np.where(moved, np.exp(log_fold), 1.0)
    batch_factor = np.exp(rng.normal(0.0, batch_sd, size=(n_batches, n_genes)))
    cell_type = rng.choice(n_types, size=n_cells, p=fractions / fractions.sum())
    batch = rng.integers(0, n_batches, size=n_cells)
    size_factor = np.exp(rng.normal(0.0, lib_scale, size=n_cells))
    dose = np.zeros(n_cells)
    n_stim = int(round(stimulated_fraction * n_cells))
    if n_stim:
        stim_cells = rng.choice(n_cells, size=n_stim, replace=False)
        dose[stim_cells] = rng.choice(dose_values, size=n_stim)
    # the programme is drawn among expressed genes, so that a stimulated cell shows it
    expressed = np.flatnonzero(base > np.median(base))
    program = np.zeros(n_genes, dtype=bool)
    program[rng.choice(expressed, size=n_program, replace=False)] = True
    mean = (
        size_factor[:, None]
        * base[None, :]
        * type_factor[cell_type]
        * batch_factor[batch]
        * (1.0 + dose[:, None] * program[None, :])
    )
    counts = rng.poisson(rng.gamma(theta, mean / theta)).astype(np.float32)

    obs = pd.DataFrame(
        {
            "cell_type": pd.Categorical(
                [f"type{t}" for t in cell_type], categories=[f"type{t}" for t in range(n_types)]
            ),
            "batch": pd.Categorical(
                [f"batch{b}" for b in batch], categories=[f"batch{b}" for b in range(n_batches)]
            ),
            "stimulated": dose > 0,
            "dose": dose,
            "size_factor": size_factor,
        },
        index=pd.Index([f"cell{i}" for i in range(n_cells)]),
    )
    var = pd.DataFrame(
        {"base_mean": base, "program": program},
        index=pd.Index([f"gene{g:04d}" for g in range(n_genes)]),
    )
    out = anndata.AnnData(X=counts, obs=obs, var=var)
    out.varm["type_factor"] = type_factor.T
    out.varm["batch_factor"] = batch_factor.T
    # the parameters of the cell-level draws, for `simulated_log_likelihood` (the exact
    # density); stimulated_fraction is the realised n_stim / n_cells
    out.uns["simulator"] = {
        "type_fractions": fractions / fractions.sum(),
        "library_scale": lib_scale,
        "inverse_dispersion": theta,
        "stimulated_fraction": n_stim / n_cells,
        "doses": dose_values,
    }
    out.uns["source"] = (
        "simulated (jaxlab.cells.simulate_counts): Splatter-style negative-binomial counts, "
        f"{n_types} planted cell types, {n_batches} batches, {n_stim} stimulated cells"
    )
    return out
