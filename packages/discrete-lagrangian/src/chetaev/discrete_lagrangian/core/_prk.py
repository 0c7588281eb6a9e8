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
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .._util._errors import InputError

__all__ = [
    "PRKCoefficients",
    "StageEvaluation",
    "StageHooks",
    "StepSolution",
    "coefficients_from",
    "pair_symmetric",
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
    ``dLam_dx`` is ``(s, m, N)``. ``extra`` is free for hooks to cache values.
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
    return s, m, free, k, s * n + k * m + int(getattr(hooks, "n_extra", 0))


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
    """Residual (and Jacobian) of one (constrained) VPRK step at the unknowns ``x``.

    Parameters
    ----------
    x : ndarray (..., N)
        Unknowns ``[V.ravel(), Λ_free.ravel()]``; may carry extra leading axes.
    q, p : ndarray (..., n)
        Node values q_k, p_k.
    h : float
    coeffs : PRKCoefficients
    system : a vector-space Lagrangian system (D1L, D2L and second derivatives)
    hooks : hooks object (module docstring), default: none
    lam_fixed : ndarray (..., s, m), optional
        Values of the non-free multipliers.
    jacobian : bool
        Also return the Jacobian ``(..., N, N)``.
    tangents : tuple, optional
        Cached output of the constant tangents (dV, dQ, dLam, dq1) for this (coeffs, h).

    Returns
    -------
    R : ndarray (..., N)
    J : ndarray (..., N, N) or None
    ev : StageEvaluation
    """
    if hooks is None:
        hooks = StageHooks(coeffs.s)
    n = q.shape[-1]
    s, m, free, k, N = _layout(coeffs, n, hooks)
    V, Lam = unpack(x, s, n, m, free, lam_fixed)
    n_extra = N - s * n - k * m
    base = getattr(system, "system", system)  # unwrap a ConstrainedSystem
    fast = bool(getattr(base, "is_mechanical", False) and getattr(base, "constant_mass", False))
    a, ah = coeffs.a, coeffs.ahat
    Q = q[..., None, :] + h * (a @ V)
    if fast:
        M = base.mass
        D1 = -base.gradV(Q)
        D2 = V @ M.T
    else:
        D1 = base.D1L(Q, V)
        D2 = base.D2L(Q, V)
    F, dF_dQ, dF_dV, dF_dLam = hooks.force(Q, V, Lam, jacobian)
    W = D1 if F is None else D1 + F
    P = p[..., None, :] + h * (ah @ W)
    q1 = q + h * (coeffs.b @ V)
    p1 = p + h * (coeffs.bhat @ W)
    ev = StageEvaluation(q=q, p=p, h=h, coeffs=coeffs, Q=Q, V=V, Lam=Lam, W=W, P=P, D2L=D2,
                         q1=q1, p1=p1, x_extra=x[..., N - n_extra:] if n_extra else None)
    R1 = (D2 - P).reshape((*D2.shape[:-2], s * n))
    if jacobian:
        if tangents is None:
            tangents = _constant_tangents(coeffs, n, m, free, h, n_extra)
        dV, dQ, dLam, dq1 = tangents[:4]
        if fast:
            dW = -(base.hessV(Q) @ dQ)
            dD2 = M @ dV  # constant
        else:
            dW = base.D11L(Q, V) @ dQ + base.D12L(Q, V) @ dV
            dD2 = base.D21L(Q, V) @ dQ + base.D22L(Q, V) @ dV
        if dF_dQ is not None:
            dW = dW + dF_dQ @ dQ
        if dF_dV is not None:
            dW = dW + dF_dV @ dV
        if dF_dLam is not None and m:
            dW = dW + dF_dLam @ dLam
        bshape = dW.shape[:-3]
        dWf = dW.reshape((*bshape, s, n * N))
        dP = (h * (ah @ dWf)).reshape(dW.shape)
        J1 = (dD2 - dP).reshape((*dP.shape[:-3], s * n, N))
        ev.dQ_dx, ev.dV_dx, ev.dLam_dx, ev.dW_dx = dQ, dV, dLam, dW
        ev.dq1_dx = dq1
        ev.dp1_dx = (h * (coeffs.bhat @ dWf)).reshape((*bshape, n, N))
    R2, J2 = hooks.equations(ev)
    if R2 is None:
        R = R1
        J = J1 if jacobian else None
    else:
        if R2.shape[:-1] != R1.shape[:-1]:
            R2 = np.broadcast_to(R2, R1.shape[:-1] + R2.shape[-1:])
        R = np.concatenate([R1, R2], axis=-1)
        if jacobian:
            if J2.shape[:-2] != J1.shape[:-2]:
                J2 = np.broadcast_to(J2, J1.shape[:-2] + J2.shape[-2:])
            J = np.concatenate([J1, J2], axis=-2)
        else:
            J = None
    return R, J, ev


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
    n_extra = N - s * n - k * m
    key = (float(h), n, m, tuple(free.tolist()), n_extra)
    tangents = None if tangent_cache is None else tangent_cache.get(key)
    if tangents is None:
        tangents = _constant_tangents(coeffs, n, m, free, h, n_extra)
        if tangent_cache is not None:
            if len(tangent_cache) > 8:
                tangent_cache.clear()
            tangent_cache[key] = tangents

    last: list = [None, None]

    def fun_jac(x, want):
        R, J, ev = prk_residual(x, q, p, h, coeffs, system, hooks, lam_fixed, want, tangents)
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
        _, _, ev = prk_residual(res.x, q, p, h, coeffs, system, hooks, lam_fixed, False,
                                tangents)
    return StepSolution(x=res.x, ev=ev, iterations=res.iterations,
                        residual=float(np.max(res.residual)), rate=res.rate)
