"""Run one experiment into DIR/NAME/ (metrics.json, PNG figures, run.log), or all of them."""

from __future__ import annotations

import fnmatch
import logging
import math
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import numpy as np

from jaxlab._core import atomic_write, write_json

from ._api import Result, RunContext, log
from ._config import config_to_json

__all__ = ["run_experiment", "reproduce", "jax_info", "flatten_metrics"]


def jax_info() -> dict[str, Any]:
    devs = jax.devices()
    return {
        "version": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [f"{d.platform}:{d.device_kind}" for d in devs],
    }


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
    """Nested mappings -> flat `a/b/c` names; values -> Python scalars."""
    flat: dict[str, float | int | None] = {}
    for k, v in metrics.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping):
            flat.update(flatten_metrics(v, prefix=f"{name}/"))
        else:
            try:
                flat[name] = _to_number(v)
            except ValueError as e:
                raise ValueError(f"metrics[{name!r}]: {e}") from e
    return flat


def _claims_json(result: Result, paper: str) -> list[dict[str, Any]]:
    return [
        {
            "claim": c.claim,
            "paper": c.paper,
            "measured": c.measured,
            "holds": bool(c.holds),
            "paper_id": paper,
        }
        for c in result.claims
    ]


def run_experiment(
    mod: ModuleType,
    *,
    out: str | Path = "results",
    full: bool = False,
    seed: int = 0,
    resume: bool = False,
) -> dict[str, Any]:
    """Run `mod.run(config, key, ctx)` and write DIR/NAME/{metrics.json, *.png, run.log}.

    Returns the metrics.json content. Exceptions from the experiment propagate
    (after being logged to run.log); metrics.json is only replaced on success.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = mod.NAME
    run_dir = Path(out) / name
    run_dir.mkdir(parents=True, exist_ok=True)
    config = mod.FULL if full else mod.QUICK
    handler = logging.FileHandler(run_dir / "run.log", mode="a" if resume else "w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    loggers = [log, logging.getLogger("jaxlab")]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    ctx = RunContext(name=name, out_dir=run_dir, resume=resume, full=full)
    try:
        log.info(
            "run %s config=%s seed=%d jax=%s", name, "full" if full else "quick", seed, jax_info()
        )
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
            with atomic_write(png, "wb") as f:
                fig.savefig(f, format="png", dpi=110, bbox_inches="tight")
            plt.close(fig)
            figures.append(png.name)
        record = {
            "experiment": name,
            "paper": mod.PAPER,
            "description": mod.DESCRIPTION,
            "config": "full" if full else "quick",
            "config_values": config_to_json(config),
            "seed": seed,
            "metrics": flatten_metrics(result.metrics),
            "claims": _claims_json(result, mod.PAPER),
            "figures": figures,
            "notes": result.notes,
            "runtime_s": runtime,
            "jax": jax_info(),
        }
        write_json(run_dir / "metrics.json", record)
        log.info("done %s in %.1f s", name, runtime)
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
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run every module (or those whose NAME matches `only`), never stopping at a failure.

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
            done.append(run_experiment(mod, out=out, full=full, seed=seed))
        except Exception as e:  # noqa: BLE001 - report every failure, keep going
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
