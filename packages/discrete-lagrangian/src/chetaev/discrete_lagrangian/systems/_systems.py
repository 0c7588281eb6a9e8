"""Continuous Lagrangian systems on vector spaces and (left-trivialized) on Lie groups.

High-order paper §2.1, §3.1 and §6. Every callable a user supplies must
broadcast over leading batch axes (``q`` of shape ``(..., n)``, a group element of shape
``(..., k, k)``), DESIGN.md "Performance design"; a system built from callables that do
not broadcast can be marked ``vectorized=False`` and is then evaluated in a Python loop.

Derivative conventions (vector space, ``L(q, v)``)::

    D1L(q, v)[i]     = ∂L/∂q_i              D2L(q, v)[i]     = ∂L/∂v_i
    D11L(q, v)[i, j] = ∂²L/∂q_i∂q_j         D22L(q, v)[i, j] = ∂²L/∂v_i∂v_j
    D21L(q, v)[i, j] = ∂²L/∂v_i∂q_j         D12L = D21Lᵀ

On a group (``ℓ(g, η)``, left trivialization ġ = g·hat(η)), "∂/∂g" is the left-trivialized
derivative ``d/dε f(g·exp(ε e_j))|₀``: ``D1L`` is L*_g D_1ℓ, ``D11L[i, j]`` the derivative of
``D1L_i`` in direction ``e_j``, ``D21L[i, j]`` that of ``D2L_i``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from .._util._errors import InputError, SingularMatrixError
from .._util._fd import fd_jacobian, group_perturb, vector_perturb
from .._util._validation import as_int, as_matrix, check_spd

__all__ = [
    "LagrangianSystem",
    "MechanicalSystem",
    "TrivializedLagrangianSystem",
    "TrivializedMechanicalSystem",
    "coadjoint",
]


def _looped(f: Callable, core_ndims: tuple[int, ...]) -> Callable:
    """Wrap a non-broadcasting callable so that it loops over leading batch axes."""

    def wrapped(*args):
        args = [np.asarray(a, dtype=float) for a in args]
        batch = np.broadcast_shapes(*[a.shape[: a.ndim - c] for a, c in zip(args, core_ndims)])
        if batch == ():
            return np.asarray(f(*args), dtype=float)
        flat = [
            np.broadcast_to(a, batch + a.shape[a.ndim - c:]).reshape((-1, *a.shape[a.ndim - c:]))
            for a, c in zip(args, core_ndims)
        ]
        outs = [np.asarray(f(*row), dtype=float) for row in zip(*flat)]
        out = np.stack(outs)
        return out.reshape(batch + out.shape[1:])

    wrapped.__wrapped__ = f  # the user's callable (a numba function gives compiled kernels)
    wrapped._looped_of = f  # what _wrap wraps again (attrs.evolve re-runs the wrapping)
    return wrapped


def _wrap(f: Callable | None, vectorized: bool, core: tuple[int, ...]) -> Callable | None:
    # a callable wrapped before is wrapped afresh from the user's (ConstrainedSystem evolves
    # its constraint with the group, which changes the core dimensions of q)
    f = getattr(f, "_looped_of", f)
    if f is None or vectorized:
        return f
    return _looped(f, core)


def _looped_tuple(f: Callable, core_ndims: tuple[int, ...]) -> Callable:
    """``_looped`` for a callable returning a tuple of arrays (``force_derivatives``)."""

    def wrapped(*args):
        args = [np.asarray(a, dtype=float) for a in args]
        batch = np.broadcast_shapes(*[a.shape[: a.ndim - c] for a, c in zip(args, core_ndims)])
        if batch == ():
            return tuple(np.asarray(x, dtype=float) for x in f(*args))
        flat = [
            np.broadcast_to(a, batch + a.shape[a.ndim - c:]).reshape((-1, *a.shape[a.ndim - c:]))
            for a, c in zip(args, core_ndims)
        ]
        outs = [tuple(np.asarray(x, dtype=float) for x in f(*row)) for row in zip(*flat)]
        return tuple(np.stack(col).reshape(batch + col[0].shape) for col in zip(*outs))

    return wrapped


def _init_force(obj: Any) -> None:
    """Validate and wrap ``force``, ``force_derivatives`` and ``n_controls`` (issue 20)."""
    m = as_int(obj.n_controls, "n_controls", minimum=0)
    object.__setattr__(obj, "n_controls", m)
    f, df = obj._force, obj._force_derivatives
    if f is not None and not callable(f):
        raise InputError(
            f"`force` must be callable force(q, v, u) -> (..., n) (on a group force(g, eta, u)"
            f" -> (..., d)), got {f!r}."
        )
    if df is not None and not callable(df):
        raise InputError(
            "`force_derivatives` must be callable (q, v, u) -> (F_q, F_v, F_u), got "
            f"{df!r}."
        )
    if f is None and (df is not None or m):
        raise InputError(
            "`force_derivatives` and `n_controls` need a `force`: pass force=callable(q, v, u)."
        )
    core = (qcore(obj.group), 1, 1)
    object.__setattr__(obj, "_force", _wrap(f, obj.vectorized, core))
    if df is not None and not obj.vectorized:
        object.__setattr__(obj, "_force_derivatives", _looped_tuple(df, core))


def qcore(group: Any) -> int:
    """Number of trailing axes of one configuration: 1 on Rⁿ, ``len(group.shape)`` on a group."""
    return 1 if group is None else len(tuple(group.shape))


def coadjoint(group: Any, eta: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """ad*_η μ = ad(η)ᵀ μ in algebra coordinates (paper §6)."""
    return np.einsum("...ji,...j->...i", group.ad(eta, check=False), mu)


def _bshape(*arrays_and_cores) -> tuple[int, ...]:
    shapes = [a.shape[: a.ndim - c] for a, c in arrays_and_cores]
    return np.broadcast_shapes(*shapes)



def _force_parameters(group: bool) -> str:
    """The numpy-docstring entries of ``force``, ``force_derivatives`` and ``n_controls``,
    shared by the four system classes (vector space or, ``group=True``, trivialized)."""
    q, v, k = ("g", "eta", "d") if group else ("q", "v", "n")
    where = (" (a covector; on the group left-trivialized, in algebra coordinates)" if group
             else " (a covector)")
    takers = (
        "the Lie-group PRKs take it as the stage force of the Lie engine (``LieVPRK``, also "
        "with a holonomic constraint, and ``LieNonholonomicPRK``: F(Gⁱ, Ωⁱ, u) added to the "
        "trivialized configuration derivative of ℓ at the stages, eqs. (26)–(27) of the "
        "high-order paper); the Lie discretization-map methods raise "
        "``ForcesNotSupportedError`` for a forced system"
        if group else
        "the forced methods take it as their discrete force (VPRK, ConstrainedPRK: the stage "
        "force F(Q^i, V^i, u) added to W^i, Ober-Blöbaum, Junge & Marsden 2011; "
        "DiscreteEulerLagrange: left and right discrete forces; NonholonomicPRK's Lagrangian "
        "form: the stage force, as in VPRK); the others raise ``ForcesNotSupportedError``"
    )
    def para(text: str) -> str:
        return textwrap.fill(text, width=92, initial_indent=" " * 8,
                             subsequent_indent=" " * 8, break_on_hyphens=False)

    return (
        "    force : callable, optional\n"
        + para(f"External generalized force ``force({q}, {v}, u)`` → ``(..., {k})``{where}, "
               "broadcasting over leading axes; ``u`` is the control ``(..., n_controls)`` "
               "(an empty ``(..., 0)`` array when ``n_controls=0``), held constant over a "
               "step. It enters the forced (Lagrange–d'Alembert) equations "
               "d/dt ∂L/∂v − ∂L/∂q = F (Marsden & West 2001, §3.2); " + takers + ".")
        + "\n    force_derivatives : callable, optional\n"
        + para(f"``({q}, {v}, u)`` → ``(F_q, F_v, F_u)`` of shapes ``(..., {k}, {k})``, "
               f"``(..., {k}, {k})``, ``(..., {k}, n_controls)`` (exact Jacobians for the "
               "Newton matrix; checked against finite differences before the first step like "
               "the other derivatives). **When omitted the Newton matrix uses central finite "
               "differences of** ``force`` (:meth:`force_jacobians`).")
        + "\n    n_controls : int\n        Number of control inputs (default 0).\n"
    )

class _SystemMixin:
    """Shared methods: energy, Legendre map, acceleration."""

    group: Any = None

    @property
    def _qcore(self) -> int:
        return qcore(self.group)

    def check_derivatives(self, q: Any, v: Any = None) -> None:
        """Check the user's callables at ``(q, v)`` and two nearby points.

        Output shapes, broadcasting over leading axes, the mass matrix (symmetric positive
        definite) and every supplied derivative against a central finite difference with a
        tolerance scaled to its error (module ``_derivcheck``). ``integrate`` runs this once
        per system object before the first step unless the constructor got
        ``derivative_check=False`` (which skips the derivative comparison only).

        Raises
        ------
        DerivativeError
            Names the argument, the worst entry and both values.
        InputError, SingularMatrixError
            A wrong output shape, a callable that does not broadcast, a bad mass matrix.
        """
        from ._derivcheck import check_derivatives

        check_derivatives(self, q, v)

    # -- external forces and controls (issue 20) ---------------------------------------------
    @property
    def has_force(self) -> bool:
        """True when the system carries an external generalized force ``force(q, v, u)``."""
        return self._force is not None

    def _force_batch(self, q: np.ndarray, v: np.ndarray, u: np.ndarray) -> tuple[int, ...]:
        try:
            return _bshape((q, self._qcore), (v, 1), (u, 1))
        except ValueError:
            raise InputError(
                f"`u` (the control, shape (..., {self.n_controls})) does not broadcast with the "
                f"batch of q {q.shape[: q.ndim - self._qcore]} and v {v.shape[:-1]}, got shape "
                f"{u.shape}. Pass one control per batch member (same leading axes)."
            ) from None

    def _control(self, q: np.ndarray, u: Any) -> np.ndarray:
        """``u`` as a float array ``(..., n_controls)`` (``(0,)`` when None without controls)."""
        m = self.n_controls
        if u is None:
            if m:
                raise InputError(
                    f"This system has n_controls={m}: pass the control `u` of shape (..., {m})."
                )
            return np.zeros((0,))
        u = np.asarray(u, dtype=float)
        if u.ndim == 0 or u.shape[-1] != m:
            raise InputError(
                f"`u` must have shape (..., {m}) (n_controls={m}), got shape {u.shape}."
            )
        return u

    def generalized_force(self, q: Any, v: Any, u: Any = None) -> np.ndarray:
        """The external force F(q, v, u) ``(..., n)`` (zero without ``force=``).

        On a group it is the left-trivialized force ``F(g, η, u)`` in algebra coordinates (a
        covector: it enters the Euler–Poincaré equations as d/dt ∂ℓ/∂η − ad*_η ∂ℓ/∂η −
        L*_g D₁ℓ = F, paper §6 with the Lagrange–d'Alembert force).
        """
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        u = self._control(q, u)
        if self.n is None:
            self._bind_dimension(q.shape[-1])
        batch = self._force_batch(q, v, u)
        if self._force is None:
            return np.zeros((*batch, self.n))
        F = np.asarray(self._force(q, v, u), dtype=float)
        want = (*batch, self.n)
        if F.shape != want:
            try:
                F = np.broadcast_to(F, want)
            except ValueError:
                raise InputError(
                    f"`force` must return shape (..., {self.n}) broadcasting with the batch "
                    f"{batch}; it returned shape {F.shape} for q {q.shape}, v {v.shape}, "
                    f"u {u.shape}. Write force(q, v, u) for arrays with leading batch axes."
                ) from None
        return F

    def force_jacobians(self, q: Any, v: Any, u: Any = None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(F_q, F_v, F_u)``: ``[..., i, j] = ∂F_i/∂q_j, ∂F_i/∂v_j, ∂F_i/∂u_j``.

        Shapes ``(..., n, n)``, ``(..., n, n)``, ``(..., n, n_controls)``. From the
        ``force_derivatives`` callable when given (exact); otherwise **central finite
        differences** of ``force`` (one broadcast call per block, ~1e-10 relative, the same
        scheme as the finite-difference second derivatives), so the Newton matrix of a forced
        step is then accurate to ~1e-10: Newton still converges, linearly at that level. On a
        group ``F_q`` is the left-trivialized derivative along ``g·exp(ε e_j)``.
        """
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        u = self._control(q, u)
        if self.n is None:
            self._bind_dimension(q.shape[-1])
        n, m = self.n, self.n_controls
        batch = self._force_batch(q, v, u)
        if self._force is None:
            z = np.zeros((*batch, n, n))
            return z, z, np.zeros((*batch, n, m))
        if self._force_derivatives is not None:
            out = self._force_derivatives(q, v, u)
            if not isinstance(out, (tuple, list)) or len(out) != 3:
                raise InputError(
                    "`force_derivatives` must return the tuple (F_q, F_v, F_u) of shapes "
                    f"(..., {n}, {n}), (..., {n}, {n}), (..., {n}, {m}); got {type(out).__name__}."
                )
            res = []
            for name, blk, cols in zip(("F_q", "F_v", "F_u"), out, (n, n, m)):
                blk = np.asarray(blk, dtype=float)
                try:
                    res.append(np.broadcast_to(blk, (*batch, n, cols)))
                except ValueError:
                    raise InputError(
                        f"`force_derivatives` must return {name} of shape (..., {n}, {cols}) "
                        f"(batch {batch}), got shape {blk.shape}."
                    ) from None
            return res[0], res[1], res[2]
        f = self._force
        perturb = vector_perturb if self.group is None else group_perturb(self.group)
        Fq = fd_jacobian(lambda qq: f(qq, v, u), q, n, perturb=perturb, batch_shape=batch,
                         scale=q if self.group is None else None)
        Fv = fd_jacobian(lambda vv: f(q, vv, u), v, n, batch_shape=batch, scale=v)
        if m:
            Fu = fd_jacobian(lambda uu: f(q, v, uu), u, m, batch_shape=batch, scale=u)
        else:
            Fu = np.zeros((*batch, n, 0))
        return (np.broadcast_to(Fq, (*batch, n, n)), np.broadcast_to(Fv, (*batch, n, n)),
                np.broadcast_to(Fu, (*batch, n, m)))

    @property
    def fd_force_derivatives(self) -> bool:
        """True when a force is given without ``force_derivatives`` (finite differences)."""
        return self._force is not None and self._force_derivatives is None

    def energy(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Energy E = vᵀ ∂L/∂v − L (paper §2)."""
        return np.einsum("...i,...i->...", v, self.D2L(q, v)) - self.lagrangian(q, v)

    def legendre(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Legendre map p = ∂L/∂v(q, v)."""
        return self.D2L(q, v)

    def legendre_inv(self, q: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Inverse Legendre map: the v with ∂L/∂v(q, v) = p (Newton's method)."""
        from ..core._solver import NewtonOptions, newton_solve

        p = np.asarray(p, dtype=float)
        v0 = _solve(self.D22L(q, np.zeros_like(p)), p[..., None], "∂²L/∂v²")[..., 0]
        res = newton_solve(
            lambda v: self.D2L(q, v) - p,
            v0,
            jac=lambda v: self.D22L(q, v),
            options=NewtonOptions(tol=1e-14, max_iter=50),
            scale=1.0 + np.max(np.abs(p), axis=-1),
        )
        if not np.all(res.converged):
            raise InputError(
                "Could not invert the Legendre map ∂L/∂v(q, v) = p: the Lagrangian may "
                "be degenerate (∂²L/∂v² singular) at this point."
            )
        return res.x

    def force_free_rhs(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Right-hand side f with D22L v̇ = f in the unconstrained equations.

        Vector space: f = D1L − D21L v. Group (Euler–Poincaré, paper §6):
        f = ad*_η D2L + D1L − D21L η.
        """
        if _constant_mass_inverse(self) is not None:  # D21L = 0: no (n, n) zeros to apply
            f = self.D1L(q, v)
            if self.group is None:  # a fresh writeable array (D1L may be a broadcast view)
                return f if f.flags.writeable and f.flags.owndata else np.array(f, dtype=float)
        else:
            f = self.D1L(q, v) - np.einsum("...ij,...j->...i", self.D21L(q, v), v)
        if self.group is not None:
            f = f + coadjoint(self.group, v, self.D2L(q, v))
        return f

    def acceleration(
        self, q: np.ndarray, v: np.ndarray, force: np.ndarray | None = None
    ) -> np.ndarray:
        """v̇ (or η̇) of the unconstrained equations with an optional extra force."""
        f = self.force_free_rhs(q, v)
        if force is not None:
            f = f + force
        return _solve(self.D22L(q, v), f[..., None], "∂²L/∂v² (the mass matrix)")[..., 0]


def _solve(G: np.ndarray, rhs: np.ndarray, what: str) -> np.ndarray:
    """``np.linalg.solve`` that names a singular matrix (SingularMatrixError)."""
    try:
        return np.linalg.solve(G, rhs)
    except np.linalg.LinAlgError:
        raise SingularMatrixError(
            f"{what} is singular at this configuration; the mass matrix must be positive "
            "definite everywhere along the motion. Check the masses/inertias and the "
            "coordinates (a singular chart point?)."
        ) from None


@attrs.frozen(eq=False)
class LagrangianSystem(_SystemMixin):
    """General Lagrangian L(q, v) on Rⁿ (paper §2).

    Parameters
    ----------
    n : int
        Dimension of the configuration space.
    lagrangian : callable
        ``L(q, v)`` → ``(...)``.
    dL_dq, dL_dv : callable
        ``(q, v)`` → ``(..., n)``.
    d2L_dv2, d2L_dvdq, d2L_dq2 : callable, optional
        Second-derivative blocks ``(q, v)`` → ``(..., n, n)`` (``d2L_dvdq[i, j] =
        ∂²L/∂v_i∂q_j``). **When omitted they are formed by central finite differences of
        the first derivatives** (one broadcast call each, accuracy ~1e-10 relative); the
        flag ``fd_second_derivatives`` is then True and ``integrate`` reports it in
        ``stats``. Newton then converges linearly instead of quadratically.
    vectorized : bool
        False if the callables do not broadcast over leading axes (then looped).
    derivative_check : bool
        True (default): before the first step ``integrate`` compares every supplied
        derivative with a central finite difference (see :meth:`check_derivatives`).

    Other Parameters
    ----------------
    {FORCE_PARAMETERS}
    """

    n: int = attrs.field(converter=int)
    _lagrangian: Callable = attrs.field()
    _dL_dq: Callable = attrs.field()
    _dL_dv: Callable = attrs.field()
    _d2L_dv2: Callable | None = attrs.field(default=None)
    _d2L_dvdq: Callable | None = attrs.field(default=None)
    _d2L_dq2: Callable | None = attrs.field(default=None)
    vectorized: bool = attrs.field(default=True, kw_only=True)
    derivative_check: bool = attrs.field(default=True, kw_only=True, converter=bool)
    _force: Callable | None = attrs.field(default=None, kw_only=True)
    _force_derivatives: Callable | None = attrs.field(default=None, kw_only=True)
    n_controls: int = attrs.field(default=0, kw_only=True)
    is_mechanical = False
    group = None

    def __attrs_post_init__(self) -> None:
        _init_force(self)
        if self.n < 1:
            raise InputError(f"`n` must be a positive integer, got {self.n}.")
        for name in ("_lagrangian", "_dL_dq", "_dL_dv", "_d2L_dv2", "_d2L_dvdq", "_d2L_dq2"):
            f = getattr(self, name)
            if f is not None and not callable(f):
                raise InputError(f"`{name[1:]}` must be callable (q, v) -> array, got {f!r}.")
            object.__setattr__(self, name, _wrap(f, self.vectorized, (1, 1)))

    @property
    def fd_second_derivatives(self) -> bool:
        """True when some second-derivative block is formed by finite differences."""
        return self._d2L_dv2 is None or self._d2L_dvdq is None or self._d2L_dq2 is None

    def lagrangian(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """L(q, v)."""
        return np.asarray(self._lagrangian(q, v))

    def D1L(self, q, v):
        """∂L/∂q, shape (..., n)."""
        return np.asarray(self._dL_dq(q, v))

    def D2L(self, q, v):
        """∂L/∂v, shape (..., n)."""
        return np.asarray(self._dL_dv(q, v))

    def D22L(self, q, v):
        """∂²L/∂v∂v, shape (..., n, n)."""
        if self._d2L_dv2 is not None:
            return np.asarray(self._d2L_dv2(q, v))
        return fd_jacobian(lambda vv: self.D2L(q, vv), v, self.n,
                           batch_shape=_bshape((q, 1), (v, 1)), scale=v)

    def D21L(self, q, v):
        """[i, j] = ∂²L/∂v_i∂q_j, shape (..., n, n)."""
        if self._d2L_dvdq is not None:
            return np.asarray(self._d2L_dvdq(q, v))
        return fd_jacobian(lambda qq: self.D2L(qq, v), q, self.n,
                           batch_shape=_bshape((q, 1), (v, 1)), scale=q)

    def D12L(self, q, v):
        """[i, j] = ∂²L/∂q_i∂v_j = D21Lᵀ."""
        return np.swapaxes(self.D21L(q, v), -1, -2)

    def D11L(self, q, v):
        """∂²L/∂q∂q, shape (..., n, n)."""
        if self._d2L_dq2 is not None:
            return np.asarray(self._d2L_dq2(q, v))
        return fd_jacobian(lambda qq: self.D1L(qq, v), q, self.n,
                           batch_shape=_bshape((q, 1), (v, 1)), scale=q)


@attrs.frozen(eq=False)
class MechanicalSystem(_SystemMixin):
    """Mechanical Lagrangian L = ½ vᵀM(q)v − V(q) on Rⁿ (paper §2; §3).

    Parameters
    ----------
    mass : array_like (n, n) or callable
        Constant symmetric positive definite mass matrix, or ``q`` ↦ ``(..., n, n)``.
    potential : callable
        ``V(q)`` → ``(...)``.
    potential_grad : callable
        ``∇V(q)`` → ``(..., n)``.
    potential_hess : callable, optional
        ``∇²V(q)`` → ``(..., n, n)``; central finite differences of ``potential_grad``
        when omitted (``fd_second_derivatives`` is then True).
    mass_grad : callable, optional
        For a q-dependent mass: ``q`` ↦ ``(..., n, n, n)`` with ``[i, j, k] = ∂M_ij/∂q_k``;
        finite differences of ``mass`` when omitted.
    n : int, optional
        Dimension. With a callable ``mass`` it may be omitted: it is then taken from the
        data at first use (``integrate`` takes it from ``q0``; ``n`` is None until then).

    Other Parameters
    ----------------
    vectorized : bool
        False if the callables do not broadcast over leading axes (they are then looped).
    derivative_check : bool
        True (default): before the first step ``integrate`` compares ``potential_grad``,
        ``potential_hess`` and ``mass_grad`` with central finite differences of
        ``potential``, ``potential_grad`` and ``mass`` (:meth:`check_derivatives`).
    {FORCE_PARAMETERS}

    Energy ½vᵀMv + V, the Legendre map p = Mv and its inverse are exact.
    """

    mass: Any = attrs.field()
    _potential: Callable = attrs.field()
    _potential_grad: Callable = attrs.field()
    _potential_hess: Callable | None = attrs.field(default=None)
    _mass_grad: Callable | None = attrs.field(default=None)
    n: int | None = attrs.field(default=None, kw_only=True)
    vectorized: bool = attrs.field(default=True, kw_only=True)
    derivative_check: bool = attrs.field(default=True, kw_only=True, converter=bool)
    _force: Callable | None = attrs.field(default=None, kw_only=True)
    _force_derivatives: Callable | None = attrs.field(default=None, kw_only=True)
    n_controls: int = attrs.field(default=0, kw_only=True)
    _Minv: Any = attrs.field(init=False, default=None, repr=False)
    is_mechanical = True
    group = None

    def __attrs_post_init__(self) -> None:
        _init_force(self)
        if callable(self.mass):
            if self.n is not None:
                object.__setattr__(self, "n", as_int(self.n, "n", minimum=1))
            object.__setattr__(self, "mass", _wrap(self.mass, self.vectorized, (1,)))
        else:
            M = as_matrix(self.mass, "mass")
            if M.ndim != 2:
                raise InputError(
                    f"`mass` must be an (n, n) matrix or a callable q -> (..., n, n), "
                    f"got shape {M.shape}."
                )
            check_spd(M, "mass")
            if self.n is not None and int(self.n) != M.shape[0]:
                raise InputError(f"`n`={self.n} does not match the mass matrix {M.shape}.")
            M = M.copy()
            M.setflags(write=False)
            object.__setattr__(self, "mass", M)
            object.__setattr__(self, "n", M.shape[0])
            object.__setattr__(self, "_Minv", np.linalg.inv(M))
        for name in ("_potential", "_potential_grad", "_potential_hess", "_mass_grad"):
            f = getattr(self, name)
            if f is not None and not callable(f):
                raise InputError(f"`{name[1:]}` must be callable q -> array, got {f!r}.")
            object.__setattr__(self, name, _wrap(f, self.vectorized, (1,)))

    @property
    def constant_mass(self) -> bool:
        """True when the mass matrix does not depend on q."""
        return not callable(self.mass)

    def _bind_dimension(self, n: int) -> None:
        """Fix the dimension of a callable-mass system from the first data it sees."""
        if self.n is None:
            object.__setattr__(self, "n", int(n))

    @property
    def fd_second_derivatives(self) -> bool:
        """True when ∇²V (or ∂M/∂q) is formed by finite differences."""
        return self._potential_hess is None or (
            not self.constant_mass and self._mass_grad is None
        )

    def M(self, q: np.ndarray) -> np.ndarray:
        """Mass matrix at q, shape (..., n, n)."""
        q = np.asarray(q, dtype=float)
        if self.constant_mass:
            return np.broadcast_to(self.mass, (*q.shape[:-1], self.n, self.n))
        if self.n is None:
            self._bind_dimension(q.shape[-1])
        return np.asarray(self.mass(q))

    def dM(self, q: np.ndarray) -> np.ndarray:
        """∂M_ij/∂q_k, shape (..., n, n, n)."""
        q = np.asarray(q, dtype=float)
        if self.constant_mass:
            return np.zeros(q.shape[:-1] + (self.n,) * 3)
        if self._mass_grad is not None:
            return np.asarray(self._mass_grad(q))
        self._bind_dimension(q.shape[-1])
        return fd_jacobian(self.M, q, self.n, out_ndim=2, scale=q)

    def V(self, q: np.ndarray) -> np.ndarray:
        """Potential energy V(q)."""
        return np.asarray(self._potential(q))

    def gradV(self, q: np.ndarray) -> np.ndarray:
        """∇V(q), shape (..., n)."""
        return np.asarray(self._potential_grad(q))

    def hessV(self, q: np.ndarray) -> np.ndarray:
        """∇²V(q), shape (..., n, n)."""
        if self._potential_hess is not None:
            return np.asarray(self._potential_hess(q))
        q = np.asarray(q, dtype=float)
        self._bind_dimension(q.shape[-1])
        return fd_jacobian(self.gradV, q, self.n, scale=q)

    def lagrangian(self, q, v):
        """L = ½ vᵀM(q)v − V(q)."""
        v = np.asarray(v, dtype=float)
        return 0.5 * np.einsum("...i,...ij,...j->...", v, self.M(q), v) - self.V(q)

    def D1L(self, q, v):
        """∂L/∂q = ½ vᵀ(∂M/∂q)v − ∇V."""
        g = -self.gradV(q)
        if not self.constant_mass:
            g = g + 0.5 * np.einsum("...i,...ijk,...j->...k", v, self.dM(q), v)
        if g.shape == (*np.shape(q)[:-1], self.n) and np.shape(v)[:-1] == g.shape[:-1]:
            return g  # nothing to broadcast
        shape = np.broadcast_shapes(np.shape(q)[:-1], np.shape(v)[:-1])
        return np.broadcast_to(g, (*shape, self.n))

    def D2L(self, q, v):
        """∂L/∂v = M(q)v."""
        if self.constant_mass:
            return np.asarray(v, dtype=float) @ self.mass.T
        return np.einsum("...ij,...j->...i", self.M(q), v)

    def D22L(self, q, v):
        """∂²L/∂v² = M(q)."""
        shape = np.broadcast_shapes(np.shape(q)[:-1], np.shape(v)[:-1])
        return np.broadcast_to(self.M(q), (*shape, self.n, self.n))

    def D21L(self, q, v):
        """[i, k] = Σ_j ∂M_ij/∂q_k v_j."""
        shape = np.broadcast_shapes(np.shape(q)[:-1], np.shape(v)[:-1])
        if self.constant_mass:
            return np.zeros((*shape, self.n, self.n))
        return np.einsum("...ijk,...j->...ik", self.dM(q), v)

    def D12L(self, q, v):
        """D21Lᵀ."""
        return np.swapaxes(self.D21L(q, v), -1, -2)

    def D11L(self, q, v):
        """∂²L/∂q² = ½ vᵀ(∂²M/∂q²)v − ∇²V."""
        shape = np.broadcast_shapes(np.shape(q)[:-1], np.shape(v)[:-1])
        H = -self.hessV(q)
        if not self.constant_mass:
            d2M = fd_jacobian(self.dM, np.asarray(q, dtype=float), self.n, out_ndim=3, scale=q)
            H = H + 0.5 * np.einsum("...i,...ijkl,...j->...kl", v, d2M, v)
        return np.broadcast_to(H, (*shape, self.n, self.n))

    def energy(self, q, v):
        """E = ½ vᵀM(q)v + V(q) (exact)."""
        v = np.asarray(v, dtype=float)
        return 0.5 * np.einsum("...i,...ij,...j->...", v, self.M(q), v) + self.V(q)

    def legendre_inv(self, q, p):
        """v = M(q)⁻¹ p (exact)."""
        p = np.asarray(p, dtype=float)
        if self.constant_mass:
            return p @ self._Minv.T
        return _solve(self.M(q), p[..., None], "The mass matrix M(q)")[..., 0]


@attrs.frozen(eq=False)
class TrivializedLagrangianSystem(_SystemMixin):
    """Left-trivialized Lagrangian ℓ(g, η) = L(g, g·hat(η)) on a matrix Lie group (paper §6).

    Parameters
    ----------
    group : chetaev.liegroups group
        The configuration group (``dim``, ``shape``, ``exp``, ``ad``, ...).
    lagrangian : callable
        ``ℓ(g, η)`` → ``(...)``.
    dl_dg : callable
        Left-trivialized gradient L*_g D_1ℓ(g, η) → ``(..., d)``:
        ``[j] = d/dε ℓ(g·exp(ε e_j), η)|₀``.
    dl_deta : callable
        ``∂ℓ/∂η`` → ``(..., d)``.
    d2l_deta2, d2l_detadg, d2l_dg2, d2l_dgdeta : callable, optional
        Blocks ``D22L``, ``D21L`` (left-trivialized derivative of ∂ℓ/∂η),
        ``D11L`` (of the left-trivialized gradient), ``D12L`` (∂/∂η of it), each
        ``(..., d, d)``. **Central finite differences when omitted** (the flag
        ``fd_second_derivatives`` is then True).

    Other Parameters
    ----------------
    {FORCE_PARAMETERS}
    """

    group: Any = attrs.field()
    _lagrangian: Callable = attrs.field()
    _dl_dg: Callable = attrs.field()
    _dl_deta: Callable = attrs.field()
    _d2l_deta2: Callable | None = attrs.field(default=None)
    _d2l_detadg: Callable | None = attrs.field(default=None)
    _d2l_dg2: Callable | None = attrs.field(default=None)
    _d2l_dgdeta: Callable | None = attrs.field(default=None)
    vectorized: bool = attrs.field(default=True, kw_only=True)
    derivative_check: bool = attrs.field(default=True, kw_only=True, converter=bool)
    _force: Callable | None = attrs.field(default=None, kw_only=True)
    _force_derivatives: Callable | None = attrs.field(default=None, kw_only=True)
    n_controls: int = attrs.field(default=0, kw_only=True)
    is_mechanical = False

    def __attrs_post_init__(self) -> None:
        _init_force(self)
        for name in ("_lagrangian", "_dl_dg", "_dl_deta", "_d2l_deta2", "_d2l_detadg",
                     "_d2l_dg2", "_d2l_dgdeta"):
            object.__setattr__(self, name, _wrap(getattr(self, name), self.vectorized,
                                                 (qcore(self.group), 1)))

    @property
    def n(self) -> int:
        """Algebra dimension d = group.dim."""
        return int(self.group.dim)

    @property
    def fd_second_derivatives(self) -> bool:
        """True when some second-derivative block is formed by finite differences."""
        return any(f is None for f in (self._d2l_deta2, self._d2l_detadg, self._d2l_dg2,
                                       self._d2l_dgdeta))

    def _bs(self, g, eta):
        return _bshape((np.asarray(g), qcore(self.group)), (np.asarray(eta), 1))

    def lagrangian(self, g, eta):
        """ℓ(g, η)."""
        return np.asarray(self._lagrangian(g, eta))

    def D1L(self, g, eta):
        """Left-trivialized gradient L*_g D_1ℓ, shape (..., d)."""
        return np.asarray(self._dl_dg(g, eta))

    def D2L(self, g, eta):
        """∂ℓ/∂η, shape (..., d)."""
        return np.asarray(self._dl_deta(g, eta))

    def D22L(self, g, eta):
        """∂²ℓ/∂η², shape (..., d, d)."""
        if self._d2l_deta2 is not None:
            return np.asarray(self._d2l_deta2(g, eta))
        return fd_jacobian(lambda e: self.D2L(g, e), eta, self.n,
                           batch_shape=self._bs(g, eta), scale=eta)

    def D21L(self, g, eta):
        """[i, j] = d/dε (∂ℓ/∂η_i)(g·exp(ε e_j), η)|₀."""
        if self._d2l_detadg is not None:
            return np.asarray(self._d2l_detadg(g, eta))
        return fd_jacobian(lambda gg: self.D2L(gg, eta), g, self.n,
                           perturb=group_perturb(self.group), batch_shape=self._bs(g, eta))

    def D11L(self, g, eta):
        """[i, j] = d/dε D1L_i(g·exp(ε e_j), η)|₀."""
        if self._d2l_dg2 is not None:
            return np.asarray(self._d2l_dg2(g, eta))
        return fd_jacobian(lambda gg: self.D1L(gg, eta), g, self.n,
                           perturb=group_perturb(self.group), batch_shape=self._bs(g, eta))

    def D12L(self, g, eta):
        """[i, j] = ∂ D1L_i / ∂η_j."""
        if self._d2l_dgdeta is not None:
            return np.asarray(self._d2l_dgdeta(g, eta))
        return fd_jacobian(lambda e: self.D1L(g, e), eta, self.n,
                           perturb=vector_perturb, batch_shape=self._bs(g, eta), scale=eta)


@attrs.frozen(eq=False)
class TrivializedMechanicalSystem(_SystemMixin):
    """ℓ(g, η) = ½ ηᵀ𝕀η − V(g) on a matrix Lie group (paper §6).

    Parameters
    ----------
    group : chetaev.liegroups group
    inertia : array_like (d, d)
        Constant symmetric positive definite inertia tensor 𝕀 (algebra coordinates).
    potential : callable
        ``V(g)`` → ``(...)``.
    potential_grad : callable
        Left-trivialized gradient of V in algebra coordinates, ``(..., d)``:
        ``[j] = d/dε V(g·exp(ε e_j))|₀``.
    potential_hess : callable, optional
        ``[i, j] = d/dε potential_grad_i(g·exp(ε e_j))|₀``; finite differences when omitted.

    Other Parameters
    ----------------
    {FORCE_PARAMETERS}
    """

    group: Any = attrs.field()
    inertia: np.ndarray = attrs.field()
    _potential: Callable = attrs.field()
    _potential_grad: Callable = attrs.field()
    _potential_hess: Callable | None = attrs.field(default=None)
    vectorized: bool = attrs.field(default=True, kw_only=True)
    derivative_check: bool = attrs.field(default=True, kw_only=True, converter=bool)
    _force: Callable | None = attrs.field(default=None, kw_only=True)
    _force_derivatives: Callable | None = attrs.field(default=None, kw_only=True)
    n_controls: int = attrs.field(default=0, kw_only=True)
    _Iinv: Any = attrs.field(init=False, default=None, repr=False)
    is_mechanical = True

    def __attrs_post_init__(self) -> None:
        _init_force(self)
        d = int(self.group.dim)
        I = as_matrix(self.inertia, "inertia")
        if I.shape != (d, d):
            raise InputError(
                f"`inertia` must have shape ({d}, {d}) (group dimension {d}), got {I.shape}."
            )
        check_spd(I, "inertia")
        I = I.copy()
        I.setflags(write=False)
        object.__setattr__(self, "inertia", I)
        object.__setattr__(self, "_Iinv", np.linalg.inv(I))
        for name in ("_potential", "_potential_grad", "_potential_hess"):
            object.__setattr__(self, name, _wrap(getattr(self, name), self.vectorized,
                                                 (qcore(self.group),)))

    @property
    def n(self) -> int:
        """Algebra dimension d = group.dim."""
        return int(self.group.dim)

    @property
    def fd_second_derivatives(self) -> bool:
        """True when the potential Hessian is formed by finite differences."""
        return self._potential_hess is None

    def _bs(self, g, eta):
        return _bshape((np.asarray(g), qcore(self.group)), (np.asarray(eta), 1))

    def V(self, g):
        """Potential V(g)."""
        return np.asarray(self._potential(g))

    def gradV(self, g):
        """Left-trivialized gradient of V, shape (..., d)."""
        return np.asarray(self._potential_grad(g))

    def hessV(self, g):
        """Left-trivialized Hessian of V, shape (..., d, d)."""
        if self._potential_hess is not None:
            return np.asarray(self._potential_hess(g))
        g = np.asarray(g, dtype=float)
        return fd_jacobian(self.gradV, g, self.n, perturb=group_perturb(self.group),
                           batch_shape=g.shape[: g.ndim - qcore(self.group)])

    def lagrangian(self, g, eta):
        """ℓ = ½ ηᵀ𝕀η − V(g)."""
        eta = np.asarray(eta, dtype=float)
        return 0.5 * np.einsum("...i,ij,...j->...", eta, self.inertia, eta) - self.V(g)

    def D1L(self, g, eta):
        """L*_g D_1ℓ = −(left-trivialized gradient of V)."""
        out = -self.gradV(g)
        return np.broadcast_to(out, (*self._bs(g, eta), self.n))

    def D2L(self, g, eta):
        """∂ℓ/∂η = 𝕀η."""
        return np.asarray(eta, dtype=float) @ self.inertia.T

    def D22L(self, g, eta):
        """𝕀."""
        return np.broadcast_to(self.inertia, (*self._bs(g, eta), self.n, self.n))

    def D21L(self, g, eta):
        """0."""
        return np.zeros((*self._bs(g, eta), self.n, self.n))

    def D12L(self, g, eta):
        """0."""
        return np.zeros((*self._bs(g, eta), self.n, self.n))

    def D11L(self, g, eta):
        """−(left-trivialized Hessian of V)."""
        return np.broadcast_to(-self.hessV(g), (*self._bs(g, eta), self.n, self.n))

    def energy(self, g, eta):
        """E = ½ ηᵀ𝕀η + V(g)."""
        eta = np.asarray(eta, dtype=float)
        return 0.5 * np.einsum("...i,ij,...j->...", eta, self.inertia, eta) + self.V(g)

    def legendre_inv(self, g, mu):
        """η = 𝕀⁻¹μ."""
        return np.asarray(mu, dtype=float) @ self._Iinv.T


for _cls, _group in ((LagrangianSystem, False), (MechanicalSystem, False),
                     (TrivializedLagrangianSystem, True), (TrivializedMechanicalSystem, True)):
    if _cls.__doc__:  # None under python -OO
        _cls.__doc__ = _cls.__doc__.replace("    {FORCE_PARAMETERS}\n", _force_parameters(_group))
del _cls, _group


def _constant_mass_inverse(system: Any) -> np.ndarray | None:
    """The inverse of the constant mass matrix of ``system`` (``(n, n)``, computed once at
    construction), or None.

    A :class:`MechanicalSystem` with a constant ``mass`` gives ``M⁻¹``, a
    :class:`TrivializedMechanicalSystem` ``𝕀⁻¹`` (its inertia is always constant); every
    other system (a callable mass, a general Lagrangian) None. With a constant mass
    ``D21L = 0`` and ``D22L = M``, so the KKT solve of the multiplier
    (:meth:`~chetaev.discrete_lagrangian.ConstrainedSystem.multiplier`) multiplies by this
    inverse instead of factorising ``M`` at every batch entry.
    """
    if isinstance(system, MechanicalSystem):
        return system._Minv if system.constant_mass else None
    if isinstance(system, TrivializedMechanicalSystem):
        return system._Iinv
    return None
