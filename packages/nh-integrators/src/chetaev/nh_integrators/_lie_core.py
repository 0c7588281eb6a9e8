"""Per-step residual and analytic Jacobian of the Lie-group nonholonomic PRK (RKMK) method.

Pure functions of arrays; the method class lives in ``_lie_prk``. Equations: paper
high-order-nonholonomic §6.4 and App. F, written in the inverse-free form of the
homogeneous-spaces paper's eq. (3c) and §4.2, which is the same
map (apply (d^Lτ_ξ)ᵀ to App. F's first equation and use d^Lτ⁻¹_{−ξ} = d^Lτ⁻¹_ξ Ad⁻¹_{τ(ξ)}).

Unknowns per step: stage algebra velocities H¹..Hˢ ∈ 𝔤 (``Ξ̇`` in the homogeneous-spaces paper)
and multipliers Λ²..Λˢ (Λ¹ given by the multiplier rule; all of Λ¹..Λˢ for the
``"weighted_sum"`` rule). With Ξⁱ = h Σⱼ aᵢⱼ Hʲ, ξ = Ξˢ, Gⁱ = g_k τ(Ξⁱ), Dᵢ = d^Lτ_{Ξⁱ}::

    Ωⁱ = Dᵢ Hⁱ                                     stage body velocity
    Fⁱ = L*_{Gⁱ} D₁ℓ(Gⁱ, Ωⁱ) + D₂φ(Gⁱ, Ωⁱ)ᵀ Λⁱ     force in the Gⁱ frame
    Π₀ⁱ = D₂ℓ(Gⁱ, Ωⁱ),  Πⁱ = Dᵢᵀ Π₀ⁱ,  Nⁱ = Dᵢᵀ Fⁱ + J^L(Ξⁱ, Hⁱ)ᵀ Π₀ⁱ
    Yʲ = Ad*_{τ(−Ξʲ)} Fʲ
    μ_{k+1} = Ad*_{τ(ξ)} [μ_k + h Σⱼ bⱼ Yʲ]                                     (App. F; (3d))
    R1ᵢ = Πⁱ − D_sᵀ μ_{k+1} + h Σⱼ (bⱼ aⱼᵢ / bᵢ) Nʲ = 0,        i = 1..s        (App. F; boxed (3c))
    Mⁱ = Ad*_{τ(Ξⁱ)} [μ_k + h Σⱼ aᵢⱼ Yʲ]                  (IIIA weights, eq. 5 of the note)
    R2ᵢ = φ(Gⁱ, ηⁱ) = 0,                                       i = 2..s
    R3 = Σⱼ bⱼ Λʲ = 0                                          ("weighted_sum" rule only)
    R4ᵢ = D₂ℓ(Gⁱ, ηⁱ) − Mⁱ = 0,                                i = 2..s (general ℓ only)

For a mechanical ℓ = ½ ηᵀ𝕀η − V(g) the stage Legendre maps are inverted exactly (Π₀ⁱ = 𝕀Ωⁱ,
ηⁱ = 𝕀⁻¹Mⁱ); for a general trivialized ℓ the inner-stage velocities η²..ηˢ are extra unknowns
with their own stage Legendre equations (as in the paper's App. D when D₂L cannot be inverted).

The Jacobian is assembled by the chain rule with every stage variation stored as an array
``(..., s, p, U)`` (U = number of unknown columns before the rule's column selection). The
retraction, its trivialized tangent dL, the derivative tensor of dL (J^L) and the second
derivative ∂_Ξ(J^L(Ξ, H)ᵀΠ₀) all come from ``chetaev.liegroups`` (``retraction(G, kind)``:
``dL``, ``dL_tensor``, ``dL_deriv_T_deriv``, exact for every group and for products;
:class:`_GroupOps`),
and the model's derivatives come from the system (analytic where the system provides them).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from chetaev.discrete_lagrangian import NewtonOptions, NewtonResult, newton_solve

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
        self.ad_basis = np.asarray(group.ad(np.eye(self.d)), dtype=float)  # ad(e_k): (d, d, d)

    def P(self, f: np.ndarray) -> np.ndarray:
        """Matrix of ζ ↦ ad(ζ)ᵀ f = ad*_ζ f, shape ``(..., d, d)``."""
        return np.einsum("kba,...b->...ak", self.ad_basis, f)

    def dL_and_tensor(self, xi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(dL(ξ), T)`` with ``T[..., b, a, c] = ∂ dL(ξ)_{ba} / ∂ξ_c`` (``dL_tensor``)."""
        return self.dL(xi), self.dL_tensor(xi)

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
    """Residual (and Jacobian) of one Lie-group NH-PRK step.

    Parameters
    ----------
    x
        ``(..., N)`` unknowns: ``H`` (s·d) then the free multipliers: Λ²..Λˢ when ``lam1`` is
        given (rules "carry" and "zero_first"), Λ¹..Λˢ when ``lam1`` is None ("weighted_sum",
        which adds the equation Σ bⱼΛʲ = 0).
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
        ``mu1``, the IIIA stage velocities ``eta`` (``(..., s, d)``) and ``Lam`` (``(..., s, m)``).
    """
    s = b.shape[0]
    d, m = model.d, model.m
    weighted = lam1 is None
    general = model.general
    implicit_eta = general and legendre_inv is None
    nE = (s - 1) * d if implicit_eta else 0
    batch = x.shape[:-1]
    nx = x.shape[-1]
    H = x[..., : s * d].reshape((*batch, s, d))
    xl = x[..., s * d : nx - nE]
    if weighted:
        Lam = xl.reshape((*batch, s, m))
    else:
        Lam = np.concatenate(
            [np.broadcast_to(lam1, (*batch, m))[..., None, :], xl.reshape((*batch, s - 1, m))],
            axis=-2,
        )
    Xi = h * np.einsum("ij,...jd->...id", a, H)
    T = ops.tau(Xi)  # (..., s, *elem)
    Gx = np.expand_dims(g0, -1 - ops.elem_ndim)
    G = ops.compose(Gx, T)
    D, Tns = ops.dL(Xi), ops.dL_tensor(Xi)  # (..., s, d, d), (..., s, d, d, d)
    J = np.einsum("...bac,...a->...bc", Tns, H)  # J^L(Ξ, H)
    Om = np.einsum("...ij,...j->...i", D, H)
    A_c = model.phi_v(G, Om)  # (..., s, m, d)
    if general:
        F0, Pi0 = model.D1L(G, Om), model.D2L(G, Om)
    else:
        F0, Pi0 = model.force(G), Om @ model.inertia.T
    F = F0 + np.einsum("...ma,...m->...a", A_c, Lam)
    Pi = np.einsum("...ba,...b->...a", D, Pi0)
    AdT, AdTinvT = ops.Ad_pair(T)  # Ad(τ(Ξ)) and Ad*_{τ(−Ξ)} = Ad(τ(Ξ)⁻¹)ᵀ, (..., s, d, d)
    Y = np.einsum("...ij,...j->...i", AdTinvT, F)
    nu = mu0 + h * np.einsum("j,...jd->...d", b, Y)
    mu1 = np.einsum("...ba,...b->...a", AdT[..., -1, :, :], nu)
    C = b[None, :] * a.T / b[:, None]  # C[i, j] = b_j a_ji / b_i
    N = np.einsum("...ba,...b->...a", D, F) + np.einsum("...bc,...b->...c", J, Pi0)
    Ds = D[..., -1, :, :]
    DsT_mu1 = np.einsum("...ba,...b->...a", Ds, mu1)
    R1 = Pi - DsT_mu1[..., None, :] + h * np.einsum("ij,...jd->...id", C, N)
    inner = mu0[..., None, :] + h * np.einsum("ij,...jd->...id", a, Y)
    Mst = np.einsum("...ba,...b->...a", AdT, inner)
    Gi = G[..., 1:, :, :] if ops.elem_ndim == 2 else G[..., 1:, :]
    if implicit_eta:
        eta = x[..., nx - nE :].reshape((*batch, s - 1, d))  # ηⁱ, i = 2..s (unknowns)
    elif general:
        eta = legendre_inv(Gi, Mst[..., 1:, :])  # App. G: ηⁱ = D₂H(Gⁱ, Mⁱ)
    else:
        eta = Mst[..., 1:, :] @ model.inertia_inv.T
    R2 = model.phi(Gi, eta)
    parts = [R1.reshape((*batch, s * d)), R2.reshape((*batch, (s - 1) * m))]
    if weighted:
        parts.append(np.einsum("j,...jm->...m", b, Lam))
    if implicit_eta:
        parts.append((model.D2L(Gi, eta) - Mst[..., 1:, :]).reshape((*batch, nE)))
    r = np.concatenate(parts, axis=-1)
    aux = {"G": G, "mu1": mu1, "eta": eta, "Lam": Lam, "M": Mst}
    if not jacobian:
        return r, None, aux

    # ---------------------------------------------------------------- Jacobian (chain rule)
    U = s * d + s * m + nE
    dH, dLam, dE = _unit_variations(s, d, m, nE)
    dXi = h * np.einsum("ik,kpU->ipU", a, dH)
    zeta = D @ dXi  # left-trivialized variation of Gⁱ (and of τ(Ξⁱ))
    dOm = D @ dH + J @ dXi
    if general:
        dPi0 = model.D22L(G, Om) @ dOm + model.D21L(G, Om) @ zeta
        Fg = model.D11L(G, Om)
        FOm = model.D12L(G, Om)
    else:
        dPi0 = model.inertia @ dOm
        Fg = model.force_jac(G)
        FOm = None
    if model.cforce_g is not None:
        Fg = Fg + model.cforce_g(G, Om, Lam)
    dF = Fg @ zeta + np.swapaxes(A_c, -1, -2) @ dLam
    if FOm is not None:
        dF = dF + FOm @ dOm
    if model.cforce_v is not None:
        dF = dF + model.cforce_v(G, Om, Lam) @ dOm
    DT = np.swapaxes(D, -1, -2)
    Q_Pi0 = np.einsum("...bac,...b->...ac", Tns, Pi0)  # ∂(Dᵀp)/∂Ξ at p = Π₀
    Q_F = np.einsum("...bac,...b->...ac", Tns, F)
    dPi = Q_Pi0 @ dXi + DT @ dPi0
    # second-derivative term ∂_Ξ (J^L(Ξ, H)ᵀ Π₀) with H, Π₀ fixed
    S = ops.dtensor_contract(Xi, H, Pi0)
    dN = (
        Q_F @ dXi
        + DT @ dF
        + np.swapaxes(Q_Pi0, -1, -2) @ dH
        + S @ dXi
        + np.swapaxes(J, -1, -2) @ dPi0
    )
    dY = AdTinvT @ (dF - ops.P(F) @ zeta)
    dnu = h * np.einsum("j,...jpU->...pU", b, dY)
    AdsT = np.swapaxes(AdT[..., -1, :, :], -1, -2)
    dmu1 = ops.P(mu1) @ zeta[..., -1, :, :] + AdsT @ dnu
    Q_mu1 = np.einsum("...bac,...b->...ac", Tns[..., -1, :, :, :], mu1)
    dDmu = Q_mu1 @ dXi[-1] + np.swapaxes(Ds, -1, -2) @ dmu1
    dR1 = dPi - dDmu[..., None, :, :] + h * np.einsum("ij,...jpU->...ipU", C, dN)
    dinner = h * np.einsum("ij,...jpU->...ipU", a, dY)
    dM = ops.P(Mst) @ zeta + np.swapaxes(AdT, -1, -2) @ dinner
    zi = zeta[..., 1:, :, :]
    if implicit_eta:
        deta = dE
    elif general:  # δη = (D₂₂ℓ)⁻¹ (δM − D₂₁ℓ ζ) at (Gⁱ, ηⁱ)
        deta = np.linalg.solve(
            model.D22L(Gi, eta), dM[..., 1:, :, :] - model.D21L(Gi, eta) @ zi
        )
    else:
        deta = model.inertia_inv @ dM[..., 1:, :, :]
    dR2 = model.phi_g(Gi, eta) @ zi + model.phi_v(Gi, eta) @ deta
    rows = [dR1.reshape((*batch, s * d, U)), dR2.reshape((*batch, (s - 1) * m, U))]
    if weighted:
        rows.append(np.einsum("j,jmU->mU", b, dLam) * np.ones((*batch, 1, 1)))
    if implicit_eta:
        dR4 = model.D21L(Gi, eta) @ zi + model.D22L(Gi, eta) @ dE - dM[..., 1:, :, :]
        rows.append(dR4.reshape((*batch, nE, U)))
    if weighted:
        cols = slice(None)
    else:
        cols = np.r_[0 : s * d, s * d + m : U]
    Jac = np.concatenate(rows, axis=-2)[..., cols]
    return r, Jac, aux


@functools.lru_cache(maxsize=64)
def _unit_variations(
    s: int, d: int, m: int, nE: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Constant variation arrays ∂Hⁱ/∂x ``(s, d, U)``, ∂Λⁱ/∂x ``(s, m, U)`` and, for general
    Lagrangians, ∂ηⁱ/∂x ``(s − 1, d, U)`` (i = 2..s), with U = s·d + s·m + nE columns
    (∂Ξⁱ/∂x = h Σₖ aᵢₖ ∂Hᵏ/∂x is formed by the caller)."""
    U = s * d + s * m + nE
    dH = np.zeros((s, d, U))
    dLam = np.zeros((s, m, U))
    dE = np.zeros((max(s - 1, 0) if nE else 0, d, U))
    idx = np.arange(s)
    jd, jm = np.arange(d)[None, :], np.arange(m)[None, :]
    dH[idx[:, None], jd, idx[:, None] * d + jd] = 1.0
    dLam[idx[:, None], jm, s * d + idx[:, None] * m + jm] = 1.0
    if nE:
        ie = np.arange(s - 1)[:, None]
        dE[ie, jd, s * d + s * m + ie * d + jd] = 1.0
    for arr in (dH, dLam, dE):
        arr.setflags(write=False)
    return dH, dLam, dE


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
    adstar = np.einsum("...ad,...d->...a", ops.P(mu), eta)  # ad*_η μ = ad(η)ᵀ μ
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

    def fun_jac(x, want):
        r, J, aux = lie_nh_residual(x, jacobian=want, **kwargs)
        last["x"], last["aux"] = x, aux
        return r, J

    scale = 1.0 + np.max(np.abs(kwargs["mu0"]), axis=-1) + np.max(np.abs(x0), axis=-1)
    options = NewtonOptions(tol=tol, max_iter=max_iter, simplified=True, refresh_rate=0.05)
    res = newton_solve(None, x0, options=options, scale=scale, fun_jac=fun_jac,
                       polish=0.1, rank_rtol=RANK_RTOL if check_rank else None)
    if last.get("x") is res.x:
        aux = last["aux"]
    else:
        _, _, aux = lie_nh_residual(res.x, jacobian=False, **kwargs)
    return res.x, aux, res


RANK_RTOL = 1e-10  # relative smallest singular value below which the step matrix is singular
