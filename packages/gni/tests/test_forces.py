"""The forced GNI and its compositions (issue 20): the forced discrete Lagrange–d'Alembert GNI.

The nonlinear nonholonomic particle of ``chetaev.gni.testing`` (linear and affine constraint)
with the nonlinear dissipative force F = −c(1 + |q|²)v + u b, integrated with a
piecewise-constant control (step k uses U[k]) and compared with an independent reference:
DOP853 (rtol = atol = 1e-13) on the forced Lagrange–d'Alembert equations
M v̇ = −∇V + F + μᵀλ, λ eliminated in closed form from d/dt(μ v + a) = 0, restarted on each
step interval with that step's control. Checked at the method's order (slopes fitted above
FLOOR, band ±0.25 as in ``test_orders``): the node state (q, v), the energy against the
reference's energy and, for the linear constraint (whose force does no work), the gap between
the energy change and the discrete work Σ ``info["work"]``. Measured (T = 2,
N = 16, 32, 64, 128; slopes of state / energy / work gap, linear constraint):

=====================  =====================  =====================
case                   dissipation only       with the control
=====================  =====================  =====================
euler_a                0.98 / 1.01 / 0.93     0.98 / 0.95 / 0.94
euler_b                1.02 / 1.00 / 1.07     1.02 / 1.04 / 1.04
rattle                 2.00 / 2.00 / 2.00     2.00 / 2.00 / 2.00
midpoint               2.00 / 2.00 / 2.00     2.02 / 2.02 / 2.00
rattle, two_step       2.00 / 2.00 / 2.00     2.00 / 2.00 / 2.00
Composition(B, A)      2.00 / 2.00 / 2.00     1.99 / 2.00 / 1.98
=====================  =====================  =====================

(affine constraint: state and energy slopes within 0.07 of the order as well). The smallest
fitted error is 1.5e-5, far above FLOOR.
"""

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import ConstrainedSystem, integrate
from chetaev.discrete_lagrangian.testing import (
    controlled_reference,
    fit_order,
    run_with_work,
    sine_controls,
)
from chetaev.gni import GNI, Composition, ReducedGNI
from chetaev.gni.testing import nonholonomic_particle

FLOOR = 1e-11
T = 2.0
NS = (16, 32, 64, 128)
C = 0.3
B = np.array([1.0, 0.0, 0.5])


def force(q, v, u):
    """Nonlinear velocity-dependent dissipation and the input direction b."""
    return -C * (1.0 + np.sum(q * q, axis=-1, keepdims=True)) * v + u[..., :1] * B


def force_derivatives(q, v, u):
    k = 1.0 + np.sum(q * q, axis=-1)
    Fq = -2.0 * C * v[..., :, None] * q[..., None, :]
    Fv = -C * k[..., None, None] * np.eye(3)
    Fu = np.broadcast_to(B[:, None], (*np.shape(k), 3, 1))
    return Fq, Fv, Fu


def forced(problem, fn=force, derivatives=force_derivatives, n_controls=1):
    """The problem's constrained system with the external force ``fn``."""
    inner = attrs.evolve(problem.system.system, force=fn, force_derivatives=derivatives,
                         n_controls=n_controls)
    return ConstrainedSystem(inner, problem.system.constraint)


def _rhs(problem):
    """The forced continuous equations, written here (independently of chetaev)."""
    M, H = problem.mass, problem.hess
    Minv = np.linalg.inv(M)

    def rhs(t, y, u):
        q, v = y[:3], y[3:]
        mu = np.array([[-q[1], 0.0, 1.0]])
        f = -H @ q + force(q, v, np.atleast_1d(u))
        # d/dt(μ v + a) = 0: C λ = −(dμ/dt) v − (da/dt) − μ M⁻¹ f, dμ/dt v = −ẏ ẋ
        r = np.array([v[1] * v[0]])
        if problem.affine:
            r = r + 0.7 * 0.3 * v[0]
        lam = np.linalg.solve(mu @ Minv @ mu.T, r - mu @ Minv @ f)
        return np.concatenate([v, Minv @ (f + mu.T @ lam)])

    return rhs


def reference_nodes(problem, tg, U):
    """DOP853 restarted on every step interval [t_k, t_{k+1}] with the control U[k]."""
    return controlled_reference(_rhs(problem), np.concatenate([problem.q0, problem.v0]), tg, U,
                                scalar=True)


METHODS = {
    "euler_a": (lambda: GNI("euler_a"), 1),
    "euler_b": (lambda: GNI("euler_b"), 1),
    "rattle": (lambda: GNI("rattle"), 2),
    "midpoint": (lambda: GNI("midpoint"), 2),
    "rattle-two-step": (lambda: GNI("rattle", form="two_step"), 2),
    "composition-BA": (lambda: Composition((GNI("euler_b"), GNI("euler_a"))), 2),
}


def _controls(N, amplitude):
    return sine_controls(N, T, amplitude)


@pytest.mark.parametrize("affine", [False, True], ids=["linear", "affine"])
@pytest.mark.parametrize("amplitude", [0.0, 0.5], ids=["dissipation", "control"])
@pytest.mark.parametrize("case", list(METHODS))
def test_forced_orders_energy_and_work(case, amplitude, affine):
    make, order = METHODS[case]
    method = make()
    problem = nonholonomic_particle(affine)
    system = forced(problem)
    assert method.supports_forces and method.order == order
    hs, err_x, err_E, err_W = [], [], [], []
    for N in NS:
        tg, U = _controls(N, amplitude)
        traj = integrate(system, method, problem.q0, problem.v0, h=T / N, n_steps=N,
                         controls=U)
        assert traj.success, traj.message
        states, work = run_with_work(method, system, problem.q0, problem.v0, U, T / N)
        np.testing.assert_array_equal(states[-1].q, traj.q[-1])
        Y = reference_nodes(problem, tg, U)
        E = system.energy(traj.q, traj.v)
        E_ref = system.energy(Y[:, :3], Y[:, 3:])
        hs.append(T / N)
        err_x.append(np.max(np.abs(np.concatenate([traj.q, traj.v], -1) - Y)))
        err_E.append(np.max(np.abs(E - E_ref)))
        err_W.append(np.max(np.abs(E - E[0] - work)))
        if amplitude == 0.0 and not affine:
            # the dissipative force: the discrete energy decays at every step, as the
            # continuous one does (dE/dt = F·v < 0; the linear constraint does no work)
            assert np.all(np.diff(E) < 0) and np.all(work[1:] < work[:-1])
    # the force matters: the reference's energy changes by more than 0.1 over the run
    assert abs(E_ref[-1] - E_ref[0]) > 0.1
    checks = [("state", err_x), ("energy", err_E)]
    if not affine:  # the affine constraint's force does work: E − E0 ≠ the force's work
        checks.append(("work", err_W))
    for what, errs in checks:
        # deterministic: measured worst |slope − order| 0.070 (euler_a, linear, dissipation,
        # work gap); band 0.25 as in test_orders (margin 3.6)
        slope = fit_order(hs, errs, floor=FLOOR)
        assert abs(slope - order) <= 0.25, (case, what, slope, errs)


@pytest.mark.parametrize("case", list(METHODS))
def test_zero_force_is_the_unforced_method_bitwise(case):
    """F ≡ 0 adds exact zeros to the Legendre transforms, the Newton matrix and λ₀."""
    method = METHODS[case][0]()
    problem = nonholonomic_particle(False)
    zero = forced(problem, lambda q, v, u: np.zeros(np.broadcast_shapes(q.shape, v.shape)),
                  None, 0)
    a = integrate(problem.system, method, problem.q0, problem.v0, h=0.1, n_steps=20)
    b = integrate(zero, method, problem.q0, problem.v0, h=0.1, n_steps=20)
    for x, y in ((a.q, b.q), (a.v, b.v), (a.lam, b.lam)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("case", list(METHODS))
@pytest.mark.parametrize("affine", [False, True], ids=["linear", "affine"])
def test_forced_nodes_keep_the_constraint(case, affine):
    """The projection is unchanged: μ(q_k) v_k + a(q_k) = 0 at every node, to rounding (the
    reflection is closed-form; measured worst 1.1e-15 over the cases, bound 1e-13 as in
    test_structure's constraint check, margin 90)."""
    method = METHODS[case][0]()
    problem = nonholonomic_particle(affine)
    system = forced(problem)
    _, U = _controls(40, 0.5)
    traj = integrate(system, method, problem.q0, problem.v0, h=T / 40, n_steps=40,
                     controls=U)
    assert np.max(np.abs(system.constraint.residual(traj.q, traj.v))) < 1e-13


def test_initial_multiplier_is_the_forced_one():
    """λ₀ at the control u: the multiplier of the forced continuous equations (the
    reference's closed form, independent of chetaev; two formulas of the same few-term
    sums, measured 0.0 apart (bitwise), bound 1e-13)."""
    problem = nonholonomic_particle(False)
    system = forced(problem)
    u = np.array([0.7])
    s0 = GNI("rattle").initial_state(system, problem.q0, problem.v0, u=u)
    acc = _rhs(problem)(0.0, np.concatenate([problem.q0, problem.v0]), u[0])[3:]
    # μᵀλ = M v̇ + ∇V − F, μ = (−y, 0, 1): λ is its last component
    lam = (problem.mass @ acc + problem.hess @ problem.q0
           - force(problem.q0, problem.v0, u))[2]
    assert abs(s0.lam[0] - lam) < 1e-13


def test_two_step_form_with_varying_control_gives_the_momentum_nodes():
    """The two-step form recomputes its look-ahead point when the control changes: its
    nodes are those of the momentum form (the same equations, each solved by Newton to
    GNI's default tolerance 1e-12: 40 steps of differences up to 2 × 1e-12 each bound the
    gap by 1e-10; measured worst 9.7e-15, margin 1e4)."""
    problem = nonholonomic_particle(False)
    system = forced(problem)
    _, U = _controls(40, 0.5)
    a = integrate(system, GNI("rattle"), problem.q0, problem.v0, h=0.05, n_steps=40,
                  controls=U)
    b = integrate(system, GNI("rattle", form="two_step"), problem.q0, problem.v0, h=0.05,
                  n_steps=40, controls=U)
    assert np.max(np.abs(a.q - b.q)) < 1e-10
    assert np.max(np.abs(a.v - b.v)) < 1e-10


def test_reduced_gni_takes_forces():
    """ReducedGNI takes the force of ``ReducedSystem(force=...)`` (issue 20; its forced
    dynamics and linearization are checked in ``test_reduced_forces``)."""
    assert ReducedGNI().supports_forces is True
