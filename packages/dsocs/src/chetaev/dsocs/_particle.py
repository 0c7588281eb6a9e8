"""Particle in the plane with prescribed signed curvature k(x, y) (paper §4.1; paper §4.1.2, eqs.
(6), (7)).

Continuous SOCS: L = ½m|v|², C_K: (v×a)/|v|³ = k(q) (eq. (5)), C_V = span{v}.
Discrete step, eqs. (6)–(7): with v = (q2 − q0)/(2h), a = (q2 − 2q1 + q0)/h²,

    (6)·|v|³   v×a − k(q1)|v|³ = 0,
    (7)        (q2 − 2q1 + q0)·(q2 − q0) = 0.

Closed form (paper §4.1.2, eqs. (6), (7), derived): the step length is preserved and q2 = q1 +
R(φ)(q1 − q0)
with sin(φ/2) = c/(1 + √(1 + c²)), c = k(q1)·|q1 − q0|·sign(h). Unique solution.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from ._errors import DSOCSInputError
from ._validation import step_points

__all__ = [
    "curvature_particle_dsocs",
    "curvature_particle_kernels",
    "curvature_particle_solver",
    "particle_closed_form_step",
    "particle_discrete_circle",
    "particle_exact_solution",
    "particle_ode_rhs",
    "particle_residual",
    "particle_residual_jacobian",
]


def _cross(a, b):
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _k_at(k, q):
    if callable(k):
        return np.asarray(k(q), float)
    return np.broadcast_to(np.asarray(k, float), np.shape(q)[:-1])


def particle_residual(q0, q1, q2, h: float, k) -> np.ndarray:
    """Eqs. (6)–(7), (6) multiplied by |v|³, → (..., 2)."""
    h, q0, q1, q2 = step_points(h, q0, q1, q2, n=2)
    v = (q2 - q0) / (2 * h)
    a = (q2 - 2 * q1 + q0) / h**2
    nv = np.sqrt(np.sum(v * v, -1))
    r1 = _cross(v, a) - _k_at(k, q1) * nv**3
    r2 = np.sum((q2 - 2 * q1 + q0) * (q2 - q0), -1)
    return np.stack([r1, r2], -1)


def particle_residual_jacobian(q0, q1, q2, h: float, k) -> np.ndarray:
    """∂(6)–(7)/∂q2 (analytic) → (..., 2, 2)."""
    h, q0, q1, q2 = step_points(h, q0, q1, q2, n=2)
    v = (q2 - q0) / (2 * h)
    a = (q2 - 2 * q1 + q0) / h**2
    nv = np.sqrt(np.sum(v * v, -1))
    kk = _k_at(k, q1)
    d1 = np.stack(
        [a[..., 1] / (2 * h) - v[..., 1] / h**2, v[..., 0] / h**2 - a[..., 0] / (2 * h)], -1
    )
    d1 = d1 - (kk * 3 * nv)[..., None] * v / (2 * h)
    d2 = 2 * q2 - 2 * q1
    return np.stack([d1, d2], -2)


def particle_closed_form_step(q0, q1, h: float, k) -> np.ndarray:
    """Unique solution q2 of (6)–(7): q2 = q1 + R(φ)(q1 − q0) (paper §4.1.2, eqs. (6), (7), closed
    form).

    ``q0``, ``q1``: (..., 2) nodes (leading batch axes broadcast); ``k`` a number or a
    callable k(q) → (...); returns (..., 2).
    """
    h, q0, q1 = step_points(h, q0, q1, n=2)
    a = q1 - q0
    s = np.sqrt(np.sum(a * a, -1))
    c = _k_at(k, q1) * s * np.sign(h)
    u = c / (1.0 + np.sqrt(1.0 + c * c))  # sin(φ/2), stable for c → 0
    cphi = 1.0 - 2.0 * u * u
    sphi = 2.0 * u * np.sqrt(1.0 - u * u)
    b = np.stack([cphi * a[..., 0] - sphi * a[..., 1], sphi * a[..., 0] + cphi * a[..., 1]], -1)
    return q1 + b


def particle_discrete_circle(q0, q1, k: float):
    """Circle through the constant-k discrete trajectory: (center, radius, turning angle).

    R_d = (1 + √(1 + k²s²))/(2k), C_d = (q0 + q1)/2 + R_d cos(φ/2) n̂ (paper §4.1.2, eqs. (6), (7)).
    """
    q0, q1 = step_points(1.0, q0, q1, n=2)[1:]
    k = float(k)
    if not np.isfinite(k) or k == 0.0:
        raise DSOCSInputError(
            f"k must be a finite nonzero curvature (a straight line has no circle); got {k!r}."
        )
    a = q1 - q0
    s = np.sqrt(np.sum(a * a, -1))
    c = k * s
    u = c / (1 + np.sqrt(1 + c * c))
    phi = 2 * np.arcsin(u)
    R = (1 + np.sqrt(1 + c * c)) / (2 * k)
    nhat = np.stack([-a[..., 1], a[..., 0]], -1) / s[..., None]
    center = 0.5 * (q0 + q1) + (R * np.cos(phi / 2))[..., None] * nhat
    return center, R, phi


def particle_exact_solution(t, k: float, q0, v0):
    """Exact constant-k motion: circle of radius 1/(k|v0|)·|v0|, angular speed ω = k|v0|.

    q(t) = q0 + (sin ωt/ω) v0 + ((1 − cos ωt)/ω) J v0, J = rotation by +90°. ``q0``,
    ``v0``: (..., 2) (leading batch axes allowed). Returns (q(t), v(t)), each of shape
    ``(*t.shape, ..., 2)`` (time axes first).
    """
    q0, v0 = step_points(1.0, q0, v0, names=("q0", "v0"), n=2)[1:]
    t = np.asarray(t, float)
    t = t.reshape(t.shape + (1,) * len(np.broadcast_shapes(q0.shape, v0.shape)))
    w = k * np.sqrt(np.sum(v0 * v0, -1, keepdims=True))
    Jv = np.stack([-v0[..., 1], v0[..., 0]], -1)
    q = q0 + np.sin(w * t) / w * v0 + (1 - np.cos(w * t)) / w * Jv
    v = np.cos(w * t) * v0 + np.sin(w * t) * Jv
    return q, v


def particle_ode_rhs(k) -> Callable:
    """Right-hand side of ẍ = −k|v|ẏ, ÿ = k|v|ẋ for y = (x, y, ẋ, ẏ) (any k(x, y))."""

    def rhs(t, y):
        q, v = y[:2], y[2:]
        kv = _k_at(k, q) * np.hypot(v[0], v[1])
        return np.array([v[0], v[1], -kv * v[1], kv * v[0]])

    return rhs


#: The compiled eq. (4) of the particle (:func:`curvature_particle_kernels`): rows (6)·|v|³
#: (the constraint at the central difference) and φ∘β = v·p with p = D2L_d(q0, q1) +
#: D1L_d(q1, q2) = −C·a, C = s·m; v = (q2 − q0)/(2h), a = (q2 − 2q1 + q0)/h².
_PARTICLE_KERNELS = """
DSOCS_SHAPE = (2, 2)


def dsocs_residual(q0, q1, q2, h, out):
    v0 = (q2[0] - q0[0]) / (2.0 * h)
    v1 = (q2[1] - q0[1]) / (2.0 * h)
    a0 = (q2[0] - 2.0 * q1[0] + q0[0]) / (h * h)
    a1 = (q2[1] - 2.0 * q1[1] + q0[1]) / (h * h)
    nv = math.sqrt(v0 * v0 + v1 * v1)
    out[0] = v0 * a1 - v1 * a0 - curvature(q1) * nv ** 3
    out[1] = -PARTICLE_C * (v0 * a0 + v1 * a1)


def dsocs_jacobian_q2(q0, q1, q2, h, out):
    v0 = (q2[0] - q0[0]) / (2.0 * h)
    v1 = (q2[1] - q0[1]) / (2.0 * h)
    a0 = (q2[0] - 2.0 * q1[0] + q0[0]) / (h * h)
    a1 = (q2[1] - 2.0 * q1[1] + q0[1]) / (h * h)
    nv = math.sqrt(v0 * v0 + v1 * v1)
    c3 = 3.0 * curvature(q1) * nv / (2.0 * h)
    out[0, 0] = a1 / (2.0 * h) - v1 / (h * h) - c3 * v0
    out[0, 1] = v0 / (h * h) - a0 / (2.0 * h) - c3 * v1
    out[1, 0] = -PARTICLE_C * (a0 / (2.0 * h) + v0 / (h * h))
    out[1, 1] = -PARTICLE_C * (a1 / (2.0 * h) + v1 / (h * h))
"""


def curvature_particle_kernels(k, curvature_kernel: str | None = None,
                               mass: float = 1.0, scale: float = 1.0) -> str | None:
    """The ``DSOCS(compiled_kernels=...)`` source of the particle's eq. (4) (§4.1.2, eqs.
    (6)–(7) in the DSOCS's normalization), or None when ``k`` is a callable without
    ``curvature_kernel``.

    ``curvature_kernel``: numba-compilable source of ``def curvature(q):`` returning k(q)
    (a float) for a 1-d ``q`` (a constant ``k`` needs none); the kernels are checked against
    the DSOCS when it is built, so a curvature kernel that is not ``k`` is rejected there.
    """
    if curvature_kernel is None:
        if callable(k):
            return None
        curvature_kernel = f"def curvature(q):\n    return {float(k)!r}\n"
    elif not isinstance(curvature_kernel, str) or re.search(
            r"^def curvature\(", curvature_kernel, re.M) is None:
        raise DSOCSInputError(
            "curvature_kernel must be source text defining def curvature(q): ... (returning "
            f"k(q) as a float for a 1-d q); got {curvature_kernel!r}.")
    return (f"PARTICLE_C = {float(scale) * float(mass)!r}\n\n" + curvature_kernel + "\n"
            + _PARTICLE_KERNELS)


def curvature_particle_dsocs(k, h: float | None = None, mass: float = 1.0,
                             closed_form: bool = True, system=None, *,
                             curvature_kernel: str | None = None):
    """The DSOCS of §4.1.2 for curvature k (constant or callable k(q) → (...)).

    Built generically: L_d = L(q0, (q1 − q0)/h) with L = ½m|v|², D_K by the central map of
    the constraint v×a − k|v|³ = 0, D_V = span{(q2 − q0)/(2h)}. With ``closed_form`` the
    step uses :func:`particle_closed_form_step` (solver override); otherwise Newton.
    Without ``h`` (only with ``closed_form=False``) the DSOCS holds no step: it is the family
    of :meth:`DSOCS.from_continuous` and the method's ``h`` decides; for the closed-form step
    at any ``h`` pass ``DSOCSIntegrator(solver=curvature_particle_solver(k))``. With ``h`` it
    is that family's member ``family.at(h)``.
    ``system``: a continuous Lagrangian system to use (default: a MechanicalSystem with mass
    m·I and U = 0 from ``chetaev.discrete_lagrangian``).
    ``curvature_kernel``: numba source ``def curvature(q): ...`` of a callable ``k`` for the
    compiled step (issue 17; a constant ``k`` needs none): with the default ``system`` the
    DSOCS then carries the compiled kernels of eq. (4)
    (:func:`curvature_particle_kernels`), checked against its callables when built.
    """
    from ._dsocs import DSOCS

    if h is None and closed_form:
        raise DSOCSInputError(
            "closed_form=True needs the step h (the closed-form step is made at that h): pass "
            "h, or closed_form=False and DSOCSIntegrator(solver=lambda q0, q1, h: "
            "particle_closed_form_step(q0, q1, h, k)) for the closed form at the method's h."
        )
    kernels = None
    if system is None:
        from ._models_common import free_particle_system

        system = free_particle_system(mass, 2)
        kernels = curvature_particle_kernels(k, curvature_kernel, mass)

    def constraint(q, v, a):
        nv = np.sqrt(np.sum(v * v, -1))
        return (_cross(v, a) - _k_at(k, q) * nv**3)[..., None]

    def constraint_jacobian(q, v, a):
        nv = np.sqrt(np.sum(v * v, -1))[..., None]
        if callable(k):
            from ._validation import fd_jacobian

            cq = -fd_jacobian(lambda x: _k_at(k, x)[..., None], q)[..., 0, :] * nv**3
        else:
            cq = np.zeros_like(q)
        kk = _k_at(k, q)[..., None]
        cv = np.stack([a[..., 1], -a[..., 0]], -1) - 3 * kk * nv * v
        ca = np.stack([-v[..., 1], v[..., 0]], -1)
        return cq[..., None, :], cv[..., None, :], ca[..., None, :]

    def variations(q, v, a):
        return np.asarray(v, float)[..., None, :]

    family = DSOCS.from_continuous(
        system, constraint, variations, constraint_jacobian=constraint_jacobian,
        variations_depend_on=("v",), name="curvature particle (§4.1)",
        compiled_kernels=kernels,
    )
    if h is None:
        return family
    ds = family.at(h)
    if not closed_form:
        return ds
    from ._dsocs import _with_step_options

    # the builder's documented default step: the closed form at this DSOCS's h (the same
    # step as DSOCSIntegrator(solver=curvature_particle_solver(k)) at any h)
    return _with_step_options(ds, solver=lambda q0, q1: particle_closed_form_step(q0, q1, h, k))


def curvature_particle_solver(k) -> Callable:
    """The closed-form step as a method option: ``DSOCSIntegrator(solver=
    curvature_particle_solver(k))`` steps a curvature-particle DSOCS by
    :func:`particle_closed_form_step` at the step's ``h`` (§4.1.2)."""

    def solver(q0, q1, h):
        return particle_closed_form_step(q0, q1, h, k)

    return solver
