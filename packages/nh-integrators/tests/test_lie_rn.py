"""With G = Rⁿ (τ = id, Ad = I) the Lie-group method is the vector-space NH-PRK of eq. (14):
it reproduces ``NonholonomicPRK`` to round-off (one implementation
of eq. (14) of the high-order paper)."""

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    LinearVelocityConstraint,
    MechanicalSystem,
    NewtonOptions,
    TrivializedMechanicalSystem,
    integrate,
)
from chetaev.liegroups import Rn
from chetaev.nh_integrators import LieNonholonomicPRK, NonholonomicPRK
from chetaev.rktableaux import lobatto_iiia_iiib

MASS = np.diag([1.0, 2.0, 1.5])


def V(q):
    q = np.asarray(q)
    return 0.5 * np.sum(q * q, axis=-1) + 0.25 * q[..., 0] ** 4 + 0.3 * q[..., 1] * q[..., 2] ** 2


def gradV(q):
    q = np.asarray(q)
    x, y, z = q[..., 0], q[..., 1], q[..., 2]
    return np.stack([x + x**3, y + 0.3 * z * z, z + 0.6 * y * z], axis=-1)


def hessV(q):
    q = np.asarray(q)
    x, y, z = q[..., 0], q[..., 1], q[..., 2]
    H = np.zeros((*q.shape[:-1], 3, 3))
    H[..., 0, 0] = 1 + 3 * x * x
    H[..., 1, 1] = 1.0
    H[..., 2, 2] = 1 + 0.6 * y
    H[..., 1, 2] = H[..., 2, 1] = 0.6 * z
    return H


def A(q):  # nonholonomic particle constraint ż = y ẋ (linear, q-dependent)
    q = np.asarray(q)
    out = np.zeros((*q.shape[:-1], 1, 3))
    out[..., 0, 0] = -q[..., 1]
    out[..., 0, 2] = 1.0
    return out


def dA(q):
    out = np.zeros((*np.shape(q)[:-1], 1, 3, 3))
    out[..., 0, 0, 1] = -1.0
    return out


@pytest.mark.parametrize("s", [2, 3, 4])
def test_rn_lie_method_reproduces_vector_space_nhprk(s):
    con = LinearVelocityConstraint(A, dA=dA)
    vec = ConstrainedSystem(MechanicalSystem(MASS, V, gradV, hessV), con)
    lie = ConstrainedSystem(TrivializedMechanicalSystem(Rn(3), MASS, V, gradV, hessV), con)
    q0 = np.array([0.4, -0.3, 0.2])
    v0 = np.array([0.5, 0.1, -0.3 * 0.5])
    pair = lobatto_iiia_iiib(s)
    # both solved to round-off (NonholonomicPRK's default tol 1e-12 leaves ~1e-12 in λ)
    tight = NewtonOptions(tol=1e-16)
    tv = integrate(vec, NonholonomicPRK(pair, newton=tight), q0, v0, h=0.1, n_steps=20)
    tl = integrate(lie, LieNonholonomicPRK(pair), q0, v0, h=0.1, n_steps=20)
    assert tv.success and tl.success
    # two solvers of the same equations (each to round-off / 1e-13 relative): measured worst
    # 8.6e-16 (q, margin 116), 9.1e-15 (v, margin 11), p = M v 2.8e-17 (margin 3.6e3),
    # OPENBLAS_NUM_THREADS unset, s = 2, 3, 4
    assert np.max(np.abs(tl.q - tv.q)) < 1e-13
    assert np.max(np.abs(tl.v - tv.v)) < 1e-13
    # λ is determined through h·bₛ·A(q)ᵀΛ: the Lie solver's tolerance (1e-13 relative) enters
    # it divided by h·bₛ = 0.05..0.017 (measured max 9.6e-13, 8.5e-13, 2.1e-13 for s = 2, 3, 4
    # earlier, 2.7e-13 now): margin >= 3.1
    assert np.max(np.abs(tl.lam - tv.lam)) < 3e-12
    assert np.max(np.abs(tl.p - tl.v @ MASS.T)) < 1e-13


def test_rn_lie_method_is_symmetric():
    """On Rⁿ the inner stages are linear in Ξ, so the step is exactly symmetric with the
    carried multiplier (paper Thm. 5.1,
    Cor. 5.2.1)."""
    con = LinearVelocityConstraint(A, dA=dA)
    lie = ConstrainedSystem(TrivializedMechanicalSystem(Rn(3), MASS, V, gradV, hessV), con)
    method = LieNonholonomicPRK(3, multiplier_rule="carry")
    st0 = method.initial_state(lie, np.array([0.4, -0.3, 0.2]), np.array([0.5, 0.1, -0.15]))
    st1 = method.step(lie, st0, 0.1)
    back = method.step(lie, attrs.evolve(st1, carry={}), -0.1)
    # round-off / solver tolerance: measured 5.6e-17 (q, margin 1.8e3), 3.4e-15 (λ, margin 291)
    assert np.max(np.abs(back.q - st0.q)) < 1e-13
    assert np.max(np.abs(back.lam - st0.lam)) < 1e-12
