"""Named key streams (issue #53 item 3): `ctx.key(stream, *index)` derives every random
choice of a run from its `--seed`."""

import dataclasses
import json
import types

import jax
import numpy as np
import pytest

from experiments._harness._api import Claim, Result, RunContext
from experiments._harness._runner import run_experiment

STREAMS = [("spike_ins", ()), ("spike_ins", (1,)), ("split", (0, 3)), ("noise", (7,))]


def _draws(seed: int) -> np.ndarray:
    ctx = RunContext("x", out_dir=".", seed=seed)
    return np.stack([np.asarray(jax.random.uniform(ctx.key(s, *i), (8,))) for s, i in STREAMS])


def test_two_seeds_change_every_stream_and_one_seed_reproduces_it():
    a, b, again = _draws(0), _draws(1), _draws(0)
    np.testing.assert_array_equal(a, again)
    assert all(not np.allclose(a[j], b[j]) for j in range(len(STREAMS)))
    # distinct names and indices are distinct streams
    assert len({tuple(row) for row in a}) == len(STREAMS)


def test_the_stream_key_is_the_documented_fold_in():
    import zlib

    want = jax.random.fold_in(
        jax.random.fold_in(jax.random.key(5), zlib.crc32(b"split") & 0x7FFFFFFF), 2
    )
    got = RunContext("x", out_dir=".", seed=5).key("split", 2)
    np.testing.assert_array_equal(jax.random.key_data(got), jax.random.key_data(want))


@pytest.mark.parametrize("seed", [-1, 1.5, True])
def test_bad_seeds_raise(seed):
    with pytest.raises(ValueError, match="seed"):
        RunContext("x", out_dir=".", seed=seed)


@pytest.mark.parametrize(
    ("call", "match"), [(("",), "stream"), (("s", -1), "index"), (("s", 2.0), "index")]
)
def test_bad_streams_and_indices_raise(call, match):
    ctx = RunContext("x", out_dir=".")
    with pytest.raises(ValueError, match=match):
        ctx.key(*call)


@dataclasses.dataclass(frozen=True)
class _Config:
    n: int = 4


def _module():
    def run(config, key, ctx):
        x = jax.random.uniform(ctx.key("draws"), (config.n,))
        return Result(
            metrics={f"u{i}": float(v) for i, v in enumerate(x)},
            claims=[Claim("draws are uniform", "-", "-", True)],
        )

    mod = types.ModuleType("test_exp_streams")
    mod.NAME, mod.PAPER, mod.DESCRIPTION = "streams", "P9", "key streams"
    mod.Config, mod.QUICK, mod.run = _Config, _Config(), run
    return mod


def test_the_runner_passes_seed_to_the_streams(tmp_path):
    runs = {
        s: json.loads(json.dumps(run_experiment(_module(), out=tmp_path / str(s), seed=s)))
        for s in (0, 1)
    }
    again = run_experiment(_module(), out=tmp_path / "again", seed=0)
    assert again["metrics"] == runs[0]["metrics"]
    assert all(runs[0]["metrics"][k] != runs[1]["metrics"][k] for k in runs[0]["metrics"])
