"""Step linearizations across the protocol registry (issue 20).

For each pair of ``test_protocol.CASES``: a method that implements
``step_linearization`` (VPRK, ConstrainedPRK, DiscreteEulerLagrange, NonholonomicPRK,
LieVPRK, LieNonholonomicPRK) gives Jacobians A = ∂(q1, p1)/∂(q0, p0) and B = ∂(q1, p1)/∂u
that agree with central finite differences of ``step`` on the registry's problem, unforced
and (for the methods that take forces) with F = −0.1 v + u, single and batched (two
members); on a group in the tangent coordinates of the method's retraction, (g τ(ε), μ + δμ)
(``_lie_fd``). Every other method raises ``LinearizationNotSupportedError`` (an
``InputError``).

The bound ``fd_rtol(h)`` is derived in ``packages/discrete-lagrangian/tests/
test_linearization.py``: central differences (δ = 1e-5) of the step solved at the rounding
floor, (64·eps/δ + tol)·max(1, 2/|h|) + δ² of max|[A B]| (5.7e-8 at the registry's h = 0.05,
2.9e-8 at h = 0.1). Measured worst over the registry (38 linearizations, OPENBLAS_NUM_THREADS=1
and unset): 4.4e-10 (ConstrainedPRK-2, unforced, batched), 1/130 of its bound; NonholonomicPRK
1.1e-10, LieVPRK 2.2e-11, LieNonholonomicPRK 2.9e-11.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    InputError,
    LagrangianSystem,
    LinearizationNotSupportedError,
    MechanicalSystem,
    Method,
    TrivializedLagrangianSystem,
    TrivializedMechanicalSystem,
)


def _load(path: Path, name: str) -> Any:
    """A test module by path (the suite runs with ``--import-mode=importlib``)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_HERE = Path(__file__).parent
# the registry and its forced systems (F = −0.1 v + u) of the forces' protocol test
_FORCES = _load(_HERE / "test_forces_protocol.py", "_chetaev_forces_protocol_linearization")
# the finite differences of the step and their bound (derived there)
_UNIT = _load(_HERE.parent / "packages" / "discrete-lagrangian" / "tests"
              / "test_linearization.py", "_chetaev_linearization_unit")
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
    assert isinstance(system, (LagrangianSystem, MechanicalSystem, ConstrainedSystem,
                               TrivializedLagrangianSystem, TrivializedMechanicalSystem)), name
    on_group = getattr(system, "group", None) is not None
    fd = _UNIT._lie_fd if on_group else _UNIT._fd
    forced = _FORCES._forced(system)
    q0, v0 = np.asarray(q0, dtype=float), np.asarray(v0, dtype=float)
    for batched in (False, True):
        qb = np.stack([q0, q0 if not on_group else system.group.compose(q0, q0)]) \
            if batched else q0
        vb = np.stack([v0, _second_velocity(system, q0, v0)]) if batched else v0
        runs = ((system, None), (forced, np.array([0.2])))
        for sys_, u in runs if method.supports_forces else runs[:1]:
            state = method.initial_state(sys_, qb, vb)
            lin = method.step_linearization(sys_, state, h, u=u)
            AB = np.concatenate([lin.A, lin.B], -1)
            err = np.max(np.abs(AB - fd(method, sys_, state, h, u))) / np.max(np.abs(AB))
            assert err <= _UNIT.fd_rtol(h), (name, batched, u, err)
