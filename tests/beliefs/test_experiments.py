"""The beliefs experiments: cached model calls on SmolLM2 against direct `jaxlab.lm` calls,
and the statistics helpers of beliefs_causal and beliefs_monitoring against oracles."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab import beliefs as bl
from jaxlab import lm


@pytest.mark.slow
def test_model_run_matches_score_and_forward(tmp_path, monkeypatch, getkey):
    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path))
    from experiments.beliefs import _setup

    items = bl.make_scenarios(1, key=getkey(), max_evidence=1)[:2]
    items += bl.read_tomi(_setup.wheel_file("evals", _setup.TOMI), n=1)
    name = "smollm2-135m-instruct"
    run = _setup.model_run(name, items, n_layers=3, max_new_tokens=4, chunk=4)
    assert run.seconds > 0
    again = _setup.model_run(name, items, n_layers=3, max_new_tokens=4, chunk=4)
    assert again.seconds == 0  # read from the cache, no model call
    np.testing.assert_array_equal(again.states, run.states)
    net, tok = lm.load(name)
    sc = lm.score(net, tok, [it.prompt for it in items], [it.options for it in items])
    for i in range(len(items)):
        np.testing.assert_allclose(run.action[i, :2], sc.sum[i], atol=2e-3)
    # position 0 is the last prompt token, position j the j-th generated token
    i = 0
    ids = tok.encode(items[i].prompt) + run.generated[i]
    _, acts = lm.forward(net, np.asarray(ids), capture=("resid_post",), layers=run.layers)
    n_gen = len(run.generated[i])
    ref = np.asarray(acts["resid_post"])[:, -n_gen - 1 :]
    np.testing.assert_allclose(run.states[:, i, : n_gen + 1], ref, atol=2e-3)
    assert run.mask[i].sum() == n_gen + 1
    # greedy generation agrees with lm.generate run alone
    g = lm.generate(net, [tok.encode(items[i].prompt)], max_new_tokens=4)
    assert list(np.asarray(g.tokens[0])[:n_gen]) == run.generated[i]


def test_causal_item_slopes_average_to_the_dose_slope():
    # beliefs_causal bootstraps the mean of per-item slopes: it must equal the library's
    # slope of the item-mean response (the slope is linear in the item mean)
    from experiments.beliefs import causal

    rng = np.random.default_rng(0)
    alphas = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    margins = rng.normal(size=(7, alphas.size)) + 3.0 * alphas
    slopes = causal._item_slopes(alphas, margins)
    assert slopes.shape == (7,)
    np.testing.assert_allclose(slopes.mean(), float(bl.dose_slope(alphas, margins)), rtol=1e-6)
    # one item: its own least-squares slope (np.polyfit as the oracle)
    np.testing.assert_allclose(slopes[0], np.polyfit(alphas, margins[0], 1)[0], rtol=1e-9)


def test_monitoring_row_statistic_resamples_like_the_data():
    # beliefs_monitoring bootstraps row indices through `_of_rows`: with the mean of one
    # array it must give the harness bootstrap of that array itself (same resamples)
    from experiments._harness import bootstrap
    from experiments.beliefs import monitoring

    x = np.random.default_rng(1).normal(size=15)
    direct = bootstrap(x, seed=3, n_resamples=200)
    rows = bootstrap(np.arange(x.size), monitoring._of_rows(np.mean, x), seed=3, n_resamples=200)
    np.testing.assert_allclose(
        [rows.value, rows.low, rows.high], [direct.value, direct.low, direct.high], rtol=1e-12
    )


def test_causal_monotone_row_is_bootstrapped_over_items():
    # the monotone row's statistic: the largest step of the item-mean curve against its
    # direction (0 when monotone), with an interval from resampling the items
    from experiments._harness import bootstrap
    from experiments.beliefs import causal

    rng = np.random.default_rng(2)
    up = np.clip(0.5 + 0.1 * np.arange(5)[:, None] + rng.normal(0, 0.01, (5, 30)), 0, 1)
    assert float(causal.against_curve(*up)) == 0.0
    wobble = up.copy()
    wobble[2] -= 0.15  # the mean curve dips at the middle alpha by 0.05 below alpha 1
    curve = wobble.mean(1)
    want = min(max(0.0, -np.diff(curve).min()), max(0.0, np.diff(curve).max()))
    assert float(causal.against_curve(*wobble)) == pytest.approx(want, rel=1e-12)
    assert want > 0.04
    # a wobble carried by a few items only: some resamples are monotone, some are not
    few = up.copy()
    few[2, :3] -= 1.0
    est = bootstrap(tuple(few), causal.against_curve, seed=0, n_resamples=500)
    assert est.low == 0.0 < est.high
    assert not est.is_single
