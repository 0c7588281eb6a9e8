"""Test problems with independent references, reusable by other packages' tests.

``nonholonomic_particle``: a nonlinear nonholonomic particle (the project's choice)
("Reference numbers"):
``Q = R³``, ``M = diag(1, 2, 1.5)``, ``V = ½x² + ½y² + ¼z² + 0.1xz``, constraint
``ż − y ẋ = 0`` (``mu = (−y, 0, 1)``); the affine variant has ``Y = (0, 0, 0.7(1 + 0.3x))``,
i.e. ``ż − y ẋ − 0.7(1 + 0.3x) = 0``. The reference is scipy DOP853 on the continuous
Lagrange–d'Alembert equations with the multiplier eliminated in closed form, written here
independently of chetaev.discrete_lagrangian's own reference solver.

``harmonic_particle``: the particle of the high-order paper §7.1 (``M = I``,
``V = ½(x² + y²)``, same constraint), ``q0 = (1, 0.5, 0)``, ``v0 = (0.5, 1, 0.25)``.
"""

from __future__ import annotations

import attrs
import numpy as np
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    LinearVelocityConstraint,
    MechanicalSystem,
)
from chetaev.discrete_lagrangian import testing as dlt
from scipy.integrate import solve_ivp

__all__ = ["ParticleProblem", "harmonic_particle", "nonholonomic_particle"]

_M = np.diag([1.0, 2.0, 1.5])
_H = np.array([[1.0, 0.0, 0.1], [0.0, 1.0, 0.0], [0.1, 0.0, 0.5]])
_AFF = 0.7


def _quadratic(H):
    def V(q):
        return 0.5 * np.einsum("...i,ij,...j->...", q, H, q)

    def gradV(q):
        return np.einsum("ij,...j->...i", H, q)

    def hessV(q):
        return np.broadcast_to(H, (*np.shape(q)[:-1], 3, 3))

    return V, gradV, hessV


def _A(q):
    q = np.asarray(q)
    out = np.zeros((*q.shape[:-1], 1, 3))
    out[..., 0, 0] = -q[..., 1]
    out[..., 0, 2] = 1.0
    return out


def _dA(q):
    # dA[..., i, j, k] = ∂A_ij/∂q_k
    q = np.asarray(q)
    out = np.zeros((*q.shape[:-1], 1, 3, 3))
    out[..., 0, 0, 1] = -1.0
    return out


def _a_affine(q):
    return -_AFF * (1.0 + 0.3 * np.asarray(q)[..., :1])


def _da_affine(q):
    q = np.asarray(q)
    out = np.zeros((*q.shape[:-1], 1, 3))
    out[..., 0, 0] = -0.3 * _AFF
    return out


@attrs.frozen(eq=False)
class ParticleProblem:
    """A constrained system, consistent initial data and an independent reference."""

    system: object
    q0: np.ndarray
    v0: np.ndarray
    affine: bool
    mass: np.ndarray = attrs.field(factory=lambda: _M.copy())
    hess: np.ndarray = attrs.field(factory=lambda: _H.copy())

    def multiplier(self, q, v):
        """Continuous λ (chetaev sign: ``M v̇ = −∇V + muᵀλ``)."""
        return _multiplier(q, v, self.affine, self.mass, self.hess)

    def reference(self, t, rtol=1e-13, atol=1e-13):
        """``(q, v, lam)`` at the times ``t`` (DOP853 on the continuous equations)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))

        def rhs(_, y):
            q, v = y[:3], y[3:]
            lam = _multiplier(q, v, self.affine, self.mass, self.hess)
            acc = np.linalg.solve(self.mass, -self.hess @ q + _A(q).T @ lam)
            return np.concatenate([v, acc])

        sol = solve_ivp(
            rhs, (0.0, t[-1]), np.concatenate([self.q0, self.v0]), method="DOP853",
            t_eval=t, rtol=rtol, atol=atol,
        )
        q, v = sol.y[:3].T, sol.y[3:].T
        return q, v, _multiplier(q, v, self.affine, self.mass, self.hess)


def _multiplier(q, v, affine, M, H):
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    A = _A(q)
    Minv = np.linalg.inv(M)
    C = A @ Minv @ np.swapaxes(A, -1, -2)
    # d/dt (A v + a) = 0 with M v̇ = −∇V + Aᵀλ:
    #   C λ = A M⁻¹ ∇V − (dA[v]) v − a_q v
    rhs = np.einsum("...ij,jk,kl,...l->...i", A, Minv, H, q)
    rhs = rhs - np.einsum("...ijk,...k,...j->...i", _dA(q), v, v)
    if affine:
        rhs = rhs - np.einsum("...ij,...j->...i", _da_affine(q), v)
    return np.linalg.solve(C, rhs[..., None])[..., 0]


def _symbolic_particle(affine: bool) -> object:
    """The particle's system from its Lagrangian and constraint (``symbolic=True``)."""
    import sympy as sp
    from chetaev.discrete_lagrangian.symbolic import from_lagrangian

    q, v = sp.symbols("x y z"), sp.symbols("v_x v_y v_z")
    T = sum(float(_M[i, i]) * v[i] ** 2 for i in range(3)) / 2
    V = sum(float(_H[i, j]) * q[i] * q[j] for i in range(3) for j in range(3)) / 2
    phi = v[2] - q[1] * v[0]
    if affine:
        phi = phi - _AFF * (1.0 + 0.3 * q[0])
    return from_lagrangian(T - V, list(q), list(v), nonholonomic=[phi])


def nonholonomic_particle(affine: bool = False, *, symbolic: bool = False) -> ParticleProblem:
    """The particle problem of the docs' theory page (linear or affine constraint), ready to
    integrate.

    ``q0 = (0.3, −0.5, 0.2)``, ``v0 = (1, 0.5, y0 v_x + Y_z(q0))``. With ``symbolic=True`` the
    system is built from the same Lagrangian and constraint by
    :func:`chetaev.discrete_lagrangian.symbolic.from_lagrangian` (needs sympy; exact
    derivatives and, with numba, the compiled backend's kernels); the initial data and the
    reference are the same.
    """
    q0 = np.array([0.3, -0.5, 0.2])
    vz = q0[1] * 1.0 + (_AFF * (1.0 + 0.3 * q0[0]) if affine else 0.0)
    v0 = np.array([1.0, 0.5, vz])
    if symbolic:
        return ParticleProblem(system=_symbolic_particle(affine), q0=q0, v0=v0, affine=affine)
    mech = MechanicalSystem(_M, *_quadratic(_H))
    if affine:
        con = LinearVelocityConstraint(_A, a=_a_affine, dA=_dA, da=_da_affine)
    else:
        con = LinearVelocityConstraint(_A, dA=_dA)
    system = ConstrainedSystem(mech, con)
    return ParticleProblem(system=system, q0=q0, v0=v0, affine=affine)


def harmonic_particle() -> ParticleProblem:
    """The nonholonomic particle in a harmonic potential of the high-order paper §7.1:
    ``L = ½|v|² − ½(x² + y²)``, ``Φ = v_z − y v_x``; ``q0 = (1, 0.5, 0)``,
    ``v0 = (0.5, 1, 0.25)`` (so ``v_z = y v_x``). ``y(t)`` is an exact harmonic oscillator."""
    system = dlt.harmonic_nonholonomic_particle()  # the one definition of the §7.1 model
    M = np.eye(3)
    H = np.diag([1.0, 1.0, 0.0])  # of V, for the reference's closed-form multiplier
    return ParticleProblem(system=system, q0=dlt.HARMONIC_PARTICLE_Q0.copy(),
                           v0=dlt.HARMONIC_PARTICLE_V0.copy(), affine=False, mass=M, hess=H)
