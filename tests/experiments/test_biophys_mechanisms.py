"""Mechanisms of the P12 experiments (issue #54 item 9): the held-out split of
`biophys_currents` and the model-mismatch generator of `biophys_localize`."""

import dataclasses

import jax
import numpy as np
import pytest

from experiments.biophys import _setup as setup
from experiments.biophys import currents, localize

CFG = setup.BiophysConfig(n_neurons=2, duration_ms=150.0, trials=5, trial_private_frac=0.2)


@pytest.fixture(scope="module")
def promotion():
    # the experiments run under JAX's standard promotion (the CLI's setting)
    with jax.numpy_dtype_promotion("standard"):
        yield


def test_heldout_trials_never_reach_the_fit_and_the_true_model_predicts_them(promotion):
    cfg = dataclasses.replace(currents.TINY, trial_private_frac=0.0)
    full = setup.make_synthetic(cfg, jax.random.key(3))
    n_fit = currents.fit_samples(cfg)
    assert n_fit == 4 * setup.trial_steps(cfg) < full.currents.shape[1]
    # the stimulus repeats every trial when nothing is private
    ts = setup.trial_steps(cfg)
    np.testing.assert_allclose(full.currents[:, :ts], full.currents[:, ts : 2 * ts])
    seen = setup.window(full, 0, n_fit)
    problem = setup.make_problem(seen, cfg)
    assert problem.traces.shape[0] == n_fit  # the fit's data end at the split
    assert all(s.size == 0 or s.max() < n_fit for s in seen.spikes)
    for s_all, s_seen in zip(full.spikes, seen.spikes, strict=True):
        np.testing.assert_array_equal(s_all[s_all < n_fit], s_seen)
    assert sum(int(np.sum(s >= n_fit)) for s in full.spikes) > 0  # held-out spikes exist
    # oracle: the generating current, trial-averaged, is the current itself here, so the
    # true model reproduces every held-out spike exactly
    true = currents.heldout_match(full, full.positions, full.currents[:, :n_fit], cfg)
    np.testing.assert_array_equal(true["recall"], 1.0)
    np.testing.assert_array_equal(true["precision"], 1.0)
    # a silent model matches none of them
    silent = currents.heldout_match(
        full, full.positions, np.zeros_like(full.currents[:, :n_fit]), cfg
    )
    np.testing.assert_array_equal(silent["recall"], 0.0)


def test_fit_samples_refuses_a_split_without_heldout_or_fit_trials():
    with pytest.raises(ValueError, match="heldout_trials"):
        currents.fit_samples(dataclasses.replace(currents.TINY, heldout_trials=0))
    with pytest.raises(ValueError, match="heldout_trials"):
        currents.fit_samples(dataclasses.replace(currents.TINY, heldout_trials=5))


def test_mismatch_generator_is_the_plain_one_at_zero_and_changes_the_forward_model(promotion):
    key = jax.random.key(1)
    cfg = dataclasses.replace(CFG, trials=1, duration_ms=60.0)
    plain = setup.make_synthetic(cfg, key)
    ident = setup.make_synthetic(cfg, key, setup.Mismatch())
    clean = np.asarray(plain.recording.clean)
    scale = np.abs(clean).max()
    assert scale > 5.0
    np.testing.assert_allclose(ident.recording.clean, clean, atol=1e-4 * scale)
    np.testing.assert_allclose(ident.recording.traces, plain.recording.traces, atol=1e-4 * scale)
    np.testing.assert_array_equal(ident.positions, plain.positions)
    # conductivity enters as 1 / sigma: half the conductivity, twice the potential
    half = setup.make_synthetic(cfg, key, setup.Mismatch(sigma_scale=0.5))
    np.testing.assert_allclose(half.recording.clean, 2.0 * clean, rtol=1e-4, atol=1e-4 * scale)
    # a tilt moves the dendrite, not the dynamics
    tilt = setup.make_synthetic(cfg, key, setup.Mismatch(tilt_deg=30.0))
    np.testing.assert_allclose(tilt.recording.voltage, plain.recording.voltage, atol=1e-3)
    assert np.abs(np.asarray(tilt.recording.clean) - clean).max() > 0.02 * scale
    # morphology changes both
    morph = setup.make_synthetic(cfg, key, setup.Mismatch(length_scale=1.3, diameter_scale=0.8))
    assert np.abs(np.asarray(morph.recording.clean) - clean).max() > 0.02 * scale
    # the fit's model stays the unperturbed one
    assert morph.cell == plain.cell


def test_localize_mismatch_is_the_configured_one():
    mm = localize.mismatch(localize.QUICK)
    assert not mm.is_identity
    cfg = dataclasses.replace(
        localize.QUICK,
        mismatch_length_scale=1.0,
        mismatch_diameter_scale=1.0,
        mismatch_tilt_deg=0.0,
        mismatch_sigma_scale=1.0,
    )
    assert localize.mismatch(cfg).is_identity
