"""Independent reference solutions: the continuous equations with scipy DOP853.

Every convergence test and benchmark in the project compares against this module
(CORE_API.md, issue 4). The continuous equations are written as a first-order ODE:

* unconstrained: ``q̇ = v``, ``g_L v̇ = D1L − D21L v``;
* holonomic, index-1 form: ``g_L v̇ = D1L − D21L v + (∂Φ/∂q)ᵀλ`` with λ(q, v) from the
  twice-differentiated constraint (paper §3 formula with the velocity form ∂Φ/∂q·v);
* nonholonomic, Lagrange–d'Alembert with λ eliminated (paper §3):
  ``g_L v̇ = D1L − D21L v + (∂Φ/∂v)ᵀλ(q, v)``;
* Lie group, Euler–Poincaré with reconstruction (paper §6): ``ġ = g·hat(η)`` as a matrix
  ODE on the matrix representation ``as_matrix(g)`` (reported back through
  ``from_matrix``), ``g_L η̇ = ad*_η D2ℓ + D1ℓ − D21ℓ η (+ (∂Φ/∂η)ᵀλ)``. The group element
  of a plain matrix ODE drifts off the group only at the level of rtol (1e-13), which is
  fine for a reference.

Constraint drift of the index-1 form is likewise O(rtol) over the short horizons used in
convergence tests.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from scipy.integrate import solve_ivp

from .._util._errors import InputError
from .._util._validation import as_float, as_group_element, as_vector
from ..systems._derivcheck import verify_before_first_step

__all__ = ["ReferenceSolution", "reference_solution"]


@attrs.frozen(eq=False)
class ReferenceSolution:
    """Reference trajectory at the requested times (time axis first, then batch axes).

    Attributes
    ----------
    t : ndarray (T,)
    q : ndarray (T, ..., n) or (T, ..., k, k) for a group element
    v : ndarray (T, ..., n) — velocity (trivialized velocity on a group)
    p : ndarray (T, ..., n) — momentum ∂L/∂v
    lam : ndarray (T, ..., m) or None — the continuous multiplier λ(q, v)
    nfev : int — right-hand-side evaluations
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    p: np.ndarray
    lam: np.ndarray | None
    nfev: int


def _rhs_factory(system: Any):
    group = getattr(system, "group", None)
    n = system.n
    constrained = hasattr(system, "multiplier")

    def acc(q, v):
        return system.acceleration(q, v)

    if group is None:

        def rhs(_t, y):
            q, v = y[:n], y[n:]
            return np.concatenate([v, acc(q, v)])

        return rhs, constrained

    k = group.matrix_dim

    def rhs_g(_t, y):
        M = y[: k * k].reshape(k, k)
        eta = y[k * k:]
        Mdot = M @ group.hat(eta)
        return np.concatenate([Mdot.ravel(), acc(group.from_matrix(M), eta)])

    return rhs_g, constrained


def reference_solution(
    system: Any,
    q0: Any,
    v0: Any,
    t: Any,
    rtol: float = 1e-13,
    atol: float = 1e-13,
) -> ReferenceSolution:
    """Solve the continuous equations of ``system`` with scipy DOP853.

    Parameters
    ----------
    system : LagrangianSystem, MechanicalSystem, Trivialized*System or ConstrainedSystem
    q0 : array_like (..., n) or group element (..., k, k)
        Initial configuration (leading batch axes are solved one after another).
    v0 : array_like (..., n)
        Initial (trivialized) velocity; must satisfy the constraint.
    t : array_like (T,)
        Increasing output times; ``t[0]`` is the initial time.
    rtol, atol : float
        DOP853 tolerances (default 1e-13).

    Returns
    -------
    ReferenceSolution

    Raises
    ------
    InputError
        For a system with an external force (``force=``): the reference of the forced
        equations is not implemented yet (issue 20); it is never silently the unforced one.
    """
    if getattr(system, "has_force", False) is True:
        raise InputError(
            "reference_solution does not take external forces yet (issue 20): this system "
            "has force=...; integrate the forced continuous equations with "
            "scipy.integrate.solve_ivp directly (restart it on each control interval)."
        )
    if np.iscomplexobj(t):
        raise InputError("`t` must be real times, got a complex array.")
    try:
        t = np.asarray(t, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(f"`t` must be an array of real times, got {t!r}.") from None
    if t.size < 1 or not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
        raise InputError("`t` must be a non-empty, finite, strictly increasing array of times.")
    for name, tol in (("rtol", rtol), ("atol", atol)):
        as_float(tol, name, positive=True)
    verify_before_first_step(system, q0, v0)  # user callables and derivatives, once
    group = getattr(system, "group", None)
    n = getattr(system, "n", None)
    if n is None or not hasattr(system, "legendre"):
        raise InputError(
            "`system` must be a LagrangianSystem, MechanicalSystem, Trivialized*System or "
            f"ConstrainedSystem; got {type(system).__name__}."
        )
    for name, x in (("q0", q0), ("v0", v0)):
        if np.iscomplexobj(x):
            raise InputError(f"`{name}` must be real, got a complex array.")
    v0 = as_vector(v0, "v0", n)
    if group is None:
        q0 = as_vector(q0, "q0", n)
        qb = q0.shape[:-1]
        k = None
    else:
        k = group.shape[-1]
        q0 = as_group_element(q0, group, "q0")
        qb = q0.shape[:-2]
    try:
        batch = np.broadcast_shapes(qb, v0.shape[:-1])
    except ValueError:
        raise InputError(
            f"the batch shapes of `q0` {qb} and `v0` {v0.shape[:-1]} do not broadcast; pass "
            "one velocity per initial configuration (same leading axes)."
        ) from None
    q0 = np.broadcast_to(q0, (*batch, n) if group is None else (*batch, k, k))
    v0 = np.broadcast_to(v0, (*batch, n))
    if hasattr(system, "check_initial"):
        system.check_initial(q0, v0, tol=1e-8)
    rhs, constrained = _rhs_factory(system)
    qs, vs, nfev = [], [], 0
    for idx in np.ndindex(*batch):
        g0 = q0[idx] if group is None else group.as_matrix(q0[idx])
        y0 = np.concatenate([np.ravel(g0), v0[idx]])
        if t.size == 1:
            Y = y0[:, None]
        else:
            sol = solve_ivp(rhs, (t[0], t[-1]), y0, method="DOP853", t_eval=t,
                            rtol=rtol, atol=atol)
            if not sol.success:
                raise RuntimeError(f"reference_solution: DOP853 failed: {sol.message}")
            Y = sol.y
            nfev += int(sol.nfev)
        if group is None:
            qs.append(Y[:n].T)
            vs.append(Y[n:].T)
        else:
            qs.append(group.from_matrix(Y[: k * k].T.reshape(-1, k, k)))
            vs.append(Y[k * k:].T)
    T = t.size
    q = np.stack(qs, axis=1) if qs else np.empty((T, 0))
    v = np.stack(vs, axis=1)
    q = q.reshape((T, *batch, *q.shape[2:]))
    v = v.reshape((T, *batch, n))
    p = np.asarray(system.legendre(q, v))
    lam = np.asarray(system.multiplier(q, v)) if constrained else None
    return ReferenceSolution(t=t, q=q, v=v, p=p, lam=lam, nfev=nfev)
