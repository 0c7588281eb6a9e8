"""Lie-group nonholonomic partitioned RK (RKMK) method, ``LieNonholonomicPRK``.

Paper high-order-nonholonomic §6.4, App. F (Lagrangian; App. G is the same map in momentum
form) and the nonholonomic partitioned RKMK of the homogeneous-spaces paper §4.2
(high-order paper §6.4, App. F, G; homogeneous-spaces paper eq. (3) and §4.2). The step is
the Lie PRK engine of ``chetaev.discrete_lagrangian`` with the nonholonomic hooks of
``_lie_core``.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from chetaev.discrete_lagrangian import (
    ConvergenceError,
    InputError,
    Method,
    NewtonOptions,
    SingularMatrixError,
    State,
    newton_solve,
)
from chetaev.discrete_lagrangian.extending import (
    discrete_work,
    forced_hooks,
    forced_multiplier,
    forced_multiplier_control_jacobian,
)

from ._lie_core import RANK_RTOL, _GroupOps, _LieModel, lie_nh_newton
from ._nhprk import _forced, _linearization_fd
from ._rules import (
    DEFAULT_MULTIPLIER_RULE,
    MULTIPLIER_RULES,
    MethodCache,
    MultiplierModeWarning,
    StageOrders,
    check_newton,
    check_pair,
    convert_pair,
    multiplier_mode_check,
    one_of,
)
from ._validate import check_state, real_array, real_scalar

FORMS = ("lagrangian", "hamiltonian")

__all__ = ["MULTIPLIER_RULES", "RETRACTIONS", "LieNonholonomicPRK"]

RETRACTIONS = ("cayley", "exp")


def _as_float(f: Any) -> Any:
    def wrapped(G: np.ndarray, E: np.ndarray) -> np.ndarray:
        return np.asarray(f(G, E), dtype=float)

    return wrapped


def _constraint_model(system: Any) -> _LieModel:
    """Build the step's ``_LieModel`` from a ``ConstrainedSystem`` on a group."""
    sysm = getattr(system, "system", None)
    con = getattr(system, "constraint", None)
    group = getattr(system, "group", None)
    if sysm is None or con is None or group is None:
        raise InputError(
            "LieNonholonomicPRK needs a `system` ConstrainedSystem(TrivializedMechanicalSystem("
            f"group, ...), constraint) on a Lie group, got {type(system).__name__}. For a vector "
            "space use NonholonomicPRK (or the group Rn(n))."
        )
    if getattr(con, "is_holonomic", False):
        raise InputError(
            "LieNonholonomicPRK integrates velocity (nonholonomic) constraints; got a "
            "HolonomicConstraint. Use a holonomic (constrained SPRK) method instead."
        )
    d = int(group.dim)
    names = ("D1L", "D2L", "D11L", "D12L", "D21L", "D22L")
    mech = bool(getattr(sysm, "is_mechanical", False)) and hasattr(sysm, "inertia")
    if not mech and not all(hasattr(sysm, k) for k in names):
        raise InputError(
            "LieNonholonomicPRK needs a TrivializedMechanicalSystem or a "
            f"TrivializedLagrangianSystem; {type(sysm).__name__} lacks "
            f"{[k for k in names if not hasattr(sysm, k)]}."
        )
    lag: dict[str, Any] = {}
    if mech:
        inertia = np.asarray(sysm.inertia, dtype=float)
        lag = {
            "inertia": inertia,
            "inertia_inv": np.linalg.inv(inertia),
            "force": lambda G: -np.asarray(sysm.gradV(G), dtype=float),
            "force_jac": lambda G: -np.asarray(sysm.hessV(G), dtype=float),
        }
    else:
        lag = {k: _as_float(getattr(sysm, k)) for k in names}

    def phi(G: np.ndarray, eta: np.ndarray) -> np.ndarray:
        return np.asarray(con.residual(G, eta), dtype=float)

    def phi_v(G: np.ndarray, eta: np.ndarray) -> np.ndarray:
        return np.asarray(con.dphi_dv(G, eta), dtype=float)

    def phi_g(G: np.ndarray, eta: np.ndarray) -> np.ndarray:
        return np.asarray(con.dphi_dq(G, eta), dtype=float)

    cforce_g = None
    cforce_v = None
    const_A = hasattr(con, "matrix") and not callable(getattr(con, "A", None))
    if not const_A:

        def cforce_g(G: np.ndarray, Om: np.ndarray, Lam: np.ndarray) -> np.ndarray:
            T = np.asarray(con.d2phi_dvdq(G, Om), dtype=float)  # [a, i, j] = ∂(∂φ_a/∂η_i)/∂g_j
            return np.einsum("...aij,...a->...ij", T, Lam)

    if not hasattr(con, "matrix"):  # general VelocityConstraint: D₂φ may depend on η

        def cforce_v(G: np.ndarray, Om: np.ndarray, Lam: np.ndarray) -> np.ndarray:
            T = np.asarray(con.d2phi_dv2(G, Om), dtype=float)
            return np.einsum("...aij,...a->...ij", T, Lam)

    m = getattr(con, "m", None)
    if m is None:
        e = np.zeros(d)
        m = int(np.asarray(con.residual(np.asarray(group.identity()), e)).shape[-1])
    return _LieModel(
        d=d,
        m=int(m),
        phi=phi,
        phi_v=phi_v,
        phi_g=phi_g,
        cforce_g=cforce_g,
        cforce_v=cforce_v,
        **lag,
    )


@attrs.frozen
class LieNonholonomicPRK(StageOrders, Method):
    """Nonholonomic partitioned RKMK method on a Lie group (Lobatto IIIA–IIIB, any s ≥ 2).

    A map ``(g_k, η_k, λ_k) → (g_{k+1}, η_{k+1}, λ_{k+1})`` for a left-trivialized system
    (``TrivializedMechanicalSystem`` ℓ = ½ηᵀ𝕀η − V(g), or a general
    ``TrivializedLagrangianSystem``) on any ``chetaev.liegroups`` group (SO(3), SE(2), products
    such as SO(3)×R², Rⁿ) with a trivialized linear, affine or general velocity constraint
    φ(g, η) = 0 (``LinearVelocityConstraint`` or ``VelocityConstraint``). Configurations are
    updated only through the retraction, g_{k+1} = g_k τ(ξ), so they stay on the group to
    round-off with no projection. The constraint is imposed on the IIIA stage velocities ηⁱ,
    D₂ℓ(Gⁱ, ηⁱ) = Mⁱ, at stages 2..s; by H1/H3 the last one is exactly φ(g_{k+1}, η_{k+1}) = 0,
    so the constraint holds at every node to solver tolerance. ``State.p`` holds the
    trivialized momentum μ_k = D₂ℓ(g_k, η_k): the App. G (Hamiltonian) form is the same map
    viewed in (g, μ, λ) (paper App. G); ``form="hamiltonian"`` solves it with the stage
    velocities eliminated through the inverse Legendre map (see ``form``).

    Orders (the paper: "theorems 5.1 and 5.2 still hold"; paper §6.4, App. F [checked]; λ₀ from the
    continuous equations): g and η ``2s − 2``; λ ``s`` for even s, ``s − 1`` for odd s. Not
    symplectic (nonholonomic flows are not). With G = Rⁿ the method is exactly the vector-space
    ``NonholonomicPRK`` (eq. 14).

    Parameters
    ----------
    pair : PartitionedTableau or int
        Lobatto IIIA–IIIB pair (``lobatto_iiia_iiib(s)``) or the stage count s. Only the IIIA
        coefficients enter explicitly; the IIIB conjugate is implicit in the boxed form of
        (3c). Checked against H1–H3, H1'–H2' (:class:`HypothesisError`).
    retraction : {"cayley", "exp"}
        τ. Both use exact closed forms of d^Lτ and of its derivative (no truncated series).
    multiplier_rule : {"continuous", "carry", "zero_first", "weighted_sum"}
        Closure for the first stage multiplier (homogeneous-spaces paper §4.2); the same
        keyword and values as :class:`NonholonomicPRK` (shared constant ``MULTIPLIER_RULES``).
        ``"continuous"`` (default, ``DEFAULT_MULTIPLIER_RULE``): Λ¹ = λ(g_k, η_k) from the
        continuous formula (C2, general): no parasitic multiplier mode, orders 2s − 2 kept
        (on S² lifts λ ≡ 0, so it equals ``"zero_first"``). ``"carry"``: the papers' rule
        (App. F of the high-order paper and the homogeneous-spaces paper's
        Λ-concatenation), Λ¹ = λ_k = Λˢ of the previous step; pass it to reproduce the
        papers. Its multiplier sequence has a parasitic mode (as for
        :class:`NonholonomicPRK`: the free Chaplygin sleigh on SE(2) loses its energy by
        T = 50 at h = 0.05 for s = 2, 3), so runs with it are monitored
        (:class:`MultiplierModeWarning`). ``"zero_first"``: Λ¹ = 0 (C2).
        ``"weighted_sum"``: Λ¹ unknown and Σⱼ bⱼΛʲ = 0 (C3). On a homogeneous-space lift
        (right-H-invariant ℓ_reg with the 𝔪-constraint) this equation is implied by the end-point
        constraint (discrete Noether identity, see the docs' theory page of the homogeneous-spaces
        paper), the Newton matrix is singular, and the step raises :class:`SingularMatrixError`
        instead of returning arbitrary multipliers.
    newton : NewtonOptions
        ``tol`` (relative to 1 + |μ_k| + |x|) and ``max_iter`` of the per-step Newton solve
        (full Newton with the analytic Jacobian; it continues to round-off once converged).
        The other ``NewtonOptions`` fields must keep their defaults (:class:`InputError`
        otherwise: they would be ignored).
    form : {"lagrangian", "hamiltonian"}
        As in :class:`NonholonomicPRK`. ``"lagrangian"`` (App. F): for a general
        ``TrivializedLagrangianSystem`` the inner-stage velocities η²..ηˢ are extra unknowns
        with D₂ℓ(Gⁱ, ηⁱ) = Mⁱ. ``"hamiltonian"`` (App. G, H obtained from ℓ through the
        Legendre map): ηⁱ = D₂H(Gⁱ, Mⁱ) = Fℓ⁻¹(Gⁱ, Mⁱ) is eliminated, using
        ``system.legendre_inv(g, μ)`` when the system has one and otherwise inverting
        D₂ℓ(Gⁱ, ·) = Mⁱ by an inner Newton solve to round-off (its derivative enters the
        Jacobian through the implicit-function theorem). Both forms are the same map
        (paper App. G): tested equal to ~1e-13; for a mechanical system Fℓ⁻¹ = 𝕀⁻¹μ and the two
        forms run the same code.

    Notes
    -----
    Known property (homogeneous-spaces paper §5.1, Fig. 3b): with s odd and the "carry" rule the
    multiplier error enters Λˢ multiplied by R_A(∞) = +1, so for s = 3 the multiplier drifts
    linearly and the energy error grows slowly; "zero_first" removes the drift.

    **Equations.** App. F of arXiv:1810.10926, in the inverse-free form of the homogeneous-spaces
    paper's eqs. (3c), (3d), (5) and §4.2; continuous λ₀ as in Thm 5.1 (high-order paper §6).

    **External forces and controls** (issue 20; a system whose trivialized Lagrangian system
    was built with ``force=``, both forms). The forced discrete Lagrange–d'Alembert–Chetaev
    equations (Marsden & West 2001 §3.2 with the constraint forces of App. F) add the
    left-trivialized force at the stages once, Fⁱ = L*_{Gⁱ} D₁ℓ(Gⁱ, Ωⁱ) + D₂φ(Gⁱ, Ωⁱ)ᵀΛⁱ +
    F(Gⁱ, Ωⁱ, u) in (3c)–(3d) (the force enters like L*_g D₁ℓ, dual to the retraction, so
    also in the IIIA-weighted momenta Mⁱ of eq. (5)), with the control ``u`` of
    ``step(..., u=)`` held over the step and its Jacobian (``force_derivatives`` or the
    system's central differences) in the Newton matrix
    (:class:`~chetaev.discrete_lagrangian.core._forcing.ForcedLieStageHooks`). λ₀ and the
    ``"continuous"`` Λ¹ are the multipliers of the forced equations at the step's control;
    ``info["work"]`` is the discrete work h Σᵢ bᵢ F(Gⁱ, Ωⁱ, u)·Ωⁱ.

    References
    ----------
    D. Martín de Diego, R. T. Sato Martín de Almagro, arXiv:1810.10926, §6.4, App. F–G.
    R. T. Sato Martín de Almagro, arXiv:2201.12022, §4.2.
    """

    pair: Any = attrs.field(converter=convert_pair, validator=check_pair)
    retraction: str = attrs.field(default="cayley", validator=one_of(RETRACTIONS))
    multiplier_rule: str = attrs.field(
        default=DEFAULT_MULTIPLIER_RULE, validator=one_of(MULTIPLIER_RULES)
    )
    newton: NewtonOptions = attrs.field(
        factory=lambda: NewtonOptions(tol=1e-13, max_iter=30),
        validator=check_newton(
            ("tol", "max_iter"),
            "The step runs full Newton with the analytic Jacobian (a fresh one per step).",
        ),
    )
    form: str = attrs.field(default="lagrangian", validator=one_of(FORMS))
    _cache: dict = attrs.field(factory=MethodCache, init=False, repr=False, eq=False)
    supports_forces = True
    compiled_backend = True

    def _compiled_plan(self, system: Any, iface: Any) -> tuple[str, Any]:
        """``(why_not, plan)``: the compiled step (issue 17, ``_compiled_lie_nh``)."""
        from ._compiled_lie_nh import compiled_lie_plan

        return compiled_lie_plan(self, system, iface)

    # ------------------------------------------------------------------ protocol
    @property
    def guarantees(self) -> dict[str, float]:
        """Φ(q_k, v_k) = 0 at every node to the Newton tolerance (the last Lobatto stage is
        the node, where the constraint is imposed; paper eq. (14)): the post-condition
        :func:`~chetaev.discrete_lagrangian.integrate` checks after every step."""
        return {"velocity": float(self.newton.tol)}

    @property
    def name(self) -> str:
        return f"Lie NH-PRK Lobatto-{self.stages} ({self.retraction}, {self.multiplier_rule})"

    def _setup(self, system: Any) -> tuple[_GroupOps, _LieModel]:
        hit = self._cache.get("setup")
        if hit is not None and hit[0] is system:
            return hit[1], hit[2]
        model = _constraint_model(system)
        ops = _GroupOps(system.group, self.retraction)
        self._cache["setup"] = (system, ops, model)
        return ops, model

    def _check_element(self, system: Any, g: Any, name: str) -> np.ndarray:
        group = system.group
        g = real_array(g, name)
        shape = tuple(group.shape)
        if g.shape[g.ndim - len(shape) :] != shape:
            raise InputError(
                f"`{name}` must be a group element of shape (..., {', '.join(map(str, shape))}) "
                f"for {type(group).__name__}, got shape {g.shape}."
            )
        ok = np.asarray(group.is_element(g, tol=1e-9)) if hasattr(group, "is_element") else True
        if not np.all(ok):
            raise InputError(
                f"`{name}` is not an element of the group (e.g. RᵀR ≠ I); build it with the "
                "group's exp, from_parts or a retraction."
            )
        return g

    def initial_state(
        self, system: Any, q0: Any, v0: Any, t0: float = 0.0, lam0: Any = None,
        tol: float = 1e-10, *, u: Any = None,
    ) -> State:
        """Check and complete the initial data: μ₀ = 𝕀η₀ and λ₀.

        λ₀ defaults to the continuous multiplier ``system.multiplier(g0, η0)`` (required for
        the orders, Thm 5.1); pass ``lam0`` only to study a wrong value. For a forced system
        it is the multiplier of the forced equations at the control ``u`` (``integrate``
        passes ``controls[0]``).

        Raises
        ------
        ConstraintViolationError
            If ``|φ(g0, η0)| > tol``.
        InputError
            For a wrong shape, a non-finite value or ``g0`` off the group.
        """
        return super().initial_state(system, q0, v0, t0, lam0=lam0, tol=tol, u=u)

    def _initial_state_impl(
        self, system: Any, q0: Any, v0: Any, t0: float, lam0: Any = None, tol: float = 1e-10,
        u: Any = None,
    ) -> State:
        tol = real_scalar(tol, "tol", positive=True)
        ops, model = self._setup(system)
        g0 = self._check_element(system, q0, "q0")
        eta0 = real_array(v0, "v0")
        if eta0.ndim == 0 or eta0.shape[-1] != model.d:
            raise InputError(
                f"`v0` must be the trivialized velocity η0 of shape (..., {model.d}), got shape "
                f"{eta0.shape}."
            )
        try:
            batch = np.broadcast_shapes(g0.shape[: g0.ndim - ops.elem_ndim], eta0.shape[:-1])
        except ValueError:
            raise InputError(
                f"`v0` of shape {eta0.shape} does not broadcast with the batch of `q0` (shape "
                f"{g0.shape}): pass one row per trajectory in both (or a single one in one)."
            ) from None
        g0 = np.broadcast_to(g0, batch + ops.elem_shape).copy()
        eta0 = np.broadcast_to(eta0, (*batch, model.d)).copy()
        system.check_initial(g0, eta0, tol=tol)
        mu0 = np.asarray(system.system.D2L(g0, eta0), dtype=float)
        if lam0 is None:
            lam = np.asarray(system.multiplier(g0, eta0), dtype=float)
            if _forced(system) and (u is not None or not system.n_controls):
                lam = forced_multiplier(system, g0, eta0, lam, u)
        else:
            lam = real_array(lam0, "lam0")
            if lam.ndim == 0 or lam.shape[-1] != model.m:
                raise InputError(
                    f"`lam0` must have shape (..., {model.m}) (one multiplier per constraint), "
                    f"got shape {lam.shape}."
                )
            try:
                lam = np.broadcast_to(lam, (*batch, model.m)).copy()
            except ValueError:
                raise InputError(
                    f"`lam0` of shape {lam.shape} does not broadcast to the batch {batch} of "
                    "the initial data. Pass one row per trajectory or a single row."
                ) from None
        return State(t=float(t0), q=g0, v=eta0, p=mu0, lam=lam, n=0, carry={}, info={})

    def check_step(
        self, system: Any, previous: State, state: State, h: float
    ) -> MultiplierModeWarning | None:
        """Post-step hook (called by ``integrate`` after every converged step): with the
        papers' rule ``"carry"``, a :class:`MultiplierModeWarning` once the parasitic
        multiplier mode exceeds ``MULTIPLIER_MODE_THRESHOLD`` times the multiplier's scale
        (one continuous-multiplier evaluation per step; nothing for the other rules).
        See :func:`._rules.multiplier_mode_check`."""
        return multiplier_mode_check(self, system, previous, state, h)

    def _step_linearization_impl(self, system: Any, state: State, h: float, u: Any,
                                 new: State) -> Any:
        """(A, B) in the tangent coordinates of the retraction and in tangent bases of the
        constraint set (issue 20).

        Coordinates: the state (g, μ) is perturbed as (g τ(ε), μ + δμ), ε ∈ 𝔤
        left-trivialized (τ the method's retraction), the next state read in the same chart;
        ``A = ∂(ζ_{k+1}, δμ_{k+1})/∂(ε, δμ)`` ``(..., 2d, 2d)`` by the implicit function
        theorem on the converged unknowns of App. F (H, Λ²..Λˢ and the general ℓ's η²..ηˢ;
        :func:`~chetaev.discrete_lagrangian.core._linearization.lie_step_jacobians`, with the
        direct μ_k-dependence of the IIIA momenta Mⁱ, eq. 5 of the note). Λ¹ follows the
        rule: ``"carry"`` reads the state's λ_k (Λ¹ = λ_k) and returns λ_{k+1} = Λˢ, so the
        map is linearized in the complete state, ``coordinates == "(xi, mu, lam)"``:
        ``A = ∂(ζ_{k+1}, δμ_{k+1}, λ_{k+1})/∂(ε, δμ, λ_k)`` ``(..., 2d + m, 2d + m)`` (λ_k's
        column the derivative in the given Λ¹, λ_{k+1}'s rows Λˢ's rows of the IFT's dx,
        ``lie_step_jacobians(..., last_multiplier=True)``), B with λ_{k+1}'s rows, the bases
        extended by the m multiplier directions; a product of step A's is the Jacobian of
        several steps. ``"zero_first"`` 0, ``"weighted_sum"`` an unknown; ``"continuous"``
        λ(g_k, η_k) with η_k = Fℓ⁻¹(g_k, μ_k), its (g, η)-derivative the implicit derivative of the
        multiplier's KKT system in the Euler–Poincaré form (paper §6;
        :meth:`~chetaev.discrete_lagrangian.ConstrainedSystem.multiplier_jacobian`, the
        g-columns left-trivialized, which is the ε-derivative through any retraction at
        ε = 0), chained through δη = (D₂₂ℓ)⁻¹(δμ − D₂₁ℓ ε). It needs derivatives one
        order above the Newton matrix (∂D₂₂ℓ, ∂f, ∂(φ_g η)/∂g): exact for a system from
        :func:`chetaev.discrete_lagrangian.symbolic.from_trivialized_lagrangian` (or built
        with ``kkt_derivatives=``) and, without them, for a trivialized mechanical system
        with ``potential_hess`` and a constant constraint matrix; otherwise central
        differences of those blocks, listed in ``finite_differences`` of the result.
        ``basis``/``next_basis``: orthonormal bases (2d − m columns) of the tangent spaces
        of {φ(g, Fℓ⁻¹(g, μ)) = 0} in these coordinates; every step ends on that set.

        For a forced system the IFT solves with the step's own forced hooks
        (:class:`~chetaev.discrete_lagrangian.core._forcing.ForcedLieStageHooks`): the
        force's left-trivialized g- and η-derivatives are in the Newton matrix and
        ``B = ∂(ζ_{k+1}, δμ_{k+1})/∂u`` ``(..., 2d, n_controls)`` follows from F_u in Fⁱ;
        the ``"continuous"`` Λ¹ is the multiplier of the forced equations at u, and its
        exact u-derivative −C⁻¹φ_η D₂₂ℓ⁻¹F_u
        (:func:`~chetaev.discrete_lagrangian.core._forcing.forced_multiplier_control_jacobian`)
        enters B (zero columns without a force).
        """
        from chetaev.discrete_lagrangian.extending import (
            LinearizationNotSupportedError,
            StepLinearization,
            lie_step_jacobians,
            tangent_fields,
            with_multiplier_directions,
        )

        from ._lie_core import LieNonholonomicHooks, _coefficients, engine_view

        ops, model = self._setup(system)
        a = np.asarray(self.pair.first.a, dtype=float)
        b = np.asarray(self.pair.first.b, dtype=float)
        s, m = a.shape[0], model.m
        g, eta = np.asarray(state.q, dtype=float), np.asarray(state.v, dtype=float)
        mu = state.p
        mu = np.asarray(system.system.D2L(g, eta) if mu is None else mu, dtype=float)
        batch = eta.shape[:-1]
        rule = self.multiplier_rule
        legendre_inv = None
        if model.general and self.form == "hamiltonian":
            legendre_inv = getattr(system.system, "legendre_inv", None)
            if legendre_inv is None:
                legendre_inv = _NumericalLegendreInverse(model, eta)
        hooks = LieNonholonomicHooks(model, s, rule == "weighted_sum", legendre_inv)
        nh_hooks = hooks
        forced = _forced(system)
        # the step's own forced hooks: F(Gⁱ, Ωⁱ, u) and its g-, η-derivatives enter the IFT's
        # Newton matrix as they enter the step's, and its F_u gives B
        hooks = forced_hooks(system, hooks, u, s, lie=True)

        def lam1_of(gg, ee):
            if rule == "carry":
                return (np.asarray(state.lam, dtype=float) if state.lam is not None
                        else np.zeros((*batch, m)))
            if rule == "zero_first":
                return np.zeros((*ee.shape[:-1], m))
            lam = np.asarray(system.multiplier(gg, ee), dtype=float)
            if forced:  # as the step: the multiplier of the forced equations at u
                lam = forced_multiplier(system, gg, ee, lam, u)
            return lam

        lam_fixed = None
        if rule != "weighted_sum":
            lam1 = lam1_of(g, eta)
            lam_fixed = np.broadcast_to(lam1[..., None, :], (*lam1.shape[:-1], s, m))
        x = new.carry.get("x")
        if x is None:
            raise LinearizationNotSupportedError(
                f"{self.name}: the step did not record its converged unknowns "
                "(State.carry['x'])."
            )
        carried = rule == "carry" and state.lam is not None
        A, dz_dlam, B, dlams = lie_step_jacobians(
            np.asarray(x, dtype=float), g, mu, h, _coefficients(a, b),
            engine_view(model, ops.group), ops.retraction, hooks, lam_fixed,
            mu_rows=lambda ev: _lie_mu_rows(nh_hooks, ev), last_multiplier=True)
        n_u = int(getattr(system, "n_controls", 0) or 0)
        if B.shape[-1] != n_u:  # an unforced system: no control columns
            B = np.zeros((*A.shape[:-1], n_u))
        if rule == "continuous":
            # (..., m, 2d) in (ε, η), exact from the KKT system where the system provides it
            dlam = system.multiplier_jacobian(g, eta, u if forced else None)
            A = A + dz_dlam @ _lie_chain_velocity(dlam, model, g, eta)
            if forced and n_u:  # Λ¹ of the forced equations moves with u
                B = B + dz_dlam @ forced_multiplier_control_jacobian(system, g, eta, u)
        E0 = _lie_tangent_basis(model, g, eta)
        E1 = _lie_tangent_basis(model, np.asarray(new.q), np.asarray(new.v))
        coordinates = "(xi, mu)"
        if carried:  # the complete state (ε, δμ, λ): Λ¹ = λ_k's column, λ_{k+1} = Λˢ's rows
            d = A.shape[-1] // 2
            dl_u = dlams[..., 2 * d + m:]
            A = np.concatenate([np.concatenate([A, np.broadcast_to(
                dz_dlam, (*A.shape[:-1], m))], -1), dlams[..., : 2 * d + m]], -2)
            B = np.concatenate([B, dl_u if dl_u.shape[-1] == n_u
                                else np.zeros((*dl_u.shape[:-1], n_u))], -2)
            E0, E1 = with_multiplier_directions(E0, m), with_multiplier_directions(E1, m)
            coordinates = "(xi, mu, lam)"
        return StepLinearization(state=new, A=A, B=B, coordinates=coordinates,
                                 **tangent_fields(E0, E1, A, B),
                                 finite_differences=_linearization_fd(
                                     system, rule == "continuous"))

    def _step_impl(self, system: Any, state: State, h: float, u: Any = None) -> State:
        """One step of App. F; returns the state at ``t + h`` (``u``: the control of a forced
        system, held over the step).

        Raises
        ------
        ConvergenceError
            If Newton does not converge (for some member of the batch).
        SingularMatrixError
            With ``multiplier_rule="weighted_sum"`` when Σ bⱼΛʲ = 0 is redundant (rank
            deficient Newton matrix).
        """
        ops, model = self._setup(system)
        check_state(state, ops.elem_shape, model.d, model.m)
        if u is None:
            from chetaev.discrete_lagrangian.extending import resolve_backend

            plan = resolve_backend(self, system)
            if plan is not None:  # the compiled step (issue 17)
                return plan.step(state, h)
        a = np.asarray(self.pair.first.a, dtype=float)
        b = np.asarray(self.pair.first.b, dtype=float)
        s, d, m = a.shape[0], model.d, model.m
        g, eta = np.asarray(state.q, dtype=float), np.asarray(state.v, dtype=float)
        mu = state.p
        if mu is None:
            mu = np.asarray(system.system.D2L(g, eta), dtype=float)
        batch = eta.shape[:-1]
        lam_prev = state.lam if state.lam is not None else np.zeros((*batch, m))
        rule = self.multiplier_rule
        forced = _forced(system)
        forcing = None
        if forced:  # the external stage force wraps the nonholonomic hooks (issue 20)
            def forcing(hooks: Any) -> Any:
                return forced_hooks(system, hooks, u, s, lie=True)
        if rule == "carry":
            lam1 = lam_prev
        elif rule == "zero_first":
            lam1 = np.zeros((*batch, m))
        elif rule == "continuous":
            lam1 = np.asarray(system.multiplier(g, eta), dtype=float)
            if forced:  # the multiplier of the forced equations at the step's control
                lam1 = forced_multiplier(system, g, eta, lam1, u)
        else:
            lam1 = None
        nlam = s if lam1 is None else s - 1
        legendre_inv = None
        if model.general and self.form == "hamiltonian":
            legendre_inv = getattr(system.system, "legendre_inv", None)
            if legendre_inv is None:
                legendre_inv = _NumericalLegendreInverse(model, eta)
        nE = (s - 1) * d if model.general and legendre_inv is None else 0
        N = s * d + nlam * m + nE
        carry = state.carry
        same = carry.get("h") == h and np.shape(carry.get("x", ())) == (*batch, N)
        if same and np.shape(carry.get("x_prev", ())) == (*batch, N):
            x0 = 2.0 * carry["x"] - carry["x_prev"]  # linear extrapolation of the stages
        elif same:
            x0 = np.array(carry["x"], dtype=float)
        else:
            guess = np.broadcast_to(np.tile(eta, s), (*batch, s * d))
            lam_guess = np.broadcast_to(np.tile(lam_prev, nlam), (*batch, nlam * m))
            eta_guess = np.broadcast_to(np.tile(eta, s - 1) if nE else eta[..., :0], (*batch, nE))
            x0 = np.concatenate([guess, lam_guess, eta_guess], axis=-1)
        # a fresh Jacobian per step beats reusing it across steps here (measured: 3.3
        # iterations/step with the extrapolated guess vs 6.7 with a stale Jacobian)
        x, aux, result = lie_nh_newton(
            x0,
            tol=self.newton.tol,
            max_iter=self.newton.max_iter,
            check_rank=lam1 is None,
            ops=ops,
            model=model,
            a=a,
            b=b,
            h=h,
            g0=g,
            mu0=mu,
            lam1=lam1,
            legendre_inv=legendre_inv,
            forcing=forcing,
        )
        ok = bool(np.all(result.converged))
        if not ok and result.sigma_min is not None and np.any(result.sigma_min < RANK_RTOL):
            raise SingularMatrixError(
                f"multiplier_rule='weighted_sum' gives a rank-deficient Newton matrix at step "
                f"{state.n} (t = {state.t:.6g}; relative smallest singular value "
                f"{float(np.min(result.sigma_min)):.1e}): the closure Σ_j b_j Λ^j = 0 is "
                "implied by the end-point constraint (a discrete Noether identity, see the "
                "docs' theory page of the homogeneous-spaces paper), so the multipliers are "
                "not determined. Use multiplier_rule='carry' or 'zero_first'."
            )
        it = int(result.iterations)
        res = float(np.max(result.residual))
        if not ok:
            raise ConvergenceError(
                step=state.n,
                t=state.t,
                residual=res,
                tol=self.newton.tol,
                iterations=it,
                hint=(
                    "multiplier_rule='weighted_sum' is degenerate (Σ_j b_j Λ^j = 0 is "
                    "orthogonal to the null vector of the Lobatto IIIA rows 2..s): "
                    "use multiplier_rule='carry' or 'zero_first'"
                    if rule == "weighted_sum"
                    else "halve h, or increase NewtonOptions(max_iter=...)"
                ),
            )
        G = aux["G"]
        g1 = G[..., -1, :, :] if ops.elem_ndim == 2 else G[..., -1, :]
        eta1 = aux["eta"][..., -1, :]
        lam1_out = aux["Lam"][..., -1, :]
        info = {"newton_iterations": it, "residual": res}
        if forced:  # the discrete work h Σᵢ bᵢ F(Gⁱ, Ωⁱ, u)·Ωⁱ of the step
            info["work"] = discrete_work(forcing(None), aux["ev"])
        return State(
            t=state.t + h,
            q=g1,
            v=eta1,
            p=aux["mu1"],
            lam=lam1_out,
            n=state.n + 1,
            carry={"x": x, "x_prev": carry.get("x") if same else None, "h": h},
            info=info,
        )


_LEGENDRE_NEWTON = NewtonOptions(tol=1e-10, max_iter=50)


class _NumericalLegendreInverse:
    """η = Fℓ⁻¹(G, M): solves D₂ℓ(G, η) = M by Newton with D₂₂ℓ, batched, to round-off.

    Starts from the solution of the previous call when the shapes agree (the outer Newton
    iterates change little), else from η_k. Entries that do not converge are returned as NaN,
    so the outer Newton reports failure and the step raises ``ConvergenceError``.
    """

    def __init__(self, model: _LieModel, eta_k: np.ndarray) -> None:
        self.model = model
        self.eta_k = eta_k
        self.last: np.ndarray | None = None

    def __call__(self, G: np.ndarray, M: np.ndarray) -> np.ndarray:
        model = self.model
        if self.last is not None and self.last.shape == M.shape:
            eta = self.last.copy()
        else:
            eta = np.broadcast_to(self.eta_k[..., None, :], M.shape).copy()
        # the one root finder, to round-off (polish: on while the residual halves), per
        # entry with the scale 1 + max|M|
        res = newton_solve(
            lambda e: model.D2L(G, e) - M,
            eta,
            lambda e: model.D22L(G, e),
            options=_LEGENDRE_NEWTON,
            scale=1.0 + np.abs(M).max(axis=-1),
            polish=0.5,
        )
        eta = np.where(np.asarray(res.converged)[..., None], res.x, np.nan)
        self.last = eta
        return eta


# ---------------------------------------------------------------------- step linearization


def _lie_mu_rows(hooks: Any, ev: Any) -> np.ndarray:
    """∂(hook equations)/∂μ_k ``(..., E, d)`` through the IIIA momenta
    Mⁱ = Ad*_{τ(Ξⁱ)}[μ_k + h Σⱼ aᵢⱼ Ñʲ] (∂Mⁱ/∂μ_k = Ad*_{τ(Ξⁱ)}; eq. 5 of the note): R2ᵢ =
    φ(Gⁱ, ηⁱ) with δη = 𝕀⁻¹δM (mechanical), (D₂₂ℓ)⁻¹δM (App. G) or an unknown (general ℓ,
    whose R4ᵢ = D₂ℓ − Mⁱ gives −δM); the ``"weighted_sum"`` row does not see μ_k."""
    model, s, m, d = hooks.model, hooks.s, hooks.m, hooks.model.d
    eta = ev.extra["eta"]
    Gi = hooks._inner(ev)
    dMi = np.swapaxes(ev.AdT[..., 1:, :, :], -1, -2)  # (..., s-1, d, d)
    lead = dMi.shape[:-3]
    if hooks.implicit:
        dR2 = np.zeros((*lead, s - 1, m, d))
    else:
        if model.general:
            deta = np.linalg.solve(model.D22L(Gi, eta), dMi)
        else:
            deta = model.inertia_inv @ dMi
        dR2 = model.phi_v(Gi, eta) @ deta
    lead = np.broadcast_shapes(lead, dR2.shape[:-3])
    rows = [np.broadcast_to(dR2, (*lead, s - 1, m, d)).reshape((*lead, (s - 1) * m, d))]
    if hooks.weighted:
        rows.append(np.zeros((*lead, m, d)))
    if hooks.implicit:
        rows.append(np.broadcast_to(-dMi, (*lead, s - 1, d, d)).reshape(
            (*lead, (s - 1) * d, d)))
    return np.concatenate(rows, axis=-2)


def _lie_velocity_chain(model: Any, g: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """dη/d(ε, δμ) ``(..., d, 2d)`` of η = Fℓ⁻¹(g, μ): (D₂₂ℓ)⁻¹ [−D₂₁ℓ, I] (𝕀⁻¹ [0, I])."""
    d = eta.shape[-1]
    if not model.general:
        Z = np.zeros((d, d))
        return np.broadcast_to(np.concatenate([Z, model.inertia_inv], axis=-1),
                               (*eta.shape[:-1], d, 2 * d))
    D21 = np.asarray(model.D21L(g, eta), dtype=float)
    rhs = np.concatenate([-D21, np.broadcast_to(np.eye(d), D21.shape)], axis=-1)
    return np.linalg.solve(np.asarray(model.D22L(g, eta), dtype=float), rhs)


def _lie_chain_velocity(dlam: np.ndarray, model: Any, g: np.ndarray,
                        eta: np.ndarray) -> np.ndarray:
    """dλ/d(ε, δμ) from dλ/d(ε, η) at fixed η (first d columns) and at fixed g (last d)."""
    d = eta.shape[-1]
    out = dlam[..., d:] @ _lie_velocity_chain(model, g, eta)
    out[..., :d] += dlam[..., :d]
    return out


def _lie_tangent_basis(model: Any, g: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """Orthonormal basis ``(..., 2d, 2d − m)`` of the tangent space of
    {φ(g, Fℓ⁻¹(g, μ)) = 0} at (g, μ) in the coordinates (ε, δμ): the kernel of
    [φ_g, 0] + φ_η dη/d(ε, δμ) (last right singular vectors)."""
    Cg = np.asarray(model.phi_g(g, eta), dtype=float)
    Cv = np.asarray(model.phi_v(g, eta), dtype=float)
    Cmat = Cv @ _lie_velocity_chain(model, g, eta)
    Cmat[..., : Cg.shape[-1]] += Cg
    _, _, Vt = np.linalg.svd(Cmat, full_matrices=True)
    return np.swapaxes(Vt[..., Cg.shape[-2]:, :], -1, -2)
