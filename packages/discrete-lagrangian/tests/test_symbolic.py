"""chetaev.discrete_lagrangian.symbolic: symbolic twins of this package's models, the
recognised system classes, parameters with batch axes, build-time errors, pickling, the
multiplier sign of a sympy.physics.mechanics system and the import without sympy."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import sympy as sp
from chetaev.discrete_lagrangian import (
    VPRK,
    ConstrainedPRK,
    ConstrainedSystem,
    HolonomicConstraint,
    InputError,
    LagrangianSystem,
    LinearVelocityConstraint,
    MechanicalSystem,
    SingularMatrixError,
    TrivializedLagrangianSystem,
    TrivializedMechanicalSystem,
    VelocityConstraint,
    integrate,
    testing,
)
from chetaev.discrete_lagrangian.symbolic import (
    from_lagranges_method,
    from_lagrangian,
    from_trivialized_lagrangian,
)
from chetaev.liegroups import SO3
from chetaev.rktableaux import gauss, lobatto_iiia_iiib

BATCHES = [(), (4,), (2, 3)]


def _states(n, batch, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((*batch, n)), rng.standard_normal((*batch, n))


def _symbols(n):
    return list(sp.symbols(f"q0:{n}")), list(sp.symbols(f"v0:{n}"))


# ----------------------------------------------------------------------------- twins
def sym_henon_heiles():
    (x, y), v = _symbols(2)
    V = (x**2 + y**2) / 2 + x**2 * y - y**3 / 3
    return from_lagrangian(sum(vi**2 for vi in v) / 2 - V, [x, y], v)


def sym_double_pendulum():
    (t1, t2), (w1, w2) = _symbols(2)
    c = sp.cos(t1 - t2)
    L = w1**2 + c * w1 * w2 + w2**2 / 2 + 2 * sp.cos(t1) + sp.cos(t2)
    return from_lagrangian(L, [t1, t2], [w1, w2])


VECTOR_TWINS = [
    ("pendulum_angle", testing.pendulum_angle(0.8, 1.3),
     lambda: testing.pendulum_angle(0.8, 1.3, symbolic=True), 1),
    ("cartesian_pendulum", testing.cartesian_pendulum(2),
     lambda: testing.cartesian_pendulum(2, symbolic=True), 2),
    ("spherical_pendulum", testing.spherical_pendulum(),
     lambda: testing.spherical_pendulum(symbolic=True), 3),
    ("henon_heiles", testing.henon_heiles(), sym_henon_heiles, 2),
    # the hand-written MechanicalSystem forms D11L by finite differences of dM (error ~4e-13
    # measured), so the full comparison is against the general model with analytic blocks;
    # M, dM, V, ∇V, ∇²V against the mechanical one in test_mechanical_blocks_agree
    ("double_pendulum_general", testing.double_pendulum(general=True), sym_double_pendulum, 2),
]


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize(("name", "hand", "build", "n"), VECTOR_TWINS,
                         ids=[t[0] for t in VECTOR_TWINS])
def test_vector_twin_agrees(name, hand, build, n, batch):
    sym = build()
    assert not sym.fd_second_derivatives
    assert type(sym).__name__ == type(hand).__name__ or isinstance(sym, MechanicalSystem)
    q, v = _states(n, batch, seed=len(batch))
    if name == "spherical_pendulum" or name == "cartesian_pendulum":
        q = q / np.linalg.norm(q, axis=-1, keepdims=True)  # on the constraint (λ well posed)
    testing.assert_systems_agree(sym, hand, q, v)


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize(("hand", "build", "n"), [
    (testing.pendulum_angle(0.8, 1.3), lambda: testing.pendulum_angle(0.8, 1.3, symbolic=True), 1),
    (testing.henon_heiles(), sym_henon_heiles, 2),
    (testing.double_pendulum(), sym_double_pendulum, 2),
    (testing.spherical_pendulum().system,
     lambda: testing.spherical_pendulum(symbolic=True).system, 3),
], ids=["pendulum_angle", "henon_heiles", "double_pendulum", "spherical_pendulum"])
def test_mechanical_blocks_agree(hand, build, n, batch):
    sym = build()
    assert isinstance(sym, MechanicalSystem) and sym.constant_mass == hand.constant_mass
    q, _ = _states(n, batch, seed=11)
    for name in ("M", "dM", "V", "gradV", "hessV"):
        a, b = getattr(sym, name)(q), getattr(hand, name)(q)
        assert a.shape == b.shape
        assert np.max(np.abs(a - b), initial=0.0) <= 1e-13 * max(1.0, np.max(np.abs(b))), name


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize(("hand", "build"), [
    (testing.heavy_top(), lambda: testing.heavy_top(symbolic=True)),
    (testing.free_rigid_body(), lambda: testing.free_rigid_body(symbolic=True)),
],
                         ids=["heavy_top", "free_rigid_body"])
def test_group_twin_agrees(hand, build, batch):
    sym = build()
    assert isinstance(sym, TrivializedMechanicalSystem)
    assert not sym.fd_second_derivatives
    rng = np.random.default_rng(7)
    g = SO3.random(rng, batch)
    eta = rng.standard_normal((*batch, 3))
    testing.assert_systems_agree(sym, hand, g, eta)
    np.testing.assert_array_equal(sym.inertia, hand.inertia)
    for name in ("V", "gradV", "hessV"):
        a, b = getattr(sym, name)(g), getattr(hand, name)(g)
        assert np.max(np.abs(a - b), initial=0.0) <= 1e-13 * max(1.0, np.max(np.abs(b)))


def test_recognised_classes():
    q, v = _symbols(3)
    mech = from_lagrangian(sum(x**2 for x in v) / 2 - q[0] ** 2, q, v)
    assert type(mech) is MechanicalSystem and mech.constant_mass
    qdep = sym_double_pendulum()
    assert isinstance(qdep, MechanicalSystem) and not qdep.constant_mass
    gen = from_lagrangian(sum(x**2 for x in v) / 2 + sum(x**4 for x in v), q, v)
    assert type(gen) is LagrangianSystem and not gen.fd_second_derivatives
    gyro = from_lagrangian(sum(x**2 for x in v) / 2 + q[0] * v[1], q, v)  # linear in v
    assert type(gyro) is LagrangianSystem
    assert isinstance(testing.cartesian_pendulum(symbolic=True).constraint, HolonomicConstraint)
    lin = from_lagrangian(mech_L := sum(x**2 for x in v) / 2, q, v,
                          nonholonomic=[v[2] - q[1] * v[0]])
    assert isinstance(lin.constraint, LinearVelocityConstraint) and not lin.constraint.is_affine
    aff = from_lagrangian(mech_L, q, v, nonholonomic=[v[2] - q[1] * v[0] - sp.sin(q[0])])
    assert isinstance(aff.constraint, LinearVelocityConstraint) and aff.constraint.is_affine
    const = from_lagrangian(mech_L, q, v, nonholonomic=[v[1]])
    assert not callable(const.constraint.A)  # a constant matrix: the fast path
    nonlin = from_lagrangian(mech_L, q, v, nonholonomic=[v[2] - q[1] * v[0] + v[2] ** 2 / 10])
    assert isinstance(nonlin.constraint, VelocityConstraint)
    ell = from_trivialized_lagrangian(SO3, sum(e**2 for e in v) / 2 + v[0] ** 4, v)
    assert isinstance(ell, TrivializedLagrangianSystem) and not ell.fd_second_derivatives


def test_general_lagrangian_agrees_with_hand_derivatives():
    """L = |v|²/2 + κ|v|⁴/4 − (x² + y²)/2 with a nonlinear velocity constraint: every block
    against the hand-written derivatives written out here."""
    (x, y, z), v = _symbols(3)
    k, gam = 0.1, 0.2
    v2 = sum(vi**2 for vi in v)
    sym = from_lagrangian(v2 / 2 + k * v2**2 / 4 - (x**2 + y**2) / 2, [x, y, z], v,
                          nonholonomic=[v[2] - y * v[0] + gam * v[2] ** 2 / 2])
    Q, V = _states(3, (5,), seed=3)
    vv = np.sum(V * V, -1)
    # measured: 4.4e-16 (OPENBLAS_NUM_THREADS=1), 0.022 of the bound: margin 45
    np.testing.assert_allclose(sym.D2L(Q, V), V * (1 + k * vv)[:, None], rtol=1e-14)
    H = (1 + k * vv)[:, None, None] * np.eye(3) + 2 * k * V[:, :, None] * V[:, None, :]
    # measured: 2.2e-16 (OPENBLAS_NUM_THREADS=1), 0.02 of the bound: margin 50
    np.testing.assert_allclose(sym.D22L(Q, V), H, rtol=1e-14)
    np.testing.assert_array_equal(sym.D11L(Q, V), np.broadcast_to(np.diag([-1.0, -1, 0]),
                                                                   (5, 3, 3)))
    dv = np.zeros((5, 1, 3))
    dv[:, 0, 0], dv[:, 0, 2] = -Q[:, 1], 1 + gam * V[:, 2]
    # measured: exactly 0 (OPENBLAS_NUM_THREADS=1)
    np.testing.assert_allclose(sym.constraint.dphi_dv(Q, V), dv, rtol=1e-15)
    d2 = np.zeros((5, 1, 3, 3))
    d2[:, 0, 2, 2] = gam
    np.testing.assert_array_equal(sym.constraint.d2phi_dv2(Q, V), d2)


# ----------------------------------------------------------------------------- integration
def test_integrations_agree_to_round_off():
    """Same method, hand-written vs symbolic: the trajectories agree to round-off.

    Measured over the 200 steps: 4.4e-16 (double pendulum, the q-dependent mass), 0 (spherical
    pendulum, heavy top: the generated code rounds the same way); the bound 1e-12 leaves a
    margin for round-off growth on other platforms."""
    cases = [
        (testing.double_pendulum(), sym_double_pendulum(), VPRK(gauss(3)),
         np.array([0.5, -0.3]), np.array([0.1, 0.4])),
        (testing.spherical_pendulum(), testing.spherical_pendulum(symbolic=True),
         ConstrainedPRK(lobatto_iiia_iiib(3)), np.array([0.6, 0.0, -0.8]),
         np.array([0.0, 0.7, 0.0])),
    ]
    for hand, sym, method, q0, v0 in cases:
        a = integrate(hand, method, q0, v0, h=0.05, n_steps=200)
        b = integrate(sym, method, q0, v0, h=0.05, n_steps=200)
        assert a.success and b.success
        # measured: 2.2e-16 (OPENBLAS_NUM_THREADS=1), 0.00022 of the bound: margin 4504
        np.testing.assert_allclose(b.q, a.q, rtol=0, atol=1e-12)
        # measured: 4.4e-16 (OPENBLAS_NUM_THREADS=1), 0.00044 of the bound: margin 2252
        np.testing.assert_allclose(b.v, a.v, rtol=0, atol=1e-12)
    from chetaev.discrete_lagrangian import LieVPRK

    rng = np.random.default_rng(1)
    g0, eta0 = SO3.random(rng), rng.standard_normal(3)
    a = integrate(testing.heavy_top(), LieVPRK(gauss(2)), g0, eta0, h=0.05, n_steps=200)
    b = integrate(testing.heavy_top(symbolic=True), LieVPRK(gauss(2)), g0, eta0, h=0.05,
                  n_steps=200)
    # measured: exactly 0 (OPENBLAS_NUM_THREADS=1)
    np.testing.assert_allclose(b.q, a.q, rtol=0, atol=1e-12)
    # measured: exactly 0 (OPENBLAS_NUM_THREADS=1)
    np.testing.assert_allclose(b.v, a.v, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- parameters
def test_params_scalar_and_batch_sweep():
    (th,), (w,) = _symbols(1)
    gsym, lsym = sp.symbols("g ell")
    L = lsym**2 * w**2 / 2 + gsym * lsym * sp.cos(th)
    scalar = from_lagrangian(L, [th], [w], params={gsym: 0.8, lsym: 1.3})
    assert scalar.constant_mass  # a scalar parameter is substituted before differentiating
    lengths = np.array([0.5, 1.0, 2.0])
    sweep = from_lagrangian(L, [th], [w], params={gsym: 0.8, lsym: lengths})
    q = np.array([[0.3], [0.4], [0.5]])
    v = np.array([[0.1], [0.2], [0.3]])
    for i, length in enumerate(lengths):
        one = testing.pendulum_angle(0.8, length)
        for name in ("D1L", "D22L", "D11L", "energy"):
            # measured: exactly 0 (OPENBLAS_NUM_THREADS=1)
            np.testing.assert_allclose(getattr(sweep, name)(q, v)[i],
                                       getattr(one, name)(q[i], v[i]), rtol=1e-14)
    # stage axes after the batch axis: the parameter is aligned with the leading axes
    qs = np.repeat(q[:, None, :], 4, axis=1)
    # measured: exactly 0 (OPENBLAS_NUM_THREADS=1)
    np.testing.assert_allclose(sweep.gradV(qs)[:, 2], sweep.gradV(q), rtol=0)
    # the whole sweep as one batch of trajectories (the state batch is the parameters')
    sol = integrate(sweep, VPRK(gauss(2)), np.full((3, 1), 0.3), np.zeros((3, 1)), h=0.1,
                    n_steps=20)
    for i, length in enumerate(lengths):
        ref = integrate(testing.pendulum_angle(0.8, length), VPRK(gauss(2)), np.array([0.3]),
                        np.array([0.0]), h=0.1, n_steps=20)
        # measured: exactly 0 (OPENBLAS_NUM_THREADS=1)
        np.testing.assert_allclose(sol.q[:, i], ref.q, rtol=0, atol=1e-13)


# ----------------------------------------------------------------------------- errors
def test_build_time_errors():
    q, v = _symbols(2)
    k = sp.Symbol("k")
    with pytest.raises(InputError, match=r"k.*neither coordinates.*params"):
        from_lagrangian(sum(x**2 for x in v) / 2 - k * q[0] ** 2, q, v)
    with pytest.raises(InputError, match=r"holonomic\[0\].*depends on the velocities"):
        from_lagrangian(sum(x**2 for x in v) / 2, q, v, holonomic=[q[0] * v[1]])
    with pytest.raises(SingularMatrixError, match=r"not positive definite"):
        from_lagrangian(v[0] ** 2 / 2 - q[1] ** 2, q, v)
    with pytest.raises(SingularMatrixError, match=r"singular|determinant"):
        from_lagrangian((v[0] * sp.cos(q[1]) + v[1] * sp.sin(q[1])) ** 2 / 2, q, v)
    with pytest.raises(SingularMatrixError, match="not independent"):
        from_lagrangian(sum(x**2 for x in v) / 2, q, v,
                        nonholonomic=[v[0] + q[0] * v[1], 2 * v[0] + 2 * q[0] * v[1]])
    with pytest.raises(SingularMatrixError, match="not independent"):
        from_lagrangian(sum(x**2 for x in v) / 2, q, v,
                        holonomic=[q[0] - q[1], 2 * q[1] - 2 * q[0]])
    with pytest.raises(InputError, match="cannot be mixed"):
        from_lagrangian(sum(x**2 for x in v) / 2, q, v, holonomic=[q[0]], nonholonomic=[v[1]])
    with pytest.raises(InputError, match="same length"):
        from_lagrangian(v[0] ** 2, q, v[:1])
    with pytest.raises(InputError, match="Symbols"):
        from_lagrangian(v[0] ** 2, [q[0] + 1, q[1]], v)
    with pytest.raises(InputError, match=r"group\.dim"):
        from_trivialized_lagrangian(SO3, v[0] ** 2, v)
    with pytest.raises(InputError, match=r"params.*finite"):
        from_lagrangian(k * v[0] ** 2 + v[1] ** 2, q, v, params={k: np.nan})


def test_mass_singular_only_at_some_q_is_caught_at_the_first_state():
    """M(q) = diag(1, x²): regular at the generic build point, singular on x = 0. The check
    runs once, at the user's first state, with the threshold cond(M) > 1/(n·eps)."""
    (x, y), (vx, vy) = _symbols(2)
    L = (vx**2 + x**2 * vy**2) / 2 - (x - 1) ** 2 / 2
    method, v0 = VPRK(gauss(2)), np.array([0.1, 0.2])
    for bad in (0.0, 1e-9):  # cond(M) = inf, 1e18 > 1/(2·eps) = 2.3e15
        sym = from_lagrangian(L, [x, y], [vx, vy])
        with pytest.raises(SingularMatrixError, match=r"singular at the initial state.*`q0`"):
            integrate(sym, method, np.array([bad, 0.0]), v0, h=0.1, n_steps=2)
        # a batch with one singular entry is refused too (the whole initial batch is checked)
        with pytest.raises(SingularMatrixError, match=r"`q0\[1\]`"):
            integrate(sym, method, np.array([[1.0, 0.0], [bad, 0.0]]), np.stack([v0, v0]),
                      h=0.1, n_steps=2)
        # the refusal is not cached: a regular q0 (cond(M) = 1e4) then integrates
        assert integrate(sym, method, np.array([1e-2, 0.0]), v0, h=0.1, n_steps=2).success
    # a general (non-mechanical) Lagrangian: ∂²L/∂v² = diag(1 + vy², x²)... singular at x = 0
    Lg = (vx**2 + x**2 * vy**2) / 2 + vx**4 / 12 - (x - 1) ** 2 / 2
    gen = from_lagrangian(Lg, [x, y], [vx, vy])
    assert isinstance(gen, LagrangianSystem)
    with pytest.raises(SingularMatrixError, match=r"Hessian.*singular at the initial state"):
        integrate(gen, method, np.array([0.0, 0.0]), v0, h=0.1, n_steps=2)


def test_constraints_dependent_only_at_q0_are_caught_at_the_first_state():
    """Jacobians of full rank at the generic build point, of rank 1 at the initial point."""
    (x, y, z), v = _symbols(3)
    T = sum(w**2 for w in v) / 2
    # holonomic Φ = (y, y − x²): ∂Φ/∂q rows (0, 1, 0), (−2x, 1, 0) dependent on x = 0
    hol = from_lagrangian(T, [x, y, z], v, holonomic=[y, y - x**2])
    q0, v0 = np.zeros(3), np.array([0.0, 0.0, 1.0])
    with pytest.raises(SingularMatrixError, match=r"2 holonomic constraints are not "
                                                  r"independent at the initial state `q0`"):
        hol.check_initial(q0, v0)  # what a method's initial_state calls
    with pytest.raises(SingularMatrixError, match=r"numerical rank 1 < 2"):
        integrate(hol, ConstrainedPRK(lobatto_iiia_iiib(2)), q0, v0, h=0.1, n_steps=2)
    # linear velocity constraints (ẏ, ẏ + x ẋ): dependent on x = 0 only
    lin = from_lagrangian(T, [x, y, z], v, nonholonomic=[v[1], v[1] + x * v[0]])
    assert isinstance(lin.constraint, LinearVelocityConstraint)
    with pytest.raises(SingularMatrixError, match=r"velocity constraints are not independent"):
        lin.check_initial(q0, v0)
    lin.check_initial(np.array([0.5, 0.0, 0.0]), v0)  # independent there: accepted
    # general velocity constraints (ẏ + ẏ³, ẏ + x ẋ): ∂Φ/∂v dependent on x = 0 as well
    gen = from_lagrangian(T, [x, y, z], v, nonholonomic=[v[1] + v[1] ** 3, v[1] + x * v[0]])
    assert isinstance(gen.constraint, VelocityConstraint)
    with pytest.raises(SingularMatrixError, match=r"not independent at the initial state"):
        gen.check_initial(q0, v0)


# ----------------------------------------------------------------------------- pickling
def test_generated_systems_pickle():
    for sym, (q, v) in [(testing.spherical_pendulum(symbolic=True), _states(3, (4,))),
                        (sym_double_pendulum(), _states(2, (4,)))]:
        back = pickle.loads(pickle.dumps(sym))
        testing.assert_systems_agree(back, sym, q, v, rtol=0.0)
    top = testing.heavy_top(symbolic=True)
    back = pickle.loads(pickle.dumps(top))
    rng = np.random.default_rng(2)
    g = SO3.random(rng, (3,))
    np.testing.assert_array_equal(back.gradV(g), top.gradV(g))


# ----------------------------------------------------------------------------- sympy.physics
def test_knife_edge_multiplier_sign():
    """Knife edge (unit mass and inertia), q = (x, y, θ), Φ = −sin θ ẋ + cos θ ẏ = 0.

    Hand derivation in the project's convention d/dt ∂L/∂v − ∂L/∂q = (∂Φ/∂v)ᵀλ: ẍ = −λ sin θ,
    ÿ = λ cos θ, θ̈ = 0; differentiating Φ = 0 gives −sin θ ẍ + cos θ ÿ = θ̇(cos θ ẋ + sin θ ẏ),
    so λ = θ̇ (cos θ ẋ + sin θ ẏ). sympy's LagrangesMethod stores the *negative* of the
    constraint Jacobian (``lam_coeffs`` = −∂Φ/∂q̇, sympy issue #30215), so both its ``eom`` and
    ``solve_multipliers`` (from ``mass_matrix_full``) carry λ_sympy = −λ: pinned here."""
    from sympy.physics.mechanics import LagrangesMethod, dynamicsymbols

    x, y, th = dynamicsymbols("x y theta")
    xd, yd, thd = (s.diff(dynamicsymbols._t) for s in (x, y, th))
    L = (xd**2 + yd**2 + thd**2) / 2
    lm = LagrangesMethod(L, [x, y, th], nonhol_coneqs=[-sp.sin(th) * xd + sp.cos(th) * yd])
    lm.form_lagranges_equations()
    sym = from_lagranges_method(lm)
    assert isinstance(sym, ConstrainedSystem) and isinstance(sym.system, MechanicalSystem)
    rng = np.random.default_rng(5)
    q = rng.standard_normal((6, 3))
    v = rng.standard_normal((6, 3))
    c, s = np.cos(q[:, 2]), np.sin(q[:, 2])
    v[:, 1] = v[:, 0] * s / c  # on the constraint
    lam_hand = v[:, 2] * (c * v[:, 0] + s * v[:, 1])
    # measured: 1.1e-16 (OPENBLAS_NUM_THREADS=1), 0.0024 of the bound: margin 417
    np.testing.assert_allclose(sym.multiplier(q, v)[:, 0], lam_hand, rtol=1e-13)
    # sympy's multiplier (from its mass_matrix_full / forcing_full) has the opposite sign
    sol = lm.solve_multipliers()
    lam_sympy = sol[lm.lam_vec[0]]
    t = dynamicsymbols._t
    subs_syms = sp.symbols("X Y T XD YD TD")
    rep = {xd: subs_syms[3], yd: subs_syms[4], thd: subs_syms[5]}
    rep |= {x: subs_syms[0], y: subs_syms[1], th: subs_syms[2]}
    f = sp.lambdify(subs_syms, sp.sympify(lam_sympy).xreplace(rep).subs(t, 0), "numpy")
    # measured: 5.6e-17 (OPENBLAS_NUM_THREADS=1), 0.0021 of the bound: margin 484
    np.testing.assert_allclose(f(*q.T, *v.T), -lam_hand, rtol=1e-13)
    # and so has its eom: ẍ − λ_sympy sin θ = 0 with ẍ = −λ sin θ
    assert sp.simplify(lm.eom[0] - (x.diff(t, 2) - lm.lam_vec[0] * sp.sin(th))) == 0
    assert list(lm.lam_coeffs) == [sp.sin(th), -sp.cos(th), 0]


def test_lagranges_method_rejects_forces_and_free_symbols():
    from sympy.physics.mechanics import LagrangesMethod, Point, ReferenceFrame, dynamicsymbols

    x = dynamicsymbols("x")
    xd = x.diff(dynamicsymbols._t)
    m = sp.Symbol("m")
    with pytest.raises(InputError, match="m besides"):
        from_lagranges_method(LagrangesMethod(m * xd**2 / 2, [x]))
    N = ReferenceFrame("N")
    P = Point("P")
    P.set_vel(N, xd * N.x)
    lm = LagrangesMethod(xd**2 / 2, [x], forcelist=[(P, -xd * N.x)], frame=N)
    with pytest.raises(InputError, match="nonconservative"):
        from_lagranges_method(lm)
    with pytest.raises(InputError, match="LagrangesMethod"):
        from_lagranges_method(xd**2)


# ----------------------------------------------------------------------------- without sympy
def test_package_imports_without_sympy():
    code = textwrap.dedent("""
        import sys
        sys.modules["sympy"] = None  # any `import sympy` now raises ImportError
        import chetaev.discrete_lagrangian
        import chetaev.discrete_lagrangian.symbolic as symbolic
        assert "sympy" not in [m for m in sys.modules if sys.modules[m] is not None]
        try:
            symbolic.from_lagrangian(None, [], [])
        except ImportError as exc:
            assert "pip install chetaev-discrete-lagrangian[symbolic]" in str(exc), exc
        else:
            raise AssertionError("no ImportError")
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr


def test_generated_functions_broadcast_q_against_v():
    """q and v with different batch shapes broadcast like numpy; constant and zero entries
    take the broadcast batch shape too."""
    (x, y, z), v = _symbols(3)
    v2 = sum(vi**2 for vi in v)
    sym = from_lagrangian(v2 / 2 + v2**2 / 40 - x**2 / 2, [x, y, z], v,
                          nonholonomic=[v[2] - y * v[0] + v[2] ** 2 / 10])
    rng = np.random.default_rng(9)
    q = rng.standard_normal((4, 1, 3))
    vv = rng.standard_normal((5, 3))
    for name in ("lagrangian", "D1L", "D2L", "D11L", "D21L", "D22L"):
        out = getattr(sym, name)(q, vv)
        assert out.shape[:2] == (4, 5), name
        np.testing.assert_array_equal(out[2, 3], getattr(sym, name)(q[2, 0], vv[3]))
    for name in ("residual", "dphi_dq", "dphi_dv", "d2phi_dvdq", "d2phi_dv2"):
        out = getattr(sym.constraint, name)(q, vv)
        assert out.shape[:2] == (4, 5), name
        np.testing.assert_array_equal(out[1, 4], getattr(sym.constraint, name)(q[1, 0], vv[4]))


def test_small_batch_float_path_agrees_with_the_numpy_path():
    """A few configurations (one trajectory and its stages) run a Python-float loop, large
    batches the numpy code: both give the same values (the float path may differ by the last
    bits of math.sin vs numpy.sin: measured 0 over seeds 0-4 here, bound 4 eps); a pole
    the float path refuses (ZeroDivisionError) falls through to numpy's inf."""
    (x, y), (vx, vy) = _symbols(2)
    L = (vx**2 + (1 + x**2) * vy**2) / 2 + sp.cos(x) * sp.sin(y) + sp.exp(x / 3)
    sym = from_lagrangian(L, [x, y], [vx, vy])
    rng = np.random.default_rng(5)
    q = rng.standard_normal((200, 2))
    for name in ("V", "gradV", "hessV", "M", "dM"):
        f = getattr(sym, name)
        big = f(q)  # numpy path
        small = np.stack([f(qi) for qi in q])  # one configuration each: float path
        stages = np.concatenate([f(q[i:i + 3]) for i in range(0, 198, 3)])  # (3, 2) batches
        scale = np.maximum(1.0, np.abs(big))
        assert np.all(np.abs(small - big) <= 4 * np.finfo(float).eps * scale), name
        assert np.all(np.abs(stages - big[:198]) <= 4 * np.finfo(float).eps * scale[:198]), name
    pole = from_lagrangian(vx**2 / 2 + vy**2 / 2 - 1 / x, [x, y], [vx, vy])
    with np.errstate(divide="ignore"):
        assert np.isinf(pole.V(np.array([0.0, 1.0])))
        assert np.all(np.isinf(pole.gradV(np.zeros((2, 2)))[..., 0]))
