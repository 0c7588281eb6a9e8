"""The chaotic system's potential derivatives (paper §7.3) are the same for every batch size.

``testing.chaotic_system`` sums the coupled terms ``q_j^2`` of each coordinate's partners with
one BLAS product ``(q*q) @ partner``. The result does not depend on the kernel's summation
order because every sum has at most two nonzero terms with weights 0 or 1 (``q*q >= 0``): one
rounding of ``a + b``. Checked bitwise against the unbatched evaluation and against the sums
written out term by term, for batch sizes on both sides of OpenBLAS's small-matrix kernels,
and for m = 2..4.
"""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.nh_integrators import testing as nht


@pytest.mark.parametrize("m", [2, 3, 4])
def test_pair_sums_are_exact_for_every_batch_size(m):
    system = nht.chaotic_system(m)
    n = 2 * m + 1
    rng = np.random.default_rng(40 + m)
    sizes = (1, 2, 7, 64, 65, 300)
    q = rng.uniform(-2.0, 2.0, (max(sizes), n))
    grad = system.system.gradV
    hess = system.system.hessV
    # the sums written out: partners of each coordinate (1-based pairs of the paper)
    pairs = [(m + 1, m + 2)] + [(1 + i, m + 1 + i) for i in range(m)]
    qq = q * q
    expected = np.zeros_like(q)
    for i, j in pairs:
        expected[:, i] += qq[:, j]
        expected[:, j] += qq[:, i]
    expected = q * (1.0 + expected)
    for B in sizes:
        g = grad(q[:B])
        assert np.array_equal(g, expected[:B]), B
        assert np.array_equal(hess(q[:B]), np.stack([hess(q[i]) for i in range(B)])), B
    assert np.array_equal(np.stack([grad(q[i]) for i in range(5)]), expected[:5])
    stages = q[:60].reshape(3, 20, n)  # (s, B, n) stage arrays of the staged residual
    assert np.array_equal(grad(stages), expected[:60].reshape(3, 20, n))
