"""Two-point discrete Lagrangians L_d(q0, q1) and their derivatives.

The paper's discretization (§4.1.2, §4.2.2; paper §4.1.2, §4.2.2) is

    L_d(q0, q1) = scale · L(q0, (q1 − q0)/h),

the forward-difference ("Euler-A") map φ_{L_d}^{-1}(q0, q1) = (q0, (q1 − q0)/h) with
``scale = 1`` (no factor h; β = 0 is homogeneous in L_d so the dynamics do not depend
on the scale, only Ω_{L_d}, ξ and energy values do — the docs' theory page).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np
from chetaev.discrete_lagrangian import DiscreteLagrangian, lagrangian_two_form

from ._validation import as_step, fd_jacobian

__all__ = ["TwoPointLagrangian"]


@attrs.frozen(eq=False)
class _ContinuousLagrangian:
    """L(q, v) given by its derivative callables, under the slot names of
    ``chetaev.discrete_lagrangian`` systems as :class:`DiscreteLagrangian` reads them
    (D1L = ∂L/∂q, D2L = ∂L/∂v, D11L, D12L[i, j] = ∂²L/∂q_i∂v_j, D21L = D12Lᵀ, D22L)."""

    D1L: Callable
    D2L: Callable
    lagrangian: Callable | None = None
    D11L: Callable | None = None
    D12L: Callable | None = None
    D22L: Callable | None = None

    def D21L(self, q, v):
        return np.swapaxes(np.asarray(self.D12L(q, v)), -1, -2)


@attrs.frozen(eq=False)
class _Bound:
    """``(q0, q1) ↦ (scale/h)·rule_slot(system, q0, q1, h)``: a slot of a DiscreteLagrangian
    rule bound to a continuous Lagrangian and a step (the paper's L_d carries ``scale``
    instead of the rule's factor h, §4.1.2)."""

    slot: Callable
    system: _ContinuousLagrangian
    h: float
    scale: float

    def __call__(self, q0, q1):
        q0, q1 = np.asarray(q0, float), np.asarray(q1, float)
        return (float(self.scale) / self.h) * np.asarray(self.slot(self.system, q0, q1, self.h))



@attrs.frozen(eq=False)
class TwoPointLagrangian:
    """A discrete Lagrangian L_d: Q×Q → ℝ with its slot derivatives.

    Parameters
    ----------
    D1, D2 : callable
        ``D1(q0, q1)``, ``D2(q0, q1)`` → ``(..., n)``: ∂L_d/∂q0 and ∂L_d/∂q1 (eq. (2)).
    value : callable, optional
        ``value(q0, q1)`` → ``(...)``: L_d itself (only for diagnostics).
    D11, D12, D22 : callable, optional
        Second derivatives → ``(..., n, n)`` with ``D12[i, j] = ∂²L_d/∂q0_i ∂q1_j``.
        Missing blocks are computed by central finite differences of D1, D2.
    derivative_check : bool, keyword-only, default True
        Whether :meth:`DSOCS.check_derivatives` compares the supplied derivatives with central
        differences (D1, D2 against ``value``; D11, D12, D22 against D1, D2); ``False``
        skips it.

    Notes
    -----
    Discrete Legendre transforms (paper Def. 3.1, 3.2, eqs. (2)–(4), Thm. 3.3): 𝔽⁻L_d = −D1, 𝔽⁺L_d
    = D2.
    Lagrangian two-form (eq. (11)): Ω_{L_d} = −dθ⁺ = [[0, −D12], [D12ᵀ, 0]].
    """

    D1: Callable = attrs.field()
    D2: Callable = attrs.field()
    value: Callable | None = None
    D11: Callable | None = None
    D12: Callable | None = None
    D22: Callable | None = None
    derivative_check: bool = attrs.field(default=True, kw_only=True)

    # -- second derivatives with finite-difference fallback --------------------------------
    def d11(self, q0, q1) -> np.ndarray:
        """∂²L_d/∂q0² → (..., n, n)."""
        if self.D11 is not None:
            return np.asarray(self.D11(q0, q1), dtype=float)
        q1e = np.asarray(q1)[..., None, :]
        return fd_jacobian(lambda x: self.D1(x, q1e), q0)

    def d12(self, q0, q1) -> np.ndarray:
        """``D12[i, j] = ∂²L_d/∂q0_i ∂q1_j`` → (..., n, n)."""
        if self.D12 is not None:
            return np.asarray(self.D12(q0, q1), dtype=float)
        q0e = np.asarray(q0)[..., None, :]
        return fd_jacobian(lambda x: self.D1(q0e, x), q1)

    def d22(self, q0, q1) -> np.ndarray:
        """∂²L_d/∂q1² → (..., n, n)."""
        if self.D22 is not None:
            return np.asarray(self.D22(q0, q1), dtype=float)
        q0e = np.asarray(q0)[..., None, :]
        return fd_jacobian(lambda x: self.D2(q0e, x), q1)

    def legendre_minus(self, q0, q1) -> np.ndarray:
        """𝔽⁻L_d(q0, q1) = −D1L_d(q0, q1) (momentum at q0)."""
        return -np.asarray(self.D1(q0, q1))

    def legendre_plus(self, q0, q1) -> np.ndarray:
        """𝔽⁺L_d(q0, q1) = D2L_d(q0, q1) (momentum at q1)."""
        return np.asarray(self.D2(q0, q1))

    def omega(self, q0, q1) -> np.ndarray:
        """Ω_{L_d} as a (..., 2n, 2n) matrix, Ω(u, w) = uᵀΩw (eq. (11), paper §5, Thm. 5.1, 5.3)."""
        return lagrangian_two_form(self.d12(q0, q1))

    # -- constructors ----------------------------------------------------------------------
    @classmethod
    def from_functions(
        cls,
        dLdq: Callable,
        dLdv: Callable,
        h: float,
        *,
        lagrangian: Callable | None = None,
        d2L_dqdq: Callable | None = None,
        d2L_dqdv: Callable | None = None,
        d2L_dvdv: Callable | None = None,
        scale: float = 1.0,
    ) -> TwoPointLagrangian:
        """L_d = scale·L(q0, (q1 − q0)/h) from a continuous Lagrangian (paper §4.1.2, §4.2.2).

        ``dLdq(q, v)``, ``dLdv(q, v)`` → (..., n); optional second derivatives
        (..., n, n) with ``d2L_dqdv[i, j] = ∂²L/∂q_i ∂v_j``. With v = (q1 − q0)/h:

            D1 = scale·(L_q − L_v/h),   D2 = scale·L_v/h,
            D11 = scale·(L_qq − (L_qv + L_vq)/h + L_vv/h²),
            D12 = scale·(L_qv/h − L_vv/h²),   D22 = scale·L_vv/h².

        These are (scale/h) times the slot derivatives of
        :class:`chetaev.discrete_lagrangian.DiscreteLagrangian` ``("alpha", 0.0)``
        (L_d = h L(q0, v̄)), which computes them: the one discrete Lagrangian of the project.
        """
        h = as_step(h)
        rule = DiscreteLagrangian("alpha", 0.0)
        second = d2L_dqdq is not None and d2L_dqdv is not None and d2L_dvdv is not None
        cont = _ContinuousLagrangian(dLdq, dLdv, lagrangian,
                                     *((d2L_dqdq, d2L_dqdv, d2L_dvdv) if second
                                       else (None, None, None)))
        return cls(
            D1=_Bound(rule.D1, cont, h, scale),
            D2=_Bound(rule.D2, cont, h, scale),
            value=None if lagrangian is None else _Bound(rule.__call__, cont, h, scale),
            D11=_Bound(rule.D11, cont, h, scale) if second else None,
            D12=_Bound(rule.D12, cont, h, scale) if second else None,
            D22=_Bound(rule.D22, cont, h, scale) if second else None,
        )

    @classmethod
    def mechanical(
        cls,
        mass,
        potential_grad: Callable,
        h: float,
        *,
        potential: Callable | None = None,
        potential_hess: Callable | None = None,
        scale: float = 1.0,
    ) -> TwoPointLagrangian:
        """L_d for L = ½vᵀ𝐌v − U(q) with a constant mass matrix 𝐌 (paper §4.1.2, §4.2.2).

        D1 = −𝐌(q1 − q0)/h² − ∇U(q0),   D2 = 𝐌(q1 − q0)/h²  (times ``scale``).
        """
        M = np.atleast_2d(np.asarray(mass, dtype=float))
        n = M.shape[-1]

        def dLdq(q, v):
            return -np.asarray(potential_grad(q))

        def dLdv(q, v):
            return np.einsum("ij,...j->...i", M, v)

        lag = None
        if potential is not None:

            def lag(q, v):
                return 0.5 * np.einsum("...i,ij,...j->...", v, M, v) - np.asarray(potential(q))

        def qv(q, v):
            return np.zeros((*np.shape(q)[:-1], n, n))

        def vv(q, v):
            return np.broadcast_to(M, (*np.shape(q)[:-1], n, n))

        qq = None
        if potential_hess is not None:

            def qq(q, v):
                return -np.asarray(potential_hess(q))

        return cls.from_functions(
            dLdq, dLdv, h, lagrangian=lag, d2L_dqdq=qq, d2L_dqdv=qv if qq else None,
            d2L_dvdv=vv, scale=scale,
        )
