"""Symplectic integrators for holonomic constraints from discretization maps.

Paper: M. Barbero Liñán, D. Martín de Diego, R. T. Sato Martín de Almagro, "A new
perspective on symplectic integration of constrained mechanical systems via discretization
maps" (2024).  The methods and the paper's errata: the docs' pages discretization_maps and
theory/discretization_maps_theory.

Every integrator here has the ``initial_state`` / ``step`` protocol and is run by
:func:`chetaev.discrete_lagrangian.integrate` on a
``ConstrainedSystem(MechanicalSystem(...), HolonomicConstraint(...))`` (vector space,
constant mass) or, for :class:`LieDiscretizationMapMethod`, on a
``TrivializedMechanicalSystem`` or a ``ConstrainedSystem`` over a group whose
``HolonomicConstraint`` has a left-trivialized Jacobian ``(m, d)``.

Vector-space methods
    :class:`DiscretizationMap` (the θ-family and its cotangent lift),
    :class:`DiscretizationMapMethod` (Euler A θ=0, Euler B θ=1, midpoint θ=½, any θ;
    ``nullspace=True`` for the multiplier-free form of §4.2), :func:`rattle` /
    :class:`Rattle` (5.16)–(5.18), :func:`compose` / :class:`Composition` (5.7)–(5.10),
    :func:`euler_ba` (the literal composition Euler B(h/2)∘Euler A(h/2), a different
    symmetric order-2 method than RATTLE) and its extrinsic joint-solve form
    :class:`ExtrinsicEulerBA`, :func:`triple_jump`.
Lie-group methods (§6)
    :class:`LieDiscretizationMapMethod` with kind ``"euler_a"``, ``"euler_b"``,
    ``"lobatto2"`` ((6.4)–(6.7)), ``"rattle"`` ((6.8)–(6.10)) and retraction ``"cayley"`` or
    ``"exp"``.
Multipliers
    ``State.lam`` / ``Trajectory.lam[k]`` is the consistent continuous multiplier
    λ(q_k, v_k) (``ConstrainedSystem.multiplier``) at the discrete node, so it is
    comparable across methods; the paper's discrete multipliers (scaled by h, split between
    the step points) are in ``State.info["lam_left"]`` and ``["lam_right"]``. The PRK methods
    (``ConstrainedPRK``) store the raw stage multiplier Λ^s instead (see ``State``).
    Exception: :class:`StageConstrainedBaseline` stores its stage multiplier ν/h².
Baseline
    :class:`StageConstrainedBaseline`: the stage-constrained variational integrator the
    paper criticises (eq. (1.2)); its step points leave the constraint set at O(h²).
"""

from .methods._dmaps_euclid import (
    Composition,
    DiscretizationMap,
    DiscretizationMapMethod,
    ExtrinsicEulerBA,
    Rattle,
    StageConstrainedBaseline,
    compose,
    euler_ba,
    rattle,
    triple_jump,
)
from .methods._dmaps_lie import LieDiscretizationMapMethod

__all__ = [
    "Composition",
    "DiscretizationMap",
    "DiscretizationMapMethod",
    "ExtrinsicEulerBA",
    "LieDiscretizationMapMethod",
    "Rattle",
    "StageConstrainedBaseline",
    "compose",
    "euler_ba",
    "rattle",
    "triple_jump",
]
