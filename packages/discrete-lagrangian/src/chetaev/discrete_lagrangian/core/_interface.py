"""The system interface: what a method reads from a system, built once per system.

A method needs from a system only a handful of arrays (issue 15, "A system interface"): the
derivatives of the Lagrangian L(q, v) (eq. (1) of the discrete-Lagrangian paper; §3 of the
nonholonomic papers) and its second derivatives, the inverse Legendre map, the metric used by
projectors (the GNI paper's (3)), the constraint Φ(q, v) and its derivatives (holonomic, or
velocity constraints Φ = A(q)v + a(q), paper §3), and the configuration group. This module
collects them in one frozen record, :class:`SystemInterface`, whose fields are plain callables
(arrays in, arrays out, broadcasting over leading stage/batch axes) and explicit capability
flags, so that no method probes a system with ``hasattr`` at its call sites.

:func:`interface_of` builds the record once per system object and caches it (keyed by the
object's identity, released with the object), so that methods can call it at every step.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from .._util._errors import InputError

__all__ = ["SystemInterface", "interface_of"]

Array = np.ndarray

@attrs.frozen(eq=False)
class SystemInterface:
    """What a stage of a method reads from a system: plain arrays in, plain arrays out.

    Every callable broadcasts over leading axes ``(...)`` (stages, batch members) and returns
    arrays of the shapes below (``n`` the dimension, or the algebra dimension on a group;
    ``m`` the number of constraints). A field is ``None`` when the system does not provide it;
    the boolean fields state the capabilities explicitly.

    Attributes
    ----------
    n : int
        Dimension of the configuration space (of the Lie algebra on a group).
    group : object or None
        The configuration group (a ``chetaev.liegroups`` group with its retractions), or
        None on a vector space.
    system : object
        The unconstrained Lagrangian system the derivatives come from.
    lagrangian : callable or None
        ``L(q, v)`` ``(...)``.
    D1L, D2L : callable
        ``∂L/∂q``, ``∂L/∂v`` ``(..., n)``.
    D11L, D12L, D21L, D22L : callable or None
        Second derivatives ``(..., n, n)``: ``D11L = ∂²L/∂q²``, ``D12L[i, j] = ∂²L/∂q_i∂v_j``,
        ``D21L = D12Lᵀ``, ``D22L = ∂²L/∂v²`` (the mass matrix of a mechanical system); analytic
        or the system's own finite differences. ``None`` unless ``has_second_derivatives``.
    has_second_derivatives : bool
        True when all four second-derivative blocks are available.
    legendre, legendre_inv : callable or None
        ``p = FL(q, v)`` and ``v = FL⁻¹(q, p)`` ``(..., n)`` (the Hamiltonian view of the
        system: a Hamiltonian method reads ``D1L`` at ``v = FL⁻¹(q, p)``, since
        ``∂H/∂q = −∂L/∂q`` there).
    metric : callable or None
        ``G(q)`` ``(..., n, n)``, broadcast to the batch shape of ``q``: the mass matrix
        ``M(q)`` of a mechanical system, else ``∂²L/∂v²`` at ``v = 0`` (the metric of
        ``L = ½ vᵀG(q)v − V(q)``); ``None`` when neither exists.
    mass, mass_inv : ndarray or None
        The constant ``(n, n)`` mass matrix and its inverse (``L = ½ vᵀMv − V(q)``), else None
        (read from a system with ``constant_mass``, or from a stage view such as nh's
        ``StageModel`` that declares ``constant_D21L_zero`` and its ``mass``).
    constraint : object or None
        The constraint object, None for an unconstrained system.
    constraint_kind : {None, "holonomic", "linear_velocity", "velocity"}
    m : int or None
        Number of constraints (0 without constraint; None while unknown for a callable A).
    phi, phi_q, phi_v : callable or None
        ``Φ(q, v)`` ``(..., m)``, ``∂Φ/∂q`` and ``∂Φ/∂v`` ``(..., m, n)`` (for a holonomic
        constraint, of its velocity form ``∂φ/∂q·v``).
    phi_vq, phi_vv : callable or None
        ``[a, i, j] = ∂²Φ_a/∂v_i∂q_j`` and ``∂²Φ_a/∂v_i∂v_j`` ``(..., m, n, n)``.
    A, affine, A_grad, affine_grad : callable or None
        For a constraint linear or affine in the velocity, ``Φ = A(q)v + a(q)``: ``A(q)``
        ``(..., m, n)``, ``a(q)`` ``(..., m)`` (``affine`` is None for a linear constraint),
        ``A_grad[a, i, j] = ∂A_ai/∂q_j`` ``(..., m, n, n)``, ``affine_grad`` ``(..., m, n)``.
    multiplier : callable or None
        The consistent continuous multiplier ``λ(q, v)`` ``(..., m)`` of a constrained system
        (it refers to the constrained system weakly: the record does not keep it alive).
    potential, potential_grad, potential_hess : callable or None
        For a mechanical system ``L = ½ vᵀM(q)v − V(q)`` (``ℓ = ½ ηᵀ𝕀η − V(g)`` on a group):
        ``V(q)`` ``(...)``, ``∇V(q)`` ``(..., n)`` and ``∇²V(q)`` ``(..., n, n)`` (on a group the
        left-trivialized gradient and Hessian); None for a general Lagrangian. Read by the
        discretization-map methods, whose discrete Lagrangians are quadratures of ``V``
        (discretization-maps paper §5, §6).
    inertia, inertia_inv : ndarray or None
        The constant inertia tensor ``𝕀`` ``(n, n)`` of a left-trivialized mechanical system
        on a group and its inverse (the group counterpart of ``mass``; None on a vector space).
    holonomic_phi, holonomic_jacobian, holonomic_hessian : callable or None
        For a holonomic constraint, its position level: ``φ(q)`` ``(..., m)``, ``G(q) = ∂φ/∂q``
        ``(..., m, n)`` and ``[a, i, j] = ∂G_ai/∂q_j`` ``(..., m, n, n)`` (left-trivialized on a
        group); None for a velocity constraint. (``phi``, ``phi_v``, ``phi_vq`` are the velocity
        form ``G(q)v`` and its derivatives.)

    Notes
    -----
    **Building nh's stage model from it.** ``chetaev.nh_integrators``' ``StageModel`` (the 21
    fields its step equations read) is a projection of this record: ``D1L … D22L``,
    ``legendre_inv``, ``phi``, ``phi_q``, ``phi_v``, ``A``, ``affine``, ``A_grad``,
    ``affine_grad``, ``mass``, ``mass_inv`` map one to one; ``phi_v_lam_q(q, v, λ) =
    einsum('...aij,...a->...ij', phi_vq(q, v), λ)``, likewise ``phi_v_lam_v`` from ``phi_vv``
    (None when ``constraint_kind == "linear_velocity"``, which replaces the class-name test of
    ``nh/_adapter.py``); ``constant_D21L_zero`` is ``mass is not None``. Its constant-mass fast
    path (``D2L = v Mᵀ``, ``FL⁻¹(p) = p M⁻ᵀ``) is a choice of the stage model built on top,
    reading ``mass`` and ``mass_inv``.

    **Where other front-ends plug in.** A symbolic or compiled system provides the same
    callables; :func:`interface_of` only reads the system's public methods, once.
    """

    n: int
    group: Any
    system: Any
    D1L: Callable[[Array, Array], Array]
    D2L: Callable[[Array, Array], Array]
    lagrangian: Callable[[Array, Array], Array] | None = None
    D11L: Callable[[Array, Array], Array] | None = None
    D12L: Callable[[Array, Array], Array] | None = None
    D21L: Callable[[Array, Array], Array] | None = None
    D22L: Callable[[Array, Array], Array] | None = None
    has_second_derivatives: bool = False
    legendre: Callable[[Array, Array], Array] | None = None
    legendre_inv: Callable[[Array, Array], Array] | None = None
    metric: Callable[[Array], Array] | None = None
    mass: Array | None = None
    mass_inv: Array | None = None
    constraint: Any = None
    constraint_kind: str | None = None
    m: int | None = 0
    phi: Callable[[Array, Array], Array] | None = None
    phi_q: Callable[[Array, Array], Array] | None = None
    phi_v: Callable[[Array, Array], Array] | None = None
    phi_vq: Callable[[Array, Array], Array] | None = None
    phi_vv: Callable[[Array, Array], Array] | None = None
    A: Callable[[Array], Array] | None = None
    affine: Callable[[Array], Array] | None = None
    A_grad: Callable[[Array], Array] | None = None
    affine_grad: Callable[[Array], Array] | None = None
    multiplier: Callable[[Array, Array], Array] | None = None
    # -- the mechanical split and the holonomic constraint at position level (read by the
    #    discretization-map methods); built by _mechanical_fields ---------------------------
    potential: Callable[[Array], Array] | None = None
    potential_grad: Callable[[Array], Array] | None = None
    potential_hess: Callable[[Array], Array] | None = None
    inertia: Array | None = None
    inertia_inv: Array | None = None
    holonomic_phi: Callable[[Array], Array] | None = None
    holonomic_jacobian: Callable[[Array], Array] | None = None
    holonomic_hessian: Callable[[Array], Array] | None = None
    # -- external forces and controls (issue 20) ------------------------------------------------
    #: ``F(q, v, u)`` ``(..., n)``, the external generalized force (left-trivialized on a
    #: group), ``u`` the control ``(..., n_controls)``; None for an unforced system.
    force: Callable[[Array, Array, Array], Array] | None = None
    #: ``(q, v, u) -> (F_q, F_v, F_u)``, ``(..., n, n)``, ``(..., n, n)``, ``(..., n, n_u)``:
    #: exact (``force_derivatives``) or the system's central differences; None when unforced.
    force_jacobians: Callable[[Array, Array, Array], tuple] | None = None
    #: Number of control inputs ``n_u`` (0: ``u`` is an empty ``(..., 0)`` array).
    n_controls: int = 0
    # -- what the Lie-group PRK engine reads besides the above (``core/_lie_prk.py``, paper
    #    Theorem 6.1, eqs. (24)-(27); issue 15) -----------------------------------------------
    #: True when ``D11L … D22L`` are closed forms (not the system's finite differences): the
    #: engines use their analytic Newton Jacobian only then.
    analytic_second_derivatives: bool = False
    #: ``ad(e_k)`` ``(n, n, n)`` on the algebra basis of ``group`` (read-only), None on a
    #: vector space; set from ``group``.
    ad_basis: Array | None = attrs.field(default=None, init=False)
    #: The system's compiled-backend kernels (``core._kernels.KernelSet``: scalar source text
    #: from the symbolic front-end, issue 17), None for a system of plain callables.
    kernels: Any = None

    def __attrs_post_init__(self) -> None:
        group = self.group
        if group is not None and hasattr(group, "ad"):
            d = int(group.dim)
            basis = np.asarray(group.ad(np.eye(d)), dtype=float)
            basis.setflags(write=False)
            object.__setattr__(self, "ad_basis", basis)

    def coadjoint_matrix(self, f: Array) -> Array:
        """Matrix ``(..., n, n)`` of ``ζ ↦ ad(ζ)ᵀ f = ad*_ζ f`` for covectors ``f``
        ``(..., n)`` on the group (the δÑ and δμ terms of the Lie engine's Jacobian)."""
        return np.einsum("kba,...b->...ak", self.ad_basis, f)

    @property
    def is_constrained(self) -> bool:
        """True when the system carries a constraint."""
        return self.constraint_kind is not None

    @property
    def linear_in_velocity(self) -> bool:
        """True for a constraint ``A(q)v + a(q) = 0`` (``A`` and ``affine`` are set)."""
        return self.constraint_kind == "linear_velocity"


def _metric_of(system: Any) -> Callable[[Array], Array] | None:
    """``G(q)`` broadcast to the batch shape of ``q``: ``M(q)`` or ``∂²L/∂v²(q, 0)``."""
    if hasattr(system, "M"):
        raw = system.M
    elif hasattr(system, "D22L"):
        d22 = system.D22L

        def raw(q):
            return d22(q, np.zeros_like(q))
    else:
        return None

    def metric(q: Array) -> Array:
        q = np.asarray(q, dtype=float)
        G = np.asarray(raw(q), dtype=float)
        return np.broadcast_to(G, q.shape[:-1] + G.shape[-2:])

    return metric


def _constraint_fields(con: Any) -> dict[str, Any]:
    """The constraint's part of the record (see :class:`SystemInterface`)."""
    if con is None:
        return {}
    if getattr(con, "is_holonomic", False):
        kind = "holonomic"
    elif hasattr(con, "matrix") and hasattr(con, "is_affine"):
        kind = "linear_velocity"
    else:
        kind = "velocity"
    out: dict[str, Any] = {
        "constraint": con,
        "constraint_kind": kind,
        "m": getattr(con, "m", None),
        "phi": getattr(con, "velocity_residual", None) or con.residual,
        "phi_q": getattr(con, "dphi_dq", None),
        "phi_v": con.dphi_dv,
        "phi_vq": getattr(con, "d2phi_dvdq", None),
        "phi_vv": getattr(con, "d2phi_dv2", None),
    }
    if kind == "linear_velocity":
        out.update(A=con.matrix, A_grad=con.matrix_grad)
        if con.is_affine:
            out.update(affine=con.affine, affine_grad=con.affine_grad)
    return out


def _multiplier_of(obj: Any) -> Callable[[Array, Array], Array] | None:
    """``obj.multiplier`` through a weak proxy, so that the cached record does not keep the
    constrained system alive (the cache entry lives exactly as long as the system)."""
    if not hasattr(obj, "multiplier"):
        return None
    try:
        proxy = weakref.proxy(obj)
    except TypeError:
        return obj.multiplier

    def multiplier(q: Array, v: Array) -> Array:
        return proxy.multiplier(q, v)

    return multiplier


def _mechanical_fields(inner: Any, con: Any) -> dict[str, Any]:
    """The potential, the group inertia and the position-level holonomic constraint (the
    fields after ``multiplier`` in :class:`SystemInterface`)."""
    out: dict[str, Any] = {}
    if bool(getattr(inner, "is_mechanical", False)):
        out.update(potential=getattr(inner, "V", None),
                   potential_grad=getattr(inner, "gradV", None),
                   potential_hess=getattr(inner, "hessV", None))
        if getattr(inner, "group", None) is not None and hasattr(inner, "inertia"):
            inertia = np.array(inner.inertia, dtype=float)
            out.update(inertia=inertia, inertia_inv=np.linalg.inv(inertia))
    if con is not None and getattr(con, "is_holonomic", False):
        out.update(holonomic_phi=con.phi, holonomic_jacobian=con.jacobian,
                   holonomic_hessian=con.hessian)
    return out


def _build(obj: Any) -> SystemInterface:
    """Read the public methods of ``obj`` (a system or a ``ConstrainedSystem``) once."""
    inner = getattr(obj, "system", None)
    con = getattr(obj, "constraint", None)
    if inner is None or con is None:
        inner, con = obj, None
    for attr in ("D1L", "D2L", "n"):
        if not hasattr(inner, attr):
            raise InputError(
                f"`system` must be a Lagrangian system (LagrangianSystem, MechanicalSystem, "
                f"ConstrainedSystem, ...) with D1L, D2L and n; got {type(obj).__name__} "
                f"without `{attr}`."
            )
    if con is not None and not hasattr(con, "dphi_dv"):
        raise InputError(
            "`constraint` must be a HolonomicConstraint, LinearVelocityConstraint or "
            f"VelocityConstraint, got {type(con).__name__}."
        )
    second = all(hasattr(inner, nm) for nm in ("D11L", "D12L", "D21L", "D22L"))
    mass = mass_inv = None
    if bool(getattr(inner, "constant_mass", False)) or (
            bool(getattr(inner, "constant_D21L_zero", False))
            and getattr(inner, "mass", None) is not None):  # a stage view declaring its mass
        mass = np.array(inner.mass, dtype=float)
        mass_inv = np.linalg.inv(mass)
    return SystemInterface(
        n=int(inner.n),
        group=getattr(inner, "group", None),
        system=inner,
        D1L=inner.D1L,
        D2L=inner.D2L,
        lagrangian=getattr(inner, "lagrangian", None),
        D11L=inner.D11L if second else None,
        D12L=inner.D12L if second else None,
        D21L=inner.D21L if second else None,
        D22L=inner.D22L if second else None,
        has_second_derivatives=second,
        analytic_second_derivatives=second and not getattr(inner, "fd_second_derivatives", True),
        legendre=getattr(inner, "legendre", None),
        legendre_inv=getattr(inner, "legendre_inv", None),
        metric=_metric_of(inner),
        mass=mass,
        mass_inv=mass_inv,
        multiplier=_multiplier_of(obj) if con is not None else None,
        **_constraint_fields(con),
        **_mechanical_fields(inner, con),
        **_force_fields(inner),
        kernels=_kernels_of(obj),
    )


def _kernels_of(obj: Any) -> Any:
    """The registered compiled-backend kernels of ``obj`` (issue 17), or None."""
    from ._kernels import kernels_of

    return kernels_of(obj)


def _force_fields(inner: Any) -> dict[str, Any]:
    """The force part of the record (issue 20): empty for an unforced system."""
    if not getattr(inner, "has_force", False):
        return {}
    return {"force": inner.generalized_force, "force_jacobians": inner.force_jacobians,
            "n_controls": int(inner.n_controls)}


_CACHE: dict[int, tuple[weakref.ref, SystemInterface]] = {}


def _forget(key: int, ref: weakref.ref, cache: dict = _CACHE) -> None:
    """Drop the cache entry of a collected system (only if it is still that system's).

    The cache is bound as a default argument: a system collected at interpreter exit, after
    the module's globals are cleared, must still find it."""
    hit = cache.get(key)
    if hit is not None and hit[0] is ref:
        del cache[key]


def interface_of(system: Any) -> SystemInterface:
    """The :class:`SystemInterface` of ``system``, built on first use and cached.

    Parameters
    ----------
    system : LagrangianSystem, MechanicalSystem, ConstrainedSystem, ... or SystemInterface
        Any object with the system protocol (``D1L``, ``D2L``, ``n``; optionally the second
        derivatives, ``M``, ``legendre_inv``, ``constraint``...). A ``SystemInterface`` is
        returned unchanged.

    Returns
    -------
    SystemInterface
        The same object on every call for the same system (the cache holds a weak reference
        to the system and forgets the entry when the system is collected; an object that
        cannot be weakly referenced gets a fresh record on each call).

    Raises
    ------
    InputError
        If ``system`` lacks ``D1L``, ``D2L`` or ``n``.
    """
    if isinstance(system, SystemInterface):
        return system
    key = id(system)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is system:
        return hit[1]
    iface = _build(system)
    try:
        ref = weakref.ref(system, lambda r, key=key: _forget(key, r))
    except TypeError:
        return iface
    _CACHE[key] = (ref, iface)
    return iface
