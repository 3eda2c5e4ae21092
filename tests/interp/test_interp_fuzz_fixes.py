"""Bad inputs the public-API fuzz found in interp (issue #59): each is refused with a
ValueError naming the argument (before: accepted silently, a NaN/inf result, or a
TypeError/ValueError from inside JAX/NumPy naming nothing)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest

import jaxlab.interp as _ip

ip: Any = _ip  # bad inputs on purpose: no static types at these calls

R = np.random.default_rng(0)
X, Y = R.standard_normal((8, 3)), R.standard_normal(8)
SAE = ip.TopKSAE(4, 8, 2, key=jax.random.key(4))
CTX = {"activations": R.standard_normal(8), "tokens": np.arange(8)}
SEQ = np.array([0] * 4 + [1] * 4)


CASES = {
    "ridge_gcv penalties=inf": (
        "penalties",
        lambda: ip.ridge_gcv(X, Y, penalties=np.array([1.0, np.inf])),
    ),
    "ridge_gcv penalties=(1,1,2)": (
        "penalties",
        lambda: ip.ridge_gcv(X, Y, penalties=np.ones((1, 1, 2))),
    ),
    "ridge_kfold penalties=None": (
        "penalties",
        lambda: ip.ridge_kfold(X, Y, folds=np.array([0, 1] * 4), penalties=None),
    ),
    "group_split test_fraction=None": (
        "test_fraction",
        lambda: ip.group_split(np.arange(8), key=jax.random.key(0), test_fraction=None),
    ),
    "top_activating_contexts tokens=None": (
        "tokens",
        lambda: ip.top_activating_contexts(CTX["activations"], None, SEQ, k=2, window=1),
    ),
    "top_activating_contexts sequence_ids='abc'": (
        "sequence_ids",
        lambda: ip.top_activating_contexts(**CTX, sequence_ids="abc", k=2, window=1),
    ),
    "density_histogram density=NaN": (
        "density",
        lambda: ip.density_histogram(np.array([0.1, np.nan])),
    ),
    "density_histogram density>1": (
        "density",
        lambda: ip.density_histogram(np.array([0.1, 1.5])),
    ),
    "density_histogram density empty": ("density", lambda: ip.density_histogram(np.zeros(0))),
    "sae_metrics x=None": ("x", lambda: ip.sae_metrics(SAE, None)),
    "norm_scaling_factor x='abc'": ("x", lambda: ip.norm_scaling_factor("abc")),
    "norm_scaling_factor x complex": (
        "x",
        lambda: ip.norm_scaling_factor(np.ones((3, 4), complex)),
    ),
    "fit_sae source NaN": (
        "source",
        lambda: ip.fit_sae(
            np.full((16, 4), np.nan), SAE, key=jax.random.key(0), steps=2, batch_size=4
        ),
    ),
    "fit_sae source=None": (
        "source",
        lambda: ip.fit_sae(None, SAE, key=jax.random.key(0), steps=2, batch_size=4),
    ),
    "steer alpha=NaN": ("alpha", lambda: ip.steer(np.ones(4), np.nan, layers=(0,))),
    "steer alpha='abc'": ("alpha", lambda: ip.steer(np.ones(4), "abc", layers=(0,))),
    "steer direction=None": ("direction", lambda: ip.steer(None, 1.0, layers=(0,))),
    "steer direction width": (
        "direction",
        lambda: ip.steer(np.ones(3), 1.0, layers=(0,))[("resid_post", 0)](np.ones((2, 4))),
    ),
    "project_out direction='abc'": ("direction", lambda: ip.project_out("abc", layers=(0,))),
    "ablate_features latents (1,1,2)": (
        "latents",
        lambda: ip.ablate_features(SAE, np.array([[[0, 3]]])),
    ),
    # sizes of 10**9 refused before allocation (before: OOM / a killed process)
    "fit_logistic n_classes=1e9": (
        "n_classes",
        lambda: ip.fit_logistic(X, np.array([0, 1] * 4), n_classes=10**9, penalty=1.0),
    ),
    "top_activating_contexts window=1e9": (
        "window",
        lambda: ip.top_activating_contexts(**CTX, sequence_ids=SEQ, k=2, window=10**9),
    ),
    "density_histogram bins=1e9": (
        "bins",
        lambda: ip.density_histogram(np.array([0.1, 0.2]), bins=10**9),
    ),
    "fit_sae batch_size=1e9": (
        "batch_size",
        lambda: ip.fit_sae(np.ones((16, 4)), SAE, key=jax.random.key(0), steps=2, batch_size=10**9),
    ),
}


ACTS = R.standard_normal((2, 8, 3))
TRAIN = np.arange(8) < 5
CASES.update(
    {
        # probe_sweep: before, NaN y gave a NaN r2, an empty acts a shape error from
        # inside, None/strings a TypeError, complex acts only a ComplexWarning
        "probe_sweep y=nan": (
            "y",
            lambda: ip.probe_sweep(ACTS, np.where(np.arange(8) == 0, np.nan, Y), train=TRAIN),
        ),
        "probe_sweep acts=empty": (
            "acts",
            lambda: ip.probe_sweep(ACTS[:, :0], Y[:0], train=TRAIN[:0]),
        ),
        "probe_sweep acts=None": ("acts", lambda: ip.probe_sweep(None, Y, train=TRAIN)),
        "probe_sweep y=string": ("y", lambda: ip.probe_sweep(ACTS, "abc", train=TRAIN)),
        "probe_sweep acts=complex": (
            "acts",
            lambda: ip.probe_sweep(ACTS + 1j, Y, train=TRAIN),
        ),
        # bootstrap_ci: before, None/strings gave TypeError/IndexError and NaN a NaN CI
        "bootstrap_ci None": (
            r"arrays\[0\]",
            lambda: ip.bootstrap_ci(ip.r2_score, None, Y, key=jax.random.key(0)),
        ),
        "bootstrap_ci string": (
            r"arrays\[1\]",
            lambda: ip.bootstrap_ci(ip.r2_score, Y, "abc", key=jax.random.key(0)),
        ),
        # before: jax.random.split of 10**9 keys, the process died
        "bootstrap_ci n_resamples=1e9": (
            "n_resamples",
            lambda: ip.bootstrap_ci(ip.r2_score, Y, Y, key=jax.random.key(0), n_resamples=10**9),
        ),
        "bootstrap_ci nan": (
            r"arrays\[0\]",
            lambda: ip.bootstrap_ci(
                ip.r2_score, np.where(np.arange(8) == 0, np.nan, Y), Y, key=jax.random.key(0)
            ),
        ),
    }
)


def _tiny_lm():
    from jaxlab import lm

    from ..lm.lm_reference import tiny_llama

    return lm.Transformer.random(tiny_llama(vocab_size=13), key=jax.random.key(3))


SAE24 = ip.TopKSAE(24, 8, 2, key=jax.random.key(8))
TOK = np.array([[1, 5, 2, 3], [4, 6, 7, 8]])
CASES.update(
    {
        # issue #59, the six functions declared in the fuzz table: before, inf folded to an
        # SAE of inf/0 weights, None/strings a TypeError from a comparison, a NaN alpha or
        # metric value a NaN dose response, an id >= vocab_size wrapped by the embedding
        # lookup, a string scale a TypeError, a negative hook_layer written to cfg.json
        "fold_scaling_factor scale=inf": (
            "scale",
            lambda: ip.fold_scaling_factor(SAE, np.inf),
        ),
        "fold_scaling_factor scale=None": ("scale", lambda: ip.fold_scaling_factor(SAE, None)),
        "fold_scaling_factor sae=str": ("sae", lambda: ip.fold_scaling_factor("abc", 2.0)),
        "normalize_decoder sae=None": ("sae", lambda: ip.normalize_decoder(None)),
        "dose_response alphas=nan": (
            "alphas",
            lambda: ip.dose_response(sum, np.ones(4), [0.0, np.nan], key=jax.random.key(0)),
        ),
        "dose_response alphas=string": (
            "alphas",
            lambda: ip.dose_response(sum, np.ones(4), "abc", key=jax.random.key(0)),
        ),
        "dose_response metric=nan": (
            "metric",
            lambda: ip.dose_response(
                lambda v: np.nan, np.ones(4), [0.0, 1.0], key=jax.random.key(0)
            ),
        ),
        # the ids and the layer were already refused by lm.forward_batched (kept as guards
        # now that ce_loss_score checks them at its boundary)
        "ce_loss_score tokens=vocab": (
            "tokens",
            lambda: ip.ce_loss_score(_tiny_lm(), np.where(TOK == 8, 13, TOK), SAE24, layer=0),
        ),
        "ce_loss_score tokens=-1": (
            "tokens",
            lambda: ip.ce_loss_score(_tiny_lm(), np.where(TOK == 8, -1, TOK), SAE24, layer=0),
        ),
        "ce_loss_score tokens=None": (
            "tokens",
            lambda: ip.ce_loss_score(_tiny_lm(), None, SAE24, layer=0),
        ),
        "ce_loss_score mask=str": (
            "mask",
            lambda: ip.ce_loss_score(_tiny_lm(), TOK, SAE24, layer=0, mask="abc"),
        ),
        "ce_loss_score input_scale=inf": (
            "input_scale",
            lambda: ip.ce_loss_score(_tiny_lm(), TOK, SAE24, layer=0, input_scale=np.inf),
        ),
        "ce_loss_score layer=9": (
            "layer",
            lambda: ip.ce_loss_score(_tiny_lm(), TOK, SAE24, layer=9),
        ),
        "save_sae hook_layer=-1": (
            "hook_layer",
            # refused before the folder is created
            lambda: ip.save_sae(SAE, Path(tempfile.gettempdir()) / "jaxlab-unused", hook_layer=-1),
        ),
        "save_sae path=None": ("path", lambda: ip.save_sae(SAE, None)),
    }
)


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_naming_the_argument(case):
    name, call = CASES[case]
    with pytest.raises(ValueError, match=name):
        call()


def test_probe_sweep_and_bootstrap_ci_take_lists():
    ref = ip.probe_sweep(ACTS, Y, train=TRAIN)["r2"]
    np.testing.assert_allclose(ip.probe_sweep(ACTS, Y.tolist(), train=TRAIN)["r2"], ref)
    a = ip.bootstrap_ci(ip.r2_score, Y, Y + 0.1, key=jax.random.key(0), n_resamples=50)
    b = ip.bootstrap_ci(
        ip.r2_score, Y.tolist(), (Y + 0.1).tolist(), key=jax.random.key(0), n_resamples=50
    )
    np.testing.assert_allclose(np.array(a), np.array(b))


def test_window_zero_is_the_token_alone():
    out = ip.top_activating_contexts(**CTX, sequence_ids=SEQ, k=2, window=np.int64(0))
    assert out["tokens"].shape == (2, 1)


def test_logistic_probe_sweep_takes_boolean_labels():
    # before: a bool y failed inside with "labels: expected dtype integer" (no `labels`
    # argument exists); binary labels are read as 0/1
    y = ACTS[0, :, 0] > 0
    a = ip.probe_sweep(ACTS, y, train=TRAIN, kind="logistic")["accuracy"]
    b = ip.probe_sweep(ACTS, y.astype(int), train=TRAIN, kind="logistic")["accuracy"]
    np.testing.assert_array_equal(a, b)
