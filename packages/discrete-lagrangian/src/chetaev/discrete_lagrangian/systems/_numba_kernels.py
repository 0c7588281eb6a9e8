"""Compiled-backend kernels from the user's own numba functions (issue 17).

A system whose callables are numba-compiled functions (``@numba.njit``; ``vectorized=False``
when they take one configuration) gets the scalar kernels of the compiled backend without
the symbolic front-end: each kernel ``NAME(q, v, out)`` of
:class:`~chetaev.discrete_lagrangian.core._kernels.KernelSet` is generated as a few lines
that call the user's functions and write ``out``; the functions themselves are bound as
globals of the generated module (:func:`~chetaev.discrete_lagrangian.core._kernels.
user_function`), so numba compiles the calls into the step.

Covered (every callable the kernels need must be a numba function, the second derivatives
included: finite differences have no compiled form):

- :class:`MechanicalSystem` with a constant mass matrix (``potential_grad``,
  ``potential_hess``) and :class:`LagrangianSystem` (``dL_dq``, ``dL_dv``, ``d2L_dv2``,
  ``d2L_dvdq``, ``d2L_dq2``; its Lagrangian is not known to be quadratic in v, so the
  methods that need an explicit inverse Legendre map decline it);
- wrapped in a :class:`ConstrainedSystem` with a :class:`HolonomicConstraint` (``phi``,
  ``jacobian``, ``hessian``), a :class:`VelocityConstraint` (``phi``, ``dphi_dq``,
  ``dphi_dv``, ``d2phi_dvdq``, ``d2phi_dv2``) or a :class:`LinearVelocityConstraint`
  (``A``, ``a``, constant or numba functions, with ``dA``, ``da`` for the callable ones);
- on a matrix Lie group, :class:`TrivializedMechanicalSystem` (``potential_grad``,
  ``potential_hess``, left-trivialized, functions of the ``K × K`` element ``g``), alone or
  with a velocity constraint as above (left-trivialized ``dphi_dq``, ``dA``): the kernels
  of the compiled Lie engines (``lt_force``, ``lt_force_jac``, ``phi_g``, ...), which pass
  the element to the functions as ``q.reshape((K, K))``.

The kernels evaluate the same functions as the numpy path, so the first-state derivative
check of ``integrate`` covers both. When they are built, each generated kernel is run in
plain Python at two seeded points and compared with the system's own method (a guard on
the generated code and on outputs of an unexpected layout); a system that fails it keeps
the numpy path, and ``backend="numba"`` says why.
"""

from __future__ import annotations

import hashlib
import inspect
import types
from typing import Any

import attrs
import numpy as np

__all__ = ["numba_kernels"]

_SEED = 20261127


def _is_numba(f: Any) -> bool:
    """Whether ``f`` is a numba-compiled function (a dispatcher with ``py_func``)."""
    return type(f).__module__.startswith("numba.") and callable(getattr(f, "py_func", None))


def _user(f: Any) -> Any:
    """The user's callable behind a system attribute (unwrapping the batch loop, not the
    numba dispatcher, which also has ``__wrapped__``)."""
    return inspect.unwrap(f, stop=_is_numba) if callable(f) else f


def _digest_value(h: Any, value: Any, seen: set) -> None:
    """Feed what numba freezes of ``value`` (a global or closure value) into ``h``."""
    if _is_numba(value):
        _digest_function(h, value.py_func, seen)
        h.update(repr(sorted(getattr(value, "targetoptions", {}).items())).encode())
    elif isinstance(value, np.ndarray):
        h.update(repr((value.dtype.str, value.shape)).encode() + value.tobytes())
    elif isinstance(value, (bool, int, float, complex, str, bytes, tuple, type(None))):
        h.update(repr(value).encode())
    elif isinstance(value, types.ModuleType):
        h.update(value.__name__.encode())
    else:
        h.update(type(value).__qualname__.encode())


def _digest_code(h: Any, code: types.CodeType) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _digest_code(h, c)
        else:
            h.update(repr(c).encode())


def _digest_function(h: Any, fn: Any, seen: set) -> None:
    if id(fn) in seen:
        return
    seen.add(id(fn))
    h.update(f"{fn.__module__}.{fn.__qualname__}".encode())
    code = fn.__code__
    _digest_code(h, code)
    for cell in fn.__closure__ or ():
        _digest_value(h, cell.cell_contents, seen)
    for name in code.co_names:
        if name in fn.__globals__:
            h.update(name.encode())
            _digest_value(h, fn.__globals__[name], seen)


def fingerprint(f: Any) -> str:
    """A digest of what numba compiles of ``f``: its bytecode, constants, closure values,
    the global scalars and arrays it reads (numba freezes them) and, recursively, the numba
    functions it calls. It names ``f``'s binding in the generated module, so a change to any
    of these gives a new module (and a new on-disk cache entry)."""
    h = hashlib.sha256()
    _digest_value(h, f, set())
    return h.hexdigest()[:20]


class _Emitter:
    """Source text of the kernels: user-function bindings, constant arrays, functions."""

    def __init__(self) -> None:
        self.binds: dict[str, Any] = {}
        self.lines: list[str] = []
        self.defs: list[str] = []
        self.names: list[str] = []

    def fn(self, f: Any) -> str:
        """The module-level name bound to the user's numba function ``f``."""
        key = fingerprint(f)
        name = f"_ku_{key}"
        if name not in self.binds:
            self.binds[name] = f
            self.lines.append(f"{name} = _user_function({key!r})")
        return name

    def const(self, tag: str, arr: np.ndarray) -> str:
        name = f"_ku_{tag}"
        self.lines.append(f"{name} = np.array({np.asarray(arr, float).tolist()!r})")
        return name

    def kernel(self, name: str, body: list[str]) -> None:
        self.names.append(name)
        self.defs.append("\n".join([f"def {name}(q, v, out):", *("    " + b for b in body)]))

    def source(self) -> str:
        head = ["from chetaev.discrete_lagrangian.core._kernels import user_function as "
                "_user_function", *self.lines]
        return "\n".join(head) + "\n\n\n" + "\n\n\n".join(self.defs) + "\n"


def _loops(shape: tuple[int, ...], stmt: str) -> list[str]:
    """Nested loops over ``shape`` (indices ``i0, i1, ...``) around ``stmt``."""
    lines = []
    for d, size in enumerate(shape):
        lines.append("    " * d + f"for i{d} in range({size}):")
    lines.append("    " * len(shape) + stmt)
    return lines


def _ix(*idx: str) -> str:
    return ", ".join(idx)


def _copy(call: str, shape: tuple[int, ...], sign: str = "", src_ndim: int | None = None,
          transpose: bool = False) -> list[str]:
    """``out = sign * call`` (``transpose``: its last two axes swapped; ``src_ndim`` one
    less than ``len(shape)``: a single constraint written without its axis)."""
    idx = [f"i{d}" for d in range(len(shape))]
    src = idx[::-1] if transpose else idx
    if src_ndim is not None and src_ndim == len(shape) - 1:
        src = src[1:]
    return ["_r = " + call, *_loops(shape, f"out[{_ix(*idx)}] = {sign}_r[{_ix(*src)}]")]


def _zeros(shape: tuple[int, ...]) -> list[str]:
    return _loops(shape, f"out[{_ix(*(f'i{d}' for d in range(len(shape))))}] = 0.0")


class _NoKernels(Exception):
    """Why a system gets no numba-route kernels (the message)."""


def _need(obj: Any, attr: str, label: str) -> Any:
    f = _user(getattr(obj, attr))
    if f is None:
        raise _NoKernels(f"`{label}` is not given (its finite-difference form has no "
                         "compiled counterpart)")
    if not _is_numba(f):
        raise _NoKernels(f"`{label}` is a plain Python callable, not a numba function")
    return f


@attrs.frozen
class _Site:
    """Where the kernels live: ``n`` (dimension, or the algebra's on a group), ``arg`` (how a
    kernel passes its flat ``q`` to the user's functions: ``q``, or the ``K × K`` group
    element ``q.reshape((K, K))``), ``wrt`` (the configuration letter of the constraint
    kernels' names: ``phi_q``, or ``phi_g`` on a group) and ``points``, the trial points
    ``(q, v)`` (``q`` a group element on a group)."""

    n: int
    arg: str
    wrt: str
    points: list


def _site(group: Any, n: int) -> _Site:
    rng = np.random.default_rng(_SEED)
    if group is None:
        pts = [(0.5 * rng.standard_normal(n), 0.5 * rng.standard_normal(n)) for _ in range(2)]
        return _Site(n, "q", "q", pts)
    k = int(group.shape[0])
    pts = [(np.asarray(group.exp(0.5 * rng.standard_normal(n)), dtype=float),
            0.5 * rng.standard_normal(n)) for _ in range(2)]
    return _Site(n, f"q.reshape(({k}, {k}))", "g", pts)


def _ndim(f: Any, *args: np.ndarray) -> int:
    try:
        return int(np.ndim(f(*args)))
    except Exception as err:  # any failure of the user function
        raise _NoKernels(f"`{f.py_func.__name__}` fails at a trial point ({err!r})") from err


def _emit_inner(e: _Emitter, inner: Any, site: _Site) -> tuple[bool, Any]:
    """The Lagrangian's kernels; ``(mechanical, mass)``."""
    n = site.n
    sq = (n, n)
    if getattr(inner, "group", None) is not None:
        if not (hasattr(inner, "_potential_grad") and hasattr(inner, "inertia")):
            raise _NoKernels(
                f"a {type(inner).__name__} (on a group, numba functions are taken from a "
                "TrivializedMechanicalSystem; the compiled Lie engines need ℓ = ½ηᵀ𝕀η − V(g))")
        # the Lie engines' mechanical kernels (symbolic._kernel_emit_lie): −(left-trivialized
        # ∇V) and its left-trivialized derivative
        g = e.fn(_need(inner, "_potential_grad", "potential_grad"))
        hs = e.fn(_need(inner, "_potential_hess", "potential_hess"))
        e.kernel("lt_force", _copy(f"{g}({site.arg})", (n,), "-"))
        e.kernel("lt_force_jac", _copy(f"{hs}({site.arg})", sq, "-"))
        return True, np.array(inner.inertia, dtype=float)
    if hasattr(inner, "_potential_grad"):  # MechanicalSystem
        if not inner.constant_mass:
            raise _NoKernels("a position-dependent mass matrix (its second derivatives are "
                             "formed by finite differences)")
        g = e.fn(_need(inner, "_potential_grad", "potential_grad"))
        hs = e.fn(_need(inner, "_potential_hess", "potential_hess"))
        mass = np.array(inner.mass, dtype=float)
        mk = e.const("mass", mass)
        e.kernel("D1L", _copy(f"{g}(q)", (n,), "-"))
        e.kernel("D2L", [f"for i0 in range({n}):", "    s = 0.0",
                         f"    for i1 in range({n}):", f"        s += {mk}[i0, i1] * v[i1]",
                         "    out[i0] = s"])
        e.kernel("D11L", _copy(f"{hs}(q)", sq, "-"))
        e.kernel("D12L", _zeros(sq))
        e.kernel("D21L", _zeros(sq))
        e.kernel("D22L", _loops(sq, f"out[i0, i1] = {mk}[i0, i1]"))
        return True, mass
    if hasattr(inner, "_dL_dq"):  # LagrangianSystem
        f = {k: e.fn(_need(inner, "_" + k, k))
             for k in ("dL_dq", "dL_dv", "d2L_dv2", "d2L_dvdq", "d2L_dq2")}
        e.kernel("D1L", _copy(f"{f['dL_dq']}(q, v)", (n,)))
        e.kernel("D2L", _copy(f"{f['dL_dv']}(q, v)", (n,)))
        e.kernel("D11L", _copy(f"{f['d2L_dq2']}(q, v)", sq))
        e.kernel("D12L", _copy(f"{f['d2L_dvdq']}(q, v)", sq, transpose=True))
        e.kernel("D21L", _copy(f"{f['d2L_dvdq']}(q, v)", sq))
        e.kernel("D22L", _copy(f"{f['d2L_dv2']}(q, v)", sq))
        return False, None
    raise _NoKernels(f"a {type(inner).__name__} (numba functions are taken from a "
                     "MechanicalSystem or a LagrangianSystem)")


def _emit_constraint(e: _Emitter, con: Any, site: _Site) -> tuple[str, int]:
    """The constraint kernels; ``(kind, m)``."""
    n, (q0, v0), w = site.n, site.points[0], site.wrt
    if getattr(con, "is_holonomic", False):
        if w == "g":
            raise _NoKernels("a holonomic constraint on a group (no compiled Lie engine "
                             "takes one)")
        fs = [_need(con, "_" + k, k) for k in ("phi", "jacobian", "hessian")]
        m = int(np.size(fs[0](q0)))
        for name, f, shape in zip(("hol_phi", "hol_jac", "hol_hess"), fs,
                                  ((m,), (m, n), (m, n, n))):
            e.kernel(name, _copy(f"{e.fn(f)}(q)", shape, src_ndim=_ndim(f, q0)))
        return "holonomic", m
    if getattr(con, "is_linear_in_velocity", False):
        return "velocity", _emit_linear(e, con, site)
    names = ("phi", "dphi_dq", "dphi_dv", "d2phi_dvdq", "d2phi_dv2")
    fs = [_need(con, "_" + k, k) for k in names]
    m = int(np.size(fs[0](q0, v0)))
    for name, f, shape in zip(("phi", f"phi_{w}", "phi_v", f"phi_v{w}", "phi_vv"), fs,
                              ((m,), (m, n), (m, n), (m, n, n), (m, n, n))):
        e.kernel(name, _copy(f"{e.fn(f)}({site.arg}, v)", shape, src_ndim=_ndim(f, q0, v0)))
    return "velocity", m


def _term(e: _Emitter, value: Any, label: str, core: int, site: _Site
          ) -> tuple[list[str], Any]:
    """``(lines, index)`` of one datum of a linear velocity constraint (``A``, ``a``, ``dA``
    or ``da``: a numba function of ``q`` or a constant array, of ``core`` axes with the
    constraint axis first, which a single constraint may omit): ``lines`` load it into
    ``_<label>``, ``index(*idx)`` reads one entry ([] and None when absent)."""
    if value is None:
        return [], None
    name = f"_{label}"
    if callable(value):
        f = _user(value)
        if not _is_numba(f):
            raise _NoKernels(f"`{label}` is a plain Python callable, not a numba function")
        nd = _ndim(f, site.points[0][0])
        lines = [f"{name} = {e.fn(f)}({site.arg})"]
    else:
        arr = np.asarray(value, dtype=float)
        nd = arr.ndim
        name, lines = e.const(label, arr), []
    drop = nd == core - 1  # the constraint axis omitted (m = 1)

    def index(*idx: str) -> str:
        idx = idx[1:] if drop else idx
        return f"{name}[{_ix(*idx)}]" if idx else name

    return lines, index


def _emit_linear(e: _Emitter, con: Any, site: _Site) -> int:
    """Φ = A(q)v + a(q) as the numpy methods of :class:`LinearVelocityConstraint` form it:
    phi, phi_q = Σ_i ∂A_ai/∂q_j v_i + ∂a_a/∂q_j, phi_v = A, phi_vq = ∂A/∂q, phi_vv = 0 (the
    derivative of a constant A or a is zero unless given; a callable one's must be given)."""
    A, a = con.A, con.a
    n, q0, w = site.n, site.points[0][0], site.wrt
    m = int(np.size(_user(A)(q0) if callable(A) else A)) // n
    getA, Ax = _term(e, A, "A", 2, site)
    if con.dA is None and callable(A):
        raise _NoKernels("`dA` is not given (its finite-difference form has no compiled "
                         "counterpart)")
    getdA, dAx = _term(e, con.dA, "dA", 3, site)
    geta, ax = _term(e, a, "a", 1, site)
    da = con.da if callable(a) else None
    if callable(a) and da is None:
        raise _NoKernels("`da` is not given (its finite-difference form has no compiled "
                         "counterpart)")
    getda, dax = _term(e, da, "da", 2, site)
    mv = (m, n)
    e.kernel("phi", [*getA, *geta, f"for i0 in range({m}):",
                     f"    s = {ax('i0') if ax else '0.0'}", f"    for i1 in range({n}):",
                     f"        s += {Ax('i0', 'i1')} * v[i1]", "    out[i0] = s"])
    if dAx is None and dax is None:
        e.kernel(f"phi_{w}", _zeros(mv))
    else:  # phi_q[a, j] = Σ_i dA[a, i, j] v_i (+ da[a, j])
        body = [*getdA, *getda, f"for i0 in range({m}):", f"    for i1 in range({n}):",
                f"        s = {dax('i0', 'i1') if dax else '0.0'}"]
        if dAx is not None:
            body += [f"        for i2 in range({n}):",
                     f"            s += {dAx('i0', 'i2', 'i1')} * v[i2]"]
        e.kernel(f"phi_{w}", [*body, "        out[i0, i1] = s"])
    e.kernel("phi_v", [*getA, *_loops(mv, f"out[i0, i1] = {Ax('i0', 'i1')}")])
    e.kernel(f"phi_v{w}", [*getdA, *_loops((m, n, n), f"out[i0, i1, i2] = "
                                                   f"{dAx('i0', 'i1', 'i2')}")]
             if dAx is not None else _zeros((m, n, n)))
    e.kernel("phi_vv", _zeros((m, n, n)))
    return m


def _reference(system: Any, site: _Site) -> dict[str, Any]:
    """The system's own numpy methods under the kernels' names."""
    con = getattr(system, "constraint", None)
    inner = getattr(system, "system", system) if con is not None else system
    if site.wrt == "g":
        ref = {"lt_force": lambda g, v: -inner.gradV(g),
               "lt_force_jac": lambda g, v: -inner.hessV(g)}
    else:
        ref = {k: getattr(inner, k) for k in ("D1L", "D2L", "D11L", "D12L", "D21L", "D22L")}
    if con is None:
        return ref
    if con.is_holonomic:
        ref.update(hol_phi=lambda q, v: con.phi(q), hol_jac=lambda q, v: con.jacobian(q),
                   hol_hess=lambda q, v: con.hessian(q))
    else:
        w = site.wrt
        ref.update({"phi": con.residual, f"phi_{w}": con.dphi_dq, "phi_v": con.dphi_dv,
                    f"phi_v{w}": con.d2phi_dvdq, "phi_vv": con.d2phi_dv2})
    return ref


def _check(source: str, names: list[str], system: Any, site: _Site) -> None:
    """Run each generated kernel in plain Python at the trial points against the system's
    method (a kernel takes the group element flattened)."""
    from ..core._kernels import user_function

    ns: dict[str, Any] = {"np": np, "user_function": user_function}
    exec(compile(source, "<numba-route kernels>", "exec"), ns)
    ref = _reference(system, site)
    eps = np.finfo(float).eps
    for q, v in site.points:
        flat = np.ascontiguousarray(q).ravel()
        for name in names:
            want = np.asarray(ref[name](q, v), dtype=float)
            got = np.zeros(want.shape)
            try:
                ns[name](flat, v, got)
            except Exception as err:  # a user function that fails here
                raise _NoKernels(f"the kernel {name} fails at a trial point ({err!r})") from err
            # the same values summed in another order (M v, Σ_i dA v_i): n roundings of
            # terms of the output's size at these O(1) points; margin 64
            scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
            bound = 64 * eps * scale * max(1, site.n)
            err = float(np.max(np.abs(got - want), initial=0.0))
            if not err <= bound:
                raise _NoKernels(
                    f"the kernel {name} built from its numba functions differs from the "
                    f"system's own {name} by {err:.2e} at a trial point (bound {bound:.1e}): "
                    "check the shapes its functions return"
                )


def numba_kernels(system: Any) -> tuple[Any, str]:
    """``(KernelSet, "")`` of a system built from numba functions, or ``(None, why)``:
    a callable the kernels need is missing or plain Python, fails at a trial point, or a
    generated kernel disagrees with the system's own method there."""
    from ..core._kernels import KernelSet, bind_user_function

    con = getattr(system, "constraint", None)
    inner = getattr(system, "system", system) if con is not None else system
    n = getattr(inner, "n", None)
    if n is None:
        return None, "a system whose dimension is not known yet"
    group = getattr(inner, "group", None)
    if group is not None and len(tuple(group.shape)) != 2:
        return None, "a group stored as a vector (Rⁿ: use a system on a vector space)"
    site = _site(group, int(n))
    e = _Emitter()
    try:
        mechanical, mass = _emit_inner(e, inner, site)
        kind, m = (None, 0) if con is None else _emit_constraint(e, con, site)
        for name, f in e.binds.items():
            bind_user_function(name[len("_ku_"):], f)
        source = e.source()
        _check(source, e.names, system, site)
    except _NoKernels as why:
        return None, str(why)
    fields = dict(source=source, names=tuple(e.names), n=site.n, m=m, constraint=kind,
                  mechanical=mechanical,
                  mass=None if mass is None else tuple(map(tuple, mass.tolist())),
                  forced=getattr(inner, "_force", None) is not None)
    if group is None:
        return KernelSet(**fields), ""
    from ..core._compiled_lie import LieKernelSet

    return LieKernelSet(**fields, group=group), ""
