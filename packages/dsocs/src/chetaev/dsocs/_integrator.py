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

**System and method.** The DSOCS is the system (the discrete Lagrangian, D_K, D_V: the
pieces of Theorem 3.3); ``DSOCSIntegrator`` is the method, a
:class:`~chetaev.discrete_lagrangian.Method` like every other integrator: it holds the solve
options (``tol``, ``max_iter``, the root selection ``root_filter``/``max_deflations``, a
problem-specific ``solver``) and takes ``h`` from ``step`` only (h > 0: the two-step
recursion has no backward step). At every step it solves the equations of
``dsocs.at(h)``: a DSOCS built by :meth:`DSOCS.from_continuous` without ``h`` is discretized
at the step's ``h`` (the discrete Lagrangian L(q0, (q1 − q0)/h) and the central-difference
map depend on it); a DSOCS built with its own ``h`` (compatibility) raises for a step with
another ``h``; a DSOCS whose pieces do not depend on ``h`` runs at any ``h``. Without a
DSOCS ``h`` the start q1 and the derivative check happen at the first step, and node 0 holds
the given ``v0``.

**Forces and controls** (issue 20). A DSOCS with ``force=`` (its module docstring: the forced
discrete Lagrange–d'Alembert equations) is integrated with the control ``u`` of each step
(``integrate(..., controls=U)``, ``U[k]`` for the step from node k to k + 1): it is the
control of the equation that gives q_{k+2} (the force at node k + 1). The second-order start
takes a0 from the forced continuous equations with the control of ``initial_state(u=...)``
when the DSOCS holds its ``h``, else (a family, or no ``u`` at t0) the start waits for the
first step and takes its control. ``info["work"]`` is the discrete work over
[t_k, t_{k+1}], W_k = (f_d⁻(q_k, q_{k+1}; u_{k−1}) + f_d⁺(q_k, q_{k+1}; u_k))·(q_{k+1} − q_k)/h
with the trapezoidal forces f_d^± (h/2)F(q_k or q_{k+1}, (q_{k+1} − q_k)/h, ·) of those
equations (u_{k−1}: the control of the previous step, the first step's at node 0): the energy
change E(q_{k+1}, v_{k+1}) − E(q_k, v_k) to second order summed over a fixed interval.

**Step linearization** (issue 20). :meth:`Method.step_linearization` differentiates the
step by the implicit function theorem on eq. (4) at the converged q_{k+2}:
dq_{k+2} = −J₃⁺(J₁ dq_k + J₂ dq_{k+1} + J_u du) with J_j the slot derivatives of eq. (4)
(:meth:`DSOCS.jacobians`, J₃ the Newton matrix; J₃⁺ its inverse, or the pseudo-inverse of a
Gauss–Newton step) and J_u = E·∂p_F/∂u. Coordinates: the two-step state (q_k, q_{k+1}) (=
``state.q``, ``state.carry["q_next"]``), ``coordinates == "(q, q_next)"``: ``A =
∂(q_{k+1}, q_{k+2})/∂(q_k, q_{k+1}) = [[0, I], [dq_{k+2}/dq_k, dq_{k+2}/dq_{k+1}]]`` (Thm 5.1's
flow Jacobian) and ``B = [[0], [dq_{k+2}/du]]``. A state that carries no q_{k+1} yet (node 0
of a family, or of a forced DSOCS given no control at t0: the step applies the start) is
linearized in its (q, v),
``coordinates == "(q, v)"``, through the start q_1(q_0, v_0, u) (``"paper"``: q_0 + h v_0;
``"second_order"``: + ½h² a_0 with ∂a_0 by the implicit function theorem on the continuous
equations (1), their Jacobians by central differences) to (q_1, v_1 = (q_2 − q_0)/(2h)). For a
DSOCS with a ``tangent_basis`` (C_d ⊂ 𝒟_d of a discrete nonholonomic system, not open) the
bases at (q_k, q_{k+1}) and (q_{k+1}, q_{k+2}) and (A, B) in them are returned too; otherwise
the pairs are free (C_d open in Q×Q) and the bases are None.

**Compiled backend** (issue 17; :mod:`._compiled`). ``backend="auto"`` (default) solves eq.
(4) compiled (numba) when numba is installed and the configuration has a compiled path: an
unforced DSOCS carrying ``compiled_kernels`` (numba source of eq. (4) and its q2-derivative,
checked against the DSOCS's callables at seeded points when it is built;
:func:`~chetaev.dsocs.curvature_particle_dsocs` writes them), a square eq. (4) (m + r = n),
no problem-specific ``solver`` and no ``root_filter``. The compiled solve has the numpy
solve's unknowns, guess 2q_k − q_{k−1}, row normalization, stopping rule and polishing step,
so both agree to round-off; a step it does not solve is rerun on numpy (its deflated
restarts). ``integrate`` then runs its loop compiled (the start stays in Python);
``backend="numba"`` raises :class:`~chetaev.discrete_lagrangian.extending.BackendError`
naming the cause for any other configuration, ``"numpy"`` never compiles.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np
from chetaev.discrete_lagrangian import (
    LinearizationNotSupportedError,
    Method,
    NewtonOptions,
    State,
    StepLinearization,
    deflated,
    newton_solve,
)
from chetaev.discrete_lagrangian.extending import BackendError, resolve_backend, tangent_fields

from ._derivcheck import verify_once
from ._errors import DSOCSConvergenceError, DSOCSInputError
from ._validation import as_points, fd_jacobian, step_points

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


def _optional_callable(inst, attribute, value):
    if value is not None and not callable(value):
        raise DSOCSInputError(
            f"{attribute.name} must be None or a callable; got {type(value).__name__}."
        )


def _optional_tol(inst, attribute, value):
    if value is None:
        return
    if isinstance(value, bool) or not (isinstance(value, (int, float, np.floating))
                                       and np.isfinite(value) and value > 0):
        raise DSOCSInputError(
            f"{attribute.name} must be None or a finite positive number (e.g. 1e-12); "
            f"got {value!r}."
        )


def _optional_count(lowest: int):
    def check(inst, attribute, value):
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lowest:
            raise DSOCSInputError(
                f"{attribute.name} must be None or an integer >= {lowest}; got {value!r}."
            )

    return check


def _optional_newton(inst, attribute, value):
    if value is not None and not isinstance(value, NewtonOptions):
        raise DSOCSInputError(
            "newton must be None or a chetaev.discrete_lagrangian.NewtonOptions, e.g. "
            f"NewtonOptions(tol=1e-12); got {type(value).__name__}."
        )


#: the solve options when neither the method nor the DSOCS sets them
DEFAULTS = {"tol": 1e-12, "max_iter": 50, "max_deflations": 3}


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
    tol, max_iter : float, int, optional
        Newton tolerance and iteration cap (default 1e-12, 50). Square systems:
        ``newton_solve`` of chetaev.discrete_lagrangian on sensitivity-normalized rows
        (≈ |Δq2| ≤ tol(1 + |q|)), then one polishing step; otherwise Gauss–Newton with
        |Δq2|∞ ≤ tol·(1 + |q2|∞).
    root_filter : callable, optional
        Root-selection safeguard ``root_filter(q0, q1, q2, h)`` → bool array, True for an
        admissible root. A rejected root is deflated (Farrell et al. 2015) and Newton
        restarts from the extrapolated guess 2q1 − q0, its reflections about the rejected
        root and q1 (up to ``max_deflations`` rounds, default 3; the same restarts are tried
        when Newton fails to converge). If no admissible root is found the step raises — it
        never returns a rejected root. Paper §4.2, eqs. (8)–(10).
    max_deflations : int, optional
        Rounds of deflated restarts (default 3).
    solver : callable, optional
        Problem-specific step ``solver(q0, q1, h)`` → q2 replacing the generic Newton solve
        (e.g. the closed-form particle step); the residual of eq. (4) at its point is
        measured.

    newton : NewtonOptions, optional
        The project's Newton options (its ``tol`` and ``max_iter`` replace ``tol`` and
        ``max_iter`` when given), as for the other methods.
    backend : {"auto", "numba", "numpy"}, keyword-only
        The compiled solve of eq. (4) (issue 17; module docstring): ``"auto"`` compiled
        where possible, ``"numba"`` compiled or
        :class:`~chetaev.discrete_lagrangian.extending.BackendError`, ``"numpy"`` never.

    Options left ``None`` take the DSOCS's compatibility defaults (:class:`DSOCS`
    ``tol``, ``max_iter``, ``max_deflations``, ``root_filter``, ``solver``, bound to its
    ``h``), else the defaults above: the method's own value wins.

    External forces and controls (``supports_forces``), ``info["work"]`` and
    ``step_linearization`` (coordinates ``"(q, q_next)"``, or ``"(q, v)"`` through the
    start): module docstring.

    Order: 2 with ``start="second_order"`` (central-difference scheme, symmetric), 1 with
    ``start="paper"`` (see the docs' theory page). Constraint D_K and β = 0 hold to solver
    tolerance at
    every node. Not symplectic in general (Theorem 5.3: F*Ω = Ω + dξ).
    """

    start: str | Callable = attrs.field(default="second_order", validator=_check_start)
    acceleration: Callable | None = attrs.field(default=None, validator=_check_acceleration)
    tol: float | None = attrs.field(default=None, validator=_optional_tol)
    max_iter: int | None = attrs.field(default=None, validator=_optional_count(1))
    max_deflations: int | None = attrs.field(default=None, validator=_optional_count(0))
    root_filter: Callable | None = attrs.field(default=None, validator=_optional_callable)
    solver: Callable | None = attrs.field(default=None, validator=_optional_callable)
    newton: NewtonOptions | None = attrs.field(default=None, kw_only=True,
                                               validator=_optional_newton)

    negative_steps = False  # a two-step recursion from (q_{k−1}, q_k): no backward step
    supports_forces = True  # the forced DSOCS of the module docstring
    #: A compiled (numba) solve of eq. (4) (issue 17; :mod:`._compiled`) for an unforced
    #: DSOCS with ``compiled_kernels``, square eq. (4), no ``solver`` or ``root_filter``.
    compiled_backend = True

    def _backend_interface(self, system):
        """What ``resolve_backend`` reads of ``system`` (the DSOCS at the step's ``h``; a DSOCS
        is outside the system interface): an object whose ``kernels`` are its
        ``compiled_kernels`` or None; raises ``BackendError`` for ``backend="numba"``
        without them."""
        from types import SimpleNamespace

        kernels = getattr(system, "compiled_kernels", None)
        if kernels is None and self.backend == "numba":
            raise BackendError(
                "backend='numba': this DSOCS has no compiled kernels (plain Python "
                "callables). Pass DSOCS(..., compiled_kernels=source) with numba-compilable "
                "dsocs_residual and dsocs_jacobian_q2 (see DSOCS; curvature_particle_dsocs "
                "writes them, given curvature_kernel= for a callable k), or use "
                "backend='numpy' / 'auto'."
            )
        return SimpleNamespace(kernels=kernels)

    def _compiled_plan(self, system, iface):
        """``(why_not, plan)`` of the compiled backend (issue 17; :mod:`._compiled`)."""
        from ._compiled import dsocs_plan

        return dsocs_plan(self, system)

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

    def first_point(self, dsocs, q0, v0, h: float, u=None) -> np.ndarray:
        """q1 from (q0, v0) by the chosen starting procedure (forced DSOCS: a0 of the
        forced continuous equations at control ``u``; a user ``acceleration`` or ``start``
        callable is taken as is)."""
        if callable(self.start):
            return as_points(self.start(q0, v0, h), "start(q0, v0, h)", q0.shape[-1])
        if self.start == "paper":
            return q0 + h * v0
        return q0 + h * v0 + 0.5 * h**2 * self._initial_acceleration(dsocs, q0, v0, u)

    def _initial_acceleration(self, dsocs, q0, v0, u=None) -> np.ndarray:
        """a0 of the second-order start (class docstring)."""
        if self.acceleration is not None:
            return np.asarray(self.acceleration(q0, v0), float)
        if getattr(dsocs, "socs", None) is not None:
            forced = getattr(dsocs, "forced_system", None)
            F = None if forced is None else forced.generalized_force(q0, v0, u)
            return dsocs.socs.acceleration(q0, v0, force=F)
        else:
            raise DSOCSInputError(
                "start='second_order' needs the initial acceleration: build the DSOCS with "
                "DSOCS.from_continuous(...) or pass DSOCSIntegrator(acceleration=...)."
            )

    def _initial_state_impl(self, system, q0, v0, t0: float = 0.0, u=None) -> State:
        """State at node 0. For a DSOCS with its own step ``h`` (module docstring): q1 by the
        start, carried, and v_0 = (q1 − q0)/h; before that, once per DSOCS object,
        :meth:`DSOCS.check_derivatives` at ``(q0, q0 + h v0)`` (unless the DSOCS has
        ``derivative_check=False``). Without ``h`` both wait for the first step (and for a
        forced DSOCS with controls given no ``u`` at t0: the start takes the first step's
        control)."""
        dsocs = system
        if not hasattr(dsocs, "step") or not hasattr(dsocs, "discrete_lagrangian"):
            raise DSOCSInputError(
                "DSOCSIntegrator integrates a chetaev.dsocs.DSOCS: pass the DSOCS as the "
                f"system argument of integrate; got {type(system).__name__}."
            )
        _, q0, v0 = step_points(1.0, q0, v0, names=("q0", "v0"))
        q0, v0 = (np.array(x) for x in np.broadcast_arrays(q0, v0))
        h = dsocs.h
        needs_u = getattr(dsocs, "n_controls", 0) and u is None
        if h is None or needs_u:  # the start needs the step's h (or control): at step 0
            return State(t=t0, q=q0, v=v0, n=0,
                         carry={"q_prev": None, "q_next": None, "u": u},
                         info={"newton_iterations": 0, "residual": 0.0})
        q1 = self._start(dsocs, q0, v0, h, u)
        return State(t=t0, q=q0, v=(q1 - q0) / h, n=0,
                     carry={"q_prev": None, "q_next": q1, "u": u},
                     info={"newton_iterations": 0, "residual": 0.0})

    def _start(self, dsocs, q0, v0, h: float, u=None) -> np.ndarray:
        """q1 by the start, after the derivative check (once per DSOCS, at q0, q0 + h v0)."""
        verify_once(dsocs, q0, q0 + h * v0)
        return self.first_point(dsocs, q0, v0, h, u)

    def _step_impl(self, system, state: State, h: float, u=None) -> State:
        """Node k → node k+1: solve eq. (4) for q_{k+2} given (q_k, q_{k+1}) (forced: with
        the control ``u``, module docstring)."""
        system = system.at(h)  # the DSOCS discretized at this step (raises if it has another)
        qk = np.asarray(state.q)
        qk1 = state.carry.get("q_next")
        qk1 = self._start(system, qk, state.v, h, u) if qk1 is None else np.asarray(qk1)
        plan = resolve_backend(self, system)
        solved = None if plan is None else plan.solve(qk, qk1, h)  # compiled (issue 17)
        if solved is None:  # numpy, or a compiled solve that failed: its restarts or error
            solved = self.solve(system, qk, qk1, h, step_index=state.n, t=state.t, u=u)
        qk2, info = solved
        if system.has_force:
            u_left = state.carry.get("u")
            info["work"] = system.discrete_work(qk, qk1, u if u_left is None else u_left, u)
        return attrs.evolve(
            state,
            t=state.t + h,
            q=qk1,
            v=(qk2 - qk) / (2 * h),
            n=state.n + 1,
            carry={"q_prev": qk, "q_next": qk2, "u": u},
            info=info,
        )

    # -- the step linearization (module docstring) ---------------------------------------------
    def _step_linearization_impl(self, system, state: State, h: float, u,
                                 new: State) -> StepLinearization:
        """(A, B) of the step ``state`` → ``new`` by the implicit function theorem on eq. (4)
        (module docstring: coordinates (q, q_next), or (q, v) through the start)."""
        dsocs = system.at(h)
        qk = np.asarray(state.q, dtype=float)
        qk1 = state.carry.get("q_next")
        start = qk1 is None
        if start:
            qk1, dq1 = self._start_linearization(dsocs, qk, np.asarray(state.v, float), h, u)
        qk1 = np.asarray(qk1, dtype=float)
        qk2 = np.asarray(new.carry["q_next"], dtype=float)
        J0, J1, J2 = dsocs.jacobians(qk, qk1, qk2, u)
        Ju = dsocs.control_jacobian(qk, qk1, qk2, u)
        n = qk.shape[-1]
        batch = np.broadcast_shapes(J0.shape[:-2], J1.shape[:-2], J2.shape[:-2],
                                    Ju.shape[:-2])
        nu = Ju.shape[-1]
        rhs = np.concatenate([np.broadcast_to(J, (*batch, J.shape[-2], J.shape[-1]))
                              for J in (J0, J1, Ju)], axis=-1)
        J2 = np.broadcast_to(J2, (*batch, *J2.shape[-2:]))
        if J2.shape[-2] == n:
            dq2 = -np.linalg.solve(J2, rhs)  # (..., n, 2n + nu): d/d(q_k, q_{k+1}, u)
        else:  # Gauss–Newton step: the least-squares solution (exact on T D_K)
            dq2 = -np.linalg.pinv(J2) @ rhs
        eye = np.broadcast_to(np.eye(n), (*batch, n, n))
        zero = np.zeros((*batch, n, n))
        if not start:
            A = np.concatenate([np.concatenate([zero, eye], -1), dq2[..., : 2 * n]], -2)
            B = np.concatenate([np.zeros((*batch, n, nu)), dq2[..., 2 * n:]], -2)
            fields = {}
            tangent = getattr(dsocs, "tangent_basis", None)
            if tangent is not None:
                fields = tangent_fields(np.asarray(tangent(qk, qk1), float),
                                        np.asarray(tangent(qk1, qk2), float), A, B)
            return StepLinearization(state=new, A=A, B=B, coordinates="(q, q_next)",
                                     **fields)
        # through the start: q1(q0, v0, u), then (q1, v1 = (q2 − q0)/(2h))
        dq1 = np.broadcast_to(dq1, (*batch, n, 2 * n + nu))
        d2 = dq2[..., :n] @ np.concatenate([eye, zero, np.zeros((*batch, n, nu))], -1) \
            + dq2[..., n: 2 * n] @ dq1
        d2[..., 2 * n:] += dq2[..., 2 * n:]
        dv1 = d2 / (2 * h)
        dv1[..., :n] -= eye / (2 * h)
        full = np.concatenate([dq1, dv1], -2)
        return StepLinearization(state=new, A=full[..., : 2 * n], B=full[..., 2 * n:],
                                 coordinates="(q, v)")

    def _start_linearization(self, dsocs, q0, v0, h: float, u):
        """q1 of the start and ∂q1/∂(q0, v0, u) ``(..., n, 2n + n_u)`` (module docstring)."""
        n = q0.shape[-1]
        nu = int(getattr(dsocs, "n_controls", 0) or 0)
        batch = np.broadcast_shapes(q0.shape[:-1], v0.shape[:-1],
                                    () if u is None else np.shape(u)[:-1])
        eye = np.broadcast_to(np.eye(n), (*batch, n, n))
        if callable(self.start) or (self.start == "second_order"
                                    and self.acceleration is not None):
            raise LinearizationNotSupportedError(
                "DSOCSIntegrator linearizes a step through the start only for start='paper' "
                "or start='second_order' with the continuous equations' a0 (no custom start or "
                "acceleration callable): take the first step with method.step, then "
                "linearize from that state (coordinates (q, q_next))."
            )
        q1 = self.first_point(dsocs, q0, v0, h, u)
        dq1 = np.concatenate([eye, h * eye, np.zeros((*batch, n, nu))], -1)
        if self.start == "second_order":
            dq1 = dq1 + 0.5 * h**2 * _acceleration_jacobian(dsocs, q0, v0, u,
                                                            (q1 - q0 - h * v0) * 2 / h**2)
        return q1, dq1

    # -- the solve of eq. (4) ------------------------------------------------------------------
    def options(self, dsocs, h: float | None):
        """The effective ``(tol, max_iter, max_deflations, root_filter, solver)`` for ``dsocs``
        at step ``h``: the method's value, else the DSOCS's compatibility value, else the
        default; ``root_filter(q0, q1, q2)`` and ``solver(q0, q1)`` bound to ``h``."""

        def pick(name):
            if self.newton is not None and name in ("tol", "max_iter"):
                return getattr(self.newton, name)
            mine = getattr(self, name)
            if mine is not None:
                return mine
            theirs = getattr(dsocs, name, None)
            return DEFAULTS[name] if theirs is None else theirs

        root_filter = solver = None
        if self.root_filter is not None:
            mine_filter = self.root_filter

            def root_filter(q0, q1, q2):
                return mine_filter(q0, q1, q2, h)
        else:
            root_filter = getattr(dsocs, "root_filter", None)
        if self.solver is not None:
            mine_solver = self.solver

            def solver(q0, q1):
                return mine_solver(q0, q1, h)
        else:
            solver = getattr(dsocs, "solver", None)
        return pick("tol"), pick("max_iter"), pick("max_deflations"), root_filter, solver

    def solve(self, dsocs, q0, q1, h: float | None = None, guess=None, *, step_index: int = 0,
              t: float = 0.0, u=None):
        """Solve eq. (4) of ``dsocs`` (at step ``h``) for q2 given (q0, q1): ``(q2, info)``.

        Uses ``solver`` when set, else Newton/Gauss–Newton from ``guess`` (default
        2q1 − q0) with the root-selection safeguard ``root_filter`` (class docstring; paper
        Def. 3.1, 3.2, eqs. (2)–(4), Thm. 3.3, §4.2 eqs. (8)–(10)). ``dsocs`` must hold its
        pieces at ``h`` (``dsocs.at(h)``; :meth:`step` passes it so). ``u``: the control of
        a forced DSOCS (its forced eq. (4)).

        Raises
        ------
        DSOCSConvergenceError
            If Newton fails, or every root found is rejected by ``root_filter``.
        """
        dsocs._pieces()
        tol, max_iter, max_deflations, root_filter, solver = self.options(dsocs, h)
        _, q0, q1 = step_points(1.0, q0, q1, names=("q0", "q1"))
        if solver is not None and getattr(dsocs, "has_force", False):
            raise DSOCSInputError(
                "a problem-specific solver solves the unforced eq. (4); this DSOCS has an "
                "external force: use the generic Newton solve (DSOCSIntegrator(solver=None) "
                "and a DSOCS without solver=, e.g. curvature_particle_dsocs(..., "
                "closed_form=False))."
            )
        if solver is not None:
            q2 = np.asarray(solver(q0, q1), float)
            # the residual of eq. (4) at the solver's point is measured, not assumed
            with np.errstate(invalid="ignore", over="ignore"):
                r = dsocs.residual(q0, q1, q2) if np.all(np.isfinite(q2)) else np.full(1, np.nan)
            resid = float(np.max(np.abs(r))) if r.size else 0.0
            if not np.isfinite(resid):
                raise DSOCSConvergenceError(
                    step=step_index, t=t, residual=resid, tol=tol, iterations=0,
                    hint="the problem-specific solver returned a non-finite point (no real "
                    "root of eq. (4) from these nodes); halve h or use the generic Newton "
                    "solve (solver=None)",
                )
            info = {"newton_iterations": 0, "residual": resid, "rejected_roots": 0}
            return q2, info
        x0 = 2.0 * q1 - q0 if guess is None else np.asarray(guess, float)

        def fun(x):
            return dsocs.residual(q0, q1, x, u)

        def jac(x):
            return dsocs.jacobian_q2(q0, q1, x, u)

        def solve(x_start, roots):
            f, j = (fun, jac) if not roots else deflated(fun, jac, roots, power=1)
            # a diverging restart may overflow; the root finder reports it as not converged
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                return newton_solve(
                    f, x_start, j, NewtonOptions(tol=tol, max_iter=max_iter),
                    gauss_newton=True)

        n = q0.shape[-1]
        J_guess = jac(np.broadcast_to(x0, np.broadcast_shapes(q0.shape, np.shape(x0))))
        if J_guess.shape[-2] == n:
            # square system: the shared solver of chetaev.discrete_lagrangian, on rows
            # normalized by their sensitivity Σ_j |∂F_i/∂q2_j|(1 + |q1_j|) — the size of the
            # terms each row balances — so its residual test reads |Δq2| ≲ tol·(1 + |q|)
            w = 1.0 / np.maximum(
                np.einsum("...ij,...j->...i", np.abs(J_guess), 1.0 + np.abs(q1)), 1e-300)
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                res = newton_solve(
                    lambda x: w * fun(x), x0, jac=lambda x: w[..., None] * jac(x),
                    options=NewtonOptions(tol=tol, max_iter=max_iter),
                    f0=w * fun(x0), j0=w[..., None] * J_guess,
                )
                if bool(np.all(res.converged)):  # one polishing step: |Δq2| ~ tol² after it
                    x = res.x
                    try:
                        dx = np.linalg.solve(jac(x), fun(x)[..., None])[..., 0]
                    except np.linalg.LinAlgError:  # singular at the root: keep it as is
                        dx = np.full(x.shape, np.nan)
                    if np.all(np.isfinite(dx)):
                        res = attrs.evolve(res, x=x - dx, iterations=res.iterations + 1)
        else:
            res = solve(x0, [])
        total_it = res.iterations
        q2 = res.x

        def admissible(r):
            """Per batch entry: converged and (if a filter is set) accepted by it."""
            ok = np.asarray(r.converged, dtype=bool)
            if root_filter is not None:
                ok = ok & np.asarray(root_filter(q0, q1, r.x), dtype=bool)
            return ok

        ok_e = admissible(res)  # which batch entries hold an admissible root
        rejected: list[np.ndarray] = []
        accepted = bool(np.all(ok_e))
        if not accepted and (root_filter is not None or max_deflations > 0):
            # root-selection safeguard (paper §4.2, eqs. (8)–(10)): deflate the rejected roots and
            # restart
            # from the extrapolated guess, its reflections about the rejected root, and q1.
            # Entries are accepted one by one: an entry keeps the first admissible root found
            if bool(np.any(np.asarray(res.converged, dtype=bool) & ~ok_e)):
                rejected.append(q2.copy())
            for _attempt in range(max_deflations):
                xr = rejected[-1] if rejected else x0
                candidates = [(x0, True)] if rejected else []
                candidates += [(2 * x0 - xr, False), (2 * x0 - xr, True),
                               (2 * xr - x0, False), (2 * xr - x0, True),
                               (q1, False), (q1, True)]
                found_new = False
                for start, use_defl in candidates:
                    r = solve(start, rejected if use_defl else [])
                    total_it += r.iterations
                    ok_r = admissible(r)
                    take = ok_r & ~ok_e
                    q2 = np.where(take[..., None], r.x, q2)
                    ok_e = ok_e | ok_r
                    if bool(np.all(ok_e)):
                        accepted = True
                        break
                    bad_r = np.asarray(r.converged, dtype=bool) & ~ok_r & ~ok_e
                    if bool(np.any(bad_r)) and all(
                        np.max(np.abs(r.x - x)[bad_r]) > 1e-9 * (1 + np.max(np.abs(x)))
                        for x in rejected
                    ):
                        rejected.append(r.x.copy())
                        found_new = True
                if accepted or not found_new:
                    break
        if not accepted:
            if rejected and root_filter is not None:
                raise DSOCSConvergenceError(
                    step=step_index, t=t, residual=float(np.max(np.abs(fun(rejected[-1])))),
                    tol=tol, iterations=total_it,
                    hint=f"the {len(rejected)} root(s) found were rejected by root_filter; "
                    "halve h or give a problem-specific solver=... (paper §4.2, eqs. (8)–(10))",
                )
            raise DSOCSConvergenceError(
                step=step_index, t=t, residual=float(np.max(res.residual)), tol=tol,
                iterations=total_it,
                hint="halve h, pass a better guess, or give the DSOCS a problem-specific "
                "solver=... (see the docs' theory page)",
            )
        roots = rejected
        if J_guess.shape[-2] != n:
            # Gauss–Newton stops on the step size: make sure the overdetermined system is
            # really solved (rows not involving q2 — e.g. g_d(q0, q1) of Remark 3.4 — cannot
            # be corrected by the step)
            Js = dsocs.jacobians(q0, q1, q2, u)
            qs = (q0, q1, q2)
            sens = sum(np.einsum("...ij,...j->...i", np.abs(Jk), 1.0 + np.abs(qk))
                       for Jk, qk in zip(Js, qs))
            rel = np.abs(fun(q2)) / np.maximum(sens, 1e-300)
            if np.max(rel) > 1e-8:
                raise DSOCSConvergenceError(
                    step=step_index, t=t, residual=float(np.max(rel)), tol=1e-8,
                    iterations=total_it,
                    hint="the step equations have no exact solution; check that (q0, q1) "
                    "satisfies the constraint rows that do not involve q2 (for a DSOCS from a "
                    "discrete nonholonomic system: g_d(q0, q1) = 0)",
                )
        info = {
            "newton_iterations": total_it,
            "residual": float(np.max(np.abs(fun(q2)))) if fun(q2).size else 0.0,
            "rejected_roots": len(roots),
        }
        return q2, info


def _acceleration_jacobian(dsocs, q, v, u, a) -> np.ndarray:
    """∂a0/∂(q, v, u) ``(..., n, 2n + n_u)`` of the continuous equations (1) r(q, v, a, F) = 0
    at their solution ``a`` by the implicit function theorem, da = −r_a⁺ (r_q dq + r_v dv +
    r_F dF), F = F(q, v, u) of the forced system (r_a, r_q, r_v by central differences, as
    :meth:`SOCS.acceleration` solves it; r_F = [0; E] exactly; F's Jacobians from the
    system's ``force_jacobians``)."""
    socs, forced = dsocs.socs, dsocs.forced_system
    q, v, a = np.broadcast_arrays(*(np.asarray(x, float) for x in (q, v, a)))
    F = None if forced is None else np.broadcast_to(forced.generalized_force(q, v, u), q.shape)

    def e(x):
        return None if x is None else x[..., None, :]

    ra = fd_jacobian(lambda x: socs.residual(e(q), e(v), x, e(F)), a)
    rq = fd_jacobian(lambda x: socs.residual(x, e(v), e(a), e(F)), q)
    rv = fd_jacobian(lambda x: socs.residual(e(q), x, e(a), e(F)), v)
    parts = [rq, rv]
    if forced is not None:
        E = np.asarray(socs.variations(q, v, a), float)  # r is affine in F: r_F = [0; E]
        m = ra.shape[-2] - E.shape[-2]
        rF = np.concatenate([np.zeros((*E.shape[:-2], m, E.shape[-1])), E], -2)
        Fq, Fv, Fu = forced.force_jacobians(q, v, u)
        parts = [rq + rF @ Fq, rv + rF @ Fv, rF @ Fu]
    rhs = np.concatenate(parts, -1)
    return -np.linalg.pinv(ra) @ rhs
