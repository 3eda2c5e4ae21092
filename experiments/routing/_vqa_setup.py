"""Shared set-up of the multimodal routing experiments: our own VQA pool on easy-VQA.

The queries are easy-VQA test questions (the `easy-vqa` wheel, read as files: 64x64
images of one coloured shape; questions about its shape, its colour, or yes/no about
either). The candidates are OUR OWN POOL of small JAX vision-question models
(`routing.VQAModel`), trained here on the train split, that differ in what they see
(`routing.VQAView`): a language-only prior (blind), grey images (colour lost), 8x8
images (small shapes lost), a centre crop (off-centre shapes lost), and colour models of
two widths; so which member answers a query well depends on its visual requirement, as
P6 argues (its pool: multimodal LLMs on MMR-Bench / VL-RouterBench).

Table fields: quality = correct (0/1); cost = `routing.vqa_flops` of the member in
MFLOPs (forward FLOPs per query, counted from layer shapes, the same for every query);
input tokens = question words, output tokens = 1 (one answer); latency = measured wall
time of a batch of `latency_batch` queries (each with its own image), shared equally;
features = the `routing.ImageEncoder` feature of the query's image (an autoencoder trained
on the train images; standardised per dimension over the train images and scaled by
1/sqrt(D)) concatenated with `routing.hashed_bow` of the question; groups = question
type (shape / colour / yes_no).

QUICK commits `per_type` questions of each type (drawn at random, so the three types
are balanced, unlike the test split's 13/13/74 %), keeping the committed file under
~2 MB. Trained members and the encoder are cached under
`$JAXLAB_CACHE_DIR/routing/vqa/<content hash>.eqx` (member, training settings, code
version), with resumable checkpoints beside them, so a rebuild is instant. Build command:
`python -m experiments.routing._vqa_setup [--full]`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import sys
import time
import zlib
from pathlib import Path

import numpy as np

from experiments._harness import cache_dir
from jaxlab import (
    Checkpointer,
    Driver,
    TqdmProgress,
    load_checkpoint,
    numpy_rng,
    routing,
    save_checkpoint,
)

from ._committed import committed_table
from ._features import FEATURES, sentence_features

CODE_VERSION = "routing-vqa-v2"  # bump when the models, training or table fields change
DATA = Path(__file__).resolve().parents[2] / "data" / "routing"

CAVEAT = (
    "Our own pool: small JAX vision-question models (CNN + bag-of-words, 14 kFLOPs to "
    "~5 MFLOPs per query) trained here on easy-VQA's synthetic shapes, differing in what "
    "they see (blind, grey, 8x8, centre crop, widths); the paper routes multimodal LLMs "
    "(1B-78B) on MMR-Bench / VL-RouterBench."
)


@dataclasses.dataclass(frozen=True)
class Member:
    """One pool member: its view of the image and its width."""

    name: str
    resolution: int = 64
    colour: bool = True
    crop: float = 1.0
    blind: bool = False
    width: int = 8
    learning_rate: float | None = None  # None: the config's
    steps: int | None = None  # None: the config's

    def view(self) -> routing.VQAView:
        """The member's `routing.VQAView`."""
        return routing.VQAView(
            resolution=self.resolution, colour=self.colour, crop=self.crop, blind=self.blind
        )


POOL = (
    Member("blind", blind=True),
    Member("colour8", resolution=8, width=4),
    Member("grey64", resolution=64, colour=False, width=8),
    Member("crop0.5", resolution=32, crop=0.5, width=8),
    Member("colour32-small", resolution=32, width=4),
    # the wide member is unstable at 3e-3 and undertrained at 1e-3 x 3000 steps
    Member("colour64-wide", resolution=64, width=16, learning_rate=2e-3, steps=6000),
)


@dataclasses.dataclass(frozen=True)
class VQATableConfig:
    """What the VQA routing table holds and how its pool is trained (defaults: QUICK)."""

    members: tuple[Member, ...] = POOL
    steps: int = 3000  # optimiser steps per member
    batch_size: int = 16  # images per step, each with all its questions (~10)
    learning_rate: float = 3e-3  # Adam peak, cosine decay to 0 over the steps
    embed_dim: int = 32
    hidden: int = 64
    encoder_dim: int = 16  # ImageEncoder feature size
    encoder_steps: int = 1500
    question_dim: int = 32  # hashed_bow buckets of the question feature
    per_type: int | None = 1000  # queries per question type (None: the whole test split)
    latency_batch: int = 250
    seed: int = 0


FULL_VQA_TABLE = VQATableConfig(steps=10000, encoder_steps=4000, per_type=None)


def table_fields(config: VQATableConfig) -> dict:
    """The fields of `config` that determine the table, JSON-ready."""
    return json.loads(
        json.dumps(
            {
                f.name: (
                    [dataclasses.asdict(m) for m in config.members]
                    if f.name == "members"
                    else getattr(config, f.name)
                )
                for f in dataclasses.fields(VQATableConfig)
            }
        )
    )


def _hash(obj) -> str:
    text = json.dumps({**obj, "code": CODE_VERSION}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _member_key(config: VQATableConfig, name: str):
    import jax

    # from the member's name, not its position: reordering the pool changes nothing
    return jax.random.fold_in(jax.random.key(config.seed), zlib.crc32(name.encode()))


def _type_weights(data: routing.VQAData) -> np.ndarray:
    """Equal total loss weight per question type (yes/no is 74 % of the questions)."""
    counts = np.bincount(data.question_type, minlength=len(data.type_names))
    return (1.0 / counts[data.question_type]).astype(np.float32)


def train_member(member: Member, config: VQATableConfig, train: routing.VQAData):
    """The trained `routing.VQAModel` of `member`: from the cache, or trained now (resumable).

    **Returns:** `(model, seconds)`, seconds spent training in this call (0 when cached).
    """
    import jax
    import optax

    lr = config.learning_rate if member.learning_rate is None else member.learning_rate
    steps = config.steps if member.steps is None else member.steps
    settings = {
        "member": dataclasses.asdict(member),
        "steps": steps,
        "batch_size": config.batch_size,
        "learning_rate": lr,
        "schedule": "cosine",
        "embed_dim": config.embed_dim,
        "hidden": config.hidden,
        "seed": config.seed,
        "vocabulary": list(train.vocabulary),
    }
    path = cache_dir("routing", "vqa") / f"{_hash(settings)}.eqx"
    k_init, k_fit = jax.random.split(_member_key(config, member.name))
    model = routing.VQAModel(
        member.view(),
        len(train.vocabulary),
        len(train.answer_names),
        width=member.width,
        embed_dim=config.embed_dim,
        hidden=config.hidden,
        key=k_init,
    )
    if path.is_file():
        try:
            return load_checkpoint(path, model), 0.0
        except ValueError:
            pass  # a damaged cache file is retrained
    t0 = time.perf_counter()
    model, _ = routing.fit_vqa(
        model,
        train.images,
        train.tokens,
        train.answers,
        train.image_index,
        key=k_fit,
        steps=steps,
        batch_size=config.batch_size,
        optimizer=optax.adam(optax.cosine_decay_schedule(lr, steps)),
        sample_weights=_type_weights(train),
        driver=Driver(
            progress=TqdmProgress(desc=f"VQA member {member.name}"),
            checkpointer=Checkpointer(path.with_suffix(".ckpt"), every=500, resume=True),
        ),
    )
    save_checkpoint(path, model)
    path.with_suffix(".ckpt").unlink(missing_ok=True)
    return model, time.perf_counter() - t0


def train_encoder(config: VQATableConfig, train: routing.VQAData):
    """The trained `routing.ImageEncoder` (cache or train now); returns (encoder, seconds)."""
    import jax

    settings = {"encoder_dim": config.encoder_dim, "steps": config.encoder_steps}
    settings["seed"] = config.seed
    path = cache_dir("routing", "vqa") / f"encoder-{_hash(settings)}.eqx"
    k_init, k_fit = jax.random.split(_member_key(config, "<image encoder>"))
    encoder = routing.ImageEncoder(config.encoder_dim, key=k_init)
    if path.is_file():
        try:
            return load_checkpoint(path, encoder), 0.0
        except ValueError:
            pass
    t0 = time.perf_counter()
    encoder, _ = routing.fit_image_encoder(
        encoder,
        train.images,
        key=k_fit,
        steps=config.encoder_steps,
        driver=Driver(
            progress=TqdmProgress(desc="VQA image encoder"),
            checkpointer=Checkpointer(path.with_suffix(".ckpt"), every=500, resume=True),
        ),
    )
    save_checkpoint(path, encoder)
    path.with_suffix(".ckpt").unlink(missing_ok=True)
    return encoder, time.perf_counter() - t0


def select_queries(test: routing.VQAData, config: VQATableConfig) -> np.ndarray:
    """Indices of the table's test questions: `per_type` of each type at random (sorted)."""
    import jax

    if config.per_type is None:
        return np.arange(test.n_questions)
    rng = numpy_rng(jax.random.key(config.seed))
    picks = []
    for t in range(len(test.type_names)):
        members = np.flatnonzero(test.question_type == t)
        if members.size < config.per_type:
            raise ValueError(
                f"per_type: type {test.type_names[t]!r} has {members.size} test questions, "
                f"{config.per_type} requested"
            )
        picks.append(rng.choice(members, config.per_type, replace=False))
    return np.sort(np.concatenate(picks))


def _timed_predictions(model, test: routing.VQAData, rows: np.ndarray, batch: int):
    """(answers, per-query latency) of `model` on questions `rows`, timed per batch of
    `batch` queries each with its own image copy (one compile first, not timed)."""
    import jax

    pad = (-rows.size) % batch
    padded = np.concatenate([rows, np.repeat(rows[:1], pad)])
    chunks = padded.reshape(-1, batch)

    def run(chunk):
        imgs = test.images[test.image_index[chunk]]
        out = routing.vqa_predict(
            model, imgs, test.tokens[chunk], np.arange(batch, dtype=np.int32), batch_size=batch
        )
        return np.asarray(jax.block_until_ready(out))

    run(chunks[0])  # compile
    preds, lat = [], []
    for chunk in chunks:
        t0 = time.perf_counter()
        preds.append(run(chunk))
        lat.append(np.full(batch, (time.perf_counter() - t0) / batch))
    return np.concatenate(preds)[: rows.size], np.concatenate(lat)[: rows.size]


def _type_accuracy(correct: np.ndarray, types: np.ndarray, names) -> dict[str, float]:
    out = {n: float(correct[types == t].mean()) for t, n in enumerate(names)}
    out["all"] = float(correct.mean())
    return out


def build_vqa_table(config: VQATableConfig = VQATableConfig()) -> routing.RoutingTable:
    """The (easy-VQA test questions x pool members) table; members from the cache or
    trained now (each resumable on its own)."""
    t_start = time.perf_counter()
    train = routing.load_easy_vqa("train")
    test = routing.load_easy_vqa("test")
    rows = select_queries(test, config)
    n, m = rows.size, len(config.members)
    quality, latency = np.zeros((n, m)), np.zeros((n, m))
    cost = np.zeros((n, m))
    members_meta, train_seconds = {}, 0.0
    for j, member in enumerate(config.members):
        model, seconds = train_member(member, config, train)
        train_seconds += seconds
        full = np.asarray(routing.vqa_predict(model, test.images, test.tokens, test.image_index))
        pred, lat = _timed_predictions(model, test, rows, config.latency_batch)
        if not np.array_equal(pred, full[rows]):
            raise RuntimeError(f"{member.name}: batched and per-image predictions disagree")
        quality[:, j] = pred == test.answers[rows]
        latency[:, j] = lat
        flops = routing.vqa_flops(model)
        cost[:, j] = flops / 1e6
        members_meta[member.name] = {
            "view": member.view().name,
            "width": member.width,
            "flops": flops,
            "test_accuracy": _type_accuracy(
                full == test.answers, test.question_type, test.type_names
            ),
            "train_seconds_this_call": seconds,
        }
    encoder, enc_seconds = train_encoder(config, train)
    f_train = np.asarray(routing.encode_images(encoder, train.images))
    mu, sd = f_train.mean(0), f_train.std(0) + 1e-6
    f_test = (np.asarray(routing.encode_images(encoder, test.images)) - mu) / sd
    f_test = f_test / np.sqrt(config.encoder_dim)
    questions = [test.questions[i] for i in rows]
    features = np.concatenate(
        [
            f_test[test.image_index[rows]],
            routing.hashed_bow(questions, dim=config.question_dim),
        ],
        axis=1,
    )
    n_words = (test.tokens[rows] != 0).sum(1)
    return routing.RoutingTable(
        quality=quality,
        cost=cost,
        candidates=tuple(mb.name for mb in config.members),
        input_tokens=np.repeat(n_words[:, None], m, 1),
        output_tokens=np.ones((n, m), np.int64),
        latency=latency,
        features=features,
        groups=test.question_type[rows],
        group_names=test.type_names,
        query_ids=tuple(f"test/{i}" for i in rows),
        meta={
            "code": CODE_VERSION,
            "data": "easy-vqa==1.0 test split (questions.json rows = query ids)",
            "pool": CAVEAT,
            "members": members_meta,
            "cost": (
                "routing.vqa_flops / 1e6 (MFLOPs per query: 2 x multiply-accumulates of "
                "every conv and dense layer)"
            ),
            "latency": (
                f"wall seconds of a batch of {config.latency_batch} queries (each with its "
                "own image) / batch size, after one untimed compile"
            ),
            "features": (
                f"[ImageEncoder feature ({config.encoder_dim}, autoencoder, standardised over "
                f"train images, / sqrt(D)), hashed_bow(question, dim={config.question_dim})]"
            ),
            "queries": (
                "all test questions"
                if config.per_type is None
                else f"{config.per_type} random test questions per type (balanced)"
            ),
            "train_seconds_this_call": train_seconds + enc_seconds,
            "build_seconds_this_call": time.perf_counter() - t_start,
            "build_command": "python -m experiments.routing._vqa_setup",
        },
    )


def vqa_table(config: VQATableConfig = VQATableConfig()) -> routing.RoutingTable:
    """The committed table under `data/routing/` when it was built with these settings and
    this code version; otherwise `build_vqa_table` (cache, then training)."""
    table = committed_table("vqa", table_fields(config), CODE_VERSION)
    return build_vqa_table(config) if table is None else table


if __name__ == "__main__":
    _full = "--full" in sys.argv
    cfg = FULL_VQA_TABLE if _full else VQATableConfig()
    t0 = time.perf_counter()
    table = build_vqa_table(cfg)
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    table = dataclasses.replace(
        table,
        meta={
            **table.meta,
            "config": table_fields(cfg),
            "machine": platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_average_at_end": load,
            "built_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "wall_seconds": time.perf_counter() - t0,
        },
    )
    out = table.save(DATA / ("vqa_full" if _full else "vqa_quick"))
    print(f"{table.n_queries} queries x {table.n_candidates} candidates -> {out}")
    for name, info in table.meta["members"].items():
        acc = {k: round(v, 3) for k, v in info["test_accuracy"].items()}
        print(f"{name:16s} {info['flops']:>9d} FLOPs  full-test accuracy {acc}")
    best = int(np.argmax(table.quality.mean(0)))
    print(
        f"oracle accuracy {table.quality.max(1).mean():.3f} vs best single member "
        f"{table.candidates[best]} {table.quality[:, best].mean():.3f}"
    )


VQA_CAVEAT = CAVEAT
_SHAPE_WORDS = ("circle", "rectangle", "triangle")


def fine_groups(questions, coarse, type_names) -> tuple[np.ndarray, tuple[str, ...]]:
    """Finer task groups for routing_groups: shape, colour, and the yes/no questions split
    by what they ask about (a shape word in the question: yes_no/shape, else yes_no/colour)."""
    names = ("shape", "colour", "yes_no/shape", "yes_no/colour")
    out = np.empty(len(questions), np.int64)
    for i, (q, g) in enumerate(zip(questions, coarse, strict=True)):
        t = type_names[g]
        if t != "yes_no":
            out[i] = names.index(t)
        else:
            words = q.lower().replace("?", " ").split()
            out[i] = 2 if any(w in _SHAPE_WORDS for w in words) else 3
    return out, names


def vqa_table_with_features(features: str = "minilm"):
    """(table, clusters) of the committed QUICK easy-VQA table with router features
    `features` ("minilm": the image feature + the MiniLM-L6 sentence embedding of the
    question; "bow": the table's own image feature + hashed bag of words; "both": all three)
    and the finer task groups of `fine_groups`; clusters = the query's image (questions
    about one image stay on one side of a split)."""
    if features not in FEATURES:
        raise ValueError(f"features: expected one of {FEATURES}, received {features!r}")
    config = VQATableConfig()
    table = vqa_table(config)
    test = routing.load_easy_vqa("test")
    rows = np.array([int(q.split("/")[1]) for q in table.query_ids])
    questions = [test.questions[i] for i in rows]
    groups, names = fine_groups(questions, test.question_type[rows], test.type_names)
    x, desc = table.features, table.meta.get("features")
    if features != "bow":
        image = table.features[:, : config.encoder_dim]
        text = sentence_features(questions)
        parts = [image, text] if features == "minilm" else [table.features, text]
        x = np.concatenate(parts, axis=1)
        desc = (
            f"[ImageEncoder feature ({config.encoder_dim}), MiniLM-L6 sentence embedding of the "
            "question (384, unit norm)"
            + (f", hashed_bow(question, dim={config.question_dim})]" if features == "both" else "]")
        )
    table = dataclasses.replace(
        table,
        features=x,
        groups=groups,
        group_names=names,
        meta={**table.meta, "features": desc},
    )
    return table, test.image_index[rows].astype(np.int64)
