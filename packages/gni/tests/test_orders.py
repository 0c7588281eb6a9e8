"""Convergence orders on the nonlinear nonholonomic particle (the docs' theory page, "Reference
numbers").

Reference: scipy DOP853 (rtol = atol = 1e-13) on the continuous Lagrange–d'Alembert
equations, error ‖q_N − q(T)‖ at T = 5, order from np.polyfit on log h, log err.
"""

import numpy as np
import pytest
from chetaev.discrete_lagrangian.testing import fit_order
from chetaev.gni import GNI, Composition

T = 5.0
NS = (50, 100, 200, 400)


def _errors(method, problem, runner, ns=NS):
    (q_ref, v_ref, lam_ref) = problem.reference([T])
    eq, ev, el = [], [], []
    for n in ns:
        s = runner(method, problem, T / n, n)[-1]
        # round-off of n additions of h (n <= 400, t <= 5): n·eps·T = 4.4e-13 at most;
        # measured worst 3.7e-14
        assert abs(s.t - T) < 1e-12
        eq.append(np.linalg.norm(s.q - q_ref[-1]))
        ev.append(np.linalg.norm(s.v - v_ref[-1]))
        el.append(np.linalg.norm(s.lam - lam_ref[-1]))
    h = [T / n for n in ns]
    return h, np.array(eq), np.array(ev), np.array(el)


CASES = [
    ("euler_a", False, 1),
    ("euler_b", False, 1),
    ("rattle", False, 2),
    ("midpoint", False, 2),
    ("euler_a", True, 1),
    ("euler_b", True, 1),
    ("rattle", True, 2),  # affine RATTLE (paper Def. 6.1)
    ("midpoint", True, 2),
]


@pytest.mark.parametrize(("variant", "affine", "order"), CASES)
def test_order(variant, affine, order, particle, affine_particle, runner):
    problem = affine_particle if affine else particle
    h, eq, ev, el = _errors(GNI(variant), problem, runner)
    assert GNI(variant).order == order
    for err in (eq, ev, el):
        # method (deterministic): measured worst |slope - order| = 2.7e-2 over the 8 cases and
        # q, v, λ (OPENBLAS_NUM_THREADS=1 and unset); band 0.25 leaves margin 9.2
        assert abs(fit_order(h, err) - order) < 0.25, (variant, affine, err)


def test_spec_regression_numbers(particle, affine_particle, runner):
    # the docs' theory page table: RATTLE 2.125e-3 (N=50), 1.325e-4 (N=200); affine RATTLE 3.248e-3
    # (N=50).
    # The independent numpy check gives four digits, so agreement is required to the rounding
    # (rtol 1e-3). Measured relative deviations 7.5e-5 and 1.1e-4 (margin 9.1 and 13).
    _, eq, _, _ = _errors(GNI("rattle"), particle, runner, ns=(50, 200))
    np.testing.assert_allclose(eq, [2.125e-3, 1.325e-4], rtol=1e-3)
    _, eq, _, _ = _errors(GNI("rattle"), affine_particle, runner, ns=(50,))
    np.testing.assert_allclose(eq, [3.248e-3], rtol=1e-3)


def test_two_step_form_orders(particle, runner):
    # The two-step local form (9) started from the node data: orders 1 and 2 as well.
    for variant, order in (("euler_a", 1), ("rattle", 2)):
        h, eq, _, _ = _errors(GNI(variant, form="two_step"), particle, runner, ns=(50, 100, 200))
        # method: measured |slope - order| <= 4.8e-3; band 0.25, margin 52
        assert abs(fit_order(h, eq) - order) < 0.25


@pytest.mark.parametrize("pair", [("euler_b", "euler_a"), ("euler_a", "euler_b")])
def test_composition_is_second_order(pair, particle, runner):
    """Remark 5.5: F_A^{h/2}∘F_B^{h/2} (and B∘A) is of order 2 in q and v.

    An earlier independent check found order 1 composing the (q, p̃, λ̃) maps; in the node-state
    representation (q, v, λ) the Euler A/B maps are exactly adjoint on every state, so the
    composition is symmetric and the order is 2 (the paper's claim holds).
    """
    comp = Composition(tuple(GNI(v) for v in pair))
    assert comp.order == 2
    h, eq, ev, _ = _errors(comp, particle, runner)
    # method: measured |slope - 2| <= 7.7e-4 (both orders of composition); band 0.25, margin 324
    assert abs(fit_order(h, eq) - 2) < 0.25
    assert abs(fit_order(h, ev) - 2) < 0.25


@pytest.mark.xfail(
    strict=True,
    reason="the node multiplier of the composed A/B method is not a consistent approximation "
    "of λ(t): it converges to a different value (about 1.58 λ on the particle), because "
    "each half step books a different share of the constraint impulse at its end node",
)
def test_composition_multiplier_converges(particle, runner):
    h, _, _, el = _errors(Composition((GNI("euler_b"), GNI("euler_a"))), particle, runner)
    # measured slope 4.9e-3 (the error does not decay): the xfail is far from flipping
    assert fit_order(h, el) > 0.75


def test_general_discrete_lagrangians_first_order(particle, runner):
    """Def. 4.1 with other L_d: the α = ¼ convex family member (paper §5, eq. (16)) and the
    discrete-lagrangian package's quadrature-point L_d with α = ¼ are of order 1."""
    from chetaev.discrete_lagrangian import DiscreteLagrangian
    from chetaev.gni import AlphaDiscreteLagrangian

    for dl in (AlphaDiscreteLagrangian(0.25), DiscreteLagrangian("alpha", alpha=0.25)):
        h, eq, _, _ = _errors(GNI(dl), particle, runner, ns=(50, 100, 200))
        # method: measured |slope - 1| <= 3.4e-3; band 0.25, margin 74
        assert abs(fit_order(h, eq) - 1) < 0.25


def test_harmonic_particle_reference_and_rattle_order(runner):
    """The §5.1 particle of the high-order paper: y(t) = y0 cos t + ẏ0 sin t exactly, and GNI
    RATTLE is of order 2 against the DOP853 reference."""
    from chetaev.gni.testing import harmonic_particle

    problem = harmonic_particle()
    t = np.array([0.7, 2.0])
    q, _, _ = problem.reference(t)
    # DOP853 at rtol 1e-13 vs the exact solution: measured 3.1e-15; bound 1e-11 (margin 3e3)
    np.testing.assert_allclose(q[:, 1], 0.5 * np.cos(t) + np.sin(t), atol=1e-11, rtol=0)
    hs, errs = [0.1, 0.05, 0.025], []
    for h in hs:
        s = runner(GNI("rattle"), problem, h, round(2.0 / h))[-1]
        errs.append(np.linalg.norm(s.q - q[-1]))
    # method: measured |slope - 2| = 2.0e-3; band 0.25, margin 127
    assert abs(fit_order(hs, errs) - 2) < 0.25


def _ptilde_start(problem, h, alpha):
    """GNI paper §5 initialization: λ̃_0 = −λ_cont, p̃_0 = M v0 − (1−2α)(h/2) N V_q(q0)."""
    inner, con = problem.system.system, problem.system.constraint
    M = inner.M(problem.q0)
    mu = con.matrix(problem.q0)
    Minv = np.linalg.inv(M)
    N = mu.T @ np.linalg.solve(mu @ Minv @ mu.T, mu @ Minv)
    p0 = M @ problem.v0 - (1 - 2 * alpha) * 0.5 * h * N @ inner.gradV(problem.q0)
    return problem.q0, p0, -problem.system.multiplier(problem.q0, problem.v0)


def _ptilde_map(problem, alpha):
    from chetaev.gni import euler_alpha_ptilde_step

    inner, con = problem.system.system, problem.system.constraint
    M = inner.M(problem.q0)
    a = con.affine if con.is_affine else None

    def step(z, h):
        return euler_alpha_ptilde_step(*z, h, alpha, M, inner.gradV, con.matrix, a)

    return step


@pytest.mark.parametrize("variant", ["euler_a", "euler_b", "rattle"])
def test_paper_closed_form_maps_match_gni(variant, affine_particle, runner):
    """(13)/(14)/(15) in closed form reproduce the GNI class from the same node data."""
    alpha = {"euler_a": 0.0, "euler_b": 1.0, "rattle": 0.5}[variant]
    problem, h = affine_particle, 0.05
    states = runner(GNI(variant), problem, h, 60)
    inner = problem.system.system
    M = inner.M(problem.q0)
    s0 = states[0]
    z = (s0.q, M @ s0.v - (1 - 2 * alpha) * 0.5 * h * inner.gradV(s0.q), -s0.lam)
    step = _ptilde_map(problem, alpha)
    # round-off: two closed forms of the same map, 60 steps; measured worst 8.2e-15 (q),
    # 1.1e-14 (p̃), 9.4e-13 (λ, divided by h) over the three variants, OPENBLAS_NUM_THREADS=1
    # and unset; bounds 1e-13, 1e-12, 1e-10 leave margins 12, 88, 107
    for s in states[1:]:
        z = step(z, h)
        np.testing.assert_allclose(z[0], s.q, atol=1e-13, rtol=0)
        np.testing.assert_allclose(z[1], M @ s.v - (1 - 2 * alpha) * 0.5 * h * inner.gradV(s.q),
                                   atol=1e-12, rtol=0)
        np.testing.assert_allclose(-z[2], s.lam, atol=1e-10, rtol=0)


def test_composition_of_ptilde_maps_is_first_order(particle):
    """Remark 5.5 settled both ways: composing the paper's (q, p̃, λ̃) maps (14) then (13)
    with h/2 is of order 1 (the project's finding); the same composition in the
    node representation (test_composition_is_second_order) is of order 2. The difference is
    the change of variables p̃ = M v − (1 − 2α)(h/2)V_q, which differs between A and B."""
    A, B = _ptilde_map(particle, 0.0), _ptilde_map(particle, 1.0)
    q_ref = particle.reference([T])[0][-1]
    hs, errs = [], []
    for n in (50, 100, 200, 400):
        h = T / n
        z = _ptilde_start(particle, h / 2, 1.0)
        for _ in range(n):
            z = A(B(z, h / 2), h / 2)
        hs.append(h)
        errs.append(np.linalg.norm(z[0] - q_ref))
    # method: measured |slope - 1| = 7.4e-3; band 0.25, margin 34
    assert abs(fit_order(hs, errs) - 1) < 0.25


def _variable_mass_system(particle):
    from chetaev.discrete_lagrangian import ConstrainedSystem, MechanicalSystem

    def M(q):
        q = np.asarray(q)
        out = np.zeros((*q.shape[:-1], 3, 3))
        out[..., 0, 0] = 1 + 0.3 * q[..., 0] ** 2
        out[..., 1, 1] = 2.0
        out[..., 2, 2] = 1.5
        out[..., 0, 2] = out[..., 2, 0] = 0.2 * np.sin(q[..., 1])
        return out

    inner = particle.system.system
    mech = MechanicalSystem(M, inner.V, inner.gradV, inner.hessV, n=3)
    return ConstrainedSystem(mech, particle.system.constraint)


@pytest.mark.parametrize(("variant", "form", "order"), [
    ("euler_b", "momentum", 1), ("rattle", "momentum", 2), ("midpoint", "momentum", 2),
    ("rattle", "two_step", 2),
])
def test_orders_with_configuration_dependent_metric(variant, form, order, particle):
    """Def. 4.1 with a non-constant, non-diagonal metric G(q) = M(q) (P, Q and the Legendre
    transforms all q-dependent); reference: chetaev.discrete_lagrangian.reference_solution
    (DOP853, rtol 1e-13, λ eliminated)."""
    from chetaev.discrete_lagrangian import reference_solution

    sys_ = _variable_mass_system(particle)
    T3 = 3.0
    q_ref = reference_solution(sys_, particle.q0, particle.v0, np.array([0.0, T3])).q[-1]
    hs, errs = [], []
    for n in (30, 60, 120):
        m, h = GNI(variant, form=form), T3 / n
        s = m.initial_state(sys_, particle.q0, particle.v0)
        for _ in range(n):
            s = m.step(sys_, s, h)
        # closed form (round-off) in the momentum form; a Newton equation (tol 1e-12 × scale)
        # in the two-step form. Measured worst 2.2e-16 (momentum, margin 450) and 3.7e-13
        # (two-step, margin 27), OPENBLAS_NUM_THREADS=1 and unset
        tol = 1e-13 if form == "momentum" else 1e-11
        assert np.max(np.abs(sys_.constraint.residual(s.q, s.v))) < tol
        hs.append(h)
        errs.append(np.linalg.norm(s.q - q_ref))
    # method: measured |slope - order| <= 1.4e-2 over the 4 cases; band 0.25, margin 18
    assert abs(fit_order(hs, errs) - order) < 0.25
