"""The forced ReducedGNI and its step linearization (issue 20).

Model: a reduced system on TR² × 𝔰𝔬(3) with everything switched on — a metric coupling the
shape and group velocities, x-dependent constraints K(x) (linear, or affine with a(x)), a
nonlinear potential V(x) — and the nonlinear dissipative force
F(x, v, u) = −c(1 + |x|²) v + u b (``v = (ẋ, ξ)``; F_ξ the body-frame torque).

Forced dynamics: compared with an independent reference, DOP853 (rtol = atol = 1e-13) on the
forced reduced Lagrange–d'Alembert–Poincaré equations written here with ``np.cross``
(G̃ v̇ = (−∇V + F_x, (G̃v)_ξ × ξ + F_ξ) + Kᵀλ, λ from d/dt(K v + a) = 0), restarted on each
step interval with that step's control. Checked at the method's order 2 (slopes fitted above
FLOOR, band ±0.25 as in ``test_orders``): the node state (x, v), the energy against the
reference's energy and, for the linear constraint (whose force does no work), the gap between
the energy change and the discrete work Σ ``info["work"]``. Measured (T = 2,
N = 16, 32, 64, 128; slopes of state / energy / work gap; the reference's energy falls by
0.65–0.69 over the run):

=====================  =====================  =====================
constraint             dissipation only       with the control
=====================  =====================  =====================
linear                 2.00 / 2.00 / 1.99     2.02 / 2.02 / 2.05
affine                 2.00 / 1.99 / —        2.02 / 2.02 / —
=====================  =====================  =====================

The smallest fitted error is 1.4e-6, far above FLOOR.

Linearization: [A B] against central differences of ``step`` in the complete state
(x, g, v, λ), g perturbed as g τ(ε) (``coordinates="(q, g, v, lam)"``), and in (x, v, λ)
for a state without a group element (``step_linearization_error``, bound ``step_fd_rtol(h)``
derived in ``packages/discrete-lagrangian/tests/test_linearization.py``), single and batched,
unforced and forced, with exact derivatives and with every derivative left to central
differences (the ball on the rotating table: ``test_reduced_linearization.py``).
"""

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import InputError, integrate
from chetaev.discrete_lagrangian.testing import (
    fit_order,
    rounding_bound,
    step_fd_rtol,
    step_linearization_error,
)
from chetaev.gni import ReducedGNI, ReducedSystem
from chetaev.liegroups import SO3
from scipy.integrate import solve_ivp

FLOOR = 1e-11
T = 2.0
NS = (16, 32, 64, 128)
C = 0.3
B = np.array([1.0, 0.5, 0.2, -0.3, 0.1])
METRIC = np.diag([2.0, 2.0, 0.5, 0.6, 0.7])
METRIC[0, 3] = METRIC[3, 0] = 0.2
METRIC[1, 2] = METRIC[2, 1] = -0.1
X0 = np.array([0.3, -0.2])
H = 0.1  # the step of the linearized steps


def _K(x):
    x = np.asarray(x, dtype=float)
    out = np.zeros((*x.shape[:-1], 2, 5))
    out[..., 0, 0] = 1.0
    out[..., 0, 3] = -(1.0 + 0.2 * np.sin(x[..., 1]))
    out[..., 0, 4] = 0.3 * x[..., 0]
    out[..., 1, 1] = 1.0
    out[..., 1, 2] = 1.0 + 0.1 * x[..., 0] ** 2
    return out


def _dK(x):  # [a, i, j] = ∂K_ai/∂x_j
    x = np.asarray(x, dtype=float)
    out = np.zeros((*x.shape[:-1], 2, 5, 2))
    out[..., 0, 3, 1] = -0.2 * np.cos(x[..., 1])
    out[..., 0, 4, 0] = 0.3
    out[..., 1, 2, 0] = 0.2 * x[..., 0]
    return out


def _a(x):
    x = np.asarray(x, dtype=float)
    return np.stack([0.2 * x[..., 1], -0.2 * np.sin(x[..., 0])], -1)


def _da(x):
    x = np.asarray(x, dtype=float)
    z = np.zeros(x.shape[:-1])
    return np.stack([np.stack([z, z + 0.2], -1), np.stack([-0.2 * np.cos(x[..., 0]), z], -1)],
                    -2)


def _V(x):
    x = np.asarray(x, dtype=float)
    return 0.5 * x[..., 0] ** 2 + 0.3 * np.cos(x[..., 1]) + 0.1 * x[..., 0] * x[..., 1]


def _gV(x):
    x = np.asarray(x, dtype=float)
    return np.stack([x[..., 0] + 0.1 * x[..., 1], -0.3 * np.sin(x[..., 1]) + 0.1 * x[..., 0]],
                    -1)


def _hV(x):
    x = np.asarray(x, dtype=float)
    out = np.zeros((*x.shape[:-1], 2, 2))
    out[..., 0, 0] = 1.0
    out[..., 0, 1] = out[..., 1, 0] = 0.1
    out[..., 1, 1] = -0.3 * np.cos(x[..., 1])
    return out


def force(x, v, u):
    """Nonlinear velocity-dependent dissipation and the input direction b."""
    return -C * (1.0 + np.sum(x * x, axis=-1, keepdims=True)) * v + u[..., :1] * B


def force_derivatives(x, v, u):
    k = 1.0 + np.sum(x * x, axis=-1)
    Fx = -2.0 * C * v[..., :, None] * x[..., None, :]
    Fv = -C * k[..., None, None] * np.eye(5)
    Fu = np.broadcast_to(B[:, None], (*np.shape(k), 5, 1))
    return Fx, Fv, Fu


def model(affine=False, forced=True, exact=True):
    """The module's reduced system; ``exact=False`` leaves every derivative (∇²V, ∂K, ∂a,
    the force's) to central differences."""
    kw = {"constraint_affine": _a if affine else None, "potential": _V, "potential_grad": _gV}
    if exact:
        kw.update(constraint_matrix_grad=_dK, potential_hessian=_hV,
                  constraint_affine_grad=_da if affine else None)
    if forced:
        kw.update(force=force, n_controls=1,
                  force_derivatives=force_derivatives if exact else None)
    return ReducedSystem(SO3, 2, METRIC, _K, **kw)


def consistent_v0(system, x0):
    """A v0 with K(x0) v0 + a(x0) = 0 (least-norm solution plus a null-space part)."""
    K = system.K(x0)
    a = system.a(x0)
    v = np.zeros(5) if a is None else -np.linalg.pinv(K) @ a
    null = np.linalg.svd(K)[2][2:]
    return v + null.T @ np.array([0.8, -0.5, 0.6])


def _rhs(affine):
    """The forced continuous equations, written here (independently of chetaev)."""

    def rhs(t, y, u):
        x, v = y[:2], y[2:]
        p = METRIC @ v
        f = np.concatenate([-_gV(x), np.cross(p[2:], v[2:])]) + force(x, v, np.atleast_1d(u))
        K = _K(x)
        # d/dt(K v + a) = 0: (K G⁻¹ Kᵀ) λ = −(dK/dt) v − da/dt − K G⁻¹ f
        r = -np.einsum("aij,j,i->a", _dK(x), v[:2], v) - K @ np.linalg.solve(METRIC, f)
        if affine:
            r = r - _da(x) @ v[:2]
        Ginv_KT = np.linalg.solve(METRIC, K.T)
        lam = np.linalg.solve(K @ Ginv_KT, r)
        return np.concatenate([v[:2], np.linalg.solve(METRIC, f + K.T @ lam)])

    return rhs


def reference_nodes(affine, x0, v0, tg, U):
    """DOP853 restarted on every step interval [t_k, t_{k+1}] with the control U[k]."""
    rhs = _rhs(affine)
    ys = [np.concatenate([x0, v0])]
    for k in range(len(tg) - 1):
        ys.append(solve_ivp(rhs, (tg[k], tg[k + 1]), ys[-1], args=(U[k, 0],),
                            method="DOP853", rtol=1e-13, atol=1e-13).y[:, -1])
    return np.array(ys)


def _energy(x, v):
    return 0.5 * np.einsum("...i,ij,...j->...", v, METRIC, v) + _V(x)


@pytest.mark.parametrize("affine", [False, True], ids=["linear", "affine"])
@pytest.mark.parametrize("amplitude", [0.0, 0.5], ids=["dissipation", "control"])
def test_forced_order_energy_and_work(amplitude, affine):
    """Order 2 of the state, the energy and the work gap against DOP853 (module docstring;
    deterministic: measured worst |slope − 2| 0.047, work gap, linear, control; band 0.25
    as in ``test_orders``, margin 5)."""
    system = model(affine)
    method = ReducedGNI()
    x0 = X0
    v0 = consistent_v0(system, x0)
    hs, err_x, err_E, err_W = [], [], [], []
    for N in NS:
        tg = np.linspace(0.0, T, N + 1)
        U = amplitude * np.sin(3.0 * tg[:-1])[:, None]
        traj = integrate(system, method, x0, v0, h=T / N, n_steps=N, controls=U)
        assert traj.success, traj.message
        st = method.initial_state(system, x0, v0, u=U[0])
        work = [0.0]
        for k in range(N):
            st = method.step(system, st, T / N, u=U[k])
            work.append(work[-1] + float(st.info["work"]))
        np.testing.assert_array_equal(st.q, traj.q[-1])
        work = np.array(work)
        Y = reference_nodes(affine, x0, v0, tg, U)
        E = _energy(traj.q, traj.v)
        E_ref = _energy(Y[:, :2], Y[:, 2:])
        hs.append(T / N)
        err_x.append(np.max(np.abs(np.concatenate([traj.q, traj.v], -1) - Y)))
        err_E.append(np.max(np.abs(E - E_ref)))
        err_W.append(np.max(np.abs(E - E[0] - work)))
        if amplitude == 0.0 and not affine:
            # dissipation only: the discrete energy and the accumulated work decrease at
            # every step, as the continuous energy does (dE/dt = F·v < 0)
            assert np.all(np.diff(E) < 0) and np.all(np.diff(work) < 0)
    assert abs(E_ref[-1] - E_ref[0]) > 0.1  # the force matters
    checks = [("state", err_x), ("energy", err_E)]
    if not affine:  # the affine constraint's force does work: E − E0 ≠ the force's work
        checks.append(("work", err_W))
    for what, errs in checks:
        slope = fit_order(hs, errs, floor=FLOOR)
        assert abs(slope - 2) <= 0.25, (what, slope, errs)


def test_zero_force_is_the_unforced_method_bitwise():
    """F ≡ 0 (no control) adds exact zeros to the Legendre transforms, the Newton matrix
    and λ₀."""
    base = model(False, forced=False)
    zero = attrs.evolve(base, force=lambda x, v, u: np.zeros(np.shape(v)))
    v0 = consistent_v0(base, X0)
    a = integrate(base, ReducedGNI(), X0, v0, h=0.1, n_steps=20)
    b = integrate(zero, ReducedGNI(), X0, v0, h=0.1, n_steps=20)
    for p, q in ((a.q, b.q), (a.v, b.v), (a.lam, b.lam)):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("affine", [False, True], ids=["linear", "affine"])
def test_forced_nodes_keep_the_constraint_and_lambda0(affine):
    """The reflection is unchanged: K(x_k) v_k + a(x_k) = 0 at every node of a forced run
    (closed form; bound 1e-13 as in the GNI's forced test, measured below 1e-15), and λ₀ is
    the multiplier of the forced continuous equations at u (the reference's closed form:
    the force enters λ, |λ₀(u) − λ₀(0)| > 0.01)."""
    system = model(affine)
    v0 = consistent_v0(system, X0)
    U = 0.5 * np.sin(np.arange(40.0))[:, None]
    traj = integrate(system, ReducedGNI(), X0, v0, h=0.05, n_steps=40, controls=U)
    assert np.max(np.abs(system.residual(traj.q, traj.v))) < 1e-13
    u = np.array([0.7])
    s0 = ReducedGNI().initial_state(system, X0, v0, u=u)
    acc = _rhs(affine)(0.0, np.concatenate([X0, v0]), u[0])[2:]
    p = METRIC @ v0
    f = np.concatenate([-_gV(X0), np.cross(p[2:], v0[2:])]) + force(X0, v0, u)
    lam = np.linalg.lstsq(_K(X0).T, METRIC @ acc - f, rcond=None)[0]
    assert np.max(np.abs(s0.lam - lam)) < 1e-12
    s_free = ReducedGNI().initial_state(system, X0, v0, u=np.zeros(1))
    assert np.max(np.abs(s0.lam - s_free.lam)) > 0.01


def _node(system, affine, batched, u, with_g=True):
    """A node with λ_k from a step (not the continuous one); batched: two nodes; without
    its group element (``carry["g"] = None``) unless ``with_g``."""
    method = ReducedGNI()
    v0 = consistent_v0(system, X0)
    kw = {"u": np.array([0.7])} if system.has_force else {}
    s1 = method.step(system, method.initial_state(system, X0, v0, **kw), 0.1, **kw)
    if batched:
        s2 = method.step(system, s1, 0.1, **kw)
        s1 = attrs.evolve(s1, q=np.stack([s1.q, s2.q]), v=np.stack([s1.v, s2.v]),
                          p=np.stack([s1.p, s2.p]), lam=np.stack([s1.lam, s2.lam]),
                          carry={"g": np.stack([s1.carry["g"], s2.carry["g"]]),
                                 "xi": np.stack([s1.carry["xi"], s2.carry["xi"]])})
    if not with_g:
        s1 = attrs.evolve(s1, carry={**s1.carry, "g": None})
    return method, s1


@pytest.mark.parametrize("with_g", [True, False], ids=["q-g-v", "q-v"])
@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize("exact", [True, False], ids=["exact", "fd-derivatives"])
@pytest.mark.parametrize("forced", [False, True], ids=["unforced", "forced"])
@pytest.mark.parametrize("affine", [False, True], ids=["linear", "affine"])
def test_linearization_matches_finite_differences(affine, forced, exact, batched, with_g):
    """[A B] in (x, g, v, λ) (with the group element) or in (x, v, λ) (without),
    against central differences of ``step`` (module docstring; bound ``step_fd_rtol(0.1)``
    = 2.9e-8). Measured worst over the 32 cases (OPENBLAS_NUM_THREADS=1 and unset):
    3.7e-11 (affine, forced, fd-derivatives, batched, both coordinates), 1/780 of the
    bound; with exact derivatives 1.9e-11."""
    system = model(affine, forced, exact)
    u = None
    if forced:
        u = np.array([[0.7], [-0.4]]) if batched else np.array([0.7])
    method, state = _node(system, affine, batched, u, with_g)
    lin, err = step_linearization_error(method, system, state, H, u)
    lead = (2,) if batched else ()
    k = 12 if with_g else 9
    assert lin.coordinates == ("(q, g, v, lam)" if with_g else "(q, v, lam)")
    assert lin.A.shape == (*lead, k, k) and lin.B.shape == (*lead, k, 1 if forced else 0)
    if forced:
        assert np.max(np.abs(lin.B)) > 1e-3
    assert err <= step_fd_rtol(H), err


def test_tangent_space_is_mapped_into_tangent_space():
    """The bases in (x, g, v, λ) (n + N − m + m + d = 10 columns) are orthonormal and tangent to
    {K(x)v + a(x) = 0} × Rᵐ × G (central differences of the residual along them, δ = 1e-6: bound
    1e-8 as in the GNI test; the residual does not depend on g); every node satisfies the
    constraint, so A maps into the next tangent space: |(I − E1E1ᵀ)A| ≤ 1e-10·max(1, |A|)
    (Newton error ~1e-12 times an O(1) condition)."""
    system = model(True)
    u = np.array([[0.7], [-0.4]])
    method, state = _node(system, True, True, u)
    lin = method.step_linearization(system, state, H, u)
    E0, E1 = lin.basis, lin.next_basis
    assert E0.shape == E1.shape == (2, 12, 10) and lin.A_tangent.shape == (2, 10, 10)
    assert lin.B_tangent.shape == (2, 10, 1)
    delta = 1e-6
    for E, st in ((E0, state), (E1, lin.state)):
        assert np.max(np.abs(np.swapaxes(E, -1, -2) @ E - np.eye(10))) <= rounding_bound(1.0, 12)
        for j in range(10):
            dx, dv = delta * E[..., :2, j], delta * E[..., 5:10, j]
            d = (system.residual(st.q + dx, st.v + dv)
                 - system.residual(st.q - dx, st.v - dv)) / (2 * delta)
            assert np.max(np.abs(d)) <= 1e-8
    P1 = np.eye(12) - E1 @ np.swapaxes(E1, -1, -2)
    assert np.max(np.abs(P1 @ lin.A)) <= 1e-10 * max(1.0, np.max(np.abs(lin.A)))
    assert np.max(np.abs(P1 @ lin.B)) <= 1e-10 * max(1.0, np.max(np.abs(lin.B)))


def test_bad_force_arguments_raise():
    """A non-callable force, n_controls without a force, a negative n_controls and a force
    of the wrong shape raise InputError naming the argument."""
    with pytest.raises(InputError, match="force must be None or a callable"):
        ReducedSystem(SO3, 2, METRIC, _K, force=3.0)
    with pytest.raises(InputError, match="need a force"):
        ReducedSystem(SO3, 2, METRIC, _K, n_controls=1)
    with pytest.raises(InputError, match="n_controls must be a non-negative integer"):
        ReducedSystem(SO3, 2, METRIC, _K, force=force, n_controls=-1)
    bad = ReducedSystem(SO3, 2, METRIC, _K, force=lambda x, v, u: np.zeros(3))
    with pytest.raises(InputError, match="force must return shape"):
        bad.generalized_force(X0, np.zeros(5))
    system = model(False)
    with pytest.raises(InputError, match="n_controls=1"):
        system.generalized_force(X0, np.zeros(5))
    with pytest.raises(InputError, match="n_controls=1"):
        ReducedGNI().step(system, ReducedGNI().initial_state(system, X0,
                                                             consistent_v0(system, X0)), 0.1)


def test_batched_controls_are_per_member():
    """``integrate(..., controls=U)`` with U of shape (n_steps, 2, 1) on a batch of two
    states (the batch rule of the states' shape coordinates, although the system carries a
    group): each member follows its own control. Against the two single runs: the same
    arithmetic on stacked arrays, bound 1e-13 (rounding of batched vs single LAPACK calls
    over 20 steps; measured 0.0)."""
    system = model(True)
    v0 = consistent_v0(system, X0)
    U = np.stack([0.5 * np.sin(np.arange(20.0)), -0.3 * np.cos(np.arange(20.0))], -1)[..., None]
    both = integrate(system, ReducedGNI(), np.stack([X0, X0]), np.stack([v0, v0]), h=0.1,
                     n_steps=20, controls=U)
    assert both.success, both.message
    for i in range(2):
        one = integrate(system, ReducedGNI(), X0, v0, h=0.1, n_steps=20, controls=U[:, i])
        assert np.max(np.abs(both.q[:, i] - one.q)) < 1e-13
        assert np.max(np.abs(both.v[:, i] - one.v)) < 1e-13
    assert np.max(np.abs(both.q[-1, 0] - both.q[-1, 1])) > 1e-3


def test_wrong_force_derivatives_are_caught():
    """``force_derivatives`` is compared with central differences of ``force`` before the
    first step (``derivative_check``), like the system's other derivatives."""
    from chetaev.discrete_lagrangian import DerivativeError

    def wrong(x, v, u):
        Fx, Fv, Fu = force_derivatives(x, v, u)
        return Fx, 0.5 * Fv, Fu

    system = attrs.evolve(model(False), force_derivatives=wrong)
    with pytest.raises(DerivativeError, match="force_derivatives"):
        ReducedGNI().initial_state(system, X0, consistent_v0(system, X0), u=np.array([0.1]))


def test_state_from_points_takes_the_right_discrete_force():
    """The discrete start (x0, x1, ξ0) of a forced system: p⁺_1 includes f_d⁺ with the
    control u, so that the state at node 1 is the one a step from node 0 reaches (the step's
    own (x1, ξ0); bound 1e-12 from the step's Newton tolerance with an O(1) condition;
    measured 8e-16)."""
    system = model(True)
    v0 = consistent_v0(system, X0)
    u = np.array([0.6])
    m = ReducedGNI()
    s1 = m.step(system, m.initial_state(system, X0, v0, u=u), 0.1, u=u)
    s1p = m.state_from_points(system, X0, s1.q, s1.carry["xi"], 0.1, u=u)
    assert np.max(np.abs(s1p.v - s1.v)) < 1e-12 and np.max(np.abs(s1p.lam - s1.lam)) < 1e-12
    free = m.state_from_points(system, X0, s1.q, s1.carry["xi"], 0.1, u=np.zeros(1))
    assert np.max(np.abs(free.v - s1.v)) > 1e-3
