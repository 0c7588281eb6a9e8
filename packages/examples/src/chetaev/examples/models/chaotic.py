""""Fully chaotic" nonholonomic system (high-order paper §7.3, Fig. 6; McLachlan–Perlmutter).

Q = Rⁿ, n = 2m + 1, m ≥ 2 (1-based indices as in the paper)::

    L = ½|v|² − ½(|q|² + q_{m+2}² q_{m+3}² + Σ_{i=1}^m q_{1+i}² q_{m+1+i}²)
    Φ = v_1 + Σ_{i=m+2}^{n} q_i v_i = 0        (A(q) = (1, 0, …, 0, q_{m+2}, …, q_n))

λ(q, v) = (A·∇V − Σ_{i≥m+2} v_i²)/(1 + Σ_{i≥m+2} q_i²) (paper §7.3). The energy is conserved.

Experiment [paper]: m = 3 (n = 7), the ensemble q0 = (α, 0.6, 0.4, 0.2, 1, 1, 1),
v0 = (0, β, 0, …, 0), α = cos(jπ/(2J)), β = sin(jπ/(2J)), j = 0..J (E₀ = 3.06 for every
member) and the mean squared energy error μ(E, k) = (1/(J+1)) Σ_j (E_jk − E₀)² (eq. 33).
Not in the paper (the project's choice, from O. Verdier's odelab reproduction): J = 9,
h ∈ {0.1, 0.05}, T = 200. Known typo (see the errata on the docs' theory page of the high-order
paper): Fig. 6's "μ/h¹⁰" for Lobatto-3 should be μ/h⁸ = μ/h^{2(2s−2)}.
"""

from __future__ import annotations

import functools

import numpy as np
from chetaev.discrete_lagrangian import ConstrainedSystem, LinearVelocityConstraint
from chetaev.discrete_lagrangian.symbolic import from_lagrangian
from chetaev.nh_integrators import testing as nh_testing

from ._nh_common import dop853

__all__ = ["E0", "J_DEFAULT", "M_DEFAULT", "energy", "ensemble", "hand_system", "lie_system",
           "mse", "multiplier", "reference", "system"]

#: m of the paper's experiment (n = 7).
M_DEFAULT = 3
#: Ensemble size parameter (the project's proposal: J = 9, ten members).
J_DEFAULT = 9
#: Energy of every ensemble member (½ + ½·5.12).
E0 = 3.06


def _indices(m: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    if not (isinstance(m, (int, np.integer)) and m >= 2):
        raise ValueError(f"`m` must be an integer >= 2 (n = 2m + 1 >= 5), got {m!r}.")
    lo = np.arange(1, m + 1)  # 0-based indices of q_{1+i}, i = 1..m
    hi = np.arange(m + 1, 2 * m + 1)  # 0-based indices of q_{m+1+i}
    return lo, hi, m + 1, m + 2  # and of q_{m+2}, q_{m+3}


def _grad(q: np.ndarray, m: int) -> np.ndarray:
    lo, hi, j1, j2 = _indices(m)
    g = np.array(q, dtype=float, copy=True)
    g[..., j1] += q[..., j1] * q[..., j2] ** 2
    g[..., j2] += q[..., j2] * q[..., j1] ** 2
    g[..., lo] += q[..., lo] * q[..., hi] ** 2
    g[..., hi] += q[..., hi] * q[..., lo] ** 2
    return g


@functools.lru_cache(maxsize=8)
def _generated(m: int) -> ConstrainedSystem:
    import sympy as sp  # only when a model is built, never at import

    n = 2 * m + 1
    q, v = sp.symbols(f"q1:{n + 1}"), sp.symbols(f"v1:{n + 1}")  # 1-based, as the paper
    V = (sum(x**2 for x in q) + q[m + 1] ** 2 * q[m + 2] ** 2
         + sum(q[i] ** 2 * q[m + i] ** 2 for i in range(1, m + 1))) / 2
    phi = v[0] + sum(q[i] * v[i] for i in range(m + 1, n))
    return from_lagrangian(sum(x**2 for x in v) / 2 - V, q, v, nonholonomic=[phi])


def system(m: int = M_DEFAULT) -> ConstrainedSystem:
    """The chaotic system with n = 2m + 1 as a ``ConstrainedSystem``; Lagrangian or
    Hamiltonian form of ``NonholonomicPRK``, or the GNI.

    Generated from L and Φ of the module docstring by
    :func:`chetaev.discrete_lagrangian.symbolic.from_lagrangian` (exact derivatives; built
    once per ``m`` and cached). :func:`hand_system` is the hand-written twin,
    :func:`multiplier` and :func:`reference` below stay independent of both.
    """
    _indices(m)
    return _generated(int(m))


def hand_system(m: int = M_DEFAULT) -> ConstrainedSystem:
    """The hand-written twin of :func:`system` (analytic Hessian):
    :func:`chetaev.nh_integrators.testing.chaotic_system` (the method package's public test
    problem), reused rather than written a second time."""
    _indices(m)
    return nh_testing.chaotic_system(int(m))


def lie_system(m: int = M_DEFAULT) -> ConstrainedSystem:
    """The same model on the abelian group Rⁿ, for ``LieNonholonomicPRK``."""
    from chetaev.discrete_lagrangian import TrivializedMechanicalSystem
    from chetaev.liegroups import Rn

    cs = system(m)
    mech, con = cs.system, cs.constraint
    return ConstrainedSystem(
        TrivializedMechanicalSystem(Rn(2 * m + 1), np.eye(2 * m + 1), mech.V, mech.gradV,
                                    mech.hessV),
        LinearVelocityConstraint(con.A, dA=con.dA),
    )


def energy(q, v, m: int = M_DEFAULT) -> np.ndarray:
    """E = ½|v|² + V(q)."""
    lo, hi, j1, j2 = _indices(m)
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    V = 0.5 * (np.sum(q**2, axis=-1) + q[..., j1] ** 2 * q[..., j2] ** 2
               + np.sum(q[..., lo] ** 2 * q[..., hi] ** 2, axis=-1))
    return 0.5 * np.sum(v * v, axis=-1) + V


def multiplier(q, v, m: int = M_DEFAULT) -> np.ndarray:
    """Exact λ(q, v) = (A·∇V − Σ_{i≥m+2} v_i²)/(1 + Σ_{i≥m+2} q_i²), shape ``(..., 1)``."""
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    g = _grad(q, m)
    Ag = g[..., 0] + np.sum(q[..., m + 1:] * g[..., m + 1:], axis=-1)
    num = Ag - np.sum(v[..., m + 1:] ** 2, axis=-1)
    return (num / (1.0 + np.sum(q[..., m + 1:] ** 2, axis=-1)))[..., None]


def ensemble(J: int = J_DEFAULT, m: int = M_DEFAULT) -> tuple[np.ndarray, np.ndarray]:
    """The paper's initial ensemble (q0, v0), shapes ``(J + 1, 7)`` (defined for m = 3 only)."""
    if m != 3:
        raise ValueError(f"the paper's ensemble is defined for m = 3 (n = 7), got m = {m}; "
                         "build your own initial data with Φ = 0 for other m.")
    if not (isinstance(J, (int, np.integer)) and J >= 1):
        raise ValueError(f"`J` must be a positive integer, got {J!r}.")
    return nh_testing.chaotic_ensemble(int(J))


def mse(E, E0_: float = E0) -> np.ndarray:
    """μ(E, k) = mean over the ensemble (last axis) of (E_jk − E₀)² (eq. 33)."""
    return np.mean((np.asarray(E, dtype=float) - E0_) ** 2, axis=-1)


def reference(t, q0, v0, m: int = M_DEFAULT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q(t), v(t), λ(t)) of the index-reduced ODE for one member, DOP853 at rtol 1e-13."""
    n = 2 * m + 1

    def rhs(_t: float, z: np.ndarray) -> np.ndarray:
        q, v = z[:n], z[n:]
        lam = multiplier(q, v, m)[0]
        a_row = np.zeros(n)
        a_row[0] = 1.0
        a_row[m + 1:] = q[m + 1:]
        acc = -_grad(q, m) + lam * a_row
        return np.concatenate([v, acc])

    z = dop853(rhs, np.concatenate([q0, v0]), t)
    q, v = z[:, :n], z[:, n:]
    return q, v, multiplier(q, v, m)
