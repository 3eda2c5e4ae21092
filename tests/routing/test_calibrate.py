"""RouteLLM's calibration (`calibrate_threshold`): the threshold sending a chosen share of
queries to the strong model, read off held-out calibration queries (issue 60)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxlab import routing


def _strong_share(pred, cost, t, available=None) -> float:
    choice = np.asarray(routing.threshold_route(pred, cost, t, available=available))
    return float(np.mean(np.isin(choice, np.flatnonzero(cost == np.max(cost)))))


@pytest.mark.parametrize("x", [0.0, 0.1, 0.25, 0.5, 0.8, 1.0])
def test_two_models_threshold_is_the_quantile_of_the_weak_score(x):
    """RouteLLM's setting: the strong model is always predicted at least as good, so a
    query goes to it iff the weak model's predicted quality is below the threshold."""
    rng = np.random.default_rng(0)
    weak = rng.uniform(0.0, 0.9, 400)
    pred = np.stack([weak, np.ones_like(weak)], 1)  # columns: weak, strong
    cost = np.array([1.0, 10.0])
    t = routing.calibrate_threshold(pred, cost, x)
    if 0.0 < x < 1.0:
        assert t == pytest.approx(np.quantile(weak, x), abs=0, rel=1e-12)
    assert abs(_strong_share(pred, cost, t) - x) <= 1 / 400


def test_held_out_share_is_near_the_target():
    """Calibrate on one half of a real router's held-out queries, route the other half."""
    rng = np.random.default_rng(1)
    n, f = 3000, 6
    feats = rng.normal(size=(n, f))
    w = rng.normal(size=(f,))
    p_weak = 1 / (1 + np.exp(-(feats @ w)))
    quality = np.stack([rng.uniform(size=n) < p_weak, rng.uniform(size=n) < 0.9], 1)
    table = routing.RoutingTable(
        quality=quality.astype(float),
        cost=np.tile([1.0, 8.0], (n, 1)),
        candidates=("weak", "strong"),
        features=feats,
    )
    train, heldout = table.split(0.5, key=jax.random.key(0))
    cal, new = heldout.split(0.5, key=jax.random.key(1))
    router = routing.MLPRouter.fit(train, key=jax.random.key(2), hidden=(), steps=200)
    cost = train.cost.mean(0)
    pred_cal = np.asarray(router.predict_quality(cal.features))
    reachable = float(np.mean(np.argmax(pred_cal, 1) == 1))
    for x in (0.1, 0.3, min(0.5, reachable)):
        t = routing.calibrate_threshold(pred_cal, cost, x)
        assert abs(_strong_share(pred_cal, cost, t) - x) <= 1 / cal.n_queries + 1e-12
        share = _strong_share(np.asarray(router.predict_quality(new.features)), cost, t)
        # binomial noise of ~750 held-out queries: 4 standard errors
        assert abs(share - x) <= 4 * np.sqrt(x * (1 - x) / new.n_queries) + 0.01, (x, share)


def test_many_candidates_and_availability_match_threshold_route():
    """M > 2, with unavailable candidates: for every target share the calibration share is
    what `threshold_route` (the independent router) gives, within 1/N."""
    rng = np.random.default_rng(2)
    n, m = 500, 4
    pred = rng.uniform(size=(n, m))
    pred[:, 3] += 0.3  # the strong candidate is usually the best predicted
    available = rng.uniform(size=(n, m)) < 0.85
    available[:, 0] = True
    best = np.argmax(np.where(available, pred, -np.inf), 1)
    # one strong model; then two tied at the highest cost (one model, two prompts)
    for cost, strong in (([1.0, 2.0, 3.0, 9.0], [3]), ([1.0, 2.0, 9.0, 9.0], [2, 3])):
        cost = np.array(cost)
        reachable = np.mean(np.isin(best, strong))
        for x in np.linspace(0.0, reachable, 7):
            t = routing.calibrate_threshold(pred, cost, x, available=available)
            assert abs(_strong_share(pred, cost, t, available) - x) <= 1 / n + 1e-12, x
        with pytest.raises(ValueError, match=r"strong_fraction: expected at most"):
            routing.calibrate_threshold(pred, cost, reachable + 0.05, available=available)


def test_bad_inputs_name_the_argument():
    pred = np.array([[0.2, 0.9], [0.6, 0.7]])
    cost = np.array([1.0, 5.0])
    with pytest.raises(ValueError, match=r"strong_fraction: expected a number in \[0, 1\]"):
        routing.calibrate_threshold(pred, cost, 1.5)
    with pytest.raises(ValueError, match="strong_fraction"):
        routing.calibrate_threshold(pred, cost, "20%")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="predicted_quality: expected an"):
        routing.calibrate_threshold(pred[0], cost, 0.5)
    with pytest.raises(ValueError, match="predicted_quality: expected finite"):
        routing.calibrate_threshold(np.array([[0.2, np.nan]]), cost, 0.5)
    with pytest.raises(ValueError, match=r"candidate_cost: expected \(2,\)"):
        routing.calibrate_threshold(pred, np.array([1.0, 2.0, 3.0]), 0.5)
    with pytest.raises(ValueError, match="candidate_cost: expected a cheaper candidate"):
        routing.calibrate_threshold(pred, np.array([5.0, 5.0]), 0.5)
