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
from chetaev.discrete_lagrangian.extending import BackendError, fd_jacobian, resolve_backend
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


def _fd(f, x, out_ndim=1):
    """Central-difference Jacobian ``(..., *out, n)`` of ``f`` in the last axis of ``x``:
    the package-wide :func:`~chetaev.discrete_lagrangian.extending.fd_jacobian` (per-entry
    steps ``ε^{1/3} max(1, |x_k|)``, all ``2n`` evaluations in one broadcast call, so a
    batched evaluation gives the numbers of a single one)."""
    x = np.asarray(x, dtype=float)
    return fd_jacobian(f, x, x.shape[-1], out_ndim=out_ndim, scale=x)


def _count(name: str) -> Callable[[Any], int]:
    """Converter of a non-negative integer argument ``name`` (``n_shape``, ``n_controls``)."""

    def convert(n) -> int:
        if isinstance(n, (bool, np.bool_, str, bytes)) or np.iscomplexobj(n):
            raise InputError(f"{name} must be a non-negative integer; got {n!r}")
        try:
            val = float(n)
        except (TypeError, ValueError):
            raise InputError(f"{name} must be a non-negative integer; got {n!r}") from None
        if not (val.is_integer() and val >= 0):
            raise InputError(f"{name} must be a non-negative integer; got {n!r}")
        return int(val)

    return convert


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
        ``constraint_affine_grad``, ``potential_hessian``, ``force_derivatives``) with a
        central finite difference once, before the first step (:meth:`check_derivatives`);
        ``False`` skips it (e.g. for a non-smooth model).
    potential_hessian : callable ``x -> (..., n, n)``, keyword-only, optional
        ``∂²V/∂x²``, used only by :meth:`ReducedGNI.step_linearization` (central
        differences of ``potential_grad`` when omitted).
    force : callable ``force(x, v, u) -> (..., N)``, keyword-only, optional
        External force on the reduced system (issue 20), the same convention as
        ``chetaev.discrete_lagrangian.MechanicalSystem(force=)`` with ``q = x`` the shape
        coordinates and ``v = (ẋ, ξ)``: a covector ``(F_x, F_ξ)``, ``F_x`` the generalized
        force on the shape space and ``F_ξ ∈ 𝔤*`` the left-trivialized force (torque in the
        body frame) on the group, ``F_ξ·η = F_g·(g η)``. It depends on the group element
        only through the reduced variables (a G-invariant force, as the Lagrangian and the
        constraints are: otherwise the system does not reduce to TRⁿ × 𝔤). It enters the
        reduced Lagrange–d'Alembert–Poincaré equations (paper §7.2 with the
        Lagrange–d'Alembert force term; Marsden & West 2001 §3.2)
        ``d/dt ∂l/∂ẋ − ∂l/∂x = F_x + μᵀλ``, ``d/dt ∂l/∂ξ − ad*_ξ ∂l/∂ξ = F_ξ + ηᵀλ``.
        ``u`` is the control ``(..., n_controls)`` (an empty ``(..., 0)`` array when
        ``n_controls=0``), held constant over a step. :class:`ReducedGNI` takes it as the
        trapezoidal discrete force (its class docstring).
    force_derivatives : callable, keyword-only, optional
        ``(x, v, u) -> (F_x, F_v, F_u)`` of shapes ``(..., N, n)``, ``(..., N, N)``,
        ``(..., N, n_controls)`` (exact Jacobians for the Newton matrix and the step
        linearization); central differences of ``force`` when omitted
        (:meth:`force_jacobians`).
    n_controls : int, keyword-only
        Number of control inputs (default 0; needs ``force``).
    compiled_kernels : str, keyword-only, optional
        The compiled backend's kernels (issue 17) of the parts given as Python callables:
        source text that numba compiles (scalar code, the ``math`` module), defining for
        each callable among ``potential_grad``, ``constraint_matrix`` and
        ``constraint_affine`` a function of the same name ``NAME(x, out)`` that writes the
        value at one shape point ``x`` ``(n,)`` into ``out`` (``(n,)``, ``(m, N)``,
        ``(m,)``). Parts given as data need none (a constant ``constraint_matrix``, no
        potential, linear constraints), so such a system has kernels without it; with the
        kernels of every callable part :class:`ReducedGNI` runs compiled (its
        ``backend``). Each kernel is checked against its callable when the system is
        built (run as plain Python at a generic point; ``InputError`` when it fails or
        disagrees). See :func:`rolling_ball`.
    """

    group: Any
    n_shape: int = attrs.field(converter=_count("n_shape"))
    metric: np.ndarray = attrs.field(converter=_as_metric)
    constraint_matrix: Any = attrs.field()
    constraint_affine: Callable | None = None
    potential: Callable | None = None
    potential_grad: Callable | None = None
    constraint_matrix_grad: Callable | None = None
    constraint_affine_grad: Callable | None = None
    derivative_check: bool = attrs.field(default=True, kw_only=True)
    potential_hessian: Callable | None = attrs.field(default=None, kw_only=True)
    force: Callable | None = attrs.field(default=None, kw_only=True)
    force_derivatives: Callable | None = attrs.field(default=None, kw_only=True)
    n_controls: int = attrs.field(default=0, kw_only=True, converter=_count("n_controls"))
    compiled_kernels: str | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self):
        if self.compiled_kernels is not None and not isinstance(self.compiled_kernels, str):
            raise InputError("compiled_kernels must be None or a str (numba-compilable "
                             f"source); got {type(self.compiled_kernels).__name__}")
        for name in ("potential_hessian", "force", "force_derivatives"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise InputError(f"{name} must be None or a callable; got {getattr(self, name)!r}")
        if self.force is None and (self.force_derivatives is not None or self.n_controls):
            raise InputError(
                "force_derivatives and n_controls need a force: pass "
                "ReducedSystem(..., force=callable(x, v, u))"
            )
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
        if self.compiled_kernels is not None:
            from ._compiled_reduced import check_kernels

            check_kernels(self)

    def check_derivatives(self, x) -> None:
        """Compare every supplied derivative with a central finite difference at ``x``.

        ``potential_grad`` against ``potential`` (when both are given),
        ``constraint_matrix_grad`` against ``constraint_matrix``,
        ``constraint_affine_grad`` against ``constraint_affine``, ``potential_hessian``
        against ``potential_grad`` and ``force_derivatives`` against ``force`` (in
        ``(x, v, u)``, at a fixed generic ``v`` and ``u``), at the shape point ``x``
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
        if self.potential_hessian is not None and self.potential_grad is not None:
            compare_derivative("potential_hessian", self.grad_V, self.hess_V, x0,
                               of="potential_grad", owner=own)
        if self.force_derivatives is not None:
            # (F_x, F_v, F_u) together in z = (x, v, u), at a generic velocity and control
            N, m = self.N, self.n_controls
            z0 = np.concatenate([x0, np.linspace(0.3, 0.7, N), np.full(m, 0.2)])

            def F(z):
                return self.generalized_force(z[..., :n], z[..., n:n + N], z[..., n + N:])

            def dF(z):
                return np.concatenate(self.force_jacobians(
                    z[..., :n], z[..., n:n + N], z[..., n + N:]), axis=-1)

            compare_derivative("force_derivatives", F, dF, z0, of="force", wrt="(x, v, u)",
                               owner=own)

    # ------------------------------------------------------------------ pieces
    @property
    def N(self) -> int:
        return self.n_shape + self.group.dim

    #: Trailing axes of one configuration of the state (``q = x`` on the shape space Rⁿ,
    #: although the system carries a ``group``): the batch rule of controls.
    configuration_ndim = 1

    def hess_V(self, x):
        """``∂²V/∂x²`` ``(..., n, n)``: ``potential_hessian``, else central differences of
        ``potential_grad`` (zero without a potential)."""
        x = np.asarray(x, dtype=float)
        n = self.n_shape
        if self.potential_hessian is not None:
            return np.broadcast_to(np.asarray(self.potential_hessian(x), dtype=float),
                                   (*x.shape[:-1], n, n))
        if self.potential_grad is None:
            return np.zeros((*x.shape[:-1], n, n))
        return _fd(self.grad_V, x)

    def dK(self, x):
        """``∂K/∂x`` ``(..., m, N, n)``: ``constraint_matrix_grad``, else central differences
        (zero for a constant matrix)."""
        x = np.asarray(x, dtype=float)
        if self.constraint_matrix_grad is not None:
            return np.asarray(self.constraint_matrix_grad(x), dtype=float)
        if callable(self.constraint_matrix):
            return _fd(self.K, x, out_ndim=2)
        return np.zeros((*self.K(x).shape, self.n_shape))

    def da(self, x):
        """``∂a/∂x`` ``(..., m, n)`` (None for linear constraints)."""
        if self.constraint_affine is None:
            return None
        x = np.asarray(x, dtype=float)
        if self.constraint_affine_grad is not None:
            return np.asarray(self.constraint_affine_grad(x), dtype=float)
        return _fd(self.a, x)

    # ------------------------------------------------------------------ forces (issue 20)
    @property
    def has_force(self) -> bool:
        """True when the system carries an external force ``force(x, v, u)``."""
        return self.force is not None

    def _control(self, u):
        """``u`` as a float array ``(..., n_controls)`` (``(0,)`` when None without
        controls)."""
        m = self.n_controls
        if u is None and not m:
            return np.zeros((0,))
        u = None if u is None else np.asarray(u, dtype=float)
        if u is None or u.ndim == 0 or u.shape[-1] != m:
            raise InputError(f"the control u must have shape (..., {m}) (n_controls={m}); got "
                             f"{'None' if u is None else u.shape}")
        return u

    def generalized_force(self, x, v, u=None):
        """The external force ``(F_x, F_ξ)(x, v, u)`` ``(..., N)`` (zero without ``force=``)."""
        x = np.asarray(x, dtype=float)
        v = np.asarray(v, dtype=float)
        u = self._control(u)
        batch = np.broadcast_shapes(x.shape[:-1], v.shape[:-1], u.shape[:-1])
        if self.force is None:
            return np.zeros((*batch, self.N))
        F = np.asarray(self.force(x, v, u), dtype=float)
        try:
            return np.broadcast_to(F, (*batch, self.N))
        except ValueError:
            raise InputError(
                f"force must return shape (..., {self.N}) = (..., n_shape + group.dim) "
                f"broadcasting with the batch {batch}; it returned {F.shape}"
            ) from None

    def force_jacobians(self, x, v, u=None):
        """``(F_x, F_v, F_u)``: ``[..., i, j] = ∂F_i/∂x_j, ∂F_i/∂v_j, ∂F_i/∂u_j``.

        Shapes ``(..., N, n)``, ``(..., N, N)``, ``(..., N, n_controls)``. From
        ``force_derivatives`` when given (exact); otherwise central differences of
        ``force`` (~1e-10 relative, the scheme of the other finite-difference derivatives of
        this module, as ``chetaev.discrete_lagrangian.MechanicalSystem.force_jacobians``
        does).
        """
        x = np.asarray(x, dtype=float)
        v = np.asarray(v, dtype=float)
        u = self._control(u)
        n, N, m = self.n_shape, self.N, self.n_controls
        batch = np.broadcast_shapes(x.shape[:-1], v.shape[:-1], u.shape[:-1])
        shapes = ((*batch, N, n), (*batch, N, N), (*batch, N, m))
        if self.force is None:
            return tuple(np.zeros(sh) for sh in shapes)
        if self.force_derivatives is not None:
            out = self.force_derivatives(x, v, u)
            if not isinstance(out, (tuple, list)) or len(out) != 3:
                raise InputError("force_derivatives must return the tuple (F_x, F_v, F_u)")
            res = []
            for name, blk, sh in zip(("F_x", "F_v", "F_u"), out, shapes):
                try:
                    res.append(np.broadcast_to(np.asarray(blk, dtype=float), sh))
                except ValueError:
                    raise InputError(
                        f"force_derivatives must return {name} of shape (..., {sh[-2]}, "
                        f"{sh[-1]}); got {np.shape(blk)}"
                    ) from None
            return tuple(res)
        xb, vb = np.broadcast_to(x, (*batch, n)), np.broadcast_to(v, (*batch, N))
        ub = np.broadcast_to(u, (*batch, m))
        Fx = _fd(lambda y: self.generalized_force(y, vb, ub), xb) if n else np.zeros(shapes[0])
        Fv = _fd(lambda w: self.generalized_force(xb, w, ub), vb)
        Fu = _fd(lambda c: self.generalized_force(xb, vb, c), ub) if m else np.zeros(shapes[2])
        return Fx, Fv, Fu

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
    def _force(self, x, v, u=None):
        """``(−∇V, ad*_ξ ∂l/∂ξ) + F(x, v, u)``; the external force is left out when the
        system needs a control and ``u`` is None (the unforced multiplier of ``initial_state``
        without ``u``, as for the GNI)."""
        n = self.n_shape
        pi = _mv(self.metric, v)[..., n:]
        ad = self.group.ad(v[..., n:])
        out = np.concatenate([-self.grad_V(x), np.einsum("...ji,...j->...i", ad, pi)], axis=-1)
        if self.force is not None and (u is not None or not self.n_controls):
            out = out + self.generalized_force(x, v, u)
        return out

    def multiplier(self, x, v, u=None):
        """Continuous λ of ``d/dt ∂l/∂ẋ − ∂l/∂x = F_x + μᵀλ``,
        ``d/dt ∂l/∂ξ − ad*_ξ ∂l/∂ξ = F_ξ + ηᵀλ`` (the force at the control ``u``)."""
        x = np.asarray(x, dtype=float)
        v = np.asarray(v, dtype=float)
        n = self.n_shape
        K = self.K(x)
        xdot = v[..., :n]
        rhs = np.einsum("...aik,...k,...i->...a", self.dK(x), xdot, v)
        if self.constraint_affine is not None:
            rhs = rhs + _mv(self.da(x), xdot)
        GinvKT = np.linalg.solve(self.metric, np.swapaxes(K, -1, -2))
        C = K @ GinvKT
        rhs = rhs + _mv(K, np.linalg.solve(self.metric, self._force(x, v, u)[..., None])[..., 0])
        return -np.linalg.solve(C, rhs[..., None])[..., 0]

    def rhs(self, x, v, u=None):
        """``(ẋ, v̇)`` of the continuous reduced Lagrange–d'Alembert–Poincaré equations (with
        the external force at the control ``u``)."""
        lam = self.multiplier(x, v, u)
        f = self._force(x, v, u) + np.einsum("...ai,...a->...i", self.K(x), lam)
        return v[..., : self.n_shape], np.linalg.solve(self.metric, f[..., None])[..., 0]

    def reference(self, x0, v0, t, rtol=1e-13, atol=1e-13, u=None):
        """``(x, v)`` at the times ``t`` from scipy DOP853 on :meth:`rhs` (unbatched); ``u``
        the control, constant or a callable of the time."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        n = self.n_shape

        def f(time, y):
            xd, vd = self.rhs(y[:n], y[n:], u(time) if callable(u) else u)
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


def _legendre_jacobian(system, tau, w, h, side):
    """``∂F l_d^∓/∂w`` ``(..., N, N)`` of :func:`_legendre_minus` (``side="minus"``) or
    :func:`_legendre_plus` (``"plus"``) in the velocity unknown ``w = ((x_{k+1} − x_k)/h, ξ_k)``
    at fixed end points (the potential terms depend on the end points only): the metric and,
    in the 𝔤* rows, ``(dτ⁻¹)ᵀ G̃_s· + h ∂_σ[(dτ⁻¹_σ)ᵀ (G̃w)_s]`` from the retraction's
    derivative terms (``dR_inv``/``dR_inv_deriv`` for F l_d^−, ``dL_inv``/``dL_inv_deriv`` for
    F l_d^+)."""
    n, N = system.n_shape, system.N
    G = system.metric
    sig = h * w[..., n:]
    D, dD = (tau.dR_inv, tau.dR_inv_deriv) if side == "minus" else (tau.dL_inv, tau.dL_inv_deriv)
    J = np.empty((*w.shape, N))
    J[..., :n, :] = G[:n, :]
    J[..., n:, :] = np.einsum("...ji,...jk->...ik", D(sig), G[n:, :])
    # d/dσ of (dτ⁻¹(σ)ᵀ g)_j = grad_σ <g, dτ⁻¹(σ) e_j>, g = (G̃w)_s
    J[..., n:, n:] += h * dD(sig[..., None, :], np.eye(system.group.dim),
                             _mv(G, w)[..., None, n:])
    return J


def _reduced_tangent_basis(system, x, v):
    """Orthonormal basis ``(..., n + N, n + N − m)`` of the tangent space at ``(x, v)`` of the
    constraint set {K(x) v + a(x) = 0} ⊂ Rⁿ × R^N: the kernel of ``[∂(Kv + a)/∂x, K]`` (last
    right singular vectors)."""
    K = system.K(x)
    dq = np.einsum("...aij,...i->...aj", system.dK(x), v)
    da = system.da(x)
    if da is not None:
        dq = dq + da
    batch = np.broadcast_shapes(dq.shape[:-2], K.shape[:-2])
    Cmat = np.concatenate([np.broadcast_to(dq, (*batch, *dq.shape[-2:])),
                           np.broadcast_to(K, (*batch, *K.shape[-2:]))], axis=-1)
    _, _, Vt = np.linalg.svd(Cmat, full_matrices=True)
    return np.swapaxes(Vt[..., K.shape[-2]:, :], -1, -2)


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

    **External forces** (issue 20). For a system built with ``ReducedSystem(force=...)`` (the
    force ``F = (F_x, F_ξ)`` of the reduced Lagrange–d'Alembert–Poincaré equations, see
    :class:`ReducedSystem`; control ``u`` held over the step) the step is the reduced GNI of
    the forced discrete equations: the discrete Lagrange–d'Alembert principle
    ``δΣ l_d + Σ (f_d⁻·(δx_k, η_k) + f_d⁺·(δx_{k+1}, η_{k+1})) = 0`` (Marsden & West 2001 §3.2;
    variations left-trivialized, ``η = g⁻¹δg``) with the trapezoidal discrete forces of the
    §7.2 quadrature, ``f_d⁻ = (h/2) F(x_k, w_k, u)``, ``f_d⁺ = (h/2) F(x_{k+1}, w_k, u)``,
    ``w_k = ((x_{k+1} − x_k)/h, ξ_k)`` (the endpoint rule of the GNI's RATTLE variant). They
    enter the discrete Legendre transforms, ``F l_d^−(x_k, x_{k+1}, σ_k) − f_d⁻ = p⁻_k`` and
    ``p⁺_{k+1} = F l_d^+ + f_d⁺``; the reflection (30b)/(38b) is unchanged. The order 2 is
    kept; ``info["work"] = (f_d⁻ + f_d⁺)·w_k`` is the discrete work of the step, and
    ``λ_0`` the multiplier of the forced continuous equations at ``u``.

    **Step linearization** (issue 20): :meth:`step_linearization` in the complete state
    ``(q, g, v, lam) = (x_k, W_k, (ẋ_k, ξ_k), λ_k)`` (the step reads the carried λ_k),
    ``W_k`` perturbed as ``W_k τ(ε)`` with the method's retraction
    (``coordinates == "(q, g, v, lam)"``; the reduced ``(q, v, lam)`` is a sub-block, and a
    state without a group element is linearized in ``"(q, v, lam)"``, as
    :class:`~chetaev.gni.GNI`), see :meth:`_step_linearization_impl`.

    **Compiled backend** (issue 17): ``ReducedGNI(..., backend="auto"|"numba"|"numpy")``.
    The step above (the reflection form of (30)/(38) with the discrete Legendre transforms
    (29) and the reconstruction of Remark 7.2) runs compiled (numba,
    :mod:`._compiled_reduced`: the same equations, unknowns, warm start, chord Newton
    iteration and stopping rule, so both paths agree to round-off) on a system whose
    callable parts have kernels (:class:`ReducedSystem` ``compiled_kernels``;
    :func:`rolling_ball` has them), without an external force, on a group whose
    retraction ``chetaev.liegroups`` compiles (SO(3), SE(2), SE(3) with ``"cayley"`` and
    ``"exp"``; see ``chetaev.liegroups.compiled_support``). ``"auto"`` (default) does so
    when numba is installed (``sol.stats["backend"]`` says which ran; batched input loops
    the members in parallel); otherwise the numpy path runs, and ``"numba"`` raises ``BackendError``
    saying why (for missing kernels: how to give them).

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
    supports_forces = True
    #: A compiled (numba) step (issue 17; :mod:`._compiled_reduced`).
    compiled_backend = True

    def _backend_interface(self, system):
        """What ``resolve_backend`` reads of ``system`` (a :class:`ReducedSystem` is outside
        the system interface): an object whose ``kernels`` are the system's compiled kernels
        or None; raises ``BackendError`` for ``backend="numba"`` without them."""
        from types import SimpleNamespace

        from ._compiled_reduced import reduced_kernels

        self._tau(system)
        missing, kernels = reduced_kernels(system)
        if kernels is None and self.backend == "numba":
            raise BackendError(
                f"backend='numba': this ReducedSystem has no compiled kernels for {missing} "
                "(plain Python callables). Pass ReducedSystem(..., compiled_kernels=source) "
                "with numba-compilable functions of the same names, NAME(x, out) (see "
                "ReducedSystem; rolling_ball has them), or use backend='numpy' / 'auto'."
            )
        return SimpleNamespace(kernels=kernels)

    def _compiled_plan(self, system, iface):
        """``(why_not, plan)`` of the compiled backend (issue 17; :mod:`._compiled_reduced`)."""
        from ._compiled_reduced import reduced_plan

        return reduced_plan(self, system, iface.kernels)

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

    def initial_state(self, system, q0, v0, t0: float = 0.0, g0=None, *, u=None) -> State:
        """Node 0 from ``x0`` and a consistent ``v0 = (ẋ0, ξ0)``; ``λ_0`` is the continuous
        multiplier (of the forced equations at the control ``u`` for a forced system);
        ``g0`` defaults to the identity."""
        return super().initial_state(system, q0, v0, t0, g0=g0, u=u)

    def _initial_state_impl(self, system, q0, v0, t0: float, g0=None, u=None) -> State:
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
        lam0 = system.multiplier(x0, v0, u)
        return State(t=float(t0), q=x0, v=v0, p=_mv(system.metric, v0), lam=lam0, n=0,
                     carry={"g": g0, "xi": None}, info={})

    def state_from_points(self, system, x0, x1, xi0, h, t0: float = 0.0, g0=None,
                          u=None) -> State:
        """The state at node 1 from the discrete start ``(x0, x1, ξ0)``, e.g. the paper's
        ``x1 = x0 + h ẋ0``, ``ω_0 = ω(0)`` (paper §7.4, Exp. 2), or a consistent ``x1 = x(h)``,
        ``ω_0 = ω(h/2)``; for a forced system ``p⁺_1`` includes the right discrete force
        ``f_d⁺`` of the first step with the control ``u`` (class docstring)."""
        tau = self._tau(system)
        h = check_step_size(h)
        x0 = as_points(x0, name="x0", n=system.n_shape)
        x1 = as_points(x1, name="x1", n=system.n_shape)
        xi0 = as_points(xi0, name="xi0", n=system.group.dim)
        _verify_once(system, x0)
        w = np.concatenate([(x1 - x0) / h, xi0], axis=-1)
        p_plus = _legendre_plus(system, tau, x1, w, h)
        if system.has_force:
            p_plus = p_plus + 0.5 * h * system.generalized_force(x1, w, u)
        v1, lam1, p_bar = node_from_post_momentum(p_plus, system.metric, system.K(x1), h,
                                                  system.a(x1))
        g0 = system.group.identity(x0.shape[:-1]) if g0 is None else _as_element(g0, system)
        g1 = system.group.compose(g0, tau(h * xi0), check=False)
        return State(t=float(t0) + h, q=x1, v=v1, p=p_bar, lam=lam1, n=1,
                     carry={"g": g1, "xi": xi0}, info={})

    def _step_impl(self, system, state: State, h, u=None) -> State:
        """One step (class docstring); ``u`` the control of a forced system."""
        tau = self._tau(system)
        forced = system.has_force
        if not forced:
            plan = resolve_backend(self, system)
            if plan is not None:  # the compiled step (issue 17)
                return plan.step(state, h)
        n = system.n_shape
        G = system.metric
        x = state.q
        K = system.K(x)
        p_minus, _ = pre_post_from_node(state.v, state.lam, G, K, h)

        gv_x = 0.5 * h * system.grad_V(x)
        cache: dict = {}

        def _D(u):
            # dτ⁻¹ at σ = h u_s, shared by the residual and the Jacobian at the same iterate
            key = u.tobytes()
            if cache.get("key") != key:
                cache["key"], cache["D"] = key, tau.dR_inv(h * u[..., n:])
            return cache["D"]

        def fun(w):
            Gu = _mv(G, w)
            px = Gu[..., :n] + gv_x
            ps = np.einsum("...ji,...j->...i", _D(w), Gu[..., n:])
            out = np.concatenate([px, ps], axis=-1) - p_minus
            if forced:  # F l_d^− − f_d⁻ = p⁻ (class docstring)
                out = out - 0.5 * h * system.generalized_force(x, w, u)
            return out

        def jac(w):
            J = _legendre_jacobian(system, tau, w, h, "minus")
            if forced:
                J = J - 0.5 * h * system.force_jacobians(x, w, u)[1]
            return J

        # Warm start: one fixed-point sweep with the previous increment's dτ⁻¹ (O(h²) close).
        xi_prev = state.carry.get("xi")
        sig_guess = h * (state.v[..., n:] if xi_prev is None else xi_prev)
        rhs = p_minus.copy()
        rhs[..., :n] -= 0.5 * h * system.grad_V(x)
        if forced:
            rhs = rhs + 0.5 * h * system.generalized_force(x, state.v, u)
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
        w = res.x - np.linalg.solve(J0, fun(res.x)[..., None])[..., 0]
        x1 = x + h * w[..., :n]
        sigma = h * w[..., n:]
        p_plus = _legendre_plus(system, tau, x1, w, h)
        if forced:  # p⁺ = F l_d^+ + f_d⁺
            f_minus = 0.5 * h * system.generalized_force(x, w, u)
            f_plus = 0.5 * h * system.generalized_force(x1, w, u)
            p_plus = p_plus + f_plus
        v1, lam1, p_bar = node_from_post_momentum(p_plus, G, system.K(x1), h, system.a(x1))
        g = state.carry.get("g")
        g1 = None if g is None else system.group.compose(g, tau(sigma), check=False)
        info = {"newton_iterations": int(res.iterations), "residual": float(np.max(res.residual))}
        if forced:
            info["work"] = np.einsum("...i,...i->...", f_minus + f_plus, w)
        return State(t=state.t + h, q=x1, v=v1, p=p_bar, lam=lam1, n=state.n + 1,
                     carry={"g": g1, "xi": w[..., n:]}, info=info)

    def _step_linearization_impl(self, system, state: State, h, u, new: State):
        """``(A, B)`` of the step in the complete state
        ``(q, g, v, lam) = (x_k, W_k, (ẋ_k, ξ_k), λ_k)``, the group element in the tangent
        chart of the method's retraction, and in tangent bases of the constraint set
        (issue 20).

        The step (class docstring; paper Def. 7.1, (30)/(38)) maps the node
        ``(x_k, W_k, v_k, λ_k)``, ``v = (ẋ, ξ)``, to ``(x_{k+1}, W_{k+1}, v_{k+1}, λ_{k+1})``:
        ``p⁻ = G̃ v_k + (h/2) K(x_k)ᵀ λ_k``; ``R(w) = F l_d^−(x_k, w) − f_d⁻(x_k, w, u) − p⁻ = 0``
        for ``w = ((x_{k+1} − x_k)/h, ξ_k)`` (the step's Newton unknown);
        ``x_{k+1} = x_k + h w_x``; ``p⁺ = F l_d^+(x_{k+1}, w) + f_d⁺(x_{k+1}, w, u)`` and
        ``v_{k+1}`` from the node's KKT system ``[[G̃, Kᵀ], [K, 0]] (v_{k+1}, c) = (p⁺, −a)``
        at ``x_{k+1}`` (``c = −(h/2) λ_{k+1}``, :func:`node_from_post_momentum`); the group
        element is reconstructed as ``W_{k+1} = W_k τ(σ_k)``, ``σ_k = h w_ξ`` (Remark 7.2,
        τ the method's ``retraction``). By the implicit function theorem
        ``dw = −(∂R/∂w)⁻¹ ∂R/∂(x_k, v_k, λ_k, u)`` with ``∂R/∂w`` the exact Newton matrix
        (:func:`_legendre_jacobian`, the force's ``F_v``; ``∂R/∂λ_k = −(h/2) K(x_k)ᵀ``), and
        the rest is chained; the differentiated KKT system gives ``dv_{k+1}`` and
        ``dλ_{k+1} = −(2/h) dc``.

        Coordinates ``"(q, g, v, lam)"``: the state is perturbed as
        ``(x_k + δx, W_k τ(ε), v_k + δv, λ_k + δλ)``, ε ∈ 𝔤 (right translation by the method's
        retraction, the chart of the Lie methods' ``"(xi, mu)"``), and the next group element
        is read in the same chart, ``ε_{k+1} = τ⁻¹(W_{k+1}⁻¹ W'_{k+1})``. The reduced step is
        G-invariant, so ``(x_{k+1}, v_{k+1}, λ_{k+1})`` do not depend on ε, and from
        ``W'_{k+1} = W_k τ(ε) τ(σ_k + δσ)`` with ``τ(ε) = e + ε + O(|ε|²)``:

        * ``∂ε_{k+1}/∂ε = Ad_{τ(σ_k)⁻¹} = Ad_{τ(−σ_k)}`` (``τ(σ)⁻¹ τ(ε) τ(σ)``);
        * ``∂ε_{k+1}/∂(x_k, v_k, λ_k, u) = h dL τ_{σ_k} ∂w_ξ/∂(x_k, v_k, λ_k, u)`` with ``dL τ`` the
          retraction's left-trivialized tangent (``τ(σ)⁻¹ Dτ(σ)δσ = dL τ_σ δσ``,
          :meth:`chetaev.liegroups.Retraction.dL`) and ``∂w_ξ`` the last ``d`` rows of the
          implicit function theorem's ``dw``.

        ``A = ∂(x_{k+1}, ε_{k+1}, v_{k+1}, λ_{k+1})/∂(x_k, ε, v_k, λ_k)``
        ``(..., n + d + N + m, n + d + N + m)``, ``B`` its u-derivative
        ``(..., n + d + N + m, n_controls)`` (zero columns without a force),
        ``d = group.dim``, ``N = n + d``; a product of step A's is the Jacobian of several
        steps. The reduced linearization in ``(q, v, lam) = (x, (ẋ, ξ), λ)`` is the sub-block
        of the rows and columns ``s = np.r_[0:n, n + d:n + d + N + m]``:
        ``A[..., s, :][..., :, s]``, ``B[..., s, :]``. A state without a group element
        (``state.carry["g"] is None``: nothing reconstructs it) is linearized in that
        ``"(q, v, lam)"`` alone.

        ``basis``/``next_basis``: orthonormal bases of the tangent spaces of
        {K(x) v + a(x) = 0} × Rᵐ (× G in ``"(q, g, v, lam)"``), on which every node lies:
        ``n + N − m`` columns in (x, v), the ``m`` multiplier directions, then the ``d``
        group directions.

        Second derivatives used: ``potential_hessian`` (central differences of
        ``potential_grad`` when omitted), ``constraint_matrix_grad`` and
        ``constraint_affine_grad`` (central differences when omitted) and the force's
        :meth:`ReducedSystem.force_jacobians`.
        """
        from chetaev.discrete_lagrangian.extending import (
            StepLinearization,
            tangent_fields,
            with_multiplier_directions,
        )

        tau = self._tau(system)
        n, N = system.n_shape, system.N
        G = system.metric
        x, v = np.asarray(state.q, dtype=float), np.asarray(state.v, dtype=float)
        lam = np.asarray(state.lam, dtype=float)
        x1, v1 = np.asarray(new.q, dtype=float), np.asarray(new.v, dtype=float)
        batch = np.broadcast_shapes(x.shape[:-1], v.shape[:-1], x1.shape[:-1])
        w = np.concatenate([np.broadcast_to((x1 - x) / h, (*batch, n)),
                            np.broadcast_to(new.carry["xi"], (*batch, N - n))], axis=-1)
        m_u = system.n_controls if system.has_force else 0
        m = lam.shape[-1]
        k = n + N + m + m_u  # the columns (x_k, v_k, λ_k, u)
        # ∂R/∂w (the Newton matrix) and ∂R/∂(x_k, v_k, λ_k, u)
        Jw = _legendre_jacobian(system, tau, w, h, "minus")
        Rth = np.zeros((*batch, N, k))
        Rth[..., :n, :n] = 0.5 * h * system.hess_V(x)
        Rth[..., :n] -= 0.5 * h * np.einsum("...aij,...a->...ij", system.dK(x), lam)
        Rth[..., :, n: n + N] = -G
        Rth[..., :, n + N: n + N + m] = -0.5 * h * np.swapaxes(system.K(x), -1, -2)  # −∂p⁻/∂λ
        Jp = _legendre_jacobian(system, tau, w, h, "plus")
        dp_x1 = np.zeros((*batch, N, n))
        dp_x1[..., :n, :] = -0.5 * h * system.hess_V(x1)
        dp_u = np.zeros((*batch, N, m_u))
        if system.has_force:
            Fx0, Fv0, Fu0 = system.force_jacobians(x, w, u)
            Fx1, Fv1, Fu1 = system.force_jacobians(x1, w, u)
            Jw = Jw - 0.5 * h * Fv0
            Rth[..., :n] -= 0.5 * h * Fx0
            Rth[..., n + N + m:] = -0.5 * h * Fu0
            Jp = Jp + 0.5 * h * Fv1
            dp_x1 = dp_x1 + 0.5 * h * Fx1
            dp_u = 0.5 * h * Fu1
        dw = -np.linalg.solve(np.broadcast_to(Jw, (*batch, N, N)), Rth)  # (..., N, k)
        dx1 = h * dw[..., :n, :]
        dx1[..., :, :n] += np.eye(n)
        dpp = Jp @ dw + dp_x1 @ dx1
        dpp[..., n + N + m:] += dp_u
        # v_{k+1} from [[G̃, K1ᵀ], [K1, 0]] (v1, c) = (p⁺, −a1): differentiate the KKT system
        K1 = np.broadcast_to(system.K(x1), (*batch, *system.K(x1).shape[-2:]))
        c = -0.5 * h * np.asarray(new.lam, dtype=float)
        dK1 = system.dK(x1)
        top = dpp - np.einsum("...aij,...a->...ij", dK1, c) @ dx1
        low = -np.einsum("...aij,...i->...aj", dK1, v1) @ dx1
        da1 = system.da(x1)
        if da1 is not None:
            low = low - da1 @ dx1
        KKT = np.concatenate([
            np.concatenate([np.broadcast_to(G, (*batch, N, N)), np.swapaxes(K1, -1, -2)], -1),
            np.concatenate([K1, np.zeros((*batch, m, m))], -1)], -2)
        dvc = np.linalg.solve(KKT, np.concatenate([np.broadcast_to(top, (*batch, N, k)),
                                                   np.broadcast_to(low, (*batch, m, k))], -2))
        dv1 = np.concatenate([dvc[..., :N, :], (-2.0 / h) * dvc[..., N:, :]], -2)  # v, λ
        E0 = with_multiplier_directions(_reduced_tangent_basis(system, x, v), m)
        E1 = with_multiplier_directions(_reduced_tangent_basis(system, x1, v1), m)
        nv = N + m  # the rows and columns of (v, λ)
        if state.carry.get("g") is None:  # no group element: the reduced state (q, v, λ)
            full = np.concatenate([dx1, dv1], axis=-2)
            A, B = full[..., : n + nv], full[..., n + nv:]
            return StepLinearization(state=new, A=A, B=B, coordinates="(q, v, lam)",
                                     **tangent_fields(E0, E1, A, B))
        # the group rows: ε_{k+1} = Ad_{τ(−σ)} ε + h dLτ_σ dw_ξ (docstring)
        d = N - n
        sigma = h * w[..., n:]
        de1 = h * (tau.dL(sigma) @ dw[..., n:, :])  # (..., d, k) in the columns (x, v, u)
        rows = np.concatenate([dx1, de1, dv1], axis=-2)  # (..., n + d + N + m, k)
        eps_col = np.zeros((*batch, n + d + nv, d))
        eps_col[..., n: n + d, :] = system.group.Ad(tau(-sigma), check=False)
        A = np.concatenate([rows[..., :n], eps_col, rows[..., n: n + nv]], axis=-1)
        B = rows[..., n + nv:]
        return StepLinearization(state=new, A=A, B=B, coordinates="(q, g, v, lam)",
                                 **tangent_fields(_with_group(E0, n, d), _with_group(E1, n, d),
                                                  A, B))


def _with_group(E, n, d):
    """The basis ``E`` ``(..., n + N, c)`` of a tangent space in (x, v) embedded in
    (x, ε, v) (zero ε rows), followed by the ``d`` unit vectors of the group directions:
    ``(..., n + d + N, c + d)``, orthonormal when ``E`` is."""
    rows, c = E.shape[-2], E.shape[-1]
    out = np.zeros((*E.shape[:-2], rows + d, c + d))
    out[..., :n, :c] = E[..., :n, :]
    out[..., n + d:, :c] = E[..., n:, :]
    out[..., n: n + d, c:] = np.eye(d)
    return out


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
