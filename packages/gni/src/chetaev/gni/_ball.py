"""The ball rolling on a rotating table (paper §7.4), on TR² × 𝔰𝔬(3).

This is exactly the paper's model (see the docs' theory page): constant metric ``diag(m, m, I1, I2,
I3)``,
the constraints (40) in the same (left-trivialized) ω,

    ẋ − r ω2 + Ω y = 0,    ẏ + r ω1 − Ω x = 0,

i.e. ``K = [[1, 0, 0, −r, 0], [0, 1, r, 0, 0]]`` and ``a(x, y) = (Ω y, −Ω x)`` (``Ỹ = (−Ωy, Ωx,
0, 0, 0)``, ``Π = (−mΩy, mΩx, 0, 0, 0)``). It is physically exact for I1 = I2 = I3.
"""

from __future__ import annotations

import numpy as np
from chetaev.liegroups import SO3

from ._errors import InputError
from ._reduced import ReducedSystem

__all__ = [
    "BALL_EXPERIMENT_1",
    "BALL_EXPERIMENT_2",
    "ball_exact_homogeneous",
    "rolling_ball",
]

#: Experiment 1 (paper Figs 1–2): "homogeneous ball" I = 2/3, m = r = Ω = 1;
#: (x0, y0) = (1, 1), (ẋ0, ẏ0) = (1, 1), ω0 = (0, 2, 0). Exact circle: centre (−1.5, 3.5),
#: radius √2/0.4 ≈ 3.5355 (paper §7.4, Exp. 1).
BALL_EXPERIMENT_1 = {
    "inertia": (2.0 / 3.0, 2.0 / 3.0, 2.0 / 3.0),
    "mass": 1.0,
    "radius": 1.0,
    "table_rate": 1.0,
    "x0": (1.0, 1.0),
    "v0": (1.0, 1.0, 0.0, 2.0, 0.0),
}

#: Experiment 2 (paper Fig. 3): I = (1, 1.1, 1.2), m = 3, r = 1, Ω = 0.2; (x0, y0) = (1, 0),
#: ω0 = (−0.2, 0, 0.4); the constraints give (ẋ0, ẏ0) = (0, 0.4) (paper §7.4, Exp. 2).
BALL_EXPERIMENT_2 = {
    "inertia": (1.0, 1.1, 1.2),
    "mass": 3.0,
    "radius": 1.0,
    "table_rate": 0.2,
    "x0": (1.0, 0.0),
    "v0": (0.0, 0.4, -0.2, 0.0, 0.4),
}


def rolling_ball(inertia=(1.0, 1.0, 1.0), mass=1.0, radius=1.0, table_rate=0.0) -> ReducedSystem:
    """The paper's ball on a table rotating with angular velocity ``table_rate`` (§7.4).

    ``table_rate = 0`` is the fixed table (linear constraints); otherwise the constraints are
    affine. Velocities are ``(ẋ, ẏ, ω1, ω2, ω3)``. The system carries the compiled kernel of
    its affine term (``compiled_kernels``; the constant ``K`` and the zero potential need
    none), so :class:`~chetaev.gni.ReducedGNI` runs it compiled when numba is installed
    (issue 17).
    """
    I1, I2, I3 = (float(c) for c in inertia)
    m, r, Om = float(mass), float(radius), float(table_rate)
    K = np.array([[1.0, 0.0, 0.0, -r, 0.0], [0.0, 1.0, r, 0.0, 0.0]])
    affine = affine_grad = kernels = None
    if Om != 0.0:
        # a(x, y) = (Ω y, −Ω x), the same arithmetic as ``affine``
        kernels = (f"def constraint_affine(x, out):\n    out[0] = {Om!r} * x[1]\n"
                   f"    out[1] = {-Om!r} * x[0]\n")

        def affine(x):
            x = np.asarray(x, dtype=float)
            return np.stack([Om * x[..., 1], -Om * x[..., 0]], axis=-1)

        def affine_grad(x):
            return np.broadcast_to(np.array([[0.0, Om], [-Om, 0.0]]), (*np.shape(x)[:-1], 2, 2))

    return ReducedSystem(
        group=SO3,
        n_shape=2,
        metric=np.diag([m, m, I1, I2, I3]),
        constraint_matrix=K,
        constraint_affine=affine,
        constraint_affine_grad=affine_grad,
        compiled_kernels=kernels,
    )


def ball_exact_homogeneous(t, x0, v0, inertia, mass=1.0, radius=1.0, table_rate=1.0):
    """Exact solution for I1 = I2 = I3 = I (see the docs' theory page): the contact point moves on
    a circle,
    the velocity rotates at ``κ = IΩ/(m r² + I)``; for a fixed table (Ω = 0) it moves on a
    straight line at constant velocity. Returns ``(x (…, 2), v (…, 5))``.

    Raises
    ------
    InputError
        If the three moments of inertia are not equal (there is no closed form then: use
        ``rolling_ball(...).reference``).
    """
    I_all = np.broadcast_to(np.asarray(inertia, dtype=float).ravel(), (3,))
    if not np.allclose(I_all, I_all[0], rtol=1e-14, atol=0.0):
        raise InputError(
            f"ball_exact_homogeneous needs I1 = I2 = I3 (a homogeneous ball); got {inertia}. "
            "For other inertias use rolling_ball(...).reference(x0, v0, t)"
        )
    I = float(I_all[0])
    m, r, Om = float(mass), float(radius), float(table_rate)
    t = np.asarray(t, dtype=float)[..., None]
    x0 = np.asarray(x0, dtype=float)
    v0 = np.asarray(v0, dtype=float)
    kappa = I * Om / (m * r**2 + I)
    c, s = np.cos(kappa * t), np.sin(kappa * t)
    xd0, yd0 = v0[0], v0[1]
    xd = xd0 * c - yd0 * s
    yd = xd0 * s + yd0 * c
    # (sin κt)/κ and (1 − cos κt)/κ, continuous at κ = 0 (fixed table: uniform motion)
    kt = kappa * t
    sinc = t * np.sinc(kt / np.pi)
    versc = t * np.where(np.abs(kt) < 1e-4, 0.5 * kt * (1.0 - kt**2 / 12.0),
                         (1.0 - np.cos(kt)) / np.where(kt == 0.0, 1.0, kt))
    x = x0[0] + xd0 * sinc - yd0 * versc
    y = x0[1] + yd0 * sinc + xd0 * versc
    w1 = (Om * x - yd) / r
    w2 = (xd + Om * y) / r
    w3 = np.full_like(x, v0[4])
    return np.concatenate([x, y], -1), np.concatenate([xd, yd, w1, w2, w3], -1)
