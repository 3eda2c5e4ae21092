"""P6 claims on a real multimodal routing table: LatentRouter on our own easy-vqa pool.

The table (`_vqa_setup.build_vqa_table`): 3000 easy-vqa test questions (1000 per
question type) x six small JAX vision-question models trained here that see different
views of the image (language-only prior, grey, 8x8, centre crop, two colour widths), so
the best member depends on the visual requirement of the question. Cost: the member's
forward MFLOPs. Router features: the query image's autoencoder feature and the MiniLM-L6
embedding of the question. Splits keep all questions about one image on one side. Claims:
LatentRouter's AIQ and best rank score above the best baseline's (paired bootstrap over
held-out queries).
"""

from __future__ import annotations

import dataclasses

import jax

from experiments._harness import Result, RunContext, log
from experiments.routing import _compare, _tables

NAME = "routing_vqa"
PAPER = "P6"
DESCRIPTION = "LatentRouter vs the standard routers on easy-vqa with our own pool of VQA models"


@dataclasses.dataclass(frozen=True)
class Config(_compare.CompareConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, committed table)."""

    features: str = "minilm"


QUICK = Config()
TINY = Config(**_compare.TINY_COMPARE)  # the smoke tier (the committed table)
FULL = Config(n_splits=5, steps=600, n_boot=1000)


def full_work(config: Config) -> float:
    """Router fit steps (`_compare.compare_work`)."""
    return _compare.compare_work(config)


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    del ctx  # the table is committed under data/routing (or rebuilt from the cache)
    table, clusters, caveat = _tables.named_table("vqa", config.features)
    log.info("vqa table: %d queries x %d candidates", table.n_queries, table.n_candidates)
    size = f"{table.n_queries} queries x {table.n_candidates} candidates"
    members = table.meta.get("members", {})
    notes = (
        f"{caveat} Table: {size}, groups {', '.join(table.group_names)}; {table.meta.get('cost')}; "
        f"router features: {table.meta.get('features')}. Members (FLOPs, full-test accuracy): "
        + "; ".join(f"{n} {m['flops']} {m['test_accuracy']}" for n, m in members.items())
        + ". Splits by image (no image on both sides)."
    )
    return _compare.main_result(
        table, config, key, size=size, caveat=caveat, clusters=clusters, notes=notes
    )
