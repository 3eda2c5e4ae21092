"""Framing pieces: an empty instruction reproduces the plain prompt's scores, the shift
statistic finds planted latents (brute-force oracle for its p-values), and the overlap
p-value equals a hypergeometric sum by enumeration."""

from __future__ import annotations

import itertools
import math

import jax
import numpy as np
import pytest

import jaxlab.illusions as il
import jaxlab.lm as lm

from ..lm.lm_reference import tiny_llama


class _WordTokenizer:
    """One token per word (a checksum of its characters, mod the tiny vocabulary); no
    chat template."""

    chat_template = None

    def encode(self, text, add_bos=None):
        ids = [sum(map(ord, w)) % 60 + 1 for w in text.split()]
        return ids if add_bos is False else [0, *ids]


def test_empty_instruction_is_the_plain_prompt(getkey):
    s = il.make_stimuli(key=getkey(), counts=((2, 1), (1, 1)))
    assert il.framed_context(s.context, "") == s.context
    assert il.framed_context(s.context, "Count.").startswith("Count.\n\n")
    assert il.INSTRUCTIONS["none"] == ""
    model = lm.Transformer.random(tiny_llama(), key=jax.random.key(3))
    tok = _WordTokenizer()
    qs = [il.correlation_queries(s, traits=())[:2]]

    def scores(context):
        lay = il.layout_queries(None, [context], qs)
        return np.concatenate(lm.score(model, tok, lay.prompts, lay.continuations).sum)

    plain = scores(s.context)
    np.testing.assert_array_equal(scores(il.framed_context(s.context, "")), plain)
    framed = scores(il.framed_context(s.context, il.INSTRUCTIONS["analytic"]))
    assert not np.allclose(framed, plain)
    with pytest.raises(ValueError, match="context"):
        il.framed_context("", "x")
    with pytest.raises(ValueError, match="instruction"):
        il.framed_context("c", None)  # type: ignore[arg-type]


def _planted(rng, n=40, m=30, shifted=(3, 17, 25), size=(1.0, 0.8, -0.6)):
    base = rng.exponential(1.0, (n, m)) * (rng.random((n, m)) < 0.5)
    z_b = base + 0.05 * rng.standard_normal((n, m))
    z_a = base + 0.05 * rng.standard_normal((n, m))
    for j, d in zip(shifted, size, strict=True):
        z_a[:, j] += d
    return z_a, z_b


def test_shift_finds_planted_latents(getkey):
    rng = np.random.default_rng(0)
    z_a, z_b = _planted(rng)
    groups = np.repeat(np.arange(20), 2)
    r = il.framing_feature_shift(z_a, z_b, key=getkey(), k=5, groups=groups, resamples=500)
    assert r["latents"][:3].tolist() == [3, 17, 25]
    np.testing.assert_allclose(r["mean_shift"], (z_a - z_b).mean(0), atol=1e-12)
    assert (r["p_value"][:3] < 0.01).all()
    assert (r["p_value"][3:] > 0.05).all()  # the next ones are noise (family-wise)
    for i, d in enumerate((1.0, 0.8, -0.6)):
        assert r["ci_low"][i] < d < r["ci_high"][i]
        assert r["ci_low"][i] < r["shift"][i] < r["ci_high"][i]
    # identical framings: every shift 0 and p = 1
    z = np.abs(rng.standard_normal((10, 6)))
    r0 = il.framing_feature_shift(z, z, key=getkey(), k=3, resamples=50)
    np.testing.assert_array_equal(r0["shift"], 0.0)
    np.testing.assert_array_equal(r0["p_value"], 1.0)


def test_shift_p_values_match_a_brute_force_loop(getkey):
    rng = np.random.default_rng(1)
    z_a, z_b = _planted(rng, n=12, m=7, shifted=(2,), size=(0.4,))
    key = getkey()
    groups = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5])
    r = il.framing_feature_shift(z_a, z_b, key=key, k=7, groups=groups, resamples=300)
    # the same sign draws, applied pair by pair in a Python loop (step-down max-T)
    signs = np.asarray(jax.random.rademacher(jax.random.split(key)[0], (300, 6)), np.float64)
    diff = z_a - z_b
    rank = np.argsort(-np.abs(diff.mean(0)))
    assert r["latents"].tolist() == rank.tolist()
    expect = []
    for i in range(7):
        rest = rank[i:]
        null = [max(abs(np.mean(s[groups] * diff[:, j])) for j in rest) for s in signs]
        expect.append((1 + np.sum(np.array(null) >= abs(diff[:, rank[i]].mean()) - 1e-12)) / 301)
    np.testing.assert_allclose(r["p_value"], np.maximum.accumulate(expect))
    # one group per pair equals no groups
    a = il.framing_feature_shift(z_a, z_b, key=key, k=3, resamples=100)
    b = il.framing_feature_shift(z_a, z_b, key=key, k=3, groups=np.arange(12), resamples=100)
    for name in a:
        np.testing.assert_allclose(a[name], b[name])


def test_shift_bad_input(getkey):
    z = np.ones((4, 3))
    with pytest.raises(ValueError, match="z_b"):
        il.framing_feature_shift(z, np.ones((4, 2)), key=getkey())
    with pytest.raises(ValueError, match="k"):
        il.framing_feature_shift(z, z, key=getkey(), k=4)
    with pytest.raises(ValueError, match="groups"):
        il.framing_feature_shift(z, z, key=getkey(), k=2, groups=np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="z_a"):
        il.framing_feature_shift(z[:1], z[:1], key=getkey(), k=2)
    with pytest.raises(ValueError, match="z_a"):
        il.framing_feature_shift(np.full((4, 3), np.nan), z, key=getkey(), k=2)


def test_overlap_equals_enumeration():
    population, first, second = 9, [0, 1, 2, 5], [1, 2, 7]
    r = il.latent_overlap(first, second, population=population)
    assert r["overlap"] == 2
    assert r["expected"] == pytest.approx(4 * 3 / 9)
    # P(|random 3-set & first| >= 2), counting every 3-subset of the population
    subsets = list(itertools.combinations(range(population), 3))
    hits = sum(len(set(s) & set(first)) >= 2 for s in subsets)
    assert len(subsets) == math.comb(9, 3)
    assert r["p_value"] == pytest.approx(hits / len(subsets))
    assert il.latent_overlap([0], [1], population=5)["p_value"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="second"):
        il.latent_overlap([0], [1, 1], population=5)
    with pytest.raises(ValueError, match="first"):
        il.latent_overlap([7], [1], population=5)
