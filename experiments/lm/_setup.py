"""Shared set-up of the lm experiments: the public-domain text (LogiQA: jaxlab.data) and the
perplexity ratio of it against its shuffled tokens, with an interval over its segments."""

from __future__ import annotations

import dataclasses

import numpy as np

from experiments._harness import Estimate, bootstrap

__all__ = ["TEXT", "ppl_ratio"]

# Charles Dickens, "A Tale of Two Cities" (1859), opening paragraph: public domain.
TEXT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was "
    "the age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it "
    "was the season of Light, it was the season of Darkness, it was the spring of hope, it was "
    "the winter of despair, we had everything before us, we had nothing before us, we were all "
    "going direct to Heaven, we were all going direct the other way - in short, the period was "
    "so far like the present period, that some of its noisiest authorities insisted on its "
    "being received, for good or for evil, in the superlative degree of comparison only."
)


def ppl_ratio(nll_text, nll_shuf, *, segments: int, level: float, seed: int) -> Estimate:
    """`ppl(shuffled) / ppl(text) = exp((sum nll_shuf - sum nll_text) / n)` with a
    percentile bootstrap interval over `segments` contiguous segments of the scored
    positions (a block bootstrap: neighbouring tokens are not independent). Segment j
    holds the NLL sums of both sequences over the same positions and their count;
    resampled segments give `exp((sum shuf - sum text) / sum count)`."""
    n = nll_text.size
    if not 2 <= segments <= n:
        raise ValueError(f"segments: expected 2..{n} (the scored tokens), received {segments}")
    cuts = np.array_split(np.arange(n), segments)
    text = np.array([nll_text[c].sum() for c in cuts])
    shuf = np.array([nll_shuf[c].sum() for c in cuts])
    count = np.array([c.size for c in cuts], np.float64)

    def ratio(t, s, c, axis=-1):
        return np.exp((s.sum(axis) - t.sum(axis)) / c.sum(axis))

    est = bootstrap((text, shuf, count), ratio, seed=seed, level=level)
    return dataclasses.replace(
        est, method=f"{est.method} over {segments} segments of the text (ratio of perplexities)"
    )
