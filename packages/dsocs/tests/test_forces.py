"""External forces, controls and step linearizations of the DSOCS (issue 20).

The forced curvature particle (paper §4.1 with k(x, y) = 1 + 0.3x, the registry's model):
the SOCS v×a = k|v|³, E = span{v}, with the external force F = −c(1 + x²)v + u·b,
b = (1, 0.5), c = 0.3; its forced continuous equations E·(D_EL L + F) = 0 (Lagrange–
d'Alembert on C_V) read, for m = 1,

    a = (F·v/|v|²) v + k(q)|v| v⊥,     v⊥ = (−v_y, v_x)

(the tangential part of F changes the speed, its normal part is taken by the constraint).
DOP853 at rtol = atol = 1e-13 on these equations (written here, independently of the
package's SOCS) is the reference, with the smooth control u(t) = A sin(3t); the DSOCS step k
gets U[k] = u(t_{k+1}), the control of the equation at node k + 1 (module docstring of
``chetaev.dsocs._integrator``: it acts on the dual cell [t_{k+1} − h/2, t_{k+1} + h/2]).

Measured (T = 2, N = 16, 32, 64, 128; fitted slopes of the state error max|(q, v) − ref| /
the energy error max|E_k − E_ref(t_k)| / the work gap max|E_k − E_0 − Σ W_j|):

=====================  =====================
dissipation only       2.00 / 2.00 / 2.00
with the control       1.95 / 1.97 / 2.01
=====================  =====================

(worst |slope − 2| 0.05, margin 5 to the band ±0.25 of the discrete_lagrangian force tests;
the smallest fitted error 1.2e-5 is 10⁵ times FLOOR). Without control the reference energy
decays monotonically from E_0 = 0.5 to 0.086 over [0, 2] (dE/dt = F·v < 0): the discrete
energy follows that rate at order 2. The trapezoidal discrete forces keep the unforced
order 2 (module docstring of ``chetaev.dsocs._dsocs``: the left-rectangle forces of the
"alpha"-0 rule evaluate F at a forward-difference velocity: swapped in by hand on the
dissipative run, the state error's slope is 1.12, errors 1.5e-2 ... 1.4e-3 at
N = 16 ... 128, against 4.3e-3 ... 6.7e-5 here, slope 2.00).

Linearizations: ``step_linearization`` against central differences of ``step``
(``chetaev.discrete_lagrangian.testing.step_linearization_error``, bound
``step_fd_rtol(h)`` = 5.7e-8 at h = 0.05, derived in the discrete_lagrangian linearization
tests): unforced and forced (with B), single and batched, at node 0 of the family (the step
applies the start: coordinates (q, v)) and after a step (coordinates (q, q_next)), for both
starts. Measured worst 1.4e-9 (batched, forced, (q, q_next)), 1/42 of the bound; it is the
central difference's δ² truncation (unforced, (q, q_next): 4.9e-6, 4.9e-8, 4.9e-10, 4.5e-12
at δ = 1e-3, 1e-4, 1e-5, 1e-6), the analytic Jacobian being exact to ~4e-12; at node 0
(q, v): ≤ 2.8e-11.
"""

from __future__ import annotations

import warnings

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    DerivativeError,
    InputError,
    LinearizationNotSupportedError,
    MechanicalSystem,
    integrate,
)
from chetaev.discrete_lagrangian.testing import (
    fit_order,
    step_fd_rtol,
    step_linearization_error,
)
from chetaev.dsocs import (
    DSOCS,
    DSOCSInputError,
    DSOCSIntegrator,
    TwoPointLagrangian,
    VariationalConstraint,
    curvature_particle_dsocs,
)
from scipy.integrate import solve_ivp

T = 2.0
NS = (16, 32, 64, 128)
FLOOR = 1e-10  # DOP853 at 1e-13 and the Newton tolerance 1e-12 on O(1) data
C = 0.3
B = np.array([1.0, 0.5])
Q0, V0 = np.array([0.0, 0.0]), np.array([1.0, 0.0])


def k_var(q):
    return 1.0 + 0.3 * np.asarray(q)[..., 0]


def force(q, v, u):
    q, v = np.asarray(q, float), np.asarray(v, float)
    return -C * (1.0 + q[..., :1] ** 2) * v + u[..., :1] * B


def force_derivatives(q, v, u):
    q, v = np.asarray(q, float), np.asarray(v, float)
    eye = np.eye(2)
    Fq = np.zeros((*np.broadcast_shapes(q.shape, v.shape)[:-1], 2, 2))
    Fq[..., :, 0] = -2.0 * C * q[..., :1] * v
    Fv = -C * (1.0 + q[..., 0] ** 2)[..., None, None] * eye
    Fu = np.broadcast_to(B[:, None], (*Fv.shape[:-2], 2, 1))
    return Fq, Fv, Fu


def forced_particle(**kw):
    """The registry's particle family with the force above (``attrs.evolve`` on the DSOCS)."""
    family = curvature_particle_dsocs(k_var, closed_form=False)
    return attrs.evolve(family, force=force, n_controls=1, **kw)


def reference_nodes(tg, amplitude):
    """DOP853 on the forced continuous equations (module docstring) at the nodes ``tg``."""

    def rhs(t, y):
        q, v = y[:2], y[2:]
        F = force(q, v, np.array([amplitude * np.sin(3.0 * t)]))
        s = np.hypot(v[0], v[1])
        a = (F @ v / s**2) * v + k_var(q) * s * np.array([-v[1], v[0]])
        return np.concatenate([v, a])

    sol = solve_ivp(rhs, (tg[0], tg[-1]), np.concatenate([Q0, V0]), method="DOP853",
                    rtol=1e-13, atol=1e-13, t_eval=tg)
    assert sol.success
    return sol.y.T


def energy(q, v):
    return 0.5 * np.sum(np.asarray(v) ** 2, -1)


@pytest.mark.parametrize("amplitude", [0.0, 0.5], ids=["dissipation", "control"])
def test_forced_order_energy_and_work_against_dop853(amplitude):
    """State, energy (decaying at the continuous rate) and the work gap at order 2."""
    system = forced_particle()
    method = DSOCSIntegrator(start="second_order")
    assert method.supports_forces and method.order == 2
    hs, err_x, err_E, err_W = [], [], [], []
    for N in NS:
        h = T / N
        tg = np.linspace(0.0, T, N + 1)
        U = amplitude * np.sin(3.0 * tg[1:])[:, None]  # U[k] = u(t_{k+1}) (docstring)
        traj = integrate(system, method, Q0, V0, h=h, n_steps=N, controls=U)
        assert traj.success, traj.message
        st = method.initial_state(system, Q0, V0, u=U[0])
        work = [0.0]
        for k in range(N):
            st = method.step(system, st, h, u=U[k])
            work.append(work[-1] + float(st.info["work"]))
        np.testing.assert_array_equal(st.q, traj.q[-1])
        Y = reference_nodes(tg, amplitude)
        E = energy(traj.q, traj.v)
        E_ref = energy(Y[:, :2], Y[:, 2:])
        hs.append(h)
        err_x.append(np.max(np.abs(np.concatenate([traj.q, traj.v], -1) - Y)))
        err_E.append(np.max(np.abs(E - E_ref)))
        err_W.append(np.max(np.abs(E - E[0] - np.array(work))))
    if amplitude == 0.0:  # dissipation: the energy decays monotonically, by more than half
        assert np.all(np.diff(E_ref) < 0) and E_ref[-1] < 0.5 * E_ref[0]
        assert np.all(np.diff(E) < 0)
    for what, errs in (("state", err_x), ("energy", err_E), ("work", err_W)):
        slope = fit_order(hs, errs, floor=FLOOR)
        assert abs(slope - 2.0) <= 0.25, (what, slope, errs)


def test_forced_continuous_system_gives_its_force_to_the_dsocs():
    """``from_continuous`` of a forced MechanicalSystem is a forced DSOCS (never dropped);
    ``force=`` on the family reaches its members; exact ``force_derivatives`` and the
    system's central differences give the same step (Newton tolerance)."""
    base = MechanicalSystem(np.eye(2), lambda q: np.zeros(np.shape(q)[:-1]),
                            lambda q: np.zeros(np.shape(q)))
    forced_base = attrs.evolve(base, force=force, n_controls=1)
    via_system = curvature_particle_dsocs(k_var, closed_form=False, system=forced_base)
    assert via_system.has_force and via_system.at(0.05).has_force
    assert via_system.n_controls == 1
    exact = forced_particle(force_derivatives=force_derivatives)
    fd = forced_particle()
    method = DSOCSIntegrator()
    U = np.full((10, 1), 0.4)
    runs = [integrate(s, method, Q0, V0, h=0.05, n_steps=10, controls=U)
            for s in (via_system, exact, fd)]
    for r in runs[1:]:
        np.testing.assert_allclose(r.q, runs[0].q, rtol=0, atol=1e-11)
    free = integrate(curvature_particle_dsocs(k_var, closed_form=False), method, Q0, V0,
                     h=0.05, n_steps=10)
    assert np.max(np.abs(free.q - runs[0].q)) > 1e-3  # the force acts


def test_lagrangian_scale_scales_the_discrete_force_alike():
    """L_d = s·L(q0, v̄) with s = 3: eq. (4) is homogeneous in (L_d, p_F), so the forced
    trajectory is the s = 1 one to the Newton tolerance (bound 1e-11: tol 1e-12 on O(1)
    nodes, times 10; measured 1.0e-15). An unscaled force would act as F/3 here and move
    the nodes by O(1e-2)."""
    family = curvature_particle_dsocs(k_var, closed_form=False)
    socs = family.socs
    scaled = DSOCS.from_continuous(socs.system, socs.constraint, socs.variations,
                                   constraint_jacobian=socs.constraint_jacobian,
                                   variations_depend_on=("v",), scale=3.0, force=force,
                                   n_controls=1)
    assert scaled.at(0.05).lagrangian_scale == 3.0
    U = np.full((20, 1), 0.3)
    a = integrate(forced_particle(), DSOCSIntegrator(), Q0, V0, h=0.05, n_steps=20, controls=U)
    b = integrate(scaled, DSOCSIntegrator(), Q0, V0, h=0.05, n_steps=20, controls=U)
    np.testing.assert_allclose(b.q, a.q, rtol=0, atol=1e-11)


def test_zero_force_is_the_unforced_dsocs_bitwise():
    """F ≡ 0 adds exact zeros to eq. (4) and its Newton matrix: the unforced numbers."""
    family = curvature_particle_dsocs(k_var, closed_form=False)
    zero = attrs.evolve(family, force=lambda q, v, u: np.zeros(np.broadcast_shapes(
        np.shape(q), np.shape(v))))
    method = DSOCSIntegrator()
    a = integrate(family, method, Q0, V0, h=0.05, n_steps=20)
    b = integrate(zero, method, Q0, V0, h=0.05, n_steps=20)
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.v, b.v)


@pytest.mark.parametrize("start", ["second_order", "paper"])
@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
def test_step_linearization_against_finite_differences(start, batched):
    """[A B] against central differences of the step (module docstring), unforced and
    forced, at node 0 (coordinates (q, v)) and after one step (coordinates (q, q_next))."""
    h = 0.05
    method = DSOCSIntegrator(start=start)
    unforced = curvature_particle_dsocs(k_var, closed_form=False)
    forced = forced_particle()
    q0 = np.stack([Q0, Q0 + 0.1]) if batched else Q0
    v0 = np.stack([V0, 0.5 * V0 + 0.2]) if batched else V0
    u = np.array([[0.2], [-0.3]]) if batched else np.array([0.2])
    exact = forced_particle(force_derivatives=force_derivatives)
    for system, uu in ((unforced, None), (forced, u), (exact, u)):
        s0 = method.initial_state(system, q0, v0, u=uu)
        lin0, err0 = step_linearization_error(method, system, s0, h, uu)
        assert lin0.coordinates == "(q, v)"
        s1 = method.step(system, s0, h, u=uu)
        lin1, err1 = step_linearization_error(method, system, s1, h, uu)
        assert lin1.coordinates == "(q, q_next)"
        assert lin1.A.shape == (*np.shape(q0)[:-1], 4, 4)
        assert lin1.B.shape == (*np.shape(q0)[:-1], 4, 0 if uu is None else 1)
        if uu is not None:
            assert np.max(np.abs(lin1.B)) > 0 and np.max(np.abs(lin0.B)) > 0
        # the next state is the step's
        np.testing.assert_array_equal(lin1.state.q, method.step(system, s1, h, u=uu).q)
        assert max(err0, err1) <= step_fd_rtol(h), (system.has_force, err0, err1)


def test_linearization_is_thm_5_1_flow_jacobian():
    """Unforced, (q, q_next): A is DSOCS.flow_jacobian (the same IFT, Thm. 5.1)."""
    h = 0.05
    family = curvature_particle_dsocs(k_var, closed_form=False)
    method = DSOCSIntegrator()
    s1 = method.step(family, method.initial_state(family, Q0, V0), h)
    lin = method.step_linearization(family, s1, h)
    DF = family.at(h).flow_jacobian(s1.q, s1.carry["q_next"])
    np.testing.assert_allclose(lin.A, DF, rtol=0, atol=1e-12 * np.max(np.abs(DF)))
    assert lin.basis is None  # pairs (q_k, q_{k+1}) are free: C_d open in Q×Q


def test_tangent_basis_of_a_discrete_nonholonomic_dsocs():
    """A DSOCS with ``tangent_basis`` (Rem. 3.4, C_d ⊂ 𝒟_d) returns the bases and A, B in
    them; A maps the tangent space at (q_k, q_{k+1}) into the one at (q_{k+1}, q_{k+2})
    (the discrete constraint is kept to first order)."""
    h = 0.1
    Ld = TwoPointLagrangian.mechanical(np.eye(3), lambda q: np.zeros(np.shape(q)), h,
                                       potential=lambda q: np.zeros(np.shape(q)[:-1]))

    def gd(q0, q1):  # midpoint discretization of dz − y dx = 0
        return ((q1[..., 2] - q0[..., 2])
                - 0.5 * (q0[..., 1] + q1[..., 1]) * (q1[..., 0] - q0[..., 0]))[..., None]

    def A(q):
        return np.stack([-q[..., 1], np.zeros_like(q[..., 0]), np.ones_like(q[..., 0])],
                        -1)[..., None, :]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ds = DSOCS.from_discrete_nonholonomic(Ld, gd, A, h=h)
    q0 = np.array([0.0, 0.3, 0.0])
    q1 = np.array([0.1, 0.35, 0.0])
    q1[2] = q0[2] + 0.5 * (q0[1] + q1[1]) * (q1[0] - q0[0])  # g_d(q0, q1) = 0
    method = DSOCSIntegrator(start="paper")  # no continuous system: the paper's start
    s0 = method.initial_state(ds, q0, (q1 - q0) / h)
    s0 = attrs.evolve(s0, carry={**s0.carry, "q_next": q1})
    lin = method.step_linearization(ds, s0, h)
    assert lin.basis.shape == (6, 5) and lin.next_basis.shape == (6, 5)
    # A·(tangent) stays tangent: its component off the next tangent space is ~0
    img = lin.A @ lin.basis
    off = img - lin.next_basis @ (lin.next_basis.T @ img)
    assert np.max(np.abs(off)) <= 1e-9 * np.max(np.abs(img))
    np.testing.assert_allclose(lin.A_tangent, lin.next_basis.T @ lin.A @ lin.basis)


def test_wrong_force_derivatives_are_reported_before_the_first_step():
    """``force_derivatives`` is checked against central differences of ``force`` once, before
    the first step (DerivativeError naming it)."""

    def wrong(q, v, u):
        Fq, Fv, Fu = force_derivatives(q, v, u)
        return Fq, 2.0 * Fv, Fu

    system = forced_particle(force_derivatives=wrong)
    with pytest.raises(DerivativeError, match="force_derivatives"):
        integrate(system, DSOCSIntegrator(), Q0, V0, h=0.05, n_steps=2,
                  controls=np.zeros((2, 1)))


def test_forced_input_errors():
    """Bad forced input raises InputError subclasses naming the argument and the fix."""
    Ld = TwoPointLagrangian(lambda a, b: b - a, lambda a, b: a - b)
    V = VariationalConstraint(basis=lambda a, b, c: np.eye(2)[None], depends_on=())
    with pytest.raises(DSOCSInputError, match="from_continuous"):
        DSOCS(Ld, None, V, force=force)
    with pytest.raises(DSOCSInputError, match="need a force"):
        DSOCS(Ld, None, V, n_controls=1)
    with pytest.raises(DSOCSInputError, match=r"^force_derivatives must be a callable"):
        forced_particle(force_derivatives=3)
    with pytest.raises(DSOCSInputError, match=r"^force must be a callable"):
        attrs.evolve(curvature_particle_dsocs(k_var, closed_form=False), force=np.zeros(2))
    system = forced_particle()
    method = DSOCSIntegrator()
    with pytest.raises(InputError, match="n_controls=1"):
        integrate(system, method, Q0, V0, h=0.05, n_steps=2)
    with pytest.raises(InputError, match=r"shape \(\.\.\., 1\)"):
        method.step(system, method.initial_state(system, Q0, V0), 0.05, u=np.zeros(2))
    closed = curvature_particle_dsocs(1.0, 0.05)
    with warnings.catch_warnings():  # evolving a DSOCS that holds the deprecated solver=
        warnings.simplefilter("ignore", DeprecationWarning)
        closed_forced = attrs.evolve(closed, force=force, n_controls=1)
    with pytest.raises(DSOCSInputError, match="solver"):
        method.step(closed_forced, method.initial_state(closed, Q0, V0), 0.05,
                    u=np.zeros(1))
    custom = DSOCSIntegrator(start=lambda q0, v0, h: q0 + h * v0)
    with pytest.raises(LinearizationNotSupportedError, match="take the first step"):
        custom.step_linearization(system, custom.initial_state(system, Q0, V0), 0.05,
                                  u=np.zeros(1))
