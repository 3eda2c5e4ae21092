"""Issue 30 finding 6: a truncated or empty encoding cache is recomputed (it raised
BadZipFile/EOFError); finding 8: a data-set name cannot point the cache outside its folder."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from jaxlab import topology as T

from ..corruption import cuts, data_flips, flips, report, subset, sweep, zip_fields


@pytest.fixture(scope="module")
def mutag3():
    graphs, _ = T.load_mutag()
    spec = T.EncodingSpec(lappe_k=2, rwse_steps=2, heat_times=(1.0,), cycle_lengths=(6,))
    return graphs[:3], spec


def test_truncated_or_empty_cache_is_recomputed(tmp_path, mutag3):
    graphs, spec = mutag3
    ref, _ = T.prepare_dataset("m3", graphs, spec=spec, cache_dir=tmp_path)
    (cache,) = tmp_path.glob("m3-*.npz")
    whole = cache.read_bytes()
    mask = os.umask(0)
    os.umask(mask)
    assert cache.stat().st_mode & 0o777 == 0o666 & ~mask  # written atomically, not 0600
    cuts = [0, 1, 4, 22, 30, 100, len(whole) // 3, len(whole) // 2, len(whole) - 22, len(whole) - 1]
    for cut in cuts:
        cache.write_bytes(whole[:cut])
        got, _ = T.prepare_dataset("m3", graphs, spec=spec, cache_dir=tmp_path)
        np.testing.assert_array_equal(got.enc[1][0], ref.enc[1][0])
        assert cache.read_bytes() == whole, f"cache cut at {cut} was not rewritten"
    flipped = bytearray(whole)
    flipped[len(whole) // 2] ^= 0xFF  # a flipped byte inside an array's data
    cache.write_bytes(bytes(flipped))
    got, _ = T.prepare_dataset("m3", graphs, spec=spec, cache_dir=tmp_path)
    assert got.enc[0][0].shape == ref.enc[0][0].shape


@pytest.mark.parametrize("name", ["../../escape", "a/b", "/abs", "..", ".hidden", "", "x" * 300])
def test_prepare_dataset_name_cannot_escape_the_cache_dir(tmp_path, mutag3, name):
    graphs, spec = mutag3
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match="^name: expected a data-set name"):
        T.prepare_dataset(name, graphs, spec=spec, cache_dir=cache)
    assert not any(tmp_path.rglob("*.npz"))


def _cache_sweep_case(tmp_path, mutag3):
    graphs, spec = mutag3
    ref, _ = T.prepare_dataset("m3", graphs, spec=spec, cache_dir=tmp_path / "ref")
    (cache,) = (tmp_path / "ref").glob("m3-*.npz")
    work = tmp_path / "work"

    def read(path):
        # each damaged copy is read from a fresh folder: the reader overwrites what it
        # cannot trust, and the sweep must keep damaging the original
        work.mkdir(exist_ok=True)
        shutil.copyfile(path, work / path.name)
        return T.prepare_dataset("m3", graphs, spec=spec, cache_dir=work)[0]

    def accept(damage, got, caught):
        same = all(
            np.array_equal(a, b)
            for ra, rb in zip(got.enc, ref.enc, strict=True)
            for a, b in zip(ra, rb, strict=True)
        )
        return "recomputed, or read unchanged (a byte zipfile ignores)" if same else None

    data = cache.read_bytes()
    fields = zip_fields(data)
    header = [f for f in fields if f.kind != "data"]
    damages = (cuts(fields, len(data), spread=16), flips(header), data_flips(fields))
    return cache, read, accept, damages


def test_cache_corruption_sweep_subset(tmp_path, mutag3, record_property):
    # issue 30: every damage to the cache (truncation, header flips, data flips under the
    # zip CRC) ends in a recomputation or an unchanged read, never an exception
    cache, read, accept, (c, fl, dfl) = _cache_sweep_case(tmp_path, mutag3)
    damages = subset(c, 6) + subset(fl, 12) + subset(dfl, 4)
    report(record_property, "topology cache (subset)", sweep(cache, read, damages, accept))


@pytest.mark.slow
def test_cache_corruption_sweep_full(tmp_path, mutag3, record_property):
    cache, read, accept, (c, fl, dfl) = _cache_sweep_case(tmp_path, mutag3)
    report(record_property, "topology cache", sweep(cache, read, c + fl + dfl, accept))
