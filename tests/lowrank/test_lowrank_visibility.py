"""Loss-visible / loss-invisible overlaps, reconstruction, tasks and input validation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import lowrank as lr


def _pd(getkey, p, scale=1.0):
    a = jax.random.normal(getkey(), (p, p), jnp.float64) / np.sqrt(p)
    return scale * (a @ a.T + jnp.eye(p, dtype=jnp.float64))


def test_linear_rank1_classification_matches_analytic(getkey):
    layout = lr.OverlapLayout(1, 1)
    task = lr.fixed_point_task(n_trials=3, n_steps=10).astype(jnp.float64)
    loss = lr.OverlapLoss(task, layout, lr.Linear())
    gs = lr.random_overlaps(layout, 6, key=getkey(), dtype=jnp.float64)
    table = lr.visibility_table(layout, lr.classify_overlaps(loss, gs))
    analytic = lr.linear_rank1_visibility()
    assert sorted(k for k, v in table.items() if v) == sorted(analytic["visible"])
    assert sorted(k for k, v in table.items() if not v) == sorted(analytic["invisible"])


def test_tanh_rank1_classification(getkey):
    layout = lr.OverlapLayout(1, 1)
    task = lr.fixed_point_task(n_trials=3, n_steps=10).astype(jnp.float64)
    loss = lr.OverlapLoss(task, layout, lr.Tanh())
    gs = lr.random_overlaps(layout, 6, key=getkey(), dtype=jnp.float64)
    table = lr.visibility_table(layout, lr.classify_overlaps(loss, gs))
    invisible = sorted(k for k, v in table.items() if not v)
    # The activity variance makes m.m, m.I, I.I visible for tanh units.
    assert invisible == sorted(["n1.n1", "n1.w", "w.w"])


def test_invisible_moves_leave_loss_and_outputs_unchanged(getkey):
    layout = lr.OverlapLayout(1, 1)
    task = lr.fixed_point_task(n_trials=3, n_steps=10).astype(jnp.float64)
    act = lr.Linear()
    loss = lr.OverlapLoss(task, layout, act)
    g = _pd(getkey, 4, 2.0)
    visible = lr.classify_overlaps(
        loss, lr.random_overlaps(layout, 4, key=getkey(), dtype=jnp.float64)
    )
    move = jax.random.normal(getkey(), (4, 4), jnp.float64) * 0.2
    move = jnp.where(visible, 0.0, move + move.T)
    g2 = g + move
    assert float(jnp.linalg.eigvalsh(g2)[0]) > 0
    assert float(jnp.max(jnp.abs(move))) > 0.05
    np.testing.assert_allclose(loss(g2), loss(g), rtol=1e-13)
    # Neuron-space networks realising G and G2: identical outputs (functionally equivalent).
    v1 = lr.vectors_from_gram(g, 50, key=getkey())
    v2 = lr.vectors_from_gram(g2, 50, key=getkey())
    np.testing.assert_allclose(
        lr.network_outputs(v1, task, layout, act),
        lr.network_outputs(v2, task, layout, act),
        atol=1e-12,
    )
    # ... but a different learning flow.
    trained = layout.trained_mask()
    f1 = lr.overlap_flow(loss, g, trained)
    f2 = lr.overlap_flow(loss, g2, trained)
    assert float(jnp.max(jnp.abs(f1 - f2))) > 1e-4


def test_vectors_from_gram_exact(getkey):
    g = _pd(getkey, 5)
    g = g.at[:, 4].set(0.0).at[4, :].set(0.0)  # singular PSD is fine
    v = lr.vectors_from_gram(g, 33, key=getkey())
    assert v.shape == (5, 33)
    np.testing.assert_allclose(lr.gram(v), g, atol=1e-12)
    vb = jax.vmap(lambda k: lr.vectors_from_gram(g, 33, key=k))(jax.random.split(getkey(), 2))
    np.testing.assert_allclose(jax.vmap(lr.gram)(vb), jnp.stack([g, g]), atol=1e-12)


def test_tasks_shapes_and_flip_flop_oracle(getkey):
    ff = lr.flip_flop_task(key=getkey(), n_trials=4, n_steps=30)
    u = np.asarray(ff.inputs[..., 0])
    y = np.asarray(ff.targets)
    for b in range(4):
        state = 0.0
        for t in range(30):
            if u[b, t] != 0 and (t == 0 or u[b, t - 1] == 0 or np.sign(u[b, t]) != state):
                state = float(np.sign(u[b, t]))
            assert y[b, t] == pytest.approx(0.5 * state)
    assert np.any(u != 0)
    ctx = lr.context_task(key=getkey(), n_trials=6)
    assert ctx.inputs.shape == (6, 40, 3)
    s = np.asarray(ctx.inputs[:, 0])
    np.testing.assert_allclose(ctx.targets[:, 0], np.where(s[:, 2] > 0, s[:, 0], s[:, 1]))
    ramp = lr.ramp_task()
    assert ramp.inputs.shape == (3, 50, 1)
    assert float(ramp.targets[0, 0]) == 0.0
    fp = lr.fixed_point_task()
    assert fp.mask.sum() == 5 * 20


def test_bad_inputs_raise_value_error(getkey):
    layout = lr.OverlapLayout(1, 1)
    task = lr.fixed_point_task()
    loss = lr.OverlapLoss(task, layout, lr.Linear())
    with pytest.raises(ValueError, match="rank"):
        lr.OverlapLayout(0, 1)
    with pytest.raises(ValueError, match="g"):
        lr.overlap_loss(jnp.eye(3), task, layout, lr.Linear())
    with pytest.raises(ValueError, match="task"):
        lr.overlap_loss(jnp.eye(4), lr.context_task(key=getkey()), layout, lr.Linear())
    with pytest.raises(ValueError, match="trained"):
        lr.overlap_flow(loss, jnp.eye(4), jnp.ones(4))
    with pytest.raises(ValueError, match="n_neurons"):
        lr.vectors_from_gram(jnp.eye(4), 3, key=getkey())
    with pytest.raises(ValueError, match="positive semi-definite"):
        lr.vectors_from_gram(-jnp.eye(4), 10, key=getkey())
    with pytest.raises(ValueError, match="symmetric"):
        lr.vectors_from_gram(jnp.eye(4).at[0, 1].set(1.0), 10, key=getkey())
    with pytest.raises(ValueError, match="dt"):
        lr.Task(task.inputs, task.targets, task.mask, 0.0)
    with pytest.raises(ValueError, match="mask"):
        lr.Task(task.inputs, task.targets, -task.mask, 0.1)
    with pytest.raises(ValueError, match="targets"):
        lr.Task(task.inputs, task.targets[:, :-1], task.mask, 0.1)
    with pytest.raises(ValueError, match="inputs"):
        lr.Task(task.inputs.at[0, 0, 0].set(jnp.nan), task.targets, task.mask, 0.1)
    with pytest.raises(ValueError, match="activation"):
        lr.LowRankRNN(jnp.ones((1, 5)), jnp.ones((1, 5)), jnp.ones((1, 5)), jnp.ones(5), "tanh")
    with pytest.raises(ValueError, match="readout"):
        lr.LowRankRNN(
            jnp.ones((1, 5)), jnp.ones((1, 5)), jnp.ones((1, 5)), jnp.ones(4), lr.Linear()
        )
    with pytest.raises(ValueError, match="n_steps"):
        lr.overlap_gd(loss, jnp.eye(4), layout.trained_mask(), eta=0.1, n_steps=0)
    import diffrax

    with pytest.raises(ValueError, match="dt0"):
        lr.solve_overlap_flow(
            loss,
            jnp.eye(4),
            layout.trained_mask(),
            jnp.linspace(0, 1, 3),
            stepsize_controller=diffrax.ConstantStepSize(),
        )
