"""What an experiment or benchmark module returns, and the context a run gives it.

An experiment module `experiments/<component>/<claim>.py` declares

    NAME = "<component>_<claim>"       # unique; checked against the module's place
    PAPER = "P1"                       # key of experiments._harness.PAPERS
    DESCRIPTION = "one line"
    @dataclasses.dataclass(frozen=True)
    class Config:                      # typed fields; the defaults are QUICK
        n: int = 100
    QUICK = Config()                   # 2 CPU cores, minutes
    FULL = Config(n=100_000)           # paper scale, for a GPU/TPU
    def run(config: Config, key: jax.Array, ctx: RunContext) -> Result: ...

An experiment that reports wall-clock measurements among its metrics (training or epoch
times, speed-ups) names them in an optional `TIMING_METRICS`: a tuple of `fnmatch`
patterns over the flat metric names, e.g. `("train_time_*_s", "speedup_*")`. Two runs of
the same seed agree on every metric but these; metrics.json lists the matched names
under "timing_metrics", and a claim about speed has `timing=True` (its `measured` and
verdict come from timings).

Claims are built by the protocol constructors of `_claim.py` (`superior`, `noninferior`,
`equivalent`, `at_least`, `at_most`, `excludes`, `gated`, `all_of`, `best_of`) from the
`Estimate`s of `_estimate.py`; `metrics` may hold `Estimate`s, written flat as `name`,
`name_lo`, `name_hi`, `name_n`. The kill/resume test compares the rest.

The config is written to metrics.json as `dataclasses.asdict(config)` (tuples as lists)
and read back with `config_from_json`; shared settings of a component's experiments are
a base class in its `_setup.py`.

`ctx` is the run's context, passed explicitly (no global state): where the run writes,
whether it resumes, and `ctx.checkpointer(tag)` for each training it runs. A benchmark
module `experiments/bench/<name>.py` declares NAME, PAPER, DESCRIPTION, QUICK, FULL and
`setup(config, key) -> Bench`.
"""

from __future__ import annotations

import dataclasses
import logging
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax

from jaxlab._core import Checkpointer

from ._claim import Claim

__all__ = ["Claim", "Result", "Bench", "RunContext", "log"]

log = logging.getLogger("experiments")


@dataclasses.dataclass
class Result:
    """What `run(config, key)` returns.

    - `metrics`: flat (or nested, flattened with "/") name -> number or `Estimate`
      (written as `name`, `name_lo`, `name_hi`, `name_n`).
    - `claims`: the paper's claims checked by this run.
    - `figures`: name -> matplotlib Figure; saved as NAME/<name>.png.
    - `notes`: free text for the report (data source, synthetic or real, caveats).
    """

    metrics: Mapping[str, Any]
    claims: list[Claim] = dataclasses.field(default_factory=list)
    figures: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    notes: str = ""


@dataclasses.dataclass
class Bench:
    """What a benchmark's `setup(config, key)` returns.

    - `impls`: implementation name -> zero-argument callable doing the work once
      (its output is blocked on with `jax.block_until_ready`).
    - `ours`: the names in `impls` that are jaxlab's; all others are peers.
    - `size`: problem size description (JSON-able), e.g. {"N": 4096}.
    - `pairs`: (ours, peer) pairs to report ratios for; empty means every ours x peer.
    - `fields`: named flat results an issue asks for, each computed from the median
      seconds per implementation, e.g. `{"jaxlab_s": lambda m: m["jaxlab"],
      "speedup": lambda m: m["opencv"] / m["jaxlab"]}`; written under "fields".
    - `interleave`: time the implementations in rounds (one call of each per round)
      rather than one after another, so that drifts of a shared machine hit all of
      them alike (for large, memory-bound problems; small ones lose their warm caches).
    """

    impls: Mapping[str, Callable[[], Any]]
    ours: tuple[str, ...]
    size: Mapping[str, Any]
    notes: str = ""
    pairs: tuple[tuple[str, str], ...] = ()
    fields: Mapping[str, Callable[[Mapping[str, float]], float]] = dataclasses.field(
        default_factory=dict
    )
    interleave: bool = False


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What one run may use besides its config and key, passed to `run(config, key, ctx)`.

    - `name`: the experiment's NAME.
    - `out_dir`: the run's folder (`DIR/NAME`); checkpoints go to `out_dir/checkpoints`.
    - `resume`: continue from the checkpoints there (`--resume`).
    - `full`: whether this is the FULL (paper-scale) config.
    - `seed`: the run's `--seed`; `key(stream, *index)` derives every named random
      stream of the run from it.

    - `process_index`: this process in a multi-process job (`jax.process_index()`; 0
      alone). Process 0 writes the results; process i > 0 keeps its checkpoints apart,
      in `out_dir/.process-<i>/checkpoints` (every process resumes from its own, so
      hosts need no shared filesystem and two hosts never write one file).

    Calling an experiment's `run` directly (tests, notebooks) takes
    `RunContext(name, out_dir=some_folder)` (seed 0).
    """

    name: str
    out_dir: Path
    resume: bool = False
    full: bool = False
    seed: int = 0
    process_index: int = 0

    def __post_init__(self):
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, received {self.seed!r}")
        i = self.process_index
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise ValueError(f"process_index must be a non-negative int, received {i!r}")

    def key(self, stream: str, *index: int) -> jax.Array:
        """The key of the named random stream `stream` (e.g. `ctx.key("spike_ins", i)`):
        `fold_in(fold_in(key(seed), crc32(stream)), *index)`. Every stream changes with
        `--seed` and is reproduced bit for bit by the same seed; distinct names and indices
        give independent streams. Use it for every random choice of a run that is not the
        `key` argument's own split, so that no draw is fixed regardless of the seed."""
        if not isinstance(stream, str) or not stream:
            raise ValueError(f"stream must be a non-empty str, received {stream!r}")
        k = jax.random.fold_in(jax.random.key(self.seed), zlib.crc32(stream.encode()) & 0x7FFFFFFF)
        for i in index:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < 2**31:
                raise ValueError(f"index must be ints in [0, 2**31), received {index!r}")
            k = jax.random.fold_in(k, i)
        return k

    @property
    def writes_results(self) -> bool:
        """Whether this process writes the run's results (process 0 of the job)."""
        return self.process_index == 0

    @property
    def checkpoint_dir(self) -> Path:
        d = self.process_dir / "checkpoints"
        d.mkdir(parents=True, exist_ok=True)
        return d

    @property
    def process_dir(self) -> Path:
        """`out_dir/.process-<i>`: process i's own files (log, checkpoints); process 0's
        are `out_dir` itself."""
        i = self.process_index
        return self.out_dir if i == 0 else self.out_dir / f".process-{i}"

    def checkpointer(self, tag: str, *, every: int | None = None) -> Checkpointer:
        """The checkpointer of one training of this run: `checkpoints/<tag>.eqx`, saved every
        `every` steps (None: the fit's default), resumed when the run resumes."""
        return Checkpointer(self.checkpoint_dir / f"{tag}.eqx", every=every, resume=self.resume)
