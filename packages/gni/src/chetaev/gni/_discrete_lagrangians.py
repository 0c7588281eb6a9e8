"""Discrete Lagrangians used by the GNI (paper (10), (16), §7.2; paper §5, eq. (16)).

A discrete Lagrangian here is any object with

* ``D1(system, q0, q1, h)`` and ``D2(system, q0, q1, h)``: the slot derivatives
  ``∂L_d/∂q0`` and ``∂L_d/∂q1``, arrays ``(..., n)``;
* ``D1_dq1(system, q0, q1, h)``: ``∂(D1 L_d)/∂q1`` as ``(..., n, n)``, or ``None`` when the
  system has no second derivatives (the solver then forms a finite-difference Jacobian);
* ``symmetric`` (bool) and ``order`` (int): the order of the GNI built on it.

``system`` is an unconstrained Lagrangian system exposing ``D1L(q, v)`` and ``D2L(q, v)``
(``∂L/∂q``, ``∂L/∂v``), both broadcasting over leading axes.
"""

from __future__ import annotations

import attrs
import numpy as np

from ._adapters import second_derivatives
from ._errors import InputError

__all__ = ["AlphaDiscreteLagrangian", "MidpointDiscreteLagrangian"]


def _as_alpha(value) -> float:
    if isinstance(value, (bool, np.bool_, str, bytes)) or np.iscomplexobj(value):
        raise InputError(f"alpha must be a real number in [0, 1]; got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"alpha must be a real number in [0, 1]; got {value!r}") from None


@attrs.frozen
class AlphaDiscreteLagrangian:
    """``L_d^α(q0, q1) = h[(1−α) L(q0, v) + α L(q1, v)]``, ``v = (q1 − q0)/h``.

    ``α = 0`` is ``L_d^A`` and ``α = 1`` is ``L_d^B`` (paper (10)); ``α = ½`` is the
    trapezoidal (16) whose GNI is nonholonomic SHAKE/RATTLE. Other α are the convex family of
    paper §5, eq. (16) (not in the paper). The GNI is of order 2 for ``α = ½`` and 1 otherwise.
    """

    alpha: float = attrs.field(converter=_as_alpha)

    @alpha.validator
    def _check(self, attribute, value):
        if not np.isfinite(value):
            raise InputError(f"alpha must be a finite float, got {value!r}")

    @property
    def symmetric(self) -> bool:
        return self.alpha == 0.5

    @property
    def order(self) -> int:
        return 2 if self.symmetric else 1

    def D1(self, system, q0, q1, h):
        v = (q1 - q0) / h
        a = self.alpha
        out = -(1.0 - a) * system.D2L(q0, v) - a * system.D2L(q1, v)
        if a != 1.0:
            out = out + h * (1.0 - a) * system.D1L(q0, v)
        return out

    def D2(self, system, q0, q1, h):
        v = (q1 - q0) / h
        a = self.alpha
        out = (1.0 - a) * system.D2L(q0, v) + a * system.D2L(q1, v)
        if a != 0.0:
            out = out + h * a * system.D1L(q1, v)
        return out

    def D1_dq1(self, system, q0, q1, h):
        v = (q1 - q0) / h
        a = self.alpha
        J = 0.0
        if a != 1.0:
            d0 = second_derivatives(system, q0, v, need_qq=False)
            if d0 is None:
                return None
            _, Lqv0, Lvv0 = d0
            J = J + (1.0 - a) * (Lqv0 - Lvv0 / h)
        if a != 0.0:
            d1 = second_derivatives(system, q1, v, need_qq=False)
            if d1 is None:
                return None
            _, Lqv1, Lvv1 = d1
            J = J - a * (np.swapaxes(Lqv1, -1, -2) + Lvv1 / h)
        return J


@attrs.frozen
class MidpointDiscreteLagrangian:
    """``L_d(q0, q1) = h L((q0 + q1)/2, (q1 − q0)/h)`` (the midpoint rule of paper §7.2).

    Symmetric; its GNI is of order 2 (paper §5, eq. (16); an independent numpy check,
    see the docs' theory page).
    """

    symmetric = True
    order = 2

    def D1(self, system, q0, q1, h):
        qm = 0.5 * (q0 + q1)
        v = (q1 - q0) / h
        return 0.5 * h * system.D1L(qm, v) - system.D2L(qm, v)

    def D2(self, system, q0, q1, h):
        qm = 0.5 * (q0 + q1)
        v = (q1 - q0) / h
        return 0.5 * h * system.D1L(qm, v) + system.D2L(qm, v)

    def D1_dq1(self, system, q0, q1, h):
        qm = 0.5 * (q0 + q1)
        v = (q1 - q0) / h
        d = second_derivatives(system, qm, v)
        if d is None:
            return None
        Lqq, Lqv, Lvv = d
        return 0.25 * h * Lqq + 0.5 * (Lqv - np.swapaxes(Lqv, -1, -2)) - Lvv / h
