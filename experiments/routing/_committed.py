"""The routing tables committed under `data/routing/` (`.npz` + JSON manifest), found by the
config fields and code version their manifest records."""

from __future__ import annotations

import json
from pathlib import Path

from jaxlab import routing

DATA = Path(__file__).resolve().parents[2] / "data" / "routing"


def committed_table(prefix: str, fields: dict, code: str) -> routing.RoutingTable | None:
    """The table `data/routing/<prefix>_*.json` whose manifest records these config fields
    and code version, or None."""
    for path in sorted(DATA.glob(f"{prefix}_*.json")):
        try:
            meta = json.loads(path.read_text()).get("meta", {})
        except (OSError, json.JSONDecodeError):
            continue
        if meta.get("config") == fields and meta.get("code") == code:
            return routing.RoutingTable.load(path)
    return None
