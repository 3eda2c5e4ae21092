"""Experiment configs: frozen dataclasses, stored in metrics.json as JSON objects."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, TypeVar

__all__ = ["config_to_json", "config_from_json", "check_config_pair", "with_overrides"]

C = TypeVar("C")


def _is_frozen_instance(config: Any) -> bool:
    return (
        dataclasses.is_dataclass(config)
        and not isinstance(config, type)
        and type(config).__dataclass_params__.frozen
    )


def config_to_json(config: Any) -> dict[str, Any]:
    """Field name -> JSON value (tuples become lists), as written to metrics.json."""
    if not _is_frozen_instance(config):
        raise TypeError(
            f"config must be a frozen dataclass instance, received {type(config).__name__}"
        )
    return json.loads(json.dumps(dataclasses.asdict(config)))


def _freeze(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return {k: _freeze(x) for k, x in v.items()}
    return v


def config_from_json(cls: type[C], data: dict[str, Any]) -> C:
    """The config `config_to_json` wrote (lists back to tuples); unknown keys are an error."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(
            f"{cls.__qualname__}: unknown config keys {unknown}; expected some of {sorted(names)}"
        )
    return cls(**{k: _freeze(v) for k, v in data.items()})


def check_config_pair(where: str, quick: Any, full: Any, tiny: Any = None) -> None:
    """`ValueError` unless QUICK and FULL (and TINY, when given) are frozen instances of one
    dataclass that survive the JSON round trip."""
    named = [("QUICK", quick), ("FULL", full)] + ([("TINY", tiny)] if tiny is not None else [])
    for label, cfg in named:
        if not _is_frozen_instance(cfg):
            raise ValueError(
                f"{where}: {label} must be an instance of a frozen dataclass, "
                f"received {type(cfg).__name__}"
            )
        back = config_from_json(type(cfg), config_to_json(cfg))
        if back != cfg:
            raise ValueError(
                f"{where}: {label} does not survive the JSON round trip "
                f"(lists instead of tuples?): {cfg!r} -> {back!r}"
            )
    for label, cfg in named[1:]:
        if type(cfg) is not type(quick):
            raise ValueError(
                f"{where}: QUICK and {label} must be instances of one config class, "
                f"received {type(quick).__name__} and {type(cfg).__name__}"
            )


def _same_kind(old: Any, new: Any) -> bool:
    """Whether JSON value `new` may replace the field value `old` (ints for floats too)."""
    if isinstance(old, bool) or isinstance(new, bool):
        return isinstance(old, bool) and isinstance(new, bool)
    if isinstance(old, float):
        return isinstance(new, int | float)
    if isinstance(old, tuple):
        return isinstance(new, list)
    return old is None or new is None or isinstance(new, type(old))


def with_overrides(config: C, assignments: list[str] | tuple[str, ...]) -> C:
    """`config` with fields replaced by `KEY=VALUE` assignments (VALUE is JSON; a bare word
    is a string), e.g. `items=12`, `families=["chain_sum"]`; unknown keys and values of
    another kind than the field's (a number for a list, ...) are a `ValueError`."""
    if not _is_frozen_instance(config):
        raise TypeError(
            f"config must be a frozen dataclass instance, received {type(config).__name__}"
        )
    current = config_to_json(config)
    changes: dict[str, Any] = {}
    for item in assignments:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"config override: expected KEY=VALUE, received {item!r}")
        if key not in current:
            raise ValueError(
                f"config override {key!r}: unknown key; expected one of {sorted(current)}"
            )
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        if not _same_kind(current[key], value):
            raise ValueError(
                f"config override {key}={text}: expected a value like {current[key]!r} "
                f"({type(current[key]).__name__}), received {type(value).__name__}"
            )
        changes[key] = value
    return config_from_json(type(config), {**current, **changes})
