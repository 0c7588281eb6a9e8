"""Step linearizations of ``chetaev.gni.Composition`` (issue 20).

The composition is ``chetaev.discrete_lagrangian.extending.ComposedSteps`` (one step and one
chain rule for the discretization-map and the GNI compositions). A GNI member maps
(q_k, v_k, λ_k) to (q_{k+1}, v_{k+1}, λ_{k+1}) and reads λ_k (p⁻_k = G v_k + (h/2) muᵀλ_k);
its linearization is in that complete state (``"(q, v, lam)"``), so the chain rule is the
plain product of the members' A, B, in the coordinates of a single GNI. Checked against
central finite differences of the composed step in (q, v, λ) (``step_linearization_error``; bound
``step_fd_rtol(h)``, 1.4e-8 at h = 0.2, derived in ``packages/discrete-lagrangian/tests/
test_linearization.py``) on the particle of the docs' theory page (linear and affine
constraint), unforced and forced (F = −c(1 + x²)v + u·b: A and B), single and batched, for
(Euler B, Euler A) with equal weights (Remark 5.5), unequal weights and three members.
Measured worst deviation over the 24 cases, in (q, v, λ): 1.0e-9 of max|[A B]| (three
members), 1/14 of the bound, the level of a single forced GNI Euler A step on this problem
(1.2e-9: the force's Jacobians are the system's central differences); 8.0e-10 for
(Euler B, Euler A) (in (q, v) at fixed λ_0, before: 2.0e-9 and 3.3e-10). Without the
multiplier's rows the product of the members' (q, v) blocks misses ∂λ_1/∂(q_0, v_0) and
is off by O(h) (8.0e-2 of max|A| here, 1.9e-2 at the protocol's h = 0.05; checked to be > 1e-3).
"""

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import LinearizationNotSupportedError
from chetaev.discrete_lagrangian.testing import (
    rounding_bound,
    step_fd_rtol,
    step_linearization_error,
)
from chetaev.gni import GNI, Composition
from chetaev.gni.testing import nonholonomic_particle

H = 0.2
C = 0.3
B_DIR = np.array([1.0, 0.5, 0.0])

COMPOSITIONS = {
    "BA": lambda: Composition((GNI("euler_b"), GNI("euler_a"))),
    "AB-unequal": lambda: Composition((GNI("euler_a"), GNI("euler_b")), weights=(0.3, 0.7)),
    "three": lambda: Composition((GNI("euler_b"), GNI("rattle"), GNI("euler_a")),
                                 weights=(0.25, 0.5, 0.25)),
}


def _force(q, v, u):
    return -C * (1.0 + q[..., :1] ** 2) * v + u[..., :1] * B_DIR


def _problem(affine: bool, forced: bool, batched: bool):
    p = nonholonomic_particle(affine)
    system, q0, v0 = p.system, p.q0, p.v0
    if forced:
        system = attrs.evolve(system, system=attrs.evolve(system.system, force=_force,
                                                          n_controls=1))
    if batched:
        q0, v0 = np.stack([q0, q0]), np.stack([v0, v0])
    u = None
    if forced:
        u = np.array([[0.4], [-0.6]]) if batched else np.array([0.4])
    return system, q0, v0, u


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize("forced", [False, True], ids=["unforced", "forced"])
@pytest.mark.parametrize("affine", [False, True], ids=["linear", "affine"])
@pytest.mark.parametrize("name", list(COMPOSITIONS))
def test_composition_linearization_matches_finite_differences(name, affine, forced, batched):
    """[A B] in (q, v, λ) against central differences (module docstring)."""
    method = COMPOSITIONS[name]()
    system, q0, v0, u = _problem(affine, forced, batched)
    state = method.initial_state(system, q0, v0, u=u)
    lin, err = step_linearization_error(method, system, state, H, u)
    assert lin.coordinates == "(q, v, lam)"
    assert lin.basis is not None and lin.A_tangent.shape[-1] == 6
    if forced:
        assert lin.B.shape[-1] == 1 and np.max(np.abs(lin.B)) > 0.0
    assert err <= step_fd_rtol(H), (name, affine, forced, batched, err)


def test_the_carried_multiplier_is_needed():
    """The members' (q, v) blocks alone do not compose (module docstring); their complete
    (q, v, λ) Jacobians do, to rounding (the composition's A is their product)."""
    method = COMPOSITIONS["BA"]()
    system, q0, v0, _ = _problem(False, False, False)
    state = method.initial_state(system, q0, v0)
    lin = method.step_linearization(system, state, H)
    l1 = method.methods[0].step_linearization(system, state, 0.5 * H)
    l2 = method.methods[1].step_linearization(system, l1.state, 0.5 * H)
    qv = np.s_[..., :6, :6]
    assert np.max(np.abs(lin.A[qv] - l2.A[qv] @ l1.A[qv])) > 1e-3 * np.max(np.abs(lin.A))
    np.testing.assert_allclose(lin.A, l2.A @ l1.A, rtol=0,
                               atol=rounding_bound(np.max(np.abs(l2.A)) * np.max(np.abs(l1.A)), 7))


def test_members_of_other_coordinates_refuse():
    """Members linearizing in different coordinates cannot be chained."""
    from chetaev.discrete_lagrangian.extending import StepLinearization

    class _QP(GNI):
        def _step_linearization_impl(self, system, state, h, u, new):
            lin = super()._step_linearization_impl(system, state, h, u, new)
            return StepLinearization(state=new, A=lin.A, B=lin.B, coordinates="(q, p)")

    method = Composition((GNI("euler_b"), _QP("euler_a")))
    system, q0, v0, _ = _problem(False, False, False)
    state = method.initial_state(system, q0, v0)
    with pytest.raises(LinearizationNotSupportedError, match="different coordinates"):
        method.step_linearization(system, state, H)
