"""The residual-builder hooks, exercised by writing the nonholonomic PRK of eq. (14)
(paper eq. (14), App. D) on top of ``prk_residual`` / ``solve_stages``: hook (i) the force A(Q)ᵀΛ,
hook (ii) the IIIA-weighted momentum constraints Φ(Q^i, v_k^i) = 0 for i = 2..s, hook (iii)
Λ^1 = λ_k fixed. Theorem 5.2: q, p of order 2s − 2."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    InputError,
    LinearVelocityConstraint,
    MechanicalSystem,
    NewtonOptions,
    PRKStep,
    StageHooks,
    State,
    coefficients_from,
    prk_residual,
    reference_solution,
    solve_stages,
)
from chetaev.discrete_lagrangian.testing import (
    assert_rounding_close,
    double_pendulum,
    fit_order,
    henon_heiles,
    newton_residual_bound,
)
from chetaev.rktableaux import lobatto_iiia_iiib


class NHHooks:
    """Eq. (14) for Φ = A(q)v with constant mass."""

    def __init__(self, system, s, m):
        self.system, self.c = system, system.constraint
        self.m = m
        self.free = (False,) + (True,) * (s - 1)  # hook (iii): Λ^1 = λ_k is given

    def force(self, Q, V, Lam, jacobian):  # hook (i)
        A = self.c.matrix(Q)  # (..., s, m, n)
        F = np.einsum("...iak,...ia->...ik", A, Lam)
        if not jacobian:
            return F, None, None, None
        dA = self.c.matrix_grad(Q)  # [.., a, k, l] = ∂A_ak/∂q_l
        return F, np.einsum("...iakl,...ia->...ikl", dA, Lam), None, np.swapaxes(A, -1, -2)

    def equations(self, ev):  # hook (ii)
        a = ev.coeffs.a
        Minv = self.system.system._Minv
        pk = ev.p[..., None, :] + ev.h * (a @ ev.W)  # IIIA weights (14d)
        vk = pk @ Minv.T
        Q = ev.Q[..., 1:, :]
        A = self.c.matrix(Q)
        R = np.einsum("...iak,...ik->...ia", A, vk[..., 1:, :])
        R = R.reshape((*R.shape[:-2], -1))
        if ev.dW_dx is None:
            return R, None
        dvk = Minv @ (ev.h * np.einsum("ij,...jkN->...ikN", a, ev.dW_dx))[..., 1:, :, :]
        dA = self.c.matrix_grad(Q)
        J = (np.einsum("...iakl,...ik,ilN->...iaN", dA, vk[..., 1:, :], ev.dQ_dx[1:])
             + A @ dvk)
        return R, J.reshape((*J.shape[:-3], -1, J.shape[-1]))


def _system():
    def V(q):
        return 0.5 * np.sum(q * q, -1) + 0.1 * q[..., 0] ** 3

    def dV(q):
        g = np.array(q, dtype=float)
        g[..., 0] += 0.3 * q[..., 0] ** 2
        return g

    def A(q):
        z = np.zeros_like(q[..., 0])
        return np.stack([-q[..., 1], z, np.ones_like(z)], -1)[..., None, :]

    def dA(q):
        z = np.zeros_like(q[..., 0])
        zero = np.stack([z, z, z], -1)
        row0 = np.stack([z, -np.ones_like(z), z], -1)
        return np.stack([row0, zero, zero], -2)[..., None, :, :]

    return ConstrainedSystem(MechanicalSystem(np.diag([1.0, 2.0, 0.5]), V, dV),
                             LinearVelocityConstraint(A, dA=dA))


def _nhprk(system, s, q0, v0, h, n):
    coeffs = coefficients_from(lobatto_iiia_iiib(s))
    q, p = q0, system.legendre(q0, v0)
    lam = system.multiplier(q0, v0)  # consistent λ₀ (paper §3, A4)
    for k in range(n):
        hooks = NHHooks(system, s, 1)
        V0 = np.broadcast_to(system.legendre_inv(q, p), (s, 3))
        x0 = np.concatenate([V0.ravel(), np.repeat(lam, s - 1)])
        lam_fixed = np.broadcast_to(lam, (s, 1))
        sol = solve_stages(x0, q, p, h, coeffs, system, hooks, NewtonOptions(),
                           State(t=k * h, q=q, v=V0[0], n=k), lam_fixed=lam_fixed)
        q, p, lam = sol.ev.q1, sol.ev.p1, sol.ev.Lam[-1]
    return q, p, lam


@pytest.mark.parametrize(("s", "expected"), [(2, 2), (3, 4), (4, 6)])
def test_nonholonomic_prk_through_hooks(s, expected):
    system = _system()
    q0 = np.array([0.3, 0.2, -0.1])
    v0 = np.array([0.5, -0.4, 0.0])
    v0[2] = q0[1] * v0[0]  # on the constraint v3 = q2 v1
    T = 1.0
    ref = reference_solution(system, q0, v0, [0.0, T])
    hs = [1 / 4, 1 / 5, 1 / 6, 1 / 8, 1 / 10] if s == 4 else [0.1, 0.05, 0.025]
    errs = []
    for h in hs:
        q, p, _ = _nhprk(system, s, q0, v0, h, round(T / h))
        errs.append(max(np.max(np.abs(q - ref.q[-1])), np.max(np.abs(p - ref.p[-1]))))
        v = system.legendre_inv(q, p)
        # Ψ(q_{k+1}, p_{k+1}) = 0 (stage s), solved by Newton: derived bound (S = 1 here:
        # 1.0e-12); measured worst 7.1e-16
        bound = newton_residual_bound(NewtonOptions().tol, q0, v0)
        assert abs(system.residual(q, v)[0]) <= bound
    # deterministic method error; measured: |slope − order| worst 0.013 at these h and 0.032
    # with every h scaled by F in [0.8, 1.25] (tol_e_orders.py): margin 7.8
    assert abs(fit_order(hs, errs, 1e-11) - expected) <= 0.25, errs


@pytest.mark.parametrize("name", ["henon_heiles", "double_pendulum_general"])
@pytest.mark.parametrize("layout", ["single", "flat", "staged"])
def test_per_step_protocol_equals_the_generic_protocol(name, layout):
    """The engine's two readings of the same stage arrays agree: the per-step protocol
    (``PRKStep``: Kronecker-structured Jacobian; one trajectory, a flat batch, the
    stage-major layout) and the generic one (``prk_residual``: the tangent-form Jacobian),
    residual, Jacobian and node values (Thm. 4.2), for the unconstrained VPRK: constant mass
    (Hénon–Heiles) and a general Lagrangian (the double pendulum's configuration-dependent
    mass)."""
    system = henon_heiles() if name == "henon_heiles" else double_pendulum(general=True)
    s, n, h = 3, system.n, 0.1
    coeffs = coefficients_from(lobatto_iiia_iiib(s))
    rng = np.random.default_rng(5)
    lead = () if layout == "single" else (4,)
    q, p = 0.3 * rng.normal(size=(*lead, n)), 0.3 * rng.normal(size=(*lead, n))
    x = 0.3 * rng.normal(size=(*lead, s * n))
    step = PRKStep(q, p, h, coeffs, system, StageHooks(s), staged=layout == "staged")
    R, J, ev = prk_residual(x, q, p, h, coeffs, system)
    # the residual is one coding (same operations in the same order, up to the stage-major
    # transposition): bitwise
    assert np.array_equal(step.residual(x), R)
    # the Jacobians sum the same terms in another order (O(1) terms): round-off
    nt = s * n
    assert_rounding_close(step.jacobian(x), J, n_terms=nt, scale=max(1.0, np.abs(J).max()),
                          what="J")
    step.residual(x)
    for got, want in zip(step.node_values(), (ev.q1, ev.p1)):
        assert_rounding_close(got, want, n_terms=nt, scale=max(1.0, np.abs(want).max()),
                              what="node values")


def test_per_step_form_reads_hooks_with_whole_evaluation_equations():
    """Hooks written with ``equations(ev)`` only are read by ``PRKStep`` through the generic
    protocol (same residual and Jacobian as ``prk_residual``); hooks with free multipliers and
    no equations at all, and the stage-major layout with such hooks, are refused with the fix
    named."""
    system = _system()
    coeffs = coefficients_from(lobatto_iiia_iiib(3))
    rng = np.random.default_rng(2)
    q, p = 0.3 * rng.normal(size=3), 0.3 * rng.normal(size=3)
    x = 0.3 * rng.normal(size=3 * 3 + 2)
    lam = np.full((1, 1), 0.2)
    hooks = NHHooks(system, 3, 1)
    step = PRKStep(q, p, 0.1, coeffs, system, hooks, lam)
    R, J, _ev = prk_residual(x, q, p, 0.1, coeffs, system, hooks, lam)
    assert np.array_equal(step.residual(x), R)
    assert np.array_equal(step.jacobian(x), J)

    class NoEquations:
        m = 1

        def __init__(self, s):
            self.free = (False,) + (True,) * (s - 1)

        def force(self, Q, V, Lam, jacobian):
            return None, None, None, None

    with pytest.raises(InputError, match=r"equations\(ev\)"):
        PRKStep(q, p, 0.1, coeffs, system, NoEquations(3), lam)
    qb = np.zeros((2, 3))
    with pytest.raises(InputError, match="staged=False"):
        PRKStep(qb, qb, 0.1, coeffs, system, hooks, np.zeros((2, 1, 1)), staged=True)


class _HamiltonianUnknowns(StageHooks):
    """The unconstrained VPRK on the engine's Hamiltonian unknowns x = [Q, P]."""

    unknowns = "QP"


def _fd_jacobian(fun, x, eps=1e-6):
    cols = []
    for j in range(x.shape[-1]):
        e = np.zeros_like(x)
        e[..., j] = eps
        cols.append((fun(x + e) - fun(x - e)) / (2 * eps))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("name", ["henon_heiles", "double_pendulum_general"])
def test_hamiltonian_unknowns_give_the_same_step(name):
    """Hamiltonian unknowns (hooks.unknowns = "QP", V^i = FL^{-1}(Q^i, P^i)) and the
    Lagrangian unknowns V^i are the same equations (Thm. 4.2 composed with the Legendre map):
    the converged steps agree, single and batched, and the analytic Jacobian of the
    Hamiltonian unknowns matches central differences; a constant mass (Hénon–Heiles,
    dV = M^{-1} dP) and a configuration-dependent one (the double pendulum, dV = g^{-1}(dP -
    D21L dQ))."""
    system = henon_heiles() if name == "henon_heiles" else double_pendulum(general=True)
    s, n, h = 3, system.n, 0.1
    coeffs = coefficients_from(lobatto_iiia_iiib(s))
    rng = np.random.default_rng(7)
    opts = NewtonOptions(tol=1e-14)
    for lead in ((), (3,)):
        q = 0.3 * rng.normal(size=(*lead, n))
        v = 0.3 * rng.normal(size=(*lead, n))
        p = system.legendre(q, v)
        state = State(t=0.0, q=q, v=v, n=0)
        xV = np.repeat(v[..., None, :], s, axis=-2).reshape(*lead, s * n)
        Q0 = q[..., None, :] + h * coeffs.c[:, None] * v[..., None, :]
        P0 = np.repeat(p[..., None, :], s, axis=-2)
        xQP = np.concatenate([Q0.reshape(*lead, -1), P0.reshape(*lead, -1)], axis=-1)
        lag = solve_stages(xV, q, p, h, coeffs, system, StageHooks(s), opts, state)
        ham = solve_stages(xQP, q, p, h, coeffs, system, _HamiltonianUnknowns(s), opts, state)
        # two solves of the same equations with other unknowns, each to tol x scale:
        # bound newton_residual_bound (derived in its docstring); measured worst 1.1e-15
        # over 20 seeds x 2 systems x (single, batch), OPENBLAS_NUM_THREADS=1 and unset:
        # margin >= 20
        bound = newton_residual_bound(opts.tol, q, v)
        assert np.max(np.abs(lag.ev.q1 - ham.ev.q1)) <= bound
        assert np.max(np.abs(lag.ev.p1 - ham.ev.p1)) <= bound
        x = ham.x + 0.1 * rng.normal(size=ham.x.shape)
        hooks = _HamiltonianUnknowns(s)
        J = prk_residual(x, q, p, h, coeffs, system, hooks)[1]
        Jfd = _fd_jacobian(lambda xx, q=q, p=p, hk=hooks: prk_residual(
            xx, q, p, h, coeffs, system, hk, jacobian=False)[0], x)
        # central differences, eps = 1e-6: truncation O(eps^2 |R'''|) + rounding
        # O(eps_mach |R| / eps) ~ 1e-10, plus the double pendulum's Legendre inverse (Newton)
        # at its tolerance / eps; measured worst 1.4e-10 x max(1, |J|) over the 80 cases
        # above; bound 1e-6 x max(1, |J|) (the FD noise of an iterative inverse): margin 7e3
        np.testing.assert_allclose(J, Jfd, rtol=0, atol=1e-6 * max(1.0, np.abs(J).max()))


def test_hamiltonian_unknowns_need_legendre_inv():
    """Hamiltonian unknowns without the system's legendre_inv: an InputError naming it."""

    class NoInverse:
        n = 2

        def D1L(self, q, v):
            return -q

        def D2L(self, q, v):
            return v

    coeffs = coefficients_from(lobatto_iiia_iiib(2))
    with pytest.raises(InputError, match="legendre_inv"):
        prk_residual(np.zeros(8), np.zeros(2), np.zeros(2), 0.1, coeffs, NoInverse(),
                     _HamiltonianUnknowns(2))


def test_unknowns_hook_is_checked():
    """An unknown ``hooks.unknowns`` is refused with the two choices named."""
    hooks = _HamiltonianUnknowns(2)
    hooks.unknowns = "PQ"
    coeffs = coefficients_from(lobatto_iiia_iiib(2))
    with pytest.raises(InputError, match="'V' or 'QP'"):
        prk_residual(np.zeros(8), np.zeros(2), np.zeros(2), 0.1, coeffs, henon_heiles(), hooks)
