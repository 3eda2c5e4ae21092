"""Rounds-to-identify of the P16 synthetic experiment against hand-built relevance paths."""

import numpy as np

from experiments.bandits.synthetic import rounds_to_identify


def test_rounds_to_identify_is_the_first_checkpoint_kept_to_the_end():
    relevant = (0, 2)
    good = [3.0, 0.1, 2.0, 0.0]  # top-2 = {0, 2}
    bad = [3.0, 2.5, 0.1, 0.0]  # top-2 = {0, 1}
    paths = np.array(
        [
            [bad, good, good, good],  # identified after checkpoint 2 -> 2 * 10 rounds
            [good, bad, good, good],  # lost once: counts from checkpoint 3 -> 30 rounds
            [good, good, good, bad],  # lost at the end: never kept -> inf
            [good, good, good, good],  # from the first checkpoint -> 10 rounds
        ]
    )
    got = rounds_to_identify(paths, relevant, every=10)
    np.testing.assert_array_equal(got, [20.0, 30.0, np.inf, 10.0])


def test_ties_do_not_count_as_identified():
    # all-zero relevance (a policy that reads nothing) would put dimensions 0, 1 on top of
    # a stable sort; a tie is not an identification
    paths = np.zeros((2, 3, 4))
    got = rounds_to_identify(paths, (0, 1), every=5)
    assert np.all(np.isinf(got))
