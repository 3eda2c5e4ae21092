"""Issue 60's bad inputs, each a ValueError naming the argument (before: silent wrong
answers or raw errors)."""

from __future__ import annotations

import csv
import pickle

import jax
import numpy as np
import pytest

from jaxlab import routing


def _write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def test_routerbench_model_without_total_cost_is_refused(tmp_path):
    header = ["sample_id", "prompt", "eval_name", "a", "a|model_response", "a|total_cost"]
    header += ["b", "b|model_response"]  # b lacks its cost column: it was dropped silently
    _write_csv(tmp_path / "rb.csv", header, [["1", "2+2?", "math", "1", "4", "0.1", "0", "5"]])
    with pytest.raises(ValueError, match=r"incomplete column set.*'b': \['b\|total_cost'\]"):
        routing.from_routerbench(tmp_path / "rb.csv")
    # complete: reads
    header = ["sample_id", "prompt", "eval_name", "a", "a|total_cost", "b", "b|total_cost"]
    _write_csv(tmp_path / "ok.csv", header, [["1", "2+2?", "math", "1", "0.1", "0", "0.3"]])
    table = routing.from_routerbench(tmp_path / "ok.csv", feature_dim=8)
    assert table.candidates == ("a", "b")


def test_routerbench_pickle_names_the_export_step(tmp_path):
    path = tmp_path / "routerbench_0shot.pkl"
    path.write_bytes(pickle.dumps({"sample_id": [1]}, protocol=4))
    with pytest.raises(ValueError, match=r"path: .* is a pickle.*export to CSV.*to_csv"):
        routing.from_routerbench(path)
    renamed = tmp_path / "table.csv"  # the content, not the name, decides
    renamed.write_bytes(path.read_bytes())
    with pytest.raises(ValueError, match="is a pickle"):
        routing.from_routerbench(renamed)


def test_aiq_and_hull_refuse_swapped_arguments():
    cost = np.array([10.0, 30.0, 50.0])
    quality = np.array([0.2, 0.5, 0.6])
    assert 0.2 <= routing.aiq(cost, quality) <= 0.6
    with pytest.raises(ValueError, match=r"quality: expected values in \[0, 1\].*swapped"):
        routing.aiq(quality, cost)  # returned 50.0 before
    with pytest.raises(ValueError, match="quality"):
        routing.cost_quality_hull(quality, cost)
    with pytest.raises(ValueError, match="cost: expected non-negative"):
        routing.aiq(-cost, quality)


def _table():
    rng = np.random.default_rng(0)
    n, m, f = 40, 3, 5
    return routing.RoutingTable(
        quality=rng.integers(0, 2, (n, m)).astype(float),
        cost=np.tile([1.0, 2.0, 4.0], (n, 1)),
        candidates=("a", "b", "c"),
        features=rng.normal(size=(n, f)),
    )


def test_route_refuses_negative_cost_weight_and_wrong_feature_width():
    table = _table()
    r = routing.KNNRouter.fit(table, k=3)
    with pytest.raises(ValueError, match="cost_weight"):
        routing.route(r, table.features, cost_weight=-0.5)
    with pytest.raises(ValueError, match="cost_weight"):
        r.predict_utilities(table.features, cost_weight=float("nan"))
    with pytest.raises(ValueError, match=r"features: expected the feature width.*\(2, 7\)"):
        routing.route(r, np.zeros((2, 7)))
    mlp = routing.MLPRouter.fit(table, key=jax.random.key(0), hidden=(), steps=2)
    with pytest.raises(ValueError, match="features: expected the feature width"):
        routing.route(mlp, np.zeros((2, 4)))
    assert routing.route(r, table.features, cost_weight=0.5).shape == (40,)


def test_routed_outcome_returns_cost_then_quality_by_name():
    quality = np.array([[1.0, 0.0], [0.0, 1.0]])
    cost = np.array([[1.0, 3.0], [1.0, 3.0]])
    out = routing.routed_outcome(np.array([0, 1]), quality, cost)
    assert isinstance(out, routing.RoutedOutcome)
    assert (out.cost, out.quality) == (2.0, 1.0)
    assert routing.aiq(*out) == 1.0  # the order aiq takes
