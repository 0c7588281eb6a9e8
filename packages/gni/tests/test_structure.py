"""Exact structure of the vector-space GNI (the docs' theory page rows 3.2, 3.5, 3.9, 3.11)."""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    ConstraintViolationError,
    HolonomicConstraint,
    InputError,
    integrate,
)
from chetaev.discrete_lagrangian.testing import assert_rounding_close, fit_order
from chetaev.gni import (
    GNI,
    VARIANTS,
    Composition,
    average_momentum_residual,
    reflection_isometry_residual,
)

ALL = ("euler_a", "euler_b", "rattle", "midpoint")


def _random_states(problem, rng, k=4):
    """Random node states (q, v, λ) with v on the constraint set."""
    system = problem.system
    q = problem.q0 + 0.5 * rng.standard_normal((k, 3))
    v = rng.standard_normal((k, 3))
    A = system.constraint.matrix(q)
    a = system.constraint.affine(q)
    Minv = np.linalg.inv(system.system.mass)
    C = A @ Minv @ np.swapaxes(A, -1, -2)
    corr = np.linalg.solve(C, (np.einsum("...ij,...j->...i", A, v) + a)[..., None])
    v = v - (Minv @ np.swapaxes(A, -1, -2) @ corr)[..., 0]
    return q, v, rng.standard_normal((k, 1))


@pytest.mark.parametrize("variant", ALL)
@pytest.mark.parametrize("affine", [False, True])
def test_average_momentum_satisfies_constraint(variant, affine, particle, affine_particle, runner):
    """(9b)/(27b): μG⁻¹((p⁻_k + p⁺_k)/2 − Π) = 0 at every node; p⁻, p⁺ recomputed from the
    q-sequence alone through the discrete Legendre transforms. Also the isometry (3.9)."""
    problem = affine_particle if affine else particle
    h = 0.05
    states = runner(GNI(variant), problem, h, 200)
    q = np.array([s.q for s in states])
    v = np.array([s.v for s in states])
    dl, inner, con = VARIANTS[variant], problem.system.system, problem.system.constraint
    p_plus = dl.D2(inner, q[:-2], q[1:-1], h)
    p_minus = -dl.D1(inner, q[1:-1], q[2:], h)
    G = inner.M(q[1:-1])
    mu, a = con.matrix(q[1:-1]), con.affine(q[1:-1])
    r = average_momentum_residual(p_minus, p_plus, G, mu, a)
    # round-off of closed-form / Newton-to-round-off steps, re-evaluated (h = 0.05, 200 steps):
    # measured worst over the 8 cases (OPENBLAS_NUM_THREADS=1 and unset) 2.0e-15 (9b),
    # 3.3e-16 (constraint), 1.5e-14 (isometry), 2.2e-15 (v), 6.4e-15 (jump); the bounds
    # 1e-13, 1e-13, 1e-12, 1e-13, 1e-13 leave margins >= 15
    assert np.max(np.abs(r)) < 1e-13
    assert np.max(np.abs(con.residual(q, v))) < 1e-13
    iso = reflection_isometry_residual(p_minus, p_plus, G, mu, a)
    assert np.max(np.abs(iso)) < 1e-12
    # node velocity = G⁻¹ × averaged momentum, multiplier = jump / h
    v_avg = np.linalg.solve(G, (0.5 * (p_plus + p_minus))[..., None])[..., 0]
    np.testing.assert_allclose(v[1:-1], v_avg, atol=1e-13, rtol=0)
    lam = np.array([s.lam for s in states])[1:-1]
    jump = h * np.einsum("...ji,...j->...i", mu, lam)
    np.testing.assert_allclose(p_minus - p_plus, jump, atol=1e-13, rtol=0)


@pytest.mark.parametrize("affine", [False, True])
def test_euler_a_and_b_are_adjoint(affine, particle, affine_particle, rng):
    """Thm 5.4: F_A^h ∘ F_B^{−h} = Id and F_B^h ∘ F_A^{−h} = Id, on arbitrary node states."""
    problem = affine_particle if affine else particle
    sys_ = problem.system
    A, B = GNI("euler_a"), GNI("euler_b")
    q, v, lam = _random_states(problem, rng)
    s0 = A.initial_state(sys_, q, v)
    s0 = type(s0)(t=0.0, q=q, v=v, p=s0.p, lam=lam)
    # round-off of two closed-form steps: measured worst 1.1e-16 (q), 1.1e-15 (v), 2.4e-14 (λ)
    # over seeds 20261122 + k·1000, k = 0..5, both h (OPENBLAS_NUM_THREADS=1 and unset for
    # k = 0); the bounds 1e-13, 1e-13, 1e-12 leave margins >= 41
    for h in (0.1, 0.3):
        for first, second in ((B, A), (A, B)):
            s2 = second.step(sys_, first.step(sys_, s0, -h), h)
            assert np.max(np.abs(s2.q - s0.q)) < 1e-13
            assert np.max(np.abs(s2.v - s0.v)) < 1e-13
            assert np.max(np.abs(s2.lam - s0.lam)) < 1e-12
    # ... while neither is symmetric on its own (so the test above can fail)
    s2 = A.step(sys_, A.step(sys_, s0, -0.1), 0.1)
    assert np.max(np.abs(s2.q - s0.q)) > 1e-4  # measured >= 8.1e-3 (method): margin 81


@pytest.mark.parametrize("variant", ["rattle", "midpoint"])
@pytest.mark.parametrize("affine", [False, True])
def test_symmetric_variants_are_reversible(variant, affine, particle, affine_particle, rng):
    problem = affine_particle if affine else particle
    m = GNI(variant)
    q, v, _ = _random_states(problem, rng)
    s0 = m.initial_state(problem.system, q, v)
    s = s0
    for _ in range(20):
        s = m.step(problem.system, s, 0.1)
    for _ in range(20):
        s = m.step(problem.system, s, -0.1)
    # round-off over 40 steps (midpoint: Newton to round-off): measured worst 5.9e-15 (q),
    # 4.2e-15 (v), 1.5e-13 (λ) over the seed sample above; bounds 1e-12, 1e-12, 1e-11 leave
    # margins >= 67
    assert np.max(np.abs(s.q - s0.q)) < 1e-12
    assert np.max(np.abs(s.v - s0.v)) < 1e-12
    assert np.max(np.abs(s.lam - s0.lam)) < 1e-11


@pytest.mark.parametrize("variant", ALL)
def test_two_step_and_momentum_forms_agree(variant, affine_particle, runner):
    """Local form (9)/(27) solved by Newton = one-step reflection form (8)/(26)."""
    a = runner(GNI(variant), affine_particle, 0.05, 100)
    b = runner(GNI(variant, form="two_step"), affine_particle, 0.05, 100)
    # the two-step form is a Newton solve (tol 1e-12 x scale): measured worst 1.1e-14 (q),
    # 1.9e-14 (v), 7.5e-13 (λ) over 100 steps of the 4 variants, OPENBLAS_NUM_THREADS=1 and
    # unset; bounds 1e-12, 1e-11, 1e-10 leave margins >= 94
    for sa, sb in zip(a, b):
        assert np.max(np.abs(sa.q - sb.q)) < 1e-12
        assert np.max(np.abs(sa.v - sb.v)) < 1e-11
        assert np.max(np.abs(sa.lam - sb.lam)) < 1e-10


def test_composition_differs_from_rattle_at_third_order(particle):
    """F_A^{h/2}∘F_B^{h/2} is not RATTLE (15) (Remark 5.5) but agrees with it to O(h³)."""
    comp, rattle = Composition((GNI("euler_b"), GNI("euler_a"))), GNI("rattle")
    s0 = rattle.initial_state(particle.system, particle.q0, particle.v0)
    hs = np.array([0.2, 0.1, 0.05, 0.025])
    d = [np.linalg.norm(comp.step(particle.system, s0, h).q - rattle.step(particle.system, s0, h).q)
         for h in hs]
    slope = fit_order(hs, d)  # all points above the 1e-11 floor (d[-1] > 1e-9 below)
    assert d[-1] > 1e-9  # above round-off: measured 4.0e-6
    assert abs(slope - 3) < 0.25  # method: measured |slope - 3| = 1.6e-2, margin 15


@pytest.mark.parametrize("form", ["momentum", "two_step"])
def test_batched_initial_conditions_match_single_runs(form, affine_particle, rng):
    q, v, _ = _random_states(affine_particle, rng, k=3)
    m = GNI("midpoint", form=form)
    traj = integrate(affine_particle.system, m, q, v, h=0.1, n_steps=30)
    assert traj.q.shape == (31, 3, 3) and traj.lam.shape == (31, 3, 1)
    for i in range(3):
        single = integrate(affine_particle.system, m, q[i], v[i], h=0.1, n_steps=30)
        # different batch shapes: equal to the rounding of 30 steps of 3-term products (the
        # Newton of the two-step form stops at the same iterate for each entry; measured:
        # bitwise equal today, which the numpy kernels do not promise)
        assert_rounding_close(traj.q[:, i], single.q, n_terms=3, n_ops=30, what="batched q")
        assert_rounding_close(traj.v[:, i], single.v, n_terms=3, n_ops=30, what="batched v")
    assert traj.success


def test_rattle_energy_bounded_without_drift(particle):
    """Long run (h = 0.1, 2000 steps): the energy error oscillates and does not grow."""
    traj = integrate(particle.system, GNI("rattle"), particle.q0, particle.v0, h=0.1, n_steps=2000)
    E = particle.system.energy(traj.q, traj.v)
    dE = np.abs(E - E[0])
    first, last = dE[:700].max(), dE[-700:].max()
    # method (deterministic, O(h²)): measured last = 2.3e-3 (OPENBLAS_NUM_THREADS=1 and
    # unset), 1.1e-3 .. 3.9e-3 for h = 0.07 .. 0.13 (T = 200); bound 2e-2 leaves margin 8.6
    assert last < 2e-2
    # no drift: measured last / first = 0.998 .. 1.008 over h = 0.07 .. 0.13; the threshold
    # 1.5 (a 50 % growth) leaves margin 1.5 at h = 0.1
    assert last < 1.5 * first


def test_bad_input_messages(particle):
    m = GNI("rattle")
    with pytest.raises(ConstraintViolationError, match="violates the velocity constraint"):
        m.initial_state(particle.system, particle.q0, particle.v0 + np.array([0.0, 0.0, 0.1]))
    with pytest.raises(InputError, match=r"must have shape \(\.\.\., 3\)"):
        m.initial_state(particle.system, [0.0, 0.0], particle.v0)
    with pytest.raises(InputError, match="NaN or inf"):
        m.initial_state(particle.system, [np.nan, 0.0, 0.0], particle.v0)
    with pytest.raises(InputError, match="unknown GNI variant 'verlet'"):
        GNI("verlet")
    with pytest.raises(InputError, match="form must be one of"):
        GNI("rattle", form="three_step")
    with pytest.raises(InputError, match="Composition needs GNI members with form='momentum'"):
        Composition((GNI("euler_b"), GNI("euler_a", form="two_step")))
    with pytest.raises(InputError, match="weights must sum to 1"):
        Composition((GNI("euler_b"), GNI("euler_a")), weights=(0.5, 0.6))
    s = m.initial_state(particle.system, particle.q0, particle.v0)
    with pytest.raises(InputError, match="finite and non-zero"):
        m.step(particle.system, s, 0.0)
    holo = ConstrainedSystem(
        particle.system.system,
        HolonomicConstraint(
            lambda q: q[..., :1] ** 2 - 1.0, lambda q: np.eye(3)[None, :1] * 2 * q[..., :1, None]
        ),
    )
    with pytest.raises(InputError, match="LinearVelocityConstraint"):
        m.initial_state(holo, particle.q0, particle.v0)
    with pytest.raises(InputError, match="ConstrainedSystem"):
        m.initial_state(particle.system.system, particle.q0, particle.v0)


def test_any_discrete_lagrangian_from_discrete_lagrangian(affine_particle, runner):
    """Def. 4.1 for any L_d: chetaev.discrete_lagrangian.DiscreteLagrangian plugs in. Its
    "alpha" kind evaluates L at (1−α)q0 + αq1, so α = 0 / 1 are L_d^A / L_d^B, "trapezoidal" is
    (16) and "midpoint" the midpoint rule: the GNI sequences coincide with the named variants."""
    from chetaev.discrete_lagrangian import DiscreteLagrangian

    pairs = [
        (DiscreteLagrangian("alpha", alpha=0.0), "euler_a"),
        (DiscreteLagrangian("alpha", alpha=1.0), "euler_b"),
        (DiscreteLagrangian("trapezoidal"), "rattle"),
        (DiscreteLagrangian("midpoint"), "midpoint"),
    ]
    for dl, name in pairs:
        a = runner(GNI(dl), affine_particle, 0.1, 30)[-1]
        b = runner(GNI(name), affine_particle, 0.1, 30)[-1]
        # the same L_d through two code paths, 30 steps: measured bitwise equal (q and λ);
        # the bounds (1e-12, and 1e-10 for λ = impulse / h) are round-off allowances
        np.testing.assert_allclose(a.q, b.q, atol=1e-12, rtol=0)
        np.testing.assert_allclose(a.lam, b.lam, atol=1e-10, rtol=0)
    assert GNI(DiscreteLagrangian("trapezoidal")).order == 2


def test_newton_failure_raises_and_integrate_reports_it():
    from chetaev.discrete_lagrangian import (
        ConvergenceError,
        LinearVelocityConstraint,
        MechanicalSystem,
        NewtonOptions,
    )

    mech = MechanicalSystem(
        np.eye(3),
        lambda q: np.sum(q**4, axis=-1),
        lambda q: 4 * q**3,
        lambda q: np.eye(3) * (12 * q**2)[..., None, :],
    )
    def A(q):
        return np.stack([-q[..., 1], 0 * q[..., 0], 1 + 0 * q[..., 0]], -1)[..., None, :]

    con = LinearVelocityConstraint(A)
    sys_ = ConstrainedSystem(mech, con)
    m = GNI("midpoint", newton=NewtonOptions(max_iter=1))
    q0, v0 = np.array([1.0, 0.5, 0.0]), np.array([1.0, 0.0, 0.5])
    s = m.initial_state(sys_, q0, v0)
    with pytest.raises(ConvergenceError, match=r"Newton did not converge at step 0 \(t = 0\)"):
        m.step(sys_, s, 0.3)
    traj = integrate(sys_, m, q0, v0, h=0.3, n_steps=3)
    assert not traj.success and "Newton did not converge" in traj.message
    assert GNI("midpoint").step(sys_, s, 0.3).info["newton_iterations"] > 1


@pytest.mark.parametrize("variant", ["euler_a", "euler_b", "rattle"])
@pytest.mark.parametrize("affine", [False, True])
def test_paper_two_step_equations_11_12_28(variant, affine, particle, affine_particle, runner):
    """The q-sequence solves the paper's own constant-M equations: (11a)/(12a)/(28a) and
    μ(q_k)((q_{k+1} − q_{k−1})/(2h) + (1 − 2α)(h/2)M⁻¹V_q(q_k) − Y(q_k)) = 0 with α = 0, 1, ½
    ((11b), (12b), SHAKE; affine (28b) and its α-version, paper §5; Def. 6.1)."""
    problem = affine_particle if affine else particle
    alpha = {"euler_a": 0.0, "euler_b": 1.0, "rattle": 0.5}[variant]
    h = 0.05
    states = runner(GNI(variant), problem, h, 100)
    q = np.array([s.q for s in states])
    lam = np.array([s.lam for s in states])
    inner, con = problem.system.system, problem.system.constraint
    M, qk = inner.M(q[0]), q[1:-1]
    Vq = inner.gradV(qk)
    mu = con.matrix(qk)
    # (11a): q_{k+1} − 2q_k + q_{k−1} = −h² M⁻¹(V_q − μᵀλ)   (chetaev sign: λ̃_paper = −λ)
    lhs = q[2:] - 2 * qk + q[:-2]
    rhs = -(h**2) * np.linalg.solve(M, (Vq - np.einsum("...ai,...a->...i", mu, lam[1:-1])).T).T
    # round-off (h = 0.05, 100 steps, 6 cases, OPENBLAS_NUM_THREADS=1 and unset): measured
    # worst 2.1e-16 (11a) and 1.6e-15 (11b); bound 1e-13 leaves margins 489 and 64
    assert np.max(np.abs(lhs - rhs)) < 1e-13
    # (11b)/(12b)/(28b): μ((q_{k+1} − q_{k−1})/(2h) + (1−2α)(h/2) M⁻¹V_q) + a = 0
    w = (q[2:] - q[:-2]) / (2 * h) + (1 - 2 * alpha) * 0.5 * h * np.linalg.solve(M, Vq.T).T
    r = np.einsum("...ai,...i->...a", mu, w) + con.affine(qk)
    assert np.max(np.abs(r)) < 1e-13
    # and the other sign does NOT hold for A and B (so the test can tell them apart)
    if alpha != 0.5:
        w_wrong = w - 2 * (1 - 2 * alpha) * 0.5 * h * np.linalg.solve(M, Vq.T).T
        r_wrong = np.einsum("...ai,...i->...a", mu, w_wrong) + con.affine(qk)
        assert np.max(np.abs(r_wrong)) > 1e-4  # measured >= 3.2e-2 (method): margin 317
