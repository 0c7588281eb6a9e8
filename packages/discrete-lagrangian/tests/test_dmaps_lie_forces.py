"""Forced Lie discretization-map methods (issue 20): the left-trivialized force in α̇.

The heavy top of ``test_discretization_maps_lie`` (SO(3), and SO(3)×R³ with the pivot
constraint x = Rχ) with the nonlinear dissipative body torque
F(R, ω, u) = −c(1 + (e₃ᵀRχ)²) ω + u b (on SO(3)×R³ it acts on the rotation part only, so the
constrained top follows the same rotation), integrated with a piecewise-constant control (step
k uses U[k]) against an independent reference: DOP853 (rtol = atol = 1e-13) on the forced
Euler–Poincaré equations Ṙ = R ω̂, 𝕀ω̇ = 𝕀ω × ω − f(R) + F, written here and restarted on each
step interval with that step's control. Checked at the method's order (slopes fitted above
FLOOR, band ±0.25 as in ``test_orders``): the error of (R, ω) at the nodes and the gap
between the energy change and the discrete work Σ ``info["work"]``. Measured on SO(3)
(T = 1, N = 16, 32, 64, 128; slopes of state / work gap, dissipation only and with the
control; OPENBLAS_NUM_THREADS=1): Euler A 0.99 / 0.94 and 1.00 / 0.94, Euler B 1.00 / 1.06
and 0.99 / 1.07, lobatto2 2.00 / 2.00 (both), RATTLE (Cayley) 2.00 / 2.00 (both), RATTLE
(exp) 2.00 / 2.00 (both); the smallest fitted error is 8.5e-5. On SO(3)×R³ (N = 16, 32,
64, with the control): Euler A 1.03 / 0.94, lobatto2 2.00 / 2.00, RATTLE 2.00 / 1.99.
"""

import functools
import importlib.util
from pathlib import Path

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import ConstrainedSystem, integrate
from chetaev.discrete_lagrangian.discretization_maps import LieDiscretizationMapMethod
from chetaev.discrete_lagrangian.testing import (
    controlled_reference,
    fit_order,
    run_with_work,
    sine_controls,
)


def _load(name: str):
    """A sibling test module by path (the suite runs with ``--import-mode=importlib``)."""
    spec = importlib.util.spec_from_file_location(
        f"_chetaev_dmaps_lie_forces_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LIE = _load("test_discretization_maps_lie")
FLOOR = 1e-11
T = 1.0
NS = (16, 32, 64, 128)
C = 0.3
B = np.array([1.0, 0.0, 0.5])


def torque(R, w, u):
    """Nonlinear velocity-dependent dissipation and the input direction b (body frame)."""
    z = np.einsum("i,...ij,j->...", LIE.E3, R, LIE.CHI)
    return -C * (1.0 + z * z)[..., None] * w + u[..., :1] * B


def force6(g, xi, u):
    """The torque on the rotation part of SO(3)×R³, no force on the translation."""
    R = g[..., :3, :3]
    out = np.zeros(np.broadcast_shapes((*g.shape[:-2], 6), xi.shape, (*u.shape[:-1], 6)))
    out[..., :3] = torque(R, xi[..., :3], u)
    return out


def forced_top():
    return attrs.evolve(LIE.TOP, force=torque, n_controls=1)


def forced_top6(fn=force6, n_controls=1):
    inner = attrs.evolve(LIE.TOP6.system, force=fn, n_controls=n_controls)
    return ConstrainedSystem(inner, LIE.TOP6.constraint)


def rhs(t, y, u):
    """The forced Euler–Poincaré equations of the pivot top with reconstruction."""
    R, w = y[:9].reshape(3, 3), y[9:]
    I = LIE.I_PIVOT
    dw = np.linalg.solve(I, np.cross(I @ w, w) - LIE.grad_V_top(R)
                         + torque(R, w, np.atleast_1d(u)))
    return np.concatenate([(R @ LIE._hat(w)).ravel(), dw])


def _controls(N, amplitude):
    return sine_controls(N, T, amplitude)


@functools.cache
def reference_nodes(N, amplitude):
    """DOP853 restarted on every step interval [t_k, t_{k+1}] with the control U[k]."""
    return controlled_reference(rhs, np.concatenate([LIE.R0.ravel(), LIE.W0]),
                                *_controls(N, amplitude), scalar=True)


def _run_with_work(method, system, q0, v0, U, h):
    states, work = run_with_work(method, system, q0, v0, U, h)
    return states[-1], work


CASES = [("euler_a", "cayley", 1), ("euler_b", "cayley", 1), ("lobatto2", "cayley", 2),
         ("rattle", "cayley", 2), ("rattle", "exp", 2)]


@pytest.mark.parametrize("amplitude", [0.0, 0.5], ids=["dissipation", "control"])
@pytest.mark.parametrize("kind, ret, order", CASES, ids=[f"{k}-{r}" for k, r, _ in CASES])
def test_forced_orders_and_work_SO3(kind, ret, order, amplitude):
    method = LieDiscretizationMapMethod(kind, retraction=ret)
    system = forced_top()
    assert method.supports_forces and method.order == order
    hs, err_x, err_W = [], [], []
    for N in NS:
        _, U = _controls(N, amplitude)
        traj = integrate(system, method, LIE.R0, LIE.W0, h=T / N, n_steps=N, controls=U)
        assert traj.success, traj.message
        last, work = _run_with_work(method, system, LIE.R0, LIE.W0, U, T / N)
        np.testing.assert_array_equal(last.q, traj.q[-1])
        Y = reference_nodes(N, amplitude)
        E = system.energy(traj.q, traj.v)
        hs.append(T / N)
        err_x.append(max(np.max(np.abs(traj.q.reshape(N + 1, 9) - Y[:, :9])),
                         np.max(np.abs(traj.v - Y[:, 9:]))))
        err_W.append(np.max(np.abs(E - E[0] - work)))
        if amplitude == 0.0:  # dissipation: the discrete energy decays at every step
            assert np.all(np.diff(E) < 0) and np.all(np.diff(work) < 0)
    for what, errs in (("state", err_x), ("work", err_W)):
        # deterministic: measured worst |slope − order| 0.065 (Euler B, control, work gap);
        # band 0.25 as in test_orders (margin 3.8)
        slope = fit_order(hs, errs, floor=FLOOR)
        assert abs(slope - order) <= 0.25, (kind, ret, what, slope, errs)


@pytest.mark.parametrize("kind", ["euler_a", "lobatto2", "rattle"])
def test_forced_constrained_top_SO3xR3(kind):
    """On SO(3)×R³ with the pivot constraint: the rotation follows the forced pivot top at
    the method's order, the constraint and its tangency hold at the Newton level, and the
    discrete work matches the energy change at the order (the constraint does no work)."""
    method = LieDiscretizationMapMethod(kind)
    order = method.order
    system = forced_top6()
    hs, err_x, err_W = [], [], []
    for N in NS[:3]:
        _, U = _controls(N, 0.5)
        last, work = _run_with_work(method, system, LIE.G0, LIE.XI0, U, T / N)
        traj = integrate(system, method, LIE.G0, LIE.XI0, h=T / N, n_steps=N, controls=U)
        np.testing.assert_array_equal(last.q, traj.q[-1])
        Y = reference_nodes(N, 0.5)
        R = traj.q[..., :3, :3].reshape(N + 1, 9)
        hs.append(T / N)
        err_x.append(max(np.max(np.abs(R - Y[:, :9])), np.max(np.abs(traj.v[:, :3] - Y[:, 9:]))))
        E = system.energy(traj.q, traj.v)
        err_W.append(np.max(np.abs(E - E[0] - work)))
        # Newton-level constraint (the methods' tol 1e-14; test_discretization_maps_lie's
        # bound for the unforced runs); measured worst 3.3e-15 and 3.3e-16 (margins 15, 150)
        assert np.max(np.abs(LIE.phi6(traj.q))) < 5e-14
        assert np.max(np.abs(np.einsum("...ij,...j->...i", LIE.ell6(traj.q), traj.v))) < 5e-14
    for what, errs in (("state", err_x), ("work", err_W)):
        # deterministic: measured worst |slope − order| 0.065 (Euler A, work gap); band 0.25
        # (margin 3.8)
        slope = fit_order(hs, errs, floor=FLOOR)
        assert abs(slope - order) <= 0.25, (kind, what, slope, errs)


@pytest.mark.parametrize("kind", ["euler_a", "euler_b", "lobatto2", "rattle"])
def test_zero_force_is_the_unforced_method_bitwise(kind):
    method = LieDiscretizationMapMethod(kind)
    zero = forced_top6(lambda g, xi, u: np.zeros(np.broadcast_shapes((*g.shape[:-2], 6),
                                                                     xi.shape)), 0)
    a = integrate(LIE.TOP6, method, LIE.G0, LIE.XI0, h=0.05, n_steps=10)
    b = integrate(zero, method, LIE.G0, LIE.XI0, h=0.05, n_steps=10)
    for x, y in ((a.q, b.q), (a.p, b.p), (a.lam, b.lam)):
        np.testing.assert_array_equal(x, y)


def test_forced_initial_multiplier():
    """λ₀ of the forced equations. The translation equation m ẍ = −m g e₃ + λ (ℓ = [Rχ̂ | I])
    with ẍ = R(ω × (ω × χ) + ω̇ × χ) gives λ; the force changes it by m R(δω̇ × χ), δω̇ the
    torque's part of ω̇ in the reference's closed form. Compared as that change (the
    unforced λ carries the system's finite-difference derivative of ℓ, ~1e-11, the same in
    both and cancelled): few-term sums, bound 1e-13, measured 2.8e-16."""
    u = np.array([0.7])
    method = LieDiscretizationMapMethod("rattle")
    forced = method.initial_state(forced_top6(), LIE.G0, LIE.XI0, u=u).lam
    free = method.initial_state(LIE.TOP6, LIE.G0, LIE.XI0).lam
    dw = np.linalg.solve(LIE.I_PIVOT, torque(LIE.R0, LIE.W0, u))
    change = LIE.MASS * LIE.R0 @ np.cross(dw, LIE.CHI)
    np.testing.assert_allclose(forced - free, change, rtol=0, atol=1e-13)
