"""One set of simulated replicate chains shared by the temporal tests (one compilation)."""

import jax
import numpy as np
import pytest

from jaxlab.temporal import TemporalNetworkParams, default_capacity, simulate_transitions

PARAMS = TemporalNetworkParams(1.0, 0.08, 0.6, 1.5, 1.0)
N_STEPS, BURN_IN, REPS = 200, 60, 32
KEYS = jax.random.split(jax.random.key(2024), REPS)


@pytest.fixture(scope="session")
def chain_capacity():
    return default_capacity(PARAMS)


@pytest.fixture(scope="session")
def replicate_chains(chain_capacity):
    """`TransitionStats` of `REPS` stationary chains of `N_STEPS` transitions (numpy leaves)."""
    stats = jax.vmap(
        lambda k: simulate_transitions(
            PARAMS, N_STEPS, key=k, capacity=chain_capacity, burn_in=BURN_IN
        )
    )(KEYS)
    return jax.tree.map(np.asarray, stats)
