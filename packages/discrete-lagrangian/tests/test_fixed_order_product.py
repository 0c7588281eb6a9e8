"""``fixed_order_product``: the stage mixes of the batched PRK engine round the same way for
every batch size (an ensemble split into chunks equals the whole batch bitwise on every CPU,
including those where OpenBLAS's kernel, and with it the use of fused multiply-adds, depends
on the matrix sizes)."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian.extending import fixed_order_product
from chetaev.discrete_lagrangian.testing import assert_rounding_close


@pytest.mark.parametrize("shape", [(3, 3), (5, 4), (1, 3), (7, 2)])
def test_columns_do_not_depend_on_the_batch_size(shape):
    rng = np.random.default_rng(7)
    A = rng.normal(size=shape)
    X = rng.normal(size=(shape[1], 4099))
    whole = fixed_order_product(A, X)
    for lo, hi in [(0, 1), (5, 12), (100, 163), (4000, 4099)]:
        assert np.array_equal(fixed_order_product(A, X[:, lo:hi]), whole[:, lo:hi])
    # it is the matrix product: k terms per entry, summed once
    assert_rounding_close(whole, A @ X, n_terms=shape[1])
