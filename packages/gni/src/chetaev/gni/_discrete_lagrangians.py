"""Discrete Lagrangians used by the GNI (paper (10), (16), §7.2; paper §5, eq. (16)).

Both are :class:`chetaev.discrete_lagrangian.DiscreteLagrangian` (the one discrete-Lagrangian
type of the project), with what the GNI adds to it:

* ``D1(system, q0, q1, h)`` and ``D2(system, q0, q1, h)``: the slot derivatives
  ``∂L_d/∂q0`` and ``∂L_d/∂q1``, arrays ``(..., n)`` (inherited for the midpoint rule);
* ``D1_dq1(system, q0, q1, h)``: ``∂(D1 L_d)/∂q1`` (``DiscreteLagrangian.D12``) as
  ``(..., n, n)``, or ``None`` when the system has no second derivatives
  (``SystemInterface.has_second_derivatives``; the solver then forms a finite-difference
  Jacobian);
* ``symmetric`` (bool) and ``order`` (int): the order of the GNI built on it;
* ``forces(system, q0, q1, h, u)`` and ``force_minus_dq1(...)``: the left and right discrete
  forces of the forced GNI (issue 20; Marsden & West 2001 §3.2), the same quadrature of the
  force as of the Lagrangian (inherited for the midpoint rule).

``system`` is an unconstrained Lagrangian system or its
:class:`chetaev.discrete_lagrangian.SystemInterface`, read through ``D1L(q, v)``,
``D2L(q, v)`` (``∂L/∂q``, ``∂L/∂v``) and the second derivatives, all broadcasting over
leading axes.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from chetaev.discrete_lagrangian import DiscreteLagrangian, interface_of

from ._errors import InputError

__all__ = ["AlphaDiscreteLagrangian", "MidpointDiscreteLagrangian", "jacobian_D1_dq1"]


def _as_alpha(value) -> float:
    if isinstance(value, (bool, np.bool_, str, bytes)) or np.iscomplexobj(value):
        raise InputError(f"alpha must be a real number in [0, 1]; got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"alpha must be a real number in [0, 1]; got {value!r}") from None


def jacobian_D1_dq1(ld: DiscreteLagrangian, system: Any, q0, q1, h):
    """``∂(D1 L_d)/∂q1`` ``(..., n, n)`` of a ``DiscreteLagrangian`` (its ``D12``), or
    ``None`` when ``system`` has no second derivatives of ``L``."""
    if not interface_of(system).has_second_derivatives:
        return None
    return ld.D12(system, q0, q1, h)


@attrs.frozen
class AlphaDiscreteLagrangian(DiscreteLagrangian):
    """``L_d^α(q0, q1) = h[(1−α) L(q0, v) + α L(q1, v)]``, ``v = (q1 − q0)/h``.

    ``α = 0`` is ``L_d^A`` and ``α = 1`` is ``L_d^B`` (paper (10)); ``α = ½`` is the
    trapezoidal (16) (``DiscreteLagrangian("trapezoidal")``) whose GNI is nonholonomic
    SHAKE/RATTLE. Other α are the convex family of paper §5, eq. (16) (not in the paper).
    The GNI is of order 2 for ``α = ½`` and 1 otherwise. ``kind`` is ``"endpoint"``.
    """

    alpha: float = attrs.field(converter=_as_alpha)
    kind: str = attrs.field(default="endpoint", init=False)

    def __attrs_post_init__(self) -> None:
        if not np.isfinite(self.alpha):
            raise InputError(f"alpha must be a finite float, got {self.alpha!r}")

    @property
    def symmetric(self) -> bool:
        """True for ``α = ½`` (the trapezoidal rule)."""
        return self.alpha == 0.5

    @property
    def order(self) -> int:
        """2 for ``α = ½``, 1 otherwise."""
        return 2 if self.symmetric else 1

    def __call__(self, system, q0, q1, h):
        """``L_d^α(q0, q1)``."""
        v = (q1 - q0) / h
        a = self.alpha
        return h * ((1.0 - a) * system.lagrangian(q0, v) + a * system.lagrangian(q1, v))

    def D1(self, system, q0, q1, h):
        """``∂L_d^α/∂q0`` ``(..., n)``."""
        v = (q1 - q0) / h
        a = self.alpha
        out = -(1.0 - a) * system.D2L(q0, v) - a * system.D2L(q1, v)
        if a != 1.0:
            out = out + h * (1.0 - a) * system.D1L(q0, v)
        return out

    def D2(self, system, q0, q1, h):
        """``∂L_d^α/∂q1`` ``(..., n)``."""
        v = (q1 - q0) / h
        a = self.alpha
        out = (1.0 - a) * system.D2L(q0, v) + a * system.D2L(q1, v)
        if a != 0.0:
            out = out + h * a * system.D1L(q1, v)
        return out

    def D12(self, system, q0, q1, h):
        """``∂(D1 L_d^α)/∂q1`` ``(..., n, n)``."""
        v = (q1 - q0) / h
        a = self.alpha
        J = 0.0
        if a != 1.0:
            J = J + (1.0 - a) * (system.D12L(q0, v) - system.D22L(q0, v) / h)
        if a != 0.0:
            J = J - a * (system.D21L(q1, v) + system.D22L(q1, v) / h)
        return J

    def D1_dq1(self, system, q0, q1, h):
        """:func:`jacobian_D1_dq1`."""
        return jacobian_D1_dq1(self, system, q0, q1, h)

    def forces(self, system, q0, q1, h, u=None):
        """The left and right discrete forces of the endpoint quadrature of ``L_d^α``.

        ``f_d⁻ = h(1−α) F(q0, v, u)``, ``f_d⁺ = hα F(q1, v, u)``, ``v = (q1 − q0)/h``
        (Marsden & West 2001 §3.2; ``α = ½`` is the trapezoidal rule's pair of
        ``DiscreteLagrangian.forces``), each ``(..., n)``; ``system`` has
        ``generalized_force``.
        """
        v = (q1 - q0) / h
        a = self.alpha
        fm = h * (1.0 - a) * system.generalized_force(q0, v, u)
        fp = h * a * system.generalized_force(q1, v, u)
        return fm, fp

    def force_minus_dq1(self, system, q0, q1, h, u=None):
        """``∂f_d⁻/∂q1 = (1−α) F_v(q0, v, u)`` ``(..., n, n)`` (the force's part of the
        Jacobian of the forced step)."""
        v = (q1 - q0) / h
        return (1.0 - self.alpha) * system.force_jacobians(q0, v, u)[1]


@attrs.frozen
class MidpointDiscreteLagrangian(DiscreteLagrangian):
    """``L_d(q0, q1) = h L((q0 + q1)/2, (q1 − q0)/h)`` (the midpoint rule of paper §7.2):
    ``DiscreteLagrangian("midpoint")``.

    Symmetric; its GNI is of order 2 (paper §5, eq. (16); an independent numpy check,
    see the docs' theory page).
    """

    kind: str = attrs.field(default="midpoint", init=False)
    alpha: float = attrs.field(default=0.5, init=False)

    symmetric = True

    def D1_dq1(self, system, q0, q1, h):
        """:func:`jacobian_D1_dq1`."""
        return jacobian_D1_dq1(self, system, q0, q1, h)
