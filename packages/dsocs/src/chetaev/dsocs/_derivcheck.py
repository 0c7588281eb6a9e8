"""Verification of the derivative callables a DSOCS or SOCS takes (issue 14 item 4).

Each supplied derivative is compared, slot by slot, with a central finite difference of the
function it differentiates, at the given point and two nearby points, through
:func:`chetaev.discrete_lagrangian.compare_derivative` (derived tolerance: truncation bound
from two step sizes plus a measured safety factor on the rounding, see its docstring):

* :class:`~chetaev.dsocs.TwoPointLagrangian`: ``D1``/``D2`` against ``value`` (when given),
  ``D11`` = ∂D1/∂q0, ``D12`` = ∂D1/∂q1, ``D22`` = ∂D2/∂q1 (eq. (2));
* :class:`~chetaev.dsocs.KinematicConstraint`: ``jacobian`` = (D_1g, D_2g, D_3g) against ``g``;
* :class:`~chetaev.dsocs.SOCS`: ``constraint_jacobian`` = (c_q, c_v, c_a) against
  ``constraint``, and the Lagrangian system's own ``check_derivatives``.

Derivatives the package builds itself (finite-difference fallbacks, the pieces
``DSOCS.from_continuous`` derives from the continuous system, which the SOCS check covers)
carry ``derivative_check=False`` and are skipped.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from chetaev.discrete_lagrangian import compare_derivative

__all__ = ["check_kinematic", "check_lagrangian", "check_socs", "verify_once"]

_VERIFIED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _slot(fun: Callable, pts: Sequence[np.ndarray], k: int) -> Callable:
    """``y ↦ fun(*pts)`` with slot ``k`` replaced by ``y`` (other slots broadcast to it)."""

    def g(y):
        y = np.asarray(y, dtype=float)
        args = [y if j == k else np.broadcast_to(p, y.shape) for j, p in enumerate(pts)]
        return np.asarray(fun(*args), dtype=float)

    return g


def _pick(fun: Callable, i: int) -> Callable:
    """Component ``i`` of a callable returning a tuple of arrays."""
    return lambda *args: np.asarray(fun(*args)[i], dtype=float)


def check_lagrangian(Ld: Any, q0: np.ndarray, q1: np.ndarray, owner: str) -> None:
    """The supplied derivatives of a TwoPointLagrangian at ``(q0, q1)``."""
    pts = (q0, q1)
    pairs = []
    if Ld.value is not None:
        pairs += [("D1", "value", Ld.D1, Ld.D1, 0), ("D2", "value", Ld.D2, Ld.D2, 1)]
    for name, of, f, k in (("D11", "D1", Ld.D1, 0), ("D12", "D1", Ld.D1, 1),
                           ("D22", "D2", Ld.D2, 1)):
        d = getattr(Ld, name)
        if d is not None:
            pairs.append((name, of, f, d, k))
    for name, of, f, d, k in pairs:
        base = Ld.value if of == "value" else f
        compare_derivative(name, _slot(base, pts, k), _slot(d, pts, k), pts[k], of=of,
                           wrt=f"q{k}", owner=owner)


def check_kinematic(K: Any, q0: np.ndarray, q1: np.ndarray, q2: np.ndarray,
                    owner: str) -> None:
    """The supplied ``jacobian`` of a KinematicConstraint at ``(q0, q1, q2)``."""
    if K is None or K.jacobian is None:
        return
    pts = (q0, q1, q2)
    for k in range(3):
        compare_derivative("jacobian", _slot(K.g, pts, k), _slot(_pick(K.jacobian, k), pts, k),
                           pts[k], of="g", wrt=f"q{k} (D_{k + 1}g)", owner=owner)


def check_socs(socs: Any, q: np.ndarray, v: np.ndarray, a: np.ndarray) -> None:
    """The supplied ``constraint_jacobian`` of a SOCS and its Lagrangian system's check."""
    check = getattr(socs.system, "check_derivatives", None)
    if callable(check):
        check(q, v)
    if socs.constraint_jacobian is None:
        return
    pts = (q, v, a)
    for k, var in enumerate(("q (c_q)", "v (c_v)", "a (c_a)")):
        compare_derivative("constraint_jacobian", _slot(socs.constraint, pts, k),
                           _slot(_pick(socs.constraint_jacobian, k), pts, k), pts[k],
                           of="constraint", wrt=var, owner="SOCS")


def verify_once(obj: Any, *args: Any) -> None:
    """``obj.check_derivatives(*args)`` once per object (cached), unless switched off."""
    if not getattr(obj, "derivative_check", True) or _VERIFIED.get(obj, False):
        return
    obj.check_derivatives(*args)
    _VERIFIED[obj] = True
