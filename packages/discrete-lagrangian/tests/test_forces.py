"""External forces and controls (issue 20): the forced VPRK, ConstrainedPRK and DEL.

The forced (Lagrange–d'Alembert) equations d/dt ∂L/∂v − ∂L/∂q = F(q, v, u) (+ constraint
forces) are integrated with a piecewise-constant control ``U`` (step k uses ``U[k]``) and
compared with an independent reference: DOP853 (rtol = atol = 1e-13) on the forced
continuous equations, restarted on each step interval with that step's control. The models
are nonlinear and the forces velocity dependent and dissipative:

* Hénon–Héiles with F = −c(1 + |q|²)v + u·b (VPRK: Lobatto IIIA–IIIB(3), Gauss(2));
* the same with DiscreteEulerLagrange (midpoint, trapezoidal, α = 0.3: the left and right
  discrete forces of its quadrature, Marsden & West 2001 §3.2);
* the spherical pendulum (Cartesian, |q| = 1) with F = −c v + u e_x (ConstrainedPRK:
  RATTLE = Lobatto IIIA–IIIB(2), Lobatto IIIA–IIIB(3)); the reference's acceleration is
  a = F_t − (|v|² + q·F_t) q / |q|², F_t = −e_z + F.

Checked at the method's order (fitted on the errors above FLOOR, band ±0.25 as in
``test_orders``): the state error (max over the nodes), the energy error against the
reference's energy (the energy decays at the continuous rate dE/dt = F·v), and the gap
between the energy change E_k − E_0 and the discrete work Σ h Σ_i b_i F^i·V^i
(``State.info["work"]``), once with dissipation only (U = 0) and once with the control
0.5 sin(3 t_k). Measured (T = 2, N = 8, 16, 32, 64; slopes of state / energy / work gap):

=====================  =====================  =====================
case                   dissipation only       with the control
=====================  =====================  =====================
VPRK Lobatto 3         4.01 / 4.00 / 4.00     3.98 / 4.00 / 3.99
VPRK Gauss 2           4.00 / 4.00 / 4.00     3.92 / 3.90 / 4.06
DEL midpoint           1.99 / 1.99 / 1.99     1.94 / 1.98 / 1.89
DEL trapezoidal        2.01 / 1.99 / 2.01     2.00 / 1.94 / 1.96
DEL α = 0.3            1.04 / 1.05 / 1.04     1.05 / 0.93 / 0.94
RATTLE                 2.01 / 1.99 / 2.02     1.99 / 2.00 / 2.02
ConstrainedPRK Lob. 3  4.00 / 4.01 / 4.00     3.91 / 4.11 / 4.03
=====================  =====================  =====================

worst |slope − order| 0.111 (DEL midpoint, work gap): margin 2.25 to the band; the smallest
fitted error is 2.9e-10, 30 times FLOOR.
"""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    VPRK,
    ConstrainedPRK,
    ConstrainedSystem,
    DerivativeError,
    DiscreteEulerLagrange,
    ForcesNotSupportedError,
    InputError,
    LagrangianSystem,
    MechanicalSystem,
    NewtonOptions,
    Trajectory,
    TrivializedMechanicalSystem,
    integrate,
)
from chetaev.discrete_lagrangian import discretization_maps as dm
from chetaev.discrete_lagrangian.testing import (
    assert_rounding_close,
    controlled_reference,
    fit_order,
    henon_heiles,
    newton_residual_bound,
    sine_controls,
    spherical_pendulum,
)
from chetaev.liegroups import SO3
from chetaev.rktableaux import gauss, lobatto_iiia_iiib

FLOOR = 1e-11
T = 2.0
NS = (8, 16, 32, 64)
C = 0.3
B = np.array([1.0, 0.5])
E3 = np.array([0.0, 0.0, 1.0])


# -- models -----------------------------------------------------------------------------------
def hh_force(q, v, u):
    """Nonlinear velocity-dependent dissipation and the input direction b."""
    return -C * (1.0 + np.sum(q * q, axis=-1, keepdims=True)) * v + u[..., :1] * B


def hh_force_derivatives(q, v, u):
    k = 1.0 + np.sum(q * q, axis=-1)
    Fq = -2.0 * C * v[..., :, None] * q[..., None, :]
    Fv = -C * k[..., None, None] * np.eye(2)
    Fu = np.broadcast_to(B[:, None], (*np.shape(k), 2, 1))
    return Fq, Fv, Fu


def forced_hh(exact=True, **kw):
    base = henon_heiles()
    return MechanicalSystem(np.eye(2), base.V, base.gradV, base.hessV, force=hh_force,
                            force_derivatives=hh_force_derivatives if exact else None,
                            n_controls=1, **kw)


def hh_rhs(t, y, u):
    q, v = y[:2], y[2:]
    return np.concatenate([v, -henon_heiles().gradV(q) + hh_force(q, v, np.atleast_1d(u))])


def sp_force(q, v, u):
    return -C * v + u[..., :1] * np.array([1.0, 0.0, 0.0])


def forced_spherical():
    sysm = MechanicalSystem(np.eye(3), lambda q: q @ E3,
                            lambda q: np.broadcast_to(E3, np.shape(q)),
                            lambda q: np.zeros((*np.shape(q), 3)), force=sp_force, n_controls=1)
    return ConstrainedSystem(sysm, spherical_pendulum().constraint)


def sp_rhs(t, y, u):
    q, v = y[:3], y[3:]
    Ft = -E3 + sp_force(q, v, np.atleast_1d(u))
    return np.concatenate([v, Ft - (v @ v + q @ Ft) / (q @ q) * q])


Q0_SP = np.array([np.sin(1.0), 0.0, -np.cos(1.0)])
CASES = {
    "vprk-lobatto3": (VPRK(lobatto_iiia_iiib(3)), forced_hh, hh_rhs,
                      np.array([0.1, -0.2]), np.array([0.4, 0.3]), 4),
    "vprk-gauss2": (VPRK(gauss(2)), forced_hh, hh_rhs,
                    np.array([0.1, -0.2]), np.array([0.4, 0.3]), 4),
    "del-midpoint": (DiscreteEulerLagrange("midpoint"), forced_hh, hh_rhs,
                     np.array([0.1, -0.2]), np.array([0.4, 0.3]), 2),
    "del-trapezoidal": (DiscreteEulerLagrange("trapezoidal"), forced_hh, hh_rhs,
                        np.array([0.1, -0.2]), np.array([0.4, 0.3]), 2),
    "del-alpha": (DiscreteEulerLagrange("alpha", 0.3), forced_hh, hh_rhs,
                  np.array([0.1, -0.2]), np.array([0.4, 0.3]), 1),
    "rattle": (ConstrainedPRK(lobatto_iiia_iiib(2)), forced_spherical, sp_rhs,
               Q0_SP, np.array([0.0, 0.8, 0.0]), 2),
    "constrained-lobatto3": (ConstrainedPRK(lobatto_iiia_iiib(3)), forced_spherical, sp_rhs,
                             Q0_SP, np.array([0.0, 0.8, 0.0]), 4),
}


def _controls(N, amplitude=0.5):
    return sine_controls(N, T, amplitude)


@pytest.mark.parametrize("amplitude", [0.0, 0.5], ids=["dissipation", "control"])
@pytest.mark.parametrize("case", list(CASES))
def test_forced_orders_energy_and_work(case, amplitude):
    method, make, rhs, q0, v0, order = CASES[case]
    system = make()
    assert method.order == order
    n = q0.shape[-1]
    hs, err_x, err_E, err_W = [], [], [], []
    for N in NS:
        tg, U = _controls(N, amplitude)
        traj = integrate(system, method, q0, v0, h=T / N, n_steps=N, controls=U)
        assert traj.success, traj.message
        np.testing.assert_array_equal(traj.controls, U)
        # the discrete work of each step, from a step-by-step run (the same steps)
        st = method.initial_state(system, q0, v0)
        work = [0.0]
        for k in range(N):
            st = method.step(system, st, T / N, u=U[k])
            work.append(work[-1] + float(st.info["work"]))
        np.testing.assert_array_equal(st.q, traj.q[-1])
        Y = controlled_reference(rhs, np.concatenate([q0, v0]), tg, U[:, 0])
        E = system.energy(traj.q, traj.v)
        E_ref = system.energy(Y[:, :n], Y[:, n:])
        hs.append(T / N)
        err_x.append(np.max(np.abs(np.concatenate([traj.q, traj.v], -1) - Y)))
        err_E.append(np.max(np.abs(E - E_ref)))
        err_W.append(np.max(np.abs(E - E[0] - np.array(work))))
    # the force matters: without control the energy decays monotonically, by 0.063
    # (Hénon–Heiles, 42 %) and 0.36 (pendulum) over the run; the control changes it by 0.14
    # and 0.21
    if amplitude == 0.0:
        assert np.all(np.diff(E_ref) < 0) and E_ref[0] - E_ref[-1] > 0.05
    else:
        assert abs(E_ref[-1] - E_ref[0]) > 0.1
    for what, errs in (("state", err_x), ("energy", err_E), ("work", err_W)):
        slope = fit_order(hs, errs, floor=FLOOR)
        assert abs(slope - order) <= 0.25, (case, what, slope, errs)


def test_zero_force_is_the_unforced_method_bitwise():
    """F ≡ 0 adds exact zeros to W and to the Newton matrix: the same numbers as no force."""
    base = henon_heiles()
    zero = MechanicalSystem(np.eye(2), base.V, base.gradV, base.hessV,
                            force=lambda q, v, u: np.zeros(np.broadcast_shapes(q.shape, v.shape)))
    q0, v0 = np.array([0.1, -0.2]), np.array([0.4, 0.3])
    for method in (VPRK(gauss(2)), VPRK(lobatto_iiia_iiib(3))):
        a = integrate(base, method, q0, v0, h=0.1, n_steps=20)
        b = integrate(zero, method, q0, v0, h=0.1, n_steps=20)
        np.testing.assert_array_equal(a.q, b.q)
        np.testing.assert_array_equal(a.p, b.p)
        assert b.controls is None


def test_finite_difference_force_jacobians_agree_with_exact():
    """Without force_derivatives the Newton matrix uses central differences (~1e-10
    relative): the same equations are solved, to the Newton tolerance."""
    q0, v0 = np.array([0.1, -0.2]), np.array([0.4, 0.3])
    _, U = _controls(20)
    method = VPRK(gauss(2))
    a = integrate(forced_hh(exact=True), method, q0, v0, h=0.1, n_steps=20, controls=U)
    b = integrate(forced_hh(exact=False), method, q0, v0, h=0.1, n_steps=20, controls=U)
    assert forced_hh(exact=False).fd_force_derivatives
    assert not forced_hh().fd_force_derivatives
    # two solves of the same equations, each to the Newton tolerance: their difference is
    # at most n_steps times one solve's bound (newton_residual_bound's docstring). Measured
    # 0.0 (bitwise: the same iterations converge to the same numbers) against the bound 2.0e-11.
    bound = 20 * newton_residual_bound(method.newton.tol, q0, v0)
    assert np.max(np.abs(a.q - b.q)) <= bound
    assert np.max(np.abs(a.v - b.v)) <= bound


def test_batched_controls_equal_member_runs():
    """U of shape (n_steps, batch, n_u): member i runs with U[:, i]."""
    q0 = np.array([[0.1, -0.2], [0.0, 0.1], [-0.2, 0.05]])
    v0 = np.array([[0.4, 0.3], [0.1, -0.2], [0.0, 0.3]])
    N = 10
    U = np.stack([np.full((N, 1), c) for c in (0.0, 0.5, -1.0)], axis=1)  # (N, 3, 1)
    method = VPRK(gauss(2))
    system = forced_hh()
    tb = integrate(system, method, q0, v0, h=0.1, n_steps=N, controls=U)
    assert tb.controls.shape == (N, 3, 1)
    for i in range(3):
        ti = integrate(system, method, q0[i], v0[i], h=0.1, n_steps=N, controls=U[:, i])
        # one batched Newton solve stops when every member meets the tolerance, so a member
        # may take an extra iteration: differences up to one solve's bound per step
        # (measured: 0.0, bitwise, for every member, against the bound 1.0e-11).
        bound = N * newton_residual_bound(method.newton.tol, q0, v0)
        assert np.max(np.abs(tb.q[:, i] - ti.q)) <= bound
    # controls broadcast over the batch when they carry no batch axis
    t1 = integrate(system, method, q0, v0, h=0.1, n_steps=N, controls=np.full((N, 1), 0.5))
    assert np.max(np.abs(t1.q[:, 1] - tb.q[:, 1])) <= N * newton_residual_bound(
        method.newton.tol, q0, v0)


def test_forced_constrained_initial_multiplier_and_work_sign():
    """initial_state(..., u=) gives λ₀ of the forced equations; the dissipative force's
    discrete work is negative at every step."""
    system = forced_spherical()
    method = ConstrainedPRK(lobatto_iiia_iiib(3))
    v0 = np.array([0.0, 0.8, 0.0])
    s0 = method.initial_state(system, Q0_SP, v0, u=np.array([0.0]))
    s1 = method.initial_state(system, Q0_SP, v0, u=np.array([0.7]))
    # λ of the forced equations, independently: |q| = 1, λ q is the constraint force, so
    # λ = −(|v|² + q·F_t) with F_t = −e_z + F(q, v, u)
    for s, u in ((s0, 0.0), (s1, 0.7)):
        Ft = -E3 + sp_force(Q0_SP, v0, np.array([u]))
        lam = -(v0 @ v0 + Q0_SP @ Ft)
        # two formulas for the same 3-term sums (measured: bitwise equal)
        assert_rounding_close(s.lam, [lam], n_terms=3, n_ops=4, what="lambda0")
    traj = integrate(system, method, Q0_SP, v0, h=0.1, n_steps=2, controls=np.full((2, 1), 0.7))
    np.testing.assert_array_equal(traj.lam[0], s1.lam)
    st = s0
    for _ in range(5):
        st = method.step(system, st, 0.1, u=np.array([0.0]))
        assert st.info["work"] < 0


# -- hostile inputs --------------------------------------------------------------------------
def _hh(**kw):
    base = henon_heiles()
    return MechanicalSystem(np.eye(2), base.V, base.gradV, base.hessV, **kw)


def _run(system, method=None, N=2, **kw):
    return integrate(system, method or VPRK(gauss(2)), [0.1, -0.2], [0.4, 0.3], h=0.1,
                     n_steps=N, **kw)


BAD_SYSTEMS = [
    ("force-not-callable", lambda: _hh(force=3.0), r"`force`"),
    ("force-derivatives-not-callable",
     lambda: _hh(force=hh_force, force_derivatives="no", n_controls=1), r"`force_derivatives`"),
    ("derivatives-without-force", lambda: _hh(force_derivatives=hh_force_derivatives),
     r"`force_derivatives`"),
    ("controls-without-force", lambda: _hh(n_controls=2), r"`n_controls`"),
    ("n-controls-negative", lambda: _hh(force=hh_force, n_controls=-1), r"`n_controls`"),
    ("n-controls-float", lambda: _hh(force=hh_force, n_controls=1.5), r"`n_controls`"),
    ("lagrangian-force-not-callable",
     lambda: LagrangianSystem(1, lambda q, v: 0.5 * v[..., 0] ** 2, lambda q, v: 0 * q,
                              lambda q, v: v, force=[1.0]), r"`force`"),
    ("trivialized-force-not-callable",
     lambda: TrivializedMechanicalSystem(SO3, np.eye(3), lambda R: 0 * R[..., 0, 0],
                                         lambda R: 0 * R[..., 0], force=1), r"`force`"),
]


@pytest.mark.parametrize("make, match", [c[1:] for c in BAD_SYSTEMS],
                         ids=[c[0] for c in BAD_SYSTEMS])
def test_bad_force_arguments(make, match):
    with pytest.raises(InputError, match=match):
        make()


BAD_RUNS = [
    ("force-wrong-shape",
     lambda: _run(_hh(force=lambda q, v, u: np.zeros(3))), r"`force`"),
    ("force-nan", lambda: _run(_hh(force=lambda q, v, u: np.nan * v)), r"`force`.*NaN"),
    ("force-not-broadcasting",
     lambda: _run(_hh(force=lambda q, v, u: -np.array([v[0], v[1]]))), r"`force`"),
    ("force-raises",
     lambda: _run(_hh(force=lambda q, v, u: q["x"])), r"`force`"),
    ("force-derivatives-wrong",
     lambda: _run(_hh(force=hh_force, n_controls=1,
                      force_derivatives=lambda q, v, u: tuple(
                          -x for x in hh_force_derivatives(q, v, u))),
                  controls=np.zeros((2, 1))), r"force_derivatives"),
    ("force-derivatives-not-a-tuple",
     lambda: _run(_hh(force=hh_force, n_controls=1, force_derivatives=lambda q, v, u: 3),
                  controls=np.zeros((2, 1))), r"`force_derivatives` must return the tuple"),
    ("controls-missing", lambda: _run(forced_hh()), r"controls"),
    ("controls-wrong-length", lambda: _run(forced_hh(), controls=np.zeros((3, 1))),
     r"`controls`.*n_steps"),
    ("controls-wrong-width", lambda: _run(forced_hh(), controls=np.zeros((2, 2))),
     r"`controls`.*n_controls"),
    ("controls-no-step-axis", lambda: _run(forced_hh(), controls=np.zeros(1)), r"`controls`"),
    ("controls-nan", lambda: _run(forced_hh(), controls=np.array([[0.0], [np.nan]])),
     r"`controls`.*NaN"),
    ("controls-complex", lambda: _run(forced_hh(), controls=np.zeros((2, 1)) * 1j),
     r"`controls`.*real"),
    ("controls-string", lambda: _run(forced_hh(), controls="up"), r"`controls`"),
    ("controls-batch-mismatch",
     lambda: integrate(forced_hh(), VPRK(gauss(2)), np.zeros((3, 2)), np.zeros((3, 2)), h=0.1,
                       n_steps=2, controls=np.zeros((2, 4, 1))), r"`controls`.*batch"),
    ("controls-unforced-system", lambda: _run(henon_heiles(), controls=np.zeros((2, 1))),
     r"`controls`.*no external force"),
]


@pytest.mark.parametrize("call, match", [c[1:] for c in BAD_RUNS], ids=[c[0] for c in BAD_RUNS])
def test_bad_forced_runs(call, match):
    with pytest.raises(InputError, match=match):
        call()


def test_derivative_error_is_typed():
    bad = _hh(force=hh_force, n_controls=1,
              force_derivatives=lambda q, v, u: (hh_force_derivatives(q, v, u)[0],
                                                 2 * hh_force_derivatives(q, v, u)[1],
                                                 hh_force_derivatives(q, v, u)[2]))
    with pytest.raises(DerivativeError, match=r"force_derivatives \(F_v\)"):
        bad.check_derivatives([0.1, -0.2], [0.4, 0.3])
    badu = _hh(force=hh_force, n_controls=1,
               force_derivatives=lambda q, v, u: (*hh_force_derivatives(q, v, u)[:2],
                                                  -hh_force_derivatives(q, v, u)[2]))
    with pytest.raises(DerivativeError, match=r"F_u.*respect to u"):
        badu.check_derivatives([0.1, -0.2], [0.4, 0.3])


def test_step_control_checks():
    system, method = forced_hh(), VPRK(gauss(2))
    st = method.initial_state(system, [0.1, -0.2], [0.4, 0.3])
    with pytest.raises(InputError, match=r"n_controls=1"):
        method.step(system, st, 0.1)
    with pytest.raises(InputError, match=r"`u`.*shape"):
        method.step(system, st, 0.1, u=np.zeros(2))
    with pytest.raises(InputError, match=r"`u`.*NaN"):
        method.step(system, st, 0.1, u=np.array([np.inf]))
    plain = henon_heiles()
    s2 = method.initial_state(plain, [0.1, -0.2], [0.4, 0.3])
    with pytest.raises(InputError, match=r"`u`.*no external force"):
        method.step(plain, s2, 0.1, u=np.zeros(1))


# -- methods without forces raise ---------------------------------------------------------------
class _UnforcedRattle(dm.Rattle):
    """A method that declares no forces (the discretization-map RATTLE takes them since
    issue 20; this subclass keeps the refusal path under test)."""

    supports_forces = False


UNSUPPORTED = [
    ("unforced-rattle", _UnforcedRattle, forced_spherical, None),
]


@pytest.mark.parametrize("make_method, make_system, _",
                         [c[1:] for c in UNSUPPORTED], ids=[c[0] for c in UNSUPPORTED])
def test_methods_without_forces_raise(make_method, make_system, _):
    method, system = make_method(), make_system()
    assert not method.supports_forces
    q0 = (np.eye(3) if system.group is not None
          else (Q0_SP if system.n == 3 else np.array([0.1, -0.2])))
    v0 = np.array([0.0, 0.8, 0.0]) if system.n == 3 else np.array([0.4, 0.3])
    msg = r"does not take external forces yet; use VPRK or ConstrainedPRK"
    with pytest.raises(ForcesNotSupportedError, match=msg):
        method.initial_state(system, q0, v0)
    kw = {"controls": np.zeros((2, 1))} if system.n_controls else {}
    with pytest.raises(ForcesNotSupportedError, match=msg):
        integrate(system, method, q0, v0, h=0.1, n_steps=2, **kw)


def test_unforced_state_stepped_on_a_forced_system_raises():
    """A method without forces never ignores a force, even when only ``step`` sees it."""
    plain = spherical_pendulum()
    method = _UnforcedRattle()
    st = method.initial_state(plain, Q0_SP, [0.0, 0.8, 0.0])
    with pytest.raises(ForcesNotSupportedError):
        method.step(forced_spherical(), st, 0.1, u=np.zeros(1))
    with pytest.raises(ForcesNotSupportedError):
        method.step(plain, st, 0.1, u=np.zeros(1))


def test_trajectory_saves_controls(tmp_path):
    _, U = _controls(4)
    traj = integrate(forced_hh(), VPRK(gauss(2)), [0.1, -0.2], [0.4, 0.3], h=0.5, n_steps=4,
                     controls=U)
    traj.save(tmp_path / "t.npz")
    back = Trajectory.load(tmp_path / "t.npz")
    np.testing.assert_array_equal(back.controls, U)


def test_control_batch_must_fit_the_state_batch():
    system, method = forced_hh(), VPRK(gauss(2))
    st = method.initial_state(system, [0.1, -0.2], [0.4, 0.3])
    with pytest.raises(InputError, match=r"`u`.*state batch"):
        method.step(system, st, 0.1, u=np.zeros((3, 1)))
    with pytest.raises(InputError, match=r"`controls`.*batch"):
        _run(system, controls=np.zeros((2, 3, 1)))


# -- symbolic front-end ------------------------------------------------------------------------
def test_symbolic_force_and_controls():
    """from_lagrangian(force=, controls=): exact generated derivatives, the same run as the
    hand-written model, picklable; controls only in the force."""
    import pickle

    sp = pytest.importorskip("sympy")
    from chetaev.discrete_lagrangian.symbolic import from_lagrangian

    x, y, vx, vy, u, c = sp.symbols("x y v_x v_y u c")
    L = (vx**2 + vy**2) / 2 - ((x * x + y * y) / 2 + x * x * y - y**3 / 3)
    k = 1 + x * x + y * y
    sym = from_lagrangian(L, [x, y], [vx, vy], force=[-c * k * vx + u, -c * k * vy + u / 2],
                          controls=[u], params={c: C})
    assert sym.n_controls == 1 and not sym.fd_force_derivatives
    sym.check_derivatives([0.1, -0.2], [0.4, 0.3])
    hand = forced_hh()
    rng = np.random.default_rng(5)
    q, v, uu = rng.normal(size=(4, 3, 2)), rng.normal(size=(4, 3, 2)), rng.normal(size=(4, 1, 1))
    # the same formulas written twice (a few terms each): rounding of the entries
    assert_rounding_close(sym.generalized_force(q, v, uu), hand.generalized_force(q, v, uu),
                          n_terms=4, n_ops=2, what="F")
    for a, b, name in zip(sym.force_jacobians(q, v, uu), hand.force_jacobians(q, v, uu),
                          ("F_q", "F_v", "F_u")):
        assert_rounding_close(a, b, n_terms=4, n_ops=2, what=name)
    _, U = _controls(10)
    ta = integrate(sym, VPRK(gauss(2)), [0.1, -0.2], [0.4, 0.3], h=0.2, n_steps=10, controls=U)
    tb = integrate(hand, VPRK(gauss(2)), [0.1, -0.2], [0.4, 0.3], h=0.2, n_steps=10, controls=U)
    # two solves of equations equal to rounding (measured: bitwise equal)
    bound = 10 * newton_residual_bound(NewtonOptions().tol, [0.1, -0.2], [0.4, 0.3])
    assert np.max(np.abs(ta.q - tb.q)) <= bound
    back = pickle.loads(pickle.dumps(sym))
    np.testing.assert_array_equal(back.force_jacobians(q, v, uu)[2],
                                  sym.force_jacobians(q, v, uu)[2])
    free = from_lagrangian(L, [x, y], [vx, vy], force=[-vx, -vy])
    assert free.n_controls == 0 and free.force_jacobians(q, v)[2].shape == (4, 3, 2, 0)
    with pytest.raises(InputError, match=r"`force\[0\]` uses the symbol"):
        from_lagrangian(L, [x, y], [vx, vy], force=[u, u])
    with pytest.raises(InputError, match=r"`force` must hold one expression per coordinate"):
        from_lagrangian(L, [x, y], [vx, vy], force=[vx])
    with pytest.raises(InputError, match=r"`controls` need a `force`"):
        from_lagrangian(L, [x, y], [vx, vy], controls=[u])
    with pytest.raises(InputError, match=r"`L` uses the control symbol"):
        from_lagrangian(L + u, [x, y], [vx, vy], force=[u, u], controls=[u])


def test_ensemble_rejects_controls():
    from chetaev.discrete_lagrangian import integrate_ensemble

    q0, v0 = np.zeros((4, 2)), np.zeros((4, 2))
    with pytest.raises(InputError, match=r"integrate_ensemble does not take `controls`"):
        integrate_ensemble(forced_hh(), VPRK(gauss(2)), q0, v0, h=0.1, n_steps=2,
                           controls=np.zeros((2, 4, 1)))
    with pytest.raises(InputError, match=r"integrate_ensemble does not take `controls`"):
        integrate_ensemble(forced_hh(), VPRK(gauss(2)), q0, v0, h=0.1, n_steps=2)


def test_reference_solution_refuses_a_forced_system():
    from chetaev.discrete_lagrangian import reference_solution

    with pytest.raises(InputError, match=r"reference_solution does not take external forces"):
        reference_solution(forced_hh(), [0.1, -0.2], [0.4, 0.3], [0.0, 1.0])


def test_non_vectorized_force_is_looped():
    """vectorized=False: force and force_derivatives written for one configuration."""
    base = henon_heiles()

    def f1(q, v, u):
        return np.array([-C * v[0] + u[0], -C * v[1]])

    def df1(q, v, u):
        return np.zeros((2, 2)), -C * np.eye(2), np.array([[1.0], [0.0]])

    loop = MechanicalSystem(np.eye(2), base.V, base.gradV, base.hessV, force=f1,
                            force_derivatives=df1, n_controls=1, vectorized=False)
    vec = MechanicalSystem(np.eye(2), base.V, base.gradV, base.hessV,
                           force=lambda q, v, u: -C * v + u * np.array([1.0, 0.0]),
                           n_controls=1)
    q0, v0 = np.array([[0.1, -0.2], [0.0, 0.1]]), np.array([[0.4, 0.3], [0.1, -0.2]])
    U = np.full((5, 2, 1), 0.2)
    a = integrate(loop, VPRK(gauss(2)), q0, v0, h=0.1, n_steps=5, controls=U)
    b = integrate(vec, VPRK(gauss(2)), q0, v0, h=0.1, n_steps=5, controls=U)
    # exact Jacobians vs central differences of a linear force (exact up to rounding): the
    # same equations solved to the Newton tolerance (measured: 0.0)
    assert np.max(np.abs(a.q - b.q)) <= 5 * newton_residual_bound(NewtonOptions().tol, q0, v0)


@pytest.mark.parametrize("general", [False, True], ids=["mechanical-q-mass", "lagrangian"])
def test_forced_double_pendulum_order(general):
    """A q-dependent mass (MechanicalSystem) and a general LagrangianSystem (the engine's
    non-constant-mass path), forced by joint damping and a torque on the first joint:
    VPRK Gauss(2) at order 4 against DOP853 on M(q)q̈ = −∂V/∂q + ∂L/∂q-terms + F.
    Measured slope 3.95 for both (the two systems give the same errors to 8 digits; the
    smallest error 5.7e-8)."""
    from chetaev.discrete_lagrangian.testing import double_pendulum

    base = double_pendulum(general=general)

    def force(q, v, u):
        return -C * v + u[..., :1] * np.array([1.0, 0.0])

    if general:
        system = LagrangianSystem(2, base.lagrangian, base.D1L, base.D2L, base.D22L, base.D21L,
                                  base.D11L, force=force, n_controls=1)
    else:
        system = MechanicalSystem(base.M, base.V, base.gradV, base.hessV, base.dM, n=2,
                                  force=force, n_controls=1)

    def rhs(t, y, u):
        q, v = y[:2], y[2:]
        return np.concatenate([v, system.acceleration(q, v, force(q, v, np.atleast_1d(u)))])

    q0, v0 = np.array([1.0, -0.5]), np.array([0.3, 0.8])
    hs, errs = [], []
    for N in NS:
        tg, U = _controls(N)
        traj = integrate(system, VPRK(gauss(2)), q0, v0, h=T / N, n_steps=N, controls=U)
        Y = controlled_reference(rhs, np.concatenate([q0, v0]), tg, U[:, 0])
        hs.append(T / N)
        errs.append(np.max(np.abs(np.concatenate([traj.q, traj.v], -1) - Y)))
    slope = fit_order(hs, errs, floor=FLOOR)
    assert abs(slope - 4) <= 0.25, errs
