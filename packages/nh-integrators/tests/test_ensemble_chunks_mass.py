"""Chunked ensembles stay bitwise equal to the whole batch with a non-identity constant mass.

``NonholonomicPRK``'s node velocity ``v_{k+1} = M⁻¹ p_{k+1}`` (and the multiplier's KKT solve
with ``M⁻¹``) are products with a constant matrix over the batch: a BLAS product of the
batch-folded matrix may change its kernel, and with it the rounding, with the number of
members (AVX-512 OpenBLAS), so they are summed in one fixed order. The chaotic system of
paper §7.3 with a full SPD mass (an identity mass hides any summation order: its products
are exact) over 70 members, whole and in chunks of 1, 7 and 64, must agree bitwise.
"""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    MechanicalSystem,
    integrate,
    integrate_ensemble,
)
from chetaev.nh_integrators import NonholonomicPRK
from chetaev.nh_integrators.testing import chaotic_ensemble, chaotic_system
from chetaev.rktableaux import lobatto_iiia_iiib

N_MEMBERS = 70


def _massive_chaotic() -> ConstrainedSystem:
    """The chaotic system with a full SPD mass (eigenvalues 1..2.2, seeded rotation)."""
    base = chaotic_system()
    mech = base.system
    n = mech.n
    Q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((n, n)))
    M = (Q * np.linspace(1.0, 2.2, n)) @ Q.T
    M = 0.5 * (M + M.T)
    return ConstrainedSystem(
        MechanicalSystem(M, mech.V, mech.gradV, potential_hess=mech.hessV), base.constraint
    )


def _ensemble(system: ConstrainedSystem):
    """70 members of the chaotic ensemble's family, velocities projected onto Φ = 0."""
    q0, v0 = chaotic_ensemble(N_MEMBERS - 1)
    A = system.constraint.matrix(q0)[:, 0, :]  # (B, n): Φ = A v
    v0 = v0 - (np.einsum("bi,bi->b", A, v0) / np.einsum("bi,bi->b", A, A))[:, None] * A
    return q0, v0


@pytest.mark.parametrize("chunk_size", [1, 7, 64])
def test_full_mass_ensemble_in_chunks_equals_the_whole_batch_bitwise(chunk_size):
    system = _massive_chaotic()
    q0, v0 = _ensemble(system)
    method = NonholonomicPRK(lobatto_iiia_iiib(3), backend="numpy")
    whole = integrate(system, method, q0, v0, h=0.1, n_steps=8)
    res = integrate_ensemble(system, method, q0, v0, h=0.1, n_steps=8, chunk_size=chunk_size)
    assert res.all_success
    for name in ("q", "v", "p", "lam"):
        assert np.array_equal(getattr(res, name), getattr(whole, name)), name
