"""The Lie-group nonholonomic PRK (RKMK) step as hooks of the one Lie PRK engine.

Paper high-order-nonholonomic §6.4 and App. F, written in the inverse-free form of the
homogeneous-spaces paper's eq. (3c) and §4.2. The engine
(:func:`chetaev.discrete_lagrangian.lie_prk_residual`, ``core/_lie_prk.py``) writes the
stage quantities and the boxed equations R1 (with ξ = Ξˢ: Lobatto IIIA, H1–H3); the
nonholonomic terms are :class:`LieNonholonomicHooks`. Unknowns per step: stage algebra
velocities H¹..Hˢ ∈ 𝔤 (``Ξ̇`` in the homogeneous-spaces paper), multipliers Λ²..Λˢ (Λ¹ given
by the multiplier rule; all of Λ¹..Λˢ for the ``"weighted_sum"`` rule) and, for a general ℓ
in the Lagrangian form, η²..ηˢ. With Ξⁱ = h Σⱼ aᵢⱼ Hʲ, Gⁱ = g_k τ(Ξⁱ), Dᵢ = d^Lτ_{Ξⁱ}::

    Ωⁱ = Dᵢ Hⁱ                                     stage body velocity
    Fⁱ = L*_{Gⁱ} D₁ℓ(Gⁱ, Ωⁱ) + D₂φ(Gⁱ, Ωⁱ)ᵀ Λⁱ     force in the Gⁱ frame (hook force)
         (+ F(Gⁱ, Ωⁱ, u), the external left-trivialized force of a forced system)
    Π₀ⁱ = D₂ℓ(Gⁱ, Ωⁱ),  Πⁱ = Dᵢᵀ Π₀ⁱ,  Nⁱ = Dᵢᵀ Fⁱ + J^L(Ξⁱ, Hⁱ)ᵀ Π₀ⁱ
    Yʲ = Ad*_{τ(−Ξʲ)} Fʲ                                                   (engine's Ñʲ)
    μ_{k+1} = Ad*_{τ(ξ)} [μ_k + h Σⱼ bⱼ Yʲ]                                     (App. F; (3d))
    R1ᵢ = Πⁱ − D_sᵀ μ_{k+1} + h Σⱼ (bⱼ aⱼᵢ / bᵢ) Nʲ = 0,        i = 1..s        (App. F; boxed (3c))
    Mⁱ = Ad*_{τ(Ξⁱ)} [μ_k + h Σⱼ aᵢⱼ Yʲ]                  (IIIA weights, eq. 5 of the note)
    R2ᵢ = φ(Gⁱ, ηⁱ) = 0,                                       i = 2..s       (hook)
    R3 = Σⱼ bⱼ Λʲ = 0                                          ("weighted_sum" rule only)
    R4ᵢ = D₂ℓ(Gⁱ, ηⁱ) − Mⁱ = 0,                                i = 2..s (general ℓ only)

For a mechanical ℓ = ½ ηᵀ𝕀η − V(g) the stage Legendre maps are inverted exactly (Π₀ⁱ = 𝕀Ωⁱ,
ηⁱ = 𝕀⁻¹Mⁱ); for a general trivialized ℓ the inner-stage velocities η²..ηˢ are extra unknowns
with their own stage Legendre equations (as in the paper's App. D when D₂L cannot be inverted).

The Jacobian is the engine's chain rule (``stage_derivatives``) plus the hooks' derivatives
(``force_jacobian``, ``equations_jacobian``); every group map comes from
``chetaev.liegroups`` (``retraction(G, kind).kernels``), the model's derivatives from the
system (analytic where the system provides them).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from chetaev.discrete_lagrangian import (
    NewtonOptions,
    NewtonResult,
    PRKCoefficients,
    SystemInterface,
    lie_prk_residual,
    lie_stage_jacobian,
    newton_solve,
)

__all__: list[str] = []

_F2 = Callable[[np.ndarray, np.ndarray], np.ndarray]


@attrs.frozen(eq=False)
class _LieModel:
    """What the step needs from a constrained trivialized Lagrangian system.

    All callables broadcast over leading axes; ``G`` has the group's element shape, η and Ω
    are ``(..., d)`` and Λ is ``(..., m)``. Derivatives "in g" are left-trivialized.

    Mechanical systems (ℓ = ½ηᵀ𝕀η − V(g)) set ``inertia``, ``inertia_inv``, ``force`` and
    ``force_jac``; the stage Legendre maps are then inverted exactly. General trivialized
    Lagrangians leave ``inertia`` None and set ``D1L, D2L`` (L*_g D₁ℓ, D₂ℓ) and the blocks
    ``D11L, D12L, D21L, D22L``; the inner-stage velocities ηⁱ (i = 2..s) then become unknowns
    with the equations D₂ℓ(Gⁱ, ηⁱ) = Mⁱ.
    """

    d: int
    m: int
    phi: _F2  # φ(g, η) → (..., m)
    phi_v: _F2  # D₂φ → (..., m, d)
    phi_g: _F2  # L*_g D₁φ → (..., m, d)
    inertia: np.ndarray | None = None
    inertia_inv: np.ndarray | None = None
    force: Callable[[np.ndarray], np.ndarray] | None = None  # L*_g D₁ℓ(g) → (..., d)
    force_jac: Callable[[np.ndarray], np.ndarray] | None = None  # (..., d, d)
    D1L: _F2 | None = None
    D2L: _F2 | None = None
    D11L: _F2 | None = None
    D12L: _F2 | None = None
    D21L: _F2 | None = None
    D22L: _F2 | None = None
    # derivatives of the constraint force D₂φ(g, Ω)ᵀΛ in g and in Ω; None means zero
    cforce_g: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
    cforce_v: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None

    @property
    def general(self) -> bool:
        """True for a general (non-mechanical) trivialized Lagrangian."""
        return self.inertia is None


class _GroupOps:
    """The group and retraction maps of the step, all from ``chetaev.liegroups``.

    A thin view of ``retraction(group, kind).kernels`` (liegroups' unchecked maps for Newton
    loops: the step's arrays are built from checked inputs), broadcasting over batch and
    stage axes. ``d`` is the algebra dimension; conventions of ``liegroups`` (high-order
    paper §6.1, homogeneous-spaces paper §2): d/dε τ(ξ+εδ)|₀ = τ(ξ)·hat(dL(ξ)δ).

    Parameters
    ----------
    group
        A ``chetaev.liegroups`` group (``SO3``, ``SE2``, ``Rn(n)``, ``Product(...)``, ...).
    kind
        ``"cayley"`` or ``"exp"``.
    """

    def __init__(self, group: Any, kind: str) -> None:
        from chetaev.liegroups import retraction

        self.group = group
        self.retraction = retraction(group, kind)
        k = self.retraction.kernels
        self.compose = k.compose  # group product g h (broadcasting)
        self.tau = k.tau  # τ(ξ), elements (..., *group.shape)
        self.Ad_pair = k.Ad_pair  # (Ad(T), Ad(T⁻¹)ᵀ = Ad*_{T⁻¹}), each (..., d, d)
        self.dL, self.dL_tensor = k.dL, k.dL_tensor
        # S[..., c, e] = Σ_{a,b} ∂T[..., b, a, c]/∂ξ_e v_a p_b = ∂_ξ(J^L(ξ, v)ᵀ p), from (ξ, v, p)
        self.dtensor_contract = k.dL_deriv_T_deriv
        self.d = int(group.dim)
        self.elem_shape = tuple(group.shape)
        self.elem_ndim = len(self.elem_shape)

    def dL_and_tensor(self, xi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(dL(ξ), T)`` with ``T[..., b, a, c] = ∂ dL(ξ)_{ba} / ∂ξ_c`` (``dL_tensor``)."""
        return self.dL(xi), self.dL_tensor(xi)

class LieNonholonomicHooks:
    """The nonholonomic terms of App. F as hooks of the Lie PRK engine
    (:func:`chetaev.discrete_lagrangian.lie_prk_residual`, which writes Ξⁱ, Gⁱ, Ωⁱ, Ñʲ,
    μ_{k+1} and the boxed equations R1 of (3c)); these hooks add

    - the force D₂φ(Gⁱ, Ωⁱ)ᵀ Λⁱ in Fⁱ;
    - R2ᵢ = φ(Gⁱ, ηⁱ), i = 2..s, at the IIIA-weighted momenta Mⁱ = Ad*_{τ(Ξⁱ)} [μ_k +
      h Σⱼ aᵢⱼ Ñʲ] (eq. 5 of the note), with ηⁱ = 𝕀⁻¹Mⁱ (mechanical), ηⁱ = Fℓ⁻¹(Gⁱ, Mⁱ)
      (App. G, ``legendre_inv``) or unknowns with R4ᵢ = D₂ℓ(Gⁱ, ηⁱ) − Mⁱ (general ℓ);
    - R3 = Σⱼ bⱼ Λʲ for the ``"weighted_sum"`` rule (all Λⁱ free), else Λ¹ given;
    - the analytic derivatives of all of these (``force_jacobian``, ``equations_jacobian``).

    An external force (issue 20) wraps these hooks in
    :class:`~chetaev.discrete_lagrangian.core._forcing.ForcedLieStageHooks`, which adds the
    left-trivialized F(Gⁱ, Ωⁱ, u) to Fⁱ (``_Step``'s ``forcing``).

    ``ev.extra`` receives ``"M"`` (Mⁱ, all stages) and ``"eta"`` (ηⁱ, i = 2..s).
    """

    def __init__(self, model: _LieModel, s: int, weighted: bool,
                 legendre_inv: Callable[[np.ndarray, np.ndarray], np.ndarray] | None) -> None:
        self.model, self.s, self.m = model, s, model.m
        self.weighted = weighted
        self.free = (True,) * s if weighted else (False,) + (True,) * (s - 1)
        self.implicit = model.general and legendre_inv is None
        self.legendre_inv = legendre_inv
        self.n_extra = (s - 1) * model.d if self.implicit else 0
        self._memo: tuple = (None, None)

    def force(self, G, Omega, Lam):
        A_c = self.model.phi_v(G, Omega)  # (..., s, m, d)
        self._memo = (G, A_c)
        return np.einsum("...ma,...m->...a", A_c, Lam)

    def analytic_stage_jacobian(self) -> bool:
        """The model's derivatives are exact (closed forms of the system and constraint)."""
        return True

    def force_jacobian(self, ev, zeta, dOm, dLam):
        """δ[D₂φᵀΛ] = (∂_g D₂φᵀΛ) ζ + (∂_η D₂φᵀΛ) δΩ + D₂φᵀ δΛ."""
        model = self.model
        G, Om, Lam = ev.G, ev.Omega, ev.Lam
        A_c = self._memo[1] if self._memo[0] is G else model.phi_v(G, Om)
        out = np.swapaxes(A_c, -1, -2) @ dLam
        if model.cforce_g is not None:
            out = out + model.cforce_g(G, Om, Lam) @ zeta
        if model.cforce_v is not None:
            out = out + model.cforce_v(G, Om, Lam) @ dOm
        return out

    def _inner(self, ev):
        return ev.G[..., 1:, :, :] if ev.G.ndim - ev.Omega.ndim == 1 else ev.G[..., 1:, :]

    def equations(self, ev):
        """``[R2 ((s−1)m), R3 (m, weighted_sum only), R4 ((s−1)d, general ℓ only)]``."""
        model, s, h = self.model, self.s, ev.h
        a = ev.coeffs.a
        inner = ev.mu[..., None, :] + h * np.einsum("ij,...jd->...id", a, ev.Nt)
        M = np.einsum("...ba,...b->...a", ev.AdT, inner)
        Gi = self._inner(ev)
        Mi = M[..., 1:, :]
        if self.implicit:
            eta = ev.x_extra.reshape((*ev.x_extra.shape[:-1], s - 1, model.d))
        elif model.general:
            eta = self.legendre_inv(Gi, Mi)  # App. G: ηⁱ = D₂H(Gⁱ, Mⁱ)
        else:
            eta = Mi @ model.inertia_inv.T
        ev.extra["M"], ev.extra["eta"] = M, eta
        R2 = model.phi(Gi, eta)
        parts = [R2.reshape((*R2.shape[:-2], -1))]
        if self.weighted:
            parts.append(np.einsum("j,...jm->...m", ev.coeffs.b, ev.Lam))
        if self.implicit:
            R4 = model.D2L(Gi, eta) - Mi
            parts.append(R4.reshape((*R4.shape[:-2], -1)))
        return np.concatenate(parts, axis=-1)

    def equations_jacobian(self, ev, D):
        """δMⁱ = ad*_{ζⁱ} Mⁱ + Ad*_{τ(Ξⁱ)} h Σⱼ aᵢⱼ δÑʲ; δR2 = ∂_gφ ζ + ∂_ηφ δη with
        δη = 𝕀⁻¹δM, (D₂₂ℓ)⁻¹(δM − D₂₁ℓ ζ) (App. G) or the unit variation (unknown η)."""
        model, s, h = self.model, self.s, ev.h
        a, b = ev.coeffs.a, ev.coeffs.b
        M, eta = ev.extra["M"], ev.extra["eta"]
        zeta = D["zeta"]
        n = zeta.shape[-1]
        dinner = h * np.einsum("ij,...jpU->...ipU", a, D["dNt"])
        dM = D["P"](M) @ zeta + np.swapaxes(ev.AdT, -1, -2) @ dinner
        Gi = self._inner(ev)
        zi, dMi = zeta[..., 1:, :, :], dM[..., 1:, :, :]
        if self.implicit:
            deta = D["dX"].reshape(s - 1, model.d, n)
        elif model.general:
            deta = np.linalg.solve(model.D22L(Gi, eta), dMi - model.D21L(Gi, eta) @ zi)
        else:
            deta = model.inertia_inv @ dMi
        dR2 = model.phi_g(Gi, eta) @ zi + model.phi_v(Gi, eta) @ deta
        rows = [dR2.reshape((*dR2.shape[:-3], (s - 1) * self.m, n))]
        if self.weighted:
            row = np.einsum("j,jmU->mU", b, D["dLam"])  # constant: broadcast to the batch
            rows.append(np.broadcast_to(row, (*rows[0].shape[:-2], *row.shape)))
        if self.implicit:
            dR4 = model.D21L(Gi, eta) @ zi + model.D22L(Gi, eta) @ deta - dMi
            rows.append(dR4.reshape((*dR4.shape[:-3], (s - 1) * model.d, n)))
        return np.concatenate(rows, axis=-2)


_VIEWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def engine_view(model: _LieModel, group: Any) -> SystemInterface:
    """The engine's :class:`SystemInterface` of the model's Lagrangian (cached per model): for
    a mechanical ℓ, L*_g D₁ℓ = force(g), D₁₁ℓ = force_jac(g) and 𝕀; otherwise the model's
    blocks."""
    hit = _VIEWS.get(model)
    if hit is None or hit.group is not group:
        d = int(group.dim)
        if model.general:
            hit = SystemInterface(n=d, group=group, system=model, D1L=model.D1L,
                                  D2L=model.D2L, D11L=model.D11L, D12L=model.D12L,
                                  D21L=model.D21L, D22L=model.D22L,
                                  has_second_derivatives=True,
                                  analytic_second_derivatives=True)
        else:
            force, force_jac = model.force, model.force_jac
            inertia = np.asarray(model.inertia, dtype=float)
            hit = SystemInterface(n=d, group=group, system=model,
                                  D1L=lambda G, Om: force(G),
                                  D2L=lambda G, Om: Om @ model.inertia.T,
                                  D11L=lambda G, Om: force_jac(G), inertia=model.inertia,
                                  inertia_inv=np.linalg.inv(inertia),
                                  analytic_second_derivatives=True)
        _VIEWS[model] = hit
    return hit


def _coefficients(a: np.ndarray, b: np.ndarray) -> PRKCoefficients:
    """The engine's coefficients of a Lobatto IIIA tableau (only a, b enter the step),
    one object per tableau (the engine caches per-pair data on it)."""
    return _coefficients_cached(a.tobytes(), b.tobytes(), b.shape[0])


@functools.lru_cache(maxsize=32)
def _coefficients_cached(a: bytes, b: bytes, s: int) -> PRKCoefficients:
    A = np.frombuffer(a, dtype=float).reshape(s, s).copy()
    B = np.frombuffer(b, dtype=float).copy()
    for arr in (A, B):
        arr.setflags(write=False)
    return PRKCoefficients(a=A, b=B, c=A.sum(axis=1), ahat=A, bhat=B, name="Lobatto IIIA")


class _Step:
    """One step's residual problem on the engine (built once per step)."""

    def __init__(self, *, ops, model, a, b, h, g0, mu0, lam1, legendre_inv=None,
                 forcing=None):
        s = b.shape[0]
        self.args = (g0, mu0, h, _coefficients(a, b), engine_view(model, ops.group),
                     ops.retraction)
        self.hooks = LieNonholonomicHooks(model, s, lam1 is None, legendre_inv)
        if forcing is not None:  # the external stage force (issue 20): wraps the hooks
            self.hooks = forcing(self.hooks)
        self.lam_fixed = None
        if lam1 is not None:
            self.lam_fixed = np.broadcast_to(lam1[..., None, :], (*lam1.shape[:-1], s, model.m))

    def __call__(self, x, jacobian):
        r, ev = lie_prk_residual(x, *self.args, self.hooks, self.lam_fixed)
        J = None
        if jacobian:
            J = lie_stage_jacobian(ev, self.args[4], self.args[5], self.hooks)
        aux = {"G": ev.G, "mu1": ev.mu1, "eta": ev.extra["eta"], "Lam": ev.Lam,
               "M": ev.extra["M"], "ev": ev}
        return r, J, aux


def lie_nh_residual(
    x: np.ndarray,
    *,
    ops: Any,
    model: _LieModel,
    a: np.ndarray,
    b: np.ndarray,
    h: float,
    g0: np.ndarray,
    mu0: np.ndarray,
    lam1: np.ndarray | None,
    jacobian: bool = True,
    legendre_inv: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray | None, dict[str, np.ndarray]]:
    """Residual (and Jacobian) of one Lie-group NH-PRK step: the engine's residual with
    :class:`LieNonholonomicHooks`.

    Parameters
    ----------
    x
        ``(..., N)`` unknowns: ``H`` (s·d) then the free multipliers: Λ²..Λˢ when ``lam1`` is
        given (rules "carry" and "zero_first"), Λ¹..Λˢ when ``lam1`` is None ("weighted_sum",
        which adds the equation Σ bⱼΛʲ = 0), then η²..ηˢ for a general ℓ (Lagrangian form).
    ops, model
        :class:`_GroupOps` and :class:`_LieModel`.
    a, b
        Lobatto IIIA coefficients (H1–H3 assumed: a₁ⱼ = 0, aₛⱼ = bⱼ).
    h
        Step size.
    g0, mu0, lam1
        ``g_k`` (element shape), ``μ_k`` ``(..., d)``, and Λ¹ ``(..., m)`` or None.
    legendre_inv
        App. G (Hamiltonian) form for a general ℓ: ``(Gⁱ, Mⁱ) ↦ ηⁱ = Fℓ⁻¹(Gⁱ, Mⁱ) = D₂H``
        eliminates the inner-stage velocities (no unknowns ηⁱ, no equations R4); their
        variations follow from the Legendre map, δη = (D₂₂ℓ)⁻¹(δM − D₂₁ℓ ζ).

    Returns
    -------
    r, J, aux
        ``r`` ``(..., N)``; ``J`` ``(..., N, N)`` or None; ``aux`` with the stage elements ``G``,
        ``mu1``, the IIIA stage velocities ``eta`` (``(..., s − 1, d)``), ``Lam``
        (``(..., s, m)``) and the IIIA momenta ``M``.
    """
    step = _Step(ops=ops, model=model, a=a, b=b, h=h, g0=g0, mu0=mu0, lam1=lam1,
                 legendre_inv=legendre_inv)
    return step(x, jacobian)


def continuous_multiplier(
    ops: Any, model: _LieModel, g: np.ndarray, eta: np.ndarray
) -> np.ndarray:
    """Consistent continuous multiplier (high-order paper §6, Thm 5.1's λ₀)::

        λ = −(A 𝕀⁻¹ Aᵀ)⁻¹ [ φ̇_g + A 𝕀⁻¹ (ad*_η 𝕀η + F(g)) ],   A = D₂φ(g, η),
        φ̇_g = d/dε φ(g τ(εη), η)|₀  (left-trivialized derivative along η).

    Mechanical models only (the method itself uses ``ConstrainedSystem.multiplier``).
    """
    A = model.phi_v(g, eta)
    dphig = model.phi_g(g, eta)
    phidot = np.einsum("...md,...d->...m", dphig, eta)
    mu = eta @ model.inertia.T
    P = engine_view(model, ops.group).coadjoint_matrix
    adstar = np.einsum("...ad,...d->...a", P(mu), eta)  # ad*_η μ = ad(η)ᵀ μ
    rhs = adstar + model.force(g)
    AI = A @ model.inertia_inv.T
    Cm = AI @ np.swapaxes(A, -1, -2)
    z = phidot + np.einsum("...md,...d->...m", AI, rhs)
    return -np.linalg.solve(Cm, z[..., None])[..., 0]


def lie_nh_newton(
    x0: np.ndarray,
    *,
    tol: float,
    max_iter: int,
    check_rank: bool = False,
    **kwargs: Any,
) -> tuple[np.ndarray, dict[str, np.ndarray], NewtonResult]:
    """Solve :func:`lie_nh_residual` = 0 with the one root finder (batched).

    Simplified Newton (``newton_solve``) with the analytic Jacobian formed at the first
    iterate and refreshed at the current one when the residual is reduced less than
    20-fold per iteration (DESIGN.md "Performance design": factor once, keep while
    convergence is fast), iterated to the round-off floor (``polish=0.1``: on while the
    residual still contracts 10-fold, so a converged step sits at round-off level and the
    first integrals of §5.5 are kept to ~1e-14 per step); the scale of the tolerance is
    ``1 + max|μ_k| + max|x_0|`` per batch entry.

    Returns ``(x, aux, result)``: ``aux`` of the residual at ``x``, and the
    ``NewtonResult``. With ``check_rank`` the Jacobian's smallest relative singular value
    is checked at the first iterate and at the solution (``result.sigma_min``; an entry
    below 1e-10 is not converged): the ``"weighted_sum"`` rule on a homogeneous-space lift
    has a one-parameter family of solutions by a discrete Noether identity (see the
    homogeneous-spaces theory page), so the Jacobian is singular on it even when it is not
    at the guess.
    """
    x0 = np.asarray(x0, dtype=float)
    last: dict[str, Any] = {}
    step = _Step(**kwargs)

    def fun_jac(x, want):
        r, J, aux = step(x, want)
        last["x"], last["aux"] = x, aux
        return r, J

    scale = 1.0 + np.max(np.abs(kwargs["mu0"]), axis=-1) + np.max(np.abs(x0), axis=-1)
    options = NewtonOptions(tol=tol, max_iter=max_iter, simplified=True, refresh_rate=0.05)
    res = newton_solve(None, x0, options=options, scale=scale, fun_jac=fun_jac,
                       polish=0.1, rank_rtol=RANK_RTOL if check_rank else None)
    if last.get("x") is res.x:
        aux = last["aux"]
    else:
        _, _, aux = step(res.x, False)
    return res.x, aux, res


RANK_RTOL = 1e-10  # relative smallest singular value below which the step matrix is singular
