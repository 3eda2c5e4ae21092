"""P6 claims on a real text routing table: LatentRouter vs the standard routers.

The table (`_text_table.build_text_table`): real multiple-choice items of the `evals` wheel x
candidates = (model of the `jaxlab.lm` pool, prompt, answer rule), correctness by option
log-likelihood, cost in GFLOPs. Router features: MiniLM-L6 sentence embeddings of the
question (`features="minilm"`), the table's hashed bag of words (`"bow"`) or both. On
held-out queries (stratified splits, one per seed) every router is run at a grid of cost
weights; claims: LatentRouter's AIQ and best rank score are above the best baseline's
(paired bootstrap over test queries). Ablations, masking and task groups are the
experiments routing_ablation, routing_masking and routing_groups.
"""

from __future__ import annotations

import dataclasses

import jax

from experiments._harness import Result, RunContext, log
from experiments.routing import _compare, _text_table

NAME = "routing_text"
PAPER = "P6"
DESCRIPTION = "LatentRouter vs fixed/kNN/linear/MLP/MF/EmbedLLM routers on a real LM routing table"


@dataclasses.dataclass(frozen=True)
class Config(_text_table.TableConfig, _compare.CompareConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, committed table)."""

    features: str = "minilm"


QUICK = Config()
TINY = Config(**_compare.TINY_COMPARE)  # the smoke tier (the committed table)
FULL = Config(
    **{
        f.name: getattr(_text_table.FULL_TABLE, f.name)
        for f in dataclasses.fields(_text_table.TableConfig)
    },
    n_splits=5,
    steps=600,
    n_boot=1000,
)


def full_work(config: Config) -> float:
    """Router fit steps (`_compare.compare_work`)."""
    return _compare.compare_work(config)


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    del ctx  # the table lives in data/routing or the shared content-hashed cache
    table = _text_table.text_table_with_features(config, config.features)
    log.info("routing table: %d queries x %d candidates", table.n_queries, table.n_candidates)
    size = f"{table.n_queries} queries x {table.n_candidates} candidates"
    notes = (
        f"{_text_table.CAVEAT} Table: {size}, groups {', '.join(table.group_names)}; "
        f"{table.meta.get('cost')}; router features: {table.meta.get('features')}. QUICK uses "
        "a reduced table (2 models x 1 prompt x 3 answer rules) built on a shared 2-core "
        "machine; `_text_table.TABLE_2K` (2099 short-prompt items x 15 candidates: SmolLM2 / Gemma "
        "x zero/one-shot and Qwen2.5-Coder-0.5B zero-shot, x 3 rules; "
        "`python -m experiments.routing._setup --2k`) has the "
        "issue's size; the 4-model table with think prompts is FULL (`--full`). AIQ over the test "
        "split's fixed-candidate cost range; the oracle picks the cheapest right candidate; the "
        "zero router is the hull of the fixed candidates."
    )
    return _compare.main_result(
        table, config, key, size=size, caveat=_text_table.CAVEAT, notes=notes
    )
