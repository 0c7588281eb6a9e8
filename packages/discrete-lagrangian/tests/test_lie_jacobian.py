"""Analytic Newton Jacobian of the Lie-group VPRK residual (issue 4: analytic when the system
gives second derivatives, finite differences otherwise).

The exact chain-rule Jacobian ``lie_prk_jacobian`` is compared with a fourth-order
(Richardson) central-difference Jacobian of the residual (26) itself, on the heavy top on SO(3)
and on a non-mechanical Lagrangian on SO(3)×R² with velocity–configuration coupling (so that
every second-derivative block D11ℓ, D12ℓ, D21ℓ, D22ℓ enters), for both retractions and two
symplectic pairs; then whole trajectories with the analytic and the finite-difference Jacobian
are compared (same Newton tolerance, so they agree to that tolerance).  The holonomic §6.3
version (multipliers Λ^i, constraint and tangency equations) is checked the same way on the
heavy top with the constraint e₃·R e₁ = 0.
"""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    HolonomicConstraint,
    LieVPRK,
    NewtonOptions,
    TrivializedLagrangianSystem,
    integrate,
    interface_of,
)
from chetaev.discrete_lagrangian.core._lie_prk import (
    lie_prk_jacobian,
    lie_prk_residual,
)
from chetaev.discrete_lagrangian.core._prk import coefficients_from
from chetaev.discrete_lagrangian.methods._lie_vprk import LieHolonomicStageHooks
from chetaev.discrete_lagrangian.testing import (
    assert_rounding_close,
    heavy_top,
    newton_residual_bound,
)
from chetaev.liegroups import SO3, Product, Rn, retraction
from chetaev.rktableaux import gauss, lobatto_iiia_iiib

SO3R2 = Product(SO3, Rn(2))
_M = np.diag([1.0, 1.5, 2.5, 0.8, 1.2]) + 0.1 * np.ones((5, 5))
_A = np.array([0.3, -0.2, 0.5, 0.4, -0.1])
_B = np.array([0.2, 0.7, -0.4])
_C = np.array([0.5, -0.3])
_CHI = np.array([0.1, 0.2, 1.0])
_E3 = np.array([0.0, 0.0, 1.0])


def _hat(w):
    return SO3.hat(w)


def _gamma_x(g):
    return np.einsum("...ji,j->...i", g[..., :3, :3], _E3), g[..., 3:5, 5]


def _grads(g):
    """Left-trivialized gradients of φ = b·Γ + c·x and U = ½|x|² + χ·Γ (Γ = Rᵀe₃):
    d/dε Γ(R exp(ε ê_k)) = Γ × e_k, so ∇(b·Γ) = b × Γ."""
    G, x = _gamma_x(g)
    bs = G.shape[:-1]
    dphi = np.concatenate([np.cross(_B, G), np.broadcast_to(_C, (*bs, 2))], -1)
    dU = np.concatenate([np.cross(_CHI, G), x], -1)
    return G, x, dphi, dU


def _coupled_system(second_derivatives: bool = True):
    """ℓ(g, η) = ½ ηᵀMη + (a·η) φ(g) − U(g) on SO(3)×R² (a gyroscopic-like coupling)."""

    def ell(g, eta):
        G, x = _gamma_x(g)
        phi = G @ _B + x @ _C
        U = 0.5 * np.sum(x * x, -1) + G @ _CHI
        return 0.5 * np.einsum("...i,ij,...j->...", eta, _M, eta) + (eta @ _A) * phi - U

    def dl_dg(g, eta):
        _, _, dphi, dU = _grads(g)
        return (eta @ _A)[..., None] * dphi - dU

    def dl_deta(g, eta):
        G, x = _gamma_x(g)
        phi = G @ _B + x @ _C
        return eta @ _M.T + _A * phi[..., None]

    def d2_eta2(g, eta):
        return np.broadcast_to(_M, (*np.shape(eta)[:-1], 5, 5))

    def d2_eta_g(g, eta):  # [i, j] = d/dε_j D2ℓ_i = a_i ∇φ_j
        _, _, dphi, _ = _grads(g)
        return _A[:, None] * dphi[..., None, :]

    def d2_g_eta(g, eta):  # [i, j] = ∂ D1ℓ_i / ∂η_j = ∇φ_i a_j
        _, _, dphi, _ = _grads(g)
        return dphi[..., :, None] * _A

    def d2_g2(g, eta):  # (a·η) ∇²φ − ∇²U, ∇(b × Γ) = b̂ Γ̂; x-part: ∇²(c·x) = 0, ∇²(½|x|²) = I
        G, _ = _gamma_x(g)
        out = np.zeros((*G.shape[:-1], 5, 5))
        out[..., :3, :3] = ((eta @ _A)[..., None, None] * (_hat(_B) @ _hat(G))
                            - _hat(_CHI) @ _hat(G))
        out[..., 3:, 3:] = -np.eye(2)
        return out

    if not second_derivatives:
        return TrivializedLagrangianSystem(SO3R2, ell, dl_dg, dl_deta)
    return TrivializedLagrangianSystem(SO3R2, ell, dl_dg, dl_deta, d2_eta2, d2_eta_g, d2_g2,
                                       d2_g_eta)


def _richardson(f, x, step=1e-3):
    cols = []
    for e in np.eye(x.shape[-1]):
        d = step * e
        cols.append((8.0 * (f(x + d) - f(x - d)) - (f(x + 2 * d) - f(x - 2 * d))) / (12 * step))
    return np.stack(cols, -1)


def test_coupled_system_second_derivatives_match_finite_differences():
    """The closed-form blocks of the test Lagrangian agree with the package's FD ones."""
    rng = np.random.default_rng(3)
    g = SO3R2.random(rng, 4)
    eta = rng.normal(size=(4, 5))
    exact, fd = _coupled_system(True), _coupled_system(False)
    assert not exact.fd_second_derivatives and fd.fd_second_derivatives
    for name in ("D11L", "D12L", "D21L", "D22L"):
        A, B = getattr(exact, name)(g, eta), getattr(fd, name)(g, eta)
        # FD error of the package's blocks (truncation + rounding); measured: worst 6.2e-11
        # (seed offsets 0-3, OPENBLAS_NUM_THREADS=1 and unset); 1e-7 leaves margin 1600
        assert np.max(np.abs(A - B)) < 1e-7, name


CASES = [(sysname, pair, kind)
         for sysname in ("heavy_top", "coupled")
         for pair in ("gauss2", "lobatto3")
         for kind in ("cayley", "exp")]


def _random_step(sysname, pair, kind, seed, batch):
    """A system, pair, retraction and random (g, μ, x) of a CASES entry."""
    sysm = heavy_top() if sysname == "heavy_top" else _coupled_system()
    G_ = sysm.group
    d = G_.dim
    coeffs = coefficients_from(gauss(2) if pair == "gauss2" else lobatto_iiia_iiib(3))
    tau = retraction(G_, kind)
    rng = np.random.default_rng(seed)
    g = G_.random(rng, batch)
    mu = rng.normal(size=(*batch, d))
    x = 0.8 * rng.normal(size=(*batch, coeffs.s * d))
    return sysm, d, coeffs, tau, g, mu, x


@pytest.mark.parametrize(("sysname", "pair", "kind"), CASES)
def test_analytic_jacobian_matches_finite_differences(sysname, pair, kind):
    batch = (2,)
    sysm, d, coeffs, tau, g, mu, x = _random_step(sysname, pair, kind, 7, batch)
    h = 0.3  # large enough that every retraction term is far from its linearization

    def f(y):
        return lie_prk_residual(y, g, mu, h, coeffs, sysm, tau)[0]

    _, ev = lie_prk_residual(x, g, mu, h, coeffs, sysm, tau)
    J = lie_prk_jacobian(ev, sysm, tau)
    Jfd = _richardson(f, x)
    assert J.shape == (*batch, coeffs.s * d, coeffs.s * d)
    scale = 1.0 + np.max(np.abs(Jfd))
    # Richardson truncation + rounding ~1e-12 here; a missing or wrong term is O(h) ~ 1e-1.
    # measured: worst 2.0e-12 against 1e-9 scale = 3.5e-9 (seed offsets 0-3, threads 1/unset):
    # margin 1700 (round-off dominated)
    assert np.max(np.abs(J - Jfd)) < 1e-9 * scale, np.max(np.abs(J - Jfd))


def test_fd_fallback_without_second_derivatives():
    assert interface_of(heavy_top()).analytic_second_derivatives
    assert interface_of(_coupled_system(True)).analytic_second_derivatives
    assert not interface_of(_coupled_system(False)).analytic_second_derivatives


@pytest.mark.parametrize("kind", ["cayley", "exp"])
@pytest.mark.parametrize("sysname", ["heavy_top", "coupled"])
def test_trajectories_analytic_equal_fd(kind, sysname):
    """Same Newton tolerance: analytic and FD Jacobians give the same steps (to that
    tolerance), with the same number of iterations (both converge quadratically here)."""
    if sysname == "heavy_top":
        sysm, g0, eta0 = heavy_top(), SO3.exp(np.array([0.3, -0.2, 0.5])), np.array(
            [0.5, 1.0, -0.7])
    else:
        sysm = _coupled_system()
        g0 = SO3R2.from_parts([SO3.exp(np.array([0.3, -0.2, 0.5])), np.array([0.2, -0.1])])
        eta0 = np.array([0.5, 1.0, -0.7, 0.3, 0.2])
    out = {}
    for fd in (False, True):
        method = LieVPRK(lobatto_iiia_iiib(3), kind, newton=NewtonOptions(finite_differences=fd))
        tr = integrate(sysm, method, g0, eta0, h=0.05, n_steps=40)
        assert tr.success, tr.message
        out[fd] = tr
    # both runs converge quadratically past the Newton tolerance, so they differ by round-off:
    # measured worst 2.0e-15 (q and p, all cases, threads 1/unset); 1e-11 leaves margin 5000
    assert np.max(np.abs(out[False].q - out[True].q)) < 1e-11
    assert np.max(np.abs(out[False].p - out[True].p)) < 1e-11
    assert out[False].stats["newton_iterations"] <= out[True].stats["newton_iterations"]


def _constrained_top(analytic_hessian: bool = True):
    """Heavy top with Φ(R) = e₃·R e₁ = Γ·e₁ (Γ = Rᵀe₃); left-trivialized Jacobian
    (e₁ × Γ)ᵀ and Hessian ê₁Γ̂ (d/dε Γ(R exp(ε ê_k)) = Γ × e_k)."""
    e1 = np.array([1.0, 0.0, 0.0])

    def phi(R):
        return (np.einsum("...ji,j->...i", R, _E3) @ e1)[..., None]

    def jac(R):
        return np.cross(e1, np.einsum("...ji,j->...i", R, _E3))[..., None, :]

    def hess(R):
        return (_hat(e1) @ _hat(np.einsum("...ji,j->...i", R, _E3)))[..., None, :, :]

    return ConstrainedSystem(heavy_top(),
                             HolonomicConstraint(phi, jac, hess if analytic_hessian else None,
                                                 m=1))


@pytest.mark.parametrize("kind", ["cayley", "exp"])
@pytest.mark.parametrize("s", [2, 3])
def test_holonomic_analytic_jacobian_matches_finite_differences(s, kind):
    sysm = _constrained_top()
    coeffs = coefficients_from(lobatto_iiia_iiib(s))
    tau = retraction(SO3, kind)
    hooks = LieHolonomicStageHooks(sysm, s, 1)
    assert hooks.analytic_stage_jacobian()
    assert not LieHolonomicStageHooks(_constrained_top(False), s, 1).analytic_stage_jacobian()
    rng = np.random.default_rng(11)
    g = SO3.random(rng, (2,))
    mu = rng.normal(size=(2, 3))
    x = 0.8 * rng.normal(size=(2, 3 * s + s))
    h = 0.3

    def f(y):
        return lie_prk_residual(y, g, mu, h, coeffs, sysm, tau, hooks)[0]

    _, ev = lie_prk_residual(x, g, mu, h, coeffs, sysm, tau, hooks)
    J = hooks.stage_jacobian(ev, tau)
    Jfd = _richardson(f, x)
    assert J.shape == (2, 4 * s, 4 * s)
    # as above: measured worst 1.9e-12 against 1e-9 (1 + max|Jfd|) ~ 3.5e-9 (seed offsets
    # 0-3, OPENBLAS_NUM_THREADS=1 and unset): margin 1800
    assert np.max(np.abs(J - Jfd)) < 1e-9 * (1.0 + np.max(np.abs(Jfd))), np.max(np.abs(J - Jfd))


@pytest.mark.parametrize("kind", ["cayley", "exp"])
def test_holonomic_trajectories_analytic_equal_fd(kind):
    sysm = _constrained_top()
    R0 = SO3.exp(np.array([0.0, 0.0, 0.4])) @ SO3.exp(np.array([0.7, 0.0, 0.0]))
    J = sysm.constraint.jacobian(R0)[0]
    eta = np.array([0.6, -0.4, 0.9])
    eta = eta - (J @ eta) / (J @ J) * J
    out = {}
    for fd in (False, True):
        method = LieVPRK(lobatto_iiia_iiib(3), kind, newton=NewtonOptions(finite_differences=fd))
        tr = integrate(sysm, method, R0, eta, h=0.05, n_steps=30)
        assert tr.success, tr.message
        out[fd] = tr
    # as above: measured worst 2.0e-15 (threads 1/unset); 1e-11 leaves margin 5000
    assert np.max(np.abs(out[False].q - out[True].q)) < 1e-11
    assert np.max(np.abs(out[False].p - out[True].p)) < 1e-11
    # derived: the constraint is solved by Newton (newton_residual_bound, S = 1 here: 1.0e-12);
    # measured worst 5.8e-16
    bound = newton_residual_bound(method.newton.tol, R0, eta)
    assert np.max(np.abs(sysm.constraint.phi(out[False].q))) <= bound


def _residual_26(x, g, mu, h, coeffs, sysm, tau):
    """Eq. (26) as printed in the paper (Theorem 6.1), with dLτ⁻¹ and ddLτ*: an independent
    writing of the residual the engine solves in its inverse-free form."""
    d, s = sysm.group.dim, coeffs.s
    a, b = coeffs.a, coeffs.b
    H = x.reshape((*x.shape[:-1], s, d))
    Xi, xi = h * np.einsum("ij,...jd->...id", a, H), h * np.einsum("j,...jd->...d", b, H)
    gnd = len(tuple(sysm.group.shape))
    G = sysm.group.compose(np.expand_dims(g, -1 - gnd), tau(Xi))
    dL = tau.dL(Xi)
    Om = np.einsum("...ij,...j->...i", dL, H)
    N = np.einsum("...ji,...j->...i", dL, sysm.D1L(G, Om))
    Pi = np.einsum("...ji,...j->...i", dL, sysm.D2L(G, Om))
    ddl = tau.ddL_star(Xi, H, Pi)  # (ddLτ_Ξ)*(H, Π)
    Nt = np.einsum("...ji,...j->...i", tau.dL_inv(-Xi), N)
    w = (b[None, :] * a.T) / b[:, None]
    S = Pi + h * np.einsum("ij,...jd->...id", w, ddl)
    lhs = np.einsum("...ji,...kj->...ki", tau.dL_inv(xi), S)
    corr = np.einsum("...ji,...kj->...ki", tau.dL_inv(-xi), np.einsum("ij,...jd->...id", w, N))
    inner = (mu + h * np.einsum("j,...jd->...d", b, Nt))[..., None, :] - h * corr
    AdT = np.swapaxes(sysm.group.Ad(tau(xi)), -1, -2)
    R = lhs - np.einsum("...ij,...kj->...ki", AdT, inner)
    return R, tau.dL(xi)


@pytest.mark.parametrize(("sysname", "pair", "kind"), CASES)
def test_engine_residual_is_the_paper_26_times_dL_xi_transpose(sysname, pair, kind):
    """The engine's inverse-free residual is dLτ(ξ)ᵀ times eq. (26) (module docstring of
    ``core._lie_prk``), for a non-stiffly-accurate pair (Gauss) as well as Lobatto IIIA."""
    sysm, d, coeffs, tau, g, mu, x = _random_step(sysname, pair, kind, 11, (3,))
    h = 0.3
    R, ev = lie_prk_residual(x, g, mu, h, coeffs, sysm, tau)
    R26, dLxi = _residual_26(x, g, mu, h, coeffs, sysm, tau)
    expect = np.einsum("...ji,...kj->...ki", dLxi, R26).reshape(R.shape)
    # Both are sums of O(10) products of O(1) terms each rounded: rounding of ~d·s chained
    # matrix-vector products on the scale of the largest term (|Π|, |μ|, h|N|); measured
    # worst 2.3e-3 of this bound (seeds 11-18, all 8 cases): a missing term is O(h) ~ 1e-1
    scale = max(np.abs(ev.Pi).max(), np.abs(mu).max(), np.abs(ev.mu1).max(),
                h * np.abs(ev.N).max())
    assert_rounding_close(R, expect, n_terms=d * coeffs.s, n_ops=10, scale=scale,
                          what="inverse-free residual vs dLτ(ξ)ᵀ·(26)")
