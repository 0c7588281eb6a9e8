"""Verification of the callables a user gives a system: shapes, broadcasting, values, derivatives.

Run once per system object before the first step (``integrate`` calls
:func:`verify_before_first_step`), and on request (``system.check_derivatives(q, v)``).
For every callable, at the initial point and ``NEARBY`` nearby points:

1. **shape**: the output for one configuration has the documented trailing shape
   (e.g. ``potential_grad`` → ``(n,)``), and is finite;
2. **broadcasting**: the output for the points stacked on leading axes ``(P, 1, ...)``
   equals the per-point outputs (a callable written for one configuration is caught here,
   and the message points to ``vectorized=False``);
3. **values**: the mass matrix is symmetric positive definite (mechanical systems), the
   velocity Hessian ∂²L/∂v² symmetric and regular (general Lagrangians);
4. **derivatives** (switch off with ``derivative_check=False`` on the system or constraint
   constructor): every derivative the user supplied is compared with a central finite
   difference of the function it differentiates.

Finite-difference tolerance (derived, then a measured safety factor). With the step
``h_k = eps^(1/3)·max(1, |x_k|)`` (vector space; ``eps^(1/3)`` along ``g·exp(ε e_k)`` on a
group) the central difference ``D_h`` has truncation error ``h²/6·f'''`` and rounding error
``≈ eps·F/h`` (``F`` = the size of ``f`` near the point). We compare the user's derivative
``D`` with the Richardson value ``D_R = (4 D_h − D_2h)/3`` (truncation O(h⁴)); the computable
``|D_h − D_2h| = h²/2·|f'''| + O(eps·F/h)`` bounds the truncation of ``D_h`` (and, a
fortiori, of ``D_R``) without knowing ``f'''``. The tolerance per entry is::

    tol = 2·|D_h − D_2h| + SAFETY · (eps·F/h_k + eps^(2/3)·max|D|)

where the last term covers rounding in ``f`` (cancellation inside the user's formula) and
in ``D``. ``SAFETY`` is measured over every model of the project (see the constant).
A sign error, a factor 2 or a transposition changes the derivative by O(|D|), i.e. ~10⁸
times this tolerance.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._util._errors import DerivativeError, InputError, SingularMatrixError

__all__ = [
    "check_derivatives",
    "compare_derivative",
    "mark_verified",
    "register_first_state_check",
    "verify_before_first_step",
]

_EPS = float(np.finfo(np.float64).eps)
_CBRT_EPS = _EPS ** (1.0 / 3.0)
#: Safety factor on the rounding part of the tolerance. Measured: the largest ratio
#: (|D − D_R| − 2·|D_h − D_2h|) / (eps·F/h + eps^(2/3)·max|D|) over every model of the
#: project (integration-tests/test_derivcheck_models.py: 43 systems from the testing
#: modules and examples.models, 3 random points each plus 2 nearby points) is 0.38; 100
#: leaves a margin > 250 and keeps the tolerance ~4e-9 relative to |D|.
SAFETY = 100.0
#: Nearby points checked besides the initial one, and their relative distance.
NEARBY = 2
NEARBY_SCALE = 1e-2
#: Batched and per-point outputs of a broadcasting callable differ only by rounding
#: (summation order); a callable written for one configuration differs by O(1).
BROADCAST_RTOL = 1e-8

_VERIFIED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FIRST_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class _Fn:
    """A user callable: ``call(x, v)`` must return ``core`` trailing axes."""

    name: str
    call: Callable[[np.ndarray, np.ndarray], np.ndarray]
    core: tuple[int, ...]
    what: str


@dataclass(frozen=True)
class _Deriv:
    """``df`` should be the derivative of ``f`` with respect to ``wrt`` ("q" or "v")."""

    name: str
    of: str
    f: Callable[[np.ndarray, np.ndarray], np.ndarray]
    df: Callable[[np.ndarray, np.ndarray], np.ndarray]
    wrt: str
    owner: str
    label: str | None = None  # the differentiation variable as the message names it


@dataclass(frozen=True)
class _Value:
    """A value check ``check(x, v)`` that raises a typed error."""

    check: Callable[[np.ndarray, np.ndarray], None]


def _owner_name(obj: Any) -> str:
    return type(obj).__name__


def _specs(obj: Any, group: Any, n: int, x0, v0):
    """The callables, derivative pairs and value checks of one system or constraint."""
    from .. import systems as sy  # imported here: the system modules import this one lazily

    fns: list[_Fn] = []
    ders: list[_Deriv] = []
    vals: list[_Value] = []
    on = bool(getattr(obj, "derivative_check", True))
    own = _owner_name(obj)

    def der(name, of, f, df, wrt):
        if on:
            ders.append(_Deriv(name, of, f, df, wrt, own))

    if isinstance(obj, sy.ConstrainedSystem):
        f1, d1, v1 = _specs(obj.system, group, n, x0, v0)
        f2, d2, v2 = _specs(obj.constraint, group, n, x0, v0)
        if not on:
            d1, d2 = [], []
        return f1 + f2, d1 + d2, v1 + v2

    if isinstance(obj, sy.MechanicalSystem):
        s = obj
        if not s.constant_mass:
            fns.append(_Fn("mass", lambda x, v: s.M(x), (n, n), "the mass matrix M(q)"))
            vals.append(_Value(lambda x, v: _check_mass(s.M(x), "mass")))
        fns.append(_Fn("potential", lambda x, v: s.V(x), (), "the potential V(q)"))
        fns.append(_Fn("potential_grad", lambda x, v: s.gradV(x), (n,), "∇V(q)"))
        der("potential_grad", "potential", lambda x, v: s.V(x), lambda x, v: s.gradV(x), "q")
        if s._potential_hess is not None:
            fns.append(_Fn("potential_hess", lambda x, v: s.hessV(x), (n, n), "∇²V(q)"))
            der("potential_hess", "potential_grad", lambda x, v: s.gradV(x),
                lambda x, v: s.hessV(x), "q")
        if not s.constant_mass and s._mass_grad is not None:
            fns.append(_Fn("mass_grad", lambda x, v: s.dM(x), (n, n, n), "∂M_ij/∂q_k"))
            der("mass_grad", "mass", lambda x, v: s.M(x), lambda x, v: s.dM(x), "q")
        return fns, ders, vals

    if isinstance(obj, sy.TrivializedMechanicalSystem):
        s = obj
        fns.append(_Fn("potential", lambda x, v: s.V(x), (), "the potential V(g)"))
        fns.append(_Fn("potential_grad", lambda x, v: s.gradV(x), (n,),
                       "the left-trivialized gradient of V"))
        der("potential_grad", "potential", lambda x, v: s.V(x), lambda x, v: s.gradV(x), "q")
        if s._potential_hess is not None:
            fns.append(_Fn("potential_hess", lambda x, v: s.hessV(x), (n, n),
                           "the left-trivialized Hessian of V"))
            der("potential_hess", "potential_grad", lambda x, v: s.gradV(x),
                lambda x, v: s.hessV(x), "q")
        return fns, ders, vals

    if isinstance(obj, sy.LagrangianSystem | sy.TrivializedLagrangianSystem):
        s = obj
        triv = isinstance(obj, sy.TrivializedLagrangianSystem)
        nm = (("dl_dg", "dl_deta", "d2l_deta2", "d2l_detadg", "d2l_dg2", "d2l_dgdeta")
              if triv else ("dL_dq", "dL_dv", "d2L_dv2", "d2L_dvdq", "d2L_dq2", None))
        fns.append(_Fn("lagrangian", s.lagrangian, (), "the Lagrangian"))
        fns.append(_Fn(nm[0], s.D1L, (n,), "∂L/∂q"))
        fns.append(_Fn(nm[1], s.D2L, (n,), "∂L/∂v"))
        der(nm[0], "lagrangian", s.lagrangian, s.D1L, "q")
        der(nm[1], "lagrangian", s.lagrangian, s.D2L, "v")
        given = ((s._d2l_deta2, s._d2l_detadg, s._d2l_dg2, s._d2l_dgdeta) if triv
                 else (s._d2L_dv2, s._d2L_dvdq, s._d2L_dq2, None))
        blocks = ((nm[2], s.D22L, nm[1], s.D2L, "v"), (nm[3], s.D21L, nm[1], s.D2L, "q"),
                  (nm[4], s.D11L, nm[0], s.D1L, "q"), (nm[5], s.D12L, nm[0], s.D1L, "v"))
        for g, (name, blk, of, f, wrt) in zip(given, blocks):
            if g is not None:
                fns.append(_Fn(name, blk, (n, n), "a second-derivative block"))
                der(name, of, f, blk, wrt)
        # a finite-difference ∂²L/∂v² is symmetric only to the FD error (~1e-10 relative)
        rtol = 1e-10 if given[0] is not None else 1e-6
        vals.append(_Value(lambda x, v: _check_regular(s.D22L(x, v), nm[2], rtol)))
        return fns, ders, vals

    if isinstance(obj, sy.HolonomicConstraint):
        c = obj
        m = _leading_core(c.phi(x0), "phi", "(..., m)", 1)
        fns.append(_Fn("phi", lambda x, v: c.phi(x), (m,), "Φ(q)"))
        fns.append(_Fn("jacobian", lambda x, v: c.jacobian(x), (m, n), "∂Φ/∂q"))
        der("jacobian", "phi", lambda x, v: c.phi(x), lambda x, v: c.jacobian(x), "q")
        if c._hessian is not None:
            fns.append(_Fn("hessian", lambda x, v: c.hessian(x), (m, n, n), "∂²Φ/∂q²"))
            der("hessian", "jacobian", lambda x, v: c.jacobian(x), lambda x, v: c.hessian(x),
                "q")
        return fns, ders, vals

    if isinstance(obj, sy.LinearVelocityConstraint):
        c = obj
        m = _leading_core(c.matrix(x0), "A", "(..., m, n)", 2)
        if callable(c.A):
            fns.append(_Fn("A", lambda x, v: c.matrix(x), (m, n), "A(q)"))
        if callable(c.a):
            fns.append(_Fn("a", lambda x, v: c.affine(x), (m,), "a(q)"))
        if c.dA is not None:
            if callable(c.dA):
                fns.append(_Fn("dA", lambda x, v: c.matrix_grad(x), (m, n, n), "∂A_ai/∂q_j"))
            der("dA", "A", lambda x, v: c.matrix(x), lambda x, v: c.matrix_grad(x), "q")
        if c.da is not None and c.a is not None:
            if callable(c.da):
                fns.append(_Fn("da", lambda x, v: c.affine_grad(x), (m, n), "∂a_a/∂q_j"))
            der("da", "a", lambda x, v: c.affine(x), lambda x, v: c.affine_grad(x), "q")
        return fns, ders, vals

    if isinstance(obj, sy.VelocityConstraint):
        c = obj
        m = _leading_core(c.residual(x0, v0), "phi", "(..., m)", 1)
        fns.append(_Fn("phi", c.residual, (m,), "Φ(q, v)"))
        fns.append(_Fn("dphi_dq", c.dphi_dq, (m, n), "∂Φ/∂q"))
        fns.append(_Fn("dphi_dv", c.dphi_dv, (m, n), "∂Φ/∂v"))
        der("dphi_dq", "phi", c.residual, c.dphi_dq, "q")
        der("dphi_dv", "phi", c.residual, c.dphi_dv, "v")
        if c._d2phi_dvdq is not None:
            fns.append(_Fn("d2phi_dvdq", c.d2phi_dvdq, (m, n, n), "∂²Φ/∂v∂q"))
            der("d2phi_dvdq", "dphi_dv", c.dphi_dv, c.d2phi_dvdq, "q")
        if c._d2phi_dv2 is not None:
            fns.append(_Fn("d2phi_dv2", c.d2phi_dv2, (m, n, n), "∂²Φ/∂v²"))
            der("d2phi_dv2", "dphi_dv", c.dphi_dv, c.d2phi_dv2, "v")
        return fns, ders, vals

    return fns, ders, vals


def _leading_core(out: Any, name: str, shape: str, ndim: int) -> int:
    out = np.asarray(out)
    if out.ndim != ndim:
        raise InputError(
            f"`{name}` must return an array of shape {shape} (m = number of constraints); "
            f"for one configuration it returned shape {out.shape}. For a single constraint "
            f"return shape {'(1,)' if ndim == 1 else '(1, n)'}."
        )
    return int(out.shape[0])


def _check_mass(M: np.ndarray, name: str) -> None:
    from .._util._validation import check_spd

    check_spd(np.asarray(M, dtype=float), name)


def _check_regular(G: np.ndarray, name: str, rtol: float) -> None:
    G = np.asarray(G, dtype=float)
    scale = float(np.max(np.abs(G))) if G.size else 1.0
    if np.max(np.abs(G - np.swapaxes(G, -1, -2)), initial=0.0) > rtol * max(scale, 1.0):
        raise InputError(
            f"`{name}` (the Hessian ∂²L/∂v²) must be symmetric, but it is not at the initial "
            "point; check the index order of the second derivatives."
        )
    cond = np.linalg.cond(G)
    if not np.all(np.isfinite(cond)) or np.any(cond > 1e13):
        raise SingularMatrixError(
            f"The Lagrangian is degenerate at the initial point: ∂²L/∂v² (`{name}`) is "
            f"singular (condition number {np.max(cond):.2e}). The Legendre map must be "
            "invertible; check the kinetic energy."
        )


# --- points --------------------------------------------------------------------------------
def _points(group: Any, x0: np.ndarray, v0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The initial point and NEARBY fixed nearby points, stacked on a leading axis."""
    n = v0.shape[-1]
    rng = np.random.default_rng(20261125)
    u = rng.uniform(-1.0, 1.0, (NEARBY, n))
    w = rng.uniform(-1.0, 1.0, (NEARBY, n))
    if group is None:
        xs = x0 + NEARBY_SCALE * np.maximum(1.0, np.abs(x0)) * u
    else:
        xs = group.compose(np.broadcast_to(x0, (NEARBY, *x0.shape)), group.exp(NEARBY_SCALE * u))
    vs = v0 + NEARBY_SCALE * np.maximum(1.0, np.abs(v0)) * w
    return np.concatenate([x0[None], xs]), np.concatenate([v0[None], vs])


def _where(p: int) -> str:
    return ("the initial point" if p == 0 else
            f"nearby point {p} (the initial point moved by {NEARBY_SCALE:g} relative)")


# --- checks ----------------------------------------------------------------------------------
def _fix(name: str) -> str:
    return (
        f"Write `{name}` for arrays with leading batch axes (index with [..., i], use "
        "np.stack(..., axis=-1) and einsum('...ij,...j->...i'), never q[0] or np.array([...])"
        "), or pass vectorized=False to the constructor so that the system loops over the "
        "leading axes (slower)."
    )


def _call(fn: _Fn, x, v) -> np.ndarray:
    try:
        return np.asarray(fn.call(x, v), dtype=float)
    except (InputError, SingularMatrixError):
        raise
    except Exception as exc:  # the user's callable failed: say which one
        raise InputError(
            f"`{fn.name}` ({fn.what}) raised {type(exc).__name__}: {exc}"
        ) from exc


def _check_fn(fn: _Fn, X: np.ndarray, Vv: np.ndarray) -> None:
    singles = []
    for p in range(X.shape[0]):
        out = _call(fn, X[p], Vv[p])
        if out.shape != fn.core:
            core = ", ".join(["..."] + [str(k) for k in fn.core])
            raise InputError(
                f"`{fn.name}` ({fn.what}) must return shape ({core}); for one configuration "
                f"it returned shape {out.shape}. Return an array of shape {fn.core}"
                f"{' (a scalar)' if fn.core == () else ''} per configuration."
            )
        if not np.all(np.isfinite(out)):
            raise InputError(
                f"`{fn.name}` ({fn.what}) returned NaN or inf at {_where(p)}: check its formula "
                "and the initial data."
            )
        singles.append(out)
    ref = np.stack(singles)
    xb, vb = X[:, None], Vv[:, None]
    try:
        out = np.asarray(fn.call(xb, vb), dtype=float)
    except Exception as exc:
        raise InputError(
            f"`{fn.name}` ({fn.what}) does not broadcast over leading batch axes: called with "
            f"configurations of shape {xb.shape} it raised {type(exc).__name__}: {exc}. "
            + _fix(fn.name)
        ) from exc
    if out.shape == fn.core:  # a constant written without batch axes broadcasts by numpy rules
        out = np.broadcast_to(out, ref.shape)
    want = (X.shape[0], 1, *fn.core)
    ok = out.shape == want
    if ok:
        scale = 1.0 + float(np.max(np.abs(ref))) if ref.size else 1.0
        ok = bool(np.all(np.abs(out[:, 0] - ref) <= BROADCAST_RTOL * scale))
    if not ok:
        raise InputError(
            f"`{fn.name}` ({fn.what}) does not broadcast over leading batch axes: for "
            f"{X.shape[0]} configurations stacked as shape {xb.shape} it returned "
            + (f"shape {out.shape} instead of {want}. " if out.shape != want else
               "values that differ from the one-configuration results. ")
            + _fix(fn.name)
        )


def _fd_check(d: _Deriv, group: Any, X: np.ndarray, Vv: np.ndarray, n: int) -> None:
    P = X.shape[0]
    wrt_q = d.wrt == "q"
    x = X if wrt_q else Vv
    if wrt_q and group is not None:
        step = np.full((P, n), _CBRT_EPS)
    else:
        step = _CBRT_EPS * np.maximum(1.0, np.abs(x))
    mult = np.array([1.0, -1.0, 2.0, -2.0])
    dx = (mult[:, None, None, None] * np.eye(n)[None, :, None, :]
          * step[None, None, :, :]).reshape(4 * n, P, n)
    if wrt_q and group is not None:
        xp = group.compose(np.broadcast_to(X, (4 * n, *X.shape)), group.exp(dx))
        fx = d.f(xp, Vv)
    elif wrt_q:
        fx = d.f(X + dx, Vv)
    else:
        fx = d.f(X, Vv + dx)
    D = np.asarray(d.df(X, Vv), dtype=float)  # (P, *out, n)
    out_shape = D.shape[1:-1]
    fx = np.broadcast_to(np.asarray(fx, dtype=float), (4 * n, P, *out_shape))
    fx = fx.reshape(4, n, P, *out_shape)
    hk = np.moveaxis(step, -1, 0).reshape((n, P) + (1,) * len(out_shape))
    D1 = (fx[0] - fx[1]) / (2.0 * hk)
    D2 = (fx[2] - fx[3]) / (4.0 * hk)
    DR = np.moveaxis((4.0 * D1 - D2) / 3.0, 0, -1)  # (P, *out, n)
    trunc = np.moveaxis(np.abs(D1 - D2), 0, -1)
    ax = tuple(range(1, D.ndim))
    F = np.max(np.abs(fx), axis=(0, 1, *range(3, fx.ndim)))  # (P,)
    Dmax = np.max(np.abs(D), axis=ax) if D.ndim > 1 else np.abs(D)
    bshape = (P,) + (1,) * (D.ndim - 1)
    hlast = step.reshape((P,) + (1,) * len(out_shape) + (n,))
    unit = np.broadcast_to(
        _EPS * F.reshape(bshape) / hlast + _EPS ** (2.0 / 3.0) * Dmax.reshape(bshape), D.shape)
    tol = 2.0 * trunc + SAFETY * unit
    err = np.abs(D - DR)
    pos = unit > 0
    _MEASURED.append(float(np.max((err - 2.0 * trunc)[pos] / unit[pos], initial=0.0)))
    if np.all(err <= tol):
        return
    ratio = np.where(tol > 0, err / np.where(tol > 0, tol, 1.0), np.inf)
    worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    p, idx = int(worst[0]), tuple(int(i) for i in worst[1:])
    var = "q" if wrt_q else "v"
    if wrt_q and group is not None:
        var = "g (left-trivialized, along g·exp(ε e_j))"
    var = d.label or var
    raise DerivativeError(
        f"`{d.name}` disagrees with a central finite difference of `{d.of}` with respect to "
        f"{var} at {_where(p)}: worst entry {d.name}[{', '.join(map(str, idx))}] = "
        f"{D[worst]:.9g}, finite difference {DR[worst]:.9g} (difference {err[worst]:.2e} > "
        f"tolerance {tol[worst]:.2e}; the last index is the differentiation variable). Check "
        f"`{d.name}` for a wrong sign, factor or index order; if it is right (e.g. the "
        f"function is not smooth here), pass derivative_check=False to {d.owner}(...)."
    )


#: Ratios (err − 2·trunc) / unit of the comparisons run in this process (for measuring
#: SAFETY in the tests); trimmed to the last 1000 at every check.
_MEASURED: list[float] = []


def _group_of(system: Any) -> Any:
    return getattr(system, "group", None)


def check_derivatives(system: Any, q: Any, v: Any = None) -> None:
    """Check every user callable of ``system`` at ``(q, v)`` and nearby points.

    Shapes, broadcasting over leading axes, mass-matrix / Hessian values, and every
    user-supplied derivative against a central finite difference (unless the
    constructor had ``derivative_check=False``). See the module docstring for the
    tolerance.

    Raises
    ------
    DerivativeError
        A derivative disagrees with the finite difference (names the argument, the worst
        entry, both values).
    InputError, SingularMatrixError
        Wrong output shape, non-broadcasting callable, non-symmetric or singular mass.
    """
    del _MEASURED[:-1000]
    group = _group_of(system)
    x0, v0 = _one_point(system, q, v, strict=True)
    n = v0.shape[-1]
    X, Vv = _points(group, x0, v0)
    fns, ders, vals = _specs(system, group, n, x0, v0)
    for fn in fns:
        _check_fn(fn, X, Vv)
    for val in vals:
        val.check(X, Vv)
    for d in ders:
        _fd_check(d, group, X, Vv, n)
    _check_force(system, group, X, Vv, n)


def _check_force(system: Any, group: Any, X: np.ndarray, Vv: np.ndarray, n: int) -> None:
    """The external force of a forced system (issue 20): ``force(q, v, u)`` at the points
    with ``u = 0`` (shape, finiteness, broadcasting) and, unless ``derivative_check=False``,
    the blocks of ``force_derivatives`` against central differences in q, v and u."""
    inner = getattr(system, "system", system)
    if getattr(inner, "_force", None) is None:
        return
    m = int(inner.n_controls)
    f, u0 = inner._force, np.zeros(m)
    _check_fn(_Fn("force", lambda x, v: f(x, v, u0), (n,), "the external force F(q, v, u)"),
              X, Vv)
    on = bool(getattr(system, "derivative_check", True)) and bool(inner.derivative_check)
    if inner._force_derivatives is None or not on:
        return
    own = _owner_name(inner)
    jac = inner.force_jacobians
    for k, (blk, wrt) in enumerate((("F_q", "q"), ("F_v", "v"))):
        _fd_check(_Deriv(f"force_derivatives ({blk})", "force", lambda x, v: f(x, v, u0),
                         lambda x, v, k=k: jac(x, v, u0)[k], wrt, own), group, X, Vv, n)
    if m:
        U = np.zeros((X.shape[0], m))
        _fd_check(_Deriv("force_derivatives (F_u)", "force", lambda x, uu: f(x, Vv, uu),
                         lambda x, uu: jac(x, Vv, uu)[2], "v", own, "u"), group, X, U, m)


def _bind_dimension(system: Any, n: int) -> None:
    inner = getattr(system, "system", system)
    bind = getattr(inner, "_bind_dimension", None)
    if bind is not None:
        bind(n)


def _one_point(system: Any, q: Any, v: Any, strict: bool):
    """The first configuration of a (possibly batched) q and v, as float arrays.

    ``strict=False``: return None for data the method itself will reject (wrong shape,
    dtype, non-finite, off the group), so that its own message is the one the user sees.
    """
    from .._util._validation import as_group_element, as_vector

    group = _group_of(system)
    try:
        if group is None:
            qa = as_vector(q, "q")
            if getattr(system, "n", None) is None:
                _bind_dimension(system, qa.shape[-1])
            n = getattr(system, "n", None)  # a bare constraint has no n: q says it
            n = qa.shape[-1] if n is None else int(n)
            qa = as_vector(qa, "q", n)
            x0 = qa.reshape(-1, n)[0]
        else:
            n = int(group.dim)
            qa = as_group_element(q, group, "q")
            x0 = qa.reshape(-1, *tuple(group.shape))[0]
        va = np.zeros(n) if v is None else as_vector(v, "v", n)
        v0 = va.reshape(-1, n)[0]
    except InputError:
        if strict:
            raise
        return None
    return x0, v0


def compare_derivative(name: str, f: Callable, df: Callable, x: Any, *, of: str = "f",
                       wrt: str = "x", owner: str = "the constructor") -> None:
    """Compare a user derivative ``df`` with a central finite difference of ``f`` at ``x``.

    The public entry to the finite-difference machinery of :func:`check_derivatives`, for
    packages whose objects take their own derivative callables (e.g. ``chetaev.gni``'s
    ``ReducedSystem``, ``chetaev.dsocs``'s ``DSOCS``). ``df`` is compared at ``x`` and at
    ``NEARBY`` fixed nearby points (relative distance ``NEARBY_SCALE``) with the
    Richardson value of central differences of step ``eps^(1/3)·max(1, |x_k|)`` and the
    tolerance of the module docstring (derived truncation bound + ``SAFETY`` × rounding).

    Parameters
    ----------
    name : str
        The argument that supplied ``df``, as the error message names it.
    f, df : callable
        ``f(x)`` → ``(..., *out)`` and ``df(x)`` → ``(..., *out, n)`` (last index: the
        differentiation variable). Both must broadcast over leading batch axes of ``x``.
    x : array_like, shape (n,)
        The point (a flat float vector; stack several arguments into one ``x``).
    of : str
        Name of the function ``f`` in the message.
    wrt : str
        Name of the variable ``x`` in the message.
    owner : str
        The constructor that takes ``derivative_check=False`` (named in the message).

    Raises
    ------
    DerivativeError
        ``df`` disagrees with the finite difference (names ``name``, the worst entry, both
        values and the tolerance).
    InputError
        ``x`` is not a finite 1-d float vector.
    """
    from .._util._validation import as_vector

    x0 = as_vector(x, "x")
    if x0.ndim != 1:
        raise InputError(
            f"compare_derivative: x must be one point, a 1-d vector; got shape {x0.shape}. "
            "Pass the first configuration of a batch."
        )
    n = x0.shape[-1]
    if n == 0:
        return
    del _MEASURED[:-1000]
    X, _ = _points(None, x0, np.zeros(n))
    zero = np.zeros_like(X)
    d = _Deriv(name, of, lambda xx, v: f(xx), lambda xx, v: df(xx), "q", owner, wrt)
    _fd_check(d, None, X, zero, n)


def mark_verified(system: Any) -> Any:
    """Record ``system`` as checked, so :func:`verify_before_first_step` skips it.

    For systems whose callables are exact and broadcasting by construction (the ones
    :mod:`chetaev.discrete_lagrangian.symbolic` generates, tested against the hand-written
    models), in particular those whose parameters carry batch axes: their callables return
    the parameter batch for one configuration, which the one-configuration shape probe
    would misread. ``system.check_derivatives(q, v)`` still runs on request.
    """
    _VERIFIED[system] = True
    return system


def register_first_state_check(system: Any, check: Callable[[np.ndarray, np.ndarray], None]
                               ) -> Any:
    """Run ``check(q0, v0)`` once, at the first state a method sees for ``system``.

    For checks that only the user's initial data can decide (a mass matrix singular at some
    configurations only, constraints dependent at the initial point only): ``integrate`` and
    ``ConstrainedSystem.check_initial`` (i.e. a method's ``initial_state``) call
    :func:`verify_before_first_step`, which calls ``check`` with the whole initial batch
    ``q0`` (float array, as given) and ``v0`` (zeros when None) the first time only. ``check``
    raises a typed error (a :class:`ValueError` subclass) naming the argument and the fix.
    """
    _FIRST_STATE[system] = check
    return system


def verify_before_first_step(system: Any, q0: Any, v0: Any) -> None:
    """Run :func:`check_derivatives` once per system object (the verdict is cached).

    Called by ``integrate`` right before ``method.initial_state``. Systems of other types
    and initial data the method will reject are left to the method. A check registered with
    :func:`register_first_state_check` runs here too, once, on the whole initial batch.
    """
    from ._constraints import ConstrainedSystem
    from ._systems import _SystemMixin

    if not isinstance(system, ConstrainedSystem | _SystemMixin):
        return
    first = _FIRST_STATE.get(system)
    if _VERIFIED.get(system, False) and first is None:
        return
    pt = _one_point(system, q0, v0, strict=False)
    if pt is None:
        return
    if first is not None:  # the targeted checks first: their messages are the precise ones
        n = pt[1].shape[-1]
        qa = np.asarray(q0, dtype=float)
        va = np.zeros(n) if v0 is None else np.asarray(v0, dtype=float)
        first(qa, va)
        _FIRST_STATE.pop(system, None)
    if not _VERIFIED.get(system, False):
        check_derivatives(system, *pt)
        _VERIFIED[system] = True
