"""External forces and controls in NonholonomicPRK (issue 20): the forced nonholonomic PRK.

The forced Lagrange–d'Alembert equations with the multiplier,

    q' = v,   M v' = -grad V(q) + F(q, v, u) + D2Phi(q, v)^T lambda,   Phi(q, v) = 0,

with lambda eliminated from the differentiated constraint, are integrated here with scipy's
DOP853 (rtol = atol = 1e-13), restarted on every step interval with that step's control
(``driver/_reference.py`` refuses forced systems; the reference is written from the
continuous equations in this file). The model is the chaotic system of paper §7.3 (m = 2,
n = 5; nonlinear potential, constraint Phi = v_1 + sum_{i >= m+2} q_i v_i with a
q-dependent A(q)) with the velocity-dependent dissipative force F = -c (1 + |q|^2) v + u b
and a piecewise-constant control u_k = 0.5 sin(3 t_k).

Checked at the method's order 2s - 2 (Lobatto IIIA–IIIB(s), s = 2, 3), fitted on the errors
above FLOOR (band ±0.25 as in the discrete-lagrangian ``test_forces.py``), for every
``jacobian_reuse`` of the default path, for the generic path (implicit ``v_k^i``) and for the
Hamiltonian form (the engine's unknowns ``Q^i, P^i``, eq. (15), the force in (15c)): the
state error (max over the nodes), the energy error against the reference's energy, and the
gap between the energy change E_k - E_0 and the discrete work (``State.info["work"]``).
Measured (T = 2, N = 8, 16, 32, 64; slopes of state / energy / work gap):

=======================  =====================  =====================
variant                  s = 2                  s = 3
=======================  =====================  =====================
every variant, control   2.02 / 2.00 / 1.99     4.07 / 3.96 / 4.01
step, structured, U = 0  2.02 / 2.00 / 1.99     4.02 / 3.99 / 4.01
=======================  =====================  =====================

(the six variants agree to the digits shown); worst |slope - order| 0.074: margin 3.4 to
the band; the smallest fitted error is 7.9e-9, 790 times FLOOR. Without control the
reference energy decays by 49 % over the run.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    MechanicalSystem,
    integrate,
)
from chetaev.discrete_lagrangian.testing import (
    controlled_reference,
    fit_order,
    newton_residual_bound,
    rounding_bound,
    sine_controls,
)
from chetaev.nh_integrators import NonholonomicPRK
from chetaev.nh_integrators.testing import chaotic_system

FLOOR = 1e-11
T = 2.0
NS = (8, 16, 32, 64)
C = 0.3
BASE = chaotic_system(2)
N_DIM = BASE.system.n
B = np.array([0.0, 1.0, 0.5, 0.0, 0.0])
Q0 = np.array([0.5, 0.6, 0.4, 1.0, 1.0])
V0 = np.array([-0.3, 0.8, 0.3, 0.3, 0.0])  # Phi = v_1 + q_4 v_4 + q_5 v_5 = 0
VARIANTS = {
    "step": {"jacobian_reuse": "step"},
    "structured": {"jacobian_reuse": "structured"},
    "iteration": {"jacobian_reuse": "iteration"},
    "steps": {"jacobian_reuse": "steps"},
    "implicit": {"implicit_velocity": True},  # the generic path (prk_residual)
    "hamiltonian": {"form": "hamiltonian"},  # the engine's Hamiltonian unknowns (eq. (15))
}


def force(q, v, u):
    """Nonlinear velocity-dependent dissipation and the input direction b."""
    return -C * (1.0 + np.sum(q * q, axis=-1, keepdims=True)) * v + u[..., :1] * B


def force_derivatives(q, v, u):
    k = 1.0 + np.sum(q * q, axis=-1)
    Fq = -2.0 * C * v[..., :, None] * q[..., None, :]
    Fv = -C * k[..., None, None] * np.eye(N_DIM)
    Fu = np.broadcast_to(B[:, None], (*np.shape(k), N_DIM, 1))
    return Fq, Fv, Fu


def forced_chaotic(f=force, df=force_derivatives, n_controls=1) -> ConstrainedSystem:
    base = BASE.system
    return ConstrainedSystem(
        MechanicalSystem(np.eye(N_DIM), base.V, base.gradV, base.hessV, force=f,
                         force_derivatives=df, n_controls=n_controls),
        BASE.constraint,
    )


def rhs(t, y, u):
    """The forced Lagrange–d'Alembert equations (M = I) with lambda from d/dt Phi = 0:
    Phi_q v + Phi_v (f + Phi_v^T lambda) = 0, f = -grad V + F."""
    q, v = y[:N_DIM], y[N_DIM:]
    f = -BASE.system.gradV(q) + force(q, v, np.atleast_1d(u))
    Bv = BASE.constraint.dphi_dv(q, v)
    Bq = BASE.constraint.dphi_dq(q, v)
    lam = -np.linalg.solve(Bv @ Bv.T, Bq @ v + Bv @ f)
    return np.concatenate([v, f + Bv.T @ lam])


def _controls(N, amplitude):
    return sine_controls(N, T, amplitude)


@functools.cache
def reference_nodes(N: int, amplitude: float) -> np.ndarray:
    """DOP853 restarted on every step interval [t_k, t_{k+1}] with the control U[k]."""
    return controlled_reference(rhs, np.concatenate([Q0, V0]), *_controls(N, amplitude),
                                scalar=True)


def _run(method, system, N, U):
    """``integrate`` and the step-by-step discrete work of the same steps."""
    traj = integrate(system, method, Q0, V0, h=T / N, n_steps=N, controls=U)
    assert traj.success, traj.message
    st = method.initial_state(system, Q0, V0, u=U[0])
    work = [0.0]
    for k in range(N):
        st = method.step(system, st, T / N, u=U[k])
        work.append(work[-1] + float(st.info["work"]))
    np.testing.assert_array_equal(st.q, traj.q[-1])
    return traj, np.array(work)


@pytest.mark.parametrize(
    ("variant", "amplitude"),
    [(v, 0.5) for v in VARIANTS] + [("step", 0.0), ("structured", 0.0)],
)
@pytest.mark.parametrize("s", [2, 3])
def test_forced_orders_energy_and_work(s, variant, amplitude):
    """Orders 2s - 2 of the state, the energy and the work gap; the constraint at every
    node to the Newton tolerance; the energy decays with dissipation only."""
    method = NonholonomicPRK(s, **VARIANTS[variant])
    system = forced_chaotic()
    hs, err_x, err_E, err_W = [], [], [], []
    for N in NS:
        _tg, U = _controls(N, amplitude)
        traj, work = _run(method, system, N, U)
        Y = reference_nodes(N, amplitude)
        E = system.energy(traj.q, traj.v)
        E_ref = system.energy(Y[:, :N_DIM], Y[:, N_DIM:])
        hs.append(T / N)
        err_x.append(np.max(np.abs(np.concatenate([traj.q, traj.v], -1) - Y)))
        err_E.append(np.max(np.abs(E - E_ref)))
        err_W.append(np.max(np.abs(E - E[0] - work)))
        # the constraint holds at every node to the solver's stopping threshold of the step
        # (eq. (14e) at the last stage = the node), which scales with the step's input
        # (node k), plus the rounding of one evaluation (as in test_structure.py)
        res = np.abs(system.residual(traj.q, traj.v))[..., 0]
        scale = 1.0 + np.maximum(np.abs(traj.p).max(axis=-1), np.abs(traj.v).max(axis=-1))
        thr = max(method.newton.tol, 64 * np.finfo(float).eps) * scale[:-1]
        assert res[0] <= rounding_bound(scale[0], n_terms=N_DIM)
        assert np.all(res[1:] <= thr + rounding_bound(1.0, n_terms=N_DIM) * scale[:-1]), res
        if amplitude == 0.0:  # dissipation only: the discrete energy decays at every step
            assert np.all(np.diff(E) < 0), np.diff(E).max()
    # the force matters: without control the energy decays monotonically, by more than 40 %
    # of E_0 over the run (measured 49 %)
    if amplitude == 0.0:
        assert np.all(np.diff(E_ref) < 0) and E_ref[0] - E_ref[-1] > 0.4 * E_ref[0]
    for what, errs in (("state", err_x), ("energy", err_E), ("work", err_W)):
        slope = fit_order(hs, errs, floor=FLOOR)
        assert abs(slope - (2 * s - 2)) <= 0.25, (variant, s, what, slope, errs)


@pytest.mark.parametrize("kw", list(VARIANTS.values()), ids=list(VARIANTS))
def test_zero_force_is_the_unforced_method_bitwise(kw):
    """F = 0 adds exact zeros to W, to the Newton matrix and to the multiplier: the same
    numbers as no force (single trajectory and a batch)."""
    zero = forced_chaotic(lambda q, v, u: np.zeros(np.broadcast_shapes(q.shape, v.shape)),
                          None, 0)
    q0 = np.stack([Q0, Q0 + np.array([0.0, 0.1, -0.1, 0.0, 0.0])])
    v0 = np.stack([V0, V0])
    for s in (2, 3):
        method = NonholonomicPRK(s, **kw)
        for qa, va in ((Q0, V0), (q0, v0)):
            a = integrate(BASE, method, qa, va, h=0.1, n_steps=10)
            b = integrate(zero, method, qa, va, h=0.1, n_steps=10)
            np.testing.assert_array_equal(a.q, b.q)
            np.testing.assert_array_equal(a.v, b.v)
            np.testing.assert_array_equal(a.lam, b.lam)


def test_batched_controls_equal_member_runs():
    """U of shape (n_steps, batch, 1): member i runs with U[:, i] (default path, the
    structured matrix for the batch, the analytic one for the members)."""
    method = NonholonomicPRK(3)
    system = forced_chaotic()
    N = 10
    U = np.stack([0.5 * np.sin(np.arange(N)), -0.3 * np.ones(N)], axis=1)[..., None]
    q0 = np.stack([Q0, Q0])
    v0 = np.stack([V0, V0])
    tb = integrate(system, method, q0, v0, h=T / N, n_steps=N, controls=U)
    assert tb.success, tb.message
    for i in range(2):
        ti = integrate(system, method, Q0, V0, h=T / N, n_steps=N, controls=U[:, i])
        # two solves of the same equations with different Newton matrices, each to the
        # tolerance: their difference grows at most like n_steps times one solve's bound
        # (newton_residual_bound's docstring)
        bound = N * newton_residual_bound(method.newton.tol, Q0, V0)
        assert np.max(np.abs(tb.q[:, i] - ti.q)) <= bound
        assert np.max(np.abs(tb.v[:, i] - ti.v)) <= bound


@pytest.mark.parametrize("s", [2, 3])
def test_forced_hamiltonian_form_is_the_same_map(s):
    """Eq. (15) with the force in W^i (15c) and eq. (14) with it in (14c) are the same map
    (paper eq. (15), App. E): the two forms' forced trajectories (single and a batch with
    per-member controls) agree to the solver tolerance."""
    N = 10
    U = np.stack([0.5 * np.sin(np.arange(N)), -0.3 * np.ones(N)], axis=1)[..., None]
    q0 = np.stack([Q0, Q0 + np.array([0.0, 0.1, -0.1, 0.0, 0.0])])
    v0 = np.stack([V0, V0])
    system = forced_chaotic()
    lag, ham = NonholonomicPRK(s), NonholonomicPRK(s, form="hamiltonian")
    assert ham.supports_forces
    for qa, va, Ua in ((Q0, V0, U[:, 0]), (q0, v0, U)):
        a = integrate(system, lag, qa, va, h=T / N, n_steps=N, controls=Ua)
        b = integrate(system, ham, qa, va, h=T / N, n_steps=N, controls=Ua)
        assert a.success and b.success
        # two solves of the same equations with other unknowns, each to the tolerance: their
        # difference grows at most like n_steps times one solve's bound
        bound = N * newton_residual_bound(lag.newton.tol, Q0, V0)
        assert np.max(np.abs(a.q - b.q)) <= bound
        assert np.max(np.abs(a.v - b.v)) <= bound
