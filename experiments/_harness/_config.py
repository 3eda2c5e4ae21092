"""Experiment configs: frozen dataclasses, stored in metrics.json as JSON objects."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, TypeVar

__all__ = ["config_to_json", "config_from_json", "check_config_pair"]

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


def check_config_pair(where: str, quick: Any, full: Any) -> None:
    """`ValueError` unless QUICK and FULL are frozen instances of one dataclass that
    survive the JSON round trip."""
    for label, cfg in (("QUICK", quick), ("FULL", full)):
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
    if type(quick) is not type(full):
        raise ValueError(
            f"{where}: QUICK and FULL must be instances of one config class, "
            f"received {type(quick).__name__} and {type(full).__name__}"
        )
