"""External forces in the PRK stage equations: a hook wrapper on the one engine (issue 20).

The forced (Lagrange–d'Alembert) equations d/dt ∂L/∂v − ∂L/∂q = F(q, v, u) are discretized
by the forced discrete Euler–Lagrange equations (Marsden & West 2001, Acta Numerica, §3.2:
the discrete Lagrange–d'Alembert principle, the discrete action's variation plus the left and
right discrete forces). For a variational PRK the discrete forces are the quadrature of the
force at the stages (Ober-Blöbaum, Junge & Marsden 2011, "Discrete mechanics and optimal
control: an analysis", the forced symplectic PRK of their §3–4): the stage
force enters the stage equations of :mod:`~chetaev.discrete_lagrangian.core._prk` once, as
an extra term of W^i::

    W^i = D1L(Q^i, V^i) + F(Q^i, V^i, u) (+ the method's own hook force, e.g. ∂Φ/∂qᵀΛ^i)
    P^i = p_k + h Σ_j â_ij W^j,   p_{k+1} = p_k + h Σ_j b̂_j W^j

with the control ``u`` held constant over the step. :class:`ForcedStageHooks` composes the
user force (and its Q/V derivatives, for the Newton matrix) with any hooks object of the
engine (its ``force`` is added, its ``equations``, multipliers and extra unknowns are kept),
so that ``_prk.py`` itself knows nothing about forces.

The discrete work of a step, the same quadrature of the power F·v,
``h Σ_i b_i F(Q^i, V^i, u)·V^i`` (:func:`discrete_work`), equals the energy change of the
step to the method's order (the continuous identity dE/dt = F·v).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._interface import interface_of
from ._prk import StageHooks

__all__ = [
    "ForcedLieStageHooks",
    "ForcedStageHooks",
    "discrete_work",
    "forced_hooks",
    "forced_multiplier_control_jacobian",
]


class ForcedStageHooks:
    """Hooks that add the external stage force F(Q^i, V^i, u) to those of ``inner``.

    Parameters
    ----------
    inner : hooks object or None
        The method's own hooks (None: the unconstrained VPRK, :class:`StageHooks`).
    force, force_jacobians : callable
        ``F(Q, V, u)`` ``(..., s, n)`` and ``(Q, V, u) -> (F_q, F_v, F_u)`` (the fields of the
        :class:`~chetaev.discrete_lagrangian.core._interface.SystemInterface`).
    u : ndarray or None
        The control of the step ``(..., n_controls)`` (None: the system's empty control).
    s : int
        Number of stages.

    Every attribute other than ``force`` (``m``, ``free``, ``n_extra``, ``equations``,
    cached values) is the inner hooks'.
    """

    def __init__(self, inner: Any, force: Any, force_jacobians: Any, u: Any, s: int) -> None:
        self.inner = StageHooks(s) if inner is None else inner
        self.m = int(getattr(self.inner, "m", 0))
        self.free = getattr(self.inner, "free", (False,) * s)
        self.n_extra = int(getattr(self.inner, "n_extra", 0))
        self._force = force
        self._jac = force_jacobians
        self.u = None if u is None else np.asarray(u, dtype=float)[..., None, :]
        self._ub: Any = None

    def _u_at(self, Q: np.ndarray) -> Any:
        """The control broadcast to the stages' batch ``(..., s, n_u)`` (one array per step:
        equal batch shapes keep generated kernels on their fast path)."""
        if self.u is None:
            return None
        ub = self._ub
        if ub is None or ub.shape[:-1] != Q.shape[:-1]:
            try:
                ub = np.broadcast_to(self.u, (*Q.shape[:-1], self.u.shape[-1]))
            except ValueError:
                return self.u
            self._ub = ub
        return ub

    def stage_force(self, Q: np.ndarray, V: np.ndarray) -> np.ndarray:
        """The external force at the stages, ``(..., s, n)``."""
        return self._force(Q, V, self._u_at(Q))

    def force(self, Q, V, Lam, jacobian):
        """The inner hooks' force plus F(Q^i, V^i, u), with the Q and V derivatives."""
        F0, dQ0, dV0, dL0 = self.inner.force(Q, V, Lam, jacobian)
        u = self._u_at(Q)
        Fe = self._force(Q, V, u)
        F = Fe if F0 is None else F0 + Fe
        if not jacobian:
            return F, None, None, None
        Fq, Fv, _ = self._jac(Q, V, u)
        return (F, Fq if dQ0 is None else dQ0 + Fq, Fv if dV0 is None else dV0 + Fv, dL0)

    def equations(self, ev):
        """The inner hooks' extra equations, unchanged."""
        return self.inner.equations(ev)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


class ForcedLieStageHooks:
    """Hooks of the Lie-group engine that add the left-trivialized stage force F(Gⁱ, Ωⁱ, u).

    The forced Euler–Poincaré (Lagrange–d'Alembert) equations d/dt ∂ℓ/∂η − ad*_η ∂ℓ/∂η =
    L*_g D₁ℓ + F(g, η, u) put the force where the configuration derivative L*_g D₁ℓ is. The
    forced discrete Lagrange–d'Alembert principle of the Hamilton–Pontryagin action (23)
    (Marsden & West 2001 §3.2; Bou-Rabee & Marsden 2009 §4, the forced VPRKMK) adds the
    quadrature of the virtual work h Σᵢ bᵢ ⟨F(Gⁱ, Ωⁱ, u), ζⁱ⟩, ζⁱ the left-trivialized
    variation of Gⁱ through the retraction. In the engine's eqs. (26)–(27)
    (:mod:`~chetaev.discrete_lagrangian.core._lie_prk`) this is one extra term of the stage
    force, dual to the retraction like D₁ℓ::

        Fⁱ = L*_{Gⁱ} D₁ℓ(Gⁱ, Ωⁱ) + F(Gⁱ, Ωⁱ, u) (+ the method's own hook force)

    so it enters Nⁱ = Dᵢᵀ Fⁱ + ..., Ñⁱ = Ad*_{τ(−Ξⁱ)} Fⁱ and μ_{k+1} of (27) exactly as the
    potential force does. The Newton matrix gets δF = F_g ζⁱ + F_η δΩⁱ (``F_g`` the
    left-trivialized derivative of the system's :meth:`force_jacobians`: exact from
    ``force_derivatives``, or the system's central differences).

    Parameters
    ----------
    inner : hooks object or None
        The method's own hooks of the Lie engine (None: the unconstrained LieVPRK).
    force, force_jacobians : callable
        ``F(G, Omega, u)`` ``(..., s, d)`` and ``(G, Omega, u) -> (F_g, F_eta, F_u)`` (the
        fields of the :class:`~chetaev.discrete_lagrangian.core._interface.SystemInterface`).
    u : ndarray or None
        The control of the step ``(..., n_controls)`` (None: the system's empty control).
    s : int
        Number of stages.

    Every other attribute (``m``, ``free``, ``n_extra``, ``equations``, cached values) is the
    inner hooks'.
    """

    def __init__(self, inner: Any, force: Any, force_jacobians: Any, u: Any, s: int) -> None:
        self.inner = inner
        self.m = int(getattr(inner, "m", 0))
        self.free = getattr(inner, "free", (False,) * s)
        self.n_extra = int(getattr(inner, "n_extra", 0))
        self._force = force
        self._jac = force_jacobians
        self.u = None if u is None else np.asarray(u, dtype=float)[..., None, :]
        self._ub: Any = None

    def _u_at(self, Omega: np.ndarray) -> Any:
        """The control broadcast to the stages' batch ``(..., s, n_u)``."""
        if self.u is None:
            return None
        ub = self._ub
        if ub is None or ub.shape[:-1] != Omega.shape[:-1]:
            try:
                ub = np.broadcast_to(self.u, (*Omega.shape[:-1], self.u.shape[-1]))
            except ValueError:
                return self.u
            self._ub = ub
        return ub

    def stage_force(self, G: np.ndarray, Omega: np.ndarray) -> np.ndarray:
        """The external force at the stages, ``(..., s, d)``."""
        return self._force(G, Omega, self._u_at(Omega))

    def force(self, G, Omega, Lam):
        """The inner hooks' force plus F(Gⁱ, Ωⁱ, u)."""
        Fe = self.stage_force(G, Omega)
        if self.inner is None:
            return Fe
        F0 = self.inner.force(G, Omega, Lam)
        return Fe if F0 is None else F0 + Fe

    def analytic_stage_jacobian(self) -> bool:
        """The inner hooks' answer (True without inner hooks): the force's own Jacobian is
        exact or the system's central differences, like the vector-space engine's."""
        return True if self.inner is None else bool(self.inner.analytic_stage_jacobian())

    def force_jacobian(self, ev, zeta, dOm, dLam):
        """δF = F_g ζⁱ + F_η δΩⁱ (plus the inner hooks' δFₕ)."""
        Fg, Fv, _ = self._jac(ev.G, ev.Omega, self._u_at(ev.Omega))
        out = Fg @ zeta + Fv @ dOm
        fj = getattr(self.inner, "force_jacobian", None)
        if fj is not None:
            d0 = fj(ev, zeta, dOm, dLam)
            if d0 is not None:
                out = out + d0
        return out

    def equations(self, ev):
        """The inner hooks' extra equations, unchanged (None without inner hooks)."""
        return None if self.inner is None else self.inner.equations(ev)

    def equations_jacobian(self, ev, D):
        """The inner hooks' equation Jacobian (None without inner hooks)."""
        return None if self.inner is None else self.inner.equations_jacobian(ev, D)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)


def forced_hooks(system: Any, hooks: Any, u: Any, s: int, lie: bool = False) -> Any:
    """``hooks`` wrapped with the system's external force, or ``hooks`` for an unforced one
    (``lie``: for the Lie-group engine, :class:`ForcedLieStageHooks`)."""
    if getattr(system, "has_force", False) is not True:
        return hooks
    iface = interface_of(system)
    if iface.force is None:
        return hooks
    cls = ForcedLieStageHooks if lie else ForcedStageHooks
    return cls(hooks, iface.force, iface.force_jacobians, u, s)


def discrete_work(hooks: Any, ev: Any) -> np.ndarray | None:
    """The discrete work of the external force over the step, ``h Σ_i b_i F^i·V^i`` ``(...)``
    (on a group ``h Σ_i b_i F(Gⁱ, Ωⁱ, u)·Ωⁱ`` with the stage body velocities Ωⁱ).

    None when ``hooks`` carry no external force.
    """
    if isinstance(hooks, ForcedLieStageHooks):
        V = ev.Omega
        F = hooks.stage_force(ev.G, V)
    elif isinstance(hooks, ForcedStageHooks):
        V = ev.V
        F = hooks.stage_force(ev.Q, V)
    else:
        return None
    return ev.h * np.einsum("i,...i->...", ev.coeffs.b, np.einsum("...ij,...ij->...i", F, V))


def forced_multiplier_control_jacobian(system: Any, q: np.ndarray, v: np.ndarray,
                                       u: Any) -> np.ndarray:
    """∂λ/∂u ``(..., m, n_controls)`` of the multiplier of the forced constrained equations.

    The forced multiplier is λ(q, v) − C⁻¹ Φ_v G⁻¹ F(q, v, u) with G = D₂₂L(q, v),
    Φ_v = ∂Φ/∂v and C = Φ_v G⁻¹ Φ_vᵀ (the force adds G⁻¹F to the unconstrained acceleration
    of ``ConstrainedSystem.multiplier``, paper §3; on a group the same with the
    left-trivialized F(g, η, u)); it is affine in F, so ∂λ/∂u = −C⁻¹ Φ_v G⁻¹ F_u exactly
    (F_u from the system's ``force_jacobians``).
    """
    G = np.asarray(system.D22L(q, v), dtype=float)
    B = np.asarray(system.constraint.dphi_dv(q, v), dtype=float)
    Fu = np.asarray(system.force_jacobians(q, v, u)[2], dtype=float)
    C = B @ np.linalg.solve(G, np.swapaxes(B, -1, -2))
    return -np.linalg.solve(C, B @ np.linalg.solve(G, Fu))
