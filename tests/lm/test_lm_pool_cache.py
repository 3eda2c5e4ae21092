"""lm_pool's per-chunk option-score cache: a chunk file written with another chunk length
is scored afresh, not broadcast into the wrong rows (a TINY run with chunk 2 followed by
one with chunk 4 crashed with a shape mismatch)."""

from __future__ import annotations

import types

import numpy as np

from experiments.lm import pool


def test_chunk_files_of_another_chunk_length_are_rescored(tmp_path, monkeypatch):
    import jaxlab.lm as lm

    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(pool, "model_sha256", lambda name: "sha-" + name)
    calls = []

    def fake_score(model, tok, prompts, conts, *, batch_size):
        calls.append(len(prompts))
        rows = [np.array([float(len(p)), 0.0, 1.0, 2.0]) for p in prompts]
        return types.SimpleNamespace(sum=rows, mean=[r / 2 for r in rows])

    monkeypatch.setattr(lm, "score", fake_score)
    items = [{"prompt": "x" * (5 - i), "options": list("abcd"), "answer": 0} for i in range(4)]
    info = types.SimpleNamespace(name="m")
    first = pool._option_scores(info, None, None, items, chunk=2, batch_size=2)
    second = pool._option_scores(info, None, None, items, chunk=4, batch_size=2)
    again = pool._option_scores(info, None, None, items, chunk=4, batch_size=2)
    assert calls == [2, 2, 4]  # chunk 4 rescored its one chunk once, then read it back
    for a, b, c in zip(first, second, again, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(b, c)
    np.testing.assert_array_equal(first[0][:, 0], [5, 4, 3, 2])
