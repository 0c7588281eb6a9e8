"""Test problems with independent references, reusable by other packages' tests.

The nonholonomic particle of spec geometric-nonholonomic-integrator §3 ("Reference numbers"):
``Q = R³``, ``M = diag(1, 2, 1.5)``, ``V = ½x² + ½y² + ¼z² + 0.1xz``, constraint
``ż − y ẋ = 0`` (``mu = (−y, 0, 1)``); the affine variant has ``Y = (0, 0, 0.7(1 + 0.3x))``,
i.e. ``ż − y ẋ − 0.7(1 + 0.3x) = 0``. The reference is scipy DOP853 on the continuous
Lagrange–d'Alembert equations with the multiplier eliminated in closed form, written here
independently of chetaev.discrete_lagrangian's own reference solver.
"""

from __future__ import annotations

import attrs
import numpy as np
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    LinearVelocityConstraint,
    MechanicalSystem,
)
from scipy.integrate import solve_ivp

__all__ = ["ParticleProblem", "convergence_order", "nonholonomic_particle"]

_M = np.diag([1.0, 2.0, 1.5])
_H = np.array([[1.0, 0.0, 0.1], [0.0, 1.0, 0.0], [0.1, 0.0, 0.5]])
_AFF = 0.7


def _V(q):
    x, y, z = q[..., 0], q[..., 1], q[..., 2]
    return 0.5 * x**2 + 0.5 * y**2 + 0.25 * z**2 + 0.1 * x * z


def _gradV(q):
    return np.einsum("ij,...j->...i", _H, q)


def _hessV(q):
    return np.broadcast_to(_H, (*np.shape(q)[:-1], 3, 3))


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

    def multiplier(self, q, v):
        """Continuous λ (chetaev sign: ``M v̇ = −∇V + muᵀλ``)."""
        return _multiplier(q, v, self.affine)

    def reference(self, t, rtol=1e-13, atol=1e-13):
        """``(q, v, lam)`` at the times ``t`` (DOP853 on the continuous equations)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))

        def rhs(_, y):
            q, v = y[:3], y[3:]
            lam = _multiplier(q, v, self.affine)
            acc = np.linalg.solve(_M, -_gradV(q) + _A(q).T @ lam)
            return np.concatenate([v, acc])

        sol = solve_ivp(
            rhs, (0.0, t[-1]), np.concatenate([self.q0, self.v0]), method="DOP853",
            t_eval=t, rtol=rtol, atol=atol,
        )
        q, v = sol.y[:3].T, sol.y[3:].T
        return q, v, _multiplier(q, v, self.affine)


def _multiplier(q, v, affine):
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    A = _A(q)
    Minv = np.linalg.inv(_M)
    C = A @ Minv @ np.swapaxes(A, -1, -2)
    # d/dt (A v + a) = 0 with M v̇ = −∇V + Aᵀλ:
    #   C λ = A M⁻¹ ∇V − (dA[v]) v − a_q v
    rhs = np.einsum("...ij,jk,...k->...i", A, Minv, _gradV(q))
    rhs = rhs - np.einsum("...ijk,...k,...j->...i", _dA(q), v, v)
    if affine:
        rhs = rhs - np.einsum("...ij,...j->...i", _da_affine(q), v)
    return np.linalg.solve(C, rhs[..., None])[..., 0]


def nonholonomic_particle(affine: bool = False) -> ParticleProblem:
    """The particle problem of spec §3 (linear or affine constraint), ready to integrate.

    ``q0 = (0.3, −0.5, 0.2)``, ``v0 = (1, 0.5, y0 v_x + Y_z(q0))``.
    """
    q0 = np.array([0.3, -0.5, 0.2])
    vz = q0[1] * 1.0 + (_AFF * (1.0 + 0.3 * q0[0]) if affine else 0.0)
    v0 = np.array([1.0, 0.5, vz])
    mech = MechanicalSystem(mass=_M, potential=_V, potential_grad=_gradV, potential_hess=_hessV)
    if affine:
        con = LinearVelocityConstraint(_A, a=_a_affine, dA=_dA, da=_da_affine)
    else:
        con = LinearVelocityConstraint(_A, dA=_dA)
    system = ConstrainedSystem(mech, con)
    return ParticleProblem(system=system, q0=q0, v0=v0, affine=affine)


def convergence_order(h, err, floor=1e-11):
    """Slope of ``log err`` against ``log h`` (np.polyfit) over points above ``floor``."""
    h = np.asarray(h, dtype=float)
    err = np.asarray(err, dtype=float)
    keep = err > floor
    if keep.sum() < 2:
        raise ValueError(f"fewer than two errors above the round-off floor {floor:g}: {err}")
    return float(np.polyfit(np.log(h[keep]), np.log(err[keep]), 1)[0])
