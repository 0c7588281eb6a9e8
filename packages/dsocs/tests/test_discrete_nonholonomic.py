"""Remark 3.4: a DSOCS built from a discrete nonholonomic / holonomic system (paper Rem. 3.4)."""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian import integrate
from chetaev.dsocs import DSOCS, DSOCSIntegrator, TwoPointLagrangian
from scipy.optimize import fsolve

H = 0.05


def U(q):
    return 0.5 * (q[..., 0] ** 2 + 2 * q[..., 1] ** 2 + q[..., 2] ** 2) + 0.1 * q[..., 0] ** 4


def dU(q):
    return np.stack([q[..., 0] + 0.4 * q[..., 0] ** 3, 2 * q[..., 1], q[..., 2]], -1)


def A(q):
    """𝒟 = ker(dz − y dx)."""
    q = np.asarray(q, float)
    return np.stack([-q[..., 1], np.zeros(q.shape[:-1]), np.ones(q.shape[:-1])], -1)[..., None, :]


def gd(q0, q1):
    """Midpoint discrete constraint 𝒟_d: (z1 − z0) − ½(y0 + y1)(x1 − x0) = 0."""
    return ((q1[..., 2] - q0[..., 2])
            - 0.5 * (q0[..., 1] + q1[..., 1]) * (q1[..., 0] - q0[..., 0]))[..., None]


def dla_step_reference(q0, q1):
    """Independent discrete Lagrange–d'Alembert step (Cortés–Martínez), solved by fsolve.

    D2L_d(q0, q1) + D1L_d(q1, q2) = A(q1)ᵀλ,  g_d(q1, q2) = 0, with
    L_d = ½|q1 − q0|²/h² − U(q0): D1L_d = −(q1 − q0)/h² − ∇U(q0), D2L_d = (q1 − q0)/h².
    """

    def F(x):
        q2, lam = x[:3], x[3]
        force = (q1 - q0) / H**2 - (q2 - q1) / H**2 - dU(q1)
        return np.concatenate([force - A(q1)[0] * lam, gd(q1, q2)])

    def Jac(x):
        q2 = x[:3]
        J = np.zeros((4, 4))
        J[:3, :3] = -np.eye(3) / H**2
        J[:3, 3] = -A(q1)[0, 0]
        J[3, :3] = [-0.5 * (q1[1] + q2[1]), -0.5 * (q2[0] - q1[0]), 1.0]
        return J

    x = fsolve(F, np.concatenate([2 * q1 - q0, [0.0]]), fprime=Jac, xtol=1e-13)
    # measured (60 run(s), threads 1 & unset): worst 8.31e-14 vs 1e-08, margin 1.2e+05 (loose)
    assert np.max(np.abs(F(x))) < 1e-8
    return x[:3]


def _dsocs():
    Ld = TwoPointLagrangian.mechanical(np.eye(3), dU, H, potential=U)
    return DSOCS.from_discrete_nonholonomic(Ld, gd, A, h=H)


def _consistent_start():
    q0 = np.array([0.3, -0.2, 0.1])
    x1, y1 = 0.33, -0.17
    z1 = q0[2] + 0.5 * (q0[1] + y1) * (x1 - q0[0])
    return q0, np.array([x1, y1, z1])


def test_dsocs_reproduces_the_discrete_nonholonomic_trajectory():
    ds = _dsocs()
    q0, q1 = _consistent_start()
    ref = [q0, q1]
    for _ in range(60):
        ref.append(dla_step_reference(ref[-2], ref[-1]))
    ref = np.array(ref)
    traj = ds.trajectory(q0, q1, 61)
    # measured (1 run(s), threads 1 & unset): worst |diff| 1.9e-15 vs allowed 1e-10,
    # margin 5.15e+04 (loose)
    np.testing.assert_allclose(traj, ref, rtol=0, atol=1e-10)
    # both D_K rows and β = 0 hold at every node (β in the projector form, n components)
    res = ds.node_residuals(traj)
    # measured (1 run(s), threads 1 & unset): worst 1.97e-14 vs 1e-10, margin 5.07e+03 (loose)
    assert np.max(np.abs(res)) <= 1e-10


def test_runs_through_integrate():
    ds = _dsocs()
    q0, q1 = _consistent_start()
    sol = integrate(ds, DSOCSIntegrator(start=lambda q, v, h: q1), q0, (q1 - q0) / H, H,
                    n_steps=40)
    assert sol.success
    # measured (1 run(s), threads 1 & unset): worst |diff| 0 vs allowed 3e-08, margin ∞
    np.testing.assert_allclose(sol.q, ds.trajectory(q0, q1, 40), atol=1e-13)


def test_theorem_5_3_on_the_constraint_manifold():
    """C_d ⊂ 𝒟_d is not open: F*Ω = Ω + dξ holds on T𝒟_d (tangent basis of 𝒟_d)."""
    ds = _dsocs()
    q0, q1 = _consistent_start()
    chk = ds.two_form_identity(q0, q1)
    assert chk.defect.shape == (5, 5)
    # measured (1 run(s), threads 1 & unset): worst 8.17e-14 vs 8e-08, margin 9.79e+05 (loose)
    assert np.linalg.norm(chk.defect) <= 1e-10 * np.linalg.norm(chk.omega)
    # measured (1 run(s), threads 1 & unset): worst 23.4 vs 0.8, margin 29.3
    assert np.linalg.norm(chk.dxi) > 1e-3 * np.linalg.norm(chk.omega)  # not symplectic
    # finite differences of the flow along T𝒟_d agree with the implicit-function DF there
    T = ds.tangent_basis(q0, q1)
    z = np.concatenate([q0, q1])
    eps = 1e-6

    def F(x):
        return np.concatenate([x[3:], ds.step(x[:3], x[3:])[0]])

    DFT = np.stack([(F(z + eps * t) - F(z - eps * t)) / (2 * eps) for t in T.T], -1)
    # measured (1 run(s), threads 1 & unset): worst |diff| 5e-11 vs allowed 1.9e-07,
    # margin 3.75e+03 (loose)
    np.testing.assert_allclose(DFT, ds.flow_jacobian(q0, q1) @ T, atol=1e-7)


def test_discrete_holonomic_pendulum_preserves_leaves_and_is_symplectic():
    """Remarks 5.2 and 5.4: 𝒟_d = ∪ N_r×N_r (circles |q| = r), D_V = T N_r.

    |q_k| stays r, and on T C_{d,r} = T(N_r×N_r) the flow is symplectic (ξ vanishes there).
    """
    h = 0.05

    def dUg(q):
        return np.stack([np.zeros(q.shape[:-1]), np.ones(q.shape[:-1])], -1)  # gravity

    Ld = TwoPointLagrangian.mechanical(np.eye(2), dUg, h)
    ds = DSOCS.from_discrete_nonholonomic(
        Ld, lambda q0, q1: (np.sum(q1 * q1, -1) - np.sum(q0 * q0, -1))[..., None],
        lambda q: np.asarray(q, float)[..., None, :], h=h)
    r = 1.3
    q0 = r * np.array([np.sin(0.7), -np.cos(0.7)])
    q1 = r * np.array([np.sin(0.72), -np.cos(0.72)])
    traj = ds.trajectory(q0, q1, 400)
    # measured (1 run(s), threads 1 & unset): worst 1.55e-15 vs 1e-12, margin 643
    assert np.max(np.abs(np.linalg.norm(traj, axis=1) - r)) <= 1e-12
    rot = np.array([[0.0, -1.0], [1.0, 0.0]])
    T = np.zeros((4, 2))
    T[:2, 0] = rot @ q0
    T[2:, 1] = rot @ q1
    chk = ds.two_form_identity(q0, q1, tangent=T)
    # measured (1 run(s), threads 1 & unset): worst 8.15e-14 vs 9.56e-08, margin 1.17e+06 (loose)
    assert np.linalg.norm(chk.symplectic_defect) <= 1e-10 * np.linalg.norm(chk.omega)
    # measured (1 run(s), threads 1 & unset): worst 4.8e-14 vs 9.56e-08, margin 1.99e+06 (loose)
    assert np.linalg.norm(chk.dxi) <= 1e-10 * np.linalg.norm(chk.omega)


def test_inconsistent_first_pair_is_reported():
    """(q0, q1) off 𝒟_d: the redundant rows g_d(q0, q1) cannot be met — the step says so."""
    ds = _dsocs()
    q0, _ = _consistent_start()
    sol = integrate(ds, DSOCSIntegrator(start="paper"), q0, np.array([1.0, 0.0, 0.0]), H,
                    n_steps=3)
    assert not sol.success
    assert "g_d(q0, q1) = 0" in sol.message
