"""P19 HAPS data of the haps_* experiments: the frozen prefix of each (model, item), cached
per chunk; the adapted blocks' inputs; fitting and scoring HAPS on a split (the paired
bootstrap of a per-query gain is the harness's `paired_bootstrap`). Cache build:
`python -m experiments.routing._setup --haps [--full]`."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from typing import Any

import numpy as np

from experiments._harness import cache_dir, load_npz, model_sha256, save_npz
from jaxlab import Driver, progress_bar, routing

from ._loader import ModelLoader
from ._sources import source_items

HAPS_CODE_VERSION = "haps-prefix-v1"  # bump when prompts or the cached quantity change
HAPS_MODELS = ("smollm2-135m-instruct", "gemma3-270m", "qwen2.5-coder-0.5b-instruct")
HAPS_MODELS_FULL = (*HAPS_MODELS, "qwen2.5-coder-1.5b-instruct")
#: items per source of the HAPS data (QUICK: MedMCQA's prompts are short, LogiQA/ReClor long).
#: QUICK was 200/50/50 (300 items) at 150 steps of batch 16; on the shared 2-core machine a
#: step of the three adapted models took ~10 s (load ~17), so main alone would have run ~90
#: min: QUICK is reduced to 150 items (multiples of the cache chunk of 25, so the prefix
#: cache built for 300 still serves) and 50 steps of batch 8 (`HAPSConfig`).
HAPS_SOURCES = (("medmcqa", 100), ("logiqa", 25), ("reclor", 25))
HAPS_SOURCES_FULL = (("medmcqa", 299), ("logiqa", 1200), ("reclor", 499))
HAPS_CAVEAT = (
    "Small open text models of the jaxlab.lm pool (135M-0.5B parameters: SmolLM2-135M, "
    "Gemma-3-270M, Qwen2.5-Coder-0.5B; 4-bit GGUF dequantised to float32) on real evals "
    "multiple-choice items answered by the option letter; the paper routes larger LLMs on "
    "its own benchmarks"
)
#: the QUICK reduction, stated in every QUICK claim (see `HAPS_SOURCES`)
HAPS_QUICK_NOTE = (
    "QUICK reduced for a shared 2-core machine: 150 items, 50 steps of batch 8 (not 300 items "
    "and 150 steps of batch 16)"
)
#: how every gain claim is tested (a `superior` claim on the accuracy difference per seed)
HAPS_NULL = (
    "harness t-interval over seeds of the per-seed held-out accuracy difference (each seed "
    "its own split and fits; null: no gain)"
)


def haps_prompt(item: dict) -> str:
    """The item's prompt, ending in "Answer:" (the letter is the continuation)."""
    p = item["prompt"].rstrip()
    return p if p.endswith("Answer:") else p + "\nAnswer:"


def haps_items(per_source=HAPS_SOURCES) -> list[dict]:
    """The HAPS queries (prompt ending in "Answer:", 4 options, answer, group)."""
    return [{**q, "prompt": haps_prompt(q)} for q in source_items(per_source)[0]]


def letter_tokens(tok) -> np.ndarray:
    """(4,) token ids of " A" .. " D" (each one token in the pool's tokenizers)."""
    ids = [tok.encode(" " + c, add_bos=False) for c in "ABCD"]
    if any(len(i) != 1 for i in ids):
        raise ValueError(f"the letters ' A'..' D' are not single tokens: {ids}")
    return np.array([i[0] for i in ids], np.int32)


def _bucket(n: int) -> int:
    b = 16
    while b < n:
        b = b * 3 // 2 if b & (b - 1) == 0 else b * 4 // 3
    return b


def prefix_residuals(
    model: str, items: list[dict], *, top: int, chunk: int = 25, models: ModelLoader | None = None
) -> dict:
    """Per item, the residual stream entering block `n_layers - top` at every prompt token.

    The frozen bottom `n_layers - top` blocks run once per item; the result is cached per
    chunk of items under `$JAXLAB_CACHE_DIR/routing/haps/<content hash>.npz` (model file
    SHA-256, prompts, `top`, code version), so a killed build resumes at its chunk.

    **Returns:** `{"resid": list of (T_i, d) float32, "letters": (4,) int32,
    "n_layers": int, "seconds": build seconds spent in this call}`.
    """
    import equinox as eqx
    import jax.numpy as jnp

    from jaxlab import lm

    models = ModelLoader() if models is None else models
    sha = model_sha256(model)
    out: list[np.ndarray] = []
    letters, n_layers, t0 = None, None, time.perf_counter()
    fn = None
    starts = list(range(0, len(items), chunk))
    for s in progress_bar(starts, desc=f"HAPS prefix cache {model}"):
        part = items[s : s + chunk]
        h = hashlib.sha256(
            json.dumps(
                {
                    "model": sha,
                    "prompts": [it["prompt"] for it in part],
                    "top": top,
                    "code": HAPS_CODE_VERSION,
                },
                sort_keys=True,
            ).encode()
        ).hexdigest()[:24]
        path = cache_dir("routing", "haps") / f"{h}.npz"
        cached = load_npz(path)
        if cached is None:
            net, tok = models(model)
            if fn is None:
                # top = 0: every block is adapted, the "prefix" is the embedding (FULL)
                lower = lm.layer_slice(net, 0, net.config.n_layers - top) if top else net

                @eqx.filter_jit
                def fn(lower, toks, mask):
                    if not top:
                        acts = lm.forward_batched(lower, toks, mask=mask, capture=("resid_pre",))[1]
                        return acts["resid_pre"][0]
                    cache = lm.KVCache.empty(lower.config, toks.shape[0])
                    return lower.run(toks, lm.positions_from_mask(mask), cache)[0]

            arrays = {
                "letters": letter_tokens(tok),
                "n_layers": np.array(net.config.n_layers),
            }
            for i, it in enumerate(part):
                ids = tok.encode(it["prompt"])
                P = _bucket(len(ids))
                toks = np.zeros(P, np.int32)
                mask = np.zeros(P, np.int32)
                toks[P - len(ids) :], mask[P - len(ids) :] = ids, 1
                r = fn(lower, jnp.asarray(toks), jnp.asarray(mask))
                arrays[f"resid{i}"] = np.asarray(r)[P - len(ids) :].astype(np.float32)
            save_npz(path, arrays)
            cached = arrays
        letters, n_layers = cached["letters"], int(cached["n_layers"])
        out += [cached[f"resid{i}"] for i in range(len(part))]
    return {
        "resid": out,
        "letters": letters,
        "n_layers": n_layers,
        "seconds": time.perf_counter() - t0,
    }


@dataclasses.dataclass(frozen=True)
class HAPSConfig:
    """The HAPS data and model settings shared by the haps_* experiments (defaults: QUICK).

    QUICK is reduced for the shared 2-core machine (see `HAPS_SOURCES`): 150 items, 50
    steps of batch 8 (400 query visits, ~4.4 passes over the 90 training items) instead of
    300 items and 150 steps of batch 16; FULL keeps batch 16 and 2000 steps."""

    models: tuple[str, ...] = HAPS_MODELS
    per_source: tuple[tuple[str, int], ...] = HAPS_SOURCES
    cached_top: int = 4  # blocks above the cached residual (the prefix cache's `top`)
    top: int = 4  # adapted blocks (<= cached_top; all blocks in FULL)
    n_active: int = 2  # last prompt tokens run through the adapted blocks
    rank: int = 4
    targets: tuple[str, ...] = ("q", "o")
    hidden: int = 64
    steps: int = 50
    batch_size: int = 8
    #: every trained method's learning rate in the haps_* experiments (HAPS, its LoRA
    #: baselines and the learned routers, all for `steps` steps): an optimizer grid of one
    #: value shared by method and baselines, tuned for none of them
    learning_rate: float = 3e-3
    reward_weight: float = 1.0
    cost_weight: float = 0.0
    explore: float = 0.3
    test_fraction: float = 0.4
    n_boot: int = 1000
    #: seeds of the accuracy claims (each its own split and fits; the t-interval over seeds
    #: needs >= 2)
    n_seeds: int = 3
    #: margin of the superiority claims (HAPS's accuracy gain over a baseline or an
    #: ablation): the paper claims a gain of any size, so 0 (null: no gain)
    gain_margin: float = 0.0


HAPS_FULL: dict[str, Any] = dict(
    models=HAPS_MODELS_FULL,
    per_source=HAPS_SOURCES_FULL,
    cached_top=0,
    top=0,
    steps=2000,
    batch_size=16,
)


#: the smoke tier's HAPS data and fits (the haps_* TINY configs): the two smallest pool
#: models (HAPS routes between models, so it needs two), 12 MedMCQA items, one adapted
#: block on the last prompt token; its prefix cache is built by `prefix_residuals` (its
#: content hash differs from QUICK's: other items and `top`)
HAPS_TINY: dict[str, Any] = dict(
    models=HAPS_MODELS[:2],
    per_source=(("medmcqa", 12),),
    cached_top=1,
    top=1,
    n_active=1,
    rank=2,
    hidden=16,
    steps=4,
    batch_size=4,
    n_boot=50,
    n_seeds=2,
)


def haps_work(config: HAPSConfig, seeds: int = 1) -> float:
    """The dry run's work unit: models' parameters x (prefix items + seeds x steps x batch x
    blocks) (`seeds`: how many times the fits are repeated, one per seed)."""
    from jaxlab import lm

    items = sum(n for _, n in config.per_source)
    params = sum(lm.MODELS[m].n_params for m in config.models) / 1e9
    blocks = config.top or 24  # top 0: every block (the pool's models have 24-30)
    return params * (items + seeds * config.steps * config.batch_size * blocks)


@dataclasses.dataclass
class HAPSData:
    """Everything the haps_* experiments train and score on (N queries, M models, K=4)."""

    items: list[dict]
    answers: np.ndarray  # (N,)
    groups: np.ndarray  # (N,)
    group_names: tuple[str, ...]
    features: np.ndarray  # (N, F)
    cost: np.ndarray  # (N, M) GFLOPs of the whole prompt + letter
    uppers: list  # M frozen adapted blocks (head reduced to the 4 letter rows)
    inputs: list  # M AdaptedInputs stacked over N
    options: list  # M (4,) option ids into the reduced head: arange(4)
    n_layers: list[int]
    base_logits: np.ndarray  # (N, M, 4) plain models' letter logits
    cache_seconds: float  # prefix-cache time in this call (0 when all cached)
    prepare_seconds: float  # prefix K/V of the adapted blocks, in this call


def haps_data(config: HAPSConfig) -> HAPSData:
    """Load (or build) the prefix cache of every model and item and prepare the adapted
    blocks' inputs; one model in memory at a time (the prefix cache on disk is what later
    runs share; nothing is kept between runs in this process)."""
    import jax
    import jax.numpy as jnp

    from jaxlab import lm

    items = haps_items(config.per_source)
    groups = [name for name, _ in config.per_source]
    loader = ModelLoader()
    uppers, inputs, n_layers, costs, base, pooled = [], [], [], [], [], None
    cache_s = prep_s = 0.0
    for name in config.models:
        info = lm.MODELS[name]
        pre = prefix_residuals(name, items, top=config.cached_top, models=loader)
        cache_s += pre["seconds"]
        t0 = time.perf_counter()
        net, _ = loader(name)
        L = net.config.n_layers
        top = L if config.top == 0 else config.top
        start = L - top
        lengths = np.array([r.shape[0] for r in pre["resid"]])
        costs.append(2 * info.n_params * (lengths + 1) / 1e9)
        resid = pre["resid"]
        if pooled is None:  # features: the smallest model's mean residual (cached anyway)
            pooled = np.stack([r.mean(0) for r in resid])
        cached_top = L if config.cached_top == 0 else config.cached_top
        if top < cached_top:
            mid = lm.layer_slice(net, L - cached_top, start)
            run_mid = jax.jit(
                lambda x, m=mid: m.run_blocks(
                    x,
                    jnp.arange(x.shape[0], dtype=jnp.int32),
                    lm.KVCache.empty(m.config, x.shape[0]),
                )[0]
            )
            resid = [np.asarray(run_mid(jnp.asarray(r))) for r in progress_bar(resid, desc="mid")]
        upper = lm.layer_slice(net, start)
        head = upper.embed if upper.lm_head is None else upper.lm_head
        # only the 4 letter rows of the head are ever read: keep those, not the vocabulary
        upper = dataclasses.replace(upper, embed=head[jnp.asarray(pre["letters"])], lm_head=None)
        size = int(lengths.max()) - config.n_active
        rows = [
            routing.adapted_inputs(upper, r, n_active=config.n_active, size=size)
            for r in progress_bar(resid, desc=f"adapted-block prefix {name}")
        ]
        stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *rows)
        del rows
        opts = jnp.arange(4, dtype=jnp.int32)
        logits = jax.jit(
            jax.vmap(lambda x, u=upper, o=opts: routing.adapted_option_logits(u, x, None, o))
        )(stacked)
        base.append(np.asarray(logits))
        uppers.append(upper)
        inputs.append(stacked)
        n_layers.append(L)
        prep_s += time.perf_counter() - t0
    loader.pair = loader.name = None  # the last full model is not needed any more
    assert pooled is not None
    pooled = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    bow = routing.hashed_bow([q["question"] for q in items], dim=256)
    return HAPSData(
        items=items,
        answers=np.array([q["answer"] for q in items]),
        groups=np.array([groups.index(q["group"]) for q in items]),
        group_names=tuple(groups),
        features=np.concatenate([bow, pooled], 1).astype(np.float32),
        cost=np.stack(costs, 1),
        uppers=uppers,
        inputs=inputs,
        options=[np.arange(4, dtype=np.int32)] * len(uppers),
        n_layers=n_layers,
        base_logits=np.stack(base, 1),
        cache_seconds=cache_s,
        prepare_seconds=prep_s,
    )


def plain_table(data: HAPSData) -> routing.RoutingTable:
    """The routing-only table: correctness of each plain model's letter choice."""
    correct = np.argmax(data.base_logits, -1) == data.answers[:, None]
    return routing.RoutingTable(
        quality=correct.astype(float),
        cost=data.cost,
        candidates=data_names(data),
        features=data.features,
        groups=data.groups,
        group_names=data.group_names,
    )


def data_names(data: HAPSData) -> tuple[str, ...]:
    """Candidate names: the models, in order."""
    return tuple(HAPS_MODELS_FULL[: len(data.uppers)])


def haps_split(data: HAPSData, config: HAPSConfig, key) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) query indices, stratified by task group."""
    train, test = plain_table(data).split(config.test_fraction, key=key)
    return np.array(train.query_ids, int), np.array(test.query_ids, int)


def rows(data: HAPSData, idx) -> list:
    """The M stacked AdaptedInputs restricted to queries `idx`."""
    import jax
    import jax.numpy as jnp

    i = jnp.asarray(idx)
    return [jax.tree_util.tree_map(lambda a: a[i], x) for x in data.inputs]


def train_haps(
    data: HAPSData,
    config: HAPSConfig,
    features,
    train,
    key,
    *,
    shared=True,
    ctx=None,
    tag="haps",
    **step_options,
):
    """`routing.fit_haps` on the queries `train` with `features` (N, F); returns
    (trained HAPS, History, wall seconds). With a `RunContext` `ctx`, the fit shows a
    progress bar labelled `tag` and checkpoints to `ctx.checkpointer(tag)` (a resumed run
    skips finished fits; the seconds then count only this call's steps)."""
    import jax
    import optax

    from jaxlab import TqdmProgress

    k_init, k_fit = jax.random.split(key)
    haps = routing.HAPS(
        features.shape[1],
        [u.config for u in data.uppers],
        data.cost.mean(0),
        key=k_init,
        hidden=config.hidden,
        rank=config.rank,
        targets=config.targets,
        shared=shared,
    )
    opts = dict(
        batch_size=config.batch_size,
        reward_weight=config.reward_weight,
        cost_weight=config.cost_weight,
        explore=config.explore,
    )
    opts.update(step_options)
    t0 = time.perf_counter()
    trained, hist = routing.fit_haps(
        haps,
        features[train],
        data.answers[train],
        data.cost[train],
        data.uppers,
        rows(data, train),
        data.options,
        key=k_fit,
        steps=config.steps,
        optimizer=optax.adamw(config.learning_rate, weight_decay=1e-4),
        driver=Driver(
            progress=None if ctx is None else TqdmProgress(desc=f"HAPS fit {tag}"),
            checkpointer=None if ctx is None else ctx.checkpointer(tag, every=25),
        ),
        **opts,
    )
    return trained, hist, time.perf_counter() - t0


def haps_outcomes(haps, data: HAPSData, features, idx, cost_shifts=(0.0,)):
    """Per query of `idx`: adapted correctness of every model (n, M) and, per cost shift,
    the routed choice (S, n)."""
    import jax.numpy as jnp

    logits, logp = routing.haps_predict(
        haps, features[idx], data.uppers, rows(data, idx), data.options
    )
    correct = np.asarray(jnp.argmax(logits, -1)) == data.answers[idx][:, None]
    c = data.cost.mean(0) / data.cost.mean(0).max()
    choice = np.stack([np.argmax(np.asarray(logp) - s * c[None, :], 1) for s in cost_shifts])
    return correct, choice
