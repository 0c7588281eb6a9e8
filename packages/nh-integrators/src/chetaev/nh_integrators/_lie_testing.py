"""Models and independent references for testing and benchmarking the Lie-group methods.

Import them from the public :mod:`chetaev.nh_integrators.testing` (which re-exports every name
here; this module stays importable for existing callers): the vertical disc
with a spring on SE(2) (high-order paper §7.4), the homogeneous ball on
a rotating turntable on SO(3)×R² (§7.5, paper §7.5, "physical" constraint A1), and reference
solutions that do not use the discrete method: the disc's reduced ODE and the ball's closed
form (both integrated / evaluated with scipy DOP853 at rtol 1e-13), and the ambient ODE of a
mechanical system on S² (homogeneous-spaces paper §5).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    InputError,
    LinearVelocityConstraint,
    TrivializedMechanicalSystem,
    VelocityConstraint,
)
from scipy.integrate import solve_ivp

from ._homogeneous import _so3
from ._validate import real_scalar

__all__ = [
    "ball_first_integrals",
    "ball_initial",
    "ball_reference",
    "disc_initial",
    "disc_reference",
    "sphere_reference",
    "turntable_ball",
    "vertical_disc",
    "vertical_disc_general",
]

_J2 = np.array([[0.0, -1.0], [1.0, 0.0]])


# ----------------------------------------------------------------------------- vertical disc
def _symbolic_vertical_disc(mass: float, inertia_z: float, constraint: str) -> ConstrainedSystem:
    """:func:`vertical_disc` from its symbolic ℓ and φ (``symbolic=True``)."""
    import sympy as sp
    from chetaev.discrete_lagrangian.symbolic import from_trivialized_lagrangian
    from chetaev.liegroups import SE2

    g, e = sp.MatrixSymbol("g", 3, 3), sp.symbols("e0:3")
    ell = (0.5 * mass * (e[0] ** 2 + e[1] ** 2) + 0.5 * inertia_z * e[2] ** 2
           - 0.5 * (g[0, 2] ** 2 + g[1, 2] ** 2))
    phi = e[1] + e[1] ** 3 if constraint == "nonlinear" else e[1]
    return from_trivialized_lagrangian(SE2, ell, e, g=g, nonholonomic=[phi])


def vertical_disc(
    mass: float = 1.0, inertia_z: float = 0.5, constraint: str = "linear", *,
    symbolic: bool = False,
) -> ConstrainedSystem:
    """Vertical disc with a spring on SE(2) (§7.4): ℓ = ½[m(v₁² + v₂²) + I_z ω²] − ½(x² + y²),
    φ = v₂ (no lateral sliding). η = (v₁, v₂, ω).

    ``constraint="nonlinear"`` uses the general ``VelocityConstraint`` φ = v₂ + v₂³ instead:
    the same constraint set and, on it, the same Chetaev force direction D₂φ = (0, 1, 0), so
    the same continuous motion and multiplier, while the discrete method sees a constraint
    that is nonlinear in η (D₂φ is evaluated at the stage velocities, where v₂ ≠ 0).
    With ``symbolic=True`` the same ℓ and φ through
    :func:`chetaev.discrete_lagrangian.symbolic.from_trivialized_lagrangian` (needs sympy;
    exact derivatives and, with numba, the compiled backend's kernels)."""
    mass = real_scalar(mass, "mass", positive=True)
    inertia_z = real_scalar(inertia_z, "inertia_z", positive=True)
    if constraint not in ("linear", "nonlinear"):
        raise InputError(f"`constraint` must be 'linear' or 'nonlinear', got {constraint!r}.")
    if symbolic:
        return _symbolic_vertical_disc(float(mass), float(inertia_z), constraint)
    from chetaev.liegroups import SE2

    def V(g: np.ndarray) -> np.ndarray:
        p = np.asarray(g)[..., :2, 2]
        return 0.5 * np.sum(p * p, axis=-1)

    def gradV(g: np.ndarray) -> np.ndarray:
        g = np.asarray(g)
        out = np.zeros((*g.shape[:-2], 3))
        out[..., :2] = np.einsum("...ji,...j->...i", g[..., :2, :2], g[..., :2, 2])
        return out

    def hessV(g: np.ndarray) -> np.ndarray:
        g = np.asarray(g)
        out = np.zeros((*g.shape[:-2], 3, 3))
        out[..., 0, 0] = out[..., 1, 1] = 1.0
        w = np.einsum("...ji,...j->...i", g[..., :2, :2], g[..., :2, 2])
        out[..., :2, 2] = -np.einsum("ij,...j->...i", _J2, w)
        return out

    sysm = TrivializedMechanicalSystem(SE2, np.diag([mass, mass, inertia_z]), V, gradV, hessV)
    if constraint == "linear":
        return ConstrainedSystem(sysm, LinearVelocityConstraint(np.array([[0.0, 1.0, 0.0]])))

    def phi(g: np.ndarray, eta: np.ndarray) -> np.ndarray:
        v2 = np.asarray(eta)[..., 1:2]
        return v2 + v2**3

    def dphi_dv(g: np.ndarray, eta: np.ndarray) -> np.ndarray:
        eta = np.asarray(eta)
        out = np.zeros((*eta.shape[:-1], 1, 3))
        out[..., 0, 1] = 1.0 + 3.0 * eta[..., 1] ** 2
        return out

    def dphi_dq(g: np.ndarray, eta: np.ndarray) -> np.ndarray:
        return np.zeros((*np.shape(eta)[:-1], 1, 3))

    def d2phi_dvdq(g: np.ndarray, eta: np.ndarray) -> np.ndarray:
        return np.zeros((*np.shape(eta)[:-1], 1, 3, 3))

    def d2phi_dv2(g: np.ndarray, eta: np.ndarray) -> np.ndarray:
        eta = np.asarray(eta)
        out = np.zeros((*eta.shape[:-1], 1, 3, 3))
        out[..., 0, 1, 1] = 6.0 * eta[..., 1]
        return out

    con = VelocityConstraint(phi, dphi_dq, dphi_dv, d2phi_dvdq, d2phi_dv2, m=1)
    return ConstrainedSystem(sysm, con)


def vertical_disc_general(
    mass: float = 1.0, inertia_z: float = 0.5, quartic: float = 0.0
) -> ConstrainedSystem:
    """The disc of :func:`vertical_disc` written as a general ``TrivializedLagrangianSystem``
    with analytic second derivatives, ℓ = ½[m(v₁² + v₂²) + I_z ω²] + (ε/4) v₁⁴ − ½(x² + y²)
    (ε = ``quartic``; ε = 0 is the mechanical disc, ε ≠ 0 a non-quadratic kinetic energy)."""
    from chetaev.discrete_lagrangian import TrivializedLagrangianSystem
    from chetaev.liegroups import SE2

    Id = np.array([mass, mass, inertia_z])
    mech = vertical_disc(mass, inertia_z).system

    def lag(g: np.ndarray, eta: np.ndarray) -> np.ndarray:
        eta = np.asarray(eta)
        return 0.5 * np.sum(Id * eta * eta, axis=-1) + 0.25 * quartic * eta[..., 0] ** 4 - mech.V(g)

    def dl_dg(g: np.ndarray, eta: np.ndarray) -> np.ndarray:
        return np.broadcast_to(-mech.gradV(g), (*bs(g, eta), 3))

    def dl_deta(g: np.ndarray, eta: np.ndarray) -> np.ndarray:
        eta = np.asarray(eta)
        out = Id * eta
        out[..., 0] = out[..., 0] + quartic * eta[..., 0] ** 3
        return out

    def bs(g: np.ndarray, eta: np.ndarray) -> tuple[int, ...]:
        return np.broadcast_shapes(np.shape(g)[:-2], np.shape(eta)[:-1])

    def d2l_deta2(g: np.ndarray, eta: np.ndarray) -> np.ndarray:
        eta = np.asarray(eta)
        out = np.zeros((*bs(g, eta), 3, 3))
        out[..., [0, 1, 2], [0, 1, 2]] = Id
        out[..., 0, 0] += 3.0 * quartic * eta[..., 0] ** 2
        return out

    def zero(g: np.ndarray, eta: np.ndarray) -> np.ndarray:
        return np.zeros((*bs(g, eta), 3, 3))

    def d2l_dg2(g: np.ndarray, eta: np.ndarray) -> np.ndarray:
        return np.broadcast_to(-mech.hessV(g), (*bs(g, eta), 3, 3))

    sysm = TrivializedLagrangianSystem(SE2, lag, dl_dg, dl_deta, d2l_deta2, zero, d2l_dg2, zero)
    return ConstrainedSystem(sysm, LinearVelocityConstraint(np.array([[0.0, 1.0, 0.0]])))


def _se2(x: Any, y: Any, th: Any) -> np.ndarray:
    x, y, th = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (x, y, th)))
    g = np.zeros((*x.shape, 3, 3))
    c, s = np.cos(th), np.sin(th)
    g[..., 0, 0], g[..., 0, 1], g[..., 0, 2] = c, -s, x
    g[..., 1, 0], g[..., 1, 1], g[..., 1, 2] = s, c, y
    g[..., 2, 2] = 1.0
    return g


def disc_initial() -> tuple[np.ndarray, np.ndarray]:
    """(g0, η0) of paper §7.4: (x, y, θ) = (1, 0.5, 0.3), η0 = (0.8, 0, 1.2)."""
    return _se2(1.0, 0.5, 0.3), np.array([0.8, 0.0, 1.2])


def disc_reference(
    g0: np.ndarray, eta0: np.ndarray, t: np.ndarray, mass: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact reduced dynamics of the disc (paper §7.4): θ = θ₀ + ωt, ẋ = v₁ cos θ,
    ẏ = v₁ sin θ, m v̇₁ = −(x cos θ + y sin θ), v₂ ≡ 0, λ = m ω v₁ − x sin θ + y cos θ.
    DOP853 at rtol = atol = 1e-13. Returns (g(t), η(t), λ(t)) with λ of shape (T, 1)."""
    t = np.asarray(t, dtype=float)
    x0, y0 = g0[0, 2], g0[1, 2]
    th0 = np.arctan2(g0[1, 0], g0[0, 0])
    v1, om = eta0[0], eta0[2]

    def rhs(tt: float, z: np.ndarray) -> list[float]:
        th = th0 + om * tt
        c, s = np.cos(th), np.sin(th)
        return [z[2] * c, z[2] * s, -(z[0] * c + z[1] * s) / mass]

    sol = solve_ivp(
        rhs,
        (0.0, t[-1]),
        [x0, y0, v1],
        method="DOP853",
        rtol=1e-13,
        atol=1e-13,
        t_eval=t,
        dense_output=False,
    )
    x, y, v = sol.y
    th = th0 + om * t
    eta = np.stack([v, np.zeros_like(v), np.full_like(v, om)], axis=-1)
    lam = (mass * om * v - x * np.sin(th) + y * np.cos(th))[:, None]
    return _se2(x, y, th), eta, lam


# ----------------------------------------------------------------------------- ball
def _symbolic_turntable_ball(r: float, a: float, om: float) -> ConstrainedSystem:
    """:func:`turntable_ball` from its symbolic ℓ (``symbolic=True``)."""
    import sympy as sp
    from chetaev.discrete_lagrangian.symbolic import from_trivialized_lagrangian
    from chetaev.liegroups import SO3, Product, Rn

    g, e = sp.MatrixSymbol("g", 6, 6), sp.symbols("e0:5")
    ell = sum(0.5 * a * r * r * e[i] ** 2 for i in range(3)) + 0.5 * (e[3] ** 2 + e[4] ** 2)
    w = [sum(g[i, j] * e[j] for j in range(3)) for i in range(3)]  # spatial ω = R ω_b
    nh = [e[3] + om * g[4, 5] - r * w[1], e[4] - om * g[3, 5] + r * w[0]]
    return from_trivialized_lagrangian(Product(SO3, Rn(2)), ell, e, g=g, nonholonomic=nh)


def turntable_ball(
    radius: float = 1.0, a: float = 0.4, table_rate: float = 1.0, *, symbolic: bool = False
) -> ConstrainedSystem:
    """Homogeneous ball rolling on a turntable, SO(3)×R², "physical" constraint (§7.5, A1).

    η = (ω_b, v) (body angular velocity, centre velocity); 𝕀 = diag(a r², a r², a r², 1, 1);
    V = 0; with ω = R ω_b (spatial):
    φ₁ = v_x + Ω y − r ω₂ = 0, φ₂ = v_y − Ω x + r ω₁ = 0 (affine in η, depends on g).
    With ``symbolic=True`` the same ℓ and constraints through
    :func:`chetaev.discrete_lagrangian.symbolic.from_trivialized_lagrangian` (needs sympy;
    exact derivatives and, with numba, the compiled backend's kernels).
    """
    radius = real_scalar(radius, "radius", positive=True)
    a = real_scalar(a, "a", positive=True)
    table_rate = real_scalar(table_rate, "table_rate")
    if symbolic:
        return _symbolic_turntable_ball(float(radius), float(a), float(table_rate))
    from chetaev.liegroups import SO3, Product, Rn

    G = Product(SO3, Rn(2))
    r, Om = float(radius), float(table_rate)
    inertia = np.diag([a * r * r] * 3 + [1.0, 1.0])

    def zero_V(g: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(g)[:-2])

    def zero_grad(g: np.ndarray) -> np.ndarray:
        return np.zeros((*np.shape(g)[:-2], 5))

    def zero_hess(g: np.ndarray) -> np.ndarray:
        return np.zeros((*np.shape(g)[:-2], 5, 5))

    def A(g: np.ndarray) -> np.ndarray:
        g = np.asarray(g)
        R = g[..., :3, :3]
        out = np.zeros((*g.shape[:-2], 2, 5))
        out[..., 0, :3] = -r * R[..., 1, :]
        out[..., 1, :3] = r * R[..., 0, :]
        out[..., 0, 3] = 1.0
        out[..., 1, 4] = 1.0
        return out

    def a_aff(g: np.ndarray) -> np.ndarray:
        g = np.asarray(g)
        return np.stack([Om * g[..., 4, 5], -Om * g[..., 3, 5]], axis=-1)

    E = SO3.hat(np.eye(3))  # ê_j, (j, 3, 3)

    def dA(g: np.ndarray) -> np.ndarray:
        g = np.asarray(g)
        R = g[..., :3, :3]
        RE = np.einsum("...ik,jkl->...jil", R, E)  # R ê_j  (..., j, 3, 3)
        out = np.zeros((*g.shape[:-2], 2, 5, 5))
        out[..., 0, :3, :3] = -r * np.swapaxes(RE[..., :, 1, :], -1, -2)
        out[..., 1, :3, :3] = r * np.swapaxes(RE[..., :, 0, :], -1, -2)
        return out

    def da(g: np.ndarray) -> np.ndarray:
        out = np.zeros((*np.shape(g)[:-2], 2, 5))
        out[..., 0, 4] = Om
        out[..., 1, 3] = -Om
        return out

    sysm = TrivializedMechanicalSystem(G, inertia, zero_V, zero_grad, zero_hess)
    return ConstrainedSystem(sysm, LinearVelocityConstraint(A, a_aff, dA, da))


def ball_initial(radius: float = 1.0, table_rate: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(g0, η0) of paper §7.5: R0 = I, (x0, y0) = (1, 0), ω_s0 = (0.3, −0.2, 0.5),
    v0 = (r ω_y − Ω y, Ω x − r ω_x) = (−0.2, 0.7)."""
    g0 = np.eye(6)
    g0[3, 5] = 1.0
    w = np.array([0.3, -0.2, 0.5])
    v = np.array([radius * w[1] - table_rate * 0.0, table_rate * 1.0 - radius * w[0]])
    return g0, np.concatenate([w, v])


def ball_first_integrals(
    g: np.ndarray, eta: np.ndarray, radius: float = 1.0, a: float = 0.4, table_rate: float = 1.0
) -> np.ndarray:
    """(I1, I2, I3, E_mov) of paper §7.5 with ω = R ω_b, shape ``(..., 4)``."""
    g, eta = np.asarray(g), np.asarray(eta)
    R = g[..., :3, :3]
    w = np.einsum("...ij,...j->...i", R, eta[..., :3])
    v = eta[..., 3:]
    x, y = g[..., 3, 5], g[..., 4, 5]
    r, Om = radius, table_rate
    I1 = w[..., 2]
    I2 = r * w[..., 0] - Om * x / (1 + a)
    I3 = r * w[..., 1] - Om * y / (1 + a)
    Emov = (
        0.5 * np.sum(v * v, axis=-1)
        + 0.5 * a * r * r * np.sum(w * w, axis=-1)
        + r * Om * (x * w[..., 0] + y * w[..., 1])
        - Om * Om * (x * x + y * y)
    )
    return np.stack([I1, I2, I3, Emov], axis=-1)


def ball_reference(
    g0: np.ndarray,
    eta0: np.ndarray,
    t: np.ndarray,
    radius: float = 1.0,
    a: float = 0.4,
    table_rate: float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Closed-form ball motion (paper §7.5) with R(t) from Ṙ = ω̂(t) R (DOP853, rtol 1e-13).

    Returns (g(t), η(t), λ(t)): κ = aΩ/(1+a), v(t) = Rot(κt) v0,
    (x, y)(t) = (x0, y0) − J (v(t) − v0)/κ, r ω₁,₂(t) = r ω₁,₂(0) + Ω(x − x0, y − y0)/(1+a),
    ω₃ constant, λ = (−κ v_y, κ v_x).
    """
    t = np.asarray(t, dtype=float)
    r, Om = radius, table_rate
    kap = a * Om / (1 + a)
    R0 = g0[:3, :3]
    p0 = np.array([g0[3, 5], g0[4, 5]])
    w0 = R0 @ eta0[:3]
    v0 = eta0[3:]

    def state(tt: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tt = np.asarray(tt, dtype=float)
        c, s = np.cos(kap * tt), np.sin(kap * tt)
        v = np.stack([c * v0[0] - s * v0[1], s * v0[0] + c * v0[1]], axis=-1)
        p = p0 - np.einsum("ij,...j->...i", _J2, v - v0) / kap
        w = np.stack(
            [
                w0[0] + Om * (p[..., 0] - p0[0]) / ((1 + a) * r),
                w0[1] + Om * (p[..., 1] - p0[1]) / ((1 + a) * r),
                np.full(np.shape(tt), w0[2]),
            ],
            axis=-1,
        )
        return v, p, w

    def rhs(tt: float, z: np.ndarray) -> np.ndarray:
        _, _, w = state(tt)
        return (_so3().hat(w) @ z.reshape(3, 3)).ravel()

    sol = solve_ivp(
        rhs, (0.0, t[-1]), R0.ravel(), method="DOP853", rtol=1e-13, atol=1e-13, t_eval=t
    )
    R = sol.y.T.reshape(-1, 3, 3)
    v, p, w = state(t)
    g = np.zeros((t.size, 6, 6))
    g[:, :3, :3] = R
    g[:, 3, 3] = g[:, 4, 4] = g[:, 5, 5] = 1.0
    g[:, 3:5, 5] = p
    wb = np.einsum("tji,tj->ti", R, w)
    eta = np.concatenate([wb, v], axis=-1)
    lam = np.stack([-kap * v[:, 1], kap * v[:, 0]], axis=-1)
    return g, eta, lam


# ----------------------------------------------------------------------------- sphere
def sphere_reference(
    potential_grad: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    v0: np.ndarray,
    t: np.ndarray,
    mass: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Ambient ODE of L = (m/2)|ẋ|² − V(x) on S² (independent of the group lift):
    m ẍ = f − (x·f) x − m|ẋ|² x, f = −∇V(x). DOP853 at rtol = atol = 1e-13.
    Returns (x(t), ẋ(t))."""
    t = np.asarray(t, dtype=float)

    def rhs(tt: float, z: np.ndarray) -> np.ndarray:
        x, v = z[:3], z[3:]
        f = -np.asarray(potential_grad(x), dtype=float) / mass
        return np.concatenate([v, f - (x @ f) * x - (v @ v) * x])

    sol = solve_ivp(
        rhs,
        (0.0, t[-1]),
        np.concatenate([x0, v0]),
        method="DOP853",
        rtol=1e-13,
        atol=1e-13,
        t_eval=t,
    )
    return sol.y[:3].T, sol.y[3:].T
