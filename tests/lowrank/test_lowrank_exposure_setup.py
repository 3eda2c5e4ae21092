"""lowrank_exposure's "identical outputs before learning": true by construction (network B
differs from A only in loss-invisible overlaps), so a test of the experiment's own
networks, not a claim row; the control shifts a loss-visible overlap and the outputs
differ."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from experiments.lowrank import exposure
from jaxlab import lowrank as lr


def _setup():
    layout = lr.OverlapLayout(1, 1)
    act = lr.Linear()
    task = lr.fixed_point_task(gain=exposure.QUICK.new_gain).astype(jnp.float64)
    index = {
        nm: (i, j)
        for nm, i, j in zip(layout.overlap_names(), *np.triu_indices(layout.size), strict=True)
    }
    return layout, act, task, index


def _shift(g, index, shifts):
    for nm, d in shifts.items():
        i, j = index[nm]
        g = g.at[i, j].add(d)
        if i != j:
            g = g.at[j, i].add(d)
    return g


def _outputs(g, task, layout, act, key, n=400):
    return np.asarray(lr.network_outputs(lr.vectors_from_gram(g, n, key=key), task, layout, act))


@pytest.mark.parametrize("config", [exposure.QUICK, exposure.TINY], ids=["quick", "tiny"])
def test_exposure_networks_have_identical_outputs_before_learning(config, getkey):
    layout, act, task, index = _setup()
    g_a = exposure._base_overlaps()
    g_b = _shift(g_a, index, config.invisible_shift)
    assert float(jnp.max(jnp.abs(g_b - g_a))) >= 0.5  # the networks do differ
    assert float(jnp.linalg.eigvalsh(g_b)[0]) > 0
    z_a, z_b = (_outputs(g, task, layout, act, getkey()) for g in (g_a, g_b))
    scale = max(float(np.max(np.abs(z_a))), 1.0)
    assert float(np.max(np.abs(z_a - z_b))) / scale <= config.equal_rtol
    # the reduced (overlap-only) outputs agree too
    np.testing.assert_allclose(
        lr.overlap_outputs(g_b, task, layout, act),
        lr.overlap_outputs(g_a, task, layout, act),
        rtol=0,
        atol=config.equal_rtol * scale,
    )


def test_a_visible_shift_changes_the_outputs_before_learning(getkey):
    # the control: the same construction with a loss-visible overlap shifted fails the check
    layout, act, task, index = _setup()
    loss = lr.OverlapLoss(task, layout, act)
    visible = lr.classify_overlaps(
        loss, lr.random_overlaps(layout, 8, key=getkey(), dtype=jnp.float64)
    )
    assert bool(visible[index["m1.n1"]])  # n.m: the recurrent gain, visible
    g_a = exposure._base_overlaps()
    g_c = _shift(g_a, index, {"m1.n1": 0.2})
    assert float(jnp.linalg.eigvalsh(g_c)[0]) > 0
    z_a, z_c = (_outputs(g, task, layout, act, getkey()) for g in (g_a, g_c))
    scale = max(float(np.max(np.abs(z_a))), 1.0)
    assert float(np.max(np.abs(z_a - z_c))) / scale > 1e3 * exposure.QUICK.equal_rtol
    assert np.isfinite(z_c).all()
