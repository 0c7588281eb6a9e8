"""Reduced GNI on Q = Rⁿ × G (paper Def. 7.1, §7.2–§7.3; paper Def. 7.1; §7.3).

The reduced Lagrangian lives on TRⁿ × 𝔤 (left trivialization ġ = gξ):
``l(x, ẋ, ξ) = ½ (ẋ, ξ)ᵀ G̃ (ẋ, ξ) − V(x)`` with a constant bundle metric ``G̃`` (blocks
xx, xs, ss), and the (affine) constraints ``K(x) (ẋ, ξ) + a(x) = 0`` with ``K = (μ, η)``
(paper: ``D̃° = span{μ^a_i dx^i + η^a_s E^s}``; ``a = −K Ỹ`` for the affine section Ỹ).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from chetaev.discrete_lagrangian import (
    Method,
    NewtonOptions,
    State,
    check_step_size,
    compare_derivative,
    newton_solve,
    register_picklable,
)
from chetaev.liegroups import retraction as make_retraction
from scipy.integrate import solve_ivp

from ._errors import ConvergenceError, InputError
from ._reflection import node_from_post_momentum, pre_post_from_node
from ._validation import (
    as_points,
    broadcast_pair,
    check_newton,
    check_on_constraint,
    check_tol,
)

__all__ = ["ReducedGNI", "ReducedSystem", "reduced_gni_residual", "reduced_rattle_37"]


def _mv(A, x):
    return np.einsum("...ij,...j->...i", A, x)


def _fd(f, x, eps=1e-6):
    """Central-difference Jacobian of ``f`` at ``x`` (last axis), ``(..., out, n)``."""
    cols = []
    for j in range(x.shape[-1]):
        dx = np.zeros_like(x)
        dx[..., j] = eps * (1.0 + abs(float(np.max(np.abs(x[..., j])))))
        cols.append((np.asarray(f(x + dx)) - np.asarray(f(x - dx))) / (2.0 * dx[..., j, None]))
    return np.stack(cols, axis=-1)


def _as_dimension(n) -> int:
    if isinstance(n, (bool, np.bool_, str, bytes)) or np.iscomplexobj(n):
        raise InputError(f"n_shape must be a non-negative integer; got {n!r}")
    try:
        val = float(n)
    except (TypeError, ValueError):
        raise InputError(f"n_shape must be a non-negative integer; got {n!r}") from None
    if not (val.is_integer() and val >= 0):
        raise InputError(f"n_shape must be a non-negative integer; got {n!r}")
    return int(val)


def _as_metric(G) -> np.ndarray:
    if np.iscomplexobj(G):
        raise InputError("metric must be a real (N, N) matrix; got a complex array")
    try:
        return np.array(G, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"metric must be a real (N, N) matrix; got {G!r}") from None


@attrs.frozen(eq=False)
class ReducedSystem:
    """Reduced nonholonomic mechanical system on TRⁿ × 𝔤 (paper §7.2–§7.3).

    Parameters
    ----------
    group : a ``chetaev.liegroups`` group (algebra dimension ``d = group.dim``)
    n_shape : int
        Dimension ``n`` of the shape space ``M = Rⁿ``.
    metric : array (N, N), N = n + d
        Constant symmetric positive definite bundle metric ``G̃``.
    constraint_matrix : array (m, N) or callable ``x -> (..., m, N)``
        ``K(x) = (μ(x), η(x))``.
    constraint_affine : callable ``x -> (..., m)``, optional
        ``a(x)`` of ``K(x) v + a(x) = 0`` (``a = −K Ỹ``); linear constraints when omitted.
    potential, potential_grad : callables of ``x``, optional (zero when omitted).
    constraint_matrix_grad, constraint_affine_grad : callables, optional
        ``∂K/∂x`` ``(..., m, N, n)`` and ``∂a/∂x`` ``(..., m, n)``, used only for the continuous
        multiplier; central differences when omitted.
    derivative_check : bool, keyword-only, default True
        Compare every supplied derivative (``potential_grad``, ``constraint_matrix_grad``,
        ``constraint_affine_grad``) with a central finite difference once, before the first
        step (:meth:`check_derivatives`); ``False`` skips it (e.g. for a non-smooth model).
    """

    group: Any
    n_shape: int = attrs.field(converter=_as_dimension)
    metric: np.ndarray = attrs.field(converter=_as_metric)
    constraint_matrix: Any = attrs.field()
    constraint_affine: Callable | None = None
    potential: Callable | None = None
    potential_grad: Callable | None = None
    constraint_matrix_grad: Callable | None = None
    constraint_affine_grad: Callable | None = None
    derivative_check: bool = attrs.field(default=True, kw_only=True)

    def __attrs_post_init__(self):
        if not hasattr(self.group, "dim") or not hasattr(self.group, "compose"):
            raise InputError(
                f"group must be a chetaev.liegroups group (e.g. SO3); got {self.group!r}"
            )
        N = self.n_shape + self.group.dim
        G = self.metric
        if not np.all(np.isfinite(G)):
            raise InputError("metric must be finite; got NaN or inf entries")
        if G.shape != (N, N):
            raise InputError(
                f"metric must be ({N}, {N}) = (n_shape + group.dim)²; got shape {G.shape}"
            )
        if not np.allclose(G, G.T) or np.any(np.linalg.eigvalsh(0.5 * (G + G.T)) <= 0):
            raise InputError("metric must be symmetric positive definite")
        self.metric.setflags(write=False)

    def check_derivatives(self, x) -> None:
        """Compare every supplied derivative with a central finite difference at ``x``.

        ``potential_grad`` against ``potential`` (when both are given),
        ``constraint_matrix_grad`` against ``constraint_matrix`` and
        ``constraint_affine_grad`` against ``constraint_affine``, at the shape point ``x``
        and two nearby points, with the derived tolerance of
        :func:`chetaev.discrete_lagrangian.compare_derivative`. Runs whatever the
        constructor's ``derivative_check`` (which only switches off the automatic check
        that :meth:`ReducedGNI.initial_state` makes once per system).

        Parameters
        ----------
        x : array_like, shape (n_shape,) or (..., n_shape)
            Shape coordinates (the first configuration of a batch is used).

        Raises
        ------
        DerivativeError
            A derivative disagrees with the finite difference: the message names the
            argument, the worst entry and both values.
        InputError
            ``x`` is not a finite point of the shape space.
        """
        n = self.n_shape
        x0 = as_points(x, name="x (shape coordinates)", n=n)
        if n == 0:  # no shape space: nothing depends on x
            return
        x0 = x0.reshape(-1, n)[0]
        own = "ReducedSystem"
        if self.potential is not None and self.potential_grad is not None:
            compare_derivative("potential_grad", self.V, self.grad_V, x0, of="potential",
                               owner=own)
        if self.constraint_matrix_grad is not None:
            compare_derivative("constraint_matrix_grad", self.K,
                               lambda y: np.asarray(self.constraint_matrix_grad(y), float),
                               x0, of="constraint_matrix", owner=own)
        if self.constraint_affine_grad is not None and self.constraint_affine is not None:
            compare_derivative("constraint_affine_grad", self.a,
                               lambda y: np.asarray(self.constraint_affine_grad(y), float),
                               x0, of="constraint_affine", owner=own)

    # ------------------------------------------------------------------ pieces
    @property
    def N(self) -> int:
        return self.n_shape + self.group.dim

    @property
    def n(self) -> int:
        return self.N

    def K(self, x):
        x = np.asarray(x, dtype=float)
        if callable(self.constraint_matrix):
            return np.asarray(self.constraint_matrix(x), dtype=float)
        K = np.asarray(self.constraint_matrix, dtype=float)
        return np.broadcast_to(K, x.shape[:-1] + K.shape)

    def a(self, x):
        """Affine term ``a(x)`` (``None`` for linear constraints)."""
        if self.constraint_affine is None:
            return None
        return np.asarray(self.constraint_affine(np.asarray(x, dtype=float)), dtype=float)

    def grad_V(self, x):
        x = np.asarray(x, dtype=float)
        if self.potential_grad is None:
            return np.zeros_like(x)
        return np.asarray(self.potential_grad(x), dtype=float)

    def V(self, x):
        x = np.asarray(x, dtype=float)
        if self.potential is None:
            return np.zeros(x.shape[:-1])
        return np.asarray(self.potential(x), dtype=float)

    def residual(self, x, v):
        """``K(x) v + a(x)``."""
        r = _mv(self.K(x), v)
        a = self.a(x)
        return r if a is None else r + a

    velocity_residual = residual

    @property
    def constraint(self):
        """The system itself: it carries ``residual`` (so ``Trajectory.constraint_residual``
        works)."""
        return self

    def energy(self, x, v):
        """``½ vᵀ G̃ v + V(x)``."""
        v = np.asarray(v, dtype=float)
        return 0.5 * np.einsum("...i,ij,...j->...", v, self.metric, v) + self.V(x)

    # ------------------------------------------------------------------ continuous model
    def _force(self, x, v):
        n = self.n_shape
        pi = _mv(self.metric, v)[..., n:]
        ad = self.group.ad(v[..., n:])
        return np.concatenate([-self.grad_V(x), np.einsum("...ji,...j->...i", ad, pi)], axis=-1)

    def multiplier(self, x, v):
        """Continuous λ of ``d/dt ∂l/∂ẋ − ∂l/∂x = μᵀλ``, ``d/dt ∂l/∂ξ − ad*_ξ ∂l/∂ξ = ηᵀλ``."""
        x = np.asarray(x, dtype=float)
        v = np.asarray(v, dtype=float)
        n = self.n_shape
        K = self.K(x)
        xdot = v[..., :n]
        if self.constraint_matrix_grad is not None:
            dK = np.asarray(self.constraint_matrix_grad(x))
        elif callable(self.constraint_matrix):
            dK = _fd(self.K, x)
        else:
            dK = np.zeros((*K.shape, n))
        rhs = np.einsum("...aik,...k,...i->...a", dK, xdot, v)
        if self.constraint_affine is not None:
            da = (np.asarray(self.constraint_affine_grad(x)) if self.constraint_affine_grad
                  is not None else _fd(self.a, x))
            rhs = rhs + _mv(da, xdot)
        GinvKT = np.linalg.solve(self.metric, np.swapaxes(K, -1, -2))
        C = K @ GinvKT
        rhs = rhs + _mv(K, np.linalg.solve(self.metric, self._force(x, v)[..., None])[..., 0])
        return -np.linalg.solve(C, rhs[..., None])[..., 0]

    def rhs(self, x, v):
        """``(ẋ, v̇)`` of the continuous reduced Lagrange–d'Alembert–Poincaré equations."""
        lam = self.multiplier(x, v)
        f = self._force(x, v) + np.einsum("...ai,...a->...i", self.K(x), lam)
        return v[..., : self.n_shape], np.linalg.solve(self.metric, f[..., None])[..., 0]

    def reference(self, x0, v0, t, rtol=1e-13, atol=1e-13):
        """``(x, v)`` at the times ``t`` from scipy DOP853 on :meth:`rhs` (unbatched)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        n = self.n_shape

        def f(_, y):
            xd, vd = self.rhs(y[:n], y[n:])
            return np.concatenate([xd, vd])

        sol = solve_ivp(f, (0.0, t[-1]), np.concatenate([x0, v0]), method="DOP853",
                        t_eval=t, rtol=rtol, atol=atol)
        return sol.y[:n].T, sol.y[n:].T


# ---------------------------------------------------------------------- discrete equations
_VERIFIED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _verify_once(system: ReducedSystem, x0: np.ndarray) -> None:
    """:meth:`ReducedSystem.check_derivatives` once per system object (cached verdict)."""
    if not system.derivative_check or _VERIFIED.get(system, False):
        return
    system.check_derivatives(x0)
    _VERIFIED[system] = True


def _as_element(g0, system):
    """``g0`` as a finite element of ``system.group`` (shape and membership checked)."""
    group = system.group
    shape = tuple(group.shape)
    if np.iscomplexobj(g0):
        raise InputError("g0 must be a real group element; got a complex array")
    try:
        g = np.asarray(g0, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"g0 must be a real array (a group element); got {g0!r}") from None
    if g.ndim < len(shape) or g.shape[g.ndim - len(shape):] != shape:
        raise InputError(f"g0 must have shape (..., {', '.join(map(str, shape))}); got {g.shape}")
    if not np.all(np.isfinite(g)) or not np.all(group.is_element(g, tol=1e-9)):
        raise InputError(
            f"g0 is not a (finite) element of {getattr(group, 'name', type(group).__name__)}; "
            "project it onto the group first"
        )
    return g


def _legendre_minus(system, tau, x0, u, h):
    """``F l_d^−`` of the §7.2 discrete Lagrangian at ``(x0, x0 + h u_x, σ = h u_s)``:
    ``(−D1 l_d, (dτ⁻¹_σ)ᵀ D3 l_d)`` (paper (29); D3 with respect to σ, the docs' theory page)."""
    n = system.n_shape
    Gu = _mv(system.metric, u)
    px = Gu[..., :n] + 0.5 * h * system.grad_V(x0)
    ps = np.einsum("...ji,...j->...i", tau.dR_inv(h * u[..., n:]), Gu[..., n:])
    return np.concatenate([px, ps], axis=-1)


def _legendre_plus(system, tau, x1, u, h):
    """``F l_d^+ = (D2 l_d, (dτ⁻¹_{−σ})ᵀ D3 l_d)`` at the end point ``x1`` (paper (29))."""
    n = system.n_shape
    Gu = _mv(system.metric, u)
    px = Gu[..., :n] - 0.5 * h * system.grad_V(x1)
    ps = np.einsum("...ji,...j->...i", tau.dL_inv(h * u[..., n:]), Gu[..., n:])
    return np.concatenate([px, ps], axis=-1)


def reduced_gni_residual(system, tau, x_prev, u_prev, x, u, h):
    """Residual of the reduced GNI (30a) and the corrected (30b)/(38b) at node ``x_k``.

    ``u_prev = ((x_k − x_{k−1})/h, ξ_{k−1})``, ``u = ((x_{k+1} − x_k)/h, ξ_k)``. Returns
    ``(P-part, Q-part)``: ``Pᵀ(F L^− − F L^+)`` and ``Qᵀ(F L^− + F L^+) − 2QᵀΠ`` written
    without ``Y``: ``K G̃⁻¹ (F L^− + F L^+)/2 + a`` (the averaged-momentum constraint).
    """
    del x_prev  # the quadratic l_d depends on x_{k−1} only through u_prev
    pm = _legendre_minus(system, tau, x, u, h)
    pp = _legendre_plus(system, tau, x, u_prev, h)
    K = system.K(x)
    Ginv = np.linalg.inv(system.metric)
    C = K @ Ginv @ np.swapaxes(K, -1, -2)
    QT = np.swapaxes(K, -1, -2) @ np.linalg.solve(C, K @ Ginv)
    P_part = _mv(np.eye(system.N) - QT, pm - pp)
    Q_part = _mv(K, _mv(Ginv, 0.5 * (pm + pp)))
    a = system.a(x)
    if a is not None:
        Q_part = Q_part + a
    return P_part, Q_part


@attrs.frozen
class ReducedGNI(Method):
    """Reduced GNI on Rⁿ × G (paper Def. 7.1; affine: (38) with the sign of 2Q*Π corrected,
    paper §7.3; the docs' theory page) with the discrete Lagrangian of §7.2,

    ``l_d(x_k, x_{k+1}, σ_k) = h l(x_k, (x_{k+1} − x_k)/h, σ_k/h)`` (kinetic part) ``− (h/2)(V(x_k)
    + V(x_{k+1}))``, ``g_k = τ(σ_k)``, ``W_{k+1} = W_k τ(σ_k)`` (Remark 7.2). With this ``l_d`` the
    method is the reduced RATTLE (37) (the ball scheme (42) when V = 0). It is symmetric
    (time-reversible) and of order 2 with a consistent start; the averaged momentum
    satisfies the constraint exactly; ``|p⁻ − Π|_{G̃⁻¹} = |p⁺ − Π|_{G̃⁻¹}``.

    Equations (reflection form of (30)/(38), paper Def. 4.1 applied to §2.7):
    ``p⁻_k = p⁺_k − 2Qᵀ(p⁺_k − Π)``; solve ``F l_d^−(x_k, x_{k+1}, σ_k) = p⁻_k`` for
    ``(x_{k+1}, σ_k)`` (Newton, analytic Jacobian from the retraction's derivative terms);
    ``p⁺_{k+1} = F l_d^+(x_k, x_{k+1}, σ_k)``.

    State: ``q = x_k`` (shape coordinates), ``v = (ẋ_k, ξ_k)`` the node velocity
    ``G̃⁻¹(p⁻_k + p⁺_k)/2`` (satisfies the constraint), ``p = G̃ v``, ``lam = λ_k`` with
    ``p⁻_k − p⁺_k = h Kᵀλ_k``; ``carry["g"]`` is the group element ``W_k`` and
    ``carry["xi"]`` the increment ``ξ_{k−1} = σ_{k−1}/h`` of the last step (the paper's ω_{k−1}).

    Parameters
    ----------
    retraction : "cayley" (the paper's choice) or "exp".
    """

    retraction: str = "cayley"
    newton: NewtonOptions = attrs.field(factory=NewtonOptions, validator=check_newton)
    constraint_tol: float = attrs.field(default=1e-10, validator=check_tol)

    def __attrs_post_init__(self):
        if self.retraction not in ("cayley", "exp"):
            raise InputError(f"retraction must be 'cayley' or 'exp'; got {self.retraction!r}")

    @property
    def order(self) -> int:
        return 2

    symmetric = True

    @property
    def name(self) -> str:
        return f"ReducedGNI({self.retraction})"

    @property
    def guarantees(self) -> dict[str, float]:
        """The constraint K(x_k) v_k + a(x_k) = 0 at every node, to the Newton tolerance (the
        post-condition ``chetaev.discrete_lagrangian.integrate`` checks)."""
        return {"position": self.newton.tol}

    def _tau(self, system):
        if not isinstance(system, ReducedSystem):
            raise InputError(
                "ReducedGNI runs on a ReducedSystem (shape space Rⁿ × group); got "
                f"{type(system).__name__}. Build one with ReducedSystem(...) or rolling_ball(...)"
            )
        return make_retraction(system.group, self.retraction)

    def initial_state(self, system, q0, v0, t0: float = 0.0, g0=None) -> State:
        """Node 0 from ``x0`` and a consistent ``v0 = (ẋ0, ξ0)``; ``λ_0`` is the continuous
        multiplier; ``g0`` defaults to the identity."""
        return super().initial_state(system, q0, v0, t0, g0=g0)

    def _initial_state_impl(self, system, q0, v0, t0: float, g0=None) -> State:
        self._tau(system)
        x0 = as_points(q0, name="q0 (shape coordinates x0)", n=system.n_shape)
        v0 = as_points(v0, name="v0 = (xdot0, xi0)", n=system.N)
        _verify_once(system, x0)
        check_on_constraint(
            system.residual(x0, v0), tol=self.constraint_tol, what="the initial data (x0, v0)",
            fix="Choose (xdot0, xi0) with K(x0) v0 + a(x0) = 0.",
        )
        x0, v0 = broadcast_pair(x0, v0, ("q0", "v0"))
        g0 = system.group.identity(x0.shape[:-1]) if g0 is None else _as_element(g0, system)
        lam0 = system.multiplier(x0, v0)
        return State(t=float(t0), q=x0, v=v0, p=_mv(system.metric, v0), lam=lam0, n=0,
                     carry={"g": g0, "xi": None}, info={})

    def state_from_points(self, system, x0, x1, xi0, h, t0: float = 0.0, g0=None) -> State:
        """The state at node 1 from the discrete start ``(x0, x1, ξ0)``, e.g. the paper's
        ``x1 = x0 + h ẋ0``, ``ω_0 = ω(0)`` (paper §7.4, Exp. 2), or a consistent ``x1 = x(h)``,
        ``ω_0 = ω(h/2)``."""
        tau = self._tau(system)
        h = check_step_size(h)
        x0 = as_points(x0, name="x0", n=system.n_shape)
        x1 = as_points(x1, name="x1", n=system.n_shape)
        xi0 = as_points(xi0, name="xi0", n=system.group.dim)
        _verify_once(system, x0)
        u = np.concatenate([(x1 - x0) / h, xi0], axis=-1)
        p_plus = _legendre_plus(system, tau, x1, u, h)
        v1, lam1, p_bar = node_from_post_momentum(p_plus, system.metric, system.K(x1), h,
                                                  system.a(x1))
        g0 = system.group.identity(x0.shape[:-1]) if g0 is None else _as_element(g0, system)
        g1 = system.group.compose(g0, tau(h * xi0), check=False)
        return State(t=float(t0) + h, q=x1, v=v1, p=p_bar, lam=lam1, n=1,
                     carry={"g": g1, "xi": xi0}, info={})

    def _step_impl(self, system, state: State, h) -> State:
        tau = self._tau(system)
        n, N = system.n_shape, system.N
        G = system.metric
        x = state.q
        K = system.K(x)
        p_minus, _ = pre_post_from_node(state.v, state.lam, G, K, h)
        eye = np.eye(system.group.dim)

        gv_x = 0.5 * h * system.grad_V(x)
        cache: dict = {}

        def _D(u):
            # dτ⁻¹ at σ = h u_s, shared by the residual and the Jacobian at the same iterate
            key = u.tobytes()
            if cache.get("key") != key:
                cache["key"], cache["D"] = key, tau.dR_inv(h * u[..., n:])
            return cache["D"]

        def fun(u):
            Gu = _mv(G, u)
            px = Gu[..., :n] + gv_x
            ps = np.einsum("...ji,...j->...i", _D(u), Gu[..., n:])
            return np.concatenate([px, ps], axis=-1) - p_minus

        def jac(u):
            w = _mv(G, u)[..., n:]
            J = np.empty((*u.shape, N))
            J[..., :n, :] = G[:n, :]
            J[..., n:, :] = np.einsum("...ji,...jk->...ik", _D(u), G[n:, :])
            # d/dσ of (dR_inv(σ)ᵀ w)_j = grad_σ <w, dR_inv(σ) e_j>
            rows = tau.dR_inv_deriv(h * u[..., None, n:], eye, w[..., None, :])
            J[..., n:, n:] += h * rows
            return J

        # Warm start: one fixed-point sweep with the previous increment's dτ⁻¹ (O(h²) close).
        xi_prev = state.carry.get("xi")
        sig_guess = h * (state.v[..., n:] if xi_prev is None else xi_prev)
        rhs = p_minus.copy()
        rhs[..., :n] -= 0.5 * h * system.grad_V(x)
        rhs[..., n:] = np.linalg.solve(
            np.swapaxes(tau.dR_inv(sig_guess), -1, -2), rhs[..., n:, None]
        )[..., 0]
        u0 = np.linalg.solve(G, rhs[..., None])[..., 0]
        # Chord Newton: the Jacobian at the O(h²)-accurate warm start, kept for the step.
        J0 = jac(u0)

        def jac0(u):
            return J0

        res = newton_solve(fun, u0, jac=jac0, options=self.newton,
                           scale=1.0 + np.max(np.abs(p_minus), axis=-1))
        if not np.all(res.converged):
            raise ConvergenceError(
                step=state.n, t=state.t, residual=float(np.max(res.residual)),
                tol=self.newton.tol, iterations=int(res.iterations),
                hint="halve h, or increase NewtonOptions(max_iter=...)",
            )
        # One more correction takes the solve from the tolerance to round-off (the chord
        # iteration contracts at rate O(h²)), which keeps the exact invariants at round-off.
        u = res.x - np.linalg.solve(J0, fun(res.x)[..., None])[..., 0]
        x1 = x + h * u[..., :n]
        sigma = h * u[..., n:]
        p_plus = _legendre_plus(system, tau, x1, u, h)
        v1, lam1, p_bar = node_from_post_momentum(p_plus, G, system.K(x1), h, system.a(x1))
        g = state.carry.get("g")
        g1 = None if g is None else system.group.compose(g, tau(sigma), check=False)
        info = {"newton_iterations": int(res.iterations), "residual": float(np.max(res.residual))}
        return State(t=state.t + h, q=x1, v=v1, p=p_bar, lam=lam1, n=state.n + 1,
                     carry={"g": g1, "xi": u[..., n:]}, info=info)


def reduced_rattle_37(system, tau, x, p_tilde, xi, M_tilde, lam_tilde, h, *, newton=None):
    """One step of the reduced RATTLE algorithm (37), written as in the paper (paper §7.2).

    State ``(x_k, p̃_k, ξ_k, M̃_k, λ̃_k)`` in the paper's multiplier sign
    (``λ̃ = −λ``/chetaev convention): ``p̃_k`` is the x-part of the averaged momentum,
    ``M̃_k = (dτ⁻¹_{hξ_k})ᵀ D3 l_d`` the g*-part of the pre-momentum.

    * (37a) ``p_{k+1/2} = p̃_k − (h/2)(V_x(x_k) + μᵀλ̃_k)``;
    * (37c) ``x_{k+1} = x_k + h G_xx⁻¹ (p_{k+1/2} − G_xs ξ_k)`` (inverse of the xx block);
    * (37d)–(37f) are linear in ``(p̃_{k+1}, M̃_{k+1}, λ̃_{k+1})``:
      ``(h/2) K G̃⁻¹ Kᵀ λ̃_{k+1} = K G̃⁻¹ (p_{k+1/2} − (h/2)V_x(x_{k+1}), Ad*_{τ(hξ_k)} M̃_k) + a``;
    * ``ξ_{k+1}`` from ``M̃_{k+1} = (dτ⁻¹_{hξ})ᵀ (G_sx (x_{k+2}(ξ) − x_{k+1})/h + G_ss ξ)`` by
      Newton (finite-difference Jacobian: this is a cross-check, not the production path).

    The affine term ``a`` (when the system has one) is the reduced affine extension (38).
    Returns the next ``(x, p_tilde, xi, M_tilde, lam_tilde)``.
    """
    newton = NewtonOptions() if newton is None else newton
    n = system.n_shape
    G = system.metric
    Gxx, Gxs, Gsx, Gss = G[:n, :n], G[:n, n:], G[n:, :n], G[n:, n:]
    K = system.K(x)
    mu = K[..., :n]
    p_half = p_tilde - 0.5 * h * (system.grad_V(x) + np.einsum("...ai,...a->...i", mu, lam_tilde))
    x1 = x + h * np.linalg.solve(Gxx, (p_half - _mv(Gxs, xi))[..., None])[..., 0]
    K1 = system.K(x1)
    mu1, eta1 = K1[..., :n], K1[..., n:]
    # Ad*_{τ(hξ_k)} M̃_k = Ad_{τ(hξ_k)}ᵀ M̃_k (Lemma 9.5: the post-momentum at x_{k+1})
    post_M = _mv(system.group.Ad_star(tau(h * xi), check=False), M_tilde)
    b = np.concatenate([p_half - 0.5 * h * system.grad_V(x1), post_M], axis=-1)
    Ginv = np.linalg.inv(G)
    KGinv = K1 @ Ginv
    rhs = _mv(KGinv, b)
    a1 = system.a(x1)
    if a1 is not None:
        rhs = rhs + a1
    lam1 = np.linalg.solve(0.5 * h * KGinv @ np.swapaxes(K1, -1, -2), rhs[..., None])[..., 0]
    p_tilde1 = b[..., :n] - 0.5 * h * np.einsum("...ai,...a->...i", mu1, lam1)      # (37e)
    M1 = post_M - h * np.einsum("...ai,...a->...i", eta1, lam1)                      # (37f)
    p_next = p_tilde1 - 0.5 * h * (system.grad_V(x1) + np.einsum("...ai,...a->...i", mu1, lam1))

    def fun(z):
        x2 = x1 + h * np.linalg.solve(Gxx, (p_next - _mv(Gxs, z))[..., None])[..., 0]
        D3 = _mv(Gsx, (x2 - x1) / h) + _mv(Gss, z)
        return np.einsum("...ji,...j->...i", tau.dR_inv(h * z), D3) - M1

    res = newton_solve(fun, np.array(xi, dtype=float), options=newton,
                       scale=1.0 + np.max(np.abs(M1), axis=-1))
    if not np.all(res.converged):
        raise ConvergenceError(step=0, t=0.0, residual=float(np.max(res.residual)),
                               tol=newton.tol, iterations=int(res.iterations),
                               hint="halve h")
    return x1, p_tilde1, res.x, M1, lam1


register_picklable(ReducedSystem)  # pickling one built from lambdas raises UnpicklableError
