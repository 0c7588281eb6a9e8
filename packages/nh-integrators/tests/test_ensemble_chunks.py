"""An nh ensemble split into chunks equals the whole batch bitwise (issue 18): the Newton
strategy of NonholonomicPRK (jacobian_reuse="auto") does not depend on the batch size, nor
does the rounding of the products with a constant mass matrix.

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

N = 20  # above the old AUTO_STRUCTURED_MIN_BATCH = 16, whose chunks of 1 and 7 were below it
N_MEMBERS = 70  # the full-mass ensemble


def _assert_chunks_equal_whole(system, method, q0, v0, n_steps, chunk_size):
    """``integrate_ensemble`` in chunks of ``chunk_size`` equals one batched ``integrate``
    bitwise, in every saved field; returns the whole run."""
    whole = integrate(system, method, q0, v0, h=0.1, n_steps=n_steps)
    res = integrate_ensemble(system, method, q0, v0, h=0.1, n_steps=n_steps, chunk_size=chunk_size)
    assert res.all_success
    for name in ("q", "v", "p", "lam"):
        assert np.array_equal(getattr(res, name), getattr(whole, name)), name
    return whole


@pytest.mark.parametrize("s", [2, 3])
@pytest.mark.parametrize("chunk_size", [1, 7, N])
def test_chaotic_ensemble_in_chunks_equals_the_whole_batch_bitwise(s, chunk_size):
    system = chaotic_system()
    q0, v0 = chaotic_ensemble(N - 1)
    method = NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule="carry")
    whole = _assert_chunks_equal_whole(system, method, q0, v0, 30, chunk_size)
    # and each chunk by itself, through integrate: the same numbers
    part = integrate(system, method, q0[:chunk_size], v0[:chunk_size], h=0.1, n_steps=30)
    assert np.array_equal(part.q, whole.q[:, :chunk_size])


def _stiff_member_ensemble():
    """The chaotic ensemble (6 members) with member 2 scaled by 6 (|q| ~ 6: the quartic
    potential makes its Newton contract slowly at h = 0.1). Measured over 5 steps (s = 3):
    its "step" Jacobian is refreshed (2 Jacobians in a step), its structured matrix rebuilt
    (2 in a step) and its structured solve falls back to the analytic Jacobian; the other
    members alone need none of these. Before the Newton decisions were per member, all the
    other members of this batch differed from their solo runs (in the last bits)."""
    q0, v0 = chaotic_ensemble(5)
    q0[2] *= 6.0
    v0[2] *= 6.0
    return q0, v0


def _run(system, method, q0, v0, n):
    st = method.initial_state(system, q0, v0)
    states, infos = [], []
    for _ in range(n):
        st = method.step(system, st, 0.1)
        states.append(st)
        infos.append(st.info)
    return states, infos


@pytest.mark.parametrize("reuse", ["step", "steps", "structured", "auto", "iteration"])
def test_each_member_equals_its_solo_run_bitwise_when_one_needs_a_refresh(reuse):
    """Issue 18: every Newton decision (refresh of the inverse Jacobian, rebuild of the
    structured matrix, fallback, stall) is taken per member, so a member's steps in a batch
    are bitwise those of a batch of it alone, even when a chunk-mate needs a refresh."""
    system = chaotic_system()
    q0, v0 = _stiff_member_ensemble()
    method = NonholonomicPRK(lobatto_iiia_iiib(3), jacobian_reuse=reuse, multiplier_rule="carry")
    n = 8
    whole, infos = _run(system, method, q0, v0, n)
    if reuse == "step":  # the stiff member triggers refreshes
        assert max(i["jacobians"] for i in infos) >= 2
    if reuse == "steps":  # ... of the Jacobian carried from the previous step
        assert max(i["jacobians"] for i in infos[1:]) >= 1
    if reuse in ("structured", "auto"):  # ... rebuilds and the fallback
        assert max(i["structured_matrices"] for i in infos) >= 2
        assert max(i["jacobians"] for i in infos) >= 1
    for k in range(len(q0)):
        solo, _ = _run(system, method, q0[k : k + 1], v0[k : k + 1], n)
        for a, b in zip(whole, solo):
            for name in ("q", "v", "p", "lam"):
                assert np.array_equal(getattr(a, name)[k], getattr(b, name)[0]), (k, name)


@pytest.mark.parametrize("chunk_size", [1, 4])
def test_stiff_member_ensemble_in_chunks_equals_the_whole_batch_bitwise(chunk_size):
    system = chaotic_system()
    q0, v0 = _stiff_member_ensemble()
    method = NonholonomicPRK(lobatto_iiia_iiib(3), multiplier_rule="carry")
    _assert_chunks_equal_whole(system, method, q0, v0, 20, chunk_size)


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


def _full_mass_ensemble(system: ConstrainedSystem):
    """70 members of the chaotic ensemble's family, velocities projected onto Φ = 0."""
    q0, v0 = chaotic_ensemble(N_MEMBERS - 1)
    A = system.constraint.matrix(q0)[:, 0, :]  # (B, n): Φ = A v
    v0 = v0 - (np.einsum("bi,bi->b", A, v0) / np.einsum("bi,bi->b", A, A))[:, None] * A
    return q0, v0


@pytest.mark.parametrize("chunk_size", [1, 7, 64])
def test_full_mass_ensemble_in_chunks_equals_the_whole_batch_bitwise(chunk_size):
    system = _massive_chaotic()
    q0, v0 = _full_mass_ensemble(system)
    method = NonholonomicPRK(lobatto_iiia_iiib(3), backend="numpy")
    _assert_chunks_equal_whole(system, method, q0, v0, 8, chunk_size)
