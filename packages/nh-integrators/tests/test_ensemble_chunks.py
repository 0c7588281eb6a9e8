"""An nh ensemble split into chunks equals the whole batch bitwise (issue 18): the Newton
strategy of NonholonomicPRK (jacobian_reuse="auto") does not depend on the batch size."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import integrate, integrate_ensemble
from chetaev.nh_integrators import NonholonomicPRK
from chetaev.nh_integrators.testing import chaotic_ensemble, chaotic_system
from chetaev.rktableaux import lobatto_iiia_iiib

N = 20  # above the old AUTO_STRUCTURED_MIN_BATCH = 16, whose chunks of 1 and 7 were below it


@pytest.mark.parametrize("s", [2, 3])
@pytest.mark.parametrize("chunk_size", [1, 7, N])
def test_chaotic_ensemble_in_chunks_equals_the_whole_batch_bitwise(s, chunk_size):
    system = chaotic_system()
    q0, v0 = chaotic_ensemble(N - 1)
    method = NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule="carry")
    whole = integrate(system, method, q0, v0, h=0.1, n_steps=30)
    res = integrate_ensemble(system, method, q0, v0, h=0.1, n_steps=30, chunk_size=chunk_size)
    assert res.all_success
    for name in ("q", "v", "p", "lam"):
        assert np.array_equal(getattr(res, name), getattr(whole, name)), name
    # and each chunk by itself, through integrate: the same numbers
    part = integrate(system, method, q0[:chunk_size], v0[:chunk_size], h=0.1, n_steps=30)
    assert np.array_equal(part.q, whole.q[:, :chunk_size])
