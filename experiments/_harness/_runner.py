"""Run one experiment into DIR/NAME/ (metrics.json, PNG figures, run.log), or all of them."""

from __future__ import annotations

import fnmatch
import logging
import math
import os
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import numpy as np

from jaxlab._core import atomic_write, remove_stale_temps, write_json

from ._api import Claim, Result, RunContext, log
from ._config import config_to_json, with_overrides
from ._estimate import Estimate
from ._provenance import config_hash, machine_info, provenance

__all__ = [
    "SCALES",
    "config_of",
    "run_experiment",
    "reproduce",
    "jax_info",
    "flatten_metrics",
    "full_refusal",
    "resume_note",
    "timing_metrics",
]


SCALES = ("tiny", "quick", "full")


def config_of(mod: ModuleType, scale: str) -> Any:
    """The module's config at `scale`: "tiny" (TINY: the smoke tier, seconds), "quick"
    (QUICK: 2 CPU cores, minutes) or "full" (FULL: paper scale, an accelerator)."""
    if scale not in SCALES:
        raise ValueError(f"scale: expected one of {SCALES}, received {scale!r}")
    if scale == "tiny" and not hasattr(mod, "TINY"):
        raise ValueError(f"{mod.NAME} declares no TINY config (the smoke tier's size)")
    return getattr(mod, scale.upper())


def jax_info() -> dict[str, Any]:
    """JAX's version, backend and the devices of the job (every process's); in a
    multi-process job also the number of processes."""
    devs = jax.devices()
    info: dict[str, Any] = {
        "version": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [f"{d.platform}:{d.device_kind}" for d in devs],
    }
    if jax.process_count() > 1:
        info["processes"] = jax.process_count()
    return info


def _other_process(folder: Path, run_dir: Path) -> bool:
    """Whether `folder` (under `run_dir`) is a non-zero process's own `.process-<i>`."""
    parts = folder.relative_to(run_dir).parts
    return any(p.startswith(".process-") for p in parts)


def _memory_gb() -> tuple[str, float | None]:
    """(backend, memory of one device in GB: the host's RAM on a CPU; None if unknown)."""
    backend = jax.default_backend()
    if backend == "cpu":
        try:
            return backend, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
        except (ValueError, OSError, AttributeError):
            return backend, None
    stats = jax.local_devices()[0].memory_stats() or {}
    limit = stats.get("bytes_limit")
    return backend, (limit / 1e9 if limit else None)


def full_refusal(mod: ModuleType) -> str | None:
    """Why the FULL config of `mod` should not start here (None: go ahead).

    FULL is the paper scale for a GPU/TPU: on the CPU backend it is refused; on an
    accelerator it is refused when the module's `FULL_MEMORY_GB` (an optional estimate of
    the device memory FULL needs) exceeds one device's memory. `--force` overrides both.
    """
    backend, have = _memory_gb()
    need = getattr(mod, "FULL_MEMORY_GB", None)
    need_s = (
        f"about {need:g} GB of device memory (FULL_MEMORY_GB)"
        if need
        else "an accelerator (it declares no memory estimate)"
    )
    have_s = f"{have:.0f} GB" if have else "unknown memory"
    if backend == "cpu":
        return (
            f"{mod.NAME} --full is the paper-scale config for a GPU/TPU and needs {need_s}; "
            f"this is the CPU backend ({have_s} RAM). Run without --full (QUICK), or add "
            "--force to start it anyway"
        )
    if need and have and need > have:
        return (
            f"{mod.NAME} --full needs {need_s} but one {backend} device has {have_s}; "
            "add --force to start it anyway"
        )
    return None


def resume_note(mod: ModuleType, out: str | Path) -> str:
    """What `--resume` will resume for `mod` under `out` (one line)."""
    ckpt = Path(out) / mod.NAME / "checkpoints"
    found = sorted(
        p.name for p in (ckpt.iterdir() if ckpt.is_dir() else ()) if not p.name.startswith(".")
    )
    if not found:
        return (
            f"--resume: no checkpoints of {mod.NAME} in {ckpt} (none written yet, or the "
            "experiment does not checkpoint); running from the start"
        )
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    return f"--resume: resuming {mod.NAME} from {len(found)} checkpoint(s) in {ckpt}: {shown}"


def _to_number(v: Any) -> float | int | None:
    if isinstance(v, bool | np.bool_):
        return int(v)
    arr = np.asarray(v)
    if arr.size != 1:
        raise ValueError(f"metric must be a scalar, received shape {arr.shape}")
    x = arr.reshape(()).item()
    if isinstance(x, complex):
        raise ValueError("metric must be real, received a complex number")
    if isinstance(x, float) and not math.isfinite(x):
        return None  # JSON has no NaN/inf; the report shows it as "n/a"
    return x


def flatten_metrics(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float | int | None]:
    """Nested mappings -> flat `a/b/c` names; values -> Python scalars.

    The one naming rule for intervals: an `Estimate` under `name` is written as `name`
    (its value), `name_lo`, `name_hi` (its interval) and `name_n` (its units); a name
    that collides with another metric is an error."""
    flat: dict[str, float | int | None] = {}
    for k, v in metrics.items():
        name = f"{prefix}{k}"
        if isinstance(v, Estimate):
            for key, x in v.flat(name).items():
                if key in flat or (key != name and key in metrics):
                    raise ValueError(f"metrics[{name!r}]: the Estimate's {key!r} is also a metric")
                flat[key] = _to_number(x)
        elif isinstance(v, Mapping):
            flat.update(flatten_metrics(v, prefix=f"{name}/"))
        else:
            try:
                flat[name] = _to_number(v)
            except ValueError as e:
                raise ValueError(f"metrics[{name!r}]: {e}") from e
    return flat


def timing_metrics(mod: ModuleType, metrics: Mapping[str, Any]) -> list[str]:
    """The flat metric names that match the module's `TIMING_METRICS` patterns (wall-clock
    measurements: they differ between two runs of the same seed), sorted."""
    patterns = getattr(mod, "TIMING_METRICS", ())
    return sorted(k for k in metrics if any(fnmatch.fnmatchcase(k, p) for p in patterns))


def _claims_json(result: Result, paper: str) -> list[dict[str, Any]]:
    """Each claim's record (`Claim.as_dict`): the legacy keys claim, paper, measured, holds,
    timing, paper_id, and the protocol's verdict, estimate, null, margin, test, alpha, gate."""
    for i, c in enumerate(result.claims):
        if not isinstance(c, Claim):
            raise TypeError(f"claims[{i}]: expected a Claim, received {type(c).__name__}")
    return [c.as_dict(paper) for c in result.claims]


def run_experiment(
    mod: ModuleType,
    *,
    out: str | Path = "results",
    full: bool = False,
    seed: int = 0,
    resume: bool = False,
    overrides: Sequence[str] = (),
    tiny: bool = False,
) -> dict[str, Any]:
    """Run `mod.run(config, key, ctx)` and write DIR/NAME/{metrics.json, *.png, run.log}.

    In a multi-process job (`jax.process_count() > 1`) every process runs the experiment
    (its sweeps and cache builders split the work) and only process 0 writes
    metrics.json and the figures; process i > 0 writes its log and checkpoints under
    DIR/NAME/.process-<i>/ and returns the same record.

    `overrides`: `KEY=VALUE` assignments replacing fields of the QUICK/FULL config
    (`with_overrides`); the record's `config` then says `quick+overrides`.
    `tiny`: the module's TINY config (the smoke tier: the real code path at a tiny size;
    its numbers are not results).

    Returns the metrics.json content. Exceptions from the experiment propagate
    (after being logged to run.log); metrics.json is only replaced on success.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = mod.NAME
    run_dir = Path(out) / name
    run_dir.mkdir(parents=True, exist_ok=True)
    process = jax.process_index()
    writer = process == 0  # the one process that writes results in a multi-process job
    own = run_dir if writer else run_dir / f".process-{process}"
    own.mkdir(parents=True, exist_ok=True)
    # temp files of a killed write (metrics, figures, checkpoints): the next write of the
    # same file removes its own, this sweep the rest (each process sweeps only its own
    # files: on a shared filesystem another host's live writer has a pid unknown here)
    temps = [p.parent for p in own.rglob(".*.tmp")]
    for folder in {own, *(f for f in temps if not (writer and _other_process(f, run_dir)))}:
        remove_stale_temps(folder)
    if full and tiny:
        raise ValueError("full and tiny: choose one scale")
    scale = "full" if full else "tiny" if tiny else "quick"
    config = config_of(mod, scale)
    overrides = tuple(overrides)
    if overrides:
        config = with_overrides(config, overrides)
    label = scale + ("+overrides" if overrides else "")
    handler = logging.FileHandler(own / "run.log", mode="a" if resume else "w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    loggers = [log, logging.getLogger("jaxlab")]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    ctx = RunContext(
        name=name, out_dir=run_dir, resume=resume, full=full, seed=seed, process_index=process
    )
    try:
        log.info("run %s config=%s seed=%d jax=%s", name, label, seed, jax_info())
        t0 = time.perf_counter()
        result = mod.run(config, jax.random.key(seed), ctx)
        if not isinstance(result, Result):
            raise TypeError(
                f"{name}.run must return experiments._harness.Result, "
                f"received {type(result).__name__}"
            )
        runtime = time.perf_counter() - t0
        figures = []
        for fig_name, fig in result.figures.items():
            png = run_dir / f"{fig_name}.png"
            if writer:
                with atomic_write(png, "wb") as f:
                    fig.savefig(f, format="png", dpi=110, bbox_inches="tight")
            plt.close(fig)
            figures.append(png.name)
        metrics = flatten_metrics(result.metrics)
        values = config_to_json(config)
        record = {
            "experiment": name,
            "paper": mod.PAPER,
            "description": mod.DESCRIPTION,
            "config": label,
            "config_values": values,
            "config_hash": config_hash(values),
            "seed": seed,
            "metrics": metrics,
            "timing_metrics": timing_metrics(mod, metrics),
            "claims": _claims_json(result, mod.PAPER),
            "figures": figures,
            "notes": result.notes,
            "runtime_s": runtime,
            "jax": jax_info(),
            "machine": machine_info(),
            "provenance": provenance(),
        }
        if writer:
            write_json(run_dir / "metrics.json", record)
        log.info(
            "done %s in %.1f s%s",
            name,
            runtime,
            "" if writer else f" (process {process}: computed; process 0 writes the results)",
        )
        return record
    except BaseException:
        log.error("failed %s:\n%s", name, traceback.format_exc())
        raise
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
        handler.close()


def reproduce(
    mods: Sequence[ModuleType],
    *,
    out: str | Path = "results",
    full: bool = False,
    seed: int = 0,
    only: str | None = None,
    progress: bool = True,
    tiny: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run every module (or those whose NAME matches `only`), never stopping at a failure
    (except in a multi-process job: there the first failure is raised, since one process
    cannot skip an experiment whose collectives the others are waiting in).

    Returns (records of successful runs, failures as {experiment, paper, error, traceback}).
    """
    from tqdm.auto import tqdm

    selected = [m for m in mods if only is None or fnmatch.fnmatch(m.NAME, only)]
    done: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    bar = tqdm(selected, desc="experiments", unit="exp", disable=not progress)
    for mod in bar:
        bar.set_postfix_str(mod.NAME)
        try:
            done.append(run_experiment(mod, out=out, full=full, seed=seed, tiny=tiny))
        except Exception as e:  # noqa: BLE001 - report every failure, keep going
            if jax.process_count() > 1:
                raise
            tb = traceback.format_exc()
            failed.append(
                {
                    "experiment": mod.NAME,
                    "paper": mod.PAPER,
                    "description": getattr(mod, "DESCRIPTION", ""),
                    "error": f"{type(e).__name__}: {e}",
                    "traceback": "\n".join(tb.strip().splitlines()[-12:]),
                }
            )
    return done, failed
