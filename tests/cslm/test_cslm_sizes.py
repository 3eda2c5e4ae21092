"""cslm bounds every size a caller sets before the work starts (issue #59): a huge count or
replicate number is a ValueError naming the argument, not an abort or an unbounded loop."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxlab import cslm


def test_sizes_beyond_the_caps_raise_at_once():
    key = jax.random.key(0)
    family = next(iter(cslm.FAMILIES))
    task = cslm.make_task(family, 3, key=key)
    with pytest.raises(ValueError, match="count: expected at most 100000"):
        cslm.make_tasks(family, 3, 10**7, key=key)
    with pytest.raises(ValueError, match="count: expected at most 1000"):
        cslm.perturbed_answers(task, 10**6, key=key)
    correct = np.ones((5, 3), bool)
    with pytest.raises(ValueError, match="n_boot: expected at most 1000000"):
        cslm.min_budget_ci(correct, [1, 2, 4], 0.5, key=key, n_boot=10**9)
    # the same calls at ordinary sizes still work
    assert len(cslm.make_tasks(family, 3, 4, key=key)) == 4
    assert len(cslm.perturbed_answers(task, 3, key=key)) == 3
    est = cslm.min_budget_ci(correct, [1, 2, 4], 0.5, key=key, n_boot=50)
    assert est.value == 1.0
