"""Per-step algebraic equations of the nonholonomic partitioned RK method (eq. 14/15).

Pure module-level functions of arrays: the residual of the square system solved at
each step and its analytic Jacobian, for the Lagrangian form (paper eq. 14, App. D;
App. D) and the Hamiltonian form (paper eq. 15, App. E;
paper eq. (15), App. E). Everything broadcasts over leading batch axes ``...``; the stage axis
``s`` comes right after them, so one call of every system callable evaluates all
stages of all trajectories.

Where each residual lives (issue 15): the Lagrangian form is written once, on the one PRK
engine of ``chetaev.discrete_lagrangian`` (``PRKStep``), with the nonholonomic terms as the
hooks of :class:`NonholonomicHooks`, read in the engine's two hook protocols: the
whole-evaluation hooks ``force``/``equations(ev)`` (``prk_residual``,
:func:`lagrangian_evaluation`; implicit ``v_k^i``, the IIIB variant) and the per-step hooks
(:func:`lagrangian_step`; the method's default path, explicit ``FL^{-1}`` and IIIA momenta,
with the structured Newton matrix :func:`_structured_solver`). The Hamiltonian form is the
same hooks on the engine's Hamiltonian unknowns ``Q^i, P^i`` (``unknowns="QP"``,
:func:`hamiltonian_evaluation`): the Lagrangian form composed with the Legendre map ``V^i =
FL^{-1}(Q^i, P^i)``, same solution, other Newton unknowns.

Unknown layout, Lagrangian form (``x`` has shape ``(..., N)``)::

    x = [ V^1..V^s  (s*n) | Lambda^2..Lambda^s  ((s-1)*m) | v_k^2..v_k^s ((s-1)*n, implicit only) ]

Residual layout::

    R1_i = D2L(Q^i, V^i) - p_k - h sum_j ahat_ij W^j                 i = 1..s    (14b, 14c)
    R2_i = Phi(q_k^i, v_k^i)                                          i = 2..s    (14e)
    R3_i = D2L(q_k^i, v_k^i) - p_k^i                                  i = 2..s    (implicit v only)

with ``Q^i = q_k + h sum_j a_ij V^j``, ``W^i = D1L(Q^i, V^i) + D2Phi(Q^i, V^i)^T Lambda^i``,
``p_k^i = p_k + h sum_j a_ij W^j`` (IIIA weights, eq. 14d) and ``Lambda^1 = lambda_k`` carried.
In the "explicit" (fast) path ``v_k^i = FL^{-1}(q_k^i, p_k^i)`` is computed by the model's
``legendre_inv`` and ``R3`` is absent.

Unknown layout, Hamiltonian form::

    x = [ Q^1..Q^s (s*n) | P^1..P^s (s*n) | Lambda^2..Lambda^s ((s-1)*m) ]

    E1_i = Q^i - q_k - h sum_j a_ij D2H(Q^j, P^j)                      (15b, 15c)
    E2_i = P^i - p_k + h sum_j ahat_ij W^j,  W^j = D1H - flat_H(D2Psi)^T Lambda^j   (15b, 15c)
    E3_i = Psi(q_k^i, p_k^i),  p_k^i = p_k - h sum_j a_ij W^j,  i = 2..s            (15d, 15e)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from chetaev.discrete_lagrangian import PRKCoefficients, PRKStep, prk_constants, prk_residual
from chetaev.discrete_lagrangian.extending import fixed_order_product

Array = np.ndarray

__all__ = [
    "ForcedNonholonomicHooks",
    "NonholonomicHooks",
    "StageModel",
    "hamiltonian_evaluation",
    "hamiltonian_jacobian",
    "hamiltonian_output",
    "hamiltonian_residual",
    "lagrangian_constants",
    "lagrangian_evaluation",
    "lagrangian_jacobian",
    "lagrangian_output",
    "lagrangian_residual",
    "lagrangian_sizes",
    "lagrangian_step",
    "lagrangian_unpack",
]


@dataclass(frozen=True)
class StageModel:
    """The derivatives of (L, Phi) that the step equations need, all broadcasting.

    Every callable takes arrays with leading axes ``(...)`` and returns

    - ``D1L(q, v)``, ``D2L(q, v)``: ``(..., n)`` (dL/dq, dL/dv);
    - ``D11L``, ``D12L``, ``D21L``, ``D22L``: ``(..., n, n)``, with
      ``D12L = d(D1L)/dv``, ``D21L = d(D2L)/dq`` (= ``D12L`` transposed), ``D22L = g_L``;
    - ``phi(q, v)``: ``(..., m)``; ``phi_q``, ``phi_v``: ``(..., m, n)``;
    - ``phi_v_lam_q(q, v, lam)``, ``phi_v_lam_v(q, v, lam)``: ``(..., n, n)``, the
      derivatives of ``phi_v(q, v)^T lam`` in ``q`` and ``v``; ``phi_v_lam_v`` may be
      ``None`` (linear/affine constraints: ``phi_v`` independent of ``v``);
    - ``legendre_inv(q, p)``: ``(..., n)`` or ``None`` when ``FL`` cannot be inverted
      explicitly (then the Lagrangian form adds ``v_k^i`` as unknowns);
    - ``constant_D21L_zero``: True when ``D12L = D21L = 0`` (constant mass matrix);
    - ``A(q)`` ``(..., m, n)`` and ``affine(q)`` ``(..., m)`` (or None): set for linear or
      affine constraints ``Phi = A(q) v + a(q)``, so ``phi`` and ``phi_v`` reuse one
      evaluation of ``A`` per stage; ``A_grad(q)`` ``(..., m, n, n)`` (``[a, i, j] =
      dA_ai/dq_j``) and ``affine_grad(q)`` ``(..., m, n)`` (or None) their derivatives;
    - ``mass``, ``mass_inv`` ``(n, n)``: the constant mass matrix and its inverse when
      ``L = v.M v/2 - V(q)`` (then ``D2L = M v``, ``FL^{-1}(p) = M^{-1} p``).
    """

    n: int
    m: int
    D1L: Callable[[Array, Array], Array]
    D2L: Callable[[Array, Array], Array]
    D11L: Callable[[Array, Array], Array]
    D12L: Callable[[Array, Array], Array]
    D21L: Callable[[Array, Array], Array]
    D22L: Callable[[Array, Array], Array]
    phi: Callable[[Array, Array], Array]
    phi_q: Callable[[Array, Array], Array]
    phi_v: Callable[[Array, Array], Array]
    phi_v_lam_q: Callable[[Array, Array, Array], Array]
    phi_v_lam_v: Callable[[Array, Array, Array], Array] | None = None
    legendre_inv: Callable[[Array, Array], Array] | None = None
    constant_D21L_zero: bool = False
    A: Callable[[Array], Array] | None = None
    affine: Callable[[Array], Array] | None = None
    A_grad: Callable[[Array], Array] | None = None
    affine_grad: Callable[[Array], Array] | None = None
    mass: Array | None = None
    mass_inv: Array | None = None


# --------------------------------------------------------------------------------------
# small helpers


def _mix(c: Array, X: Array) -> Array:
    """``sum_j c_ij X^j`` over the stage axis (``X``: ``(..., s, k)``)."""
    return c @ X


def _matvec(M: Array, x: Array) -> Array:
    return (M @ x[..., None])[..., 0]


def _T(M: Array) -> Array:
    return M.swapaxes(-1, -2)


def lagrangian_sizes(s: int, n: int, m: int, implicit: bool) -> tuple[int, int, int]:
    """Sizes of the three unknown blocks (V, Lambda^2..s, v_k^2..s) of the Lagrangian form."""
    return s * n, (s - 1) * m, (s - 1) * n if implicit else 0


def lagrangian_unpack(x: Array, s: int, n: int, m: int, implicit: bool):
    """Split ``x`` into ``V (..., s, n)``, ``Lam2 (..., s-1, m)``, ``u (..., s-1, n)`` or None."""
    nV, nL, _nU = lagrangian_sizes(s, n, m, implicit)
    lead = x.shape[:-1]
    V = x[..., :nV].reshape(*lead, s, n)
    Lam2 = x[..., nV : nV + nL].reshape(*lead, s - 1, m)
    u = x[..., nV + nL :].reshape(*lead, s - 1, n) if implicit else None
    return V, Lam2, u


class NonholonomicHooks:
    """The nonholonomic terms of eq. (14) (App. D) as hooks of the shared PRK engine
    (:func:`chetaev.discrete_lagrangian.prk_residual`): the engine writes
    ``Q^i, W^i, P^i`` and ``R1_i = D2L(Q^i, V^i) - P^i`` (14b, 14c); these hooks add

    - (i) the force ``D2Phi(Q^i, V^i)^T Lambda^i`` in ``W^i`` (14c);
    - (ii) the constraints ``R2_i = Phi(q_k^i, v_k^i)``, i = 2..s, at the IIIA-weighted
      momenta ``p_k^i = p_k + h sum_j a_ij W^j`` (14d, 14e), with ``v_k^i =
      FL^{-1}(q_k^i, p_k^i)`` (explicit) or unknowns with ``R3_i = D2L(q_k^i, v_k^i) -
      p_k^i`` (implicit); ``stage_momenta="iiib"``: the rejected variant of §5.1 (inner
      constraints at ``(Q^i, V^i)``);
    - (iii) ``Lambda^1`` given (the multiplier rule of ``_rules.py`` chooses it), Λ^2..s free;
    - (iv) the implicit ``v_k^2..v_k^s`` as extra unknowns.

    ``ev.extra["pk"]`` receives ``p_k^i`` of all stages ``(..., s, n)``.

    ``unknowns="QP"``: the same hooks on the engine's Hamiltonian unknowns ``[Q^i, P^i,
    Lambda^2..s]`` (eq. (15), App. E; explicit ``FL^{-1}`` and IIIA momenta only): the
    engine writes the rows ``Q^i - q_k - h sum_j a_ij D2H(Q^j, P^j)`` and ``P^i - p_k - h
    sum_j ahat_ij W^j`` (15b, 15c; ``D2H = FL^{-1}``, ``W = -D1H + flat_H(D2Psi)^T Lambda``
    in the Lagrangian sign) and these hooks the same force and constraint rows (15d, 15e).
    """

    def __init__(self, model: StageModel, s: int, implicit: bool, stage_momenta: str,
                 a: Array | None = None, unknowns: str = "V"):
        self.model, self.s = model, s
        self.m = model.m
        self.free = (False,) + (True,) * (s - 1)
        if unknowns == "QP" and (implicit or stage_momenta != "iiia"):
            raise ValueError("NonholonomicHooks(unknowns='QP') takes the explicit FL^{-1} "
                             "and the IIIA momenta only: implicit=False, stage_momenta='iiia'.")
        self.unknowns = unknowns
        self.implicit, self.stage_momenta = implicit, stage_momenta
        self.n_extra = (s - 1) * model.n if implicit else 0
        if a is not None:  # the engine's per-step form: p_k^i as extra mixes (14d)
            self.mix_rows = a[1:]

    # -- the fast hooks of the engine's per-step form (PRKStep; explicit FL^-1, "iiia")

    def stage_force(self, step):
        """Hook (i) on :class:`PRKStep`: ``D2Phi(Q^i, V^i)^T Lambda^i`` (14c); keeps
        ``D2Phi`` (``A(Q)`` for linear constraints) in ``step.aux["AQ"]``."""
        model, Q, V, Lam = self.model, step.Q, step.V, step.Lam
        AQ = model.A(Q) if model.A is not None else model.phi_v(Q, V)  # (..., s, m, n)
        step.aux["AQ"] = AQ
        # einsum/broadcasts: a stacked (1 x m) @ (m x n) matmul costs ~3 times more for a
        # large batch
        return Lam * AQ[..., 0, :] if self.m == 1 else np.einsum("...a,...an->...n", Lam, AQ)

    def _velocities(self, step):
        """``v_k^i = FL^{-1}(Q^i, p_k^i)``, i = 2..s, with ``p_k^i = step.pmix`` (14d)."""
        vc = step.aux.get("vc")
        if vc is None:
            if "mass_invT" in step.consts:
                vc = step.times_inverse_mass(step.pmix)
            else:
                Qc = step.Q[1:] if step.staged else step.Q[..., 1:, :]
                vc = self.model.legendre_inv(Qc, step.pmix)
            step.aux["vc"] = vc
        return vc

    def stage_equations(self, step):
        """Hook (ii) on :class:`PRKStep`: ``R2_i = Phi(Q^i, v_k^i)``, i = 2..s (14e)."""
        model, aux, Q = self.model, step.aux, step.Q
        AQ = aux["AQ"]
        c = step.consts
        if c.get("mass_identity"):  # v_k^i = p_k^i (inline: the residual's hot path)
            vc = aux["vc"] = step.pmix
        else:
            vc = self._velocities(step)
        if step.staged:  # (s-1, B, m)
            if model.A is None:
                return model.phi(Q[1:], vc)
            if model.m == 1:
                R2 = np.einsum("ibn,ibn->ib", AQ[1:, :, 0, :], vc)[..., None]
            else:
                R2 = np.einsum("ibgn,ibn->ibg", AQ[1:], vc)
            return R2 if model.affine is None else R2 + model.affine(Q[1:])
        if model.A is None:
            return model.phi(Q[..., 1:, :], vc)
        if not step.flat:  # one trajectory: matmul (einsum's call overhead is larger)
            R2 = (AQ[..., 1:, :, :] @ vc[..., None])[..., 0]
        elif model.m == 1:
            R2 = np.einsum("...in,...in->...i", AQ[..., 1:, 0, :], vc)
        else:
            R2 = np.einsum("...an,...n->...a", AQ[..., 1:, :, :], vc)
        if model.affine is not None:
            R2 = R2 + model.affine(Q[..., 1:, :]).reshape(R2.shape)
        return R2

    def force_jacobian(self, step):
        """Derivatives of hook (i) on :class:`PRKStep` (batch-first): ``(d(G Lambda)/dQ,
        d(G Lambda)/dV or None, G^T of stages 2..s)``; keeps ``dPhi/dq`` at ``(Q^i,
        v_k^i)`` in ``step.aux["Cq"]`` (one ``A_grad`` evaluation serves both)."""
        model, Q, V, Lam = self.model, step.Q, step.V, step.Lam
        AQ = step.aux["AQ"]
        vc = self._velocities(step)
        Qc = Q[..., 1:, :]
        if model.A_grad is not None:
            H = model.A_grad(Q)  # (..., s, m, n, n)
            dF_dQ = np.einsum("...aij,...a->...ij", H, Lam)
            Cq = np.einsum("...aij,...i->...aj", H[..., 1:, :, :, :], vc)
            if model.affine_grad is not None:
                Cq = Cq + model.affine_grad(Qc)
        else:
            dF_dQ = model.phi_v_lam_q(Q, V, Lam)
            Cq = model.phi_q(Qc, vc)
        step.aux["Cq"] = Cq
        dF_dV = None if model.phi_v_lam_v is None else model.phi_v_lam_v(Q, V, Lam)
        return dF_dQ, dF_dV, np.swapaxes(AQ[..., 1:, :, :], -1, -2)

    def equations_jacobian(self, step, dpk):
        """Rows of hook (ii) on :class:`PRKStep`: ``R2_i = Phi(Q^i, FL^{-1}(Q^i, p_k^i))``,
        ``d/dx = Ceff_i dQ^i/dx + Cp_i dp_k^i/dx`` with ``dpk = dp_k^i/dx`` ``(..., s-1, n,
        N)`` from the engine."""
        model, s, n, m = self.model, self.s, self.model.n, self.model.m
        Q, AQ, Cq = step.Q, step.aux["AQ"], step.aux["Cq"]
        vc = self._velocities(step)
        lead = Q.shape[:-2]
        Qc = Q[..., 1:, :]
        Cv = AQ[..., 1:, :, :] if model.A is not None else model.phi_v(Qc, vc)
        if model.mass_inv is not None:
            Cp = Cv @ model.mass_inv
        else:
            Cp = _T(np.linalg.solve(model.D22L(Qc, vc), _T(Cv)))
        Ceff = Cq if model.constant_D21L_zero else Cq - Cp @ model.D21L(Qc, vc)
        R2 = Cp @ dpk  # (..., s-1, m, N)
        R2v = R2[..., : s * n].reshape(*lead, s - 1, m, s, n)
        R2v += step.consts["hmix"][:, None, :, None] * Ceff[..., :, :, None, :]
        return R2

    def structured_solver(self, step):
        """The method's structured Newton matrix at the stage arrays of ``step``
        (:func:`_structured_solver`; constant mass only)."""
        model = self.model
        AQ = step.aux["AQ"]
        vc = self._velocities(step)
        if step.staged:
            return _structured_solver(
                model, step, self.s, step.q.shape[:-1],
                np.ascontiguousarray(step.Q.transpose(1, 0, 2)),
                np.ascontiguousarray(AQ.transpose(1, 0, 2, 3)),
                np.ascontiguousarray(vc.transpose(1, 0, 2)),
                staged=True,
            )
        return _structured_solver(model, step, self.s, step.Q.shape[:-2], step.Q, AQ, vc)

    def force(self, Q, V, Lam, jacobian):
        """Hook (i): ``G Lambda`` with ``G = D2Phi^T`` and its derivatives."""
        model = self.model
        Cv = model.A(Q) if model.A is not None else model.phi_v(Q, V)  # (..., s, m, n)
        G = _T(Cv)
        F = _matvec(G, Lam)
        if not jacobian:
            return F, None, None, None
        dF_dV = None if model.phi_v_lam_v is None else model.phi_v_lam_v(Q, V, Lam)
        return F, model.phi_v_lam_q(Q, V, Lam), dF_dV, G

    def equations(self, ev):
        """Hooks (ii), (iv): ``[R2 ((s-1) m), R3 ((s-1) n, implicit only)]``."""
        model, s, h, a = self.model, self.s, ev.h, ev.coeffs.a
        lead = ev.W.shape[:-2]
        pk = ev.p[..., None, :] + h * _mix(a, ev.W)  # (14d)
        ev.extra["pk"] = pk
        Qc, pkc = ev.Q[..., 1:, :], pk[..., 1:, :]
        if self.implicit:
            vc = ev.x_extra.reshape(*lead, s - 1, model.n)
        else:
            vc = model.legendre_inv(Qc, pkc)
        if model.A is not None:  # Phi = A v + a
            Cv = model.A(Qc)
            R2 = _matvec(Cv, vc)
            if model.affine is not None:
                R2 = R2 + model.affine(Qc)
        else:
            Cv = None
            R2 = model.phi(Qc, vc)
        iiib = self.stage_momenta == "iiib" and s > 2
        if iiib:
            R2 = R2.copy()
            R2[..., : s - 2, :] = model.phi(ev.Q[..., 1 : s - 1, :], ev.V[..., 1 : s - 1, :])
        parts = [R2.reshape(*lead, -1)]
        if self.implicit:
            parts.append((model.D2L(Qc, vc) - pkc).reshape(*lead, -1))
        R = np.concatenate(parts, axis=-1)
        if ev.dW_dx is None:
            return R, None
        N = ev.dW_dx.shape[-1]
        dQc = ev.dQ_dx[1:]  # (s-1, n, N)
        dpk = h * np.einsum("ij,...jkN->...ikN", a[1:], ev.dW_dx)  # (..., s-1, n, N)
        Cq = model.phi_q(Qc, vc)
        if Cv is None:
            Cv = model.phi_v(Qc, vc)
        if self.implicit:
            dvc = np.zeros((s - 1, model.n, N))
            dvc[..., N - self.n_extra :] = np.eye(self.n_extra).reshape(s - 1, model.n, -1)
            J2 = Cq @ dQc + Cv @ dvc  # (..., s-1, m, N)
        else:  # v = FL^{-1}(Q, p_k): Cv dv = Cp (dp_k - D21L dQ), Cp = Cv g^{-1} (m rows)
            if model.mass_inv is not None:
                Cp = Cv @ model.mass_inv
            else:
                Cp = _T(np.linalg.solve(model.D22L(Qc, vc), _T(Cv)))
            rhs = dpk if model.constant_D21L_zero else dpk - model.D21L(Qc, vc) @ dQc
            J2 = Cq @ dQc + Cp @ rhs  # (..., s-1, m, N)
        if iiib:
            Qi, Vi = ev.Q[..., 1 : s - 1, :], ev.V[..., 1 : s - 1, :]
            J2 = np.array(np.broadcast_to(J2, (*lead, s - 1, model.m, N)))
            J2[..., : s - 2, :, :] = (model.phi_q(Qi, Vi) @ ev.dQ_dx[1 : s - 1]
                                      + model.phi_v(Qi, Vi) @ ev.dV_dx[1 : s - 1])
        J = [J2.reshape(*lead, -1, N)]
        if self.implicit:
            J3 = model.D21L(Qc, vc) @ dQc + model.D22L(Qc, vc) @ dvc - dpk
            J.append(J3.reshape(*lead, -1, N))
        return R, np.concatenate(J, axis=-2)


class ForcedNonholonomicHooks(NonholonomicHooks):
    """:class:`NonholonomicHooks` of the engine's per-step form (:class:`PRKStep`) with an
    external force: the forced nonholonomic PRK (issue 20; the discrete Lagrange–d'Alembert
    principle, Marsden & West 2001 §3.2, stage forces as in the forced VPRK of
    :mod:`chetaev.discrete_lagrangian.core._forcing`)::

        W^i = D1L(Q^i, V^i) + D2Phi(Q^i, V^i)^T Lambda^i + F(Q^i, V^i, u)      (14c)

    so that the IIIB momenta ``P^i`` and the IIIA constraint momenta ``p_k^i`` (14d) use the
    same ``W^i``; ``u`` is the control held over the step. The Q and V derivatives of ``F``
    enter the analytic Jacobian; the structured Newton matrix leaves them out (it is an
    approximation; ``newton_solve`` falls back to the analytic Jacobian when it contracts
    too slowly).

    Parameters
    ----------
    model, s, a
        As :class:`NonholonomicHooks` (explicit ``FL^{-1}``, IIIA momenta).
    force, force_jacobians : callable
        ``F(Q, V, u)`` and ``(Q, V, u) -> (F_q, F_v, F_u)`` (the fields of the system's
        :class:`~chetaev.discrete_lagrangian.core._interface.SystemInterface`).
    u : ndarray or None
        The control ``(..., n_controls)`` (None: the system's empty control).
    """

    def __init__(self, model: StageModel, s: int, a: Array, force: Callable,
                 force_jacobians: Callable, u: Array | None):
        super().__init__(model, s, False, "iiia", a=a)
        self._force, self._force_jac = force, force_jacobians
        self.u = None if u is None else np.asarray(u, dtype=float)

    def _u_at(self, Q: Array, staged: bool):
        """The control broadcast to the stage arrays' batch (stage-major or batch-first)."""
        if self.u is None:
            return None
        u = self.u if staged else self.u[..., None, :]
        return np.broadcast_to(u, (*Q.shape[:-1], u.shape[-1]))

    def external_force(self, Q: Array, V: Array, staged: bool = False) -> Array:
        """``F(Q^i, V^i, u)`` at the stages (layout of ``Q``)."""
        return self._force(Q, V, self._u_at(Q, staged))

    def stage_force(self, step):
        """Hook (i) on :class:`PRKStep`: ``D2Phi^T Lambda^i + F(Q^i, V^i, u)`` (14c)."""
        F0 = super().stage_force(step)
        return F0 + self.external_force(step.Q, step.V, step.staged)

    def force_jacobian(self, step):
        """Derivatives of hook (i) with the Q, V derivatives of the external force."""
        dF_dQ, dF_dV, G = super().force_jacobian(step)
        Fq, Fv, _Fu = self._force_jac(step.Q, step.V, self._u_at(step.Q, step.staged))
        return dF_dQ + Fq, Fv if dF_dV is None else dF_dV + Fv, G


def _coefficients(a: Array, ahat: Array, b: Array | None = None) -> PRKCoefficients:
    """The engine's coefficients of a Lobatto IIIA–IIIB pair (``b`` defaults to the last row
    of ``a``, H3: ``a_sj = b_j``; ``bhat = b``)."""
    a = np.asarray(a, dtype=float)
    b = np.array(a[-1]) if b is None else np.asarray(b, dtype=float)
    return PRKCoefficients(a=a, b=b, c=a.sum(axis=1), ahat=np.asarray(ahat, dtype=float),
                           bhat=b)


def lagrangian_evaluation(x, q, p, lam, h, a, ahat, model: StageModel, implicit: bool = False,
                          stage_momenta: str = "iiia", jacobian: bool = False, b=None):
    """Residual, Jacobian (or None) and :class:`StageEvaluation` of the Lagrangian-form step:
    :func:`chetaev.discrete_lagrangian.prk_residual` with :class:`NonholonomicHooks`
    (``Lambda^1 = lam``). Arguments as in :func:`lagrangian_residual`."""
    s = a.shape[0]
    hooks = NonholonomicHooks(model, s, implicit, stage_momenta)
    lam_fixed = np.asarray(lam)[..., None, :]
    return prk_residual(np.asarray(x), np.asarray(q), np.asarray(p), h,
                        _coefficients(a, ahat, b), model, hooks, lam_fixed, jacobian)


def lagrangian_residual(
    x: Array,
    q: Array,
    p: Array,
    lam: Array,
    h: float,
    a: Array,
    ahat: Array,
    model: StageModel,
    implicit: bool = False,
    stage_momenta: str = "iiia",
    aux: dict | None = None,
    generic: bool = False,
) -> Array:
    """Residual of the Lagrangian-form step (paper eq. 14, App. D).

    Parameters
    ----------
    x : (..., N) unknowns ``[V, Lambda^2..s, (v_k^2..s)]``.
    q, p, lam : (..., n), (..., n), (..., m) the step's input ``(q_k, p_k, lambda_k)``.
    h : step size (negative allowed).
    a, ahat : (s, s) Lobatto IIIA and IIIB matrices.
    model : StageModel.
    implicit : add ``v_k^i`` as unknowns (no explicit ``FL^{-1}``).
    stage_momenta : ``"iiia"`` (the method: constraints at ``p_k^i``, eq. 14d) or
        ``"iiib"`` (the variant the paper argues against, §5.1: the inner-stage
        constraints 2..s-1 use the IIIB stage momenta ``P^i``, i.e. ``Phi(Q^i, V^i)``;
        the endpoint constraint keeps ``p_{k+1}`` because ``Lambda^s`` enters nothing else).
    aux : dict, optional
        Receives the stage arrays ``V, W, Lam, u`` of this evaluation (so that the
        caller gets the node values of the converged step without re-evaluating).
    generic : bool
        Use the engine's generic form (:func:`lagrangian_evaluation`) even where its
        per-step form (:func:`lagrangian_step`) applies (explicit ``FL^{-1}``, ``"iiia"``);
        for cross-checking the two.
    """
    if not implicit and stage_momenta == "iiia" and not generic:  # the per-step form
        step = lagrangian_step(q, p, lam, h, a, ahat, model)
        R = step.residual(np.asarray(x))
        if aux is not None:
            aux.update(V=step.V, W=step.W, Lam=step.Lam, u=None)
        return R
    R, _J, ev = lagrangian_evaluation(x, q, p, lam, h, a, ahat, model, implicit, stage_momenta)
    if aux is not None:
        u = ev.x_extra.reshape(*ev.V.shape[:-2], -1, model.n) if implicit else None
        aux.update(V=ev.V, W=ev.W, Lam=ev.Lam, u=u)
    return R


def lagrangian_jacobian(
    x: Array,
    q: Array,
    p: Array,
    lam: Array,
    h: float,
    a: Array,
    ahat: Array,
    model: StageModel,
    implicit: bool = False,
    stage_momenta: str = "iiia",
    generic: bool = False,
) -> Array:
    """Analytic Jacobian ``d(residual)/dx``, shape ``(..., N, N)``: the engine's
    (:func:`lagrangian_evaluation`), or the per-step form's (:func:`lagrangian_step`)
    (``generic=True`` bypasses it, for cross-checks). Blocks::

        dR1_i/dV_l   = h a_il D21L_i + delta_il D22L_i
                       - h^2 sum_j ahat_ij a_jl Wq_j - h ahat_il Wv_l
        dR1_i/dLam_l = -h ahat_il D2Phi_l^T
        dp_k^i/dV_l  = h^2 sum_j a_ij a_jl Wq_j + h a_il Wv_l,   dp_k^i/dLam_l = h a_il D2Phi_l^T
    """
    if not implicit and stage_momenta == "iiia" and not generic:  # the per-step form
        return lagrangian_step(q, p, lam, h, a, ahat, model).jacobian(np.asarray(x))
    _R, J, _ev = lagrangian_evaluation(x, q, p, lam, h, a, ahat, model, implicit, stage_momenta,
                                       jacobian=True)
    return J


# --------------------------------------------------------------------------------------
# The method's default path (explicit FL^{-1}, IIIA constraint momenta) runs on the engine's
# per-step form (chetaev.discrete_lagrangian.PRKStep) with the fast hooks of
# NonholonomicHooks: the engine writes Q, W, the stacked mixes [h a_ij (i = 2..s); h ahat_ij]
# W, R1, its Jacobian rows and the node values; the hooks add G Lambda, the constraint rows
# and the structured Newton matrix (the method's Newton matrix, below).


def lagrangian_constants(coeffs: PRKCoefficients, h: float, model: StageModel) -> dict:
    """The engine's per-``(coeffs, h, model)`` constants of the default path
    (:func:`chetaev.discrete_lagrangian.prk_constants` with the IIIA mix rows ``a_ij``,
    i = 2..s, of eq. (14d)); build once per step size."""
    s = coeffs.s
    return prk_constants(coeffs, h, model.n, (False,) + (True,) * (s - 1), coeffs.a[1:],
                         model.mass)


def lagrangian_step(q, p, lam, h, a, ahat, model: StageModel, consts: dict | None = None,
                    staged: bool = False, b=None) -> PRKStep:
    """The engine's per-step object (:class:`chetaev.discrete_lagrangian.PRKStep`) of the
    Lagrangian-form step with explicit ``FL^{-1}`` and IIIA constraint momenta (eq. 14,
    App. D): ``residual(x)``, ``jacobian(x)``, ``structured_solver(x)`` (constant mass),
    ``node_values()``. ``staged``: stage-major layout (one batch axis)."""
    coeffs = _coefficients(a, ahat, b)
    hooks = NonholonomicHooks(model, coeffs.s, False, "iiia", a=coeffs.a)
    if consts is None:
        consts = lagrangian_constants(coeffs, h, model)
    return PRKStep(q, p, h, coeffs, model, hooks, np.asarray(lam)[..., None, :], consts,
                   staged=staged)


def _structured_solver(
    model: StageModel, step: PRKStep, s: int, lead: tuple, Q, AQ, vc, staged: bool = False
):
    """Solver of ``J_0 dx = F`` for the structured Newton matrix ``J_0`` of the step
    ``step`` (the engine's :class:`chetaev.discrete_lagrangian.PRKStep`, whose constants it
    reads and extends), from its stage arrays (batch-first ``Q (..., s, n)``, ``AQ (..., s,
    m, n)``, ``vc (..., s-1, n)``; strided views are fine).

    ``J_0`` is the analytic Jacobian without its ``O(h^2)`` force terms ``h^2 sum_j c_ij
    (dW^j/dQ^j) a_jl`` (and ``dW/dV``, which vanishes for linear and affine constraints);
    the constraint blocks are kept exact (paper eq. (14), App. D)::

        J_0 = [[ I_s (x) M               , -h ahat_il  G_l^T      ],     rows R1_i
               [ h a_il  Cq_i            ,  h a_il  Cv_i M^-1 G_l^T ]]   rows R2_i

    with ``G_l = D2Phi(Q^l, V^l)`` (the multiplier directions in ``W^l``), and ``Cq_i``,
    ``Cv_i`` the derivatives of ``Phi`` at ``(Q^i, v_k^i)``, i = 2..s. Eliminating
    ``dV = M^-1 (r_1 + h ahat G^T dLambda)`` leaves the ``(s-1) m`` square system

        S_ik = h a_ik Cv_i M^-1 G_k^T + h^2 (a ahat)_ik Cq_i M^-1 G_k^T,   i, k = 2..s,

    so building the solver costs one ``A_grad`` evaluation and the inverse of ``S``, and
    applying it ``O(s^2 (n + m) m)`` per trajectory, against ``O((s (n + m))^3)`` for the
    analytic Jacobian. Simplified Newton with ``J_0`` contracts at the rate
    ``|J_0^-1 (J - J_0)| = O(h^2 |d^2 L/dq^2|)``; for ``s = 2`` the dropped block is
    nilpotent (``ahat a`` has a double zero eigenvalue) and the rate is ``O(h^3)``.
    Measured rates at ``h = 0.1`` are below ``1.4e-3`` on the particle and the chaotic
    system (paper §7.1; §7.3), against ``0.03`` for the analytic Jacobian of the previous
    step; when the rate is too large (stiff forces), ``newton_solve(structured=...)``
    falls back to the analytic Jacobian. Returns ``solve(F) -> J_0^{-1} F`` (shapes
    ``(..., N)``), NaN for a member whose ``S`` is singular.

    ``staged``: one batch axis and ``m = 1``: the returned solve works in stage-major
    layout inside (same result)."""
    c = step.consts
    if model.mass_inv is None:
        raise ValueError("structured_solver needs a constant mass matrix (model.mass).")
    n, m = model.n, model.m
    Qc = Q[..., 1:, :]
    Cv = AQ[..., 1:, :, :] if model.A is not None else model.phi_v(Qc, vc)
    if model.A_grad is not None:  # Cq[a, j] = sum_i dA_ai/dq_j v_i (as a stacked matmul)
        Cq = (vc[..., :, None, None, :] @ model.A_grad(Qc))[..., 0, :]
        if model.affine_grad is not None:
            Cq = Cq + model.affine_grad(Qc)
    else:
        Cq = model.phi_q(Qc, vc)
    G = AQ[..., 1:, :, :]  # (..., s-1, m, n): the directions of Lambda^2..s
    identity = c.get("mass_identity")
    tim = step.times_inverse_mass
    Gh = tim(G)  # rows of M^-1 G_k^T
    if "S_coef" not in c:
        c["S_coef"] = (
            np.ascontiguousarray(c["ha"][1:, 1:]),
            np.ascontiguousarray((c["ha"] @ c["hahat"])[1:, 1:]),
            np.ascontiguousarray(c["hahat"][:, 1:]),
        )
    ca, caa, hah1 = c["S_coef"]
    ha1 = c["hmix"]
    nV, L = s * n, (s - 1) * m
    if m == 1:  # one constraint: blocks are scalars, S is (s-1) x (s-1)
        Cv1, Cq1, Gh1 = Cv[..., 0, :], Cq[..., 0, :], Gh[..., 0, :]  # (..., s-1, n)
        CG = np.concatenate([Cv1, Cq1], axis=-2) @ np.swapaxes(Gh1, -1, -2)
        S = ca * CG[..., : s - 1, :] + caa * CG[..., s - 1 :, :]  # (..., s-1, s-1)
        Sinv = _small_inverse(S)
        if staged and len(lead) == 1:
            return _staged_solve_m1(c, s, n, identity, tim, Cq1, Gh1, Sinv)

        def solve(F):
            u = F[..., :nV]  # flat (..., s*n)
            if not identity:
                u = tim(u.reshape(*lead, s, n)).reshape(*lead, nV)
            rhs = F[..., nV:] - np.einsum(
                "...in,...in->...i", Cq1, ha1 @ u.reshape(*lead, s, n)
            )
            dL = np.einsum("...ik,...k->...i", Sinv, rhs)  # (..., s-1)
            out = np.empty(F.shape)
            corr = (hah1 @ (Gh1 * dL[..., None])).reshape(*lead, nV)
            np.add(u, corr, out=out[..., :nV])
            out[..., nV:] = dL
            return out

        return solve

    GhT = np.swapaxes(Gh, -1, -2)  # (..., s-1, n, m) = M^-1 G_k^T
    S = ca[:, :, None, None] * (Cv[..., :, None, :, :] @ GhT[..., None, :, :, :]) + caa[
        :, :, None, None
    ] * (Cq[..., :, None, :, :] @ GhT[..., None, :, :, :])  # (..., s-1, s-1, m, m)
    Sinv = _small_inverse(np.swapaxes(S, -3, -2).reshape(*lead, L, L))

    def solve(F):
        u = F[..., :nV].reshape(*lead, s, n)
        if not identity:
            u = tim(u)
        r2 = F[..., nV:].reshape(*lead, s - 1, m)
        rhs = r2 - np.einsum("...ian,...in->...ia", Cq, ha1 @ u)
        dL = np.einsum("...ik,...k->...i", Sinv, rhs.reshape(*lead, L)).reshape(
            *lead, s - 1, m
        )
        out = np.empty(F.shape)
        dV = u + hah1 @ np.einsum("...kan,...ka->...kn", Gh, dL)
        out[..., :nV] = dV.reshape(*lead, nV)
        out[..., nV:] = dL.reshape(*lead, L)
        return out

    return solve


def _staged_solve_m1(c: dict, s: int, n: int, identity: bool, tim, Cq1, Gh1, Sinv):
    """The ``m = 1`` structured solve with stage-major temporaries ``(s, B, n)``: each
    stage mix is one matrix product over the batch (``tim``: ``X -> X M^{-T}``)."""
    ha1, hah1 = c["hmix"], c["S_coef"][2]
    B = Cq1.shape[0]
    nV = s * n
    Cq_s = np.ascontiguousarray(Cq1.transpose(1, 0, 2))  # (s-1, B, n)
    Gh_s = np.ascontiguousarray(Gh1.transpose(1, 0, 2))
    Sinv_s = np.ascontiguousarray(Sinv.transpose(1, 2, 0))  # (s-1, s-1, B)

    def solve(F):
        u = F[:, :nV].reshape(B, s, n).transpose(1, 0, 2).copy()  # (s, B, n), updated below
        if not identity:
            u = tim(u)
        y = fixed_order_product(ha1, u.reshape(s, B * n)).reshape(s - 1, B, n)
        rhs = F[:, nV:].T - np.einsum("ibn,ibn->ib", Cq_s, y)  # (s-1, B)
        dL = np.einsum("ikb,kb->ib", Sinv_s, rhs)
        corr = fixed_order_product(hah1, (Gh_s * dL[..., None]).reshape(s - 1, B * n)).reshape(
            s, B, n)
        out = np.empty(F.shape)  # dV = u + corr written stage-major into the (B, N) result
        np.add(u, corr, out=out[:, :nV].reshape(B, s, n).transpose(1, 0, 2))
        out[:, nV:] = dL.T
        return out

    return solve


def _small_inverse(S: Array) -> Array:
    """Inverse of a stack of small square matrices: closed forms (adjugate over
    determinant) for sizes 1-3, with the entries as contiguous ``(...)`` arrays: for a
    batch of 10^4 several times cheaper than ``np.linalg.inv``'s per-matrix LAPACK calls;
    ``np.linalg.inv`` for larger sizes.

    A singular matrix (determinant zero or not finite, or below ``1e-14`` times the
    product of its row norms) gets a NaN inverse, so the solve built on it returns NaN for
    that batch member only and the root finder sends that member alone to its fallback
    (issue 18: per-member decisions).
    """
    k = S.shape[-1]
    if k > 3:
        try:
            return np.linalg.inv(S)
        except np.linalg.LinAlgError:
            out = np.full(S.shape, np.nan)
            for i in np.ndindex(S.shape[:-2]):
                try:
                    out[i] = np.linalg.inv(S[i])
                except np.linalg.LinAlgError:
                    pass
            return out
    d = S.ndim  # (explicit transposes: np.moveaxis costs more than the arithmetic here)
    E = S.transpose(d - 2, d - 1, *range(d - 2)).copy()  # E[i, j] = S[..., i, j], contiguous
    if k == 1:
        det = E[0, 0]
        adj = np.ones_like(E)
    elif k == 2:
        det = E[0, 0] * E[1, 1] - E[0, 1] * E[1, 0]
        adj = np.empty_like(E)  # written in place (no stacked temporaries)
        adj[0, 0] = E[1, 1]
        adj[0, 1] = -E[0, 1]
        adj[1, 0] = -E[1, 0]
        adj[1, 1] = E[0, 0]
    else:
        adj = np.empty_like(E)  # adj[j, i] = cofactor C_ij
        for i in range(3):
            i1, i2 = (i + 1) % 3, (i + 2) % 3
            for j in range(3):
                j1, j2 = (j + 1) % 3, (j + 2) % 3
                adj[j, i] = E[i1, j1] * E[i2, j2] - E[i1, j2] * E[i2, j1]
        det = E[0, 0] * adj[0, 0] + E[0, 1] * adj[1, 0] + E[0, 2] * adj[2, 0]
    norms = np.sqrt((E * E).sum(axis=1))  # the row norms (k, ...)
    scale = norms[0]
    for i in range(1, k):  # their product, in np.prod's order
        scale = scale * norms[i]
    singular = ~(np.abs(det) > 1e-14 * scale) | ~np.isfinite(det)
    if singular.any():
        det = np.where(singular, np.nan, det)
    adj /= det
    return adj.transpose(*range(2, d), 0, 1)


def lagrangian_output(x, q, p, lam, h, a, b, ahat, model: StageModel, implicit: bool = False):
    """Node values after a converged solve: ``(q_{k+1}, p_{k+1}, lambda_{k+1}, v^s_k or None)``.

    ``q_{k+1} = q_k + h b.V`` and ``p_{k+1} = p_k + h b.W`` (14a, with bhat = b);
    ``lambda_{k+1} = Lambda^s``. The last entry is the implicit ``v_k^s`` (= ``v_{k+1}`` by
    H3), or None in the explicit path.
    """
    _R, _J, ev = lagrangian_evaluation(x, q, p, lam, h, a, ahat, model, implicit, b=b)
    u = ev.x_extra[..., -model.n :] if implicit else None
    return ev.q1, ev.p1, ev.Lam[..., -1, :], u


# --------------------------------------------------------------------------------------
# Hamiltonian form (eq. 15): the engine's Hamiltonian unknowns (Q^i, P^i) with the hooks of
# NonholonomicHooks(unknowns="QP"). H derived from L through v = FL^{-1}(q, p):
#   D2H = v, D1H = -D1L(q, v), flat_H(D2Psi) = phi_v^T; the engine's W^i = D1L + phi_v^T
#   Lambda^i is -(D1H - flat_H(D2Psi)^T Lambda^i) of (15c).


def hamiltonian_evaluation(x, q, p, lam, h, a, ahat, model: StageModel, jacobian: bool = False,
                           b=None):
    """Residual, Jacobian (or None) and :class:`StageEvaluation` of the Hamiltonian-form step
    (paper eq. (15), App. E): :func:`chetaev.discrete_lagrangian.prk_residual` on the
    Hamiltonian unknowns ``x = [Q, P, Lambda^2..s]`` with :class:`NonholonomicHooks`
    (``unknowns="QP"``, ``Lambda^1 = lam``). Arguments as in :func:`hamiltonian_residual`."""
    hooks = NonholonomicHooks(model, a.shape[0], False, "iiia", unknowns="QP")
    return prk_residual(np.asarray(x), np.asarray(q), np.asarray(p), h,
                        _coefficients(a, ahat, b), model, hooks,
                        np.asarray(lam)[..., None, :], jacobian)


def hamiltonian_residual(x, q, p, lam, h, a, ahat, model: StageModel) -> Array:
    """Residual of the Hamiltonian-form step (paper eq. (15), App. E), the engine's
    (:func:`hamiltonian_evaluation`); layout ``[E1 (s n) | E2 (s n) | E3 ((s-1) m)]``."""
    return hamiltonian_evaluation(x, q, p, lam, h, a, ahat, model)[0]


def hamiltonian_jacobian(x, q, p, lam, h, a, ahat, model: StageModel) -> Array:
    """Analytic Jacobian of :func:`hamiltonian_residual`, shape ``(..., N, N)`` (the
    engine's, :func:`hamiltonian_evaluation`)."""
    return hamiltonian_evaluation(x, q, p, lam, h, a, ahat, model, jacobian=True)[1]


def hamiltonian_output(x, q, p, lam, h, a, b, ahat, model: StageModel):
    """``(q_{k+1}, p_{k+1}, lambda_{k+1})`` after a converged Hamiltonian-form solve (15a):
    the engine's node values ``q_k + h sum_j b_j V^j``, ``p_k + h sum_j b_j W^j`` and
    ``Lambda^s``."""
    _R, _J, ev = hamiltonian_evaluation(x, q, p, lam, h, a, ahat, model, b=b)
    return ev.q1, ev.p1, ev.Lam[..., -1, :]
