"""Step linearizations across the protocol registry (issue 20).

For each pair of ``test_protocol.CASES``: a method that implements
``step_linearization`` (VPRK, ConstrainedPRK, DiscreteEulerLagrange, NonholonomicPRK,
LieVPRK, LieNonholonomicPRK, GNI, DSOCSIntegrator, ReducedGNI, the discretization-map family:
DiscretizationMapMethod, Rattle, ExtrinsicEulerBA, StageConstrainedBaseline,
LieDiscretizationMapMethod, and the compositions: dl's Composition (euler_ba, triple_jump) and
chetaev.gni.Composition) gives Jacobians A = ∂(q1, p1)/∂(q0, p0) and B = ∂(q1, p1)/∂u
that agree with central finite differences of ``step`` on the registry's problem, unforced
and (for the methods that take forces) with F = −0.1 v + u, single and batched (two
members); on a group in the tangent coordinates of the method's retraction,
(g τ(ε), μ + δμ); the GNI (and its composition) in its complete state (q, v, λ) (its step
reads the carried multiplier λ_k), the ReducedGNI in its
complete state (x, g τ(ε), v, λ)
(``chetaev.discrete_lagrangian.testing.step_finite_differences`` in ``lin.coordinates``); the
DSOCS at node 0 of its family in (q, v) through its start (after a step: the two-step state
(q, q_next), tested in packages/dsocs/tests/test_forces.py).
Every other method raises ``LinearizationNotSupportedError`` (an ``InputError``). Every pair
whose method takes forces and linearizes is also run with a nonlinear configuration-dependent
force and a control (``test_forced_linearization_every_pair``): the forced Lie methods and the
forced GNI linearize the forced step equations (issue 20).

The bound ``step_fd_rtol(h)`` is derived in ``packages/discrete-lagrangian/tests/
test_linearization.py``: central differences (δ = 1e-5) of the step solved at the rounding
floor, (64·eps/δ + tol)·max(1, 2/|h|) + δ² of max|[A B]| (5.7e-8 at the registry's h = 0.05,
2.9e-8 at h = 0.1). Measured worst over the registry (50 linearizations, OPENBLAS_NUM_THREADS=1
and unset): 4.4e-10 (ConstrainedPRK-2, unforced, batched), 1/130 of its bound; NonholonomicPRK
1.1e-10, LieVPRK 2.2e-11, LieNonholonomicPRK 2.9e-11, GNI 1.3e-10, DSOCS 1.6e-11, ReducedGNI
6.6e-12 (in (x, g, v)). The discretization-map
pairs and the compositions (worst over single/batched, unforced/forced; then with the
nonlinear force of ``test_forced_linearization_every_pair``; OPENBLAS_NUM_THREADS=1 and unset,
identical): dmap-euler-ba 3.0e-10 / 2.0e-10 (the chain rule over two sub-steps),
extrinsic-euler-ba 2.1e-10 / 1.9e-10, triple-jump 1.0e-10 / 7.4e-11, euler-a, rattle,
midpoint-nullspace and baseline ≤ 8.5e-11 / 8.0e-11, LieDmap-rattle 5.6e-11 / 5.1e-11,
GNI-composition-BA 1.1e-10 / 1.9e-10 (the chain rule on the members' (q, v, λ)); worst
1/190 of the bound.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest
from _siblings import sibling
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    ForcesNotSupportedError,
    InputError,
    LagrangianSystem,
    LinearizationNotSupportedError,
    MechanicalSystem,
    Method,
    TrivializedLagrangianSystem,
    TrivializedMechanicalSystem,
)
from chetaev.discrete_lagrangian.testing import step_fd_rtol, step_linearization_error
from chetaev.gni import ReducedSystem

# the registry and its forced systems (F = −0.1 v + u) of the forces' protocol test
_FORCES = sibling("test_forces_protocol.py")
CASES, IDS = _FORCES.CASES, _FORCES.IDS


def _implements(method: Method) -> bool:
    return type(method)._step_linearization_impl is not Method._step_linearization_impl


def _second_velocity(system: Any, q0: np.ndarray, v0: np.ndarray) -> np.ndarray:
    """The second batch member's velocity: v0/2, or v0 where v0/2 leaves an affine velocity
    constraint's set (Φ(q0, v0/2) ≠ 0)."""
    con = getattr(system, "constraint", None)
    if con is None or getattr(con, "is_holonomic", False):
        return 0.5 * v0
    if np.max(np.abs(con.residual(q0, 0.5 * v0))) > 1e-12:
        return v0
    return 0.5 * v0


@pytest.mark.parametrize(("name", "make_method", "make_problem"), CASES, ids=IDS)
def test_linearization_or_refusal(name: str, make_method, make_problem) -> None:
    """Jacobians against finite differences, or the refusal (module docstring)."""
    method = make_method()
    system, q0, v0, h = make_problem()
    if not _implements(method):
        s0 = method.initial_state(system, q0, v0)
        with pytest.raises(LinearizationNotSupportedError, match="does not implement"):
            method.step_linearization(system, s0, h)
        assert issubclass(LinearizationNotSupportedError, InputError)
        return
    from chetaev.dsocs import DSOCS

    assert isinstance(system, (LagrangianSystem, MechanicalSystem, ConstrainedSystem,
                               TrivializedLagrangianSystem, TrivializedMechanicalSystem,
                               ReducedSystem, DSOCS)), name
    on_group = _configuration_ndim(system) > 1
    forced = _FORCES._forced(system)
    q0, v0 = np.asarray(q0, dtype=float), np.asarray(v0, dtype=float)
    for batched in (False, True):
        qb = np.stack([q0, q0 if not on_group else system.group.compose(q0, q0)]) \
            if batched else q0
        vb = np.stack([v0, _second_velocity(system, q0, v0)]) if batched else v0
        runs = ((system, None), (forced, np.array([0.2])))
        for sys_, u in runs if method.supports_forces else runs[:1]:
            state = method.initial_state(sys_, qb, vb)
            _, err = step_linearization_error(method, sys_, state, h, u)
            assert err <= step_fd_rtol(h), (name, batched, u, err)


def _configuration_ndim(system: Any) -> int:
    """Trailing axes of one configuration of the system's states: 1 on a vector space and
    for a ``ReducedSystem`` (its states hold the shape coordinates x), ``len(group.shape)``
    on a group."""
    base = system.system if isinstance(system, ConstrainedSystem) else system
    group = getattr(base, "group", None)
    if group is None or isinstance(base, ReducedSystem):
        return 1
    return len(tuple(group.shape))


def _nonlinear_forced(system: Any) -> Any:
    """``system`` with the configuration-, velocity- and control-dependent force
    F = −0.1(1 + s(q)²)v + u·b, s(q) the first coordinate (on a group the entry (0, −1) of
    the element: a translation of SE(2), a rotation entry of SO(3); on a ``ReducedSystem``
    the first shape coordinate, v = (ẋ, ξ)), b = (1, 0.5, 0, ...); no ``force_derivatives``
    (the system's central differences in the Newton matrix and the linearization), or None
    for a system of another kind."""
    base = system.system if isinstance(system, ConstrainedSystem) else system
    gnd = _configuration_ndim(system)

    def force(q, v, u):
        q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
        sq = q[(Ellipsis, 0)] if gnd == 1 else q[(Ellipsis,) + (0,) * (gnd - 1) + (-1,)]
        b = np.zeros(v.shape[-1])
        b[:2] = (1.0, 0.5)[: v.shape[-1]]
        return -0.1 * (1.0 + sq * sq)[..., None] * v + u[..., :1] * b

    from chetaev.dsocs import DSOCS

    if not isinstance(base, (LagrangianSystem, MechanicalSystem, TrivializedLagrangianSystem,
                             TrivializedMechanicalSystem, ReducedSystem, DSOCS)):
        return None
    forced = attrs.evolve(base, force=force, n_controls=1)
    return attrs.evolve(system, system=forced) if base is not system else forced


def _linearizes_with_forces(make_method) -> bool:
    """Whether the pair's method implements ``step_linearization`` and takes forces."""
    method = make_method()
    return _implements(method) and method.supports_forces is True


# selected at collection time (no pair skips at run time); a method that gains a
# linearization or forces joins automatically
FORCED_CASES = [case for case in CASES if _linearizes_with_forces(case[1])]
FORCED_IDS = [case[0] for case in FORCED_CASES]


def test_forced_linearization_selection() -> None:
    """The pairs of :func:`test_forced_linearization_every_pair` are what its docstring says:
    every pair of the registry whose method takes forces and implements
    ``step_linearization``, and no other. A selected method declares both; each pair left
    out is refused, by ``step_linearization`` (``LinearizationNotSupportedError``) or, for a
    forced system, by ``ForcesNotSupportedError``; every class of the module docstring's
    list that takes forces is among the selected (VPRK, ConstrainedPRK,
    DiscreteEulerLagrange, NonholonomicPRK in both forms, LieVPRK, LieNonholonomicPRK,
    GNI)."""
    selected = set(FORCED_IDS)
    assert len(selected) == len(FORCED_IDS)
    for name, make_method, make_problem in CASES:
        method = make_method()
        if name in selected:
            assert _implements(method) and method.supports_forces is True, name
            continue
        system, q0, v0, h = make_problem()
        if not _implements(method):
            with pytest.raises(LinearizationNotSupportedError):
                method.step_linearization(system, method.initial_state(system, q0, v0), h)
        else:
            forced = _FORCES._forced(system)
            with pytest.raises(ForcesNotSupportedError):
                method.step_linearization(forced, method.initial_state(forced, q0, v0), h,
                                          u=np.array([0.2]))
    classes = {type(make_method()).__name__ for _, make_method, _ in FORCED_CASES}
    assert {"VPRK", "ConstrainedPRK", "DiscreteEulerLagrange", "NonholonomicPRK", "LieVPRK",
            "LieNonholonomicPRK", "GNI"} <= classes, classes
    forms = {make_method().form for name, make_method, _ in FORCED_CASES
             if name.startswith("NHPRK")}
    assert forms == {"lagrangian", "hamiltonian"}, forms


@pytest.mark.parametrize(("name", "make_method", "make_problem"), FORCED_CASES, ids=FORCED_IDS)
def test_forced_linearization_every_pair(name: str, make_method, make_problem) -> None:
    """Every (method, forced problem) pair of the registry whose method takes forces and
    implements ``step_linearization``, with the nonlinear force of
    :func:`_nonlinear_forced` (configuration dependent, so the force's q- or g-derivative is
    in the Newton matrix of the IFT; a control, so B is checked): [A B] against central
    differences of the step, single and batched, bound ``step_fd_rtol(h)`` (5.7e-8 at the
    registry's h = 0.05; the force's central-difference Jacobian, ~1e-10 relative, enters
    at O(h)). Measured worst over the 17 pairs (single and batched, OPENBLAS_NUM_THREADS=1
    and unset): 2.1e-10 (GNI-euler_a), 1/270 of the bound; LieVPRK 1.7e-11,
    LieNonholonomicPRK 2.2e-11, NonholonomicPRK (both forms) 1.0e-10, ConstrainedPRK 5.0e-11,
    DEL 4.1e-11, VPRK 5.5e-12, DSOCS 1.2e-11."""
    method = make_method()
    system, q0, v0, h = make_problem()
    forced = _nonlinear_forced(system)
    assert forced is not None, name
    on_group = _configuration_ndim(system) > 1
    q0, v0 = np.asarray(q0, dtype=float), np.asarray(v0, dtype=float)
    for batched in (False, True):
        qb = np.stack([q0, q0 if not on_group else system.group.compose(q0, q0)]) \
            if batched else q0
        vb = np.stack([v0, _second_velocity(system, q0, v0)]) if batched else v0
        u = np.array([[0.2], [-0.3]]) if batched else np.array([0.2])
        state = method.initial_state(forced, qb, vb, u=u)
        lin, err = step_linearization_error(method, forced, state, h, u)
        assert lin.B.shape[-1] == 1 and np.max(np.abs(lin.B)) > 0.0, name
        assert err <= step_fd_rtol(h), (name, batched, err)
