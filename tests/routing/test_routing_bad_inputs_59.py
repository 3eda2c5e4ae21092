"""Issue #59's routing examples, each refused with a `ValueError` naming the argument or
the file (before: a silent answer, a wrapped index, or an unbounded allocation)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxlab import routing
from jaxlab.routing import _table
from jaxlab.routing._vqa_data import MAX_QUESTION_CHARS

from .test_vqa import _tiny_root


def _table40():
    rng = np.random.default_rng(0)
    n, m, f = 40, 3, 5
    return routing.RoutingTable(
        quality=rng.integers(0, 2, (n, m)).astype(float),
        cost=np.tile([1.0, 2.0, 4.0], (n, 1)),
        candidates=("a", "b", "c"),
        features=rng.normal(size=(n, f)),
    )


def test_oracle_choice_refuses_a_nan_candidate():
    q = np.array([[0.2, 1.0, 0.5], [0.2, 0.3, 0.1]])
    c = np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 0.5]])
    # oracle: the cheapest of the best quality per row, by hand
    assert routing.oracle_choice(q, c).tolist() == [1, 1]
    bad = q.copy()
    bad[0, 0] = np.nan  # picked candidate 0 before (every comparison with NaN False)
    with pytest.raises(ValueError, match="quality: expected finite values"):
        routing.oracle_choice(bad, c)
    with pytest.raises(ValueError, match="cost: expected finite values"):
        routing.oracle_choice(q, np.where(q > 0.9, np.inf, c))
    with pytest.raises(ValueError, match="quality, cost: expected two"):
        routing.oracle_choice(q, c[:1])
    with pytest.raises(ValueError, match="available: expected"):
        routing.oracle_choice(q, c, available=[True, False])


def test_route_refuses_a_nan_cost_weight():
    table = _table40()
    r = routing.KNNRouter.fit(table, k=3)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="cost_weight: expected a finite number"):
            routing.route(r, table.features, cost_weight=bad)


def test_rows_refuses_a_short_mask_and_wrapping_ids():
    table = _table40()
    mask = np.zeros(40, bool)
    mask[[3, 7]] = True
    assert table.rows(mask).query_ids == ("3", "7")
    assert table.rows([39, 0]).query_ids == ("39", "0")
    with pytest.raises(ValueError, match=r"index: expected a boolean mask of shape \(40,\)"):
        table.rows(np.array([True, False, True]))  # returned rows 0 and 2 before
    for bad in ([-1], [40]):
        with pytest.raises(ValueError, match=r"index: query indices must lie in \[0, 40\)"):
            table.rows(bad)


def test_a_string_is_not_a_sequence_of_candidates(tmp_path):
    table = _table40()
    with pytest.raises(ValueError, match="candidates: expected a sequence of strings"):
        routing.RoutingTable(quality=table.quality, cost=table.cost, candidates="abc")
    with pytest.raises(ValueError, match="group_names: expected a sequence of strings"):
        routing.RoutingTable(
            quality=table.quality, cost=table.cost, candidates=("a", "b", "c"), group_names="g"
        )
    table.save(tmp_path / "t")
    manifest = tmp_path / "t.json"
    info = json.loads(manifest.read_text())
    assert routing.RoutingTable.load(tmp_path / "t").candidates == ("a", "b", "c")
    manifest.write_text(json.dumps(info | {"candidates": "abc"}))
    with pytest.raises(ValueError, match=r"t\.json: candidates: expected a JSON list"):
        routing.RoutingTable.load(tmp_path / "t")
    manifest.write_text("[" * 100_000 + "]" * 100_000)  # RecursionError before
    with pytest.raises(ValueError, match=r"t\.json: not a readable .*nested too deeply"):
        routing.RoutingTable.load(tmp_path / "t")


def test_rank_score_refuses_accuracy_outside_the_unit_interval():
    # VL-RouterBench's formula by hand: A = 0.5, C = (log 2 - log 1) / (log 2 - log 0.5)
    a, cheap = 0.5, np.log(2.0) / np.log(4.0)
    want = 1.1 * a * cheap / (0.1 * a + cheap)
    assert routing.rank_score(a, 1.0, cmin=0.5, cmax=2.0) == pytest.approx(want)
    for bad in (5.0, -0.1, np.nan):
        with pytest.raises(ValueError, match=r"accuracy: expected values in \[0.0, 1.0\]"):
            routing.rank_score(bad, 1.0, cmin=0.5, cmax=2.0)
    with pytest.raises(ValueError, match="cost: expected finite"):
        routing.rank_score(0.5, np.nan, cmin=0.5, cmax=2.0)
    with pytest.raises(ValueError, match="beta: expected a finite number"):
        routing.rank_score(0.5, 1.0, cmin=0.5, cmax=2.0, beta=np.nan)


def test_load_bounds_decompression_by_the_memory_available(tmp_path, monkeypatch):
    n = 2048
    big = routing.RoutingTable(
        quality=np.zeros((n, 2)),
        cost=np.ones((n, 2)),
        candidates=("a", "b"),
        features=np.zeros((n, 4096)),  # 64 MiB inflated, a few hundred kB deflated
    )
    npz = big.save(tmp_path / "big")
    assert npz.stat().st_size < 2**21
    assert routing.RoutingTable.load(tmp_path / "big").features.shape == (n, 4096)
    monkeypatch.setattr(_table, "available_memory", lambda: 2**26)  # half: 32 MiB
    with pytest.raises(ValueError, match=r"big\.npz"):
        routing.RoutingTable.load(tmp_path / "big")


def test_easy_vqa_refuses_an_enormous_question_before_allocating(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path / "cache"))
    root = _tiny_root(tmp_path)
    assert routing.load_easy_vqa("train", root=root, cache=False).tokens.shape == (2, 5)
    q = root / "train" / "questions.json"
    long = "a " * 2_000_000  # 4 MB: a (rows x 2e6) int32 token matrix before
    q.write_text(json.dumps([["what color?", "blue", 0], [long, "no", 0]]))
    with pytest.raises(ValueError, match=rf"row 1 has a question of .* the {MAX_QUESTION_CHARS}"):
        routing.load_easy_vqa("train", root=root, cache=False)
    q.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match=r"questions\.json: not a readable"):
        routing.load_easy_vqa("train", root=root, cache=False)


# found by the round-3 fuzz table (tests/test_fuzz_public_api.py): each was accepted
# silently (NaN/inf, a wrapped candidate index, an empty table, a 10**9-bucket
# allocation) or failed with an unnamed error
Q = np.array([[0.2, 0.9, 0.5], [0.4, 0.3, 0.1]])
C = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 0.5]])
NAN_C = np.where(np.arange(3) == 1, np.nan, C)
BAD = {
    "zero_router_curve-cost-nan": ("cost", lambda: routing.zero_router_curve(NAN_C, Q)),
    "zero_router_curve-quality-str": ("quality", lambda: routing.zero_router_curve(C, "abc")),
    "pgr-quality-nan": ("quality", lambda: routing.pgr([0.3, np.nan], 0.2, 0.8)),
    "pgr-weak-str": ("weak", lambda: routing.pgr([0.3], "abc", 0.8)),
    "call_performance_threshold-target-none": (
        "target",
        lambda: routing.call_performance_threshold(
            [0.2, 0.5], [0.3, 0.6], None, weak=0.2, strong=0.8
        ),
    ),
    "accuracy_at_cost-budget-nan": (
        "budget",
        lambda: routing.accuracy_at_cost([1.0, 2.0], [0.2, 0.6], np.nan),
    ),
    "routed_outcome-choice-negative": ("choice", lambda: routing.routed_outcome([-1, 0], Q, C)),
    "routed_outcome-cost-nan": ("cost", lambda: routing.routed_outcome([1, 0], Q, NAN_C)),
    "threshold_route-quality-nan": (
        "predicted_quality",
        lambda: routing.threshold_route(np.where(Q > 0.8, np.nan, Q), C[0], 0.5),
    ),
    "threshold_route-quality-empty": (
        "predicted_quality",
        lambda: routing.threshold_route(np.zeros((0, 3)), C[0], 0.5),
    ),
    "threshold_route-threshold-nan": (
        "threshold",
        lambda: routing.threshold_route(Q, C[0], np.nan),
    ),
    "threshold_route-cost-width": (
        "candidate_cost",
        lambda: routing.threshold_route(Q, C[0, :2], 0.5),
    ),
    "calibrate_threshold-quality-str": (
        "predicted_quality",
        lambda: routing.calibrate_threshold("abc", C[0], 0.5),
    ),
    "hashed_bow-dim-1e12": ("dim", lambda: routing.hashed_bow(["a b"], dim=10**12)),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_round3_bad_input_is_refused_naming_the_argument(case):
    arg, call = BAD[case]
    with pytest.raises(ValueError, match=rf"(^|\W){arg}\W"):
        call()


# found by the round-4 fuzz entries (every public routing function declared): each was
# accepted silently (NaN features trained or routed, a 1.5 quality, a string mask, a
# clamped token id, out-of-range pixels, an ignored feature_dim) or failed with an unnamed
# error (another argument's name, a TypeError from inside a matmul or a loss)
def _mlp():
    import jax

    return routing.MLPRouter(5, 3, np.array([1.0, 2.0, 4.0]), hidden=(4,), key=jax.random.key(0))


def _knn():
    return routing.KNNRouter.fit(_table40(), k=3)


def _vqa():
    import jax

    view = routing.VQAView(resolution=8, image_size=8)
    return routing.VQAModel(view, 6, 3, width=2, embed_dim=4, hidden=5, key=jax.random.key(0))


def _fit(features=None, quality=None):
    import jax

    t = _table40()
    x = t.features[:6] if features is None else features
    y = t.quality[:6] if quality is None else quality
    return routing.fit_router(_mlp(), x, y, key=jax.random.key(1), steps=1)


def _surrogate(logits=(0.1, 0.2), rewards=(1.0, 0.0), n_samples=1):
    import jax

    return routing.reinforce_surrogate(
        np.asarray(logits), np.asarray(rewards), key=jax.random.key(0), n_samples=n_samples
    )


F3 = np.zeros((3, 5))
IMG = np.full((1, 8, 8, 3), 0.5)
TOK = np.array([[2, 3]])
ROUND4 = {
    "route-features-nan": ("features", lambda: routing.route(_knn(), F3 + np.nan)),
    "route-available-str": ("available", lambda: routing.route(_knn(), F3, available="abc")),
    "route-available-rank3": (
        "available",
        lambda: routing.route(_knn(), F3, available=np.ones((1, 1, 3), bool)),
    ),
    "route-cost_weight-complex": (
        "cost_weight",
        lambda: routing.route(_knn(), F3, cost_weight=np.complex64(1 + 1j)),
    ),
    "router_aiq-cost_weights-rank2": (
        "cost_weights",
        lambda: routing.router_aiq(_knn(), _table40(), cost_weights=[[0.0]]),
    ),
    "router_aiq-cost_weights-str": (
        "cost_weights",
        lambda: routing.router_aiq(_knn(), _table40(), cost_weights="abc"),
    ),
    "select_router-validation_fraction-1.5": (
        "validation_fraction",
        lambda: routing.select_router(
            routing.KNNRouter.fit, _table40(), [{"k": 2}], key=_key(), validation_fraction=1.5
        ),
    ),
    "fit_router-features-nan": ("features", lambda: _fit(features=np.full((6, 5), np.nan))),
    "fit_router-features-width": ("features", lambda: _fit(features=np.zeros((6, 4)))),
    "fit_router-quality-1.5": ("quality", lambda: _fit(quality=np.full((6, 3), 1.5))),
    "fit_router-quality-width": ("quality", lambda: _fit(quality=np.zeros((6, 2)))),
    "reinforce_surrogate-logits-nan": ("logits", lambda: _surrogate(logits=(np.nan, 0.0))),
    "reinforce_surrogate-rewards-len": ("rewards", lambda: _surrogate(rewards=(1.0,))),
    "reinforce_surrogate-n_samples-1e9": ("n_samples", lambda: _surrogate(n_samples=10**9)),
    "encode_images-images-1.5": (
        "images",
        lambda: routing.encode_images(
            routing.ImageEncoder(2, image_size=32, key=_key()), np.full((1, 32, 32, 3), 1.5)
        ),
    ),
    "vqa_predict-images-nan": (
        "images",
        lambda: routing.vqa_predict(_vqa(), IMG + np.nan, TOK, np.array([0])),
    ),
    "vqa_predict-tokens-id": (
        "tokens",
        lambda: routing.vqa_predict(_vqa(), IMG, np.array([[2, 6]]), np.array([0])),
    ),
    "fit_vqa-answers-none": (  # an AssertionError before
        "answers",
        lambda: routing.fit_vqa(_vqa(), IMG, TOK, None, np.array([0]), key=_key(), steps=1),
    ),
    # found by the slow tier's sizes of 10**9: the batch (drawn with replacement) was
    # handed to XLA, which failed with RESOURCE_EXHAUSTED instead of a ValueError
    "fit_vqa-batch_size-1e9": (
        "batch_size",
        lambda: routing.fit_vqa(
            _vqa(), IMG, TOK, np.array([1]), np.array([0]), key=_key(), steps=1, batch_size=10**9
        ),
    ),
    "fit_image_encoder-batch_size-1e9": (
        "batch_size",
        lambda: routing.fit_image_encoder(
            routing.ImageEncoder(2, image_size=32, key=_key()),
            np.full((1, 32, 32, 3), 0.5),
            key=_key(),
            steps=1,
            batch_size=10**9,
        ),
    ),
    "from_routerbench-feature_dim-0": (
        "feature_dim",
        lambda: routing.from_routerbench("missing.csv", feature_dim=0),
    ),
    "from_routerbench-features-str": (
        "features",
        lambda: routing.from_routerbench("missing.csv", features="abc"),
    ),
    "from_vl_routerbench-max_cells-none": (
        "max_cells",
        lambda: routing.from_vl_routerbench("missing", max_cells=None),
    ),
}


def _key():
    import jax

    return jax.random.key(0)


@pytest.mark.parametrize("case", sorted(ROUND4))
def test_round4_bad_input_is_refused_naming_the_argument(case):
    arg, call = ROUND4[case]
    with pytest.raises(ValueError, match=rf"(^|\W){arg}\W"):
        call()
