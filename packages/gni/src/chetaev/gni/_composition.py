"""Composition of GNI methods (paper Remark 5.5; paper Rem. 5.5)."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from chetaev.discrete_lagrangian import Method, NewtonOptions, State
from chetaev.discrete_lagrangian.extending import ComposedSteps

from ._errors import InputError
from ._gni import GNI
from ._validation import check_newton

__all__ = ["Composition"]


def _check_methods(instance, attribute, value):
    if len(value) == 0:
        raise InputError(
            "Composition needs at least one method, e.g. (GNI('euler_b'), GNI('euler_a'))"
        )
    for m in value:
        if not isinstance(m, Method):
            raise InputError(
                "Composition members must be integrators (chetaev.discrete_lagrangian.Method, "
                f"e.g. GNI('euler_a')); got {m!r}"
            )
        if isinstance(m, GNI) and m.form != "momentum":
            raise InputError(
                "Composition needs GNI members with form='momentum' (the two-step form carries "
                f"a look-ahead point that a sub-step cannot share); got {m.name}"
            )


@attrs.frozen
class Composition(ComposedSteps):
    """``Φ_h = F_{m_r}^{c_r h} ∘ … ∘ F_{m_1}^{c_1 h}``: the methods are applied in the order
    given (``methods[0]`` first), with step fractions ``weights`` (default equal, summing to 1).

    ``Composition((GNI("euler_b"), GNI("euler_a")))`` is ``F_A^{h/2} ∘ F_B^{h/2}`` of
    Remark 5.5. All GNI methods share the node-state representation ``(q_k, v_k, λ_k)``
    (see :class:`GNI`), in which ``F_A^h ∘ F_B^{−h} = Id`` exactly; the composition of the
    adjoint pair is therefore symmetric, and it is of **order 2** (tested; an earlier order 1
    comes from composing the ``(q, p̃, λ̃)`` maps, whose adjointness holds only on the
    constraint manifolds S_A, S_B; :func:`euler_alpha_ptilde_step` reproduces that). It
    differs from RATTLE (15) at O(h³) per step.

    Caveat: the node multiplier ``lam`` of the composed step is the internal variable of the
    last sub-step, not a consistent approximation of λ(t) in general (on the project's nonlinear
    particle it converges to about 1.58 λ; a strict xfail in the tests). ``q`` and ``v`` are fine.

    External forces (issue 20): when every member takes forces (``supports_forces``), the
    control ``u`` of the step is passed to every sub-step (held constant over the whole
    step), each sub-step being the member's forced discrete equations (for :class:`GNI`, the
    forced GNI); ``info["work"]`` is the sum of the sub-steps' discrete works.

    ``newton``: Newton options given to every member (None, the default: the members' own).
    The step and its linearization (the chain rule over the sub-steps, carrying the GNI's
    multiplier λ) are those of
    :class:`chetaev.discrete_lagrangian.extending.ComposedSteps`.
    """

    methods: tuple = attrs.field(converter=tuple, validator=_check_methods)
    weights: tuple | None = attrs.field(default=None)
    newton: NewtonOptions | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_newton))

    def __attrs_post_init__(self):
        if self.weights is not None:
            if len(self.weights) != len(self.methods):
                raise InputError(
                    f"Composition got {len(self.methods)} methods but {len(self.weights)} weights; "
                    "give one weight per method"
                )
            if abs(sum(self.weights) - 1.0) > 1e-12:
                raise InputError(f"Composition weights must sum to 1; got {self.weights}")

    @property
    def fractions(self) -> tuple:
        if self.weights is None:
            return tuple(1.0 / len(self.methods) for _ in self.methods)
        return tuple(float(w) for w in self.weights)

    @property
    def order(self) -> int | None:
        names = tuple(getattr(m, "variant", None) for m in self.methods)
        if names in (("euler_b", "euler_a"), ("euler_a", "euler_b")) and self.weights is None:
            return 2
        orders = [m.order for m in self.methods]
        return None if None in orders else min(orders)

    @property
    def symmetric(self) -> bool:
        """The adjoint pair (Euler B, Euler A) with equal weights (Remark 5.5), or a palindrome
        of symmetric methods with palindromic weights."""
        names = tuple(getattr(m, "variant", None) for m in self.methods)
        if names in (("euler_b", "euler_a"), ("euler_a", "euler_b")) and self.weights is None:
            return True
        w = self.fractions
        return (tuple(self.methods) == tuple(reversed(self.methods)) and w == w[::-1]
                and all(m.symmetric for m in self.methods))

    @property
    def name(self) -> str:
        return "Composition(" + ", ".join(m.name for m in self.methods) + ")"

    def _members(self) -> tuple:
        return tuple(zip(self.methods, self.fractions))

    def _carried_jacobians(self, method: Method, system: Any, state: State, h: float, u: Any,
                           lin: Any) -> tuple | None:
        """The GNI's carried multiplier λ_k in the chain rule (``ComposedSteps``).

        A GNI step reads λ_k only through p⁻_k = G(q_k) v_k + (h/2) mu(q_k)ᵀ λ_k (Def. 4.1,
        (8)/(26)), as it reads v_k through G v_k, so ∂(q_{k+1}, v_{k+1})/∂λ_k =
        A_v G⁻¹ (h/2) muᵀ (A_v the v-columns of the member's A). λ_{k+1} is the multiplier of
        the node's KKT system [[G1, mu1ᵀ], [mu1, 0]] (v_{k+1}, c) = (p⁺, −a1), c = −(h/2)λ_{k+1}:
        mu1ᵀ dc = dp⁺ − (D21L(q1, v1) + Σ_a c_a ∂mu_a/∂q) dq_{k+1} − G1 dv_{k+1} (exact, the
        rows are in the range of mu1ᵀ), dp⁺ = ∂(D2 L_d + f_d⁺)/∂(q_k, q_{k+1}, u) chained
        with the member's dq_{k+1} (Marsden & West 2001 §3.2 for f_d⁺).
        """
        if not isinstance(method, GNI):
            return None
        from ._gni import (
            _forcing,
            _gni_force_partials,
            _gni_ld_hessians,
            _interface,
            constraint_parts,
            metric,
        )

        iface = _interface(system)
        q = np.asarray(state.q, dtype=float)
        q1, v1 = np.asarray(lin.state.q, dtype=float), np.asarray(lin.state.v, dtype=float)
        n = q.shape[-1]
        full = np.concatenate([lin.A, lin.B], -1)  # (..., 2n, 2n + n_u)
        dq1, dv1 = full[..., :n, :], full[..., n:, :]
        dl = method.discrete_lagrangian
        _, d12, d22 = _gni_ld_hessians(dl, iface, q, q1, h)
        d21 = np.swapaxes(d12, -1, -2)
        dpu = None
        forcing = _forcing(dl, iface, u)
        if forcing is not None:
            _, _, _, dp0, dp1, dpu = _gni_force_partials(dl, forcing[0], q, q1, h, u)
            d21, d22 = d21 + dp0, d22 + dp1
        dpp = d22 @ dq1
        dpp[..., :n] += d21
        if dpu is not None and lin.B.shape[-1]:
            dpp[..., 2 * n:] += dpu
        G1 = metric(iface, q1)
        mu1, _ = constraint_parts(iface, q1)
        c = -0.5 * h * np.asarray(lin.state.lam, dtype=float)
        Ag1 = np.asarray(iface.A_grad(q1), dtype=float)
        top = (dpp - (iface.D21L(q1, v1) + np.einsum("...aij,...a->...ij", Ag1, c)) @ dq1
               - G1 @ dv1)
        dc = np.linalg.solve(mu1 @ np.swapaxes(mu1, -1, -2), mu1 @ top)
        dlam = (-2.0 / h) * dc  # (..., m, 2n + n_u)
        G0 = metric(iface, q)
        mu0, _ = constraint_parts(iface, q)
        S = np.linalg.solve(G0, (0.5 * h) * np.swapaxes(mu0, -1, -2))  # G⁻¹ (h/2) muᵀ
        return (lin.A[..., n:] @ S, dlam[..., : 2 * n], dlam[..., n: 2 * n] @ S,
                dlam[..., 2 * n:])
