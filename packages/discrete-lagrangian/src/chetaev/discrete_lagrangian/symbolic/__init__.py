"""Systems from sympy expressions: write L and the constraints, get exact derivatives.

Three entry points build the project's own system objects from symbolic data, with every
derivative the integrators use (first *and* second: ``fd_second_derivatives`` is False)
differentiated exactly by sympy and generated as plain numpy code:

- :func:`from_lagrangian` — L(q, q̇) on Rⁿ with holonomic constraints Φ(q) = 0 or velocity
  constraints Φ(q, q̇) = 0;
- :func:`from_lagranges_method` — a ``sympy.physics.mechanics.LagrangesMethod``;
- :func:`from_trivialized_lagrangian` — ℓ(g, η) on a ``chetaev.liegroups`` group, with
  left-trivialized gradients computed from the group's generators.

The result is a :class:`~chetaev.discrete_lagrangian.MechanicalSystem` when
L = ½ q̇ᵀM(q)q̇ − V(q) (with a constant M recognised), a
:class:`~chetaev.discrete_lagrangian.LagrangianSystem` otherwise (or their trivialized
counterparts on a group), wrapped in a :class:`~chetaev.discrete_lagrangian.ConstrainedSystem`
when there are constraints: a :class:`~chetaev.discrete_lagrangian.HolonomicConstraint`, a
:class:`~chetaev.discrete_lagrangian.LinearVelocityConstraint` (affine when the constraint
has a q̇-free term) or a general :class:`~chetaev.discrete_lagrangian.VelocityConstraint`.
The equations of motion use the project's multiplier convention
d/dt ∂L/∂v − ∂L/∂q = (∂Φ/∂v)ᵀλ, whatever convention the source used.

Singular data that only the user's initial state reveals (a mass matrix singular at some
configurations, constraints dependent at the initial point only) are checked once, at the
first state a method sees, through the derivative-check hook of ``integrate`` /
``initial_state``; everything else is checked at build time.

Every generated function broadcasts over leading batch axes, is written with common
subexpression elimination (``sympy.cse``) and needs only numpy at run time; a generated system
pickles (each function is kept as its source text and recompiled on unpickling).

sympy is an optional dependency, imported only when one of these functions is called::

    pip install chetaev-discrete-lagrangian[symbolic]
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .. import systems as _sy
from .._util._errors import InputError, SingularMatrixError
from ._symbolic_codegen import GeneratedFunction, generate_source

__all__ = ["from_lagranges_method", "from_lagrangian", "from_trivialized_lagrangian"]

_INSTALL = "pip install chetaev-discrete-lagrangian[symbolic]"
_SEED = 20261125  # the generic point of the build-time rank checks
_EPS = float(np.finfo(np.float64).eps)


def _mass_cond_max(n: int) -> float:
    """Largest condition number of the n×n mass matrix M(q0) (or ∂²L/∂q̇²) accepted at the
    initial state: 1/(n·eps).

    A backward-stable solve with a matrix of condition number κ has relative forward error
    up to about n·eps·κ (Higham, *Accuracy and Stability of Numerical Algorithms*, §7.2 and
    Thm. 9.4), so beyond κ = 1/(n·eps) not one digit of the accelerations (paper eq. (2.3),
    the Legendre map) is guaranteed: the matrix is singular to working precision.
    """
    return 1.0 / (max(int(n), 1) * _EPS)


def _rank_tol(B: np.ndarray) -> np.ndarray:
    """Numerical-rank tolerance of the (..., m, n) constraint Jacobian at the initial state.

    A singular value below ``max(m, n)·eps·σ_max`` is zero to working precision: it is the
    size of the rounding error of the SVD of a matrix of norm σ_max (Golub & Van Loan,
    *Matrix Computations*, §5.4.1; the default of ``numpy.linalg.matrix_rank``). Returns the
    tolerance per batch entry, shape (...,).
    """
    s0 = np.max(np.abs(np.linalg.svd(B, compute_uv=False)), axis=-1)
    return max(B.shape[-2:]) * _EPS * s0


def _sympy():
    try:
        import sympy
    except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
        raise ImportError(
            "chetaev.discrete_lagrangian.symbolic needs sympy, an optional dependency: "
            f"{_INSTALL}"
        ) from exc
    return sympy


# ----------------------------------------------------------------------------- the systems
@attrs.frozen(eq=False)
class SymbolicMechanicalSystem(_sy.MechanicalSystem):
    """A :class:`MechanicalSystem` with a q-dependent mass matrix and an exact ∂²L/∂q².

    :class:`MechanicalSystem` forms ∂²L/∂q² = ½ vᵀ(∂²M/∂q²)v − ∇²V from finite differences of
    ``mass_grad``; the generated system supplies it exactly (``lagrangian_hess_q``).
    """

    _lagrangian_hess_q: Any = attrs.field(default=None, kw_only=True)

    def D11L(self, q, v):
        """∂²L/∂q² = ½ vᵀ(∂²M/∂q²)v − ∇²V (exact, generated)."""
        return np.asarray(self._lagrangian_hess_q(q, v))


# ----------------------------------------------------------------------------- helpers
class _Builder:
    """Sympy-side state of one build: symbols, parameters, generated functions."""

    def __init__(self, sp, q, v, params, group=None, gsyms=None, controls=()):
        self.sp = sp
        self.q = list(q)
        self.v = list(v)
        self.u = list(controls)
        self.group = group
        self.gsyms = gsyms  # sympy Matrix of the group element's entry symbols (or a vector)
        self.scalar_subs: dict = {}
        self.array_syms: list = []
        self.array_vals: list = []
        for sym, val in (params or {}).items():
            sym = sp.sympify(sym)
            if not isinstance(sym, sp.Symbol):
                raise InputError(
                    f"`params` keys must be sympy Symbols, got {sym!r} ({type(sym).__name__}); "
                    "pass e.g. params={sympy.Symbol('m'): 1.0}."
                )
            arr = np.asarray(val, dtype=float)
            if not np.all(np.isfinite(arr)):
                raise InputError(f"`params[{sym}]` must be finite, got {val!r}.")
            if arr.ndim == 0:
                self.scalar_subs[sym] = sp.Float(float(arr))
            else:
                arr = arr.copy()
                arr.setflags(write=False)
                self.array_syms.append(sym)
                self.array_vals.append(arr)
        try:
            self.param_batch = np.broadcast_shapes(*(a.shape for a in self.array_vals))
        except ValueError as exc:
            shapes = [a.shape for a in self.array_vals]
            raise InputError(
                f"`params` arrays must broadcast against each other, got shapes {shapes}."
            ) from exc
        self.known = set(self.q) | set(self.v) | set(self.scalar_subs) | set(self.array_syms)
        if gsyms is not None:
            self.known |= set(gsyms)
        self.mass_check = None  # (q0, v0) -> None: M(q0) nonsingular
        self.rank_check = None  # (q0, v0) -> None: constraint Jacobian of full row rank

    def finish(self, system):
        """The built system, with its checks at the user's first state registered.

        With batched parameters it is also recorded as checked: generated callables are
        exact and broadcasting by construction, and with a parameter batch they return that
        batch for one configuration, which the one-configuration probe before the first step
        would misread as an error.
        """
        from ..systems._derivcheck import mark_verified, register_first_state_check

        mass, rank = self.mass_check, self.rank_check
        if isinstance(system, _sy.ConstrainedSystem) and mass is not None:
            register_first_state_check(system.system, mass)
        if mass is not None or rank is not None:
            def first_state(q0, v0):
                if mass is not None:
                    mass(q0, v0)
                if rank is not None:
                    rank(q0, v0)

            register_first_state_check(system, first_state)
        if self.array_vals:
            mark_verified(system)
            if isinstance(system, _sy.ConstrainedSystem):
                mark_verified(system.system)
        return system

    def on_first_state_mass(self, kernel, what: str, argspec: str) -> None:
        """Check, once at the first state, that ``kernel`` (M or ∂²L/∂q̇²) is nonsingular."""

        def check(q0, v0):
            M = np.asarray(kernel(q0, v0) if "v" in argspec else kernel(q0))
            n = M.shape[-1]
            with np.errstate(all="ignore"):
                cond = np.linalg.cond(M) if np.all(np.isfinite(M)) else np.array(np.inf)
            bad = ~(cond <= _mass_cond_max(n))
            if np.any(bad):
                where = np.unravel_index(int(np.argmax(np.where(bad, np.inf, cond))),
                                         np.shape(cond)) if np.ndim(cond) else ()
                at = "`q0" + (f"[{', '.join(map(str, where))}]" if where else "") + "`"
                raise SingularMatrixError(
                    f"The {what} ∂²L/∂q̇² is singular at the initial state ({at}): condition "
                    f"number {float(np.max(cond)):.2e} > 1/(n·eps) = {_mass_cond_max(n):.2e}, "
                    "so "
                    "the Legendre map cannot be inverted there. Move `q0` away from this "
                    "configuration (a coordinate singularity of the chosen coordinates) or "
                    "use coordinates that are regular there."
                )

        self.mass_check = check

    def on_first_state_rank(self, jac, what: str, argspec: str) -> None:
        """Check, once at the first state, that the constraint Jacobian has full row rank."""

        def check(q0, v0):
            B = np.asarray(jac(q0, v0) if "v" in argspec else jac(q0))
            m = B.shape[-2]
            with np.errstate(all="ignore"):
                s = np.linalg.svd(B, compute_uv=False) if np.all(np.isfinite(B)) else None
            if s is None:
                raise SingularMatrixError(
                    f"The Jacobian of the {what} is not finite at the initial state: check "
                    "`q0` and the constraint expressions."
                )
            tol = _rank_tol(B)
            rank = np.sum(s > tol[..., None], axis=-1)
            if np.any(rank < m):
                k = int(np.min(rank))
                raise SingularMatrixError(
                    f"The {m} {what} are not independent at the initial state `q0`: their "
                    f"Jacobian has numerical rank {k} < {m} there (singular values below "
                    f"max(m, n)·eps·σ_max = {float(np.max(tol)):.2e} count as zero). Move `q0` "
                    "to a point where they are independent, or remove the constraint that is "
                    "redundant there."
                )

        self.rank_check = check

    # -- expressions
    def prepare(self, expr, what: str, controls: bool = False):
        """sympify, check its symbols, substitute the scalar parameters (``controls``: the
        control symbols are allowed, only in a force)."""
        sp = self.sp
        try:
            e = sp.sympify(expr)
        except (sp.SympifyError, TypeError) as exc:
            raise InputError(f"`{what}` must be a sympy expression, got {expr!r}.") from exc
        if not isinstance(e, sp.Expr):
            raise InputError(f"`{what}` must be a scalar sympy expression, got {e!r}.")
        used_u = e.free_symbols & set(self.u)
        if used_u and not controls:
            names = ", ".join(sorted(str(s) for s in used_u))
            raise InputError(
                f"`{what}` uses the control symbol(s) {names}: controls enter only the "
                "external force (`force=`), not the Lagrangian or the constraints."
            )
        unknown = e.free_symbols - self.known - set(self.u)
        if unknown:
            names = ", ".join(sorted(str(s) for s in unknown))
            raise InputError(
                f"`{what}` uses the symbol(s) {names}, which are neither coordinates, "
                "velocities nor parameters: add them to `params` (a mapping symbol -> value) "
                "or to the coordinates."
            )
        if e.has(sp.Derivative) or any(isinstance(f, sp.core.function.AppliedUndef)
                                       for f in e.atoms(sp.Function)):
            raise InputError(
                f"`{what}` contains undefined functions or derivatives ({e!r}): use plain "
                "Symbols for the coordinates and velocities (or from_lagranges_method for "
                "dynamicsymbols)."
            )
        return e.xreplace(self.scalar_subs)

    def depends(self, e, syms) -> bool:
        return bool(e.free_symbols & set(syms))

    def is_constant(self, exprs) -> bool:
        """True when no entry depends on the state or on an array parameter."""
        varying = set(self.q) | set(self.v) | set(self.array_syms)
        if self.gsyms is not None:
            varying |= set(self.gsyms)
        return not any(self.sp.sympify(e).free_symbols & varying for e in exprs)

    def numeric(self, exprs, shape) -> np.ndarray:
        return np.array([float(e) for e in exprs], dtype=float).reshape(shape)

    # -- derivatives
    def grad(self, exprs, syms):
        """[..., k] = ∂e/∂s_k for every entry e (C order)."""
        return [e.diff(s) for e in exprs for s in syms]

    def ltgrad(self, exprs):
        """Left-trivialized derivative [..., j] = d/dε e(g·exp(ε E_j))|₀ for every entry e."""
        sp = self.sp
        G = self.gsyms
        if len(tuple(self.group.shape)) == 1:  # Rⁿ stored as a vector: plain gradient
            return self.grad(exprs, list(G))
        gens = np.asarray(self.group.generators())
        gE = [G * sp.Matrix(E.tolist()).applyfunc(sp.nsimplify) for E in gens]
        out = []
        for e in exprs:
            De = [e.diff(s) for s in G]  # entries of ∂e/∂g in C order
            for M in gE:
                out.append(sp.Add(*[d * m for d, m in zip(De, M) if d != 0 and m != 0]))
        return out

    # -- code
    def function(self, name, argspec, exprs, shape):
        args = []
        for a in argspec:
            if a == "q":
                args.append(("q", 1, {s: (i,) for i, s in enumerate(self.q)}))
            elif a == "v":
                args.append(("v", 1, {s: (i,) for i, s in enumerate(self.v)}))
            elif a == "u":
                args.append(("u", 1, {s: (i,) for i, s in enumerate(self.u)}))
            elif a == "g":
                k = len(tuple(self.group.shape))
                if k == 1:
                    idx = {s: (i,) for i, s in enumerate(self.gsyms)}
                else:
                    cols = self.gsyms.shape[1]
                    idx = {s: divmod(i, cols) for i, s in enumerate(self.gsyms)}
                args.append(("g", k, idx))
        src = generate_source(self.sp, name, args, exprs, tuple(shape), self.array_syms)
        return GeneratedFunction(src, name, tuple(self.array_vals))

    def random_point(self, rng, with_v=True):
        """A generic point (q or g, and v) with the parameters' batch shape."""
        b = self.param_batch
        if self.group is not None:
            g = self.group.random(rng, b)
            q = g
        else:
            q = rng.standard_normal((*b, len(self.q)))
        v = rng.standard_normal((*b, len(self.v)))
        return q, v


def _as_symbol_list(sp, x, what: str) -> list:
    try:
        items = list(x)
    except TypeError:
        items = [x]
    items = [sp.sympify(s) for s in items]
    for s in items:
        if not isinstance(s, sp.Symbol):
            raise InputError(
                f"`{what}` must be a sequence of sympy Symbols, got {s!r} "
                f"({type(s).__name__}): declare them with sympy.symbols(...)."
            )
    if len(set(items)) != len(items):
        raise InputError(f"`{what}` holds a symbol twice: {items}.")
    if not items:
        raise InputError(f"`{what}` must hold at least one symbol.")
    return items


def _as_expr_list(x) -> list:
    """A sequence of expressions from None, one expression, a list or a sympy Matrix."""
    if x is None:
        return []
    if isinstance(x, (list, tuple)):
        return list(x)
    try:
        return list(x)  # a sympy Matrix or a numpy array iterates over its entries
    except TypeError:
        return [x]


def _check_rank(B: np.ndarray, what: str) -> None:
    """Raise when the (..., m, n) constraint Jacobian is rank deficient at a generic point."""
    m = B.shape[-2]
    s = np.linalg.svd(B, compute_uv=False)
    rank = np.min(np.sum(s > 1e-10 * np.max(s, axis=-1, keepdims=True), axis=-1))
    if rank < m:
        raise SingularMatrixError(
            f"The {m} {what} are not independent: their Jacobian has rank {rank} < {m} at a "
            "generic (random) point, so they are dependent everywhere. Remove the redundant "
            "constraints."
        )


def _check_mass(b: _Builder, kernel, what: str, argspec) -> None:
    """Singular mass matrix ∂²L/∂v² at a generic point (a symbolic zero determinant too)."""
    rng = np.random.default_rng(_SEED)
    q, v = b.random_point(rng)
    M = np.asarray(kernel(q, v) if "v" in argspec else kernel(q))
    s = np.linalg.svd(M, compute_uv=False)
    if np.any(s[..., -1] <= 1e-12 * s[..., 0]) or not np.all(np.isfinite(s)):
        raise SingularMatrixError(
            f"The {what} ∂²L/∂q̇² is singular at a generic (random) point (smallest singular "
            f"value {np.min(s[..., -1]):.2e}): the Lagrangian is degenerate. Check that every "
            "velocity enters the kinetic energy."
        )


# ----------------------------------------------------------------------------- vector space
def _mechanical_split(b: _Builder, L):
    """(M entries, V) when L = ½ vᵀM(q)v − V(q), else None."""
    sp = b.sp
    n = len(b.v)
    H = [L.diff(vi).diff(vj) for vi in b.v for vj in b.v]
    if any(b.depends(h, b.v) for h in H):
        return None
    zero = dict.fromkeys(b.v, 0)
    lin = [sp.simplify(L.diff(vi).xreplace(zero)) for vi in b.v]
    if any(e != 0 for e in lin):
        return None
    V = -L.xreplace(zero)
    return [sp.simplify(h) for h in H], V, n


class _ForceJacobians:
    """``(q, v, u) -> (F_q, F_v, F_u)`` from the generated blocks (picklable: the blocks
    pickle through their source; ``F_u`` is an empty ``(..., n, 0)`` without controls)."""

    __slots__ = ("fq", "fu", "fv")

    def __init__(self, fq, fv, fu) -> None:
        self.fq, self.fv, self.fu = fq, fv, fu

    def __call__(self, q, v, u):
        Fq = self.fq(q, v, u)
        Fv = self.fv(q, v, u)
        Fu = self.fu(q, v, u) if self.fu is not None else np.zeros((*Fq.shape[:-1], 0))
        return Fq, Fv, Fu


def _force_kwargs(b: _Builder, F) -> dict:
    """The ``force=``, ``force_derivatives=`` and ``n_controls=`` of the system (exact)."""
    if F is None:
        return {}
    n, m = len(b.v), len(b.u)
    # on a group: F(g, η, u) with the left-trivialized F_g (from_trivialized_lagrangian)
    a, Fq = ("gvu", b.ltgrad(F)) if b.group is not None else ("qvu", b.grad(F, b.q))
    fu = b.function("force_du", a, b.grad(F, b.u), (n, m)) if m else None
    return {
        "force": b.function("force", a, F, (n,)),
        "force_derivatives": _ForceJacobians(b.function("force_dq", a, Fq, (n, n)),
                                             b.function("force_dv", a, b.grad(F, b.v), (n, n)),
                                             fu),
        "n_controls": m,
    }


class _KKTDerivatives:
    """``(q, v) -> (dG, df, dc)`` of ``ConstrainedSystem(kkt_derivatives=...)`` from the
    generated blocks (picklable through their source)."""

    __slots__ = ("dc", "df", "dg")
    #: exact by construction: ``ConstrainedSystem`` does not difference-check it
    generated = True

    def __init__(self, dg, df, dc) -> None:
        self.dg, self.df, self.dc = dg, df, dc

    def __call__(self, q, v):
        return self.dg(q, v), self.df(q, v), self.dc(q, v)


def _kkt_derivatives(b: _Builder, L, c) -> _KKTDerivatives:
    """The exact derivatives in (q, v) of the data of the multiplier's KKT system
    (:meth:`~chetaev.discrete_lagrangian.ConstrainedSystem.multiplier_jacobian`): G = ∂²L/∂q̇²,
    the force-free right-hand side f = ∂L/∂q − (∂²L/∂q̇∂q) q̇ (on a group, eq. of §6,
    f = ad*_η ∂ℓ/∂η + L*_g D₁ℓ − D₂₁ℓ η with left-trivialized g-derivatives) and the
    constraint's c = (∂Φ/∂q) q̇ (entries ``c``), differentiated once more by sympy: third
    derivatives of L and second q-derivatives of Φ, which no numerical system provides."""
    sp = b.sp
    n, m = len(b.v), len(c)
    on_group = b.group is not None
    qgrad = b.ltgrad if on_group else (lambda es: b.grad(es, b.q))

    def dx(exprs):  # [..., k] over the stacked (q, v): q-columns first
        dq, dv = qgrad(exprs), b.grad(exprs, b.v)
        return [e for i in range(len(exprs)) for e in (dq[i * n:(i + 1) * n]
                                                      + dv[i * n:(i + 1) * n])]

    G = b.grad(b.grad([L], b.v), b.v)
    d2 = b.grad([L], b.v)
    d21 = qgrad(d2)  # [i, j] = ∂(∂L/∂v_i)/∂q_j
    f = [e - sum((d21[i * n + j] * b.v[j] for j in range(n)), sp.Integer(0))
         for i, e in enumerate(qgrad([L]))]
    if on_group:  # + ad*_η ∂ℓ/∂η = Σ_j ad(η)[j, i] (∂ℓ/∂η)_j, ad(η) = Σ_k η_k ad(e_k)
        adk = np.asarray(b.group.ad(np.eye(n), check=False), dtype=float)
        for i in range(n):
            f[i] += sum((sp.nsimplify(adk[k, j, i]) * b.v[k] * d2[j]
                         for k in range(n) for j in range(n) if adk[k, j, i] != 0),
                        sp.Integer(0))
    args = "gv" if on_group else "qv"
    return _KKTDerivatives(b.function("kkt_dG", args, dx(G), (n, n, 2 * n)),
                           b.function("kkt_df", args, dx(f), (n, 2 * n)),
                           b.function("kkt_dc", args, dx(c), (m, 2 * n)))


def _velocity_c(b: _Builder, phis, qgrad) -> list:
    """c = (∂Φ/∂q)·v of velocity constraints Φ(q, v) (on a group, left-trivialized)."""
    n = len(b.v)
    dq = qgrad(phis)
    return [sum((dq[a * n + j] * b.v[j] for j in range(n)), b.sp.Integer(0))
            for a in range(len(phis))]


def _vector_system(b: _Builder, L, F=None):
    n = len(b.q)
    fkw = _force_kwargs(b, F)
    split = _mechanical_split(b, L)
    if split is not None:
        H, V, _ = split
        gradV = b.grad([V], b.q)
        hessV = b.grad(gradV, b.q)
        pot = b.function("potential", "q", [V], ())
        pgrad = b.function("potential_grad", "q", gradV, (n,))
        phess = b.function("potential_hess", "q", hessV, (n, n))
        if b.is_constant(H):
            M = b.numeric(H, (n, n))
            s = np.linalg.eigvalsh(0.5 * (M + M.T))
            if not np.all(np.isfinite(M)) or s[0] <= 1e-14 * max(1.0, abs(s[-1])):
                raise SingularMatrixError(
                    f"The mass matrix ∂²L/∂q̇² = {M.tolist()} is not positive definite "
                    f"(eigenvalues {s.tolist()}): check the kinetic energy."
                )
            return _sy.MechanicalSystem(M, pot, pgrad, phess, **fkw)
        _symbolic_singular(b, H, n)
        mass = b.function("mass", "q", H, (n, n))
        _check_mass(b, mass, "mass matrix", "q")
        b.on_first_state_mass(mass, "mass matrix", "q")
        dM = b.grad(H, b.q)
        return SymbolicMechanicalSystem(
            mass, pot, pgrad, phess, b.function("mass_grad", "q", dM, (n, n, n)), n=n, **fkw,
            lagrangian_hess_q=b.function("lagrangian_hess_q", "qv", b.grad(b.grad([L], b.q),
                                                                             b.q), (n, n)),
        )
    dq = b.grad([L], b.q)
    dv = b.grad([L], b.v)
    dvv = b.grad(dv, b.v)
    _symbolic_singular(b, dvv, n)
    d2vv = b.function("d2L_dv2", "qv", dvv, (n, n))
    _check_mass(b, d2vv, "Hessian", "qv")
    b.on_first_state_mass(d2vv, "Hessian", "qv")
    return _sy.LagrangianSystem(
        n,
        b.function("lagrangian", "qv", [L], ()),
        b.function("dL_dq", "qv", dq, (n,)),
        b.function("dL_dv", "qv", dv, (n,)),
        d2vv,
        b.function("d2L_dvdq", "qv", b.grad(dv, b.q), (n, n)),
        b.function("d2L_dq2", "qv", b.grad(dq, b.q), (n, n)),
        **fkw,
    )


def _symbolic_singular(b: _Builder, H, n: int) -> None:
    if n <= 4:
        det = b.sp.simplify(b.sp.Matrix(n, n, H).det())
        if det == 0:
            raise SingularMatrixError(
                "The mass matrix ∂²L/∂q̇² has determinant identically zero: the Lagrangian is "
                "degenerate. Check that every velocity enters the kinetic energy."
            )


def _linear_split(b: _Builder, phis, vsyms):
    """(A entries, a entries) when every Φ is affine in v, else None."""
    A = b.grad(phis, vsyms)
    if any(b.depends(e, vsyms) for e in A):
        return None
    zero = dict.fromkeys(vsyms, 0)
    return A, [p.xreplace(zero) for p in phis]


def _velocity_constraint(b: _Builder, phis, qarg: str, qgrad):
    """LinearVelocityConstraint (linear/affine) or VelocityConstraint for the list Φ."""
    sp = b.sp
    m, n = len(phis), len(b.v)
    split = _linear_split(b, phis, b.v)
    rng = np.random.default_rng(_SEED)
    qr, vr = b.random_point(rng)
    if split is not None:
        A, a = split
        affine = any(sp.simplify(e) != 0 for e in a)
        if b.is_constant(A):
            Aobj = b.numeric(A, (m, n))
            _check_rank(Aobj, "velocity constraints")
            dA = None
        else:
            Aobj = b.function("A", qarg, A, (m, n))
            _check_rank(np.asarray(Aobj(qr)), "velocity constraints")
            b.on_first_state_rank(Aobj, "velocity constraints", qarg)
            dA = b.function("dA", qarg, qgrad(A), (m, n, n))
        aobj = da = None
        if affine:
            if b.is_constant(a):
                aobj = b.numeric(a, (m,))
            else:
                aobj = b.function("a", qarg, a, (m,))
                da = b.function("da", qarg, qgrad(a), (m, n))
        return _sy.LinearVelocityConstraint(Aobj, aobj, dA, da)
    dv = b.grad(phis, b.v)
    dq = qgrad(phis)
    args = qarg + "v"
    dphi_dv = b.function("dphi_dv", args, dv, (m, n))
    _check_rank(np.asarray(dphi_dv(qr, vr)), "velocity constraints")
    b.on_first_state_rank(dphi_dv, "velocity constraints", args)
    return _sy.VelocityConstraint(
        b.function("phi", args, phis, (m,)),
        b.function("dphi_dq", args, dq, (m, n)),
        dphi_dv,
        b.function("d2phi_dvdq", args, qgrad(dv), (m, n, n)),
        b.function("d2phi_dv2", args, b.grad(dv, b.v), (m, n, n)),
        m=m,
    )


def from_lagrangian(L, q, qdot, *, holonomic=(), nonholonomic=(), params=None, force=None,
                    controls=()):
    """A system on Rⁿ from a symbolic Lagrangian L(q, q̇) and constraints.

    Parameters
    ----------
    L : sympy expression
        The Lagrangian in the coordinate symbols ``q``, the velocity symbols ``qdot`` and the
        parameter symbols of ``params``.
    q, qdot : sequence of sympy Symbol
        Coordinates and velocities (same length n).
    holonomic : sequence of sympy expressions, optional
        Φ(q) with the constraint Φ(q) = 0 (must not contain velocities).
    nonholonomic : sequence of sympy expressions, optional
        Φ(q, q̇) with the constraint Φ(q, q̇) = 0: linear (A(q)q̇), affine (A(q)q̇ + a(q)) or
        general. Holonomic and nonholonomic constraints cannot be mixed in one system.
    params : mapping sympy Symbol -> float or array, optional
        Parameter values. A scalar is substituted before differentiation (so a constant
        mass matrix stays constant); an array with batch axes is kept as a symbol and
        broadcasts against the state batch: its axes are matched with the *leading* batch
        axes of the state (so one system runs a parameter sweep as one batch, stages and all).
    force : sequence of n sympy expressions, optional
        The external generalized force F(q, q̇, u) (issue 20; the forced Euler–Lagrange
        equations d/dt ∂L/∂q̇ − ∂L/∂q = F, Marsden & West 2001 §3.2) in the coordinates,
        velocities, controls and parameters. The system gets ``force=``, exact
        ``force_derivatives=`` (∂F/∂q, ∂F/∂q̇, ∂F/∂u, generated) and ``n_controls=len(controls)``.
    controls : sequence of sympy Symbol, optional
        The control symbols u (held constant over a step; ``integrate(..., controls=U)``).
        Allowed only in ``force``.

    Returns
    -------
    MechanicalSystem, LagrangianSystem or ConstrainedSystem
        ``MechanicalSystem`` when L = ½ q̇ᵀM(q)q̇ − V(q) (with a constant mass matrix when M
        does not depend on q or on an array parameter), ``LagrangianSystem`` otherwise;
        wrapped in ``ConstrainedSystem`` with a ``HolonomicConstraint``,
        ``LinearVelocityConstraint`` or ``VelocityConstraint`` when constraints are given.
        Every derivative (second derivatives included) is exact.

    Raises
    ------
    InputError
        A symbol that is neither a coordinate, a velocity nor a parameter; a holonomic
        constraint that depends on velocities; holonomic and nonholonomic constraints mixed.
    SingularMatrixError
        A singular mass matrix (symbolically, or at a generic point); constraints that are
        dependent at a generic point. Raised later, once, at the first state a method sees
        (``integrate`` or a method's ``initial_state``): a mass matrix (or ∂²L/∂q̇²) with
        condition number above 1/(n·eps) at ``q0``, or a constraint Jacobian of numerical
        rank < m at ``q0`` (singular values below max(m, n)·eps·σ_max count as zero).
    ImportError
        sympy is not installed (``pip install chetaev-discrete-lagrangian[symbolic]``).

    Examples
    --------
    >>> import sympy as sp
    >>> x, y, th, vx, vy, w = sp.symbols("x y theta v_x v_y omega")
    >>> sleigh = from_lagrangian(
    ...     (vx**2 + vy**2) / 2 + w**2 / 4, [x, y, th], [vx, vy, w],
    ...     nonholonomic=[-sp.sin(th) * vx + sp.cos(th) * vy - w / 2])
    >>> type(sleigh.system).__name__, type(sleigh.constraint).__name__
    ('MechanicalSystem', 'LinearVelocityConstraint')
    """
    sp = _sympy()
    qs = _as_symbol_list(sp, q, "q")
    vs = _as_symbol_list(sp, qdot, "qdot")
    if len(qs) != len(vs):
        raise InputError(
            f"`q` and `qdot` must have the same length, got {len(qs)} and {len(vs)}."
        )
    if set(qs) & set(vs):
        raise InputError(f"`q` and `qdot` share the symbol(s) {set(qs) & set(vs)}.")
    us = _as_symbol_list(sp, controls, "controls") if _as_expr_list(controls) else []
    if set(us) & (set(qs) | set(vs)):
        raise InputError(
            f"`controls` share the symbol(s) {set(us) & (set(qs) | set(vs))} with `q`/`qdot`."
        )
    if us and force is None:
        raise InputError("`controls` need a `force`: pass force=[F_1, ..., F_n] using them.")
    b = _Builder(sp, qs, vs, params, controls=us)
    Le = b.prepare(L, "L")
    F = None
    if force is not None:
        F = [b.prepare(e, f"force[{i}]", controls=True)
             for i, e in enumerate(_as_expr_list(force))]
        if len(F) != len(qs):
            raise InputError(
                f"`force` must hold one expression per coordinate ({len(qs)}), got {len(F)}."
            )
    hol = [b.prepare(e, f"holonomic[{i}]") for i, e in enumerate(_as_expr_list(holonomic))]
    nh = [b.prepare(e, f"nonholonomic[{i}]") for i, e in enumerate(_as_expr_list(nonholonomic))]
    for i, e in enumerate(hol):
        if b.depends(e, vs):
            raise InputError(
                f"`holonomic[{i}]` = {e} depends on the velocities "
                f"{sorted(str(s) for s in e.free_symbols & set(vs))}: a holonomic constraint "
                "is Φ(q) = 0; pass velocity constraints in `nonholonomic`."
            )
    if hol and nh:
        raise InputError(
            "Holonomic and nonholonomic constraints cannot be mixed in one system (a "
            "ConstrainedSystem holds one kind): pass the holonomic ones in velocity form "
            "∂Φ/∂q·q̇ in `nonholonomic` instead."
        )
    system = _vector_system(b, Le, F)
    if hol:
        m, n = len(hol), len(qs)
        J = b.grad(hol, qs)
        jac = b.function("jacobian", "q", J, (m, n))
        qr, _ = b.random_point(np.random.default_rng(_SEED))
        _check_rank(np.asarray(jac(qr)), "holonomic constraints")
        b.on_first_state_rank(jac, "holonomic constraints", "q")
        con = _sy.HolonomicConstraint(b.function("phi", "q", hol, (m,)), jac,
                                  b.function("hessian", "q", b.grad(J, qs), (m, n, n)), m=m)
        # the velocity form Φ̃ = (∂Φ/∂q) q̇, c = (∂Φ̃/∂q) q̇
        vform = [sum((J[a * n + i] * vs[i] for i in range(n)), sp.Integer(0))
                 for a in range(m)]
        kkt = _kkt_derivatives(b, Le, _velocity_c(b, vform, lambda es: b.grad(es, qs)))
        return _with_kernels(b, Le, b.finish(_sy.ConstrainedSystem(
            system, con, kkt_derivatives=kkt)), F, holonomic=hol)
    if nh:
        qgrad = lambda es: b.grad(es, qs)  # noqa: E731
        kkt = _kkt_derivatives(b, Le, _velocity_c(b, nh, qgrad))
        return _with_kernels(b, Le, b.finish(_sy.ConstrainedSystem(
            system, _velocity_constraint(b, nh, "q", qgrad), kkt_derivatives=kkt)), F,
            nonholonomic=nh)
    return _with_kernels(b, Le, b.finish(system), F)


def _with_kernels(b: _Builder, L, system, F, **constraints):
    """``system`` with its compiled-backend kernels registered (issue 17; none with array
    parameters, which the scalar kernels do not take)."""
    from ..core._kernels import register_kernels
    from ._kernel_emit import emit_vector_kernels

    if b.array_syms:
        return system
    inner = getattr(system, "system", system)
    mass = np.asarray(inner.mass) if getattr(inner, "constant_mass", False) else None
    register_kernels(system, emit_vector_kernels(b.sp, b.q, b.v, L, mass=mass,
                                                 forced=F is not None, **constraints))
    return system


# ----------------------------------------------------------------------------- sympy.physics
def from_lagranges_method(lm):
    """The system of a ``sympy.physics.mechanics.LagrangesMethod``.

    The Lagrangian, the coordinates (dynamicsymbols q(t)) and the holonomic
    (``hol_coneqs``) and nonholonomic (``nonhol_coneqs``) constraints of ``lm`` are turned
    into plain symbols and passed to :func:`from_lagrangian`. Any other symbol in them must
    have been given a value: use ``lm`` with numbers, or call :func:`from_lagrangian` with
    ``params``.

    The multipliers follow the project's convention d/dt ∂L/∂v − ∂L/∂q = (∂Φ/∂v)ᵀλ. sympy's
    own λ (``lm.lam_vec``, in its ``eom`` and in ``mass_matrix_full``/``forcing_full``) is the
    negative of it: ``LagrangesMethod`` stores −∂Φ/∂q̇ as ``lam_coeffs`` (sympy issue
    #30215), so λ_sympy = −λ.

    Raises
    ------
    InputError
        ``lm`` is not a LagrangesMethod, has nonconservative forces (``forcelist``), or uses
        a symbol that is not a coordinate or velocity.
    """
    sp = _sympy()
    from sympy.physics.mechanics import LagrangesMethod, dynamicsymbols

    if not isinstance(lm, LagrangesMethod):
        raise InputError(
            f"`lm` must be a sympy.physics.mechanics.LagrangesMethod, got {type(lm).__name__}."
        )
    if lm._forcelist:
        raise InputError(
            "`lm` has nonconservative forces (forcelist): only conservative systems (a "
            "Lagrangian and constraints) can be converted; put potential forces into L."
        )
    t = dynamicsymbols._t
    qf = list(lm.q)
    qd = [f.diff(t) for f in qf]
    qs = [sp.Symbol(f"q{i}") for i in range(len(qf))]
    vs = [sp.Symbol(f"u{i}") for i in range(len(qf))]
    rep = dict(zip(qd, vs)) | dict(zip(qf, qs))
    L = sp.sympify(lm._L[0]).xreplace(rep)
    hol = [sp.sympify(e).xreplace(rep) for e in lm._hol_coneqs]
    nh = [sp.sympify(e).xreplace(rep) for e in list(lm.coneqs)[len(hol):]]
    extra = set().union(L.free_symbols, *(e.free_symbols for e in hol + nh)) - {t}
    extra -= set(qs) | set(vs)
    if extra or any(e.has(t) for e in [L, *hol, *nh]):
        names = ", ".join(sorted(str(s) for s in extra)) or "functions of t"
        raise InputError(
            f"`lm` uses {names} besides its coordinates and their derivatives: give every "
            "parameter a number (e.g. L.subs({m: 1.0})) before building LagrangesMethod, or "
            "use from_lagrangian(..., params=...)."
        )
    return from_lagrangian(L, qs, vs, holonomic=hol, nonholonomic=nh)


# ----------------------------------------------------------------------------- Lie groups
def _group_symbols(sp, group, g):
    shape = tuple(group.shape)
    if g is None:
        if len(shape) == 1:
            return sp.Matrix(sp.symbols(f"_g0:{shape[0]}")), {}
        k = shape[0]
        return sp.Matrix(k, k, sp.symbols(f"_g0:{k * k}")), {}
    if isinstance(g, sp.MatrixSymbol) or hasattr(g, "shape"):
        gshape = tuple(g.shape)
        want = shape if len(shape) == 2 else (shape[0], 1)
        if gshape not in (want, shape):
            raise InputError(
                f"`g` must be a sympy matrix of the group's shape {shape}, got {gshape}."
            )
        entries = list(sp.Matrix(g))
        syms, rep = [], {}
        for i, e in enumerate(entries):
            if isinstance(e, sp.Symbol):
                syms.append(e)
            else:  # a MatrixElement of a MatrixSymbol
                s = sp.Symbol(f"_{g}_{i}")
                rep[e] = s
                syms.append(s)
        if len(set(syms)) != len(syms):
            raise InputError("`g` must hold distinct symbols (or be a sympy.MatrixSymbol).")
        if len(shape) == 1:
            return sp.Matrix(syms), rep
        return sp.Matrix(shape[0], shape[1], syms), rep
    raise InputError(
        f"`g` must be a sympy MatrixSymbol or Matrix of symbols of shape {shape}, got "
        f"{type(g).__name__}."
    )


def from_trivialized_lagrangian(group, ell, eta, *, g=None, nonholonomic=(), params=None,
                                force=None, controls=()):
    """A left-trivialized system ℓ(g, η) on a ``chetaev.liegroups`` group.

    Parameters
    ----------
    group : chetaev.liegroups group
        The configuration group (SO3, SE2, ``Product(SO3, Rn(2))``, ...).
    ell : sympy expression
        ℓ(g, η) = L(g, g·hat(η)) in the algebra coordinates ``eta`` and, for a potential, the
        entries of ``g``.
    eta : sequence of sympy Symbol
        Algebra coordinates (``group.dim`` of them).
    g : sympy MatrixSymbol or Matrix of Symbols, optional
        The group element, of the group's matrix shape (``group.shape``); needed when ℓ or
        a constraint depends on the configuration.
    nonholonomic : sequence of sympy expressions, optional
        Φ(g, η) = 0, recognised as linear/affine in η (:class:`LinearVelocityConstraint`) or
        general (:class:`VelocityConstraint`).
    params : mapping sympy Symbol -> float or array, optional
        As in :func:`from_lagrangian`.
    force : sequence of group.dim sympy expressions, optional
        The left-trivialized external force F(g, η, u) (issue 20; a covector in the algebra
        coordinates, entering the forced Euler–Poincaré equations like L*_g D₁ℓ), in the
        entries of ``g``, ``eta``, ``controls`` and parameters. The system gets ``force=``,
        exact ``force_derivatives=`` (the left-trivialized ∂F/∂g, ∂F/∂η, ∂F/∂u, generated)
        and ``n_controls=len(controls)``.
    controls : sequence of sympy Symbol, optional
        The control symbols u (held constant over a step; ``integrate(..., controls=U)``).
        Allowed only in ``force``.

    Returns
    -------
    TrivializedMechanicalSystem, TrivializedLagrangianSystem or ConstrainedSystem
        ``TrivializedMechanicalSystem`` when ℓ = ½ηᵀ𝕀η − V(g) with a constant 𝕀. Every
        configuration derivative is the left-trivialized one,
        ``[j] = d/dε f(g·exp(ε E_j))|₀ = Σ_ab ∂f/∂g_ab (g E_j)_ab`` with E_j the group's
        generators, computed exactly.
    """
    sp = _sympy()
    for attr in ("dim", "shape", "generators", "random"):
        if not hasattr(group, attr):
            raise InputError(
                f"`group` must be a chetaev.liegroups group (SO3, SE2, Product(...)), got "
                f"{group!r} without `{attr}`."
            )
    d = int(group.dim)
    es = _as_symbol_list(sp, eta, "eta")
    if len(es) != d:
        raise InputError(f"`eta` must hold group.dim = {d} symbols, got {len(es)}.")
    gsyms, rep = _group_symbols(sp, group, g)
    us = _as_symbol_list(sp, controls, "controls") if _as_expr_list(controls) else []
    if set(us) & (set(es) | set(gsyms)):
        raise InputError(
            f"`controls` share the symbol(s) {set(us) & (set(es) | set(gsyms))} with `eta`/`g`."
        )
    if us and force is None:
        raise InputError("`controls` need a `force`: pass force=[F_1, ..., F_d] using them.")
    b = _Builder(sp, [], es, params, group=group, gsyms=list(gsyms), controls=us)
    b.gsyms = gsyms
    le = b.prepare(sp.sympify(ell).xreplace(rep), "ell")
    F = None
    if force is not None:
        F = [b.prepare(sp.sympify(e).xreplace(rep), f"force[{i}]", controls=True)
             for i, e in enumerate(_as_expr_list(force))]
        if len(F) != d:
            raise InputError(
                f"`force` must hold one expression per algebra coordinate ({d}), got {len(F)}."
            )
    nh = [b.prepare(sp.sympify(e).xreplace(rep), f"nonholonomic[{i}]")
          for i, e in enumerate(_as_expr_list(nonholonomic))]
    system = _group_system(b, le, d, F)
    if nh:
        kkt = _kkt_derivatives(b, le, _velocity_c(b, nh, b.ltgrad))
        system = b.finish(_sy.ConstrainedSystem(system, _velocity_constraint(b, nh, "g",
                                                                             b.ltgrad),
                                                kkt_derivatives=kkt))
    else:
        system = b.finish(system)
    return _with_lie_kernels(b, le, system, F, nh)


def _with_lie_kernels(b: _Builder, le, system, F, nh):
    """``system`` with its compiled Lie-backend kernels registered (issue 17,
    ``_kernel_emit_lie``)."""
    from ..core._kernels import register_kernels
    from ._kernel_emit_lie import emit_lie_kernels

    register_kernels(system, emit_lie_kernels(b, le, system, nonholonomic=nh,
                                              forced=F is not None))
    return system


def _group_system(b: _Builder, le, d: int, F=None):
    sp = b.sp
    fkw = _force_kwargs(b, F)
    zero = dict.fromkeys(b.v, 0)
    H = [le.diff(vi).diff(vj) for vi in b.v for vj in b.v]
    lin = [sp.simplify(le.diff(vi).xreplace(zero)) for vi in b.v]
    if b.is_constant(H) and all(e == 0 for e in lin):
        inertia = b.numeric(H, (d, d))
        s = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
        if s[0] <= 1e-14 * max(1.0, abs(s[-1])):
            raise SingularMatrixError(
                f"The inertia ∂²ℓ/∂η² = {inertia.tolist()} is not positive definite "
                f"(eigenvalues {s.tolist()}): check the kinetic energy."
            )
        V = -le.xreplace(zero)
        gradV = b.ltgrad([V])
        return _sy.TrivializedMechanicalSystem(
            b.group, inertia, b.function("potential", "g", [V], ()),
            b.function("potential_grad", "g", gradV, (d,)),
            b.function("potential_hess", "g", b.ltgrad(gradV), (d, d)), **fkw,
        )
    d1 = b.ltgrad([le])
    d2 = b.grad([le], b.v)
    if not any(b.depends(h, b.v) for h in H):
        _symbolic_singular(b, H, d)
    d22 = b.function("d2l_deta2", "gv", b.grad(d2, b.v), (d, d))
    _check_mass(b, d22, "Hessian", "gv")
    b.on_first_state_mass(d22, "Hessian", "gv")
    return _sy.TrivializedLagrangianSystem(
        b.group,
        b.function("lagrangian", "gv", [le], ()),
        b.function("dl_dg", "gv", d1, (d,)),
        b.function("dl_deta", "gv", d2, (d,)),
        d22,
        b.function("d2l_detadg", "gv", b.ltgrad(d2), (d, d)),
        b.function("d2l_dg2", "gv", b.ltgrad(d1), (d, d)),
        b.function("d2l_dgdeta", "gv", b.grad(d1, b.v), (d, d)), **fkw,
    )
