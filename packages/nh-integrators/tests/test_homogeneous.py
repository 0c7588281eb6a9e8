"""Lagrangian systems on S² = SO(3)/SO(2) integrated as nonholonomic systems on SO(3)
(homogeneous-spaces paper §4.2, §5):
orders 2, 4, 6 in x and ẋ against the ambient ODE on S² (DOP853), multiplier orders, the point
staying on S², energy/multiplier behaviour per multiplier rule, the singular "weighted_sum"
closure, independence of the regularization, builder validation."""

import itertools

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConvergenceError,
    InputError,
    SingularMatrixError,
    integrate,
)
from chetaev.discrete_lagrangian.testing import assert_rounding_close
from chetaev.liegroups import S2
from chetaev.nh_integrators import (
    LieNonholonomicPRK,
    sphere_lift,
    sphere_point,
    sphere_velocity,
    spherical_kepler,
    spherical_pendulum,
    tait_bryan,
)
from chetaev.nh_integrators.testing import disc_initial, fit_order, sphere_reference, vertical_disc

FLOOR = 1e-12
E3 = np.array([0.0, 0.0, 1.0])

PENDULUM_G0 = tait_bryan(0.0, np.pi / 3, 0.0)
PENDULUM_ETA0 = np.array([1.0 / 3.0, 0.0, 0.0])
KEPLER_G0 = tait_bryan(0.940125174120388, -0.693184358892293, 3.007331043590061)
KEPLER_ETA0 = np.array([1.534184084268850, 0.0, 0.0])


def _pend_grad(x):
    return np.broadcast_to(E3, np.shape(x))


def _kepler_grad(x):
    c = np.asarray(x) @ E3
    return -((1.0 - c * c) ** -1.5) * E3


def _slope(hs, errs):
    return fit_order(hs, errs, FLOOR)  # at least three points above the floor


def _energy(sysc, tr):
    return sysc.energy(tr.q, tr.v)


CASES = [
    ("pendulum", "exp", (0.2, 0.1, 0.05), 2.0),
    ("kepler", "exp", (0.1, 0.05, 0.025), 1.0),
    ("kepler", "cayley", (0.1, 0.05, 0.025), 1.0),
]
# s = 4 reaches the round-off floor at the steps above (two points left): larger steps, where
# the measured local slopes are already 6.0-6.1 in x and ẋ and 3.9 in λ
S4_STEPS = {"pendulum": (0.25, 0.2, 0.125, 0.1), "kepler": (0.125, 0.1, 0.0625, 0.05)}


@pytest.mark.parametrize(("problem", "kind", "hs", "T"), CASES)
@pytest.mark.parametrize("s", [2, 3, 4])
def test_sphere_orders(problem, kind, hs, T, s):
    if problem == "pendulum":
        sysc, g0, eta0, grad = spherical_pendulum(), PENDULUM_G0, PENDULUM_ETA0, _pend_grad
    else:
        sysc, g0, eta0, grad = spherical_kepler(), KEPLER_G0, KEPLER_ETA0, _kepler_grad
    xr, vr = sphere_reference(grad, sphere_point(g0), sphere_velocity(g0, eta0), np.array([0.0, T]))
    method = LieNonholonomicPRK(s, retraction=kind, multiplier_rule="carry")
    if s == 4:
        hs = S4_STEPS[problem]
    ex, ev, el = [], [], []
    for h in hs:
        tr = integrate(sysc, method, g0, eta0, h=h, t_final=T)
        assert tr.success, tr.message
        x = sphere_point(tr.q)
        ex.append(np.max(np.abs(x[-1] - xr[-1])))
        ev.append(np.max(np.abs(sphere_velocity(tr.q[-1], tr.v[-1]) - vr[-1])))
        el.append(np.max(np.abs(tr.lam[-1])))  # exact multiplier: λ ≡ 0 (paper §5.1; §5.2)
        # round-off on S² and the solver's stopping threshold in the 𝔪-constraint: measured worst
        # 7.8e-16 and 2.4e-14 over the 9 cases (margins 129 and 4.2)
        assert np.max(np.abs(np.linalg.norm(x, axis=-1) - 1.0)) < 1e-13
        assert np.max(np.abs(tr.v[:, 2])) < 1e-13  # 𝔪-constraint at every node
    # method (deterministic): measured worst |slope - p| 0.090 (x, s = 4 pendulum), 0.032
    # (ẋ), 0.087 (λ): margins >= 2.8
    assert abs(_slope(hs, ex) - method.order) <= 0.25, ex
    assert abs(_slope(hs, ev) - method.order) <= 0.25, ev
    if s == 2:  # F2: trapezoidal NH = free variational PRKMK, Λ ≡ 0 to round-off
        # (solver tolerance 1e-13 divided by h·b_s ~ 0.05): measured worst 4.9e-13, margin 20
        assert max(el) < 1e-11
    else:
        assert abs(_slope(hs, el) - method.multiplier_order) <= 0.25, el
    if problem == "pendulum" and s == 3:  # the docs' theory page [checked]: |Λ_N| = 7.6e-5 at h =
    # 0.1
        # method (deterministic): measured 7.592e-5, 0.1 % from the documented 7.6e-5; the band
        # is 7.6e-5 ± 10 % (margin ~95 on the deviation)
        assert 6.8e-5 < el[1] < 8.4e-5


@pytest.fixture(scope="module")
def pendulum_runs():
    """Pendulum, τ = cay, h = 0.1, T = 100 (the docs' theory page long runs, shortened from T =
    200)."""
    sysc = spherical_pendulum()
    out = {}
    for s, rule in [(2, "carry"), (3, "carry"), (3, "zero_first"), (4, "carry")]:
        tr = integrate(
            sysc,
            LieNonholonomicPRK(s, multiplier_rule=rule),
            PENDULUM_G0,
            PENDULUM_ETA0,
            h=0.1,
            n_steps=1000,
        )
        assert tr.success, tr.message
        dE = np.abs(_energy(sysc, tr) - _energy(sysc, tr)[0])
        out[s, rule] = (tr, dE)
    return out


def _fifths(a):
    return [np.max(p) for p in np.array_split(np.abs(a), 5)]


@pytest.mark.parametrize(
    ("s", "rule", "emax", "lmax"),
    [(2, "carry", 1.5 * 6.91e-3, 1e-11), (3, "zero_first", 5e-6, 1e-4), (4, "carry", 1e-9, 6e-7)],
)
def test_pendulum_bounded_energy_and_multipliers(pendulum_runs, s, rule, emax, lmax):
    """P5/P7/P8: bounded energy error and multipliers, no drift (same size in every fifth);
    the docs' theory page [checked] at T = 200: 6.91e-3 / 2.46e-6 / 6.22e-10 and 7e-15 / 4.67e-5 /
    2.94e-7."""
    tr, dE = pendulum_runs[s, rule]
    # method (deterministic) except λ for s = 2 (round-off, exact λ ≡ 0). Measured (T = 100,
    # OPENBLAS_NUM_THREADS unset): max dE 6.91e-3 / 2.46e-6 / 6.22e-10 (margins 1.5 (derived
    # bound 1.5 C h² with C h² = 6.91e-3), 2.0, 1.6); max |λ| 2.6e-14 / 4.67e-5 / 2.94e-7
    # (margins 380, 2.1, 2.0); the first and last fifths have equal maxima (ratio 1.00 <= 1.25)
    assert np.max(dE) < emax
    assert np.max(np.abs(tr.lam)) < lmax
    f = _fifths(dE)
    assert f[-1] < 1.25 * f[0], f
    if s > 2:
        fl = _fifths(tr.lam[:, 0])
        assert fl[-1] < 1.25 * fl[0], fl
    # on the group and on S² to round-off after 1000 steps
    g = tr.q[-1]
    # round-off accumulated over 1000 group updates: measured worst 1.05e-14 (margin 9.5) and
    # 1.3e-15 on S² (margin 7.5)
    assert np.linalg.norm(g.T @ g - np.eye(3)) < 1e-13
    assert abs(np.linalg.norm(sphere_point(g)) - 1.0) < 1e-14


def test_lobatto3_carry_multiplier_drifts_linearly(pendulum_runs):
    """Documented property (paper §5.1, Fig. 3b): s = 3 with the default "carry" rule, Λ drifts
    linearly, about −2.05e-4 per unit time (cay, h = 0.1), and the energy error grows; the
    "zero_first" rule removes both."""
    tr, dE = pendulum_runs[3, "carry"]
    t, lam = tr.t, tr.lam[:, 0]
    half = t > 50.0
    slope = np.polyfit(t[half], lam[half], 1)[0]
    # method (deterministic): measured slope -2.050e-4 (= the documented value; the band is
    # -2.05e-4 + [-27 %, +27 %]; ∝ h²: -1.66e-4 / -2.48e-4 at h = 0.09 / 0.11), fifths growth
    # f[-1] / f[0] = 1.045 (1.037 / 1.058) against the required 1.03 (the growth the test must
    # see: margin 1.5 on the excess)
    assert -2.6e-4 < slope < -1.5e-4, slope
    f = _fifths(dE)  # 2.46e-6 … 2.58e-6 over T = 100: slow, monotone growth
    assert all(b > a for a, b in itertools.pairwise(f)) and f[-1] > 1.03 * f[0], f
    assert np.max(np.abs(lam)) > 100 * np.max(np.abs(pendulum_runs[3, "zero_first"][0].lam))


@pytest.mark.xfail(
    strict=True,
    reason="s = 3 with Λ-concatenation ('carry'): the multiplier "
    "error is multiplied by R_A(∞) = +1 each step and drifts (homogeneous-spaces paper §5.1, "
    "Fig. 3b); use "
    "multiplier_rule='zero_first'",
)
def test_lobatto3_carry_multiplier_bounded(pendulum_runs):
    tr, _ = pendulum_runs[3, "carry"]
    fl = _fifths(tr.lam[:, 0])
    # measured last / first fifth 4.9 (the drift): the strict xfail is far from flipping
    assert fl[-1] < 1.25 * fl[0]


def test_weighted_sum_rule_is_detected_as_singular():
    """C3 (Σ bⱼΛʲ = 0) is implied by the end-point constraint on the S² lift (F5): the step
    reports the rank deficiency instead of returning arbitrary multipliers."""
    sysc = spherical_pendulum()
    method = LieNonholonomicPRK(3, multiplier_rule="weighted_sum")
    state = method.initial_state(sysc, PENDULUM_G0, PENDULUM_ETA0)
    with pytest.raises(SingularMatrixError, match=r"rank-deficient.*'zero_first'"):
        method.step(sysc, state, 0.1)
    with pytest.raises(SingularMatrixError, match="rank-deficient"):
        integrate(sysc, method, PENDULUM_G0, PENDULUM_ETA0, h=0.1, n_steps=2)


def test_weighted_sum_rule_never_returns_arbitrary_multipliers():
    """Without the H-symmetry (disc on SE(2)) the C3 closure is not exactly singular but still
    degenerate (c = b is orthogonal to the IIIA null vector): the step fails loudly."""
    sysc = vertical_disc()
    g0, eta0 = disc_initial()
    method = LieNonholonomicPRK(3, multiplier_rule="weighted_sum")
    state = method.initial_state(sysc, g0, eta0)
    # measured: Newton diverges (residual 5.8e6 after 17 iterations); the error names the rule
    with pytest.raises(ConvergenceError, match=r"weighted_sum.*degenerate.*'zero_first'"):
        method.step(sysc, state, 0.1)


def test_regularization_changes_trajectory_only_at_method_order():
    """M only affects the discretization error: ‖g(M=1) − g(M=2)‖ = O(h^{2s−2}) (see the docs'
    theory page)."""
    diffs = []
    hs = (0.1, 0.05)
    for h in hs:
        gs = []
        for M in (1.0, 2.0):
            tr = integrate(
                spherical_pendulum(regularization=M),
                LieNonholonomicPRK(3, "exp", multiplier_rule="carry"),
                PENDULUM_G0,
                PENDULUM_ETA0,
                h=h,
                t_final=2.0,
            )
            gs.append(tr.q[-1])
        diffs.append(np.max(np.abs(gs[0] - gs[1])))
    # method (deterministic): measured 7.1e-9 (margin 7.0) and |log2 ratio - 4| = 0.031
    # (margin 9.5)
    assert diffs[0] < 5e-8
    assert abs(np.log2(diffs[0] / diffs[1]) - 4.0) < 0.3, diffs


def test_sphere_lift_pieces():
    sysc = spherical_kepler()
    rng = np.random.default_rng(2)
    g = tait_bryan(*rng.normal(size=3))
    # analytic left-trivialized Hessian equals central differences of the gradient
    from chetaev.liegroups import SO3

    # central FD with step 1e-6: truncation ~1e-12·|f'''| plus cancellation eps·|f|/1e-6
    # ~2e-10·|f|; the bounds 1e-7 / 1e-8 leave >= 50x on O(1) values. Measured 1.7e-9 (Hessian,
    # margin 59) and 2.8e-10 (gradient, margin 36)
    eps = 1e-6
    fd = np.stack(
        [
            (sysc.gradV(g @ SO3.exp(eps * e)) - sysc.gradV(g @ SO3.exp(-eps * e))) / (2 * eps)
            for e in np.eye(3)
        ],
        axis=-1,
    )
    assert np.max(np.abs(sysc.hessV(g) - fd)) < 1e-7
    # gradient: d/dε V(g exp(ε e_j) x0)
    fdg = np.array(
        [
            (sysc.V(g @ SO3.exp(eps * e)) - sysc.V(g @ SO3.exp(-eps * e))) / (2 * eps)
            for e in np.eye(3)
        ]
    )
    assert np.max(np.abs(sysc.gradV(g) - fdg)) < 1e-8
    # energy on the constraint equals (m/2)|ẋ|² + V(x)
    eta = np.array([0.3, -0.4, 0.0])
    x, xd = sphere_point(g), sphere_velocity(g, eta)
    c = x[2]
    # two formulas for the same energy (round-off): measured 0; bound 1e-13 (~450 eps on O(1))
    assert abs(sysc.energy(g, eta) - (0.5 * xd @ xd - c / np.sqrt(1 - c * c))) < 1e-13
    # the S2 object of chetaev.liegroups gives the same lift
    other = sphere_lift(lambda y: y[..., 2], lambda y: np.broadcast_to(E3, np.shape(y)), space=S2)
    # the same constant row (round-off of a 3-term product at most)
    assert_rounding_close(other.constraint.matrix(g), S2.x0[None, :], n_terms=3, what="lift")


def test_sphere_lift_validation():
    grad = _pend_grad
    with pytest.raises(InputError, match="unit vector"):
        sphere_lift(lambda x: x[..., 2], grad, x0=(0.0, 0.0, 2.0))
    with pytest.raises(InputError, match="regularization"):
        sphere_lift(lambda x: x[..., 2], grad, regularization=0.0)
    with pytest.raises(InputError, match="mass"):
        sphere_lift(lambda x: x[..., 2], grad, mass=-1.0)


def test_lobatto3_step_on_so3_costs_milliseconds():
    """Issue 7: a Lobatto-3 step on SO(3) costs milliseconds at most (CPU time per step through
    ``step``, analytic Jacobian; ≈ 1 ms on the development machine; see bench_nh_lie.py)."""
    import time

    sysc = spherical_pendulum()
    method = LieNonholonomicPRK(3, multiplier_rule="carry")
    state = method.initial_state(sysc, PENDULUM_G0, PENDULUM_ETA0)
    for _ in range(5):
        state = method.step(sysc, state, 0.1)
    t0 = time.process_time()
    for _ in range(50):
        state = method.step(sysc, state, 0.1)
    per_step = (time.process_time() - t0) / 50
    # CPU time, not a numerical tolerance: ≈ 1 ms unloaded (issue 7); measured 3.3 ms on a
    # machine with load ~14 on 2 cores: margin 2.4
    assert per_step < 8e-3, f"{1e3 * per_step:.2f} ms per step"


def test_continuous_rule_equals_zero_first_on_sphere():
    """Λ¹ = λ(g_k, η_k) ("continuous", C2 in general form) is Λ¹ = 0 on S², where the exact
    multiplier vanishes identically (paper §2)."""
    sysc = spherical_pendulum()
    runs = [
        integrate(
            sysc,
            LieNonholonomicPRK(3, multiplier_rule=rule),
            PENDULUM_G0,
            PENDULUM_ETA0,
            h=0.1,
            n_steps=20,
        )
        for rule in ("continuous", "zero_first")
    ]
    # λ(g_k, η_k) is zero to round-off, so the two runs differ by round-off: measured bitwise
    # equal (q and λ); bound 1e-14
    assert np.max(np.abs(runs[0].q - runs[1].q)) < 1e-14
    assert np.max(np.abs(runs[0].lam - runs[1].lam)) < 1e-14


def test_kepler_energy_and_multipliers_per_rule():
    """Spherical Kepler, τ = exp, h = 0.05, T = 30 (our check; the note's addendum has h = 0.01):
    energy bounded with no drift for s = 3 (both rules) and s = 4; with the default "carry"
    rule the s = 3 multiplier drifts linearly (≈ +2.8e-4 per unit time here, ∝ h²: the addendum
    gives +1.2e-5 at h = 0.01), with "zero_first" it stays bounded."""
    sysc = spherical_kepler()
    out = {}
    for s, rule in [(3, "carry"), (3, "zero_first"), (4, "carry")]:
        tr = integrate(
            sysc, LieNonholonomicPRK(s, "exp", rule), KEPLER_G0, KEPLER_ETA0, h=0.05, n_steps=600
        )
        assert tr.success, tr.message
        E = sysc.energy(tr.q, tr.v)
        out[s, rule] = tr, np.abs(E - E[0])
    # method (deterministic): measured max dE 1.567e-5 (s = 3, both rules; margin 1.9) and
    # 4.44e-8 (s = 4; margin 2.3); last / first fifth 1.10 and 1.07 (no drift, threshold 1.25);
    # |x| - 1 round-off 2.2e-15 (margin 4.5). OPENBLAS_NUM_THREADS unset.
    for (s, _), (tr, dE) in out.items():
        f = _fifths(dE)
        assert f[-1] < 1.25 * f[0], (s, f)
        assert np.max(dE) < (3e-5 if s == 3 else 1e-7)
        assert abs(np.linalg.norm(sphere_point(tr.q[-1])) - 1.0) < 1e-14
    tr, _ = out[3, "carry"]
    late = tr.t > 15.0
    slope = np.polyfit(tr.t[late], tr.lam[late, 0], 1)[0]
    assert 1.5e-4 < slope < 4e-4, slope
    fz = _fifths(out[3, "zero_first"][0].lam[:, 0])
    # measured max |λ| = C h² = 3.72e-3 (deterministic; the old bound 5e-3 left margin 1.35 <
    # 1.5), so the bound 1.5 C h²; last / first fifth 0.99 (threshold 1.25)
    assert max(fz) < 1.5 * 3.72e-3 and fz[-1] < 1.25 * fz[0], fz


def test_tait_bryan_broadcasts_over_batch_axes():
    """Angles of shape (2, 3) give (2, 3, 3, 3) rotations equal to the per-entry ones (the
    function used to build a ragged array from array angles)."""
    rng = np.random.default_rng(4)
    th = rng.normal(size=(3, 2, 3))
    G = tait_bryan(*th)
    assert G.shape == (2, 3, 3, 3)
    for i in range(2):
        for j in range(3):
            # batched vs single: vectorized cos/sin and stacked 3 x 3 products are not
            # promised bitwise, so the rounding of two chained 3-term products
            assert_rounding_close(G[i, j], tait_bryan(*th[:, i, j]), n_terms=3, n_ops=2,
                                  what="batched tait_bryan")
    # orthogonal to the rounding of three chained 3-term products of unit-size entries
    assert_rounding_close(np.swapaxes(G, -1, -2) @ G, np.broadcast_to(np.eye(3), G.shape),
                          n_terms=3, n_ops=3, scale=1.0, what="GᵀG = I")
    # R_z(θ₃) R_y(θ₂) R_x(θ₁): the third column of R_y(θ₂) R_x(0) is (sin θ₂, 0, cos θ₂)
    assert_rounding_close(tait_bryan(0.0, 0.3, 0.0)[:, 2], [np.sin(0.3), 0.0, np.cos(0.3)],
                          n_terms=3, n_ops=2, what="third column")
