"""Bad input: every case raises a ValueError subclass whose message says how to fix it."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    VPRK,
    ConstrainedPRK,
    ConstrainedSystem,
    ConstraintViolationError,
    DiscreteEulerLagrange,
    HypothesisError,
    InputError,
    LieVPRK,
    LinearVelocityConstraint,
    NewtonOptions,
    SingularMatrixError,
    TrivializedMechanicalSystem,
    integrate,
)
from chetaev.discrete_lagrangian.testing import (
    cartesian_pendulum,
    free_rigid_body,
    henon_heiles,
    spherical_pendulum,
)
from chetaev.liegroups import SO3
from chetaev.rktableaux import PartitionedTableau, gauss, lobatto_iiia, lobatto_iiia_iiib

Q_SPH = np.array([np.sin(1.0), 0.0, -np.cos(1.0)])
V_SPH = np.array([0.0, 0.8, 0.0])


def test_wrong_shape():
    with pytest.raises(InputError, match=r"`q0` must have shape \(\.\.\., 2\)"):
        integrate(henon_heiles(), VPRK(gauss(2)), [0.1, 0.2, 0.3], [0.0, 0.0], h=0.1, n_steps=1)


def test_non_finite():
    with pytest.raises(InputError, match=r"`v0` must be finite.*NaN or inf"):
        integrate(henon_heiles(), VPRK(gauss(2)), [0.1, 0.2], [np.nan, 0.0], h=0.1, n_steps=1)


def test_off_constraint_position_reports_violation():
    with pytest.raises(ConstraintViolationError,
                       match=r"max \|Φ\(q0\)\| = 1\.05e-01 > tol.*Project q0 onto"):
        integrate(spherical_pendulum(), ConstrainedPRK(lobatto_iiia_iiib(2)), 1.1 * Q_SPH,
                  V_SPH, h=0.1, n_steps=1)


def test_position_tolerance_does_not_scale_with_the_velocity():
    """|Φ(q0)| = 1e-7 is rejected even with a large |v0| (only ∂Φ/∂q·v0 scales with v0)."""
    q0 = Q_SPH * np.sqrt(1.0 + 2e-7)  # Φ = (|q|² − 1)/2 = 1e-7
    with pytest.raises(ConstraintViolationError,
                       match=r"max \|Φ\(q0\)\| = 1\.00e-07 > tol = 1\.0e-10"):
        integrate(spherical_pendulum(), ConstrainedPRK(lobatto_iiia_iiib(2)), q0,
                  1e4 * V_SPH, h=0.1, n_steps=1)


def test_non_tangent_velocity():
    with pytest.raises(ConstraintViolationError, match=r"not tangent.*Project v0 onto the kernel"):
        integrate(spherical_pendulum(), ConstrainedPRK(lobatto_iiia_iiib(2)), Q_SPH,
                  V_SPH + 0.1 * Q_SPH, h=0.1, n_steps=1)


def test_tableau_violating_h1_h3():
    with pytest.raises(HypothesisError, match=r"H1.*H3.*lobatto_iiia_iiib"):
        ConstrainedPRK(gauss(2))


def test_non_symplectic_pair():
    pair = PartitionedTableau(lobatto_iiia(3), lobatto_iiia(3))
    with pytest.raises(HypothesisError, match=r"symplectic partitioned pair.*Theorem 4\.2"):
        VPRK(pair)


def test_not_a_tableau():
    with pytest.raises(InputError, match=r"PartitionedTableau.*lobatto_iiia_iiib\(3\)"):
        VPRK("gauss")


def test_wrong_system_for_method():
    with pytest.raises(InputError, match=r"use ConstrainedPRK"):
        integrate(spherical_pendulum(), VPRK(gauss(2)), Q_SPH, V_SPH, h=0.1, n_steps=1)
    with pytest.raises(InputError, match=r"needs a ConstrainedSystem"):
        integrate(henon_heiles(), ConstrainedPRK(lobatto_iiia_iiib(2)), [0.1, 0.2], [0.0, 0.1],
                  h=0.1, n_steps=1)
    with pytest.raises(InputError, match=r"Use LieVPRK"):
        integrate(free_rigid_body(), VPRK(gauss(2)), SO3.identity(), [1.0, 0, 0], h=0.1,
                  n_steps=1)
    with pytest.raises(InputError, match=r"for a vector space use VPRK"):
        integrate(henon_heiles(), LieVPRK(gauss(2)), [0.1, 0.2], [0.0, 0.1], h=0.1, n_steps=1)


def test_nonholonomic_system_is_redirected():
    nh = ConstrainedSystem(henon_heiles(), LinearVelocityConstraint(np.array([[1.0, 1.0]])))
    with pytest.raises(InputError, match=r"chetaev\.nh_integrators"):
        integrate(nh, ConstrainedPRK(lobatto_iiia_iiib(2)), [0.1, 0.2], [0.1, -0.1], h=0.1,
                  n_steps=1)


def test_lie_inputs():
    with pytest.raises(InputError, match=r"'cayley' or 'exp'"):
        LieVPRK(gauss(2), retraction="cay2")
    with pytest.raises(InputError, match=r"not an element of the group"):
        integrate(free_rigid_body(), LieVPRK(gauss(2)), 2 * np.eye(3), [1.0, 0, 0], h=0.1,
                  n_steps=1)
    with pytest.raises(InputError, match=r"`inertia` must have shape \(3, 3\)"):
        TrivializedMechanicalSystem(SO3, np.eye(2), lambda R: 0.0, lambda R: 0.0)
    with pytest.raises(SingularMatrixError, match="positive definite"):
        TrivializedMechanicalSystem(SO3, np.diag([1.0, 1.0, -1.0]), lambda R: 0.0,
                                    lambda R: 0.0)


def test_discrete_lagrangian_kind():
    with pytest.raises(InputError, match=r"`kind` must be one of midpoint, trapezoidal, alpha"):
        DiscreteEulerLagrange("simpson")
    with pytest.raises(InputError, match=r"`alpha` must lie in \[0, 1\]"):
        DiscreteEulerLagrange("alpha", 1.5)
    with pytest.raises(InputError, match="used only by kind='alpha'"):
        DiscreteEulerLagrange("midpoint", 0.3)  # was silently replaced by ½


def test_newton_failure_becomes_unsuccessful_trajectory():
    method = ConstrainedPRK(lobatto_iiia_iiib(3), NewtonOptions(max_iter=2))
    q0 = np.array([1.0, 0.0])
    tr = integrate(cartesian_pendulum(), method, q0, [0.0, 3.0], h=2.0, n_steps=3)
    assert not tr.success
    assert "Newton did not converge at step 0 (t = 0)" in tr.message
    assert "Try: halve h, or increase NewtonOptions(max_iter=...)." in tr.message
    assert tr.q.shape == (1, 2)


def test_evolve_keeps_the_backend():
    """``Method.evolve`` copies a method with new fields and the same ``backend``: the
    adjoint of a discretization-map method, a composition's members with its Newton options
    and the tight copy of ``step_finite_differences`` keep a user's ``backend="numpy"``
    (``attrs.evolve`` alone would reset it to "auto")."""
    from chetaev.discrete_lagrangian.discretization_maps import (
        Composition,
        DiscretizationMapMethod,
    )

    m = VPRK(lobatto_iiia_iiib(3), backend="numpy")
    tight = m.evolve(newton=NewtonOptions(tol=1e-16))
    assert type(tight) is VPRK and tight.backend == "numpy"
    assert tight.newton.tol == 1e-16 and m.newton != tight.newton
    assert VPRK(lobatto_iiia_iiib(3)).evolve(newton=NewtonOptions()).backend == "auto"
    dm = DiscretizationMapMethod(theta=0.0, backend="numpy")
    assert dm.adjoint().backend == "numpy" and dm.adjoint().theta == 1.0
    comp = Composition([dm, dm.adjoint()], (0.5, 0.5), newton=NewtonOptions(tol=1e-13))
    assert all(sub.backend == "numpy" and sub.newton.tol == 1e-13 for sub, _ in comp._factors())
