"""Residual builder of (constrained) variational partitioned Runge–Kutta steps, with hooks.

This module is the shared engine of :class:`VPRK`, :class:`ConstrainedPRK` and of the
nonholonomic PRK methods of ``chetaev.nh_integrators``. It writes the stage equations of
Theorem 4.2 / eq. (13) / eq. (14) of the paper (paper Thm. 4.2; eq. (13); eq. (14), App. D) once,
as a pure
function of the unknowns, with an analytic Jacobian:

    Q^i = q_k + h Σ_j a_ij V^j            q_{k+1} = q_k + h Σ_j b_j V^j
    W^i = D1L(Q^i, V^i) + F^i(Q^i, V^i, Λ^i)          (F: hook (i), the extra force)
    P^i = p_k + h Σ_j â_ij W^j            p_{k+1} = p_k + h Σ_j b̂_j W^j
    R1_i = D2L(Q^i, V^i) − P^i = 0        (sn equations)
    R2   = extra equations                 (hook (ii), e.g. Φ(Q^i) = 0, tangency)

Unknowns ``x = [V (s·n), Λ^i for the free stages (k·m), extra (e)]`` (hook (iii): which Λ^i
are unknowns; the others are given values, e.g. Λ^1 = λ_k in the nonholonomic PRK; hook (iv):
``e`` further unknowns that only the extra equations see, e.g. the stage velocities v_k^i of
the nonholonomic PRK when FL has no explicit inverse).

Hamiltonian unknowns (hook (v), ``unknowns = "QP"``; eq. (15) of the nonholonomic paper):
``x = [Q (s·n), P (s·n), Λ_free (k·m), extra (e)]`` with ``V^i = FL^{-1}(Q^i, P^i)`` (the
system's ``legendre_inv``) and the rows ::

    RQ_i = Q^i − q_k − h Σ_j a_ij V^j,    RP_i = P^i − p_k − h Σ_j â_ij W^j

in place of R1 (the same equations composed with the Legendre map: the same solution, other
Newton unknowns). Every other hook is unchanged; the evaluation then has ``D2L = P`` and a
``dV_dx = g^{-1}(dP − D21L dQ)`` that depends on x (``(..., s, n, N)``).

Hooks
-----
A hooks object (duck typed; see :class:`StageHooks` for a do-nothing base class) has

``m`` : int
    Number of multipliers per stage (0: no multipliers).
``free`` : tuple of bool, length s
    ``free[i]`` is True when Λ^i is an unknown of the step (hook iii).
``n_extra`` : int, optional (default 0)
    Number ``e`` of extra unknowns (hook iv), appended to ``x``; the hooks read them as
    ``ev.x_extra`` ``(..., e)`` (their derivative in x is the identity on the last ``e``
    columns).
``unknowns`` : {"V", "QP"}, optional (default "V")
    The stage velocities, or the Hamiltonian unknowns (Q, P) (hook v; :func:`prk_residual`
    and :func:`solve_stages` only).
``force(Q, V, Lam, jacobian)`` → ``(F, dF_dQ, dF_dV, dF_dLam)``  (hook i)
    Stagewise extra force added to W^i, shapes ``(..., s, n)``, ``(..., s, n, n)``,
    ``(..., s, n, n)``, ``(..., s, n, m)``; ``F`` may be ``None`` (no force) and any
    derivative may be ``None`` (zero; always when ``jacobian`` is False).
``equations(ev)`` → ``(R2, dR2_dx)``  (hook ii)
    Extra equations ``(..., E)`` and their Jacobian ``(..., E, N)`` from the
    :class:`StageEvaluation` ``ev`` (which holds every stage quantity and, when
    ``ev.dW_dx is not None``, its derivative with respect to x; return ``dR2_dx = None``
    otherwise). ``E`` must equal the number of free multiplier entries plus the extra
    unknowns, k·m + e. ``force`` is
    always called before ``equations`` on the same unknowns, so a per-step hooks object may
    cache values (e.g. constraint Jacobians) between the two calls.

:func:`prk_residual` returns the residual, the Jacobian and the evaluation.

One coding, two hook protocols
------------------------------
:class:`PRKStep` is the engine: built once per step (its constants from :func:`prk_constants`,
cached per pair, step size and mass), it evaluates the stage arrays once per iterate (``Q, V,
Λ, W`` and every stage mix of ``W`` in one product) and writes the rows above from them. It
reads the hooks in one of two protocols on those arrays: the hooks above (``force``,
``equations(ev)`` on a :class:`StageEvaluation`, with the tangent-form Jacobian; every hook
kind, extra unknowns, both sets of unknowns), which :func:`prk_residual` (one call) and
:func:`solve_stages` use (VPRK, ConstrainedPRK, the nonholonomic PRK's implicit-velocity,
IIIB and Hamiltonian variants), or the per-step hooks listed on the class (the nonholonomic
PRK's default path: hook-requested stage mixes, flat and stage-major batch layouts, the
Kronecker-structured Jacobian, a structured Newton matrix). The two Jacobian forms are tested
equal to round-off.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .._util._errors import InputError
from ._interface import interface_of

__all__ = [
    "PRKCoefficients",
    "PRKStep",
    "StageEvaluation",
    "StageHooks",
    "StepSolution",
    "coefficients_from",
    "fixed_order_product",
    "pair_symmetric",
    "prk_constants",
    "prk_residual",
    "solve_stages",
]


@attrs.frozen(eq=False)
class PRKCoefficients:
    """Coefficients (a, b, c) and (â, b̂) of a partitioned RK pair, as float arrays."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    ahat: np.ndarray
    bhat: np.ndarray
    name: str = ""

    @property
    def s(self) -> int:
        """Number of stages."""
        return int(self.b.shape[0])


def pair_symmetric(coeffs: PRKCoefficients, tol: float = 1e-12) -> bool:
    """Whether both tableaux of the pair pass the stage-reversal test of symmetry
    a_{s+1−i, s+1−j} + a_ij = b_j, b_{s+1−i} = b_i (HLW §V.2), so that Φ_{−h} = Φ_h⁻¹."""
    def sym(a: np.ndarray, b: np.ndarray) -> bool:
        return bool(np.all(np.abs(a[::-1, ::-1] + a - b[None, :]) <= tol)
                    and np.all(np.abs(b[::-1] - b) <= tol))

    return sym(coeffs.a, coeffs.b) and sym(coeffs.ahat, coeffs.bhat)


def coefficients_from(pair: Any) -> PRKCoefficients:
    """Coefficients from a ``PartitionedTableau`` or a ``Tableau`` (paired with its
    symplectic conjugate, â_ij = b_j(1 − a_ji/b_i), paper §4, App. A)."""
    from chetaev.rktableaux import PartitionedTableau, Tableau, symplectic_conjugate

    if isinstance(pair, PartitionedTableau):
        first, second = pair.first, pair.second
        name = pair.name
    elif isinstance(pair, Tableau):
        first, second = pair, symplectic_conjugate(pair)
        name = pair.name
    else:
        raise InputError(
            "Expected a chetaev.rktableaux PartitionedTableau (e.g. lobatto_iiia_iiib(3)) or a "
            f"Tableau (e.g. gauss(2)); got {type(pair).__name__}."
        )
    return PRKCoefficients(
        a=np.array(first.a, dtype=float),
        b=np.array(first.b, dtype=float),
        c=np.array(first.c, dtype=float),
        ahat=np.array(second.a, dtype=float),
        bhat=np.array(second.b, dtype=float),
        name=str(name),
    )


class StageHooks:
    """Hooks that add nothing: the unconstrained VPRK of Theorem 4.2."""

    m = 0

    def __init__(self, s: int) -> None:
        self.free = (False,) * s

    def force(self, Q, V, Lam, jacobian):
        """No extra force."""
        return None, None, None, None

    def equations(self, ev):
        """No extra equations."""
        return None, None


@attrs.define(eq=False)
class StageEvaluation:
    """All stage quantities at the current unknowns, with derivatives in x (shape (..., N)).

    ``Q, V, W, P`` are ``(..., s, n)``; ``Lam`` ``(..., s, m)`` (None when m = 0);
    ``q1, p1`` ``(..., n)``; the ``d*_dx`` arrays append the axis N (None when the Jacobian
    was not requested). ``dV_dx`` and ``dQ_dx`` are constant ``(s, n, N)`` arrays and
    ``dLam_dx`` is ``(s, m, N)`` (Hamiltonian unknowns: ``dQ_dx`` constant, ``dV_dx`` and
    ``dq1_dx`` may depend on x). ``extra`` is free for hooks to cache values.
    """

    q: np.ndarray
    p: np.ndarray
    h: float
    coeffs: PRKCoefficients
    Q: np.ndarray
    V: np.ndarray
    Lam: np.ndarray | None
    W: np.ndarray
    P: np.ndarray
    D2L: np.ndarray
    q1: np.ndarray
    p1: np.ndarray
    dQ_dx: np.ndarray | None = None
    dV_dx: np.ndarray | None = None
    dLam_dx: np.ndarray | None = None
    dW_dx: np.ndarray | None = None
    dq1_dx: np.ndarray | None = None
    dp1_dx: np.ndarray | None = None
    extra: dict = attrs.field(factory=dict)
    x_extra: np.ndarray | None = None


def _layout(coeffs: PRKCoefficients, n: int, hooks: Any):
    s = coeffs.s
    m = int(getattr(hooks, "m", 0))
    free = np.asarray(getattr(hooks, "free", (False,) * s), dtype=bool)
    k = int(np.count_nonzero(free))
    nQ = s * n if _hamiltonian(hooks) else 0  # the stage positions Q^i before P^i
    return s, m, free, k, nQ + s * n + k * m + int(getattr(hooks, "n_extra", 0))


def _hamiltonian(hooks: Any) -> bool:
    """Whether ``hooks`` ask for the Hamiltonian unknowns (``unknowns = "QP"``), checked."""
    unknowns = getattr(hooks, "unknowns", "V")
    if unknowns not in ("V", "QP"):
        raise InputError(f"hooks.unknowns must be 'V' or 'QP', got {unknowns!r}.")
    return unknowns == "QP"


def _hamiltonian_tangents(coeffs: PRKCoefficients, n: int, m: int, free: np.ndarray,
                          n_extra: int = 0):
    """The constant tangents ``(dQ, dP, dLam)`` ``(s, n, N)`` of the Hamiltonian unknowns
    ``x = [Q, P, Λ_free, extra]``."""
    s = coeffs.s
    k = int(np.count_nonzero(free))
    nS = s * n
    N = 2 * nS + k * m + n_extra
    dQ = np.zeros((s, n, N))
    dQ[:, :, :nS] = np.eye(nS).reshape(s, n, nS)
    dP = np.zeros((s, n, N))
    dP[:, :, nS: 2 * nS] = np.eye(nS).reshape(s, n, nS)
    dLam = np.zeros((s, m, N))
    for r, i in enumerate(np.flatnonzero(free) if m else ()):
        dLam[i, :, 2 * nS + r * m: 2 * nS + (r + 1) * m] = np.eye(m)
    return dQ, dP, dLam


def _constant_tangents(coeffs: PRKCoefficients, n: int, m: int, free: np.ndarray, h: float,
                       n_extra: int = 0):
    s = coeffs.s
    k = int(np.count_nonzero(free))
    N = s * n + k * m + n_extra
    dV = np.zeros((s, n, N))
    dV[:, :, : s * n] = np.eye(s * n).reshape(s, n, s * n)
    dQ = h * np.einsum("ij,jkN->ikN", coeffs.a, dV)
    dLam = np.zeros((s, m, N))
    if m:
        idx = np.flatnonzero(free)
        for r, i in enumerate(idx):
            dLam[i, :, s * n + r * m: s * n + (r + 1) * m] = np.eye(m)
    dq1 = h * np.einsum("j,jkN->kN", coeffs.b, dV)
    return dV, dQ, dLam, dq1


def unpack(x: np.ndarray, s: int, n: int, m: int, free: np.ndarray,
           lam_fixed: np.ndarray | None):
    """Split the unknowns into V (..., s, n) and the full Λ (..., s, m)."""
    V = x[..., : s * n].reshape((*x.shape[:-1], s, n))
    if m == 0:
        return V, None
    k = int(np.count_nonzero(free))
    lam_free = x[..., s * n: s * n + k * m].reshape((*x.shape[:-1], k, m))
    if k == s:
        return V, lam_free
    if lam_fixed is None:
        raise InputError("Multipliers of the non-free stages must be given (lam_fixed).")
    Lam = np.array(np.broadcast_to(lam_fixed, (*x.shape[:-1], s, m)))
    Lam[..., free, :] = lam_free
    return V, Lam


def prk_residual(
    x: np.ndarray,
    q: np.ndarray,
    p: np.ndarray,
    h: float,
    coeffs: PRKCoefficients,
    system: Any,
    hooks: Any = None,
    lam_fixed: np.ndarray | None = None,
    jacobian: bool = True,
    tangents: tuple | None = None,
):
    """Residual (and Jacobian) of one (constrained) VPRK step at the unknowns ``x``: the
    engine (:class:`PRKStep`) with the hooks protocol of the module docstring, as a function.

    Parameters
    ----------
    x : ndarray (..., N)
        Unknowns ``[V.ravel(), Λ_free.ravel()]`` (``[Q.ravel(), P.ravel(), Λ_free.ravel()]``
        for hooks with ``unknowns = "QP"``); may carry extra leading axes.
    q, p : ndarray (..., n)
        Node values q_k, p_k.
    h : float
    coeffs : PRKCoefficients
    system : a vector-space Lagrangian system (D1L, D2L and second derivatives), or its
        :class:`SystemInterface` (what the engine reads: pass it to avoid the per-call lookup)
    hooks : hooks object (module docstring), default: none
    lam_fixed : ndarray (..., s, m), optional
        Values of the non-free multipliers.
    jacobian : bool
        Also return the Jacobian ``(..., N, N)`` (tangent form: the evaluation then holds
        the derivatives ``d*_dx``).
    tangents : tuple, optional
        Cached output of the constant tangents (dV, dQ, dLam, dq1) for this (coeffs, h);
        ``(dQ, dP, dLam)`` for the Hamiltonian unknowns.

    Returns
    -------
    R : ndarray (..., N)
    J : ndarray (..., N, N) or None
    ev : StageEvaluation
    """
    step = PRKStep(q, p, h, coeffs, system, hooks, lam_fixed, generic=True)
    return step.evaluation(x, jacobian, tangents)


def _same_shape(A: np.ndarray, B: np.ndarray) -> tuple:
    """``A, B`` broadcast to one shape (no call when they have it already)."""
    if A.shape == B.shape:
        return A, B
    return tuple(np.broadcast_arrays(A, B))


def _same_lead(A: np.ndarray, B: np.ndarray, k: int) -> tuple:
    """``A, B`` broadcast over their leading axes (all but the last ``k``)."""
    lead = np.broadcast_shapes(A.shape[:-k], B.shape[:-k])
    return np.broadcast_to(A, lead + A.shape[-k:]), np.broadcast_to(B, lead + B.shape[-k:])


def residual_scale(p: np.ndarray, W: np.ndarray, h: float) -> np.ndarray:
    """Magnitude of the terms in R1 (|p| + h|W| per problem), at least 1."""
    return np.maximum(1.0, np.max(np.abs(p), axis=-1) + h * np.max(np.abs(W), axis=(-2, -1)))


@attrs.frozen(eq=False)
class StepSolution:
    """Converged stage values of one step: the evaluation and the Newton diagnostics."""

    x: np.ndarray
    ev: StageEvaluation
    iterations: int
    residual: float
    rate: float


def solve_stages(
    x0: np.ndarray,
    q: np.ndarray,
    p: np.ndarray,
    h: float,
    coeffs: PRKCoefficients,
    system: Any,
    hooks: Any,
    options: Any,
    state: Any,
    lam_fixed: np.ndarray | None = None,
    scale: np.ndarray | None = None,
    tangent_cache: dict | None = None,
) -> StepSolution:
    """Solve the stage equations of :func:`prk_residual` by Newton from ``x0``.

    Raises :class:`ConvergenceError` (with ``step=state.n`` and ``t=state.t``) on failure.
    """
    from ._solver import newton_solve, raise_unless_converged

    if hooks is None:
        hooks = StageHooks(coeffs.s)
    n = q.shape[-1]
    s, m, free, k, N = _layout(coeffs, n, hooks)
    qp = _hamiltonian(hooks)
    n_extra = N - (2 if qp else 1) * s * n - k * m
    key = (float(h), n, m, tuple(free.tolist()), n_extra, qp)
    tangents = None if tangent_cache is None else tangent_cache.get(key)
    if tangents is None:
        tangents = (_hamiltonian_tangents(coeffs, n, m, free, n_extra) if qp
                    else _constant_tangents(coeffs, n, m, free, h, n_extra))
        if tangent_cache is not None:
            if len(tangent_cache) > 8:
                tangent_cache.clear()
            tangent_cache[key] = tangents

    last: list = [None, None]
    step = PRKStep(q, p, h, coeffs, system, hooks, lam_fixed, generic=True)

    def fun_jac(x, want):
        R, J, ev = step.evaluation(x, want, tangents)
        last[0], last[1] = x, ev
        return R, J

    R0, J0 = fun_jac(x0, not getattr(options, "simplified", False))
    if scale is None:
        scale = residual_scale(p, last[1].W, h)
    res = newton_solve(None, x0, options=options, scale=scale, fun_jac=fun_jac, f0=R0, j0=J0)
    raise_unless_converged(res, state)
    if last[0] is not None and last[0].shape == res.x.shape and np.array_equal(last[0], res.x):
        ev = last[1]  # the last evaluation was at the solution (the usual case)
    else:
        _, _, ev = step.evaluation(res.x, False, tangents)
    return StepSolution(x=res.x, ev=ev, iterations=res.iterations,
                        residual=float(np.max(res.residual)), rate=res.rate)


# --------------------------------------------------------------------------------------
# The per-step form of the engine: the same stage equations as prk_residual, built once
# per step with its constant arrays cached per (coeffs, h, n, m), for methods that call
# the residual many times per step (the nonholonomic PRK's default path).


try:  # np.einsum without optimize is this C function behind a dispatch layer whose ~1 µs
    # per call is a sizeable share of the small stage products below (called several
    # times per Newton iteration); the same function, so the same result
    from numpy._core.multiarray import c_einsum as _einsum
except ImportError:  # pragma: no cover - numpy < 2 (numpy.core) or a future layout
    _einsum = np.einsum


def _times_matrix(X: np.ndarray, MT: np.ndarray) -> np.ndarray:
    """``X @ MT`` for a constant ``(k, k)`` matrix, batch-size independent (see
    :func:`fixed_order_product`)."""
    return _einsum("...k,km->...m", X, MT)


def fixed_order_product(A: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``A @ X`` for a small constant ``A`` ``(m, k)`` and ``X`` ``(k, N)`` whose columns
    are batch members, with the same rounding for every ``N``.

    A BLAS product of the batch-folded matrix is not: OpenBLAS picks its kernel (and with
    it the use of fused multiply-adds) from the matrix sizes, so on some CPUs (AVX-512) a
    member's last bits depend on how many members share the product, and an ensemble split
    into chunks would differ from the whole batch. ``np.einsum`` (no ``optimize``) sums the
    ``k`` terms of every entry in one fixed order, whatever ``N``.
    """
    return _einsum("ij,jn->in", A, X)


def _blockdiag_view(J5: np.ndarray) -> np.ndarray:
    """Writable view ``(..., s, n, n)`` of the stage-diagonal blocks of ``(..., s, n, s, n)``."""
    return np.einsum("...iaib->...iab", J5)


def _coef_blocks_left(c: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``out[..., i, a, l, b] = c[i, l] X[..., i, a, b]`` (block (i, l) = c_il X^i)."""
    return c[:, None, :, None] * X[..., :, :, None, :]


def _mass_of(system: Any):
    """``(M, D21L_zero)``: the constant mass matrix of ``L = v.M v/2 - V(q)`` (or None) and
    whether ``D12L = D21L = 0``, from the system's :class:`SystemInterface` (``mass``; a
    constant mass matrix is what makes the mixed blocks vanish)."""
    mass = interface_of(system).mass
    return mass, mass is not None


def prk_constants(coeffs: PRKCoefficients, h: float, n: int, free: Any,
                  mix_rows: np.ndarray | None = None, mass: np.ndarray | None = None) -> dict:
    """The constant arrays of :class:`PRKStep` for one ``(coeffs, h, n, free, mix_rows,
    mass)`` (build once per step size and reuse across steps).

    ``mix_rows`` ``(r, s)``: the hooks' extra stage mixes ``p_k + h Σ_j e_ij W^j`` (e.g. the
    IIIA-weighted constraint momenta of eq. (14d)), computed in one product with the â-mix
    of eq. (13)/(14c). Keys: ``ha``, ``hahat``, ``hmix`` ``(r, s)``, ``mixW`` (the stacked
    rows ``[h e; h â]``), ``c3`` (the ``h^2`` stage coefficients of ``dW/dQ`` in the rows
    ``R1`` and the mixes), ``cV``, ``cL``, and with a constant mass ``mass_identity``,
    ``massT``, ``mass_invT``, ``mass_rows``; hooks may add their own keys.
    """
    a = np.asarray(coeffs.a, dtype=float)
    ahat = np.asarray(coeffs.ahat, dtype=float)
    s = a.shape[0]
    free = np.asarray(free, dtype=bool)
    e = np.zeros((0, s)) if mix_rows is None else np.asarray(mix_rows, dtype=float)
    r = e.shape[0]
    ha, hahat, he = h * a, h * ahat, h * e
    c3 = h * h * np.concatenate(
        [-np.einsum("ij,jl->ilj", ahat, a), np.einsum("ij,jl->ilj", e, a)], axis=0
    )
    cL = np.concatenate([-hahat[:, free], he[:, free]], axis=0)  # (s + r, k)
    cV = np.concatenate([-hahat, he], axis=0)  # (s + r, s)
    out = {
        "s": s, "n": n, "r": r, "free": free,
        "ha": ha,
        "hahat": hahat,
        "hmix": np.ascontiguousarray(he),
        "mixW": np.ascontiguousarray(np.concatenate([he, hahat], axis=0)),
        "c3": np.ascontiguousarray(c3.reshape(-1, s)),
        "cL": cL[:, None, :, None],
        "cV": cV[:, None, :, None],
    }
    if mass is not None:
        out["mass_identity"] = bool(np.array_equal(mass, np.eye(n)))
        out["massT"] = np.ascontiguousarray(mass.T)
        out["mass_invT"] = np.ascontiguousarray(np.linalg.inv(mass).T)
        rows = np.zeros((s + r, n, s, n))
        for i in range(s):
            rows[i, :, i, :] = mass
        out["mass_rows"] = rows
    return out


def _hooks_info(hooks: Any, consts: dict, generic: bool) -> tuple:
    """What :class:`PRKStep` reads from a hooks object, checked once per (constants, hooks,
    protocol): ``(hooks, generic, m, k, nfix, prefix, n_extra, qp, per_step, stage_force,
    stage_equations, force_jacobian)``.

    ``per_step`` is True when the step uses the per-step hooks (``stage_force(step)``, ...;
    the Kronecker-structured Jacobian): not ``generic``, the Lagrangian unknowns, no extra
    unknowns, and per-step equations (``stage_equations`` with ``equations_jacobian``) if
    the hooks add equations. Otherwise the hooks are read through ``force`` and
    ``equations(ev)`` (the tangent-form Jacobian)."""
    m = int(getattr(hooks, "m", 0))
    n_extra = int(getattr(hooks, "n_extra", 0))
    qp = _hamiltonian(hooks)
    free = consts["free"]
    k = int(np.count_nonzero(free))
    nfix = free.shape[0] - k
    rows = m * k + n_extra > 0
    step_eq = hasattr(hooks, "stage_equations") and hasattr(hooks, "equations_jacobian")
    per_step = not generic and not qp and not n_extra and (step_eq or not rows)
    if rows and not per_step and not hasattr(hooks, "equations"):
        raise InputError(
            "The hooks add free multipliers or extra unknowns but no equations for them: "
            "give them equations(ev) (or stage_equations(step) and equations_jacobian(step, "
            "dmix)); see chetaev.discrete_lagrangian.core._prk.")
    get = (lambda name: getattr(hooks, name, None)) if per_step else (lambda name: None)
    return (hooks, generic, m, k, nfix, not free[:nfix].any(), n_extra, qp, per_step,
            get("stage_force"), get("stage_equations"), get("force_jacobian"))


_CONSTANTS: dict = {}


def _constants_of(coeffs: PRKCoefficients, h: float, n: int, free: Any,
                  mix_rows: np.ndarray | None, mass: np.ndarray | None) -> dict:
    """:func:`prk_constants`, cached by value: ``(a, â, h, n, free, mix_rows, mass)`` (a few
    entries in use at a time: one per pair, step size and system dimension)."""
    key = (coeffs.a.tobytes(), coeffs.ahat.tobytes(), float(h), n,
           tuple(bool(f) for f in free),
           None if mix_rows is None else np.asarray(mix_rows, dtype=float).tobytes(),
           None if mass is None else np.asarray(mass, dtype=float).tobytes())
    out = _CONSTANTS.get(key)
    if out is None:
        if len(_CONSTANTS) >= 64:
            _CONSTANTS.clear()
        out = _CONSTANTS[key] = prk_constants(coeffs, h, n, free, mix_rows, mass)
    return out


class PRKStep:
    """The engine: the stage equations of one (constrained, forced) VPRK step (paper Thm.
    4.2; eq. (13); eq. (14), App. D; eq. (15) of the nonholonomic paper for the Hamiltonian
    unknowns), as an object built once per step from ``(q, p, h, coeffs, system, hooks)``:
    residual, analytic Jacobian, the hooks' structured Newton matrix and the node values,
    with the per-``(coeffs, h, n)`` constants of :func:`prk_constants` cached.

    Unknowns and hooks as in the module docstring: ``x = [V (s·n), Λ_free (k·m), extra
    (e)]``, or ``[Q, P, Λ_free, extra]`` for hooks with ``unknowns = "QP"``. The stage
    arrays of the last evaluation are kept on the object (``V, Lam, Q, W``, ``P`` for the
    Hamiltonian unknowns, ``x_extra``, and the hooks' mixes ``pmix = p_k + h Σ_j e_ij
    W^j``), so that the Jacobian, the structured solver and the node values at the same
    ``x`` reuse them. Batched input ``(B, n)`` keeps ``q_k``, ``p_k`` tiled flat;
    ``staged=True`` (one batch axis, per-step hooks) holds the stage arrays stage-major
    ``(s, B, n)`` so that every stage mix is one matrix product over the batch (the
    system's and hooks' callables then receive ``(s, B, ...)`` arrays; the Jacobian is
    formed batch-first).

    Two hook protocols on the same stage arrays:

    * the hooks of the module docstring (``force``, ``equations(ev)``; always with
      ``generic=True``, which :func:`prk_residual` and :func:`solve_stages` use): the
      residual rows of the hooks and the tangent-form Jacobian come from a
      :class:`StageEvaluation` (:meth:`evaluation`);
    * the per-step hooks, for methods whose Newton loop calls the residual many times per
      step (the nonholonomic PRK's default path; the Lagrangian unknowns, no extra
      unknowns), with the Kronecker-structured Jacobian. All optional beyond ``m`` /
      ``free``:

      ``mix_rows`` : ``(r, s)`` array
          Extra stage mixes of ``W`` (see :func:`prk_constants`), read as ``step.pmix``
          ``(..., r, n)`` (stage-major ``(r, B, n)``).
      ``stage_force(step)`` → ``F`` ``(..., s, n)`` or None
          The force of hook (i) at ``step.Q, step.V, step.Lam``; may store values in
          ``step.aux`` (a dict renewed per evaluation). Default: ``force(Q, V, Lam,
          False)``.
      ``force_jacobian(step)`` → ``(dF_dQ, dF_dV, G)``
          ``(..., s, n, n)`` or None each, and ``G = dF^i/dΛ^i`` of the free stages
          ``(..., k, n, m)`` (batch-first). Default: ``force(Q, V, Lam, True)``.
      ``stage_equations(step)`` → ``R2``
          The ``k·m`` extra residuals, of any shape that flattens to ``(..., k·m)``
          (stage-major: ``(rows, B, width)``).
      ``equations_jacobian(step, dmix)`` → ``J2``
          ``(..., k·m, N)`` from ``dmix = d pmix/dx`` ``(..., r, n, N)`` (batch-first).
      ``structured_solver(step)`` → ``solve(F)`` (the hooks' approximate Newton matrix
          at the stage arrays of ``step``).

      Hooks without ``stage_equations``/``equations_jacobian`` that add equations are
      read through the first protocol.

    Reads the system through its :class:`SystemInterface`: ``D1L`` (``-potential_grad``
    for a constant mass), ``D2L`` (``M v`` for a constant mass), the second derivatives
    for the Jacobian, ``legendre_inv`` for the Hamiltonian unknowns.
    """

    __slots__ = (
        "D2L",
        "Lam",
        "P",
        "Q",
        "V",
        "W",
        "_batch_first",
        "_dF",
        "_fj",
        "_k",
        "_last",
        "_lfb",
        "_lfs",
        "_n_extra",
        "_nfix",
        "_pb",
        "_per_step",
        "_pmt",
        "_potential",
        "_prefix",
        "_pt",
        "_qb",
        "_qp",
        "_qt",
        "_se",
        "_sf",
        "aux",
        "coeffs",
        "consts",
        "flat",
        "generic",
        "h",
        "hahatW",
        "hooks",
        "iface",
        "lam_fixed",
        "m",
        "n",
        "p",
        "pmix",
        "q",
        "s",
        "staged",
        "system",
        "x_extra",
    )

    def __init__(self, q, p, h, coeffs: PRKCoefficients, system: Any, hooks: Any = None,
                 lam_fixed=None, consts: dict | None = None, staged: bool = False,
                 generic: bool = False):
        if hooks is None:
            hooks = StageHooks(coeffs.s)
        self.q, self.p, self.h, self.coeffs = q, p, h, coeffs
        self.system, self.hooks, self.generic = system, hooks, generic
        self.iface = iface = interface_of(system)  # once per step
        self.s = s = coeffs.s
        self.n = n = q.shape[-1]
        if consts is None:
            consts = _constants_of(coeffs, h, n, getattr(hooks, "free", (False,) * s),
                                   None if generic else getattr(hooks, "mix_rows", None),
                                   iface.mass)
        self.consts = consts
        # what the step reads from the hooks, checked once per (constants, hooks, protocol)
        info = consts.get("_hooks")
        if info is None or info[0] is not hooks or info[1] is not generic:
            info = consts["_hooks"] = _hooks_info(hooks, consts, generic)
        (_h, _g, self.m, self._k, self._nfix, self._prefix, self._n_extra, self._qp,
         self._per_step, self._sf, self._se, self._fj) = info
        if self._qp and iface.legendre_inv is None:
            raise InputError("Hamiltonian unknowns (hooks.unknowns = 'QP') need the system's "
                             "legendre_inv(q, p); use the Lagrangian unknowns (unknowns='V').")
        self._potential = iface.mass is not None and iface.potential_grad is not None
        if staged and q.ndim != 2:
            raise InputError("PRKStep(staged=True) needs one batch axis: q of shape (B, n).")
        if staged and not self._per_step:
            raise InputError("PRKStep(staged=True) takes the per-step hooks only (Lagrangian "
                             "unknowns, no extra unknowns, stage_equations(step)); use "
                             "staged=False.")
        self.staged = staged
        self.flat = q.ndim > 1 and not staged and not self._qp
        if self.flat:  # q_k, p_k tiled flat (..., s*n): ~3 times cheaper than a broadcast
            r = consts["r"]
            self._qt = np.tile(q, s)
            self._pt = np.tile(p, max(s, r))
            self._pmt = self._pt[..., : r * n]
        else:
            self._qt = self._pt = self._pmt = None
        self._qb, self._pb = q[..., None, :], p[..., None, :]
        lf = None
        if self.m and self._nfix:
            if lam_fixed is None:
                raise InputError("Multipliers of the non-free stages must be given (lam_fixed).")
            lf = lam_fixed if isinstance(lam_fixed, np.ndarray) else np.asarray(lam_fixed, float)
            if lf.shape[-2] not in (1, self._nfix):  # all s stages given: keep the fixed ones
                lf = np.broadcast_to(lf, (*lf.shape[:-2], s, self.m))[..., ~consts["free"], :]
        self.lam_fixed = lf
        # Λ = [given, free] by one concatenation (the common case: Λ^1 = λ_k given)
        self._lfb = (lf if lf is not None and self._prefix and not staged
                     and lf.shape[-2] == self._nfix and lf.shape[:-2] == q.shape[:-1] else None)
        # stage-major given multipliers (staged)
        self._lfs = None
        if staged and lf is not None:
            self._lfs = np.moveaxis(lf, -2, 0) if lf.ndim == 3 else lf[:, None, :]
        self._last = None
        self._batch_first = None
        self.V = self.W = self.Lam = self.Q = self.P = self.D2L = None
        self.pmix = self.hahatW = self.x_extra = self._dF = None
        self.aux = {}

    # ------------------------------------------------------------------ stage values

    def _multipliers(self, x, lead, nV):
        s, m = self.s, self.m
        if not m:
            return None
        k, nfix = self._k, self._nfix
        if self.staged:
            B = x.shape[0]
            Lam = np.empty((s, B, m))
            lam_x = x[:, nV: nV + k * m].reshape(B, k, m).transpose(1, 0, 2)
            if self._prefix:  # the given multipliers first: slices
                if nfix:
                    Lam[:nfix] = self._lfs
                Lam[nfix:] = lam_x
            else:
                free = self.consts["free"]
                Lam[~free] = self._lfs
                Lam[free] = lam_x
            return Lam
        lam_x = x[..., nV: nV + k * m].reshape(*lead, k, m)
        if not nfix:
            return lam_x
        if self._prefix:  # the given multipliers come first (e.g. Λ^1 = λ_k)
            lf = self._lfb
            if lf is not None and lf.shape[:-2] == lead:
                return np.concatenate([lf, lam_x], axis=-2)
            lf = self.lam_fixed
            if lf.shape[-2] != nfix or lf.shape[:-2] != lead:
                lf = np.broadcast_to(lf, (*lead, nfix, m))
            return np.concatenate([lf, lam_x], axis=-2)
        free = self.consts["free"]
        Lam = np.empty((*lead, s, m))
        Lam[..., ~free, :] = self.lam_fixed
        Lam[..., free, :] = lam_x
        return Lam

    def evaluate(self, x, force_jacobian: bool = False):
        """Stage arrays at ``x`` (kept on the object; a repeated call at the same ``x``
        object returns at once). ``force_jacobian``: also keep the derivatives of the hooks'
        ``force`` (the tangent-form Jacobian reads them)."""
        if self._last is x and (not force_jacobian or self._dF is not None):
            return
        c, s, n = self.consts, self.s, self.n
        iface, hooks = self.iface, self.hooks
        lead = x.shape[:-1]
        nV, r = s * n, c["r"]
        self.aux = {}
        self._dF = None
        if self._qp:  # x = [Q, P, Λ_free, extra]: V^i = FL^{-1}(Q^i, P^i) (eq. (15), nh paper)
            Q = x[..., :nV].reshape(*lead, s, n)
            self.P = x[..., nV: 2 * nV].reshape(*lead, s, n)
            self.Lam = self._multipliers(x, lead, 2 * nV)
            V = iface.legendre_inv(Q, self.P)
        elif self.staged:
            B = x.shape[0]
            V = np.ascontiguousarray(x[:, :nV].reshape(B, s, n).transpose(1, 0, 2))
            self.Lam = self._multipliers(x, lead, nV)
            Q = fixed_order_product(c["ha"], V.reshape(s, B * n)).reshape(s, B, n)
            Q += self.q
        else:
            V = x[..., :nV].reshape(*lead, s, n)
            self.Lam = self._multipliers(x, lead, nV)
            Q = c["ha"] @ V  # contiguous: its flat view takes q_k
            if self.flat:
                Qf = Q.reshape(*lead, nV)
                Qf += self._qt
            elif self.q.ndim == 1 or self.q.shape[:-1] == lead:
                Q += self._qb
            else:  # q_k with more leading axes than x
                Q = Q + self._qb
        self.V, self.Q = V, Q
        ne = self._n_extra
        self.x_extra = x[..., x.shape[-1] - ne:] if ne else None
        sf = self._sf
        if sf is not None:
            F = sf(self)
        else:
            F, *dF = hooks.force(Q, V, self.Lam, force_jacobian)
            if force_jacobian:
                self._dF = tuple(dF)
        W = -iface.potential_grad(Q) if self._potential else iface.D1L(Q, V)
        if F is not None:
            W = W + F
        self.W = W
        # one stacked product for the hooks' mixes and the â-mix: rows [h e_ij; h â_ij]
        if self.staged:
            B = x.shape[0]
            mixed = fixed_order_product(c["mixW"], W.reshape(s, B * n)).reshape(r + s, B, n)
            self.hahatW = mixed[r:]
            self.pmix = mixed[:r] + self.p
        else:
            mixed = c["mixW"] @ W
            if self.flat:
                mixed = mixed.reshape(*lead, (r + s) * n)
                self.hahatW = mixed[..., r * n:]
                self.pmix = (mixed[..., : r * n] + self._pmt).reshape(*lead, r, n)
            else:
                self.hahatW = mixed[..., r:, :]
                self.pmix = self._pb + mixed[..., :r, :]
        self._last = x

    # ------------------------------------------------------------------ equations

    def _rows1(self, x, out=None):
        """The rows of eq. (13)/(14b, c) at the last evaluation: ``D2L(Q^i, V^i) - p_k -
        h Σ_j â_ij W^j`` (``(..., s·n)``; stage-major ``(s, B, n)``), or for the
        Hamiltonian unknowns ``[Q^i - q_k - h Σ_j a_ij V^j, P^i - p_k - h Σ_j â_ij W^j]``
        (``(..., 2 s·n)``); keeps ``D2L``. ``out`` ``(..., N)``: written into its first
        ``s·n`` columns (returned), flat and single layouts."""
        c, s, n = self.consts, self.s, self.n
        lead = x.shape[:-1]
        nV = s * n
        V = self.V
        if self._qp:
            self.D2L = self.P
            RQ = self.Q - self._qb - c["ha"] @ V
            RP = self.P - self._pb - self.hahatW
            RQ, RP = _same_shape(RQ, RP)
            return np.concatenate([RQ.reshape((*RQ.shape[:-2], nV)),
                                   RP.reshape((*RP.shape[:-2], nV))], axis=-1)
        if c.get("mass_identity"):
            D2L = V
        elif "massT" in c:
            D2L = _times_matrix(V, c["massT"])
        else:
            D2L = self.iface.D2L(self.Q, V)
        self.D2L = D2L
        if self.staged:  # written stage-major into the batch-first out (a strided view)
            B = x.shape[0]
            R1 = (np.empty((s, B, n)) if out is None
                  else out[:, :nV].reshape(B, s, n).transpose(1, 0, 2))
            np.subtract(D2L, self.p, out=R1)
            R1 -= self.hahatW
            return R1 if out is None else out
        if out is None:
            out = np.empty((*lead, nV)) if self.flat else None
        if self.flat:
            R1 = out[..., :nV]
            np.subtract(D2L.reshape(*lead, nV), self._pt[..., :nV], out=R1)
            R1 -= self.hahatW
            return out
        R1 = D2L - self._pb - self.hahatW
        if out is None:
            return R1.reshape((*R1.shape[:-2], nV))
        out[..., :nV] = R1.reshape(*lead, nV)
        return out

    def residual(self, x):
        """Residual ``[R1, R2]`` (layout ``(..., N)``; the module docstring)."""
        if not self._per_step:
            return self.evaluation(x, False)[0]
        self.evaluate(x)
        s, n = self.s, self.n
        lead = x.shape[:-1]
        nV = s * n
        se = self._se
        R2 = se(self) if se is not None else None
        out = np.empty((*lead, nV + (0 if R2 is None else self.m * self._k)))
        self._rows1(x, out)
        if R2 is None:
            return out
        if self.staged:  # (rows, B, width) stage-major
            B = lead[0]
            out[:, nV:].reshape(B, R2.shape[0], -1)[...] = R2.transpose(1, 0, 2)
        else:
            out[..., nV:] = R2.reshape(*lead, -1)
        return out

    def evaluation(self, x, jacobian: bool = False, tangents: tuple | None = None):
        """``(R, J or None, ev)`` at ``x`` with the hooks' ``force`` and ``equations(ev)``
        (the module docstring's protocol): the residual, the tangent-form Jacobian and the
        :class:`StageEvaluation` ``ev`` (with its derivatives ``d*_dx`` when ``jacobian``).
        ``tangents``: the constant tangents (:func:`prk_residual`)."""
        if self.staged:
            raise InputError("PRKStep.evaluation needs the batch-first layout (staged=False).")
        hooks, iface = self.hooks, self.iface
        self.evaluate(x, force_jacobian=jacobian and self._sf is None)
        coeffs, h, s, n, m = self.coeffs, self.h, self.s, self.n, self.m
        a, ah = coeffs.a, coeffs.ahat
        qp = self._qp
        nS = s * n
        R1 = self._rows1(x)
        Q, V, Lam, W = self.Q, self.V, self.Lam, self.W
        W4 = W
        P = self.P if qp else self._pb + (
            self.hahatW.reshape(*self.hahatW.shape[:-1], s, n) if self.flat else self.hahatW)
        q1, p1 = self.node_values()
        ev = StageEvaluation(q=self.q, p=self.p, h=h, coeffs=coeffs, Q=Q, V=V, Lam=Lam, W=W4,
                             P=P, D2L=self.D2L, q1=q1, p1=p1, x_extra=self.x_extra)
        if jacobian:
            N = x.shape[-1]
            free = self.consts["free"]
            n_extra = self._n_extra
            fast = self._potential
            if qp:
                if tangents is None:
                    tangents = _hamiltonian_tangents(coeffs, n, m, free, n_extra)
                dQ, dP, dLam = tangents[:3]
                if iface.mass is not None:  # dV = M^{-1} dP (constant), D12L = 0
                    dV = iface.mass_inv @ dP
                    dW = -(iface.potential_hess(Q) @ dQ) if fast else iface.D11L(Q, V) @ dQ
                else:  # dV = g^{-1} (dP - D21L dQ), g = D22L (the Legendre map's derivative)
                    dV = np.linalg.solve(iface.D22L(Q, V), dP - iface.D21L(Q, V) @ dQ)
                    dW = iface.D11L(Q, V) @ dQ + iface.D12L(Q, V) @ dV
            else:
                if tangents is None:
                    tangents = _constant_tangents(coeffs, n, m, free, h, n_extra)
                dV, dQ, dLam, dq1 = tangents[:4]
                if fast:
                    dW = -(iface.potential_hess(Q) @ dQ)
                    dD2 = iface.mass @ dV  # constant
                else:
                    dW = iface.D11L(Q, V) @ dQ + iface.D12L(Q, V) @ dV
                    dD2 = iface.D21L(Q, V) @ dQ + iface.D22L(Q, V) @ dV
            if self._dF is not None:
                dF_dQ, dF_dV, dF_dLam = self._dF
            else:
                _F, dF_dQ, dF_dV, dF_dLam = hooks.force(Q, V, Lam, True)
            if dF_dQ is not None:
                dW = dW + dF_dQ @ dQ
            if dF_dV is not None:
                dW = dW + dF_dV @ dV
            if dF_dLam is not None and m:
                dW = dW + dF_dLam @ dLam
            bshape = dW.shape[:-3]
            dWf = dW.reshape((*bshape, s, n * N))
            if qp:
                dVf = dV.reshape((*dV.shape[:-3], s, n * N))
                dq1 = (h * (coeffs.b @ dVf)).reshape((*dV.shape[:-3], n, N))
                JQ = dQ - (h * (a @ dVf)).reshape(dV.shape)
                JP = dP - (h * (ah @ dWf)).reshape(dW.shape)
                JQ, JP = _same_shape(JQ, JP)
                J1 = np.concatenate([JQ, JP], axis=-3).reshape((*JQ.shape[:-3], 2 * nS, N))
            else:
                dPs = (h * (ah @ dWf)).reshape(dW.shape)
                J1 = (dD2 - dPs).reshape((*dPs.shape[:-3], s * n, N))
            ev.dQ_dx, ev.dV_dx, ev.dLam_dx, ev.dW_dx = dQ, dV, dLam, dW
            ev.dq1_dx = dq1
            ev.dp1_dx = (h * (coeffs.bhat @ dWf)).reshape((*bshape, n, N))
        R2, J2 = hooks.equations(ev)
        if R2 is None:
            return R1, (J1 if jacobian else None), ev
        if R2.shape[:-1] != R1.shape[:-1]:
            R1, R2 = _same_lead(R1, R2, 1)
        R = np.concatenate([R1, R2], axis=-1)
        J = None
        if jacobian:
            if J2.shape[:-2] != J1.shape[:-2]:
                J1, J2 = _same_lead(J1, J2, 2)
            J = np.concatenate([J1, J2], axis=-2)
        return R, J, ev

    def jacobian(self, x):
        """Analytic Jacobian ``(..., N, N)`` of :meth:`residual` (batch-first). Blocks::

            dR1_i/dV_l   = δ_il D22L_i + h a_il D21L_i
                           - h^2 Σ_j â_ij a_jl Wq_j - h â_il Wv_l
            dR1_i/dΛ_l   = -h â_il G_l                        (l free)
            dpmix_i/dV_l = h^2 Σ_j e_ij a_jl Wq_j + h e_il Wv_l,   dpmix_i/dΛ_l = h e_il G_l

        with ``Wq = D11L + dF/dQ``, ``Wv = D12L + dF/dV``, ``G = dF/dΛ``; the rows of the
        hooks' equations come from ``equations_jacobian(step, dpmix)``. With the hooks of
        the module docstring (``force``, ``equations(ev)``), the Hamiltonian unknowns or
        extra unknowns: the tangent form of :meth:`evaluation`.
        """
        if not self._per_step:
            return self.evaluation(x, True)[1]
        if self.staged:
            if self._batch_first is None:
                self._batch_first = PRKStep(self.q, self.p, self.h, self.coeffs, self.system,
                                            self.hooks, self.lam_fixed, self.consts)
            return self._batch_first.jacobian(x)
        self.evaluate(x)
        c, s, n, m, iface, hooks = self.consts, self.s, self.n, self.m, self.iface, self.hooks
        lead = x.shape[:-1]
        r = c["r"]
        free = c["free"]
        nV, nL = s * n, int(np.count_nonzero(free)) * m
        N = nV + nL
        Q, V = self.Q, self.V
        mass = "massT" in c
        fj = self._fj
        if fj is not None:
            dF_dQ, dF_dV, G = fj(self)
        else:
            _F, dF_dQ, dF_dV, dF_dLam = hooks.force(Q, V, self.Lam, True)
            G = None if dF_dLam is None or not m else dF_dLam[..., free, :, :]
        mech = mass or _mass_of(iface)[1]
        Wq = iface.D11L(Q, V)
        if dF_dQ is not None:
            Wq = Wq + dF_dQ
        Wv = None if mech else iface.D12L(Q, V)
        if dF_dV is not None:
            Wv = dF_dV if Wv is None else Wv + dF_dV
        # rows R1_i (i = 1..s) and pmix_i (i = 1..r), columns V: Σ_j c3[i, l, j] Wq_j
        k = len(lead)
        Wt = np.moveaxis(Wq, -3, -1).reshape(*lead, n * n, s)
        rows_V = (Wt @ c["c3"].T).reshape(*lead, n, n, s + r, s)
        rows_V = rows_V.transpose(*range(k), k + 2, k, k + 3, k + 1)  # (..., s+r, n, s, n)
        if Wv is not None:
            rows_V = rows_V + c["cV"] * np.swapaxes(Wv, -3, -2)[..., None, :, :, :]
        if mass:
            rows_V = rows_V + c["mass_rows"]  # δ_il M on the R1 rows
        else:
            rows_V = np.array(rows_V)
            R1v = rows_V[..., :s, :, :, :]
            _blockdiag_view(R1v)[...] += iface.D22L(Q, V)
            if not mech:
                R1v += _coef_blocks_left(c["ha"], iface.D21L(Q, V))
        J = np.empty((*lead, N, N))  # filled block by block (no concatenation of (N, N))
        J[..., :nV, :nV] = rows_V[..., :s, :, :, :].reshape(*lead, nV, nV)
        if nL:
            if G is None:
                rows_L = np.zeros((*lead, s + r, n, nL // m, m))
            else:
                rows_L = c["cL"] * np.swapaxes(G, -3, -2)[..., None, :, :, :]  # (.., s+r, n, k, m)
            J[..., :nV, nV:] = rows_L[..., :s, :, :, :].reshape(*lead, nV, nL)
            dmix = np.concatenate(
                [rows_V[..., s:, :, :, :].reshape(*lead, r, n, nV),
                 rows_L[..., s:, :, :, :].reshape(*lead, r, n, nL)],
                axis=-1,
            )  # (..., r, n, N)
            J[..., nV:, :] = hooks.equations_jacobian(self, dmix).reshape(*lead, nL, N)
        return J

    def times_inverse_mass(self, X):
        """``X M^{-T}`` (the rows of ``X`` mapped by ``M^{-1}``, the explicit ``FL^{-1}`` of a
        constant mass) as one 2-D product; ``X`` itself when ``M = I``."""
        c = self.consts
        return X if c.get("mass_identity") else _times_matrix(X, c["mass_invT"])

    def structured_solver(self, x):
        """The hooks' structured Newton matrix at ``x``: ``solve(F) -> J_0^{-1} F`` (for
        ``newton_solve(structured=...)``), from ``hooks.structured_solver(step)``."""
        self.evaluate(x)
        return self.hooks.structured_solver(self)

    def node_values(self):
        """``(q_{k+1}, p_{k+1})`` from the last evaluation (Thm. 4.2 / eq. (14a)):
        ``q_k + h Σ b_j V^j``, ``p_k + h Σ b̂_j W^j``."""
        b, bhat, h = self.coeffs.b, self.coeffs.bhat, self.h
        if self.staged:
            B, n, s = self.q.shape[0], self.n, self.s
            q1 = self.q + h * fixed_order_product(b[None], self.V.reshape(s, B * n)).reshape(B, n)
            p1 = self.p + h * fixed_order_product(bhat[None],
                                                  self.W.reshape(s, B * n)).reshape(B, n)
            return q1, p1
        return self.q + h * (b @ self.V), self.p + h * (bhat @ self.W)

    def stage_multipliers(self):
        """Λ of the last evaluation, batch-first ``(..., s, m)`` (a view when stage-major)."""
        return self.Lam.swapaxes(0, 1) if self.staged else self.Lam
