"""Build commands of the routing experiments' data (the set-up itself lives by concept:
`_sources.py` items, `_loader.py` the model pool, `_text_table.py` the text routing table,
`_features.py` router features, `_committed.py` committed tables, `_tables.py` the tables by
name, `_haps.py` HAPS data, `_vqa_setup.py` the VQA pool and table):

    python -m experiments.routing._setup [--2k | --full]   # text table: QUICK, TABLE_2K, FULL_TABLE
    python -m experiments.routing._setup --haps [--full]   # the HAPS prefix cache
"""

from __future__ import annotations

import dataclasses
import platform
import sys
import time

from ._committed import DATA
from ._haps import (
    HAPS_MODELS,
    HAPS_MODELS_FULL,
    HAPS_SOURCES,
    HAPS_SOURCES_FULL,
    haps_items,
    prefix_residuals,
)
from ._loader import ModelLoader
from ._text_table import FULL_TABLE, TABLE_2K, TableConfig, build_text_table, table_fields

if __name__ == "__main__" and "--haps" in sys.argv:
    _full = "--full" in sys.argv
    _items = haps_items(HAPS_SOURCES_FULL if _full else HAPS_SOURCES)
    _loader = ModelLoader()
    for _m in HAPS_MODELS_FULL if _full else HAPS_MODELS:
        _r = prefix_residuals(_m, _items, top=4, models=_loader)
        print(f"{_m}: {len(_r['resid'])} items, {_r['seconds']:.0f} s")
elif __name__ == "__main__":
    _name = "full" if "--full" in sys.argv else "2k" if "--2k" in sys.argv else "quick"
    cfg = {"full": FULL_TABLE, "2k": TABLE_2K, "quick": TableConfig()}[_name]
    t_start = time.perf_counter()
    table = build_text_table(cfg)
    table = dataclasses.replace(
        table,
        meta={
            **table.meta,
            "config": table_fields(cfg),
            "machine": platform.platform(),
            "built_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "wall_seconds": time.perf_counter() - t_start,
            "build_command": "python -m experiments.routing._setup"
            + ("" if _name == "quick" else f" --{_name}"),
        },
    )
    out = table.save(DATA / f"text_{_name}")
    print(f"{table.n_queries} queries x {table.n_candidates} candidates -> {out}")
    print(
        "accuracy per candidate:",
        dict(zip(table.candidates, table.quality.mean(0).round(3), strict=True)),
    )
