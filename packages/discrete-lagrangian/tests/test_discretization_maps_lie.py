"""Tests of the Lie-group discretization-map integrators (paper §6; the project's
SO(3)×R³ heavy-top benchmark).

Problems: the heavy top on SO(3) (V(R) = m g e₃ᵀRχ, inertia about the pivot) as a bare
TrivializedMechanicalSystem, and the heavy top as a constrained system on SO(3)×R³ with
φ(R, x) = x − Rχ and ℓ(R, x) = [R χ̂ | I₃] (the project's SO(3)×R³ heavy-top benchmark).
References:
``reference_solution``
(scipy DOP853 on the Euler–Poincaré equations with reconstruction, rtol = atol = 1e-13).
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    ConstraintViolationError,
    HolonomicConstraint,
    InputError,
    MechanicalSystem,
    Method,
    NewtonOptions,
    TrivializedMechanicalSystem,
    integrate,
    reference_solution,
)
from chetaev.discrete_lagrangian.discretization_maps import (
    DiscretizationMapMethod,
    LieDiscretizationMapMethod,
    euler_ba,
    rattle,
)
from chetaev.discrete_lagrangian.methods._dmaps_lie import _momentum_jac, lie_interface
from chetaev.discrete_lagrangian.testing import fit_order, newton_residual_bound
from chetaev.liegroups import SO3, Product, Rn, retraction

# --------------------------------------------------------------------------------------------
# Problems (the project's heavy-top benchmarks)
# --------------------------------------------------------------------------------------------
G_ACC = 9.81
MASS = 1.5
CHI = np.array([0.1, 0.2, 0.5])
I_BODY = np.diag([1.0, 2.0, 3.0])
I_PIVOT = I_BODY + MASS * (CHI @ CHI * np.eye(3) - np.outer(CHI, CHI))
E3 = np.array([0.0, 0.0, 1.0])
R0 = SO3.exp(np.array([0.3, -0.2, 0.4]))
W0 = np.array([0.5, -1.0, 2.0])


def V_top(R):
    return MASS * G_ACC * np.einsum("i,...ij,j->...", E3, R, CHI)


def grad_V_top(R):
    """Left-trivialized gradient: d/dε V(R exp(εη)) = m g η·(χ × Rᵀe₃)."""
    return MASS * G_ACC * np.cross(CHI, np.einsum("...ji,j->...i", R, E3))


TOP = TrivializedMechanicalSystem(SO3, I_PIVOT, V_top, grad_V_top)

SE = Product(SO3, Rn(3))
I6 = np.zeros((6, 6))
I6[:3, :3] = I_BODY
I6[3:, 3:] = MASS * np.eye(3)


def _hat(v):
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def _parts(g):
    return g[..., :3, :3], g[..., 3:6, 6]


def V6(g):
    return MASS * G_ACC * _parts(g)[1][..., 2]


def grad_V6(g):
    out = np.zeros((*g.shape[:-2], 6))
    out[..., 5] = MASS * G_ACC
    return out


def phi6(g):
    R, x = _parts(g)
    return x - np.einsum("...ij,j->...i", R, CHI)


def ell6(g):
    R, _ = _parts(g)
    out = np.zeros((*g.shape[:-2], 3, 6))
    out[..., :, :3] = R @ _hat(CHI)
    out[..., :, 3:] = np.eye(3)
    return out


TOP6 = ConstrainedSystem(TrivializedMechanicalSystem(SE, I6, V6, grad_V6),
                         HolonomicConstraint(phi6, ell6))
G0 = SE.from_parts([R0, R0 @ CHI])
XI0 = np.concatenate([W0, R0 @ np.cross(W0, CHI)])

KINDS = ["euler_a", "euler_b", "lobatto2", "rattle"]
ORDERS = {"euler_a": 1, "euler_b": 1, "lobatto2": 2, "rattle": 2}
CASES = [(k, r) for k in KINDS for r in ("exp", "cayley")]

_REF = reference_solution(TOP, R0, W0, np.array([0.0, 1.0]))
R_REF, W_REF = _REF.q[-1], _REF.v[-1]


def _err(traj):
    """‖R − R_ref‖_F + ‖Ω − Ω_ref‖ (the metric of the project's heavy-top benchmarks)."""
    R = traj.q[-1][:3, :3]
    return np.linalg.norm(R - R_REF) + np.linalg.norm(traj.v[-1][:3] - W_REF)



# --------------------------------------------------------------------------------------------
# Orders
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,ret", CASES, ids=[f"{k}-{r}" for k, r in CASES])
def test_order_heavy_top_SO3(kind, ret):
    method = LieDiscretizationMapMethod(kind, retraction=ret)
    assert method.order == ORDERS[kind]
    hs = 0.05 / 2.0 ** np.arange(3)
    errs = []
    for h in hs:
        traj = integrate(TOP, method, R0, W0, h=h, t_final=1.0)
        assert traj.success, traj.message
        errs.append(_err(traj))
    p = fit_order(hs, errs)
    assert abs(p - ORDERS[kind]) <= 0.25, (p, errs)


# the project's SO(3)×R³ heavy-top benchmark: an independent numpy check's errors at T = 1, h = 0.05
B5_K0 = {("euler_a", "exp"): 0.13849001, ("euler_b", "exp"): 0.14195885,
         ("lobatto2", "exp"): 7.00901e-3, ("rattle", "exp"): 8.65642e-3,
         ("euler_a", "cayley"): 0.14183553, ("euler_b", "cayley"): 0.15181278,
         ("lobatto2", "cayley"): 1.126307e-2, ("rattle", "cayley"): 1.260393e-2}


@pytest.mark.parametrize("kind,ret", CASES, ids=[f"{k}-{r}" for k, r in CASES])
def test_order_heavy_top_constrained_SO3xR3(kind, ret):
    """The §6 methods on SO(3)×R³ with φ = x − Rχ, against the pivot reference."""
    method = LieDiscretizationMapMethod(kind, retraction=ret)
    hs = 0.05 / 2.0 ** np.arange(3)
    errs = []
    for h in hs:
        traj = integrate(TOP6, method, G0, XI0, h=h, t_final=1.0)
        assert traj.success, traj.message
        errs.append(_err(traj))
        assert np.max(np.abs(traj.constraint_residual(kind="position"))) < 1e-14
    assert errs[0] == pytest.approx(B5_K0[(kind, ret)], rel=1e-5)
    p = fit_order(hs, errs)
    assert abs(p - ORDERS[kind]) <= 0.25, (p, errs)


def test_constrained_reference_agrees_with_pivot_reference():
    """The SO(3)×R³ formulation and the pivot top describe the same motion (independence
    check of the two references used above)."""
    ref6 = reference_solution(TOP6, G0, XI0, np.array([0.0, 1.0]))
    # measured: 7.8e-12 (R), 2.2e-11 (W) against the stored reference: margins 130, 45
    np.testing.assert_allclose(ref6.q[-1][:3, :3], R_REF, rtol=0, atol=1e-9)
    np.testing.assert_allclose(ref6.v[-1][:3], W_REF, rtol=0, atol=1e-9)


# Ex. 5.3 / the project's matrix heavy-top benchmark: the same heavy top as a vector-space
# constrained system in R^{3×3},
# q = vec(R) (row-major), L = ½ tr(Ṙ J Ṙᵀ) − m g e₃ᵀRχ, φ = the 6 entries of ½(RᵀR − I).
J_MAT = 0.5 * np.trace(I_PIVOT) * np.eye(3) - I_PIVOT
_IU = np.triu_indices(3)


def _V9(q):
    return MASS * G_ACC * np.einsum("...ij,i,j->...", q.reshape((*q.shape[:-1], 3, 3)), E3, CHI)


def _gV9(q):
    return np.broadcast_to((MASS * G_ACC * np.outer(E3, CHI)).ravel(), q.shape).copy()


def _phi9(q):
    R = q.reshape((*q.shape[:-1], 3, 3))
    S = 0.5 * (np.swapaxes(R, -1, -2) @ R - np.eye(3))
    return S[..., _IU[0], _IU[1]]


def _jac9(q):
    """∂/∂R_ab of ½(RᵀR)_ij = ½(δ_bi R_aj + δ_bj R_ai)."""
    R = q.reshape((*q.shape[:-1], 3, 3))
    eye = np.eye(3)
    J = 0.5 * (np.einsum("bi,...aj->...ijab", eye, R) + np.einsum("bj,...ai->...ijab", eye, R))
    return J[..., _IU[0], _IU[1], :, :].reshape((*q.shape[:-1], 6, 9))


MATRIX_TOP = ConstrainedSystem(
    MechanicalSystem(np.kron(np.eye(3), J_MAT), _V9, _gV9), HolonomicConstraint(_phi9, _jac9))


def test_matrix_rattle_heavy_top_B4():
    """Ex. 5.3: RATTLE on R^{3×3} with RᵀR = I imposed; order 2 against the pivot reference
    and an independent numpy check's errors 1.7295e-2, 4.2992e-3, 1.0733e-3 (h = 0.05/2^k)."""
    v0 = (R0 @ _hat(W0)).ravel()
    hs = 0.05 / 2.0 ** np.arange(3)
    errs = []
    for h in hs:
        traj = integrate(MATRIX_TOP, rattle(), R0.ravel(), v0, h=h, t_final=1.0)
        assert traj.success, traj.message
        R = traj.q[-1].reshape(3, 3)
        Rd = traj.p[-1].reshape(3, 3) @ np.linalg.inv(J_MAT)
        W = SO3.vee(R.T @ Rd)
        errs.append(np.linalg.norm(R - R_REF) + np.linalg.norm(W - W_REF))
        RtR = np.einsum("tji,tjk->tik", traj.q.reshape(-1, 3, 3), traj.q.reshape(-1, 3, 3))
        assert np.max(np.abs(RtR - np.eye(3))) < 1e-13  # Newton tol 1e-14·max(1, |M||q|)
    np.testing.assert_allclose(errs, [1.7295e-2, 4.2992e-3, 1.0733e-3], rtol=1e-4)
    assert abs(fit_order(hs, errs) - 2.0) <= 0.25


# --------------------------------------------------------------------------------------------
# Constraints, tangency, group membership along runs
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_constraints_exact_long_run(kind):
    method = LieDiscretizationMapMethod(kind, retraction="cayley")
    g0 = np.stack([G0, SE.from_parts([np.eye(3), CHI])])
    xi0 = np.stack([XI0, np.concatenate([[1.0, 0.0, 0.0], np.cross([1.0, 0.0, 0.0], CHI)])])
    n_steps = 160
    traj = integrate(TOP6, method, g0, xi0, h=0.05, n_steps=n_steps)
    assert traj.success, traj.message
    assert np.max(np.abs(traj.constraint_residual(kind="position"))) < 1e-14
    assert np.max(np.abs(traj.constraint_residual(kind="velocity"))) < 1e-13
    R = traj.q[..., :3, :3]
    orth = np.einsum("...ji,...jk->...ik", R, R) - np.eye(3)
    assert np.max(np.abs(orth)) < 1e-13
    # energy: bounded (O(h^order) oscillation, E0 = 15.7 and 8.1), no drift between halves
    dE = np.abs(traj.energy() - traj.energy()[0])
    assert np.max(dE) < (1.5 if ORDERS[kind] == 1 else 0.1)
    half = n_steps // 2
    assert np.all(np.max(dE[half:], axis=0) < 1.5 * np.max(dE[:half], axis=0))


# --------------------------------------------------------------------------------------------
# Symplecticity on Leg(TN) with the form (A.3) (the docs' discretization-maps page, Lie version)
# --------------------------------------------------------------------------------------------
def _omega(group, alpha, a, b):
    """(A.3): ω((ξ1,ν1),(ξ2,ν2)) = −⟨ν1,ξ2⟩ + ⟨ν2,ξ1⟩ + ⟨α,[ξ1,ξ2]⟩ for all pairs."""
    d = group.dim
    xa, na = a[:, :d], a[:, d:]
    xb, nb = b[:, :d], b[:, d:]
    br = np.einsum("kij,ai,bj->abk", _ad_tensor(group), xa, xb)  # [ξa, ξb]
    return -na @ xb.T + xa @ nb.T + br @ alpha


def _ad_tensor(group):
    """c[k, i, j] with [e_i, e_j] = Σ_k c[k, i, j] e_k."""
    d = group.dim
    return np.stack([group.ad(e) for e in np.eye(d)], axis=1)  # [k, i, j] = ad(e_i)[k, j]


def _lie_proj(system, g, alpha):
    """Retraction onto Leg(TN): put x = Rχ, project α along ℓᵀ (identity if unconstrained)."""
    if not hasattr(system, "constraint"):
        return g, alpha
    R, _ = _parts(g)
    g = SE.from_parts([R, np.einsum("...ij,j->...i", R, CHI)])
    ell = ell6(g)
    Iinv = np.linalg.inv(I6)
    A = ell @ Iinv
    C = A @ np.swapaxes(ell, -1, -2)
    mu = -np.linalg.solve(C, np.einsum("...ij,...j->...i", A, alpha)[..., None])[..., 0]
    return g, alpha + np.einsum("...ki,...k->...i", ell, mu)


def lie_symplecticity_defect(system, method, g_bar, xi_bar, h=0.1, eps=1e-5):
    group = system.group
    d = group.dim
    method = attrs.evolve(method, newton=NewtonOptions(tol=1e-15))
    s_bar = method.initial_state(system, g_bar, xi_bar)
    a_bar = s_bar.p

    def chart_in(z):
        g = group.compose(g_bar, group.exp(z[..., :d]))
        return _lie_proj(system, g, a_bar + z[..., d:])

    def chart_read(g, alpha, g_ref, a_ref):
        return np.concatenate([group.log(group.compose(group.inverse(g_ref), g)),
                               alpha - a_ref], axis=-1)

    # basis of T Leg(TN) in the chart: column space of the FD Jacobian of proj
    E = np.eye(2 * d)
    Zp = chart_read(*chart_in(1e-6 * E), g_bar, a_bar)
    Zm = chart_read(*chart_in(-1e-6 * E), g_bar, a_bar)
    J = ((Zp - Zm) / 2e-6).T
    U, S, _ = np.linalg.svd(J)
    rank = int(np.sum(S > 1e-6 * S[0]))
    U = U[:, :rank]
    gs, als = chart_in(np.concatenate([eps * U.T, -eps * U.T]))
    s = attrs.evolve(s_bar, q=gs, p=als, v=np.einsum("ij,...j->...i",
                                                    np.linalg.inv(system.inertia), als))
    out = method.step(system, s, h)
    ref = method.step(system, s_bar, h)
    Y = chart_read(out.q, out.p, ref.q, ref.p)
    DU = (Y[:rank] - Y[rank:]) / (2 * eps)
    return float(np.max(np.abs(_omega(group, ref.p, DU, DU) - _omega(group, a_bar, U.T, U.T))))


@attrs.frozen
class ExplicitLieEuler(Method):
    """Non-symplectic control: g1 = g0 exp(hξ0), α1 = α0 + h(ad*_ξ0 α0 − f(g0)), projected."""

    newton: NewtonOptions = attrs.field(factory=NewtonOptions)
    name = "explicit Lie Euler + projection (control)"

    def _initial_state_impl(self, system, q0, v0, t0=0.0):
        return LieDiscretizationMapMethod("euler_a").initial_state(system, q0, v0, t0)

    def _step_impl(self, system, state, h):
        group = system.group
        xi = state.v
        adstar = np.einsum("...ji,...j->...i", group.ad(xi), state.p)
        g1 = group.compose(state.q, group.exp(h * xi))
        a1 = state.p + h * (adstar - system.gradV(state.q))
        g1, a1 = _lie_proj(system, g1, a1)
        Iinv = np.linalg.inv(system.inertia)
        return attrs.evolve(state, t=state.t + h, q=g1, p=a1, v=a1 @ Iinv.T, n=state.n + 1)


@pytest.mark.parametrize("kind,ret", CASES, ids=[f"{k}-{r}" for k, r in CASES])
def test_symplectic_SO3(kind, ret):
    method = LieDiscretizationMapMethod(kind, retraction=ret)
    assert lie_symplecticity_defect(TOP, method, R0, W0) < 1e-8


@pytest.mark.parametrize("kind", KINDS)
def test_symplectic_on_constraint_manifold_SO3xR3(kind):
    method = LieDiscretizationMapMethod(kind, retraction="exp")
    assert lie_symplecticity_defect(TOP6, method, G0, XI0) < 1e-8


@pytest.mark.parametrize("system,g,xi", [(TOP, R0, W0), (TOP6, G0, XI0)], ids=["SO3", "SO3xR3"])
def test_symplecticity_check_detects_a_non_symplectic_control(system, g, xi):
    assert lie_symplecticity_defect(system, ExplicitLieEuler(), g, xi) > 1e-3


# --------------------------------------------------------------------------------------------
# Structure: reduction to the vector-space methods, symmetry, analytic Jacobian
# --------------------------------------------------------------------------------------------
def _sphere_phi(q):
    return 0.5 * (np.sum(q * q, axis=-1, keepdims=True) - 1.0)


def _sphere_jac(q):
    return np.asarray(q)[..., None, :].copy()


def _V(q):
    return G_ACC * q[..., 2] + 1.5 * q[..., 0] ** 2


def _gV(q):
    return np.stack([3.0 * q[..., 0], np.zeros(q.shape[:-1]), np.full(q.shape[:-1], G_ACC)],
                    axis=-1)


@pytest.mark.parametrize(
    "kind,euclid",
    [("euler_a", DiscretizationMapMethod(0.0)), ("euler_b", DiscretizationMapMethod(1.0)),
     ("lobatto2", euler_ba()), ("rattle", rattle())],
    ids=KINDS)
def test_reduces_to_euclidean_methods_on_Rn(kind, euclid):
    """For G = R³ (τ(ξ) = ξ) the Lie methods are the vector-space ones (see the docs'
    discretization-maps page)."""
    lie_sys = ConstrainedSystem(TrivializedMechanicalSystem(Rn(3), np.eye(3), _V, _gV),
                                HolonomicConstraint(_sphere_phi, _sphere_jac))
    vec_sys = ConstrainedSystem(MechanicalSystem(np.eye(3), _V, _gV),
                                HolonomicConstraint(_sphere_phi, _sphere_jac))
    q0 = np.array([np.sin(1.0), 0.0, -np.cos(1.0)])
    v0 = np.array([0.0, 1.0, 0.0])
    a = integrate(lie_sys, LieDiscretizationMapMethod(kind), q0, v0, h=0.05, n_steps=20)
    b = integrate(vec_sys, euclid, q0, v0, h=0.05, n_steps=20)
    # Two solvers (tol 1e-14 each), 20 steps: derived bound (was atol 1e-13 / 1e-12 with the
    # default rtol = 1e-7). measured: 4.3e-14 (q), 8.6e-14 (p) over the 4 kinds: margins 23, 12.
    bound = 20 * 2 * newton_residual_bound(1e-14, q0, v0)
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=bound)
    np.testing.assert_allclose(a.p, b.p, rtol=0, atol=bound)


@pytest.mark.parametrize("kind", ["lobatto2", "rattle"])
def test_symmetric_kinds_are_reversible(kind):
    method = attrs.evolve(LieDiscretizationMapMethod(kind, "cayley"),
                          newton=NewtonOptions(tol=1e-15))
    s0 = method.initial_state(TOP6, G0, XI0)
    s1 = method.step(TOP6, s0, 0.1)
    s2 = method.step(TOP6, s1, -0.1)
    assert np.max(np.abs(s2.q - s0.q)) < 1e-13
    assert np.max(np.abs(s2.p - s0.p)) < 1e-12


def test_euler_a_and_b_are_adjoint():
    A = attrs.evolve(LieDiscretizationMapMethod("euler_a", "exp"),
                     newton=NewtonOptions(tol=1e-15))
    B = attrs.evolve(LieDiscretizationMapMethod("euler_b", "exp"),
                     newton=NewtonOptions(tol=1e-15))
    s0 = A.initial_state(TOP6, G0, XI0)
    s2 = A.step(TOP6, B.step(TOP6, s0, 0.1), -0.1)
    assert np.max(np.abs(s2.q - s0.q)) < 1e-13
    s2 = A.step(TOP6, A.step(TOP6, s0, 0.1), -0.1)
    assert np.max(np.abs(s2.q - s0.q)) > 1e-4


@pytest.mark.parametrize("ret", ["exp", "cayley"])
@pytest.mark.parametrize("which", ["dL_inv", "dR_inv"])
def test_momentum_jacobian_against_finite_differences(ret, which):
    iface = lie_interface(TOP)
    tau = retraction(iface.group, ret)
    xi = np.array([0.7, -0.4, 1.1])
    c = 0.3
    J = _momentum_jac(iface, tau, which, c, xi)

    def F(x):
        return np.einsum("...ji,j->...i", getattr(tau, which)(c * x), I_PIVOT @ x)

    eps = 1e-6
    Jfd = np.stack([(F(xi + eps * e) - F(xi - eps * e)) / (2 * eps) for e in np.eye(3)],
                   axis=-1)
    # measured: 4.6e-10 (central FD): margin 22
    np.testing.assert_allclose(J, Jfd, rtol=0, atol=1e-8)


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------
def test_bad_kind_and_retraction():
    with pytest.raises(InputError, match="`kind` must be one of"):
        LieDiscretizationMapMethod("verlet")
    with pytest.raises(InputError, match="`retraction` must be 'cayley' or 'exp'"):
        LieDiscretizationMapMethod("rattle", retraction="qr")


def test_bad_step_size():
    method = LieDiscretizationMapMethod("rattle")
    s = method.initial_state(TOP, R0, W0)
    with pytest.raises(InputError, match="step size `h` must be finite and nonzero"):
        method.step(TOP, s, 0.0)


def test_vector_space_system_rejected():
    sys = ConstrainedSystem(MechanicalSystem(np.eye(3), _V, _gV),
                            HolonomicConstraint(_sphere_phi, _sphere_jac))
    with pytest.raises(InputError, match="use DiscretizationMapMethod"):
        LieDiscretizationMapMethod("rattle").initial_state(sys, np.array([0, 0, -1.0]),
                                                           np.zeros(3))


def test_initial_data_off_constraint():
    with pytest.raises(ConstraintViolationError, match="Project g0 onto"):
        LieDiscretizationMapMethod("rattle").initial_state(
            TOP6, SE.from_parts([R0, R0 @ CHI + 0.1]), XI0)
    with pytest.raises(ConstraintViolationError, match="ker ℓ"):
        LieDiscretizationMapMethod("rattle").initial_state(TOP6, G0, XI0 + 0.1)
