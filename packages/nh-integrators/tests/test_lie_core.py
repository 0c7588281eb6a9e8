"""Unit tests of the Lie-group NH-PRK building blocks: exact retraction tangents and tensors,
the analytic step Jacobian against central differences, structural facts of the residual
(Λˢ absent from the first residual; discrete Noether identity) and input validation."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    ConstraintViolationError,
    ConvergenceError,
    HolonomicConstraint,
    HypothesisError,
    InputError,
    integrate,
)
from chetaev.discrete_lagrangian.testing import assert_rounding_close
from chetaev.liegroups import SE2, SO3, Product, Rn
from chetaev.nh_integrators import LieNonholonomicPRK
from chetaev.nh_integrators._homogeneous import spherical_kepler, tait_bryan
from chetaev.nh_integrators._lie_core import _GroupOps, continuous_multiplier, lie_nh_residual
from chetaev.nh_integrators.testing import (
    ball_initial,
    ball_reference,
    disc_initial,
    disc_reference,
    turntable_ball,
    vertical_disc,
    vertical_disc_general,
)
from chetaev.rktableaux import gauss, lobatto_iiia_iiib, symplectic_pair

GROUPS = {"SO3": SO3, "SE2": SE2, "SO3xR2": Product(SO3, Rn(2))}


def _fd(f, x, eps=1e-6):
    from chetaev.liegroups.testing import central_differences  # the one central-difference helper

    return central_differences(f, x, eps)


@pytest.mark.parametrize("gname", list(GROUPS))
@pytest.mark.parametrize("kind", ["cayley", "exp"])
def test_tangent_and_tensor_match_finite_differences(gname, kind):
    G = GROUPS[gname]
    ops = _GroupOps(G, kind)
    rng = np.random.default_rng(3)
    xi = 0.8 * rng.normal(size=G.dim)
    D, T = ops.dL_and_tensor(xi)
    tau = ops.tau(xi)
    Ginv = np.linalg.inv(tau)
    # d/dε τ(ξ+εδ) = τ(ξ) hat(dL δ)
    Dfd = _fd(lambda x: G.vee(Ginv @ ops.tau(x)), xi)
    # central FD with step 1e-6: truncation ~1e-12·|f'''| plus cancellation eps·|f|/1e-6
    # ~ 2e-10 for O(1) values; bounds 1e-8 (first derivatives) and 1e-7 (the contraction S,
    # |v||p| ~ 3) leave ~50x. Measured worst 2.6e-10 (D), 9.9e-11 (T), 1.9e-10 (S)
    # over 3 groups x 2 retractions: margins 39, 101, 515
    assert np.max(np.abs(D - Dfd)) < 1e-8
    Tfd = _fd(lambda x: ops.dL_and_tensor(x)[0], xi)
    assert np.max(np.abs(T - Tfd)) < 1e-8
    # second-derivative contraction ∂_ξ(J^L(ξ, v)ᵀp) (liegroups' dL_hess)
    v, p = rng.normal(size=G.dim), rng.normal(size=G.dim)
    S = ops.dtensor_contract(xi, v, p)
    Sfd = _fd(lambda x: np.einsum("bac,a,b->c", ops.dL_and_tensor(x)[1], v, p), xi)
    assert np.max(np.abs(S - Sfd)) < 1e-7
    # batched evaluation equals the single one
    Db, Tb = ops.dL_and_tensor(np.stack([xi, 0.5 * xi]))
    # round-off (batch of 2 vs single; np.allclose's default rtol 1e-5 made the old bound loose)
    assert_rounding_close(Db[0], D, n_terms=G.dim, what="batched dL")
    assert_rounding_close(Tb[0], T, n_terms=G.dim, what="batched tensor")


def _problem(name):
    if name == "disc":
        sysc = vertical_disc()
        g0, eta0 = disc_initial()
    elif name == "disc_nonlinear":
        sysc = vertical_disc(constraint="nonlinear")
        g0, eta0 = disc_initial()
    elif name == "disc_general":
        sysc = vertical_disc_general(quartic=0.5)
        g0, eta0 = disc_initial()
    elif name == "ball":
        sysc = turntable_ball()
        g0, eta0 = ball_initial()
    else:
        sysc = spherical_kepler()
        g0 = tait_bryan(0.940125174120388, -0.693184358892293, 3.007331043590061)
        eta0 = np.array([1.534184084268850, 0.0, 0.0])
    return sysc, g0, eta0


@pytest.mark.parametrize("name", ["disc", "disc_nonlinear", "disc_general", "ball", "kepler"])
@pytest.mark.parametrize("s", [2, 3, 4])
@pytest.mark.parametrize("kind", ["cayley", "exp"])
def test_analytic_jacobian_matches_finite_differences(name, s, kind):
    sysc, g0, eta0 = _problem(name)
    method = LieNonholonomicPRK(s, retraction=kind, multiplier_rule="carry")
    ops, model = method._setup(sysc)
    a, b = np.asarray(method.pair.first.a), np.asarray(method.pair.first.b)
    rng = np.random.default_rng(s)
    d, m = model.d, model.m
    mu0 = np.asarray(sysc.D2L(g0, eta0))
    nE = (s - 1) * d if model.general else 0
    for lam1 in (0.3 * np.ones(m), None):
        nl = s if lam1 is None else s - 1
        x = np.concatenate(
            [
                np.tile(eta0, s) + 0.3 * rng.normal(size=s * d),
                0.2 * rng.normal(size=nl * m),
                np.tile(eta0, s - 1)[:nE] + 0.1 * rng.normal(size=nE),
            ]
        )
        kw = dict(ops=ops, model=model, a=a, b=b, h=0.2, g0=g0, mu0=mu0, lam1=lam1)
        _, J, _ = lie_nh_residual(x, **kw)
        Jfd = _fd(lambda y, kw=kw: lie_nh_residual(y, jacobian=False, **kw)[0], x)
        # central FD (step 1e-6): ~2e-10·max(1, |J|) (see above); bound 1e-7·max(1, |J|).
        # Measured worst 7.0e-10 (60 cases): margin 142
        assert np.max(np.abs(J - Jfd)) < 1e-7 * max(1.0, np.max(np.abs(J)))


@pytest.mark.parametrize("s", [2, 3, 4])
def test_last_multiplier_does_not_enter_first_residual_block(s):
    """F1: ∂R1/∂Λˢ = 0 (Λˢ only enters μ_{k+1} and the IIIA momenta)."""
    sysc, g0, eta0 = _problem("ball")
    method = LieNonholonomicPRK(s, multiplier_rule="carry")
    ops, model = method._setup(sysc)
    a, b = np.asarray(method.pair.first.a), np.asarray(method.pair.first.b)
    x = np.concatenate([np.tile(eta0, s), 0.1 * np.ones((s - 1) * model.m)])
    _, J, _ = lie_nh_residual(
        x,
        ops=ops,
        model=model,
        a=a,
        b=b,
        h=0.1,
        g0=g0,
        mu0=eta0 @ model.inertia.T,
        lam1=np.zeros(model.m),
    )
    # structurally zero block: measured 6.9e-18 (margin 1.4e3); the other block is O(h)
    # (measured >= 2.9e-2, margin 29), so the test can fail
    assert np.max(np.abs(J[: s * model.d, -model.m :])) < 1e-14
    assert np.max(np.abs(J[-model.m :, -model.m :])) > 1e-3


def test_discrete_noether_identity_on_sphere():
    """F5: for the right-SO(2)-invariant lift, μ_{k+1}·x₀ − μ_k·x₀ = h Σ bⱼ Λʲ on solutions
    of R1 for arbitrary Λ, which is why the "weighted_sum" closure is singular."""
    sysc, g0, eta0 = _problem("kepler")
    for s in (3, 4):
        method = LieNonholonomicPRK(s, retraction="exp", multiplier_rule="carry")
        ops, model = method._setup(sysc)
        a, b = np.asarray(method.pair.first.a), np.asarray(method.pair.first.b)
        rng = np.random.default_rng(11)
        Lam = rng.normal(size=s)
        mu0 = eta0 @ model.inertia.T + np.array([0.0, 0.0, 0.07])
        h = 0.1
        H = np.tile(eta0, s)
        kw = dict(ops=ops, model=model, a=a, b=b, h=h, g0=g0, mu0=mu0, lam1=None)
        for _ in range(30):  # Newton on R1 only, Λ fixed
            x = np.concatenate([H, Lam])
            r, J, aux = lie_nh_residual(x, **kw)
            H = H - np.linalg.solve(J[: 3 * s, : 3 * s], r[: 3 * s])
        # Newton on R1 to round-off (30 iterations) and the identity it implies: measured
        # 6.9e-17 and 2.8e-17 (s = 3, 4): margins >= 1.4e3
        assert np.max(np.abs(r[: 3 * s])) < 1e-13
        lhs = aux["mu1"][2] - mu0[2]
        assert abs(lhs - h * b @ Lam) < 1e-13


def test_continuous_multiplier_matches_closed_forms():
    sysc, g0, eta0 = _problem("disc")
    lam = sysc.multiplier(g0, eta0)
    # three closed forms of the same multiplier at the initial point (round-off; np.allclose's
    # default rtol 1e-5 is dropped): measured 0, 0, 2.8e-17
    np.testing.assert_allclose(lam, disc_reference(g0, eta0, np.array([0.0, 1.0]))[2][0],
                               atol=1e-12, rtol=0)
    method = LieNonholonomicPRK(2, multiplier_rule="carry")
    ops, model = method._setup(sysc)
    np.testing.assert_allclose(continuous_multiplier(ops, model, g0, eta0), lam, atol=1e-12,
                               rtol=0)
    sysc, g0, eta0 = _problem("ball")
    lam = sysc.multiplier(g0, eta0)
    np.testing.assert_allclose(lam, ball_reference(g0, eta0, np.array([0.0, 1.0]))[2][0],
                               atol=1e-10, rtol=0)


def test_input_validation():
    sysc, g0, eta0 = _problem("disc")
    with pytest.raises(InputError, match="retraction"):
        LieNonholonomicPRK(3, retraction="rodrigues")
    with pytest.raises(InputError, match="multiplier_rule"):
        LieNonholonomicPRK(3, multiplier_rule="last")
    with pytest.raises(HypothesisError, match="lobatto_iiia_iiib"):
        LieNonholonomicPRK(symplectic_pair(gauss(2)))
    with pytest.raises(InputError, match="stage count"):
        LieNonholonomicPRK(1)
    method = LieNonholonomicPRK(lobatto_iiia_iiib(3))
    with pytest.raises(ConstraintViolationError, match="constraint"):
        method.initial_state(sysc, g0, eta0 + np.array([0.0, 0.1, 0.0]))
    bad = g0.copy()
    bad[0, 0] += 0.1
    with pytest.raises(InputError, match="not an element"):
        method.initial_state(sysc, bad, eta0)
    with pytest.raises(InputError, match="shape"):
        method.initial_state(sysc, g0, eta0[:2])
    with pytest.raises(InputError, match="finite"):
        method.initial_state(sysc, g0, np.array([np.nan, 0.0, 1.0]))
    state = method.initial_state(sysc, g0, eta0)
    with pytest.raises(InputError, match="step size"):
        method.step(sysc, state, 0.0)
    hol = ConstrainedSystem(
        sysc.system,
        HolonomicConstraint(lambda g: g[..., :1, 2], lambda g: np.ones((*g.shape[:-2], 1, 3))),
    )
    with pytest.raises(InputError, match="HolonomicConstraint"):
        LieNonholonomicPRK(2).initial_state(hol, g0, eta0)

    class NotALagrangian:
        group = SE2
        n = 3
        D1L = D2L = D22L = None  # enough for ConstrainedSystem, not for the method

    gen = ConstrainedSystem(NotALagrangian(), sysc.constraint)
    with pytest.raises(InputError, match="TrivializedLagrangianSystem"):
        LieNonholonomicPRK(2).initial_state(gen, g0, eta0)


@pytest.mark.parametrize("s", [3, 4])
def test_constraint_holds_at_every_inner_stage(s):
    """P4/F3: the 𝔪-constraint is imposed on the IIIA stage velocities ηⁱ = 𝕀⁻¹Mⁱ at every
    stage (to round-off), not on the stage velocities Ωⁱ = d^Lτ Hⁱ, which violate it."""
    from chetaev.nh_integrators._homogeneous import spherical_pendulum
    from chetaev.nh_integrators._lie_core import lie_nh_newton

    sysc = spherical_pendulum()
    g0, eta0 = tait_bryan(0.0, np.pi / 3, 0.0), np.array([1 / 3, 0.0, 0.0])
    method = LieNonholonomicPRK(s, retraction="exp", multiplier_rule="carry")
    ops, model = method._setup(sysc)
    a, b = np.asarray(method.pair.first.a), np.asarray(method.pair.first.b)
    x0 = np.concatenate([np.tile(eta0, s), np.zeros(s - 1)])
    x, aux, result = lie_nh_newton(
        x0,
        tol=1e-13,
        max_iter=30,
        ops=ops,
        model=model,
        a=a,
        b=b,
        h=0.1,
        g0=g0,
        mu0=eta0,
        lam1=np.zeros(1),
    )
    assert result.converged
    # ηⁱ, i = 2..s: imposed by the solve (tol 1e-13 on O(1) residuals); measured 6.5e-18,
    # margin 154
    assert np.max(np.abs(aux["eta"][:, 2])) < 1e-15
    D, _ = ops.dL_and_tensor(0.1 * a @ x[: 3 * s].reshape(s, 3))
    Om = np.einsum("iab,ib->ia", D, x[: 3 * s].reshape(s, 3))
    # ~1e-7 (s = 3), ~2e-8 (s = 4) in the first step (method): measured 2.0e-8, margin 20
    assert np.max(np.abs(Om[:, 2])) > 1e-9


def test_failed_step_raises_convergence_error_with_advice():
    sysc, g0, eta0 = _problem("disc")
    method = LieNonholonomicPRK(3, multiplier_rule="carry")
    state = method.initial_state(sysc, g0, eta0)
    with pytest.raises(ConvergenceError, match=r"step 0 .*Try: halve h"):
        method.step(sysc, state, 20.0)
    tr = integrate(sysc, method, g0, eta0, h=20.0, n_steps=2)
    assert not tr.success and "Newton did not converge" in tr.message
