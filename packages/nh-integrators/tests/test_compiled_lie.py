"""The compiled LieNonholonomicPRK (issue 17) against its numpy path: the ball rolling on a
turntable on SO(3)×R² (§7.5), built symbolically, the vertical disc on SE(2) and the S²
pendulum and Kepler problem through their SO(3) lifts (``symbolic=True``), with the Cayley
and the exp retractions.

The compiled step solves the same equations (App. F, inverse-free (3c), IIIA momenta of
eq. 5) with the same unknowns, guess and Newton rule (``lie_nh_newton``: simplified Newton,
refresh 0.05, polished to round-off), so with ``NewtonOptions(tol=1e-14)`` both stop within
``max(1e-14, 64 eps)·scale`` of the same root: over 100 steps (h = 0.1) they agree to 1e-12
(the brief's bound; measured 3.7e-15 / 5.4e-15 on g, η, μ and 3.8e-14 / 4.3e-14 on λ, whose
Newton sensitivity is larger, for the rules continuous / zero_first). The symbolic ball's
kernels equal the hand-written ``turntable_ball`` constraint to 1e-14 relative (exact
derivatives, a few ulps apart).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("numba")
sp = pytest.importorskip("sympy")

from chetaev.discrete_lagrangian import NewtonOptions, integrate  # noqa: E402
from chetaev.discrete_lagrangian.extending import BackendError, interface_of  # noqa: E402
from chetaev.discrete_lagrangian.symbolic import from_trivialized_lagrangian  # noqa: E402
from chetaev.discrete_lagrangian.testing import assert_systems_agree  # noqa: E402
from chetaev.liegroups import SO3, Product, Rn  # noqa: E402
from chetaev.nh_integrators import (  # noqa: E402
    LieNonholonomicPRK,
    sphere_point,
    sphere_velocity,
    spherical_kepler,
    spherical_pendulum,
    tait_bryan,
)
from chetaev.nh_integrators.testing import (  # noqa: E402
    ball_initial,
    fit_order,
    sphere_reference,
    turntable_ball,
)

AGREE = 1e-12
TIGHT = NewtonOptions(tol=1e-14, max_iter=30)
G = Product(SO3, Rn(2))
#: (g0, η0) of the S² tests of ``test_homogeneous.py`` (paper §5.1, §5.2)
PENDULUM = (tait_bryan(0.0, np.pi / 3, 0.0), np.array([1.0 / 3.0, 0.0, 0.0]))
KEPLER = (tait_bryan(0.940125174120388, -0.693184358892293, 3.007331043590061),
          np.array([1.534184084268850, 0.0, 0.0]))


@pytest.fixture(scope="module")
def ball():
    """``turntable_ball()`` (r = 1, a = 0.4, Ω = 1) from its symbolic ℓ and constraints
    φ₁ = v_x + Ω y − r ω₂, φ₂ = v_y − Ω x + r ω₁ with ω = R ω_b."""
    return turntable_ball(symbolic=True)


def _run(system, backend, rule="continuous", q0=None, v0=None, n=100, h=0.1, kind="cayley"):
    g0, e0 = ball_initial()
    method = LieNonholonomicPRK(3, retraction=kind, multiplier_rule=rule, newton=TIGHT,
                                backend=backend)
    return integrate(system, method, g0 if q0 is None else q0, e0 if v0 is None else v0,
                     h=h, n_steps=n)


def _agree(a, b) -> float:
    return max(float(np.max(np.abs(getattr(a, f) - getattr(b, f))))
               for f in ("t", "q", "v", "p", "lam"))


def test_kernels_match_the_hand_written_ball(ball):
    k = interface_of(ball).kernels
    assert k.constraint == "velocity" and k.m == 2 and k.n == 5 and k.mechanical
    ns = {"math": math}
    exec(k.source, ns)
    con = turntable_ball().constraint
    rng = np.random.default_rng(2)
    worst = 0.0
    for g in G.random(rng, (10,)):
        eta = rng.standard_normal(5)
        for name, ref in (("phi", con.residual(g, eta)), ("phi_v", con.dphi_dv(g, eta)),
                          ("phi_g", con.dphi_dq(g, eta)),
                          ("phi_vg", con.d2phi_dvdq(g, eta))):
            out = np.empty(np.shape(ref))
            ns[name](g.ravel(), eta, out)
            worst = max(worst, float(np.max(np.abs(out - ref) / np.maximum(1, np.abs(ref)))))
    assert worst <= 1e-14


@pytest.mark.parametrize(("rule", "kind"), [("continuous", "cayley"), ("zero_first", "cayley"),
                                            ("continuous", "exp")])
def test_ball_agrees_single(ball, rule, kind):
    """(exp: measured 3.1e-15 on g, η, μ and 4.2e-14 on λ.)"""
    a, b = _run(ball, "numpy", rule, kind=kind), _run(ball, "numba", rule, kind=kind)
    assert a.stats["backend"] == "numpy" and b.stats["backend"] == "numba"
    assert a.success and b.success
    assert _agree(a, b) <= AGREE
    assert b.stats["max_constraint_residual"] <= 1e-13


@pytest.mark.parametrize("kind", ["cayley", "exp"])
def test_ball_agrees_batched(ball, kind):
    g0, e0 = ball_initial()
    rng = np.random.default_rng(4)
    gs = np.stack([g0, G.from_parts([SO3.exp(np.array([0.2, -0.1, 0.3])),
                                     np.array([0.5, -0.4])])])
    # consistent velocities: ω_b free, v from the constraints (R ω_b spatial, Ω = r = 1)
    es = []
    for g in gs:
        wb = e0[:3] + 0.2 * rng.standard_normal(3)
        w = g[:3, :3] @ wb
        x, y = g[3, 5], g[4, 5]
        es.append(np.concatenate([wb, [w[1] - y, x - w[0]]]))
    a = _run(ball, "numpy", q0=gs, v0=np.array(es), kind=kind)
    b = _run(ball, "numba", q0=gs, v0=np.array(es), kind=kind)
    assert b.q.shape == (101, 2, 6, 6) and b.lam.shape == (101, 2, 2)
    assert _agree(a, b) <= AGREE


def test_step_and_backend_choice(ball):
    g0, e0 = ball_initial()
    m = LieNonholonomicPRK(3, newton=TIGHT, backend="numba")
    mn = LieNonholonomicPRK(3, newton=TIGHT, backend="numpy")
    s0 = mn.initial_state(ball, g0, e0)
    s1, r1 = m.step(ball, s0, 0.1), mn.step(ball, s0, 0.1)
    assert s1.info["backend"] == "numba" and s1.n == 1
    for f in ("q", "v", "p", "lam"):
        assert np.max(np.abs(getattr(s1, f) - getattr(r1, f))) <= AGREE
    assert _run(ball, "auto", n=2).stats["backend"] == "numba"
    assert _run(ball, "auto", "carry", n=2).stats["backend"] == "numpy"
    with pytest.raises(BackendError, match="carry"):
        _run(ball, "numba", "carry", n=2)
    assert _run(turntable_ball(), "auto", n=2).stats["backend"] == "numpy"
    with pytest.raises(BackendError, match="from_trivialized_lagrangian"):
        _run(turntable_ball(), "numba", n=2)
    # the exp retraction runs compiled; the hand-written S² lift (plain callables) does not
    assert _run(ball, "auto", n=2, kind="exp").stats["backend"] == "numba"
    g0, e0 = PENDULUM
    for kind in ("cayley", "exp"):
        m = LieNonholonomicPRK(3, retraction=kind, newton=TIGHT, backend="numba")
        with pytest.raises(BackendError, match="from_trivialized_lagrangian"):
            integrate(spherical_pendulum(), m, g0, e0, h=0.1, n_steps=2)


@pytest.mark.parametrize("kind", ["cayley", "exp"])
def test_vertical_disc_se2_nonlinear_constraint_agrees(kind):
    """The vertical disc on SE(2) (§7.4) with the nonlinear constraint η₂ + η₂³ = 0 (a general
    VelocityConstraint: its ∂²φ/∂η² enters the Newton matrix) and a harmonic potential: the
    generic matrix-Cayley group piece (exp: SE(2)'s closed forms); the same bound (measured
    6.0e-14 on g, η, μ, λ, both retractions)."""
    from chetaev.liegroups import SE2
    from chetaev.nh_integrators.testing import disc_initial

    g = sp.MatrixSymbol("g", 3, 3)
    e = sp.symbols("e0:3")
    ell = 0.5 * (e[0] ** 2 + e[1] ** 2 + 0.5 * e[2] ** 2) - (g[0, 2] ** 2 + g[1, 2] ** 2) / 2
    disc = from_trivialized_lagrangian(SE2, ell, e, g=g, nonholonomic=[e[1] + e[1] ** 3])
    g0, e0 = disc_initial()
    a, b = (integrate(disc, LieNonholonomicPRK(3, retraction=kind, newton=TIGHT, backend=be),
                      g0, e0, h=0.05, n_steps=100) for be in ("numpy", "numba"))
    assert b.stats["backend"] == "numba" and a.success and b.success
    assert _agree(a, b) <= AGREE


# ----------------------------------------------------------------------------- S²
def test_symbolic_sphere_lifts_match_the_hand_written_ones():
    """``spherical_pendulum`` / ``spherical_kepler(symbolic=True)`` (ℓ = ½ηᵀ𝕀_reg η − V(g x₀),
    x₀·η = 0 through ``from_trivialized_lagrangian``) are the hand-written lifts: every
    derivative block, the constraint and the multiplier (``assert_systems_agree``, its
    rounding bound), at the default and at an off-axis origin with other m, M, α."""
    rng = np.random.default_rng(6)
    q, v = SO3.random(rng, (20,)), rng.standard_normal((20, 3))
    for kw in ({}, {"mass": 2.0, "regularization": 0.5, "alpha": 1.3, "x0": (0.6, 0.0, 0.8)}):
        sym = spherical_pendulum(symbolic=True, **kw)
        assert interface_of(sym).kernels.constraint == "velocity"
        assert_systems_agree(sym, spherical_pendulum(**kw), q, v)
    for kw in ({}, {"rho": 0.7, "center": (0.0, 0.6, 0.8)}):
        sym = spherical_kepler(symbolic=True, **kw)
        assert interface_of(sym).kernels is not None
        c = q[:, :, 2] @ np.asarray(kw.get("center", (0.0, 0.0, 1.0)))  # c = X·(g x₀)
        away = np.abs(c) < 0.9  # V = −ρ cot ϑ: away from the centre and its antipode
        assert_systems_agree(sym, spherical_kepler(**kw), q[away], v[away])


@pytest.fixture(scope="module")
def sphere_models():
    return {"pendulum": (spherical_pendulum(symbolic=True), *PENDULUM),
            "kepler": (spherical_kepler(symbolic=True), *KEPLER)}


@pytest.mark.parametrize("kind", ["cayley", "exp"])
@pytest.mark.parametrize("problem", ["pendulum", "kepler"])
def test_sphere_agrees(sphere_models, problem, kind):
    """S² through its SO(3) lift: compiled against numpy, single (100 steps, h = 0.1) and a
    batch of three initial states on the 𝔪-constraint (x₀·η = 0, 40 steps); measured worst
    over single / batched and g, η, μ, λ: 5.7e-15 (pendulum) and 4.3e-14 (Kepler)."""
    sysc, g0, e0 = sphere_models[problem]
    a, b = (_run(sysc, be, q0=g0, v0=e0, kind=kind) for be in ("numpy", "numba"))
    assert a.stats["backend"] == "numpy" and b.stats["backend"] == "numba"
    assert a.success and b.success
    assert _agree(a, b) <= AGREE
    assert b.stats["max_constraint_residual"] <= 1e-13
    rng = np.random.default_rng(9)
    gs = np.stack([g0, g0 @ SO3.exp(np.array([0.05, -0.1, 0.2])),
                   g0 @ SO3.exp(np.array([-0.1, 0.05, 0.0]))])
    es = e0 + 0.05 * rng.standard_normal((3, 3))
    es[:, 2] = 0.0
    a, b = (_run(sysc, be, q0=gs, v0=es, n=40, kind=kind) for be in ("numpy", "numba"))
    assert b.q.shape == (41, 3, 3, 3) and b.stats["backend"] == "numba"
    assert _agree(a, b) <= AGREE


def test_sphere_exp_order_compiled(sphere_models):
    """Order 2s − 2 = 4 of LieNonholonomicPRK(3) with the exp retraction on the compiled
    backend (S² pendulum, rule "continuous"), in x and ẋ against the ambient ODE on S²
    (DOP853), T = 2: measured slopes 4.009 (x) and 4.016 (ẋ)."""
    sysc, g0, e0 = sphere_models["pendulum"]
    T = 2.0
    e3 = np.array([0.0, 0.0, 1.0])
    xr, vr = sphere_reference(lambda x: np.broadcast_to(e3, np.shape(x)), sphere_point(g0),
                              sphere_velocity(g0, e0), np.array([0.0, T]))
    hs = [0.2, 0.1, 0.05]
    ex, ev = [], []
    for h in hs:
        tr = integrate(sysc, LieNonholonomicPRK(3, retraction="exp", backend="numba"), g0, e0,
                       h=h, t_final=T)
        assert tr.success and tr.stats["backend"] == "numba"
        ex.append(np.max(np.abs(sphere_point(tr.q[-1]) - xr[-1])))
        ev.append(np.max(np.abs(sphere_velocity(tr.q[-1], tr.v[-1]) - vr[-1])))
    assert abs(fit_order(hs, ex, 1e-12) - 4) <= 0.25, ex
    assert abs(fit_order(hs, ev, 1e-12) - 4) <= 0.25, ev
