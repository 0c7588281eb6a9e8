"""The compiled LieNonholonomicPRK (issue 17) against its numpy path: the ball rolling on a
turntable on SO(3)×R² (§7.5), built symbolically.

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
from chetaev.liegroups import SO3, Product, Rn  # noqa: E402
from chetaev.nh_integrators import LieNonholonomicPRK  # noqa: E402
from chetaev.nh_integrators.testing import ball_initial, turntable_ball  # noqa: E402

AGREE = 1e-12
TIGHT = NewtonOptions(tol=1e-14, max_iter=30)
G = Product(SO3, Rn(2))


@pytest.fixture(scope="module")
def ball():
    """``turntable_ball()`` (r = 1, a = 0.4, Ω = 1) from its symbolic ℓ and constraints
    φ₁ = v_x + Ω y − r ω₂, φ₂ = v_y − Ω x + r ω₁ with ω = R ω_b."""
    return turntable_ball(symbolic=True)


def _run(system, backend, rule="continuous", q0=None, v0=None, n=100, h=0.1):
    g0, e0 = ball_initial()
    method = LieNonholonomicPRK(3, multiplier_rule=rule, newton=TIGHT, backend=backend)
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


@pytest.mark.parametrize("rule", ["continuous", "zero_first"])
def test_ball_agrees_single(ball, rule):
    a, b = _run(ball, "numpy", rule), _run(ball, "numba", rule)
    assert a.stats["backend"] == "numpy" and b.stats["backend"] == "numba"
    assert a.success and b.success
    assert _agree(a, b) <= AGREE
    assert b.stats["max_constraint_residual"] <= 1e-13


def test_ball_agrees_batched(ball):
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
    a, b = _run(ball, "numpy", q0=gs, v0=np.array(es)), _run(ball, "numba", q0=gs,
                                                              v0=np.array(es))
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


def test_vertical_disc_se2_nonlinear_constraint_agrees():
    """The vertical disc on SE(2) (§7.4) with the nonlinear constraint η₂ + η₂³ = 0 (a general
    VelocityConstraint: its ∂²φ/∂η² enters the Newton matrix) and a harmonic potential: the
    generic matrix-Cayley group piece; the same bound (measured 6.0e-14 on g, η, μ, λ)."""
    from chetaev.liegroups import SE2
    from chetaev.nh_integrators.testing import disc_initial

    g = sp.MatrixSymbol("g", 3, 3)
    e = sp.symbols("e0:3")
    ell = 0.5 * (e[0] ** 2 + e[1] ** 2 + 0.5 * e[2] ** 2) - (g[0, 2] ** 2 + g[1, 2] ** 2) / 2
    disc = from_trivialized_lagrangian(SE2, ell, e, g=g, nonholonomic=[e[1] + e[1] ** 3])
    g0, e0 = disc_initial()
    a, b = (integrate(disc, LieNonholonomicPRK(3, newton=TIGHT, backend=be), g0, e0, h=0.05,
                      n_steps=100) for be in ("numpy", "numba"))
    assert b.stats["backend"] == "numba" and a.success and b.success
    assert _agree(a, b) <= AGREE
