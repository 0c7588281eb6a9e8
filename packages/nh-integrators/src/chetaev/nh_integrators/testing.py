"""Test models for ``chetaev.nh_integrators``: public, for tests, benchmarks and examples.

Vector-space models (high-order paper §7; the paper is
arXiv:1810.10926, §7):

- :func:`particle_system`, :func:`affine_particle_system`: nonholonomic particle in a
  harmonic potential (paper §7.1), initial data :data:`PARTICLE_Q0`,
  :data:`PARTICLE_V0` (the model and its data are defined once, in
  ``chetaev.discrete_lagrangian.testing`` as ``harmonic_nonholonomic_particle``, since gni
  uses it too; re-exported here under these names);
- :func:`cvt_system`, :func:`cvt_energies`: pendulum-driven CVT (paper §7.2),
  initial data :data:`CVT_Q0`, :data:`CVT_V0_LOW`, :data:`CVT_V0_HIGH`;
- :func:`chaotic_system`, :func:`chaotic_ensemble`: the "fully chaotic" system (paper §7.3,
  paper §7.3);
- :func:`particle_cvt_system`: the particle and copies of the CVT side by side (one long run);
- :func:`sleigh_system`: the Chaplygin sleigh (not in the paper; issue 6's system on which
  the carried multiplier develops an alternating mode), :data:`SLEIGH_Q0`, :data:`SLEIGH_V0`;
- :func:`general_particle_system`: a non-mechanical Lagrangian with a nonlinear velocity
  constraint (not in the paper), :data:`GEN_Q0`, :data:`GEN_V0`.

Lie-group models and references (re-exported from ``_lie_testing``): :func:`vertical_disc`,
:func:`vertical_disc_general`, :func:`disc_initial`, :func:`disc_reference` (paper §7.4);
:func:`turntable_ball`, :func:`ball_initial`, :func:`ball_first_integrals`, :func:`ball_reference`
(paper §7.5); :func:`sphere_reference` (homogeneous-spaces paper §5).

:func:`fit_order` is ``chetaev.discrete_lagrangian.testing.fit_order`` (the same object); the
references here are DOP853 at rtol 1e-13, so this package's tests fit above a 1e-12 floor.

Every model callable broadcasts over leading batch axes. Parameters not given by the paper
are the project's proposals, not from the paper. Nothing here is needed
at run time.
"""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    LagrangianSystem,
    LinearVelocityConstraint,
    MechanicalSystem,
    VelocityConstraint,
)
from chetaev.discrete_lagrangian.testing import HARMONIC_PARTICLE_Q0 as PARTICLE_Q0
from chetaev.discrete_lagrangian.testing import HARMONIC_PARTICLE_V0 as PARTICLE_V0
from chetaev.discrete_lagrangian.testing import fit_order  # the one order fit (re-export)
from chetaev.discrete_lagrangian.testing import (
    harmonic_nonholonomic_particle as particle_system,  # paper §7.1, defined once
)

from ._lie_testing import (
    ball_first_integrals,
    ball_initial,
    ball_reference,
    disc_initial,
    disc_reference,
    sphere_reference,
    turntable_ball,
    vertical_disc,
    vertical_disc_general,
)
from ._validate import real_int, real_scalar

__all__ = [
    "CVT_Q0",
    "CVT_V0_HIGH",
    "CVT_V0_LOW",
    "GEN_GAMMA",
    "GEN_KAPPA",
    "GEN_Q0",
    "GEN_V0",
    "PARTICLE_Q0",
    "PARTICLE_V0",
    "SLEIGH_Q0",
    "SLEIGH_V0",
    "affine_particle_system",
    "ball_first_integrals",
    "ball_initial",
    "ball_reference",
    "chaotic_ensemble",
    "chaotic_system",
    "cvt_energies",
    "cvt_system",
    "disc_initial",
    "disc_reference",
    "fit_order",
    "general_particle_system",
    "particle_cvt_system",
    "particle_system",
    "sleigh_system",
    "sphere_reference",
    "turntable_ball",
    "vertical_disc",
    "vertical_disc_general",
]


def _row(*entries):
    """Stack arrays of equal shape into a (..., 1, n) constraint matrix."""
    return np.stack(entries, axis=-1)[..., None, :]


def _zeros_like_q(q, *tail):
    return np.zeros(q.shape[:-1] + tail)


# ---------------------------------------------------------------- particle (§7.1, paper §7.1)


def affine_particle_system(kappa: float = 0.3) -> ConstrainedSystem:
    """The particle of :func:`particle_system` with the affine constraint
    Phi = v_z - y v_x - kappa sin(x) (not in the paper: exercises the affine term of
    paper §3, Phi = A(q) v + a(q))."""
    kappa = real_scalar(kappa, "kappa")
    base = particle_system()
    con = base.constraint

    def a(q):
        return (-kappa * np.sin(q[..., 0]))[..., None]

    def da(q):
        D = _zeros_like_q(q, 1, 3)
        D[..., 0, 0] = -kappa * np.cos(q[..., 0])
        return D

    return ConstrainedSystem(base.system, LinearVelocityConstraint(con.A, a, con.dA, da))




# ---------------------------------------------------------------- CVT (§7.2, paper §7.2)


def cvt_system(eps: float = 0.5) -> ConstrainedSystem:
    """Pendulum-driven continuously variable transmission (paper §7.2, from Modin–Verdier;
    paper §7.2): L = |v|^2/2 - (x^2 + z^2 - 2 cos y + eps sin 2y)/2, Phi = v_z + sin(y) v_x.

    The paper's figures use eps = 1/2; initial data :data:`CVT_Q0` with :data:`CVT_V0_LOW`
    or :data:`CVT_V0_HIGH`; energies :func:`cvt_energies`."""
    eps = real_scalar(eps, "eps")

    def V(q):
        x, y, z = q[..., 0], q[..., 1], q[..., 2]
        return 0.5 * (x**2 + z**2 - 2.0 * np.cos(y) + eps * np.sin(2.0 * y))

    def gV(q):
        x, y, z = q[..., 0], q[..., 1], q[..., 2]
        return np.stack([x, np.sin(y) + eps * np.cos(2.0 * y), z], axis=-1)

    def hV(q):
        y = q[..., 1]
        H = _zeros_like_q(q, 3, 3)
        H[..., 0, 0] = 1.0
        H[..., 1, 1] = np.cos(y) - 2.0 * eps * np.sin(2.0 * y)
        H[..., 2, 2] = 1.0
        return H

    def A(q):
        y = q[..., 1]
        return _row(np.sin(y), np.zeros_like(y), np.ones_like(y))

    def dA(q):
        D = _zeros_like_q(q, 1, 3, 3)
        D[..., 0, 0, 1] = np.cos(q[..., 1])
        return D

    return ConstrainedSystem(
        MechanicalSystem(np.eye(3), V, gV, potential_hess=hV), LinearVelocityConstraint(A, dA=dA)
    )


def cvt_energies(q, v, eps: float = 0.5):
    """(driver, passenger, total) energies of the CVT (paper §7.2), each of shape (...)
    for q, v of shape (..., 3); all three are exact first integrals."""
    x, y, z = q[..., 0], q[..., 1], q[..., 2]
    vx, vy, vz = v[..., 0], v[..., 1], v[..., 2]
    Ed = 0.5 * vy**2 - np.cos(y) + 0.5 * eps * np.sin(2.0 * y)
    Ep = 0.5 * (vx**2 + vz**2) + 0.5 * (x**2 + z**2)
    return Ed, Ep, Ed + Ep


CVT_Q0 = np.array([1.0, 0.0, 1.0])
CVT_V0_LOW = np.array([0.0, 3.0 * np.sqrt(10.0) / 5.0, 0.0])
CVT_V0_HIGH = np.array([0.0, np.sqrt(8.0), 0.0])


# ---------------------------------------------------------------- chaotic n = 7 (§7.3, paper §7.3)


def chaotic_system(m: int = 3) -> ConstrainedSystem:
    """L = |v|^2/2 - (|q|^2 + q_{m+2}^2 q_{m+3}^2 + sum_i q_{1+i}^2 q_{m+1+i}^2)/2,
    Phi = v_1 + sum_{i >= m+2} q_i v_i (1-based indices as in the paper).

    The "fully chaotic" system of paper §7.3 (from McLachlan–Perlmutter; paper §7.3),
    n = 2m + 1 (the paper's experiment: m = 3, n = 7); ensemble :func:`chaotic_ensemble`."""
    m = real_int(m, "m", 2)
    n = 2 * m + 1
    lo = slice(1, m + 1)  # 0-based indices of q_{1+i}, i = 1..m
    hi = slice(m + 1, 2 * m + 1)  # 0-based indices of q_{m+1+i}
    j1, j2 = m + 1, m + 2  # 0-based q_{m+2}, q_{m+3}

    def V(q):
        return 0.5 * (
            np.sum(q**2, axis=-1)
            + q[..., j1] ** 2 * q[..., j2] ** 2
            + np.sum(q[..., lo] ** 2 * q[..., hi] ** 2, axis=-1)
        )

    pairs = [(j1, j2)] + [(1 + i, m + 1 + i) for i in range(m)]  # coupled q_i^2 q_j^2 terms
    partner = np.zeros((n, n))  # partner[j, i] = 1 when (i, j) is a pair
    for i, j in pairs:
        partner[i, j] = partner[j, i] = 1.0
    rows = np.array([i for i, j in pairs] + [j for i, j in pairs])
    cols = np.array([j for i, j in pairs] + [i for i, j in pairs])
    diag = np.arange(n) * (n + 1)
    off = rows * n + cols

    def pair_sums(qq):
        """``qq @ partner`` as one 2-D BLAS product: exact in any summation order, so the
        same for every batch size (each sum has at most two nonzero terms, the weights
        are 0 or 1 and ``qq >= 0``: one rounding of ``a + b``, whatever the kernel)."""
        return (qq.reshape(-1, n) @ partner).reshape(qq.shape)

    def gV(q):
        qq = q * q
        return q * (1.0 + pair_sums(qq))

    def hV(q):
        H = np.zeros((*q.shape[:-1], n * n))
        qq = q * q
        H[..., diag] = 1.0 + pair_sums(qq)
        H[..., off] = 2.0 * q[..., rows] * q[..., cols]
        return H.reshape(*q.shape[:-1], n, n)

    def A(q):
        row = np.zeros((*q.shape[:-1], 1, n))
        row[..., 0, 0] = 1.0
        row[..., 0, m + 1 :] = q[..., m + 1 :]
        return row

    def dA(q):
        D = _zeros_like_q(q, 1, n, n)
        for k in range(m + 1, n):
            D[..., 0, k, k] = 1.0
        return D

    return ConstrainedSystem(
        MechanicalSystem(np.eye(n), V, gV, potential_hess=hV), LinearVelocityConstraint(A, dA=dA)
    )


def chaotic_ensemble(J: int = 9):
    """Ensemble of paper §7.3 (paper §7.3): q0 = (alpha, .6, .4, .2, 1, 1, 1),
    v0 = (0, beta, 0, ...), alpha = cos(j pi / 2J), beta = sin(j pi / 2J), j = 0..J.
    Returns (q0, v0), each of shape (J + 1, 7); every member has energy 3.06."""
    J = real_int(J, "J", 1)
    j = np.arange(J + 1)
    alpha, beta = np.cos(j * np.pi / (2 * J)), np.sin(j * np.pi / (2 * J))
    q0 = np.tile([0.0, 0.6, 0.4, 0.2, 1.0, 1.0, 1.0], (J + 1, 1))
    q0[:, 0] = alpha
    v0 = np.zeros((J + 1, 7))
    v0[:, 1] = beta
    return q0, v0


# ---------------------------------------------------------------- particle x CVT (long runs)


def particle_cvt_system(eps: float = 0.5, n_cvt: int = 1) -> ConstrainedSystem:
    """The particle (q[:3]) and ``n_cvt`` copies of the CVT (q[3 + 3k : 6 + 3k]) side by
    side as one decoupled system (n = 3 + 3 n_cvt, m = 1 + n_cvt), so one long run checks
    the energy of all of them (each CVT copy can carry its own initial condition): paper
    §7.1 and §7.2 (paper §7.1; §7.2) in one system, for the 10^5-step energy test."""
    eps = real_scalar(eps, "eps")
    n_cvt = real_int(n_cvt, "n_cvt", 1)
    n, m = 3 + 3 * n_cvt, 1 + n_cvt
    xs = 3 + 3 * np.arange(n_cvt)  # CVT x, y, z at xs, xs + 1, xs + 2
    ys, zs = xs + 1, xs + 2
    rows = 1 + np.arange(n_cvt)

    def V(q):
        a = q[..., :3]
        return 0.5 * (a[..., 0] ** 2 + a[..., 1] ** 2) + 0.5 * np.sum(
            q[..., xs] ** 2
            + q[..., zs] ** 2
            - 2.0 * np.cos(q[..., ys])
            + eps * np.sin(2.0 * q[..., ys]),
            axis=-1,
        )

    def gV(q):
        g = np.array(q, dtype=float, copy=True)
        g[..., 2] = 0.0
        y = q[..., ys]
        g[..., ys] = np.sin(y) + eps * np.cos(2.0 * y)
        return g

    def hV(q):
        H = _zeros_like_q(q, n, n)
        H[..., [0, 1], [0, 1]] = 1.0
        H[..., xs, xs] = H[..., zs, zs] = 1.0
        y = q[..., ys]
        H[..., ys, ys] = np.cos(y) - 2.0 * eps * np.sin(2.0 * y)
        return H

    def A(q):
        M = _zeros_like_q(q, m, n)
        M[..., 0, 0] = -q[..., 1]
        M[..., 0, 2] = 1.0
        M[..., rows, xs] = np.sin(q[..., ys])
        M[..., rows, zs] = 1.0
        return M

    def dA(q):
        D = _zeros_like_q(q, m, n, n)
        D[..., 0, 0, 1] = -1.0
        D[..., rows, xs, ys] = np.cos(q[..., ys])
        return D

    return ConstrainedSystem(
        MechanicalSystem(np.eye(n), V, gV, potential_hess=hV), LinearVelocityConstraint(A, dA=dA)
    )


# ---------------------------------------------------------------- Chaplygin sleigh


def sleigh_system(
    mass: float = 1.0, inertia: float = 0.5, offset: float = 0.5
) -> ConstrainedSystem:
    """The classical Chaplygin sleigh (not in the paper; issue 6's system with an unstable
    backward motion): q = (x, y, theta) of the centre of mass, knife edge a distance
    ``offset`` behind it. L = m(vx^2 + vy^2)/2 + I w^2/2, Phi = -sin(th) vx + cos(th) vy - a w.

    Its motion is asymptotically stable forward in time (it straightens out) and
    unstable backward in time: the system on which the carried multiplier develops a
    growing step-to-step alternating mode (README, issue 6)."""
    mass = real_scalar(mass, "mass", positive=True)
    inertia = real_scalar(inertia, "inertia", positive=True)
    offset = real_scalar(offset, "offset")

    def V(q):
        return np.zeros(q.shape[:-1])

    def gV(q):
        return np.zeros(q.shape)

    def hV(q):
        return _zeros_like_q(q, 3, 3)

    def A(q):
        th = q[..., 2]
        return _row(-np.sin(th), np.cos(th), -offset * np.ones_like(th))

    def dA(q):
        th = q[..., 2]
        D = _zeros_like_q(q, 1, 3, 3)
        D[..., 0, 0, 2] = -np.cos(th)
        D[..., 0, 1, 2] = -np.sin(th)
        return D

    return ConstrainedSystem(
        MechanicalSystem(np.diag([mass, mass, inertia]), V, gV, potential_hess=hV),
        LinearVelocityConstraint(A, dA=dA),
    )


SLEIGH_Q0 = np.array([0.0, 0.0, 0.0])
# vy = a w at theta = 0: sideways CM velocity from the rotation
SLEIGH_V0 = np.array([0.3, 0.5 * 1.2, 1.2])


# ---------------------------------------------------------------- general Lagrangian, nonlinear Phi

GEN_KAPPA, GEN_GAMMA = 0.1, 0.2


def general_particle_system() -> ConstrainedSystem:
    """Non-mechanical test model (not in the paper; exercises paper eq. (14), App. D's implicit
    FL^{-1} unknowns and a general constraint Phi(q, v)) with a nonlinear velocity constraint:
    L = |v|^2/2 + kappa |v|^4/4 - (x^2 + y^2)/2,  Phi = v_z - y v_x + gamma v_z^2 / 2."""
    k, g = GEN_KAPPA, GEN_GAMMA

    def L(q, v):
        v2 = np.sum(v * v, axis=-1)
        return 0.5 * v2 + 0.25 * k * v2**2 - 0.5 * (q[..., 0] ** 2 + q[..., 1] ** 2)

    def dLdq(q, v):
        r = -np.array(q, dtype=float, copy=True)
        r[..., 2] = 0.0
        return np.broadcast_to(r, np.broadcast_shapes(np.shape(q), np.shape(v))).copy()

    def dLdv(q, v):
        v2 = np.sum(v * v, axis=-1)[..., None]
        out = v * (1.0 + k * v2)
        return np.broadcast_to(out, np.broadcast_shapes(np.shape(q), np.shape(v))).copy()

    def dv2(q, v):
        v2 = np.sum(v * v, axis=-1)[..., None, None]
        H = (1.0 + k * v2) * np.eye(3) + 2.0 * k * v[..., :, None] * v[..., None, :]
        return np.broadcast_to(H, (*np.broadcast_shapes(np.shape(q), np.shape(v)), 3)).copy()

    def dvdq(q, v):
        return np.zeros((*np.broadcast_shapes(np.shape(q), np.shape(v)), 3))

    def dq2(q, v):
        H = np.zeros((*np.broadcast_shapes(np.shape(q), np.shape(v)), 3))
        H[..., 0, 0] = -1.0
        H[..., 1, 1] = -1.0
        return H

    def phi(q, v):
        return (v[..., 2] - q[..., 1] * v[..., 0] + 0.5 * g * v[..., 2] ** 2)[..., None]

    def phi_q(q, v):
        D = np.zeros((*np.broadcast_shapes(np.shape(q), np.shape(v))[:-1], 1, 3))
        D[..., 0, 1] = -v[..., 0]
        return D

    def phi_v(q, v):
        D = np.zeros((*np.broadcast_shapes(np.shape(q), np.shape(v))[:-1], 1, 3))
        D[..., 0, 0] = -q[..., 1]
        D[..., 0, 2] = 1.0 + g * v[..., 2]
        return D

    def phi_vq(q, v):
        D = np.zeros((*np.broadcast_shapes(np.shape(q), np.shape(v))[:-1], 1, 3, 3))
        D[..., 0, 0, 1] = -1.0
        return D

    def phi_vv(q, v):
        D = np.zeros((*np.broadcast_shapes(np.shape(q), np.shape(v))[:-1], 1, 3, 3))
        D[..., 0, 2, 2] = g
        return D

    return ConstrainedSystem(
        LagrangianSystem(3, L, dLdq, dLdv, d2L_dv2=dv2, d2L_dvdq=dvdq, d2L_dq2=dq2),
        VelocityConstraint(phi, phi_q, phi_v, phi_vq, phi_vv, m=1),
    )


GEN_Q0 = np.array([1.0, 0.5, 0.0])
GEN_V0 = np.array([0.5, 1.0, (-1.0 + np.sqrt(1.0 + 2.0 * GEN_GAMMA * 0.25)) / GEN_GAMMA])
