"""``DSOCSIntegrator``: runs a DSOCS through the common ``integrate`` driver.

A DSOCS is a two-step method: the state at node k carries the previous node q_{k−1} and the
already computed next node q_{k+1} in ``carry``, so that ``state.v`` is the central
difference (q_{k+1} − q_{k−1})/(2h) (φ_{D_K}^{-1}, §4.1.2 (3)); at the first node it is the
one-sided (q_1 − q_0)/h. ``sol.q`` holds the nodes q_0, q_1, ...

Starting procedures (see the docs' theory page):

* ``start="paper"``: q1 = q0 + h v0 = φ_{L_d}(q0, v0) (§4.1.2, §4.2.2). First order: the
  global error is O(h) and the paper's fitted slopes 1.6 and 1.3 are pre-asymptotic.
* ``start="second_order"``: q1 = q0 + h v0 + ½h² a0, a0 from the continuous equations (1)
  of the SOCS (or ``acceleration=``). Global order 2.
* a callable ``start(q0, v0, h)`` → q1 (e.g. an exact solution).

**The step size.** ``DSOCSIntegrator`` is a :class:`~chetaev.discrete_lagrangian.Method` like
every other integrator: it takes ``h`` from ``step`` only (h > 0: the two-step recursion has
no backward step). A DSOCS built by :meth:`DSOCS.from_continuous` is the discretization at
its own step ``dsocs.h`` (the discrete Lagrangian h·L(q0, (q1 − q0)/h) and the central
difference map depend on it): a step with another ``h`` raises. A DSOCS without ``h`` (a
discrete Lagrangian given directly) runs with the step's ``h``; the start q1 and the
derivative check then happen at the first step, and node 0 holds the given ``v0``.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np
from chetaev.discrete_lagrangian import Method, State

from ._derivcheck import verify_once
from ._errors import DSOCSInputError
from ._validation import as_points, step_points

__all__ = ["DSOCSIntegrator"]

_STARTS = ("paper", "second_order")


def _check_start(inst, attribute, value):
    if not (callable(value) or value in _STARTS):
        raise DSOCSInputError(
            f"start must be 'paper', 'second_order' or a callable start(q0, v0, h) -> q1; "
            f"got {value!r}."
        )


def _check_acceleration(inst, attribute, value):
    if value is not None and not callable(value):
        raise DSOCSInputError(
            f"acceleration must be None or a callable acceleration(q0, v0) -> a0; got {value!r}."
        )


@attrs.frozen(eq=False)
class DSOCSIntegrator(Method):
    """Integrator protocol for a :class:`~chetaev.dsocs.DSOCS` (the "system" argument).

    ``integrate(dsocs, DSOCSIntegrator(start="paper"), q0, v0, h, t_final=...)``.

    Parameters
    ----------
    start : {"paper", "second_order"} or callable
        Starting procedure producing q1 from (q0, v0) (module docstring).
    acceleration : callable, optional
        ``acceleration(q0, v0)`` → a0 for the second-order start; by default a0 solves the
        continuous equations (1) of ``dsocs.socs`` (available for DSOCS built with
        :meth:`DSOCS.from_continuous`).

    Order: 2 with ``start="second_order"`` (central-difference scheme, symmetric), 1 with
    ``start="paper"`` (see the docs' theory page). Constraint D_K and β = 0 hold to solver
    tolerance at
    every node. Not symplectic in general (Theorem 5.3: F*Ω = Ω + dξ).
    """

    start: str | Callable = attrs.field(default="second_order", validator=_check_start)
    acceleration: Callable | None = attrs.field(default=None, validator=_check_acceleration)

    negative_steps = False  # a two-step recursion from (q_{k−1}, q_k): no backward step

    @property
    def order(self) -> int | None:
        """Global order: 1 (``"paper"``), 2 (``"second_order"``); None for a callable start,
        whose accuracy decides it (an O(h^{p+1}) q1 gives order min(p, 2))."""
        if callable(self.start):
            return None
        return 1 if self.start == "paper" else 2

    @property
    def name(self) -> str:
        """Display name, e.g. ``DSOCS (start=paper)``."""
        s = self.start if isinstance(self.start, str) else "custom"
        return f"DSOCS (start={s})"

    def first_point(self, dsocs, q0, v0, h: float) -> np.ndarray:
        """q1 from (q0, v0) by the chosen starting procedure."""
        if callable(self.start):
            return as_points(self.start(q0, v0, h), "start(q0, v0, h)", q0.shape[-1])
        if self.start == "paper":
            return q0 + h * v0
        if self.acceleration is not None:
            a0 = np.asarray(self.acceleration(q0, v0), float)
        elif getattr(dsocs, "socs", None) is not None:
            a0 = dsocs.socs.acceleration(q0, v0)
        else:
            raise DSOCSInputError(
                "start='second_order' needs the initial acceleration: build the DSOCS with "
                "DSOCS.from_continuous(...) or pass DSOCSIntegrator(acceleration=...)."
            )
        return q0 + h * v0 + 0.5 * h**2 * a0

    def _initial_state_impl(self, system, q0, v0, t0: float = 0.0) -> State:
        """State at node 0. For a DSOCS with its own step ``h`` (module docstring): q1 by the
        start, carried, and v_0 = (q1 − q0)/h; before that, once per DSOCS object,
        :meth:`DSOCS.check_derivatives` at ``(q0, q0 + h v0)`` (unless the DSOCS has
        ``derivative_check=False``). Without ``h`` both wait for the first step."""
        dsocs = system
        if not hasattr(dsocs, "step") or not hasattr(dsocs, "discrete_lagrangian"):
            raise DSOCSInputError(
                "DSOCSIntegrator integrates a chetaev.dsocs.DSOCS: pass the DSOCS as the "
                f"system argument of integrate; got {type(system).__name__}."
            )
        _, q0, v0 = step_points(1.0, q0, v0, names=("q0", "v0"))
        q0, v0 = (np.array(x) for x in np.broadcast_arrays(q0, v0))
        h = dsocs.h
        if h is None:  # the start needs the step's h: at the first step
            return State(t=t0, q=q0, v=v0, n=0, carry={"q_prev": None, "q_next": None},
                         info={"newton_iterations": 0, "residual": 0.0})
        q1 = self._start(dsocs, q0, v0, h)
        return State(t=t0, q=q0, v=(q1 - q0) / h, n=0, carry={"q_prev": None, "q_next": q1},
                     info={"newton_iterations": 0, "residual": 0.0})

    def _start(self, dsocs, q0, v0, h: float) -> np.ndarray:
        """q1 by the start, after the derivative check (once per DSOCS, at q0, q0 + h v0)."""
        verify_once(dsocs, q0, q0 + h * v0)
        return self.first_point(dsocs, q0, v0, h)

    def _step_impl(self, system, state: State, h: float) -> State:
        """Node k → node k+1: solve eq. (4) for q_{k+2} given (q_k, q_{k+1})."""
        if system.h is not None and not np.isclose(h, system.h, rtol=1e-12, atol=0.0):
            raise DSOCSInputError(
                f"the DSOCS was discretized with h = {system.h:g} but the step is h = {h:g}; "
                "build the DSOCS with the same step."
            )
        qk = np.asarray(state.q)
        qk1 = state.carry["q_next"]
        qk1 = self._start(system, qk, state.v, h) if qk1 is None else np.asarray(qk1)
        qk2, info = system.step(qk, qk1, step_index=state.n, t=state.t)
        return attrs.evolve(
            state,
            t=state.t + h,
            q=qk1,
            v=(qk2 - qk) / (2 * h),
            n=state.n + 1,
            carry={"q_prev": qk, "q_next": qk2},
            info=info,
        )
