"""Activation stores: equality with `forward(capture=...)`, positions, resume after SIGKILL,
manifest mismatch, validation of the store and of bad inputs (tiny random decoder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxlab.lm as lm
from tests.progress_record import RecordProgress

from .lm_reference import tiny_llama

ROOT = Path(__file__).resolve().parents[2]


def _items():
    rng = np.random.default_rng(3)
    return [rng.integers(0, 61, int(n)).tolist() for n in (5, 9, 3, 16, 12, 7, 14, 4)]


@pytest.fixture(scope="module")
def model():
    return lm.Transformer.random(tiny_llama(), key=jax.random.key(0))


def test_collect_equals_forward_capture(model, tmp_path):
    items = _items()
    rec = RecordProgress()
    store = lm.collect(
        model,
        None,
        items,
        sites=["resid_post", "mlp_out"],
        layers=[0, 2],
        path=tmp_path / "s",
        shard_rows=20,
        progress=rec,
        skip_first=False,
    )
    n_shards = len(store.shards("mlp_out", 0))
    assert rec.calls == [("start", n_shards, 0), *[("update", 1)] * n_shards, ("close",)]
    assert store.n_tokens == sum(len(t) for t in items)
    assert store.d == 24
    assert len(store.shards("mlp_out", 2)) > 1  # several shards exercised
    lengths = [len(t) for t in items]
    np.testing.assert_array_equal(store.text_index, np.repeat(np.arange(8), lengths))
    toks, mask = lm.pad_prompts(items)
    _, acts = lm.forward_batched(model, toks, mask=mask, capture=["resid_post", "mlp_out"])
    for site in ("resid_post", "mlp_out"):
        for layer in (0, 2):
            ref = np.concatenate(
                [np.asarray(acts[site][i, layer, 16 - len(t) :]) for i, t in enumerate(items)]
            )
            np.testing.assert_allclose(store.array(site, layer), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(store.tokens, np.concatenate(items))
    assert store.metadata["sites"] == ["resid_post", "mlp_out"]
    reopened = lm.ActivationStore(tmp_path / "s", verify=True)
    np.testing.assert_array_equal(reopened.array("mlp_out", 0), store.array("mlp_out", 0))


def test_positions_filters(model, tmp_path):
    items = _items()
    pairs = [(t[:2], t[2:]) for t in items]
    full = lm.collect(model, None, items, layers=[1], path=tmp_path / "all", skip_first=False)
    full = full.array()
    starts = np.cumsum([0] + [len(t) for t in items])[:-1]
    last = lm.collect(
        model, None, pairs, layers=[1], path=tmp_path / "last", positions="last_prompt"
    )
    np.testing.assert_allclose(last.array(), full[starts + 1], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(last.positions, np.ones(8, np.int32))
    gen = lm.collect(model, None, pairs, layers=[1], path=tmp_path / "gen", positions="generated")
    keep = np.concatenate([s + np.arange(2, len(t)) for s, t in zip(starts, items, strict=True)])
    np.testing.assert_allclose(gen.array(), full[keep], rtol=1e-5, atol=1e-5)
    n_gen = [len(t) - 2 for t in items]
    np.testing.assert_array_equal(gen.text_index, np.repeat(np.arange(8), n_gen))


def test_skip_first_and_exclude_special(model, tmp_path):
    """Position 0 and the named token ids are left out by default filters, recorded in the
    manifest, and kept when asked; last_prompt rows are never filtered."""
    items = _items()
    full = lm.collect(model, None, items, layers=[1], path=tmp_path / "all", skip_first=False)
    default = lm.collect(model, None, items, layers=[1], path=tmp_path / "default")
    assert default.metadata["skip_first"] is True
    assert "excluded_ids" not in default.metadata  # no tokenizer: no known special ids
    keep = full.positions > 0
    np.testing.assert_array_equal(default.positions, full.positions[keep])
    np.testing.assert_allclose(default.array(), full.array()[keep], rtol=1e-5, atol=1e-5)
    special = sorted({items[0][3], items[3][5]})
    ex = lm.collect(model, None, items, layers=[1], path=tmp_path / "ex", exclude_special=special)
    keep = (full.positions > 0) & ~np.isin(full.tokens, special)
    assert ex.n_tokens == int(keep.sum()) < default.n_tokens
    np.testing.assert_array_equal(ex.tokens, full.tokens[keep])
    assert ex.metadata["excluded_ids"] == special
    pairs = [(t[:1], t[1:]) for t in items]
    last = lm.collect(
        model, None, pairs, layers=[1], path=tmp_path / "last", positions="last_prompt"
    )
    np.testing.assert_array_equal(last.positions, np.zeros(8, np.int32))
    assert "skip_first" not in last.metadata
    with pytest.raises(ValueError, match="skip_first"):
        lm.collect(model, None, items, layers=[1], path=tmp_path / "x", skip_first=1)
    with pytest.raises(ValueError, match="exclude_special"):
        lm.collect(model, None, items, layers=[1], path=tmp_path / "x", exclude_special=[999])
    with pytest.raises(ValueError, match="no row is left"):
        lm.collect(model, None, [[1], [2]], layers=[1], path=tmp_path / "y")


def test_batches_shuffle_is_a_permutation(model, tmp_path):
    store = lm.collect(model, None, _items(), layers=[2], path=tmp_path / "s", shard_rows=16)
    x = store.array()
    plain = np.concatenate(
        [np.asarray(b) for b in store.batches(7, shuffle=False, drop_last=False)]
    )
    np.testing.assert_array_equal(plain, x)
    got = [
        (np.asarray(b), np.asarray(i))
        for b, i in store.batches(5, key=jax.random.key(1), buffer=32, with_index=True)
    ]
    assert all(b.shape == (5, 24) and b.dtype == np.float32 for b, _ in got)
    rows = np.concatenate([b for b, _ in got])
    assert len(rows) == (store.n_tokens // 5) * 5 >= store.n_tokens - 4
    # every yielded row is a distinct stored row, with its own text index
    match = [np.nonzero((x == r).all(1))[0] for r in rows]
    assert all(len(m) == 1 for m in match)
    ids = np.concatenate([m for m in match])
    assert len(set(ids.tolist())) == len(ids)
    assert not np.array_equal(ids, np.sort(ids))
    np.testing.assert_array_equal(np.concatenate([i for _, i in got]), store.text_index[ids])
    again = [np.asarray(b) for b in store.batches(5, key=jax.random.key(1), buffer=32)]
    np.testing.assert_array_equal(np.concatenate(again), rows)


_KILLED = textwrap.dedent("""
    import os, signal, sys
    import jax, numpy as np
    import jaxlab.lm as lm
    import jaxlab.lm._collect as C
    sys.path.insert(0, {root!r})
    from tests.lm.lm_reference import tiny_llama
    model = lm.Transformer.random(tiny_llama(), key=jax.random.key(0))
    rng = np.random.default_rng(3)
    items = [rng.integers(0, 61, int(n)).tolist() for n in (5, 9, 3, 16, 12, 7, 14, 4)]
    calls = [0]
    real = C._save_npy
    def dying(path, arr):
        calls[0] += 1
        if calls[0] == {kill_at}:
            with C.atomic_write(path, "wb") as f:   # half a file, then SIGKILL
                f.write(b"\\x93NUMPY" + b"0" * 64)
                f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        real(path, arr)
    C._save_npy = dying
    lm.collect(model, None, items, sites=["resid_mid"], layers=[1], path={path!r},
               shard_rows=20)
""")


def test_resume_after_sigkill_equals_uninterrupted(model, tmp_path):
    kill_at = 6  # inside shard 1 (4 files per shard): one shard done, one half-written
    items = _items()
    ref = lm.collect(
        model, None, items, sites=["resid_mid"], layers=[1], path=tmp_path / "ref", shard_rows=20
    )
    path = str(tmp_path / "killed")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED.format(root=str(ROOT), path=path, kill_at=kill_at)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -9, proc.stderr[-2000:]
    manifest = json.loads((Path(path) / "manifest.json").read_text())
    assert not manifest["complete"]
    assert len(manifest["shards"]) == (kill_at - 1) // 4
    with pytest.raises(ValueError, match="incomplete"):
        lm.ActivationStore(path)
    assert list(Path(path).glob(".shard_*.tmp"))  # the half-written temp file is there
    resumed = lm.collect(
        model, None, items, sites=["resid_mid"], layers=[1], path=path, shard_rows=20
    )
    assert not list(Path(path).glob(".shard_*.tmp"))
    names = sorted(p.name for p in Path(path).iterdir())
    assert names == sorted(p.name for p in (tmp_path / "ref").iterdir())
    for name in names:
        if name.endswith(".npy"):
            assert (Path(path) / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()
    np.testing.assert_array_equal(resumed.array(), ref.array())


def test_manifest_mismatch_and_tampering(model, tmp_path):
    items = _items()
    path = tmp_path / "s"
    lm.collect(model, None, items, layers=[1], path=path)
    with pytest.raises(ValueError, match="different request.*layers"):
        lm.collect(model, None, items, layers=[2], path=path)
    with pytest.raises(ValueError, match="different request.*sources"):
        lm.collect(model, None, items[:-1], layers=[1], path=path)
    other = lm.Transformer.random(tiny_llama(), key=jax.random.key(1))
    with pytest.raises(ValueError, match="different request.*model"):
        lm.collect(other, None, items, layers=[1], path=path)
    m = json.loads((path / "manifest.json").read_text())
    m["shards"][0]["files"]["text_index"]["name"] = "../../etc/passwd"
    (path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ValueError, match="valid file name"):
        lm.ActivationStore(path)
    m["shards"][0]["files"]["text_index"]["name"] = "shard_00000.position.npy"
    (path / "manifest.json").write_text(json.dumps(m))
    m["shards"][0]["files"]["resid_post.L1"]["name"] = "shard_00000.token.npy"
    (path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ValueError, match="manifest says"):  # a (rows,) int file as a column
        lm.ActivationStore(path)


def test_bad_inputs_name_the_argument(model, tmp_path):
    items = _items()
    p = tmp_path / "x"
    cases = [
        (dict(texts_or_tokens=[]), "texts_or_tokens"),
        (dict(texts_or_tokens=[[1, 2, 99]]), "texts_or_tokens.*61"),
        (dict(texts_or_tokens=[[]]), "texts_or_tokens"),
        (dict(texts_or_tokens=["hello"]), "tokenizer"),
        (dict(sites=["nope"]), "sites"),
        (dict(layers=[3]), "layers"),
        (dict(layers=[]), "layers"),
        (dict(positions="first"), "positions"),
        (dict(positions="generated"), "positions='generated'"),
        (dict(dtype="int8"), "dtype"),
        (dict(shard_rows=0), "shard_rows"),
        (dict(texts_or_tokens=[list(range(50)) * 6]), "context length"),
    ]
    for kw, msg in cases:
        args = dict(texts_or_tokens=items, layers=[1], sites=["resid_post"])
        args.update(kw)
        with pytest.raises(ValueError, match=msg):
            lm.collect(model, None, args.pop("texts_or_tokens"), path=p, **args)
    store = lm.collect(model, None, items, layers=[0, 1], path=p)
    with pytest.raises(ValueError, match="site/layer"):
        store.array()
    with pytest.raises(ValueError, match="key"):
        next(store.batches(4, layer=0))
    with pytest.raises(ValueError, match="batch_size"):
        next(store.batches(0, layer=0, shuffle=False))
    with pytest.raises(ValueError, match="path"):
        lm.ActivationStore(tmp_path / "nowhere")
