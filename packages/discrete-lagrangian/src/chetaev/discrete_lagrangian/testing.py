"""Test helpers shared across chetaev packages: model problems and an order fit.

``fit_order`` is :func:`chetaev.rktableaux.testing.fit_order` (the same object: the one
order fit of the project, defined below this package in the dependency graph so that every
package can use it).

Every model broadcasts over leading batch axes. Nothing here is needed at run time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
from chetaev.rktableaux.testing import fit_order

from .systems._constraints import ConstrainedSystem, HolonomicConstraint, LinearVelocityConstraint
from .systems._derivcheck import _MEASURED
from .systems._derivcheck import SAFETY as DERIVATIVE_CHECK_SAFETY
from .systems._systems import LagrangianSystem, MechanicalSystem

__all__ = [
    "DERIVATIVE_CHECK_SAFETY",
    "FD_DELTA",
    "HARMONIC_PARTICLE_Q0",
    "HARMONIC_PARTICLE_V0",
    "ROUNDING_C",
    "assert_rounding_close",
    "assert_systems_agree",
    "cartesian_pendulum",
    "controlled_reference",
    "derivative_check_ratios",
    "double_pendulum",
    "fit_order",
    "free_rigid_body",
    "harmonic_nonholonomic_particle",
    "heavy_top",
    "henon_heiles",
    "multistep_linearization_error",
    "newton_residual_bound",
    "pendulum_angle",
    "pendulum_cartesian_from_angle",
    "rounding_bound",
    "run_with_work",
    "sine_controls",
    "spherical_pendulum",
    "step_fd_rtol",
    "step_finite_differences",
    "step_linearization_error",
]

@contextlib.contextmanager
def derivative_check_ratios() -> Iterator[list[float]]:
    """Collect the ratios measured by the derivative checks run inside the ``with`` block.

    Each finite-difference comparison of ``check_derivatives`` records its largest ratio
    ``(|D − D_R| − 2·|D_h − D_2h|) / (eps·F/h + eps^(2/3)·max|D|)``; the check fails above
    :data:`DERIVATIVE_CHECK_SAFETY`. The yielded list receives the ratios of the block when
    it exits (for tests that measure the margin of a model's derivatives).
    """
    _MEASURED.clear()
    out: list[float] = []
    try:
        yield out
    finally:
        out.extend(_MEASURED)
        _MEASURED.clear()


#: Constant of the rounding bound :func:`rounding_bound`: a sum or inner product of ``n``
#: terms computed in two different orders (batched vs looped, two algebraically equal
#: formulas) differs by at most ``γ_n·Σ|terms| ≈ n·eps·scale`` each (Higham, *Accuracy and
#: Stability of Numerical Algorithms*, §3.1); ``c = 16`` covers the two evaluations, a few
#: chained operations and a margin (the same constant as ``liegroups.testing.BATCH_ROUNDING_C``).
ROUNDING_C = 16.0


def rounding_bound(scale: Any, n_terms: int = 1, n_ops: int = 1, c: float = ROUNDING_C) -> float:
    """``c · n_terms · n_ops · eps · scale``: the rounding bound of an operation.

    ``scale`` is the magnitude of the terms (e.g. ``max|x|``), ``n_terms`` the number of terms
    summed per entry and ``n_ops`` the number of such operations chained (e.g. the steps of a
    trajectory when the error does not grow, as for a bitwise-reproducible recurrence whose two
    versions differ only by the order of summation).
    """
    return float(c * n_terms * n_ops * np.finfo(float).eps * float(scale))


def assert_rounding_close(actual: Any, desired: Any, *, n_terms: int = 1, n_ops: int = 1,
                          scale: float | None = None, c: float = ROUNDING_C,
                          what: str = "") -> None:
    """Assert ``max|actual − desired| <= rounding_bound(scale, n_terms, n_ops, c)``.

    ``scale`` defaults to ``max(|actual|, |desired|)`` (norm-wise: entries small by
    cancellation are covered by the largest entry, which an elementwise rtol is not).
    """
    a, b = np.asarray(actual, dtype=float), np.asarray(desired, dtype=float)
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b)), f"{what}: non-finite values"
    if scale is None:
        scale = max(np.abs(a).max(initial=0.0), np.abs(b).max(initial=0.0))
    bound = rounding_bound(scale, n_terms, n_ops, c)
    err = float(np.abs(a - b).max(initial=0.0))
    assert err <= bound, f"{what}: |actual - desired| = {err:.3e} > rounding bound {bound:.3e}"


def newton_residual_bound(tol: float, q0: Any, v0: Any) -> float:
    """Bound on a constraint residual that a method solves by Newton's method, at any node.

    The solver stops at ``max|residual| <= max(tol, 64·eps)·scale`` (``_solver`` module
    docstring); mechanical constraints are at most bilinear in (q, v), so their scale is S²
    with ``S = max(1, max|q0|, max|v0|)`` (the driver's post-condition scale, ``integrate``);
    re-evaluating the residual at the stored node adds the rounding of an n-term inner
    product (:func:`rounding_bound`). Returns ``max(tol, 64·eps)·S² + rounding_bound(S², n)``.
    Use ``tol = method.newton.tol`` (or ``method.guarantees[level]``). It bounds one solve;
    a difference of two runs that each stop at their targets grows at most like
    ``n_steps`` times it. It assumes the solver's residual scale is at most S²: measure
    the ratio for a new method before relying on it (the driver's post-condition allows a
    factor ``POSTCONDITION_FACTOR`` for that reason; e.g. a Lie discretization map reaches
    2.8, see ``integrate``).
    """
    S = max(1.0, float(np.max(np.abs(q0))), float(np.max(np.abs(v0))))
    n = int(np.shape(q0)[-1])
    return max(float(tol), 64.0 * np.finfo(float).eps) * S * S + rounding_bound(S * S, n_terms=n)


def harmonic_nonholonomic_particle() -> ConstrainedSystem:
    """Nonholonomic particle in a harmonic potential (high-order nonholonomic paper §7.1),
    q = (x, y, z): L = |v|²/2 − (x² + y²)/2, Φ = v_z − y v_x (linear, m = 1).

    The one definition of this model (``nh_integrators.testing.particle_system`` and
    ``gni.testing.harmonic_particle`` use it). Continuous multiplier
    λ = (v_x v_y − x y)/(1 + y²) (paper §7.1); y(t) is an exact harmonic oscillator. Initial
    data (the project's proposal, not in the paper): :data:`HARMONIC_PARTICLE_Q0`,
    :data:`HARMONIC_PARTICLE_V0`.
    """

    def V(q):
        return 0.5 * (q[..., 0] ** 2 + q[..., 1] ** 2)

    def gV(q):
        g = np.array(q, dtype=float, copy=True)
        g[..., 2] = 0.0
        return g

    def hV(q):
        H = np.zeros((*np.shape(q)[:-1], 3, 3))
        H[..., 0, 0] = 1.0
        H[..., 1, 1] = 1.0
        return H

    def A(q):
        y = q[..., 1]
        return np.stack([-y, np.zeros_like(y), np.ones_like(y)], axis=-1)[..., None, :]

    def dA(q):  # dA[..., a, i, k] = d A_ai / d q_k
        D = np.zeros((*np.shape(q)[:-1], 1, 3, 3))
        D[..., 0, 0, 1] = -1.0
        return D

    return ConstrainedSystem(
        MechanicalSystem(np.eye(3), V, gV, potential_hess=hV), LinearVelocityConstraint(A, dA=dA)
    )


HARMONIC_PARTICLE_Q0 = np.array([1.0, 0.5, 0.0])
HARMONIC_PARTICLE_V0 = np.array([0.5, 1.0, 0.25])  # v_z = y v_x


def pendulum_angle(g: float = 1.0, length: float = 1.0, *,
                   symbolic: bool = False) -> MechanicalSystem:
    """Planar pendulum in the angle θ: L = ½ ℓ² θ̇² + g ℓ cos θ (mass 1).

    With ``symbolic=True`` the same L through
    :func:`chetaev.discrete_lagrangian.symbolic.from_lagrangian` (needs sympy; exact
    derivatives and, with numba, the compiled backend's kernels).
    """
    if symbolic:
        import sympy as sp

        from .symbolic import from_lagrangian

        th, om = sp.symbols("theta omega")
        g, length = float(g), float(length)
        return from_lagrangian(0.5 * length**2 * om**2 + g * length * sp.cos(th), [th], [om])
    return MechanicalSystem(
        np.array([[length**2]]),
        lambda th: -g * length * np.cos(th[..., 0]),
        lambda th: g * length * np.sin(th),
        lambda th: (g * length * np.cos(th))[..., None],
    )


def cartesian_pendulum(dim: int = 2, g: float = 1.0, length: float = 1.0,
                       analytic_hessian: bool = True, *,
                       symbolic: bool = False) -> ConstrainedSystem:
    """Pendulum in Cartesian coordinates: L = ½|v|² − g q_last, Φ = (|q|² − ℓ²)/2.

    ``dim=2`` is the planar pendulum, ``dim=3`` the spherical pendulum. With
    ``symbolic=True`` the same L and Φ through
    :func:`chetaev.discrete_lagrangian.symbolic.from_lagrangian` (needs sympy; exact
    derivatives, so ``analytic_hessian`` does not apply, and, with numba, the compiled
    backend's kernels).
    """
    n = dim
    if symbolic:
        import sympy as sp

        from .symbolic import from_lagrangian

        q, v = sp.symbols(f"q0:{n}"), sp.symbols(f"v0:{n}")
        L = sum(vi**2 for vi in v) / 2 - float(g) * q[-1]
        phi = (sum(qi**2 for qi in q) - float(length) ** 2) / 2
        return from_lagrangian(L, list(q), list(v), holonomic=[phi])
    e = np.zeros(n)
    e[-1] = g

    system = MechanicalSystem(
        np.eye(n),
        lambda q: q @ e,
        lambda q: np.broadcast_to(e, np.shape(q)),
        lambda q: np.zeros((*np.shape(q), n)),
    )
    eye = np.eye(n)
    constraint = HolonomicConstraint(
        lambda q: 0.5 * (np.sum(q * q, axis=-1, keepdims=True) - length**2),
        lambda q: np.asarray(q)[..., None, :],
        (lambda q: np.broadcast_to(eye, (*np.shape(q)[:-1], 1, n, n)))
        if analytic_hessian
        else None,
        m=1,
    )
    return ConstrainedSystem(system, constraint)


def spherical_pendulum(g: float = 1.0, length: float = 1.0, *,
                       symbolic: bool = False) -> ConstrainedSystem:
    """Spherical pendulum: :func:`cartesian_pendulum` with ``dim=3`` (``symbolic``: its
    symbolic twin)."""
    return cartesian_pendulum(3, g, length, symbolic=symbolic)


def pendulum_cartesian_from_angle(theta, omega, length: float = 1.0):
    """(q, v) of the Cartesian pendulum for the angle θ (from the downward vertical)."""
    theta = np.asarray(theta, dtype=float)
    omega = np.asarray(omega, dtype=float)
    q = length * np.stack([np.sin(theta), -np.cos(theta)], axis=-1)
    v = length * omega[..., None] * np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    return q, v


def henon_heiles() -> MechanicalSystem:
    """Hénon–Heiles: V = ½(x² + y²) + x²y − y³/3 (nonlinear, unconstrained)."""

    def V(q):
        x, y = q[..., 0], q[..., 1]
        return 0.5 * (x * x + y * y) + x * x * y - y**3 / 3.0

    def dV(q):
        x, y = q[..., 0], q[..., 1]
        return np.stack([x + 2 * x * y, y + x * x - y * y], axis=-1)

    def d2V(q):
        x, y = q[..., 0], q[..., 1]
        return np.stack([np.stack([1 + 2 * y, 2 * x], -1), np.stack([2 * x, 1 - 2 * y], -1)], -2)

    return MechanicalSystem(np.eye(2), V, dV, d2V)


def double_pendulum(general: bool = False, analytic: bool = True):
    """Double pendulum in angles (unit masses and lengths, g = 1): q-dependent mass matrix.

    M(θ) = [[2, c], [c, 1]] with c = cos(θ₁ − θ₂); V = −2 cos θ₁ − cos θ₂.
    ``general=True`` returns the same Lagrangian as a :class:`LagrangianSystem` (its second
    derivatives by finite differences when ``analytic=False``).
    """

    def M(q):
        c = np.cos(q[..., 0] - q[..., 1])
        two = np.full_like(c, 2.0)
        one = np.ones_like(c)
        return np.stack([np.stack([two, c], -1), np.stack([c, one], -1)], -2)

    def dM(q):
        s = -np.sin(q[..., 0] - q[..., 1])  # d c / d θ1 ; d c / d θ2 = -s
        z = np.zeros_like(s)
        d1 = np.stack([np.stack([z, s], -1), np.stack([s, z], -1)], -2)
        d2 = -d1
        return np.stack([d1, d2], -1)

    def V(q):
        return -2 * np.cos(q[..., 0]) - np.cos(q[..., 1])

    def dV(q):
        return np.stack([2 * np.sin(q[..., 0]), np.sin(q[..., 1])], -1)

    def d2V(q):
        z = np.zeros_like(q[..., 0])
        return np.stack([np.stack([2 * np.cos(q[..., 0]), z], -1),
                         np.stack([z, np.cos(q[..., 1])], -1)], -2)

    if not general:
        return MechanicalSystem(M, V, dV, d2V, dM, n=2)

    def L(q, v):
        return 0.5 * np.einsum("...i,...ij,...j->...", v, M(q), v) - V(q)

    def dLdq(q, v):
        return 0.5 * np.einsum("...i,...ijk,...j->...k", v, dM(q), v) - dV(q)

    def dLdv(q, v):
        return np.einsum("...ij,...j->...i", M(q), v)

    if not analytic:
        return LagrangianSystem(2, L, dLdq, dLdv)

    def d2vv(q, v):
        return M(q)

    def d2vq(q, v):
        return np.einsum("...ijk,...j->...ik", dM(q), v)

    def d2qq(q, v):
        c = np.cos(q[..., 0] - q[..., 1])
        # ∂²c/∂θa∂θb = -c * [[1, -1], [-1, 1]]
        sgn = np.array([[1.0, -1.0], [-1.0, 1.0]])
        coupling = -c * v[..., 0] * v[..., 1]  # ½ vᵀ ∂²M v = c'' v1 v2
        return coupling[..., None, None] * sgn - d2V(q)

    return LagrangianSystem(2, L, dLdq, dLdv, d2vv, d2vq, d2qq)


def free_rigid_body(inertia=(1.0, 2.0, 3.0), *, symbolic: bool = False):
    """Free rigid body on SO(3): ℓ = ½ ηᵀ𝕀η (Euler: Π̇ = Π × Ω).

    With ``symbolic=True`` the same ℓ through
    :func:`chetaev.discrete_lagrangian.symbolic.from_trivialized_lagrangian` (needs sympy;
    exact derivatives and, with numba, the compiled backend's kernels).
    """
    from chetaev.liegroups import SO3

    if symbolic:
        import sympy as sp

        from .symbolic import from_trivialized_lagrangian

        e = sp.symbols("e0:3")
        ell = sum(0.5 * float(inertia[i]) * e[i] ** 2 for i in range(3))
        return from_trivialized_lagrangian(SO3, ell, e, g=sp.MatrixSymbol("g", 3, 3))

    from .systems._systems import TrivializedMechanicalSystem

    def V(R):
        return np.zeros(np.shape(R)[:-2])

    def dV(R):
        return np.zeros((*np.shape(R)[:-2], 3))

    def d2V(R):
        return np.zeros((*np.shape(R)[:-2], 3, 3))

    return TrivializedMechanicalSystem(SO3, np.diag(inertia), V, dV, d2V)


def heavy_top(inertia=(1.0, 1.5, 2.5), mgl: float = 1.0, chi=(0.1, 0.2, 1.0), *,
              symbolic: bool = False):
    """Heavy top on SO(3): ℓ = ½ ηᵀ𝕀η − mgl e₃·Rχ.

    Left-trivialized gradient of V: mgl χ × Γ with Γ = Rᵀe₃; Hessian mgl χ̂ Γ̂.
    Invariants: energy, Γ·Π (vertical angular momentum), |Γ| = 1. With ``symbolic=True``
    the same ℓ through :func:`chetaev.discrete_lagrangian.symbolic.from_trivialized_lagrangian`
    (needs sympy; exact derivatives and, with numba, the compiled backend's kernels).
    """
    from chetaev.liegroups import SO3

    if symbolic:
        import sympy as sp

        from .symbolic import from_trivialized_lagrangian

        g, e = sp.MatrixSymbol("g", 3, 3), sp.symbols("e0:3")
        ell = (sum(0.5 * float(inertia[i]) * e[i] ** 2 for i in range(3))
               - float(mgl) * sum(g[2, j] * float(chi[j]) for j in range(3)))
        return from_trivialized_lagrangian(SO3, ell, e, g=g)

    from .systems._systems import TrivializedMechanicalSystem

    chi = np.asarray(chi, dtype=float)
    e3 = np.array([0.0, 0.0, 1.0])

    def gamma(R):
        return np.einsum("...ji,j->...i", R, e3)

    def V(R):
        return mgl * gamma(R) @ chi

    def dV(R):
        return mgl * np.cross(chi, gamma(R))

    def d2V(R):
        return mgl * np.einsum("ij,...jk->...ik", SO3.hat(chi), SO3.hat(gamma(R), check=False))

    return TrivializedMechanicalSystem(SO3, np.diag(inertia), V, dV, d2V)


_SYSTEM_METHODS = ("lagrangian", "D1L", "D2L", "D11L", "D12L", "D21L", "D22L", "energy")
_CONSTRAINT_METHODS = ("residual", "velocity_residual", "dphi_dv", "dphi_dq", "d2phi_dvdq",
                       "d2phi_dv2")


def assert_systems_agree(a: Any, b: Any, q: Any, v: Any, rtol: float = 1e-13) -> None:
    """Assert that two systems (e.g. a hand-written model and its symbolic twin) agree.

    Compares the Lagrangian, every first and second derivative block, the energy and, for
    constrained systems, the constraint residuals, their first and second derivatives and the
    consistent multiplier at the states ``(q, v)`` (with any batch axes). Each array must agree
    to ``rtol`` relative to ``max(1, max |entry|)`` of the reference ``b`` (the states are of
    order one, so this is a relative comparison), and have the same shape.

    The default ``rtol = 1e-13`` (~450 eps) is a rounding bound: two evaluations of the same
    expressions in a different order differ by at most :func:`rounding_bound` with ``n_terms``
    the dimension (<= 9 in the project's models) and ``n_ops = 3`` chained products, i.e.
    ``16 * 9 * 3 * eps = 9.6e-14 <= 1e-13``. Measured (issue 14 audit): worst 8.0e-16 relative
    over every twin in ``test_symbolic.py`` and ``integration-tests/test_symbolic_models.py``,
    4 seed offsets, OPENBLAS_NUM_THREADS=1 and unset (margin 125).
    """

    def check(name: str, x: Any, y: Any) -> None:
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        assert x.shape == y.shape, f"{name}: shape {x.shape} != {y.shape}"
        scale = max(1.0, float(np.max(np.abs(y), initial=0.0)))
        err = float(np.max(np.abs(x - y), initial=0.0))
        assert err <= rtol * scale, f"{name}: max difference {err:.2e} > {rtol:.0e} * {scale:.2e}"

    for name in _SYSTEM_METHODS:
        check(name, getattr(a, name)(q, v), getattr(b, name)(q, v))
    if hasattr(b, "constraint"):
        for name in _CONSTRAINT_METHODS:
            check(f"constraint.{name}", getattr(a.constraint, name)(q, v),
                  getattr(b.constraint, name)(q, v))
        check("multiplier", a.multiplier(q, v), b.multiplier(q, v))


# -- finite differences of a step (the check of step linearizations, issue 20) -------------------

#: Step δ of :func:`step_finite_differences`.
FD_DELTA = 1e-5


def step_fd_rtol(h: float, delta: float = FD_DELTA, tol: float = 1e-12) -> float:
    """Bound of ``max abs(J - FD) / max abs(J)`` for :func:`step_finite_differences` of a
    linearization J.

    Central differences with step δ of a map f evaluated to an absolute error ε_f err by at
    most ``δ²/6 max abs(f‴) + ε_f/δ``. The differenced steps are solved at the rounding floor
    (64 eps relative to an O(1) scale), and a residual r moves the state by at most
    ``r max(1, 2/abs(h))`` (the factor of RATTLE's reduced iteration); the linearization is
    taken at the step's own solution (Newton tolerance ``tol``); the truncation is at most δ²
    where ``abs(f‴) <= 3`` (derivation and measurements:
    ``packages/discrete-lagrangian/tests/test_linearization.py``). Hence
    ``(64 eps/δ + tol) max(1, 2/abs(h)) + δ²`` (1.4e-8 at h = 0.2, 5.7e-8 at h = 0.05).
    """
    return (64.0 * np.finfo(float).eps / delta + tol) * max(1.0, 2.0 / abs(h)) + delta**2


def step_finite_differences(method: Any, system: Any, state: Any, h: float, u: Any = None,
                            coordinates: str = "(q, p)", delta: float = FD_DELTA,
                            n_steps: int = 1) -> np.ndarray:
    """Central differences of ``method.step`` in the coordinates of a ``StepLinearization``.

    Each perturbed step is an independent Newton solve at the rounding floor (``method`` with
    ``NewtonOptions(tol=1e-16)``: the same step map) from the state without carried guesses.

    Parameters
    ----------
    method, system, state, h, u
        As for ``method.step``.
    coordinates : {"(q, p)", "(q, v)", "(xi, mu)", "(q, q_next)", "(q, g, v)", \
"(q, p, lam)", "(q, v, lam)", "(q, g, v, lam)"}
        ``"(q, p)"``: the map ``(q, p, u) -> (q1, p1)`` with ``v = FL⁻¹(q, p)``; the columns
        of u follow those of (q, p). ``"(q, v)"``: ``(q, v) -> (q1, v1)``, the state's other
        entries (λ_k) held. ``"(xi, mu)"``: on a group, ``(ε, δμ) -> (τ⁻¹(g1⁻¹ g1'), μ1')``
        for the state ``(g τ(ε), μ + δμ)`` with ``η = Fℓ⁻¹(g τ(ε), μ + δμ)`` and τ the
        method's retraction. ``"(q, q_next)"``: a two-step method's ``(q_k, q_{k+1}) ->
        (q_{k+1}, q_{k+2})``, q_{k+1} in ``state.carry["q_next"]`` (``DSOCSIntegrator``).
        ``"(q, g, v)"``: a reduced state on Rⁿ × G (``chetaev.gni.ReducedGNI``) with the
        group element in ``state.carry["g"]``, ``(δx, ε, δv) -> (x1, τ⁻¹(g1⁻¹ g1'), v1)``
        for the state ``(x + δx, g τ(ε), v + δv)`` (λ_k held, τ the method's retraction).
        A trailing ``", lam"`` (a method whose step reads the multiplier λ_k carried in its
        state: ``GNI``, ``ReducedGNI``, ``NonholonomicPRK(multiplier_rule="carry")``) also
        perturbs ``state.lam`` (its columns after the others, before u's) and appends the
        rows of ``new.lam``: the map of the complete state.
    delta : float
        The step δ.
    n_steps : int
        How many steps of size h (the control u held) the differenced map takes (default
        1), to check a product of step linearizations against the multi-step Jacobian.

    Returns
    -------
    ndarray (..., 2n, 2n + n_u)
        (with λ: ``(..., 2n + m, 2n + m + n_u)``).
    """
    import attrs

    from .core._solver import NewtonOptions

    tight = method.evolve(newton=NewtonOptions(tol=1e-16))
    with_lam = coordinates.endswith(", lam)")
    if with_lam:
        coordinates = coordinates[: -len(", lam)")] + ")"
    lam0 = np.asarray(state.lam, dtype=float) if with_lam else None

    def run(st, uu):  # n_steps steps; the read-out's λ rows with the complete state
        for _ in range(int(n_steps)):
            st = tight.step(system, st, h, u=uu)
        return st

    def tail(new):
        return [np.asarray(new.lam, dtype=float)] if with_lam else []

    if coordinates == "(xi, mu)":
        from chetaev.liegroups import retraction

        group = system.group
        tau = retraction(group, method.retraction)
        inv1 = group.inverse(run(state, u).q)

        def f(a, b, uu, lam):
            g = group.compose(state.q, tau(a))
            mu = state.p + b
            st = attrs.evolve(state, q=g, p=mu, v=system.legendre_inv(g, mu), carry={}, lam=lam)
            new = run(st, uu)
            return np.concatenate([tau.inv(group.compose(inv1, new.q)), new.p, *tail(new)], -1)

        x0, y0 = np.zeros(np.shape(state.p)), np.zeros(np.shape(state.p))
    elif coordinates == "(q, g, v)":  # a reduced state (x, g, v): (x, ε) share the first slot
        from chetaev.liegroups import retraction

        group = system.group
        tau = retraction(group, method.retraction)
        g0, nx = state.carry["g"], np.shape(state.q)[-1]
        inv1 = group.inverse(run(state, u).carry["g"])

        def f(a, b, uu, lam):
            g = group.compose(g0, tau(a[..., nx:]))
            st = attrs.evolve(state, q=a[..., :nx], v=b, carry={"g": g, "xi": None}, lam=lam)
            new = run(st, uu)
            eps1 = tau.inv(group.compose(inv1, new.carry["g"]))
            return np.concatenate([new.q, eps1, new.v, *tail(new)], -1)

        x0 = np.concatenate([np.asarray(state.q, dtype=float),
                             np.zeros((*np.shape(state.q)[:-1], group.dim))], -1)
        y0 = np.asarray(state.v)
    elif coordinates == "(q, q_next)":  # a two-step method's state (q_k, q_{k+1}) (DSOCS)

        def f(a, b, uu, lam):
            st = attrs.evolve(state, q=a, carry={**state.carry, "q_next": b}, lam=lam)
            new = run(st, uu)
            return np.concatenate([new.q, new.carry["q_next"], *tail(new)], -1)

        x0, y0 = np.asarray(state.q), np.asarray(state.carry["q_next"])
    else:
        velocity = coordinates == "(q, v)"

        def f(a, b, uu, lam):
            if velocity:
                st = attrs.evolve(state, q=a, v=b, carry={}, lam=lam)
            else:
                st = attrs.evolve(state, q=a, p=b, v=system.legendre_inv(a, b), carry={},
                                  lam=lam)
            new = run(st, uu)
            return np.concatenate([new.q, new.v if velocity else new.p, *tail(new)], -1)

        x0, y0 = np.asarray(state.q), np.asarray(state.v if velocity else state.p)
    n, ny = x0.shape[-1], np.shape(y0)[-1]

    def full(a, b, uu):  # the branch's map, λ_k the last block of b (or held)
        return f(a, b[..., :ny], uu, b[..., ny:] if with_lam else state.lam)

    if with_lam:
        y0 = np.concatenate([np.broadcast_to(np.asarray(y0, dtype=float),
                                             (*lam0.shape[:-1], ny)), lam0], -1)
    k = n + np.shape(y0)[-1]  # 2n, or n + N for a reduced state (shape x, velocity (ẋ, ξ))
    cols = []
    for j in range(k):
        e = np.zeros(k)
        e[j] = delta
        cols.append((full(x0 + e[:n], y0 + e[n:], u) - full(x0 - e[:n], y0 - e[n:], u))
                    / (2 * delta))
    for j in range(0 if u is None else np.shape(u)[-1]):
        e = np.zeros(np.shape(u)[-1])
        e[j] = delta
        cols.append((full(x0, y0, u + e) - full(x0, y0, u - e)) / (2 * delta))
    return np.stack(cols, -1)


def step_linearization_error(method: Any, system: Any, state: Any, h: float, u: Any = None,
                             delta: float = FD_DELTA) -> tuple[Any, float]:
    """``(lin, err)``: ``lin = method.step_linearization(system, state, h, u=u)`` and
    ``err = max abs([A B] - FD) / max abs([A B])`` with FD :func:`step_finite_differences` in
    ``lin.coordinates`` (to compare with :func:`step_fd_rtol`)."""
    lin = method.step_linearization(system, state, h, u=u)
    AB = np.concatenate([lin.A, lin.B], -1)
    fd = step_finite_differences(method, system, state, h, u, lin.coordinates, delta)
    return lin, float(np.max(np.abs(AB - fd)) / np.max(np.abs(AB)))


def multistep_linearization_error(method: Any, system: Any, state: Any, h: float,
                                  u: Any = None, n_steps: int = 5,
                                  delta: float = FD_DELTA) -> tuple[list, np.ndarray, float]:
    """``(lins, fd, err)`` for the product of ``n_steps`` step linearizations (issue 20: LQR
    over a horizon, adjoints).

    ``lins`` are the ``step_linearization`` of the steps from ``state`` (u held), the product
    ``A = A_N ⋯ A_1``, ``B = Σ_j A_N ⋯ A_{j+1} B_j`` is compared with ``fd``, the central
    differences of the N steps (:func:`step_finite_differences` with ``n_steps``) in
    ``lins[0].coordinates``: ``err = max abs([A B] − fd) / max abs([A B])``.
    """
    lins, s = [], state
    for _ in range(int(n_steps)):
        lins.append(method.step_linearization(system, s, h, u=u))
        s = lins[-1].state
    A, B = lins[0].A, lins[0].B
    for lin in lins[1:]:
        A, B = lin.A @ A, lin.A @ B + lin.B
    AB = np.concatenate([A, B], -1)
    fd = step_finite_differences(method, system, state, h, u, lins[0].coordinates, delta,
                                 n_steps=n_steps)
    return lins, fd, float(np.max(np.abs(AB - fd)) / np.max(np.abs(AB)))


def sine_controls(n_steps: int, t_end: float, amplitude: float = 0.5,
                  frequency: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    """The step grid and a smooth scalar control for the forced tests.

    Returns ``(t, U)``: ``t = linspace(0, t_end, n_steps + 1)`` and
    ``U[k] = amplitude · sin(frequency · t_k)``, shape ``(n_steps, 1)`` (the control held over
    step ``k``, as ``integrate(..., controls=U)`` takes it; ``amplitude = 0`` gives the unforced
    control of a purely dissipative test).
    """
    t = np.linspace(0.0, float(t_end), int(n_steps) + 1)
    return t, float(amplitude) * np.sin(float(frequency) * t[:-1])[:, None]


def controlled_reference(rhs: Any, y0: Any, t: Any, controls: Any, *, scalar: bool = False,
                         rtol: float = 1e-13, atol: float = 1e-13) -> np.ndarray:
    """The reference solution of a controlled ODE at the step nodes ``t``.

    DOP853 (``scipy.integrate.solve_ivp``) is restarted on every interval ``[t_k, t_{k+1}]``
    with the control ``controls[k]`` held constant (passed as ``rhs(t, y, u)``; with
    ``scalar=True`` as ``controls[k, 0]``), so the reference has the same zero-order-hold
    control as the discrete forced equations and its accuracy does not suffer from the
    control's jumps. Returns the states at the ``len(t)`` nodes, shape ``(len(t), len(y0))``.
    """
    from scipy.integrate import solve_ivp

    U = np.asarray(controls, dtype=float)
    ys = [np.asarray(y0, dtype=float)]
    for k in range(len(t) - 1):
        u = U[k, 0] if scalar else U[k]
        ys.append(solve_ivp(rhs, (t[k], t[k + 1]), ys[-1], args=(u,), method="DOP853",
                            rtol=rtol, atol=atol).y[:, -1])
    return np.array(ys)


def run_with_work(method: Any, system: Any, q0: Any, v0: Any, controls: Any,
                  h: float) -> tuple[list, np.ndarray]:
    """Step ``method`` with the controls ``controls[k]`` and accumulate the discrete work.

    Returns the states ``[s_0, ..., s_N]`` and the cumulative work ``W_k = Σ_{j<k}
    info["work"]_j`` of the forced steps (``W_0 = 0``), for the work–energy check
    ``E_k − E_0 ≈ W_k`` to the method's order.
    """
    U = np.asarray(controls, dtype=float)
    st = method.initial_state(system, q0, v0, u=U[0])
    states, work = [st], [0.0]
    for k in range(len(U)):
        st = method.step(system, st, h, u=U[k])
        states.append(st)
        work.append(work[-1] + float(st.info["work"]))
    return states, np.array(work)
