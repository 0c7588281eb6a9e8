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

__all__ = ["ForcedStageHooks", "discrete_work", "forced_hooks"]


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


def forced_hooks(system: Any, hooks: Any, u: Any, s: int) -> Any:
    """``hooks`` wrapped with the system's external force, or ``hooks`` for an unforced one."""
    if getattr(system, "has_force", False) is not True:
        return hooks
    iface = interface_of(system)
    if iface.force is None:
        return hooks
    return ForcedStageHooks(hooks, iface.force, iface.force_jacobians, u, s)


def discrete_work(hooks: Any, ev: Any) -> np.ndarray | None:
    """The discrete work of the external force over the step, ``h Σ_i b_i F^i·V^i`` ``(...)``.

    None when ``hooks`` carry no external force.
    """
    if not isinstance(hooks, ForcedStageHooks):
        return None
    F = hooks.stage_force(ev.Q, ev.V)
    return ev.h * np.einsum("i,...i->...", ev.coeffs.b, np.einsum("...ij,...ij->...i", F, ev.V))
