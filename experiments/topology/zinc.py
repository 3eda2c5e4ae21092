"""P18 claims on ZINC-style penalized logP: HOPSE's test MAE matches HOMP's; its training
steps are faster.

Molecules are the first rows of the MOSES training SMILES (molsets wheel), the
target is penalized logP computed with RDKit (logP - SA - ring penalty, the
ZINC benchmark target); that pool is split `splits` times at random into
n_train/n_val/n_test (FULL: 12000/1000/1000 like ZINC-12k). Rings become 2-cells
(cycle lift). Test MAE at each split's best validation epoch, paired over the splits.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from experiments._harness import Result, RunContext, log
from experiments.topology import _setup as ts
from jaxlab import topology as tp

NAME = "topology_zinc"
PAPER = "P18"
DESCRIPTION = "ZINC-style penalized logP (MOSES + RDKit): HOPSE-M vs HOMP test MAE, epoch time"
TIMING_METRICS = ts.TIMING_METRICS


@dataclasses.dataclass(frozen=True)
class Config(ts.TrainConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    # non-inferiority margin (MAE: about 10% of HOMP's ~0.3) and one-sided
    # confidence level, fixed before the run
    margin: float = 0.03
    ni_level: float = 0.95

    # random train/val/test splits of the pool (one initialisation each): the paired t
    # interval's n
    splits: int = 10
    n_train: int = 1000
    n_val: int = 250
    n_test: int = 250
    epochs: int = 30
    eval_every: int = 3
    batch_size: int = 64
    width: int = 32
    depth: int = 2
    lr: float = 2e-3
    weight_decay: float = 0.0


QUICK = Config()
TINY = Config(  # the smoke tier
    splits=2,
    n_train=48,
    n_val=16,
    n_test=16,
    epochs=2,
    eval_every=1,
    batch_size=16,
    width=8,
    depth=1,
    speed_rounds=5,
)
FULL = Config(
    n_train=12000,
    n_val=1000,
    n_test=1000,
    epochs=300,
    eval_every=5,
    batch_size=128,
    width=128,
    depth=4,
    lr=1e-3,
    speed_rounds=30,
)


def full_work(config) -> float:
    """Training work (`_setup.train_work`): every split's epoch runs over the whole pool
    (the non-training molecules weighted 0)."""
    pool = int(config.n_train) + int(config.n_val) + int(config.n_test)
    return ts.train_work(pool, int(config.splits), config, int(config.epochs))


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    t0 = time.perf_counter()
    sizes = (int(config.n_train), int(config.n_val), int(config.n_test))
    splits = tp.load_zinc_subset(*sizes)
    log.info(
        "penalized logP for %d molecules in %.1f s",
        sum(len(v[0]) for v in splits.values()),
        time.perf_counter() - t0,
    )
    smiles = [m for k in ("train", "val", "test") for m in splits[k][0]]
    y = np.concatenate([splits[k][1] for k in ("train", "val", "test")])
    metrics, hist = ts.regression_run("zinc", smiles, y, sizes, config, key, ctx, metric="mae")
    metrics["target_std"] = float(y.std())
    claims = ts.regression_claims(
        metrics,
        metric="mae",
        dataset="ZINC",
        label="ZINC penalized-logP",
        unit="",
        paper="HOPSE matches or surpasses HOMP on molecular benchmarks (ZINC)",
        margin=float(config.margin),
        config=config,
        time_digits=2,
    )
    notes = (
        "Real molecules: first n_train+n_val+n_test SMILES of MOSES train.csv.gz (molsets wheel) "
        "(the pool), split at random `splits` times; target penalized logP = Crippen logP - "
        "SA score (RDKit Contrib, fragment table decoded without unpickling) - max(0, "
        "largest ring - 6), unnormalised. Not the "
        "ZINC-12k molecules themselves (those are not shipped in a wheel). The splits train "
        "at once (vmapped, one initialisation per split and model); test MAE at each split's "
        "best validation epoch, HOPSE - HOMP paired over the splits (t interval). Speed: one "
        "training step of each model timed in interleaved rounds (bootstrap of the median "
        "ratio) with XLA's FLOP ratio of the same steps. Epoch times exclude compilation."
    )
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"curves": ts.curves_figure(hist, "MAE", "ZINC-style penalized logP")},
        notes=notes,
    )
