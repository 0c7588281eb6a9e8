"""Lagrangian systems on the homogeneous space S² = SO(3)/SO(2) as nonholonomic systems on SO(3).

Homogeneous-spaces paper §2–§4.2, §5 ("S² as a
homogeneous space") and §7. A Lagrangian L(x, ẋ) = (m/2)|ẋ|² − V(x) on S² is lifted through
π(g) = g x₀ to the singular ℓ^G(g, η) = (m/2)|η × x₀|² − V(g x₀); the isotropy direction
𝔥 = span{x₀} is removed by the linear nonholonomic 𝔪-constraint φ(η) = x₀·η = 0 and the
Lagrangian is regularized on 𝔥 by (M/2)(x₀·η)²::

    ℓ_reg(g, η) = ½ ηᵀ 𝕀_reg η − V(g x₀),   𝕀_reg = m (I − x₀x₀ᵀ) + M x₀x₀ᵀ,
    L*_g D₁ℓ = −x₀ × (gᵀ ∇V(g x₀))   (∇V the ambient gradient; its normal part drops out)

Integrate the lift with :class:`LieNonholonomicPRK` (its ``multiplier_rule`` chooses the
closure of §3.6: "carry", "zero_first", or the singular "weighted_sum").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    InputError,
    LinearVelocityConstraint,
    TrivializedMechanicalSystem,
)

from ._validate import real_array, real_scalar

__all__ = [
    "sphere_lift",
    "sphere_point",
    "sphere_velocity",
    "spherical_kepler",
    "spherical_pendulum",
    "tait_bryan",
]


def _so3() -> Any:
    from chetaev.liegroups import SO3

    return SO3


def _space(x0: np.ndarray) -> Any:
    """``chetaev.liegroups.Sphere2`` with origin ``x0`` (action, velocity, pulled-back
    gradient of S² = SO(3)/SO(2), homogeneous-spaces paper §2, Prop. 2.2)."""
    from chetaev.liegroups import Sphere2

    return Sphere2(x0)


def _unit(x0: Any, name: str = "x0") -> np.ndarray:
    x0 = real_array(x0, name)
    if x0.shape != (3,) or abs(np.linalg.norm(x0) - 1.0) > 1e-12:
        raise InputError(f"`{name}` must be a unit vector of shape (3,), got {x0!r}. Normalize it.")
    return x0


def _rotation(g: Any, name: str = "g") -> np.ndarray:
    g = real_array(g, name)
    if g.ndim < 2 or g.shape[-2:] != (3, 3):
        raise InputError(
            f"`{name}` must be a rotation matrix of shape (..., 3, 3), got shape {g.shape}."
        )
    return g


def _regularized_inertia(x0: np.ndarray, mass: float, regularization: float) -> np.ndarray:
    """𝕀_reg = m (I − x₀x₀ᵀ) + M x₀x₀ᵀ of the lift (validates m and M)."""
    mass = real_scalar(mass, "mass", positive=True)
    if not (
        isinstance(regularization, (int, float, np.integer, np.floating))
        and np.isfinite(regularization)
        and regularization > 0
    ):
        raise InputError(
            f"`regularization` M must be positive and finite, got {regularization}. Any M > 0 "
            "gives the same dynamics on the constraint (e.g. M = mass)."
        )
    P = np.outer(x0, x0)
    return mass * (np.eye(3) - P) + float(regularization) * P


def _symbolic_lift(
    potential: Callable[[list], Any], mass: float, regularization: float, x0: Any
) -> ConstrainedSystem:
    """The lift of :func:`sphere_lift` built by
    :func:`chetaev.discrete_lagrangian.symbolic.from_trivialized_lagrangian` (needs sympy):
    ℓ = ½ ηᵀ𝕀_reg η − V(g x₀) with the constraint x₀·η = 0, exact derivatives and kernels
    (the compiled backend). ``potential`` maps the sympy entries ``[x₁, x₂, x₃]`` of x = g x₀
    to V(x)."""
    import sympy as sp
    from chetaev.discrete_lagrangian.symbolic import from_trivialized_lagrangian

    x0 = _unit(x0)
    inertia = _regularized_inertia(x0, mass, regularization)
    g, e = sp.MatrixSymbol("g", 3, 3), sp.symbols("e0:3")
    x = [sum(g[i, j] * float(x0[j]) for j in range(3) if x0[j] != 0.0) for i in range(3)]
    kinetic = sum(
        0.5 * float(inertia[i, j]) * e[i] * e[j]
        for i in range(3)
        for j in range(3)
        if inertia[i, j] != 0.0
    )
    phi = sum(float(x0[i]) * e[i] for i in range(3) if x0[i] != 0.0)
    return from_trivialized_lagrangian(_so3(), kinetic - potential(x), e, g=g, nonholonomic=[phi])


def sphere_lift(
    potential: Callable[[np.ndarray], np.ndarray],
    potential_grad: Callable[[np.ndarray], np.ndarray],
    *,
    mass: float = 1.0,
    regularization: float = 1.0,
    x0: Any = (0.0, 0.0, 1.0),
    potential_hess: Callable[[np.ndarray], np.ndarray] | None = None,
    space: Any = None,
) -> ConstrainedSystem:
    """Nonholonomic lift to SO(3) of L(x, ẋ) = (m/2)|ẋ|² − V(x) on S² (paper §2; §5).

    Parameters
    ----------
    potential, potential_grad
        V(x) → ``(...)`` and its ambient gradient ∇V(x) → ``(..., 3)`` for points x
        ``(..., 3)`` (broadcasting).
    mass
        m > 0.
    regularization
        M ≠ 0 (the coefficient of (M/2)(x₀·η)²; must be > 0 for a positive definite 𝕀_reg).
        It changes the discrete trajectory only at O(h^{2s−2}) (see the docs' theory page).
    x0
        Origin of S² (default the north pole e₃); 𝔥 = span{x₀}, 𝔪 = x₀^⊥.
    potential_hess
        Optional ambient Hessian ``(..., 3, 3)``; gives an analytic Newton Jacobian.
    space
        Optional ``chetaev.liegroups.Sphere2`` (e.g. ``S2``); its origin ``x0`` is used.

    Returns
    -------
    ConstrainedSystem
        ``TrivializedMechanicalSystem(SO3, 𝕀_reg, V(g x₀), …)`` with the constraint
        ``LinearVelocityConstraint(x₀ᵀ)``: φ(η) = x₀·η.
    """
    x0 = _unit(space.x0 if space is not None else x0)
    for name, f in (("potential", potential), ("potential_grad", potential_grad)):
        if not callable(f):
            raise InputError(
                f"`{name}` must be a callable of the points x (..., 3), got {type(f).__name__}."
            )
    if potential_hess is not None and not callable(potential_hess):
        raise InputError(
            "`potential_hess` must be None or a callable x (..., 3) -> (..., 3, 3), got "
            f"{type(potential_hess).__name__}."
        )
    inertia = _regularized_inertia(x0, mass, regularization)
    S2x, SO3 = _space(x0), _so3()
    X0 = SO3.hat(x0)
    K = S2x.kernels  # unchecked project / pullback_gradient (g comes from the step, validated)

    def V(g: np.ndarray) -> np.ndarray:
        return np.asarray(potential(S2x.project(g, check=False)), dtype=float)

    def gradV(g: np.ndarray) -> np.ndarray:  # N₀ = x₀ × (gᵀ ∇V(g x₀))
        g = np.asarray(g, dtype=float)
        grad = np.asarray(potential_grad(K.project(g)), dtype=float)
        return K.pullback_gradient(g, grad)

    hessV = None
    if potential_hess is not None:

        def hessV(g: np.ndarray) -> np.ndarray:
            # ∂/∂ε_k [x₀ × (e^{−εê_k} gᵀ ∇V(g e^{εê_k} x₀))] = x̂₀ ŵ e_k − x̂₀ gᵀ∇²V g x̂₀ e_k
            g = np.asarray(g, dtype=float)
            x = S2x.project(g, check=False)
            w = np.einsum("...ji,...j->...i", g, np.asarray(potential_grad(x), dtype=float))
            Hs = np.swapaxes(g, -1, -2) @ np.asarray(potential_hess(x), dtype=float) @ g
            return X0 @ SO3.hat(w, check=False) - X0 @ Hs @ X0

    sysm = TrivializedMechanicalSystem(_so3(), inertia, V, gradV, hessV)
    return ConstrainedSystem(sysm, LinearVelocityConstraint(x0[None, :].copy()))


def spherical_pendulum(
    mass: float = 1.0,
    regularization: float = 1.0,
    alpha: float = 1.0,
    x0: Any = (0.0, 0.0, 1.0),
    *,
    symbolic: bool = False,
) -> ConstrainedSystem:
    """Spherical pendulum, L = (m/2)|ẋ|² + γ·x with γ = (0, 0, −α) (homogeneous-spaces §5.1).

    Energy E = (m/2)|ẋ|² + α x₃; the continuous multiplier is λ ≡ 0 (paper §5.1). With
    ``symbolic=True`` the same lift (ℓ = ½ηᵀ𝕀_reg η − α (g x₀)₃, x₀·η = 0) through
    :func:`chetaev.discrete_lagrangian.symbolic.from_trivialized_lagrangian` (needs sympy;
    exact derivatives and, with numba, the compiled backend's kernels).
    """
    alpha = real_scalar(alpha, "alpha")
    if symbolic:
        return _symbolic_lift(lambda x: alpha * x[2], mass, regularization, x0)
    gamma = np.array([0.0, 0.0, -alpha])
    return sphere_lift(
        lambda x: -np.asarray(x) @ gamma,
        lambda x: np.broadcast_to(-gamma, np.shape(x)).copy(),
        mass=mass,
        regularization=regularization,
        x0=x0,
        potential_hess=lambda x: np.zeros((*np.shape(x), 3)),
    )


def spherical_kepler(
    mass: float = 1.0,
    regularization: float = 1.0,
    rho: float = 1.0,
    center: Any = (0.0, 0.0, 1.0),
    x0: Any = (0.0, 0.0, 1.0),
    *,
    symbolic: bool = False,
) -> ConstrainedSystem:
    """Spherical Kepler problem, V(x) = −ρ c/√(1 − c²), c = X·x (homogeneous-spaces §5.2).

    V = −ρ cot ϑ with ϑ the angle to the centre X (default X = e₃, paper §5.2); λ ≡ 0. With
    ``symbolic=True`` the same lift through
    :func:`chetaev.discrete_lagrangian.symbolic.from_trivialized_lagrangian` (needs sympy;
    exact derivatives and, with numba, the compiled backend's kernels).
    """
    X = _unit(center, "center")
    rho = real_scalar(rho, "rho")
    if symbolic:
        import sympy as sp

        def V_sym(x: list) -> Any:
            c = sum(float(X[i]) * x[i] for i in range(3) if X[i] != 0.0)
            return -rho * c / sp.sqrt(1 - c**2)

        return _symbolic_lift(V_sym, mass, regularization, x0)

    def V(x: np.ndarray) -> np.ndarray:
        c = np.asarray(x) @ X
        return -rho * c / np.sqrt(1.0 - c * c)

    def dV(x: np.ndarray) -> np.ndarray:
        c = np.asarray(x) @ X
        return (-rho * (1.0 - c * c) ** -1.5)[..., None] * X

    def d2V(x: np.ndarray) -> np.ndarray:
        c = np.asarray(x) @ X
        return (-3.0 * rho * c * (1.0 - c * c) ** -2.5)[..., None, None] * np.outer(X, X)

    return sphere_lift(V, dV, mass=mass, regularization=regularization, x0=x0, potential_hess=d2V)


def sphere_point(g: Any, x0: Any = (0.0, 0.0, 1.0)) -> np.ndarray:
    """x = g x₀ ∈ S², shape ``(..., 3)`` (``Sphere2(x0).project``)."""
    return _space(_unit(x0)).project(_rotation(g), check=False)


def sphere_velocity(g: Any, eta: Any, x0: Any = (0.0, 0.0, 1.0)) -> np.ndarray:
    """ẋ = g (η × x₀), shape ``(..., 3)`` (Prop. 2.2 of the homogeneous-spaces paper;
    ``Sphere2(x0).velocity``)."""
    g = _rotation(g)
    eta = real_array(eta, "eta")
    if eta.ndim == 0 or eta.shape[-1] != 3:
        raise InputError(f"`eta` must have shape (..., 3) (in so(3)), got shape {eta.shape}.")
    try:
        np.broadcast_shapes(g.shape[:-2], eta.shape[:-1])
    except ValueError:
        raise InputError(
            f"`eta` of shape {eta.shape} does not broadcast with the batch of `g` (shape "
            f"{g.shape}): pass one row per element, or a single one."
        ) from None
    return _space(_unit(x0)).velocity(g, eta, check=False)


def tait_bryan(theta1: Any, theta2: Any, theta3: Any) -> np.ndarray:
    """g = R_z(θ₃) R_y(θ₂) R_x(θ₁) (the paper's Tait–Bryan convention, paper §5).

    The angles broadcast against each other; the result has shape ``(..., 3, 3)``.
    """
    angles = [real_array(t, f"theta{i}") for i, t in enumerate((theta1, theta2, theta3), 1)]
    try:
        t1, t2, t3 = np.broadcast_arrays(*angles)
    except ValueError:
        raise InputError(
            "`theta1`, `theta2`, `theta3` must broadcast against each other, got shapes "
            f"{[a.shape for a in angles]}."
        ) from None

    so3 = _so3()

    def rot(t: np.ndarray, axis: int) -> np.ndarray:  # exp(t ê_axis): rotation about an axis
        xi = np.zeros((*t.shape, 3))
        xi[..., axis] = t
        return so3.exp(xi)

    return rot(t3, 2) @ rot(t2, 1) @ rot(t1, 0)
