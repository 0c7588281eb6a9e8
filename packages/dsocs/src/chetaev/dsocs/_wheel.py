"""Inertia wheel pendulum with a Lyapunov constraint (paper §4.2, eqs. (8)–(10)).

Continuous SOCS on ℝ² ∋ q = (θ, ψ) (universal cover of S¹×S¹):

    L = ½Iθ̇² + ½J(θ̇ + ψ̇)² − M(1 + cos θ)        (M = M̃g; sign restored, the docs' theory page)
    C_K:  dV/dt(q, q̇, q̈) + F(q, q̇) = 0          (eq. (8))
    C_V = span{∂/∂θ}.

V = ½f p_θ² + ½h_c p_ψ² + g_c p_θ p_ψ + χ[1 − cos(ψ − nθ)] + (Me/d)(1 − cos θ),
F = ρ tanh(G)·G, G = g_c p_θ + h_c p_ψ, with p = 𝐌q̇, 𝐌 = [[I+J, J], [J, J]],
h_c = −d(I + (n+1)J), g_c = dJ(n+1), f = (g_c² + e)/h_c (paper §4.2, eqs. (8)–(10)).

Discrete step (eqs. (9)–(10)). Eq. (10) factorizes exactly as G(θ2)·R(θ2) = 0 (paper §4.2, eqs.
(8)–(10)):
G is affine in θ2 (the spurious root, on which V_d is constant) and
R(θ2) = L0 − (I/h²)θ2 + ρ tanh(Dθ2 + E) is strictly decreasing (the physical root, in the
bracket (h²/I)[L0 − ρ, L0 + ρ]). The default solver takes the R-branch; the paper's rule
"closest to θ1" picks the spurious root in a large fraction of steps (paper §4.2, eqs. (8)–(10)).
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from ._errors import DSOCSInputError
from ._validation import step_points

__all__ = [
    "InertiaWheelParameters",
    "inertia_wheel_dsocs",
    "inertia_wheel_step_options",
    "iwp_F",
    "iwp_G",
    "iwp_V",
    "iwp_closed_loop_rhs",
    "iwp_constraint",
    "iwp_constraint_jacobian",
    "iwp_dVdt",
    "iwp_paper_rule_step",
    "iwp_physical_step",
    "iwp_root_filter",
    "iwp_spurious_step",
    "iwp_step_coefficients",
    "iwp_system",
    "iwp_trajectory",
]


@attrs.frozen
class InertiaWheelParameters:
    """Parameters of §4.2 (defaults: the paper's values; M is the product M̃g, the docs' theory
    page)."""

    I: float = 312.5
    J: float = 2.0772
    M: float = 37.98
    d: float = 1.0
    e: float = 1000.0
    chi: float = 100.0
    n: int = -154
    rho: float = 2.0

    @property
    def cinv(self) -> float:
        """c = 1/I + 1/J, entry of 𝐌⁻¹ = [[a, b], [b, c]] (``cinv`` avoids the clash with h_c)."""
        return 1.0 / self.I + 1.0 / self.J

    @property
    def hc(self) -> float:
        """h_c = d(nb − c)/(ac − b²) = −d(I + (n+1)J)."""
        return -self.d * (self.I + (self.n + 1) * self.J)

    @property
    def gc(self) -> float:
        """g_c = d(na − b)/(ac − b²) = dJ(n + 1)."""
        return self.d * self.J * (self.n + 1)

    @property
    def f(self) -> float:
        """f = (g_c² + e)/h_c."""
        return (self.gc**2 + self.e) / self.hc

    @property
    def kappa(self) -> float:
        """κ = (dIg_c − e)/(dIh_c) (closed-loop torque, paper §4.2, eqs. (8)–(10))."""
        return (self.d * self.I * self.gc - self.e) / (self.d * self.I * self.hc)

    @property
    def mass_matrix(self) -> np.ndarray:
        """𝐌 = [[I + J, J], [J, J]]."""
        return np.array([[self.I + self.J, self.J], [self.J, self.J]])


_P = InertiaWheelParameters()


def _momenta(p: InertiaWheelParameters, v):
    v = np.asarray(v, float)
    pt = (p.I + p.J) * v[..., 0] + p.J * v[..., 1]
    ps = p.J * (v[..., 0] + v[..., 1])
    return pt, ps


def iwp_G(q, v, params: InertiaWheelParameters = _P):
    """G = g_c p_θ + h_c p_ψ."""
    pt, ps = _momenta(params, v)
    return params.gc * pt + params.hc * ps


def iwp_F(q, v, params: InertiaWheelParameters = _P):
    """F = ρ tanh(G) G ≥ 0."""
    G = iwp_G(q, v, params)
    return params.rho * np.tanh(G) * G


def iwp_V(q, v, params: InertiaWheelParameters = _P):
    """The Lyapunov function V(q, q̇) of §4.2.1."""
    p = params
    q = np.asarray(q, float)
    pt, ps = _momenta(p, v)
    th, psi = q[..., 0], q[..., 1]
    return (
        0.5 * p.f * pt**2 + 0.5 * p.hc * ps**2 + p.gc * pt * ps
        + p.chi * (1 - np.cos(psi - p.n * th)) + p.M * p.e / p.d * (1 - np.cos(th))
    )


def _gradV_q(q, p):
    q = np.asarray(q, float)
    th, psi = q[..., 0], q[..., 1]
    s = np.sin(psi - p.n * th)
    return np.stack([-p.n * p.chi * s + p.M * p.e / p.d * np.sin(th), p.chi * s], -1)


def iwp_dVdt(q, v, a, params: InertiaWheelParameters = _P):
    """dV/dt(q, q̇, q̈) by the chain rule (paper §4.2, eqs. (8)–(10))."""
    p = params
    pt, ps = _momenta(p, v)
    dpt, dps = _momenta(p, a)
    gq = _gradV_q(q, p)
    v = np.asarray(v, float)
    return (
        p.f * pt * dpt + p.hc * ps * dps + p.gc * (dpt * ps + pt * dps)
        + np.sum(gq * v, -1)
    )


def iwp_constraint(q, v, a, params: InertiaWheelParameters = _P):
    """C_K of eq. (8): dV/dt + F = 0, as a (..., 1) residual."""
    return (iwp_dVdt(q, v, a, params) + iwp_F(q, v, params))[..., None]


def iwp_constraint_jacobian(q, v, a, params: InertiaWheelParameters = _P):
    """(c_q, c_v, c_a) of :func:`iwp_constraint`, each (..., 1, 2) (analytic)."""
    p = params
    Mm = p.mass_matrix
    W = np.array([[p.f, p.gc], [p.gc, p.hc]])
    q, v, a = (np.asarray(x, float) for x in (q, v, a))
    mom = v @ Mm.T
    dmom = a @ Mm.T
    th, psi = q[..., 0], q[..., 1]
    cs = np.cos(psi - p.n * th)
    H = np.empty((*cs.shape, 2, 2))
    H[..., 0, 0] = p.n**2 * p.chi * cs + p.M * p.e / p.d * np.cos(th)
    H[..., 0, 1] = H[..., 1, 0] = -p.n * p.chi * cs
    H[..., 1, 1] = p.chi * cs
    cq = np.einsum("...ij,...j->...i", H, v)
    G = iwp_G(q, v, p)
    tG = np.tanh(G)
    dF = p.rho * (tG + G * (1.0 - tG * tG))
    w = np.array([p.gc, p.hc])
    cv = dmom @ W @ Mm + _gradV_q(q, p) + dF[..., None] * (Mm @ w)
    ca = mom @ W @ Mm
    return cq[..., None, :], cv[..., None, :], ca[..., None, :]


def iwp_closed_loop_rhs(params: InertiaWheelParameters = _P):
    """The explicit closed-loop ODE (regular branch, smooth through G = 0; paper §4.2, eqs.
    (8)–(10)).

    u = −ρ tanh G + (χ/(dIJ)) sin(ψ − nθ) − Mκ sin θ, θ̈ = (M sin θ − u)/I, ψ̈ = u/J − θ̈.
    Returns ``rhs(t, y)`` for y = (θ, ψ, θ̇, ψ̇).
    """
    p = params
    c1 = p.chi / (p.d * p.I * p.J)

    def rhs(t, y):
        th, psi, dth, dpsi = y
        G = p.gc * ((p.I + p.J) * dth + p.J * dpsi) + p.hc * p.J * (dth + dpsi)
        u = -p.rho * math.tanh(G) + c1 * math.sin(psi - p.n * th) - p.M * p.kappa * math.sin(th)
        ddth = (p.M * math.sin(th) - u) / p.I
        return [dth, dpsi, ddth, u / p.J - ddth]

    return rhs


def iwp_step_coefficients(q0, q1, h: float, params: InertiaWheelParameters = _P) -> dict:
    """Coefficients of eq. (10) and its factorization G(θ2)·R(θ2) (paper §4.2, eqs. (8)–(10),
    derived).

    Returns P, K, D, E, L0, A, B, C (paper's eq. (10): Aθ2² + Bθ2 + C = −ρ tanh(Dθ2+E)(Dθ2+E))
    and the cancellation-free forms in δ = θ2 − (2θ1 − θ0): ``c0``, ``G0`` with
    R = c0 − (I/h²)δ + ρ tanh(G0 + Dδ).
    """
    p = params
    h, q0, q1 = step_points(h, q0, q1, n=2)
    th0, ps0, th1, ps1 = q0[..., 0], q0[..., 1], q1[..., 0], q1[..., 1]
    s1 = np.sin(th1)
    sig = np.sin(ps1 - p.n * th1)
    P = (p.I + p.J) * (th1 - th0) / h + p.J * (ps1 - ps0) / h + 0.5 * h * p.M * s1
    K = 2 * (p.I + p.J) * th1 - (p.I + 2 * p.J) * th0 + 2 * p.J * (ps1 - ps0) + h**2 * p.M * s1
    D = -p.hc * p.I / (2 * h)
    E = p.gc * P + p.hc * K / (2 * h)
    c0 = p.M * (1 + p.kappa) * s1 - p.chi * sig / (p.d * p.I * p.J)
    L0 = c0 + p.I * (2 * th1 - th0) / h**2
    G0 = p.gc * P + p.hc * (2 * p.J * ((th1 - th0) + (ps1 - ps0)) + h**2 * p.M * s1) / (2 * h)
    return {
        "P": P, "K": K, "D": D, "E": E, "L0": L0,
        "A": -D * p.I / h**2, "B": D * L0 - E * p.I / h**2, "C": E * L0,
        "c0": c0, "G0": G0,
    }


def _psi2(q0, q1, theta2, h, p):
    """ψ2 from eq. (9)."""
    th0, ps0, th1, ps1 = q0[..., 0], q0[..., 1], q1[..., 0], q1[..., 1]
    return 2 * ps1 - ps0 + (h**2 / p.J) * (
        p.M * np.sin(th1) - (p.I + p.J) * (theta2 - 2 * th1 + th0) / h**2
    )


def _solve_R(c0, G0, D, kap, rho, iters: int = 60):
    """Unique zero δ of R(δ) = c0 − kap·δ + ρ tanh(G0 + Dδ) (D < 0, kap > 0), batched.

    Newton safeguarded by bisection in the guaranteed bracket [(c0 − ρ)/kap, (c0 + ρ)/kap].
    """
    c0, G0 = np.broadcast_arrays(np.asarray(c0, float), np.asarray(G0, float))
    lo, hi = (c0 - rho) / kap, (c0 + rho) / kap
    x = np.clip((c0 + rho * np.tanh(G0)) / kap, lo, hi)
    done = np.zeros(x.shape, dtype=bool)
    for _ in range(iters):
        t = np.tanh(G0 + D * x)
        R = c0 - kap * x + rho * t
        dR = -kap + rho * D * (1 - t * t)
        # R is decreasing: R > 0 ⇒ the root lies to the right of x
        lo = np.where(R > 0, x, lo)
        hi = np.where(R < 0, x, hi)
        xn = x - R / dR
        bad = (xn < lo) | (xn > hi) | ~np.isfinite(xn)
        xn = np.where(bad, 0.5 * (lo + hi), xn)
        xn = np.where(done | (R == 0), x, xn)
        done = done | (R == 0) | (np.abs(xn - x) <= 4e-16 * np.maximum(np.abs(xn), 1e-300))
        x = xn
        if np.all(done):
            break
    return x


def iwp_physical_step(q0, q1, h: float, params: InertiaWheelParameters = _P) -> np.ndarray:
    """The R-branch root of (9)–(10): the physical q2 (paper §4.2, eqs. (8)–(10) "Root
    selection")."""
    p = params
    h, q0, q1 = step_points(h, q0, q1, n=2)
    c = iwp_step_coefficients(q0, q1, h, p)
    kap = p.I / h**2
    delta = _solve_R(c["c0"], c["G0"], c["D"], kap, p.rho)
    theta2 = 2 * q1[..., 0] - q0[..., 0] + delta
    return np.stack([theta2, _psi2(q0, q1, theta2, h, p)], -1)


def iwp_spurious_step(q0, q1, h: float, params: InertiaWheelParameters = _P) -> np.ndarray:
    """The G = 0 root θ2 = −E/D of (10) (spurious: V_d constant, no dissipation)."""
    h, q0, q1 = step_points(h, q0, q1, n=2)
    c = iwp_step_coefficients(q0, q1, h, params)
    theta2 = 2 * q1[..., 0] - q0[..., 0] - c["G0"] / c["D"]
    return np.stack([theta2, _psi2(q0, q1, theta2, h, params)], -1)


def iwp_paper_rule_step(q0, q1, h: float, params: InertiaWheelParameters = _P):
    """The paper's rule: of the two roots, the one closest to θ1. Returns (q2, spurious?).

    Diagnostic only: it picks the spurious root in a large fraction of steps (paper §4.2, eqs.
    (8)–(10)).
    """
    qR = iwp_physical_step(q0, q1, h, params)
    qG = iwp_spurious_step(q0, q1, h, params)
    th1 = np.asarray(q1, float)[..., 0]
    pick_G = np.abs(qG[..., 0] - th1) < np.abs(qR[..., 0] - th1)
    return np.where(pick_G[..., None], qG, qR), pick_G


def iwp_root_filter(h: float, params: InertiaWheelParameters = _P, rtol: float = 1e-8):
    """Root-selection safeguard: accept q2 iff R(θ2) = 0 (relative to its terms).

    Rejects the spurious G = 0 root (unless both roots coincide, where they are equal).
    """
    p = params
    kap = p.I / h**2

    def accept(q0, q1, q2):
        q0, q1, q2 = (np.asarray(x, float) for x in (q0, q1, q2))
        c = iwp_step_coefficients(q0, q1, h, p)
        delta = q2[..., 0] - (2 * q1[..., 0] - q0[..., 0])
        R = c["c0"] - kap * delta + p.rho * np.tanh(c["G0"] + c["D"] * delta)
        scale = np.abs(c["c0"]) + kap * np.abs(delta) + p.rho
        return np.abs(R) <= rtol * scale

    return accept


def iwp_system(params: InertiaWheelParameters = _P):
    """L = ½q̇ᵀ𝐌q̇ − M(1 + cos θ) as a chetaev.discrete_lagrangian MechanicalSystem."""
    from chetaev.discrete_lagrangian.systems import MechanicalSystem

    M = params.M

    def U(q):
        return M * (1 + np.cos(np.asarray(q)[..., 0]))

    def dU(q):
        q = np.asarray(q, float)
        return np.stack([-M * np.sin(q[..., 0]), np.zeros(q.shape[:-1])], -1)

    def d2U(q):
        q = np.asarray(q, float)
        out = np.zeros((*q.shape[:-1], 2, 2))
        out[..., 0, 0] = -M * np.cos(q[..., 0])
        return out

    return MechanicalSystem(params.mass_matrix, U, dU, d2U)


def inertia_wheel_dsocs(h: float, params: InertiaWheelParameters = _P, solver: str = "R-branch"):
    """The DSOCS of §4.2.2 built by :meth:`DSOCS.from_continuous`.

    ``solver="R-branch"`` (default): the exact physical root (:func:`iwp_physical_step`);
    ``solver="newton"``: the generic 2-D Newton on (9), (8d) with the root-selection
    safeguard :func:`iwp_root_filter` (deflation of rejected roots);
    ``solver="newton-unsafe"``: generic Newton without the safeguard (diagnostic);
    ``solver="paper"``: the paper's closest-to-θ1 rule (diagnostic).
    """
    from ._dsocs import DSOCS

    p = params

    def constraint(q, v, a):
        return iwp_constraint(q, v, a, p)

    def cjac(q, v, a):
        return iwp_constraint_jacobian(q, v, a, p)

    def variations(q, v, a):
        return np.broadcast_to(np.array([[1.0, 0.0]]), (*np.shape(q)[:-1], 1, 2))

    kwargs = {}
    if solver == "R-branch":
        kwargs["solver"] = lambda q0, q1: iwp_physical_step(q0, q1, h, p)
    elif solver == "paper":
        kwargs["solver"] = lambda q0, q1: iwp_paper_rule_step(q0, q1, h, p)[0]
    elif solver == "newton":
        kwargs["root_filter"] = iwp_root_filter(h, p)
    elif solver != "newton-unsafe":
        raise DSOCSInputError(
            f"solver must be 'R-branch', 'newton', 'newton-unsafe' or 'paper'; got {solver!r}."
        )
    family = DSOCS.from_continuous(
        iwp_system(p), constraint, variations, constraint_jacobian=cjac,
        variations_depend_on=(), name=f"inertia wheel pendulum (§4.2, {solver})",
    )
    ds = family.at(h)
    if not kwargs:
        return ds
    from ._dsocs import _with_step_options

    # the builder's documented default step at this DSOCS's h (the same as the method options
    # inertia_wheel_step_options(params, solver) at any h)
    return _with_step_options(ds, **kwargs)


def inertia_wheel_step_options(params: InertiaWheelParameters = _P,
                               solver: str = "R-branch") -> dict:
    """The step of ``inertia_wheel_dsocs(h, params, solver)`` as method options:
    ``DSOCSIntegrator(**inertia_wheel_step_options(params, solver))`` (the ``solver(q0, q1, h)``
    or ``root_filter(q0, q1, q2, h)`` at the step's ``h``; §4.2, eqs. (8)–(10))."""
    p = params
    if solver == "R-branch":
        return {"solver": lambda q0, q1, h: iwp_physical_step(q0, q1, h, p)}
    if solver == "paper":
        return {"solver": lambda q0, q1, h: iwp_paper_rule_step(q0, q1, h, p)[0]}
    if solver == "newton":
        return {"root_filter": lambda q0, q1, q2, h: iwp_root_filter(h, p)(q0, q1, q2)}
    if solver == "newton-unsafe":
        return {}
    raise DSOCSInputError(
        f"solver must be 'R-branch', 'newton', 'newton-unsafe' or 'paper'; got {solver!r}."
    )


def iwp_trajectory(q0, q1, h: float, n_steps: int, params: InertiaWheelParameters = _P,
                   rule: str = "R-branch"):
    """Fast scalar loop of the R-branch (or paper-rule) step; returns (nodes, n_spurious).

    Same equations as :func:`iwp_physical_step` in plain floats (≈10 µs per step), for the
    long-horizon studies ([0, 2000] with h = 0.002 is 10⁶ steps). ``n_spurious`` counts the
    steps whose chosen root has G = 0 (the paper rule's failure; 0 for the R-branch).
    """
    p = params
    if rule not in ("R-branch", "paper"):
        raise DSOCSInputError(f"rule must be 'R-branch' or 'paper'; got {rule!r}.")
    if int(n_steps) != n_steps or n_steps < 1:
        raise DSOCSInputError(f"n_steps must be a positive integer; got {n_steps!r}.")
    n_steps = int(n_steps)
    h, q0, q1 = step_points(h, q0, q1, n=2)
    if q0.ndim != 1 or q1.ndim != 1:
        raise DSOCSInputError(
            "iwp_trajectory is the scalar fast loop: q0 and q1 must have shape (2,); for a "
            "batch use integrate(inertia_wheel_dsocs(h), DSOCSIntegrator(), ...)."
        )
    I, J, M, rho, n = p.I, p.J, p.M, p.rho, p.n
    gc, hc = p.gc, p.hc
    kap = I / h**2
    D = -hc * I / (2 * h)
    c1 = M * (1 + p.kappa)
    c2 = p.chi / (p.d * I * J)
    out = np.empty((n_steps + 1, 2))
    th0, ps0 = float(q0[0]), float(q0[1])
    th1, ps1 = float(q1[0]), float(q1[1])
    out[0] = th0, ps0
    out[1] = th1, ps1
    n_spur = 0
    sin, tanh = math.sin, math.tanh
    for k in range(1, n_steps):
        s1 = sin(th1)
        dth, dps = th1 - th0, ps1 - ps0
        P = ((I + J) * dth + J * dps) / h + 0.5 * h * M * s1
        G0 = gc * P + hc * (2 * J * (dth + dps) + h * h * M * s1) / (2 * h)
        c0 = c1 * s1 - c2 * sin(ps1 - n * th1)
        lo, hi = (c0 - rho) / kap, (c0 + rho) / kap
        x = (c0 + rho * tanh(G0)) / kap
        x = min(max(x, lo), hi)
        for _ in range(60):
            t = tanh(G0 + D * x)
            R = c0 - kap * x + rho * t
            if R > 0:
                lo = x
            elif R < 0:
                hi = x
            else:
                break
            xn = x - R / (-kap + rho * D * (1 - t * t))
            if not lo <= xn <= hi:
                xn = 0.5 * (lo + hi)
            if abs(xn - x) <= 4e-16 * abs(xn):
                x = xn
                break
            x = xn
        if rule == "paper":
            xg = -G0 / D
            th_r, th_g = 2 * th1 - th0 + x, 2 * th1 - th0 + xg
            if abs(th_g - th1) < abs(th_r - th1):
                x = xg
                n_spur += 1
        th2 = 2 * th1 - th0 + x
        ps2 = 2 * ps1 - ps0 + (h * h / J) * (M * s1 - (I + J) * x / (h * h))
        out[k + 1] = th2, ps2
        th0, ps0, th1, ps1 = th1, ps1, th2, ps2
    return out, n_spur
