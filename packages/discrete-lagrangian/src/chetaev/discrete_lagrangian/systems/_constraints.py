"""Holonomic and velocity constraints, and the constrained system (paper §3; §6).

Sign convention for every method in the project::

    d/dt ∂L/∂v − ∂L/∂q = (∂Φ/∂v)ᵀ λ            (holonomic: (∂Φ/∂q)ᵀ λ)

On a group the same classes take ``(g, η)`` with ``g`` a group element ``(..., k, k)`` and
η the trivialized velocity; every derivative "in q" is then the left-trivialized one,
``[.., j] = d/dε f(g·exp(ε e_j))|₀``. A constraint learns the group from the
:class:`ConstrainedSystem` it is put into (or from ``group=``).

Velocity-level view (what the multiplier formula and the nonholonomic methods use):

============================  =================  ========================  ====================
constraint                    ``residual(q, v)`` ``dphi_dv(q, v)`` (m, n) ``dphi_dq(q, v)`` (m, n)
============================  =================  ========================  ====================
HolonomicConstraint           Φ(q)               ∂Φ/∂q                     ∂(∂Φ/∂q · v)/∂q
LinearVelocityConstraint      A(q)v + a(q)       A(q)                      dA[v] + da
VelocityConstraint            Φ(q, v)            ∂Φ/∂v                     ∂Φ/∂q
============================  =================  ========================  ====================

For a holonomic constraint ``velocity_residual(q, v) = ∂Φ/∂q · v`` is the hidden
(tangency) constraint.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from .._util._errors import ConstraintViolationError, InputError, SingularMatrixError
from .._util._fd import fd_jacobian, group_perturb, vector_perturb
from .._util._validation import real_array
from ._systems import _constant_mass_inverse, _solve, _wrap, qcore

__all__ = [
    "ConstrainedSystem",
    "HolonomicConstraint",
    "LinearVelocityConstraint",
    "VelocityConstraint",
]


def _qbatch(q: np.ndarray, group: Any) -> tuple[int, ...]:
    q = np.asarray(q)
    return q.shape[: q.ndim - qcore(group)]


def _perturb(group: Any):
    return vector_perturb if group is None else group_perturb(group)


def _ndim_q(group: Any) -> int:
    return qcore(group)


def _as_callable(x: Any, name: str, vectorized: bool, core: tuple[int, ...]):
    if x is None:
        return None
    if callable(x):
        return _wrap(x, vectorized, core)
    arr = real_array(x, name)
    if not np.all(np.isfinite(arr)):
        raise InputError(f"`{name}` must be finite.")
    arr.setflags(write=False)
    return arr


class _CheckMixin:
    """``check_derivatives`` shared by the constraints and :class:`ConstrainedSystem`."""

    def check_derivatives(self, q: Any, v: Any = None) -> None:
        """Check the user's callables at ``(q, v)`` and two nearby points.

        Output shapes, broadcasting over leading axes and every supplied derivative
        against a central finite difference (module ``_derivcheck``; a
        :class:`ConstrainedSystem` checks its system and its constraint). ``integrate``
        runs this once per system object before the first step; ``derivative_check=False``
        on a constructor skips the derivative comparison of that object.

        Raises
        ------
        DerivativeError
            Names the argument, the worst entry and both values.
        InputError
            A wrong output shape or a callable that does not broadcast.
        """
        from ._derivcheck import check_derivatives

        check_derivatives(self, q, v)


def _kkt_exact(system: Any) -> set[str]:
    """The blocks of ``ConstrainedSystem.multiplier_jacobian`` that follow exactly from the
    system's own derivatives (without ``kkt_derivatives``): ``"dG"`` (a mechanical system
    with a constant mass, or ``mass_grad``; constant on a group), ``"df"`` (besides, a
    constant mass and ``potential_hess``: f = −∇V (+ ad*_η 𝕀η)) and ``"dc"`` (a constant
    ``A`` with a constant or no ``a``: c = 0)."""
    out: set[str] = set()
    sysm, con = system.system, system.constraint
    on_group = getattr(sysm, "group", None) is not None
    if getattr(sysm, "is_mechanical", False):
        if on_group:
            out.add("dG")
        elif sysm.constant_mass or getattr(sysm, "_mass_grad", None) is not None:
            out.add("dG")
        if (on_group or sysm.constant_mass) and getattr(sysm, "_potential_hess", None) \
                is not None:
            out.add("df")
    if getattr(con, "is_linear_in_velocity", False) and not callable(con.A) \
            and not callable(con.a):
        out.add("dc")
    return out


def _check_kkt(sysm: Any, con: Any, kkt: Callable, q0: Any, v0: Any) -> None:
    """``kkt_derivatives`` against central differences of G = D22L, f (the force-free
    right-hand side) and c = (∂Φ/∂q)v at the first configuration of ``(q0, v0)``
    (:func:`~._derivcheck.compare_derivative`, its derived tolerance; on a group the
    v-columns only, the differences being taken on a vector space)."""
    from ._derivcheck import compare_derivative

    group = getattr(sysm, "group", None)
    v = np.asarray(v0, dtype=float).reshape(-1, np.shape(v0)[-1])[0]
    n = v.shape[-1]
    qshape = (n,) if group is None else tuple(group.shape)
    q = np.asarray(q0, dtype=float).reshape(-1, *qshape)[0]

    def c_of(qq, vv):
        return np.einsum("...aj,...j->...a", con.dphi_dq(qq, vv), vv)

    blocks = (("dG", sysm.D22L, "D22L"), ("df", sysm.force_free_rhs, "the right-hand side f"),
              ("dc", c_of, "c = (dPhi/dq) v"))
    for k, (name, f, of) in enumerate(blocks):
        what = f"kkt_derivatives ({name})"
        if group is None:
            compare_derivative(what, lambda z, f=f: f(z[..., :n], z[..., n:]),
                               lambda z, k=k: kkt(z[..., :n], z[..., n:])[k],
                               np.concatenate([q, v]), of=of, wrt="(q, v)",
                               owner="ConstrainedSystem")
        else:
            compare_derivative(what, lambda e, f=f: f(q, e),
                               lambda e, k=k: np.asarray(kkt(q, e)[k])[..., n:], v, of=of,
                               wrt="v", owner="ConstrainedSystem")


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr = np.array(arr)
    arr.setflags(write=False)
    return arr


def _promote(out: np.ndarray, q: Any, group: Any, core: int) -> np.ndarray:
    """Insert the constraint axis m = 1 when a single constraint omits it.

    Promoted only when the output has one axis too few *and* its leading axes are the
    batch axes of ``q`` (a constant (m, n) written without batch axes is left alone).
    """
    nb = np.ndim(q) - qcore(group)
    if out.ndim != nb + core - 1 or out.shape[:nb] != np.shape(q)[:nb]:
        return out
    return np.expand_dims(out, -core)


@attrs.frozen(eq=False)
class HolonomicConstraint(_CheckMixin):
    """Holonomic constraint Φ(q) = 0, Φ : Q → Rᵐ.

    Parameters
    ----------
    phi : callable
        ``Φ(q)`` → ``(..., m)``.
    jacobian : callable
        ``∂Φ/∂q`` → ``(..., m, n)`` (on a group: left-trivialized).
    hessian : callable, optional
        ``[a, i, j] = ∂(∂Φ_a/∂q_i)/∂q_j`` → ``(..., m, n, n)`` (on a group: the
        left-trivialized derivative of the Jacobian in direction ``e_j``). Central finite
        differences of ``jacobian`` when omitted.
    group : optional
        Set automatically by :class:`ConstrainedSystem` for group systems.
    m : int, optional
        Number of constraints (inferred from ``phi`` when first needed).
    """

    _phi: Callable = attrs.field()
    _jacobian: Callable = attrs.field()
    _hessian: Callable | None = attrs.field(default=None)
    group: Any = attrs.field(default=None, kw_only=True)
    m: int | None = attrs.field(default=None, kw_only=True)
    vectorized: bool = attrs.field(default=True, kw_only=True)
    derivative_check: bool = attrs.field(default=True, kw_only=True, converter=bool)
    is_holonomic = True

    def __attrs_post_init__(self) -> None:
        c = _ndim_q(self.group)
        for name in ("_phi", "_jacobian", "_hessian"):
            f = getattr(self, name)
            if f is not None and not callable(f):
                raise InputError(f"`{name[1:]}` must be callable q -> array, got {f!r}.")
            object.__setattr__(self, name, _wrap(f, self.vectorized, (c,)))

    @property
    def fd_hessian(self) -> bool:
        """True when the Hessian is formed by finite differences."""
        return self._hessian is None

    @property
    def fd_second_derivatives(self) -> bool:
        """True when ∂Φ_v/∂q (the Hessian of Φ) is formed by finite differences."""
        return self._hessian is None

    def phi(self, q):
        """Φ(q), shape (..., m)."""
        return np.asarray(self._phi(q), dtype=float)

    def jacobian(self, q):
        """∂Φ/∂q, shape (..., m, n)."""
        return np.asarray(self._jacobian(q), dtype=float)

    def hessian(self, q):
        """[a, i, j] = ∂J_ai/∂q_j, shape (..., m, n, n)."""
        if self._hessian is not None:
            return np.asarray(self._hessian(q), dtype=float)
        q = np.asarray(q, dtype=float)
        J = self.jacobian(q)
        return fd_jacobian(self.jacobian, q, J.shape[-1], perturb=_perturb(self.group),
                           batch_shape=_qbatch(q, self.group), out_ndim=2,
                           scale=None if self.group is not None else q)

    def residual(self, q, v=None):
        """Position-level residual Φ(q)."""
        return self.phi(q)

    def velocity_residual(self, q, v):
        """Hidden (tangency) constraint ∂Φ/∂q · v."""
        return np.einsum("...ai,...i->...a", self.jacobian(q), v)

    def dphi_dv(self, q, v):
        """∂(∂Φ/∂q · v)/∂v = ∂Φ/∂q, shape (..., m, n)."""
        J = self.jacobian(q)
        shape = np.broadcast_shapes(J.shape[:-2], np.shape(v)[:-1])
        return np.broadcast_to(J, shape + J.shape[-2:])

    def dphi_dq(self, q, v):
        """∂(∂Φ/∂q · v)/∂q: [a, j] = Σ_i H[a, i, j] v_i, shape (..., m, n)."""
        return np.einsum("...aij,...i->...aj", self.hessian(q), v)

    def d2phi_dvdq(self, q, v):
        """[a, i, j] = ∂²(Jv)_a/∂v_i∂q_j = H[a, i, j]."""
        H = self.hessian(q)
        shape = np.broadcast_shapes(H.shape[:-3], np.shape(v)[:-1])
        return np.broadcast_to(H, shape + H.shape[-3:])

    def d2phi_dv2(self, q, v):
        """Zero (the velocity form is linear in v), shape (..., m, n, n)."""
        J = self.jacobian(q)
        shape = np.broadcast_shapes(J.shape[:-2], np.shape(v)[:-1])
        return np.zeros(shape + J.shape[-2:] + J.shape[-1:])


@attrs.frozen(eq=False)
class LinearVelocityConstraint(_CheckMixin):
    """Linear or affine velocity constraint Φ(q, v) = A(q)v + a(q) = 0 (paper §3).

    Parameters
    ----------
    A : callable or array_like (m, n)
        ``q`` ↦ ``(..., m, n)``, or a constant matrix.
    a : callable or array_like (m,), optional
        Affine term ``q`` ↦ ``(..., m)``; the constraint is linear when omitted.
    dA : callable, optional
        ``q`` ↦ ``(..., m, n, n)`` with ``[a, i, j] = ∂A_ai/∂q_j`` (on a group the
        left-trivialized ``d/dε A_ai(g·exp(ε e_j))``); finite differences when omitted.
    da : callable, optional
        ``q`` ↦ ``(..., m, n)`` with ``[a, j] = ∂a_a/∂q_j``; finite differences when omitted.

    A single constraint (m = 1) may also be written without the constraint axis:
    ``A(q)`` → ``(..., n)``, ``a(q)`` → ``(...)``, ``dA`` → ``(..., n, n)``, ``da`` →
    ``(..., n)`` (or a constant ``A`` of shape ``(n,)``); it is promoted to ``(..., 1, n)``
    etc.

    Other Parameters
    ----------------
    vectorized : bool
        False if the callables do not broadcast over leading axes (they are then looped).
    derivative_check : bool
        True (default): ``integrate`` compares ``dA`` and ``da`` with central finite
        differences of ``A`` and ``a`` before the first step (:meth:`check_derivatives`).
    """

    A: Any = attrs.field()
    a: Any = attrs.field(default=None)
    dA: Callable | None = attrs.field(default=None)
    da: Callable | None = attrs.field(default=None)
    group: Any = attrs.field(default=None, kw_only=True)
    vectorized: bool = attrs.field(default=True, kw_only=True)
    derivative_check: bool = attrs.field(default=True, kw_only=True, converter=bool)
    is_holonomic = False
    #: Φ is linear (affine) in v, Φ = A(q)v + a(q): :meth:`matrix`, :meth:`matrix_grad`,
    #: :meth:`affine` and :meth:`affine_grad` give A, a and their derivatives, and
    #: ∂Φ/∂v = A(q) does not depend on v (methods read this, never the class name).
    is_linear_in_velocity = True

    def __attrs_post_init__(self) -> None:
        c = _ndim_q(self.group)
        object.__setattr__(self, "A", _as_callable(self.A, "A", self.vectorized, (c,)))
        object.__setattr__(self, "a", _as_callable(self.a, "a", self.vectorized, (c,)))
        object.__setattr__(self, "dA", _as_callable(self.dA, "dA", self.vectorized, (c,)))
        object.__setattr__(self, "da", _as_callable(self.da, "da", self.vectorized, (c,)))
        if not callable(self.A) and np.ndim(self.A) == 1:  # one constraint written as (n,)
            object.__setattr__(self, "A", _readonly(self.A[None, :]))
            if self.a is not None and not callable(self.a) and np.ndim(self.a) == 0:
                object.__setattr__(self, "a", _readonly(self.a.reshape(1)))
        if not callable(self.A) and np.ndim(self.A) != 2:
            raise InputError(
                f"A constant `A` must be an (m, n) matrix (one row per constraint; a single "
                f"constraint may be an (n,) vector), got shape {np.shape(self.A)}."
            )

    @property
    def fd_second_derivatives(self) -> bool:
        """True when ∂Φ_v/∂q = ∂A/∂q is formed by finite differences (a callable ``A``
        without ``dA``)."""
        return callable(self.A) and self.dA is None

    @property
    def is_affine(self) -> bool:
        """True when an affine term a(q) is present."""
        return self.a is not None

    @property
    def m(self) -> int | None:
        """Number of constraints (None until known for a callable A)."""
        return None if callable(self.A) else int(self.A.shape[0])

    def matrix(self, q):
        """A(q), shape (..., m, n)."""
        if callable(self.A):
            return _promote(np.asarray(self.A(q), dtype=float), q, self.group, 2)
        return np.broadcast_to(self.A, _qbatch(q, self.group) + self.A.shape)

    def affine(self, q):
        """a(q), shape (..., m) (zeros for a linear constraint)."""
        if self.a is None:
            A = self.matrix(q)
            return np.zeros(A.shape[:-1])
        if callable(self.a):
            return _promote(np.asarray(self.a(q), dtype=float), q, self.group, 1)
        return np.broadcast_to(self.a, _qbatch(q, self.group) + self.a.shape)

    def matrix_grad(self, q):
        """[a, i, j] = ∂A_ai/∂q_j, shape (..., m, n, n)."""
        q = np.asarray(q, dtype=float)
        if self.dA is not None:
            if callable(self.dA):
                return _promote(np.asarray(self.dA(q), dtype=float), q, self.group, 3)
            dA = self.dA if self.dA.ndim == 3 else self.dA[None]
            return np.broadcast_to(dA, _qbatch(q, self.group) + dA.shape)
        A = self.matrix(q)
        if not callable(self.A):
            return np.zeros(A.shape + A.shape[-1:])
        return fd_jacobian(self.matrix, q, A.shape[-1], perturb=_perturb(self.group),
                           batch_shape=_qbatch(q, self.group), out_ndim=2,
                           scale=None if self.group is not None else q)

    def affine_grad(self, q):
        """[a, j] = ∂a_a/∂q_j, shape (..., m, n)."""
        q = np.asarray(q, dtype=float)
        A = self.matrix(q)
        if self.a is None or not callable(self.a):
            return np.zeros(A.shape)
        if self.da is not None:
            if callable(self.da):
                return _promote(np.asarray(self.da(q), dtype=float), q, self.group, 2)
            return np.broadcast_to(self.da, A.shape)
        return fd_jacobian(self.affine, q, A.shape[-1], perturb=_perturb(self.group),
                           batch_shape=_qbatch(q, self.group), out_ndim=1,
                           scale=None if self.group is not None else q)

    def residual(self, q, v):
        """Φ(q, v) = A(q)v + a(q), shape (..., m)."""
        return np.einsum("...ai,...i->...a", self.matrix(q), v) + self.affine(q)

    velocity_residual = residual

    def dphi_dv(self, q, v):
        """A(q) broadcast against v, shape (..., m, n)."""
        A = self.matrix(q)
        if A.shape[:-2] == np.shape(v)[:-1]:  # already of v's batch shape
            return A
        shape = np.broadcast_shapes(A.shape[:-2], np.shape(v)[:-1])
        return np.broadcast_to(A, shape + A.shape[-2:])

    def dphi_dq(self, q, v):
        """[a, j] = Σ_i ∂A_ai/∂q_j v_i + ∂a_a/∂q_j, shape (..., m, n)."""
        Cq = np.einsum("...aij,...i->...aj", self.matrix_grad(q), v)
        if self.a is None or not callable(self.a):  # ∂a/∂q = 0: nothing to add
            return Cq
        return Cq + self.affine_grad(q)

    def d2phi_dvdq(self, q, v):
        """[a, i, j] = ∂A_ai/∂q_j."""
        H = self.matrix_grad(q)
        shape = np.broadcast_shapes(H.shape[:-3], np.shape(v)[:-1])
        return np.broadcast_to(H, shape + H.shape[-3:])

    def d2phi_dv2(self, q, v):
        """Zero, shape (..., m, n, n)."""
        A = self.matrix(q)
        shape = np.broadcast_shapes(A.shape[:-2], np.shape(v)[:-1])
        return np.zeros(shape + A.shape[-2:] + A.shape[-1:])


@attrs.frozen(eq=False)
class VelocityConstraint(_CheckMixin):
    """General velocity constraint Φ(q, v) = 0 (paper §3, Chetaev).

    Parameters
    ----------
    phi : callable
        ``(q, v)`` ↦ ``(..., m)``.
    dphi_dq, dphi_dv : callable
        ``(q, v)`` ↦ ``(..., m, n)`` (on a group ``dphi_dq`` is left-trivialized).
    d2phi_dvdq, d2phi_dv2 : callable, optional
        ``(..., m, n, n)`` blocks ``[a, i, j] = ∂(∂Φ_a/∂v_i)/∂q_j`` and ``∂²Φ_a/∂v_i∂v_j``;
        finite differences when omitted.
    """

    _phi: Callable = attrs.field()
    _dphi_dq: Callable = attrs.field()
    _dphi_dv: Callable = attrs.field()
    _d2phi_dvdq: Callable | None = attrs.field(default=None)
    _d2phi_dv2: Callable | None = attrs.field(default=None)
    group: Any = attrs.field(default=None, kw_only=True)
    m: int | None = attrs.field(default=None, kw_only=True)
    vectorized: bool = attrs.field(default=True, kw_only=True)
    derivative_check: bool = attrs.field(default=True, kw_only=True, converter=bool)
    is_holonomic = False
    #: General Φ(q, v): ∂Φ/∂v may depend on v (see
    #: :attr:`LinearVelocityConstraint.is_linear_in_velocity`).
    is_linear_in_velocity = False

    def __attrs_post_init__(self) -> None:
        c = _ndim_q(self.group)
        for name in ("_phi", "_dphi_dq", "_dphi_dv", "_d2phi_dvdq", "_d2phi_dv2"):
            f = getattr(self, name)
            if f is not None and not callable(f):
                raise InputError(f"`{name[1:]}` must be callable (q, v) -> array, got {f!r}.")
            object.__setattr__(self, name, _wrap(f, self.vectorized, (c, 1)))

    @property
    def fd_second_derivatives(self) -> bool:
        """True when ∂Φ_v/∂q or ∂Φ_v/∂v is formed by finite differences."""
        return self._d2phi_dvdq is None or self._d2phi_dv2 is None

    def residual(self, q, v):
        """Φ(q, v), shape (..., m)."""
        return np.asarray(self._phi(q, v), dtype=float)

    velocity_residual = residual

    def dphi_dq(self, q, v):
        """∂Φ/∂q, shape (..., m, n)."""
        return np.asarray(self._dphi_dq(q, v), dtype=float)

    def dphi_dv(self, q, v):
        """∂Φ/∂v, shape (..., m, n)."""
        return np.asarray(self._dphi_dv(q, v), dtype=float)

    def _bs(self, q, v):
        return np.broadcast_shapes(_qbatch(q, self.group), np.shape(v)[:-1])

    def d2phi_dvdq(self, q, v):
        """[a, i, j] = ∂(∂Φ_a/∂v_i)/∂q_j, shape (..., m, n, n)."""
        if self._d2phi_dvdq is not None:
            return np.asarray(self._d2phi_dvdq(q, v), dtype=float)
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        return fd_jacobian(lambda qq: self.dphi_dv(qq, v), q, v.shape[-1],
                           perturb=_perturb(self.group), batch_shape=self._bs(q, v),
                           out_ndim=2, scale=None if self.group is not None else q)

    def d2phi_dv2(self, q, v):
        """[a, i, j] = ∂²Φ_a/∂v_i∂v_j, shape (..., m, n, n)."""
        if self._d2phi_dv2 is not None:
            return np.asarray(self._d2phi_dv2(q, v), dtype=float)
        v = np.asarray(v, dtype=float)
        return fd_jacobian(lambda vv: self.dphi_dv(q, vv), v, v.shape[-1],
                           batch_shape=self._bs(q, v), out_ndim=2, scale=v)


def _condition_number(C: np.ndarray) -> np.ndarray:
    """The 2-norm condition number of a stack of square matrices ``(..., k, k)``, as
    ``np.linalg.cond`` (inf or NaN for a singular or non-finite matrix).

    For ``k = 2`` in closed form (an SVD per entry costs more than the rest of the
    multiplier): with ``F = |C|_F^2`` and ``t = 2 |det C| / F``, the singular values satisfy
    ``σ₁² + σ₂² = F`` and ``σ₁ σ₂ = |det C|``, so ``cond = σ₁/σ₂ = (1 + sqrt(1 - t²)) / t``
    (no overflow of ``F²``; the rounding of ``det C`` near singularity, ``eps·cond``
    relative, is that of the SVD's smallest singular value, so the test ``cond > 1e13``
    decides as before).
    """
    if C.shape[-1] == 2:
        a, b, c, d = C[..., 0, 0], C[..., 0, 1], C[..., 1, 0], C[..., 1, 1]
        F = a * a + b * b + c * c + d * d
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            t = 2.0 * np.abs(a * d - b * c) / F
            return (1.0 + np.sqrt(np.maximum(1.0 - t * t, 0.0))) / t
    try:
        return np.linalg.cond(C)
    except np.linalg.LinAlgError:
        return np.asarray(np.inf)


@attrs.frozen(eq=False)
class ConstrainedSystem(_CheckMixin):
    """A Lagrangian system with a holonomic or velocity constraint (paper §3; §6).

    Parameters
    ----------
    system : LagrangianSystem, MechanicalSystem, TrivializedLagrangianSystem, ...
    constraint : HolonomicConstraint, LinearVelocityConstraint or VelocityConstraint
    derivative_check : bool, optional
        False skips the finite-difference check of every user derivative (system and
        constraint) that ``integrate`` runs once before the first step. Each system and
        constraint constructor takes the same keyword for its own derivatives.
    kkt_derivatives : callable, optional
        ``(q, v)`` ↦ ``(dG, df, dc)``, the exact derivatives in the stacked ``x = (q, v)``
        (2n directions; the q-directions left-trivialized on a group) of the data of the
        multiplier's KKT system (:meth:`multiplier_jacobian`): ``dG (..., n, n, 2n)`` of
        G = D22L, ``df (..., n, 2n)`` of the force-free right-hand side f
        (:meth:`force_free_rhs`) and ``dc (..., m, 2n)`` of c = (∂Φ/∂q)·v. They are one
        derivative order above the Newton matrix (third derivatives of L, second
        q-derivatives of Φ). Optional: without it :meth:`multiplier_jacobian` forms the
        blocks it cannot get exactly by central differences and says so
        (:attr:`multiplier_jacobian_fd`). The symbolic front-end
        (:func:`chetaev.discrete_lagrangian.symbolic.from_lagrangian`,
        ``from_trivialized_lagrangian``) supplies it, generated exactly by sympy. A
        user's is compared, once at the first state a method sees, with central
        differences of G, f and c (``DerivativeError``; on a group the v-columns only;
        ``derivative_check=False`` skips it).

    The equations of motion are  d/dt ∂L/∂v − ∂L/∂q = (∂Φ/∂v)ᵀλ, Φ = 0 (holonomic:
    (∂Φ/∂q)ᵀλ, with the hidden constraint ∂Φ/∂q·v = 0). The system methods (``D1L``,
    ``energy``, ``legendre_inv``, ...) are forwarded to ``system``.
    """

    system: Any = attrs.field()
    constraint: Any = attrs.field()
    derivative_check: bool = attrs.field(default=True, kw_only=True, converter=bool)
    kkt_derivatives: Callable | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.kkt_derivatives is not None and not callable(self.kkt_derivatives):
            raise InputError(
                "`kkt_derivatives` must be callable (q, v) -> (dG, df, dc) (see "
                f"ConstrainedSystem.multiplier_jacobian), got {self.kkt_derivatives!r}."
            )
        if self.kkt_derivatives is not None and self.derivative_check and \
                not getattr(self.kkt_derivatives, "generated", False):  # sympy's are exact
            from ._derivcheck import register_first_state_check

            register_first_state_check(self, functools.partial(
                _check_kkt, self.system, self.constraint, self.kkt_derivatives))
        for attr in ("D1L", "D2L", "D22L", "n"):
            if not hasattr(self.system, attr):
                raise InputError(
                    f"`system` must be a Lagrangian system (LagrangianSystem, MechanicalSystem, "
                    f"...); got {type(self.system).__name__} without `{attr}`."
                )
        if not hasattr(self.constraint, "dphi_dv"):
            raise InputError(
                "`constraint` must be a HolonomicConstraint, LinearVelocityConstraint or "
                f"VelocityConstraint, got {type(self.constraint).__name__}."
            )
        group = getattr(self.system, "group", None)
        if getattr(self.constraint, "group", None) is not group:
            object.__setattr__(self, "constraint", attrs.evolve(self.constraint, group=group))

    # --- forwarded system interface -------------------------------------------------
    @property
    def n(self) -> int:
        """Dimension (vector space) or algebra dimension (group)."""
        return self.system.n

    @property
    def group(self) -> Any:
        """The configuration group (None on a vector space)."""
        return getattr(self.system, "group", None)

    @property
    def is_holonomic(self) -> bool:
        """True for a holonomic constraint."""
        return bool(self.constraint.is_holonomic)

    @property
    def is_mechanical(self) -> bool:
        """Forwarded from the system."""
        return bool(self.system.is_mechanical)

    @property
    def fd_second_derivatives(self) -> bool:
        """Forwarded from the system."""
        return bool(getattr(self.system, "fd_second_derivatives", False))

    @property
    def has_force(self) -> bool:
        """Forwarded from the system (issue 20; a property: ``Method.step`` reads it)."""
        return getattr(self.system, "has_force", False) is True

    def __getattr__(self, name: str) -> Any:
        # forward D1L, D2L, D11L, D12L, D21L, D22L, lagrangian, energy, legendre, ...
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.system, name)

    # --- multiplier ---------------------------------------------------------------------
    def multiplier(self, q, v):
        """Consistent continuous multiplier λ(q, v) (paper §3; §6).

        λ = −C⁻¹ [ (∂Φ/∂q) v + (∂Φ/∂v) a₀ ],   C = (∂Φ/∂v) g_L⁻¹ (∂Φ/∂v)ᵀ,

        where a₀ = g_L⁻¹ f(q, v) is the unconstrained acceleration (f = D1L − D21L v, plus
        ad*_η D2L on a group). For a holonomic constraint Φ is its velocity form ∂Φ/∂q·v.
        Raises :class:`SingularMatrixError` if C is singular.

        This is the multiplier of the equations *without* an external force: a system built
        with ``force=`` adds g_L⁻¹ F(q, v, u) to a₀, which depends on the control ``u`` that
        this method does not take. The forced methods compute λ₀ of the forced equations in
        their ``initial_state(..., u=u)``, and ``integrate`` passes them the first control.
        """
        lam, _ = self._multiplier_and_acc(q, v)
        return lam

    def acceleration(self, q, v):
        """Constrained acceleration v̇ (or η̇) = a₀ + g_L⁻¹ (∂Φ/∂v)ᵀ λ(q, v), without an
        external force (see :meth:`multiplier`)."""
        return self._multiplier_and_acc(q, v)[1]

    def _multiplier_and_acc(self, q, v, force=None):
        """``(λ, a)`` of the KKT system G a = f + Bᵀλ, B a = −(∂Φ/∂q)v (f: the force-free
        right-hand side plus ``force``); :meth:`multiplier_jacobian` also takes C."""
        lam, acc, _ = self._kkt_solve(q, v, force)
        return lam, acc

    def _kkt_solve(self, q, v, force=None):
        """``(λ, a, C)`` of the KKT system (:meth:`_multiplier_and_acc`).

        With a constant mass matrix (:func:`~._systems._constant_mass_inverse`: ``D22L = M``,
        ``D21L = 0``) the inverse ``M⁻¹``, formed once with the system, replaces the two
        factorisations of ``G`` per batch entry; its products are summed in one fixed order
        (``np.einsum``, no BLAS), so a member's λ does not depend on the batch size. With
        one constraint ``C`` is ``1 x 1``: its condition number is 1 unless it is zero or
        not finite, and ``λ = -rhs / C`` (what LAPACK's solve computes for ``1 x 1``)."""
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        sysm = self.system
        f = sysm.force_free_rhs(q, v)
        if force is not None:
            f = f + force
        B = self.constraint.dphi_dv(q, v)  # (..., m, n)
        Bq = self.constraint.dphi_dq(q, v)  # (..., m, n)
        Minv = _constant_mass_inverse(sysm)
        if Minv is None:
            G = sysm.D22L(q, v)
            a0 = _solve(G, f[..., None], "∂²L/∂v² (the mass matrix)")[..., 0]
            GinvBt = np.linalg.solve(G, np.swapaxes(B, -1, -2))  # (..., n, m)
        else:  # constant mass: M⁻¹ f and M⁻¹ Bᵀ
            a0 = np.einsum("ik,...k->...i", Minv, f)
            GinvBt = np.einsum("ik,...ak->...ia", Minv, B)
        C = B @ GinvBt
        rhs = np.einsum("...aj,...j->...a", Bq, v) + np.einsum("...ai,...i->...a", B, a0)
        one = C.shape[-1] == 1
        if one:  # cond(C) = 1 for a nonzero finite 1 x 1 C, else inf (as np.linalg.cond)
            c = C[..., 0]
            regular = bool((np.isfinite(c) & (c != 0.0)).all())
            cond = 1.0 if regular else np.inf
        else:
            cond = _condition_number(C)
            regular = bool(np.all(np.isfinite(cond)) and not np.any(cond > 1e13))
        if not regular:
            raise SingularMatrixError(
                "The constraint matrix C = (∂Φ/∂v) g_L⁻¹ (∂Φ/∂v)ᵀ is singular (condition "
                f"number {np.max(cond):.2e}): the constraints are not independent at this "
                "point. Remove redundant constraints or move the initial point."
            )
        lam = -(rhs / c) if one else -np.linalg.solve(C, rhs[..., None])[..., 0]
        acc = a0 + np.einsum("...ia,...a->...i", GinvBt, lam)
        return lam, acc, C

    # --- the multiplier's derivative (issue 20) -----------------------------------------
    @property
    def multiplier_jacobian_fd(self) -> tuple[str, ...]:
        """The blocks of :meth:`multiplier_jacobian` formed by central finite differences
        (empty: it is exact to rounding).

        ``"dG"`` ∂D22L/∂(q, v), ``"df"`` ∂f/∂(q, v) (f the force-free right-hand side),
        ``"dc"`` ∂((∂Φ/∂q)v)/∂q: exact from ``kkt_derivatives=`` or, without it, where they
        follow from the system's own derivatives (a :class:`MechanicalSystem` with a constant
        mass or ``mass_grad`` has an exact ``dG``; with a constant mass and
        ``potential_hess`` an exact ``df``; a trivialized mechanical system likewise; a
        constant ``A`` with a constant or no ``a`` has ``dc = 0``). ``"dB"`` ∂Φ_v/∂(q, v):
        the constraint's second derivatives (its ``hessian``, ``dA``, ``d2phi_dvdq`` /
        ``d2phi_dv2``). ``"dF"``: the force's Jacobians (a force without
        ``force_derivatives``).
        """
        out = []
        if self.kkt_derivatives is None:
            exact = _kkt_exact(self)
            out += [k for k in ("dG", "df", "dc") if k not in exact]
        if getattr(self.constraint, "fd_second_derivatives", True):
            out.append("dB")
        if self.has_force and getattr(self.system, "fd_force_derivatives", False):
            out.append("dF")
        return tuple(out)

    def multiplier_jacobian(self, q, v, u=None) -> np.ndarray:
        """dλ/d(q, v) ``(..., m, 2n)`` of the continuous multiplier (:meth:`multiplier`; for a
        system built with ``force=``, the multiplier of the forced equations at the control
        ``u``), columns ``(q, v)`` (on a group the q-columns are left-trivialized:
        d/dε λ(g·exp(ε e_j), η)|₀).

        λ and the constrained acceleration a solve the KKT system of the constrained
        Euler–Lagrange equations (paper §3, eq. (3.2); on a group the Euler–Poincaré form
        of §6)::

            G a − Bᵀλ = f + F,   B a = −c,
            G = D22L, B = ∂Φ/∂v, f = D1L − D21L v (+ ad*_v D2L), c = (∂Φ/∂q) v.

        Differentiating it in a direction x_k of (q, v) (implicit function theorem: the
        KKT matrix is nonsingular where C = B G⁻¹ Bᵀ is)::

            G da − Bᵀ dλ = r₁ = d(f + F) − dG a + dBᵀ λ,   B da = r₂ = −dc − dB a,
            dλ = C⁻¹ (r₂ − B G⁻¹ r₁).

        ``dB`` comes from the constraint's second derivatives, ``dF`` from
        ``force_jacobians``, and ``dG``, ``df``, ``dc`` (one derivative order above the
        Newton matrix) from ``kkt_derivatives=`` when the system has it: **for exact
        derivatives build the system with** :func:`chetaev.discrete_lagrangian.symbolic.
        from_lagrangian` (or ``from_trivialized_lagrangian``), which generates them with
        sympy, **or pass** ``kkt_derivatives=`` (and the constraint's second derivatives,
        and ``force_derivatives``). Otherwise the blocks listed in
        :attr:`multiplier_jacobian_fd` are central differences (one broadcast call each,
        ~1e-10 relative).

        Raises
        ------
        InputError
            ``kkt_derivatives`` returned something else than three arrays of the shapes
            above.
        SingularMatrixError
            C singular (dependent constraints), as :meth:`multiplier`.
        """
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        sysm, con = self.system, self.constraint
        forced = self.has_force
        F = sysm.generalized_force(q, v, u) if forced else None
        lam, acc, C = self._kkt_solve(q, v, F)
        G = np.asarray(sysm.D22L(q, v), dtype=float)
        B = np.asarray(con.dphi_dv(q, v), dtype=float)
        n, m = G.shape[-1], B.shape[-2]
        batch = np.broadcast_shapes(lam.shape[:-1], acc.shape[:-1], G.shape[:-2], B.shape[:-2])
        dG, df, dc = self._kkt_blocks(q, v, batch, n, m)
        if forced:
            Fq, Fv, _ = sysm.force_jacobians(q, v, u)
            df = df + np.concatenate(np.broadcast_arrays(Fq, Fv), axis=-1)
        dB = np.concatenate(np.broadcast_arrays(np.asarray(con.d2phi_dvdq(q, v), dtype=float),
                                                np.asarray(con.d2phi_dv2(q, v), dtype=float)),
                            axis=-1)
        r1 = (df - np.einsum("...ijk,...j->...ik", dG, acc)
              + np.einsum("...aik,...a->...ik", dB, lam))
        r2 = -dc - np.einsum("...aik,...i->...ak", dB, acc)
        return np.linalg.solve(C, r2 - B @ np.linalg.solve(G, r1))

    def _kkt_blocks(self, q, v, batch, n: int, m: int):
        """``(dG, df, dc)`` of :meth:`multiplier_jacobian`: from ``kkt_derivatives``, from
        the system's own derivatives where they give them exactly, else central
        differences."""
        shapes = ((*batch, n, n, 2 * n), (*batch, n, 2 * n), (*batch, m, 2 * n))
        if self.kkt_derivatives is not None:
            out = self.kkt_derivatives(q, v)
            if not isinstance(out, (tuple, list)) or len(out) != 3:
                raise InputError(
                    "`kkt_derivatives` must return the tuple (dG, df, dc) of shapes "
                    f"(..., {n}, {n}, {2 * n}), (..., {n}, {2 * n}), (..., {m}, {2 * n}); got "
                    f"{type(out).__name__}."
                )
            res = []
            for name, blk, shape in zip(("dG", "df", "dc"), out, shapes):
                blk = np.asarray(blk, dtype=float)
                try:
                    res.append(np.broadcast_to(blk, shape))
                except ValueError:
                    raise InputError(
                        f"`kkt_derivatives` must return {name} of shape (..., "
                        f"{', '.join(map(str, shape[len(batch):]))}) (batch {batch}), got "
                        f"shape {blk.shape}."
                    ) from None
            return tuple(res)
        sysm, con, group = self.system, self.constraint, self.group
        exact = _kkt_exact(self)
        perturb = _perturb(group)
        qscale = None if group is not None else q

        def fd_q(fun, out_ndim):
            return fd_jacobian(lambda qq: fun(qq, v), q, n, perturb=perturb, batch_shape=batch,
                               out_ndim=out_ndim, scale=qscale)

        def fd_qv(fun, out_ndim):
            Jv = fd_jacobian(lambda vv: fun(q, vv), v, n, batch_shape=batch, out_ndim=out_ndim,
                             scale=v)
            return np.concatenate(np.broadcast_arrays(fd_q(fun, out_ndim), Jv), axis=-1)

        zeros = np.zeros((*batch, n, n))
        if "dG" not in exact:
            dG = fd_qv(sysm.D22L, 2)
        elif group is None:
            dG = np.concatenate(np.broadcast_arrays(np.asarray(sysm.dM(q), dtype=float),
                                                    np.zeros((*batch, n, n, n))), axis=-1)
        else:
            dG = np.zeros(shapes[0])
        if "df" not in exact:
            df = fd_qv(sysm.force_free_rhs, 1)
        else:
            fq = -np.asarray(sysm.hessV(q), dtype=float)
            fv = zeros
            if group is not None:  # f_η of ad*_η 𝕀η: ad(e_k)ᵀ𝕀η + ad(η)ᵀ𝕀e_k
                inertia = np.asarray(sysm.inertia, dtype=float)
                adk = np.asarray(group.ad(np.eye(n), check=False), dtype=float)
                fv = (np.einsum("kji,...j->...ik", adk, v @ inertia.T)
                      + np.swapaxes(np.asarray(group.ad(v, check=False), dtype=float),
                                    -1, -2) @ inertia)
            df = np.concatenate(np.broadcast_arrays(fq, fv), axis=-1)
        # c = (∂Φ/∂q)v: ∂c/∂v exact from the constraint's first and mixed derivatives
        Bq = np.asarray(con.dphi_dq(q, v), dtype=float)
        cv = np.einsum("...akj,...j->...ak", np.asarray(con.d2phi_dvdq(q, v), dtype=float),
                       v) + Bq
        if "dc" in exact:
            cq = np.zeros((*batch, m, n))
        else:
            cq = fd_q(lambda qq, vv: np.einsum("...aj,...j->...a", con.dphi_dq(qq, vv), vv), 1)
        dc = np.concatenate(np.broadcast_arrays(cq, cv), axis=-1)
        return (np.broadcast_to(dG, shapes[0]), np.broadcast_to(df, shapes[1]),
                np.broadcast_to(dc, shapes[2]))

    # --- residuals and checks ------------------------------------------------------------
    def residual(self, q, v):
        """Constraint residual: Φ(q) (holonomic) or Φ(q, v) (velocity constraint)."""
        return self.constraint.residual(q, v)

    def velocity_residual(self, q, v):
        """Velocity-level residual: ∂Φ/∂q·v (holonomic) or Φ(q, v)."""
        return self.constraint.velocity_residual(q, v)

    def check_initial(self, q0, v0, tol: float = 1e-10) -> float:
        """Check that (q0, v0) lies on the constraint set; return the max violation.

        Holonomic: |Φ(q0)| ≤ tol and |∂Φ/∂q(q0)·v0| ≤ tol·max(1, |v0|);
        velocity constraint: |Φ(q0, v0)| ≤ tol·max(1, |v0|) (the velocity scale enters only
        the residuals that are linear in v0).
        Raises :class:`ConstraintViolationError` otherwise. It first verifies the user's
        callables and derivatives once per system (:meth:`check_derivatives`; cached), so
        a method's ``initial_state`` called without ``integrate`` is covered too.
        """
        from ._derivcheck import verify_before_first_step

        verify_before_first_step(self, q0, v0)
        q0 = np.asarray(q0, dtype=float)
        v0 = np.asarray(v0, dtype=float)
        vscale = max(1.0, float(np.max(np.abs(v0)))) if v0.size else 1.0
        r = np.max(np.abs(self.constraint.residual(q0, v0)))
        pscale = 1.0 if self.is_holonomic else vscale
        if r > tol * pscale:
            what = "Φ(q0)" if self.is_holonomic else "Φ(q0, v0)"
            how = (
                "Project q0 onto the constraint set Φ(q) = 0"
                if self.is_holonomic
                else "Choose v0 with Φ(q0, v0) = 0 (e.g. project v0 onto the kernel of ∂Φ/∂v)"
            )
            raise ConstraintViolationError(
                f"Initial data violate the constraint: max |{what}| = {r:.2e} > tol = "
                f"{tol * pscale:.1e}. {how}, or pass a larger tolerance."
            )
        rv = 0.0
        if self.is_holonomic:
            rv = float(np.max(np.abs(self.constraint.velocity_residual(q0, v0))))
            if rv > tol * vscale:
                raise ConstraintViolationError(
                    "Initial velocity is not tangent to the constraint set: max |∂Φ/∂q(q0)·v0| "
                    f"= {rv:.2e} > tol = {tol * vscale:.1e}. Project v0 onto the kernel of "
                    "∂Φ/∂q(q0)."
                )
        return float(max(r, rv))
