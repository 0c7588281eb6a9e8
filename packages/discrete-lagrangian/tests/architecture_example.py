"""How to add a method (docs/architecture.rst): symplectic Euler on a regular Lagrangian.

The discrete Lagrangian L_d(q0, q1) = h L(q0, (q1 − q0)/h) (paper §4, eq. (6); the rectangle
rule α = 0). With w = (q_{k+1} − q_k)/h the discrete Hamiltonian map reads

    p_k = ∂L/∂v(q_k, w) − h ∂L/∂q(q_k, w)        (solved for w by Newton)
    q_{k+1} = q_k + h w,   p_{k+1} = ∂L/∂v(q_k, w)

Symplectic, order 1, not symmetric. ``tests/test_architecture.py`` runs this file: the
method agrees with ``DiscreteEulerLagrange("alpha", alpha=0.0)`` to round-off and has order 1.
"""

from __future__ import annotations

import attrs
import numpy as np
from chetaev.discrete_lagrangian import (
    InputError,
    Method,
    NewtonOptions,
    State,
    newton_solve,
    raise_unless_converged,
)


@attrs.frozen
class SymplecticEuler(Method):
    """Symplectic Euler, the variational integrator of L_d = h L(q0, (q1 − q0)/h)."""

    newton: NewtonOptions = attrs.field(factory=NewtonOptions)
    name = "symplectic Euler (example)"
    order = 1
    symmetric = False

    def _initial_state_impl(self, system, q0, v0, t0):
        # Method.initial_state has checked t0; the initial data are the method's to check
        q0, v0 = np.asarray(q0, dtype=float), np.asarray(v0, dtype=float)
        if q0.shape[-1:] != (system.n,) or v0.shape != q0.shape:
            raise InputError(f"`q0`, `v0` must both have shape (..., {system.n}).")
        if not (np.all(np.isfinite(q0)) and np.all(np.isfinite(v0))):
            raise InputError("`q0` and `v0` must be finite (no NaN or inf).")
        return State(t=t0, q=q0, v=v0, p=np.asarray(system.legendre(q0, v0)))

    def _step_impl(self, system, state, h):
        # Method.step has checked h and sets n + 1 and t on the grid afterwards
        q, p = state.q, state.p

        def fun_jac(w, want_jacobian):
            R = system.D2L(q, w) - h * system.D1L(q, w) - p
            J = system.D22L(q, w) - h * system.D12L(q, w) if want_jacobian else None
            return R, J

        res = newton_solve(None, state.v, options=self.newton, fun_jac=fun_jac,
                           scale=1.0 + np.max(np.abs(p), axis=-1))
        w = raise_unless_converged(res, state).x  # ConvergenceError names step, t, residual
        q1, p1 = q + h * w, system.D2L(q, w)
        return State(t=state.t + h, q=q1, v=system.legendre_inv(q1, p1), p=p1,
                     n=state.n + 1, info={"newton_iterations": res.iterations,
                                          "residual": float(np.max(res.residual))})
