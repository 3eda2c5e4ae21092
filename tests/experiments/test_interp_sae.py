"""The interp_sae experiment at its TINY config (SmolLM2): beyond the smoke tier's contract,
the L0s, the stored tokens, PCA's CE score, the claims and the figure (slow: real model)."""

from __future__ import annotations

import jax
import pytest

from experiments._harness import RunContext
from experiments.interp import sae as experiment


@pytest.mark.slow
def test_interp_sae_tiny_run_writes_its_metrics(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path / "cache"))
    cfg = experiment.TINY  # one SmolLM2 store of 2k tokens, 8 SAE steps
    res = experiment.run(cfg, jax.random.key(0), RunContext("interp_sae", out_dir=tmp_path))
    assert set(res.metrics) == {"smollm2"}
    m = res.metrics["smollm2"]
    for name in (
        "ev",
        "l0",
        "dead_frac",
        "ce_loss_score",
        "kl_score",
        "pca_ev",
        "pca_ce_loss_score",
        "pca_kl_score",
    ):
        assert name in m
    assert m["l0"] == 32.0
    assert m["pca_l0"] == 32.0
    assert m["train_tokens"] == 2048 - 2048 // 128  # the BOS rows are not stored
    assert 0.5 < m["pca_ce_loss_score"] <= 1.0  # PCA at k=32 keeps most of the loss
    assert len(res.claims) == 4
    assert all(c.claim.startswith("smollm2: ") for c in res.claims)
    assert set(res.figures) == {"density_and_ev_l0"}
