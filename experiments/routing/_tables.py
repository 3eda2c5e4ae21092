"""The P6 routing tables by name (`routing_ablation`, `routing_groups`, `routing_masking`,
`routing_vqa`): the text tables of `_text_table.py` and the VQA table of `_vqa_setup.py`."""

from __future__ import annotations

from . import _text_table, _vqa_setup

TABLES = ("text", "text_2k", "vqa")


def named_table(name: str, features: str = "minilm"):
    """(table, clusters or None, caveat) of the P6 tables: "text" (the committed QUICK text
    table, `features` as `text_table_with_features`), "text_2k" (TABLE_2K, likewise) or
    "vqa" (the committed easy-vqa table of our own VQA pool; queries about one image share a
    cluster)."""
    if name in ("text", "text_2k"):
        config = _text_table.TABLE_2K if name == "text_2k" else _text_table.TableConfig()
        return _text_table.text_table_with_features(config, features), None, _text_table.CAVEAT
    if name == "vqa":
        table, clusters = _vqa_setup.vqa_table_with_features(features)
        return table, clusters, _vqa_setup.VQA_CAVEAT
    raise ValueError(f"tables: expected names from {TABLES}, received {name!r}")
