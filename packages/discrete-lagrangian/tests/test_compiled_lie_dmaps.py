"""The compiled backend (issue 17) of :class:`LieDiscretizationMapMethod` (paper §6).

The compiled step (:mod:`chetaev.discrete_lagrangian.methods._compiled_lie_dmaps`) solves
the Phase-1 equations of the numpy step (Euler A / B §6.2, lobatto2 (6.4)–(6.7) as two
half-step solves, RATTLE (6.8)–(6.10) as one joint solve) with the same unknowns, initial
guess and stopping rule, so with ``NewtonOptions(tol=1e-14)`` both stop within
``max(1e-14, 64 eps)·scale`` of the same root and agree over 100 steps to 1e-12, single and
batched. Its analytic Jacobian is checked entry by entry against the numpy
``rattle_jacobian`` / ``euler_jacobian`` (a wrong Jacobian keeps the root, so agreement of the
trajectories alone would not see it).

Systems: the heavy top on SO(3) (``testing.heavy_top(symbolic=True)``, the registry's twin)
and a body on SE(2) with a non-diagonal constant inertia (``INERTIA_INV`` in the guess and
the velocities) and a potential in rotation and translation. Four compiled modules, one per
kind, cover each (group, retraction) pair once (~10–20 s each on first use, then cached on
disk; the whole file 83 s cold); RATTLE with exp on the heavy top is the registry's
"LieDmap-rattle" module (integration-tests/test_compiled_protocol.py), shared. The
Jacobian check runs every mode on both groups and both retractions.

Measured (h = 0.05, 100 steps, max over q, v, p relative to max(1, |reference|)): at most
6.1e-14 single (RATTLE exp on the heavy top, q) and 2.9e-14 batched (Euler B Cayley on the
heavy top, q); the total Newton iterations over the 100 steps equal, but for RATTLE with exp
single (377 numpy, 376 compiled: one residual at the threshold).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

pytest.importorskip("numba")
sp = pytest.importorskip("sympy")

from chetaev.discrete_lagrangian import ConvergenceError, NewtonOptions, integrate  # noqa: E402
from chetaev.discrete_lagrangian import discretization_maps as dm  # noqa: E402
from chetaev.discrete_lagrangian import testing as dlt  # noqa: E402
from chetaev.discrete_lagrangian.extending import BackendError, interface_of  # noqa: E402
from chetaev.discrete_lagrangian.methods._dmaps_lie import (  # noqa: E402
    euler_jacobian,
    euler_residual,
    rattle_jacobian,
    rattle_residual,
)
from chetaev.discrete_lagrangian.symbolic import from_trivialized_lagrangian  # noqa: E402
from chetaev.liegroups import SE2, SO3, retraction  # noqa: E402

AGREE = 1e-12
H = 0.05
N_STEPS = 100
TIGHT = NewtonOptions(tol=1e-14, simplified=True)
INERTIA_SE2 = [[1.0, 0.2, 0.0], [0.2, 2.0, 0.1], [0.0, 0.1, 1.5]]


@functools.cache
def _se2():
    """A body on SE(2): ℓ = ½ηᵀ𝕀η − V(g), 𝕀 non-diagonal, V = ½x² + y² + 0.4 cos θ + 0.2 xy."""
    g, e = sp.MatrixSymbol("g", 3, 3), sp.symbols("e0:3")
    kin = sum(0.5 * INERTIA_SE2[i][j] * e[i] * e[j] for i in range(3) for j in range(3))
    x, y = g[0, 2], g[1, 2]
    V = 0.5 * x**2 + y**2 + 0.4 * g[0, 0] + 0.2 * x * y
    return from_trivialized_lagrangian(SE2, kin - V, e, g=g)


@functools.cache
def _top():
    return dlt.heavy_top(symbolic=True)


#: system key: (twin, group, q0, v0)
SYSTEMS = {
    "heavy_top": (_top, SO3, np.eye(3), np.array([0.3, 1.0, -0.4])),
    "se2": (_se2, SE2, SE2.exp(np.array([0.3, -0.2, 0.5])), np.array([0.4, -0.3, 0.8])),
}

#: The compiled variants checked: (kind, retraction, system key).
VARIANTS = [
    ("rattle", "exp", "heavy_top"),
    ("euler_a", "exp", "se2"),
    ("euler_b", "cayley", "heavy_top"),
    ("lobatto2", "cayley", "se2"),
]


def _method(kind, ret, backend, newton=TIGHT):
    return dm.LieDiscretizationMapMethod(kind, retraction=ret, newton=newton, backend=backend)


def _problem(key, batched):
    make, group, q0, v0 = SYSTEMS[key]
    if batched:
        rng = np.random.default_rng(5)
        q0 = q0 @ group.exp(0.3 * rng.standard_normal((4, 3)))
        v0 = v0 + 0.3 * rng.standard_normal((4, 3))
    return make(), q0, v0


def _rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert a.shape == b.shape
    return float(np.max(np.abs(a - b))) / max(1.0, float(np.max(np.abs(b))))


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize("variant", VARIANTS, ids=["-".join(v) for v in VARIANTS])
def test_compiled_agrees_with_numpy(variant, batched):
    kind, ret, key = variant
    system, q0, v0 = _problem(key, batched)
    runs = {b: integrate(system, _method(kind, ret, b), q0, v0, h=H, n_steps=N_STEPS)
            for b in ("numpy", "numba")}
    a, b = runs["numpy"], runs["numba"]
    assert (a.stats["backend"], b.stats["backend"]) == ("numpy", "numba")
    assert a.success and b.success, (a.message, b.message)
    assert b.q.shape == a.q.shape == (N_STEPS + 1, *np.shape(q0))
    err = max(_rel(getattr(b, f), getattr(a, f)) for f in ("t", "q", "v", "p"))
    assert err <= AGREE, err
    assert a.lam is None and b.lam is None
    # the same stopping rule: equal counts up to a residual landing at the threshold
    ia, ib = a.stats["newton_iterations"], b.stats["newton_iterations"]
    assert abs(ia - ib) <= 2, (ia, ib)


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
def test_step_runs_compiled(batched):
    """``Method.step`` takes the compiled step (one trajectory and a batch): the numpy step's
    state to rounding, ``info["backend"] == "numba"``."""
    system, q0, v0 = _problem("heavy_top", batched)
    out = {}
    for backend in ("numpy", "numba"):
        m = _method("rattle", "exp", backend)
        s = m.initial_state(system, q0, v0)
        for _ in range(3):
            s = m.step(system, s, H)
        out[backend] = s
    a, b = out["numpy"], out["numba"]
    assert b.info["backend"] == "numba" and "backend" not in a.info
    assert b.n == a.n == 3 and b.t == pytest.approx(a.t, abs=1e-15)
    for f in ("q", "v", "p"):
        assert _rel(getattr(b, f), getattr(a, f)) <= 1e-13, f
    assert b.info["newton_iterations"] == a.info["newton_iterations"]


def _eval_case(kind, ret, key, mode):
    """The ``_eval`` of the compiled module of ``(kind, ret)`` on system ``key`` and a random
    point (x, g0, α0) of the Phase-1 equations of ``mode`` (``_eval`` serves every mode
    whatever the module's kind)."""
    system = SYSTEMS[key][0]()
    group = SYSTEMS[key][1]
    iface = interface_of(system)
    m = _method(kind, ret, "numba")
    why, plan = m._compiled_plan(system, iface)
    assert why == ""
    mod = plan.module()
    rng = np.random.default_rng(3 + mode)
    d = 3
    g0 = group.exp(rng.standard_normal(3))
    a0 = rng.standard_normal(d)
    nx = 2 * d if mode == 2 else d
    x = 0.8 * rng.standard_normal(nx)
    f0 = iface.potential_grad(g0)
    wk = (np.zeros(d), np.zeros(d), np.zeros((d, d)), np.zeros((d, d)), np.zeros(d),
          np.zeros(d), np.zeros((d, d, d)), np.zeros((d, d)), np.zeros(d), np.zeros(d))
    tau = retraction(group, ret)
    return mod, iface, tau, g0, a0, x, f0, wk, nx


@pytest.mark.parametrize("case", [("rattle", "exp", "heavy_top", 2),
                                  ("euler_b", "cayley", "heavy_top", 1),
                                  ("euler_b", "cayley", "heavy_top", 0),
                                  ("lobatto2", "cayley", "se2", 2),
                                  ("lobatto2", "cayley", "se2", 1),
                                  ("euler_a", "exp", "se2", 0)],
                         ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-mode{c[3]}")
def test_compiled_residual_and_jacobian(case):
    """``_eval`` (the residual and the analytic Jacobian the Newton driver factorises) equals
    the numpy step's residual and Jacobian at a random point (modes: 0 Euler A, 1 Euler B,
    2 RATTLE)."""
    kind, ret, key, mode = case
    mod, iface, tau, g0, a0, x, f0, wk, nx = _eval_case(kind, ret, key, mode)
    h = H
    c = h if mode < 2 else 0.5 * h  # as the step sets it: h (Euler), h/2 (RATTLE)
    R, J = np.zeros(nx), np.zeros((nx, nx))
    ctx = (a0, f0, c, 1.0, wk)
    mod._eval(mode, ctx, x, R, J, False)
    mod._eval(mode, ctx, x, R, J, True)
    if mode == 2:
        R_np = rattle_residual(x, iface, tau, g0, a0, h, None)
        J_np = rattle_jacobian(x, iface, tau, g0, h, None)
    else:
        R_np = euler_residual(x, iface, tau, g0, a0, h, "euler_a" if mode == 0 else "euler_b",
                              None)
        J_np = euler_jacobian(x, iface, tau, g0, h, None)
    assert np.max(np.abs(R - R_np)) <= 1e-13 * max(1.0, np.max(np.abs(R_np)))
    assert np.max(np.abs(J - J_np)) <= 1e-12 * max(1.0, np.max(np.abs(J_np)))


def test_backend_selection():
    """``"auto"`` runs compiled on a twin with kernels and numpy on the hand-written system;
    ``"numba"`` raises :class:`BackendError` naming the cause where no compiled path exists
    (a system without kernels, a forced system, finite-difference Jacobians)."""
    system, q0, v0 = _problem("heavy_top", False)
    m = dm.LieDiscretizationMapMethod("rattle", retraction="exp", newton=TIGHT)
    assert integrate(system, m, q0, v0, h=H, n_steps=2).stats["backend"] == "numba"
    plain = dlt.heavy_top()
    assert integrate(plain, m, q0, v0, h=H, n_steps=2).stats["backend"] == "numpy"
    with pytest.raises(BackendError, match="no compiled kernels"):
        integrate(plain, _method("rattle", "exp", "numba"), q0, v0, h=H, n_steps=1)
    fd = NewtonOptions(tol=1e-14, simplified=True, finite_differences=True)
    with pytest.raises(BackendError, match=r"finite_differences=True"):
        integrate(system, _method("rattle", "exp", "numba", fd), q0, v0, h=H, n_steps=1)
    g, e = sp.MatrixSymbol("g", 3, 3), sp.symbols("e0:3")
    ell = sum(0.5 * (i + 1) * e[i] ** 2 for i in range(3)) - g[2, 0]
    forced = from_trivialized_lagrangian(SO3, ell, e, g=g, force=[-0.1 * e[0], 0, 0])
    with pytest.raises(BackendError, match="forced system"):
        integrate(forced, _method("euler_a", "cayley", "numba"), q0, v0, h=H, n_steps=1)
    sol = integrate(forced, _method("euler_a", "cayley", "auto"), q0, v0, h=H, n_steps=2)
    assert sol.success and sol.stats["backend"] == "numpy"


def test_compiled_newton_failure():
    """A Newton failure ends the compiled run like the numpy one (the message names step
    and residual), and the compiled ``Method.step`` raises ConvergenceError."""
    system, q0, v0 = _problem("heavy_top", False)
    one = NewtonOptions(tol=1e-14, simplified=True, max_iter=1)
    a = integrate(system, _method("rattle", "exp", "numpy", one), q0, v0, h=H, n_steps=5)
    b = integrate(system, _method("rattle", "exp", "numba", one), q0, v0, h=H, n_steps=5)
    assert not a.success and not b.success
    assert b.stats["backend"] == "numba"
    assert "step 0" in b.message and "residual" in b.message
    assert len(b.t) == len(a.t) == 1
    m = _method("rattle", "exp", "numba", one)
    with pytest.raises(ConvergenceError, match="residual"):
        m.step(system, m.initial_state(system, q0, v0), H)
