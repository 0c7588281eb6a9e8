"""External forces and controls in the Lie-group VPRK (issue 20): the forced VPRKMK.

The forced Euler–Poincaré (Lagrange–d'Alembert) equations on SO(3) with reconstruction,

    Ṙ = R η̂,   𝕀η̇ = (𝕀η) × η − mgl χ × Γ + F(R, η, u),   Γ = Rᵀe₃,

(the heavy top of ``testing.heavy_top``; mgl = 0 is the free rigid body) with the
left-trivialized body torque F = −c (1 + |η|²/2) η + u e₃ (nonlinear velocity-dependent
dissipation and a control torque about the body axis e₃), are integrated with a
piecewise-constant control U (step k uses U[k]) and compared with DOP853 (rtol = atol =
1e-13) on these equations written by hand in this file, restarted on each step interval
with that step's control. Checked at the method's order (fitted on the errors above FLOOR,
band ±0.25 as in ``test_forces``): the state error (max over the nodes of |R − R_ref| and
|η − η_ref|), the energy error against the reference's energy (dE/dt = F·η: the energy decays
at the continuous rate), and the gap between E_k − E_0 and the discrete work
Σ h Σᵢ bᵢ F(Gⁱ, Ωⁱ, u)·Ωⁱ (``State.info["work"]``), once with dissipation only (U = 0) and
once with the control 0.5 sin(3 t_k). Measured (T = 2, N = 8, 16, 32, 64; slopes of state /
energy / work gap; "fd": the force Jacobian in the Newton matrix by the system's central
differences, no ``force_derivatives``):

==============================  =====================  =====================
case (all order 4)              dissipation only       with the control
==============================  =====================  =====================
Gauss 2, Cayley, heavy top      4.01 / 4.02 / 3.98     4.01 / 4.03 / 4.01
Gauss 2, exp, heavy top         4.01 / 4.02 / 4.05     3.99 / 4.02 / 4.00
Lobatto 3, Cayley, heavy top    3.96 / 3.96 / 3.94     3.97 / 3.97 / 3.94
Lobatto 3, exp, free body, fd   3.98 / 3.98 / 3.97     3.97 / 3.97 / 3.98
==============================  =====================  =====================

worst |slope − order| 0.065 (Lobatto 3 Cayley, work gap): margin 3.8 to the band; the
smallest fitted error is 2.0e-10, 20 times FLOOR. The reference energy decays by 1.03
(heavy top) and 0.82 (free body) over the run without control.
"""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    HolonomicConstraint,
    InputError,
    LieVPRK,
    TrivializedMechanicalSystem,
    integrate,
)
from chetaev.discrete_lagrangian.testing import (
    controlled_reference,
    fit_order,
    heavy_top,
    newton_residual_bound,
    sine_controls,
)
from chetaev.liegroups import SO3
from chetaev.rktableaux import gauss, lobatto_iiia_iiib

FLOOR = 1e-11
T = 2.0
NS = (8, 16, 32, 64)
C = 0.3
E3 = np.array([0.0, 0.0, 1.0])
INERTIA = np.array([1.0, 1.5, 2.5])
CHI = np.array([0.1, 0.2, 1.0])
R0 = SO3.exp(np.array([0.3, -0.2, 0.1]))
ETA0 = np.array([0.5, -0.4, 1.0])


def body_torque(g, eta, u):
    """Left-trivialized torque: dissipation −c(1 + |η|²/2)η and the control u e₃."""
    k = 1.0 + 0.5 * np.sum(eta * eta, axis=-1, keepdims=True)
    return -C * k * eta + u[..., :1] * E3


def body_torque_derivatives(g, eta, u):
    k = 1.0 + 0.5 * np.sum(eta * eta, axis=-1)
    Fg = np.zeros((*np.shape(k), 3, 3))
    Fv = -C * (k[..., None, None] * np.eye(3) + eta[..., :, None] * eta[..., None, :])
    Fu = np.broadcast_to(E3[:, None], (*np.shape(k), 3, 1))
    return Fg, Fv, Fu


def forced_top(mgl=1.0, exact=True, force=body_torque):
    ht = heavy_top(tuple(INERTIA), mgl=mgl, chi=tuple(CHI))
    return TrivializedMechanicalSystem(
        SO3, ht.inertia, ht.V, ht.gradV, ht.hessV, force=force,
        force_derivatives=body_torque_derivatives if exact else None, n_controls=1)


def top_rhs(mgl):
    def rhs(t, y, u):
        R, eta = y[:9].reshape(3, 3), y[9:]
        Gam = R.T @ E3
        deta = (np.cross(INERTIA * eta, eta) - mgl * np.cross(CHI, Gam)
                + body_torque(R, eta, np.atleast_1d(u))) / INERTIA
        return np.concatenate([(R @ SO3.hat(eta)).ravel(), deta])

    return rhs


def top_energy(R, eta, mgl):
    Gam = np.einsum("...ji,j->...i", R, E3)
    return 0.5 * np.sum(INERTIA * eta * eta, axis=-1) + mgl * Gam @ CHI


def _controls(N, amplitude=0.5):
    return sine_controls(N, T, amplitude)


CASES = {
    "gauss2-cayley-top": (LieVPRK(gauss(2)), 1.0, True),
    "gauss2-exp-top": (LieVPRK(gauss(2), retraction="exp"), 1.0, True),
    "lobatto3-cayley-top": (LieVPRK(lobatto_iiia_iiib(3)), 1.0, True),
    "lobatto3-exp-free-fd": (LieVPRK(lobatto_iiia_iiib(3), retraction="exp"), 0.0, False),
}


def run_case(case, amplitude):
    method, mgl, exact = CASES[case]
    system = forced_top(mgl, exact)
    hs, err_x, err_E, err_W, E_refs = [], [], [], [], []
    for N in NS:
        tg, U = _controls(N, amplitude)
        traj = integrate(system, method, R0, ETA0, h=T / N, n_steps=N, controls=U)
        assert traj.success, traj.message
        st = method.initial_state(system, R0, ETA0)
        work = [0.0]
        for k in range(N):
            st = method.step(system, st, T / N, u=U[k])
            work.append(work[-1] + float(st.info["work"]))
        np.testing.assert_array_equal(st.q, traj.q[-1])
        Y = controlled_reference(top_rhs(mgl), np.concatenate([R0.ravel(), ETA0]), tg, U[:, 0])
        Rr, er = Y[:, :9].reshape(-1, 3, 3), Y[:, 9:]
        E = top_energy(traj.q, traj.v, mgl)
        E_ref = top_energy(Rr, er, mgl)
        hs.append(T / N)
        err_x.append(max(np.max(np.abs(traj.q - Rr)), np.max(np.abs(traj.v - er))))
        err_E.append(np.max(np.abs(E - E_ref)))
        err_W.append(np.max(np.abs(E - E[0] - np.array(work))))
        E_refs.append(E_ref)
    return method, hs, (err_x, err_E, err_W), E_refs[-1]


@pytest.mark.parametrize("amplitude", [0.0, 0.5], ids=["dissipation", "control"])
@pytest.mark.parametrize("case", list(CASES))
def test_forced_lie_orders_energy_and_work(case, amplitude):
    method, hs, errs, E_ref = run_case(case, amplitude)
    if amplitude == 0.0:
        assert np.all(np.diff(E_ref) < 0) and E_ref[0] - E_ref[-1] > 0.1
    for what, e in zip(("state", "energy", "work"), errs):
        slope = fit_order(hs, e, floor=FLOOR)
        assert abs(slope - method.order) <= 0.25, (case, what, slope, e)


def test_zero_force_is_the_unforced_method_bitwise():
    """F ≡ 0 adds exact zeros to the stage forces and to the Newton matrix: the same numbers
    as the unforced LieVPRK."""
    ht = heavy_top(tuple(INERTIA), mgl=1.0, chi=tuple(CHI))
    zero = forced_top(1.0, False, force=lambda g, eta, u: 0.0 * eta)
    for method in (LieVPRK(gauss(2)), LieVPRK(lobatto_iiia_iiib(3), retraction="exp")):
        a = integrate(ht, method, R0, ETA0, h=0.1, n_steps=20)
        b = integrate(zero, method, R0, ETA0, h=0.1, n_steps=20, controls=np.zeros((20, 1)))
        np.testing.assert_array_equal(a.q, b.q)
        np.testing.assert_array_equal(a.p, b.p)


def test_finite_difference_force_jacobians_agree_with_exact():
    """Without force_derivatives the Newton matrix uses the system's central differences
    (left-trivialized in g): the same equations are solved, to the Newton tolerance."""
    _, U = _controls(20)
    method = LieVPRK(gauss(2))
    a = integrate(forced_top(exact=True), method, R0, ETA0, h=0.1, n_steps=20, controls=U)
    b = integrate(forced_top(exact=False), method, R0, ETA0, h=0.1, n_steps=20, controls=U)
    assert forced_top(exact=False).fd_force_derivatives
    # two solves of the same equations, each to the Newton tolerance: at most n_steps times
    # one solve's bound (newton_residual_bound's docstring)
    bound = 20 * newton_residual_bound(method.newton.tol, ETA0, ETA0)
    assert np.max(np.abs(a.q - b.q)) <= bound
    assert np.max(np.abs(a.v - b.v)) <= bound


def test_batched_controls_equal_member_runs():
    """U of shape (n_steps, batch, n_u): member i runs with U[:, i]; the work is per member."""
    R = np.stack([R0, SO3.exp(np.array([0.0, 0.4, -0.3])), np.eye(3)])
    eta = np.stack([ETA0, np.array([0.2, 0.1, -0.5]), np.array([-0.3, 0.6, 0.2])])
    N = 10
    U = np.stack([np.full((N, 1), c) for c in (0.0, 0.5, -1.0)], axis=1)  # (N, 3, 1)
    method = LieVPRK(gauss(2))
    system = forced_top()
    tb = integrate(system, method, R, eta, h=0.1, n_steps=N, controls=U)
    st = method.step(system, method.initial_state(system, R, eta), 0.1, u=U[0])
    assert np.shape(st.info["work"]) == (3,)
    bound = N * newton_residual_bound(method.newton.tol, eta, eta)
    for i in range(3):
        ti = integrate(system, method, R[i], eta[i], h=0.1, n_steps=N, controls=U[:, i])
        # one batched Newton solve stops when every member meets the tolerance: differences
        # up to one solve's bound per step
        assert np.max(np.abs(tb.q[:, i] - ti.q)) <= bound
        assert np.max(np.abs(tb.v[:, i] - ti.v)) <= bound


def test_dissipative_work_is_negative_and_energy_decays():
    """Without control the body torque only dissipates: negative discrete work at every step
    and a monotone energy decay of the discrete solution."""
    method = LieVPRK(lobatto_iiia_iiib(3))
    system = forced_top(mgl=0.0)
    st = method.initial_state(system, R0, ETA0)
    E = [float(top_energy(R0, ETA0, 0.0))]
    for _ in range(10):
        st = method.step(system, st, 0.1, u=np.zeros(1))
        assert st.info["work"] < 0
        E.append(float(top_energy(st.q, st.v, 0.0)))
    assert np.all(np.diff(E) < 0)


# -- symbolic front-end ------------------------------------------------------------------------
def test_symbolic_trivialized_force_and_controls():
    """from_trivialized_lagrangian(force=, controls=): exact generated left-trivialized
    derivatives, the same force and run as the hand-written model, a general ℓ also takes
    the force; controls only in the force."""
    sp = pytest.importorskip("sympy")
    from chetaev.discrete_lagrangian.symbolic import from_trivialized_lagrangian
    from chetaev.discrete_lagrangian.testing import assert_rounding_close

    R = sp.MatrixSymbol("R", 3, 3)
    eta = list(sp.symbols("eta0:3"))
    u, c, gz = sp.symbols("u c gz")
    T_kin = sum(i * e**2 for i, e in zip(INERTIA, eta)) / 2
    V = sum(R[2, j] * CHI[j] for j in range(3))  # mgl = 1
    k = 1 + sum(e**2 for e in eta) / 2
    F = [-c * k * eta[0], -c * k * eta[1], -c * k * eta[2] + u]
    sym = from_trivialized_lagrangian(SO3, T_kin - V, eta, g=R, force=F, controls=[u],
                                      params={c: C})
    assert sym.n_controls == 1 and not sym.fd_force_derivatives
    hand = forced_top()
    rng = np.random.default_rng(7)
    g = SO3.random(rng, (4, 3))
    e = rng.normal(size=(4, 3, 3))
    uu = rng.normal(size=(4, 1, 1))
    # the same few-term formulas written twice: rounding of the entries
    assert_rounding_close(sym.generalized_force(g, e, uu), hand.generalized_force(g, e, uu),
                          n_terms=4, n_ops=3, what="F")
    for a, b, name in zip(sym.force_jacobians(g, e, uu), hand.force_jacobians(g, e, uu),
                          ("F_g", "F_eta", "F_u")):
        assert_rounding_close(a, b, n_terms=4, n_ops=3, what=name)
    sym.check_derivatives(g[0, 0], e[0, 0])
    # a configuration-dependent force: the generated F_g is the left-trivialized derivative
    # (checked against the system's own central differences along g·exp(ε E_j))
    Fg_expr = [gz * R[2, 0], gz * R[2, 1], gz * R[2, 2]]
    symg = from_trivialized_lagrangian(SO3, T_kin, eta, g=R, force=Fg_expr, params={gz: 0.7})
    assert not symg.fd_force_derivatives
    symg.check_derivatives(g[0, 0], e[0, 0])
    _, U = _controls(10)
    method = LieVPRK(gauss(2))
    ta = integrate(sym, method, R0, ETA0, h=0.2, n_steps=10, controls=U)
    tb = integrate(hand, method, R0, ETA0, h=0.2, n_steps=10, controls=U)
    bound = 10 * newton_residual_bound(method.newton.tol, ETA0, ETA0)
    assert np.max(np.abs(ta.q - tb.q)) <= bound
    gen = from_trivialized_lagrangian(SO3, T_kin + eta[0] ** 4 / 10, eta,
                                      force=[-eta[0], -eta[1], -eta[2]])
    assert gen.has_force and gen.n_controls == 0
    tg = integrate(gen, method, R0, ETA0, h=0.2, n_steps=5)
    assert tg.success, tg.message
    with pytest.raises(InputError, match=r"`force` must hold one expression per algebra"):
        from_trivialized_lagrangian(SO3, T_kin, eta, force=[eta[0]])
    with pytest.raises(InputError, match=r"`controls` need a `force`"):
        from_trivialized_lagrangian(SO3, T_kin, eta, controls=[u])
    with pytest.raises(InputError, match=r"`ell` uses the control symbol"):
        from_trivialized_lagrangian(SO3, T_kin + u, eta, force=[u, u, u], controls=[u])


# -- §6.3: a holonomic constraint on the group --------------------------------------------------
E1 = np.array([1.0, 0.0, 0.0])


def constrained_forced_top():
    """The forced heavy top with e₃·R e₁ = 0 (body axis 1 horizontal): Φ(R) = Γ·e₁, its
    left-trivialized Jacobian (e₁ × Γ)ᵀ and Hessian ê₁Γ̂ (d/dε Γ(R exp(ε ê_k)) = Γ × e_k)."""
    def gamma(R):
        return np.einsum("...ji,j->...i", R, E3)

    con = HolonomicConstraint(lambda R: (gamma(R) @ E1)[..., None],
                              lambda R: np.cross(E1, gamma(R))[..., None, :],
                              lambda R: (SO3.hat(E1) @ SO3.hat(gamma(R)))[..., None, :, :], m=1)
    return ConstrainedSystem(forced_top(), con)


def constrained_rhs(t, y, u):
    """Index-1 form, λ from the twice-differentiated constraint: with j = e₁ × Γ,
    𝕀η̇ = f + jλ, f = (𝕀η) × η − χ × Γ + F, and 0 = d/dt (j·η) = (e₁ × (Γ × η))·η + j·η̇."""
    R, eta = y[:9].reshape(3, 3), y[9:]
    Gam = R.T @ E3
    f = np.cross(INERTIA * eta, eta) - np.cross(CHI, Gam) + body_torque(R, eta, np.atleast_1d(u))
    j = np.cross(E1, Gam)
    lam = -(np.cross(E1, np.cross(Gam, eta)) @ eta + j @ (f / INERTIA)) / (j @ (j / INERTIA))
    return np.concatenate([(R @ SO3.hat(eta)).ravel(), (f + j * lam) / INERTIA])


def constrained_initial():
    R = SO3.exp(np.array([0.0, 0.0, 0.4])) @ SO3.exp(np.array([0.7, 0.0, 0.0]))
    eta = np.array([0.6, -0.4, 0.9])
    j = np.cross(E1, R.T @ E3)
    return R, eta - (j @ eta) / (j @ j) * j


def run_constrained(s, amplitude, ns):
    method = LieVPRK(lobatto_iiia_iiib(s))
    system = constrained_forced_top()
    R, eta = constrained_initial()
    hs, err_x, err_W, worst_con = [], [], [], 0.0
    for N in ns:
        tg, U = _controls(N, amplitude)
        traj = integrate(system, method, R, eta, h=T / N, n_steps=N, controls=U)
        assert traj.success, traj.message
        worst_con = max(worst_con, float(np.max(np.abs(traj.constraint_residual(kind="all")))))
        st = method.initial_state(system, R, eta, u=U[0])
        work = [0.0]
        for k in range(N):
            st = method.step(system, st, T / N, u=U[k])
            work.append(work[-1] + float(st.info["work"]))
        np.testing.assert_array_equal(st.q, traj.q[-1])
        Y = controlled_reference(constrained_rhs, np.concatenate([R.ravel(), eta]), tg, U[:, 0])
        Rr, er = Y[:, :9].reshape(-1, 3, 3), Y[:, 9:]
        E = top_energy(traj.q, traj.v, 1.0)
        hs.append(T / N)
        err_x.append(max(np.max(np.abs(traj.q - Rr)), np.max(np.abs(traj.v - er))))
        err_W.append(np.max(np.abs(E - E[0] - np.array(work))))
    return method, hs, (err_x, err_W), worst_con


@pytest.mark.parametrize("amplitude", [0.0, 0.5], ids=["dissipation", "control"])
@pytest.mark.parametrize("s", [2, 3])
def test_forced_lie_holonomic_orders_and_work(s, amplitude):
    """§6.3 with the body torque: orders 2s − 2 against DOP853 on the forced index-1 equations
    (hand-written above; λ₀ of the forced equations at U[0]), the work gap at the same order,
    Φ and the tangency at the nodes to the Newton tolerance. Measured (N = 8..64; slopes of
    state / work gap): s = 2: 2.07 / 2.02 (dissipation), 2.07 / 2.02 (control); s = 3:
    4.04 / 4.03, 4.03 / 3.99; worst |slope − order| 0.072, margin 3.5 to the band; smallest
    fitted error 6.4e-9."""
    method, hs, errs, worst_con = run_constrained(s, amplitude, NS)
    for what, e in zip(("state", "work"), errs):
        slope = fit_order(hs, e, floor=FLOOR)
        assert abs(slope - method.order) <= 0.25, (s, what, slope, e)
    # Newton-limited (tol 1e-12 relative to 1 + |μ|): measured worst 6.9e-13 (s = 2, h = 0.25)
    assert worst_con <= 10 * method.newton.tol
