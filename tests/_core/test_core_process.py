import numpy as np
import pytest

from jaxlab._core import process_bounds, process_slice


@pytest.mark.parametrize("n", [0, 1, 5, 7, 8, 13])
@pytest.mark.parametrize("count", [1, 2, 3, 4, 8])
def test_blocks_partition_the_list_like_array_split(n, count):
    items = [f"item{i}" for i in range(n)]
    blocks = [process_slice(items, index=p, count=count) for p in range(count)]
    # oracle: numpy's array_split (contiguous blocks, the first n % count one longer)
    ref = [[f"item{i}" for i in b] for b in np.array_split(np.arange(n), count)]
    assert blocks == ref
    assert sum(blocks, []) == items  # disjoint, complete, in order
    assert [len(process_bounds(n, index=p, count=count)) for p in range(count)] == [
        len(b) for b in ref
    ]


def test_single_process_gets_everything():
    assert process_slice([3, 1, 2]) == [3, 1, 2]  # jax.process_count() == 1 here


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="index"):
        process_slice([1, 2], index=2, count=2)
    with pytest.raises(ValueError, match="count"):
        process_slice([1, 2], index=0, count=0)
    with pytest.raises(ValueError, match="n:"):
        process_bounds(-1, index=0, count=1)
