"""Step linearizations across the protocol registry (issue 20).

For each pair of ``test_protocol.CASES``: a method that implements
``step_linearization`` (VPRK, ConstrainedPRK, DiscreteEulerLagrange) gives Jacobians
A = ∂(q1, p1)/∂(q0, p0) and B = ∂(q1, p1)/∂u that agree with central finite differences of
``step`` on the registry's problem, unforced and with F = −0.1 v + u, single and batched
(two members); every other method raises ``LinearizationNotSupportedError`` (an
``InputError``).

The bound ``fd_rtol(h)`` is derived in ``packages/discrete-lagrangian/tests/
test_linearization.py``: central differences (δ = 1e-5) of the step solved at the rounding
floor, (64·eps/δ + tol)·max(1, 2/|h|) + δ² of max|[A B]| (5.7e-8 at the registry's h = 0.05).
Measured worst over the registry: 4.4e-10 (ConstrainedPRK-2, unforced, batched).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConstrainedSystem,
    InputError,
    LagrangianSystem,
    LinearizationNotSupportedError,
    MechanicalSystem,
    Method,
    NewtonOptions,
)


def _load_registry() -> Any:
    """``test_protocol`` by path (the suite runs with ``--import-mode=importlib``)."""
    spec = importlib.util.spec_from_file_location(
        "_chetaev_protocol_registry_linearization", Path(__file__).with_name("test_protocol.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_REGISTRY = _load_registry()
CASES, IDS = _REGISTRY.CASES, _REGISTRY.IDS
DELTA = 1e-5
TIGHT = NewtonOptions(tol=1e-16)  # raised to 64·eps: the steps of the differences
EPS64 = 64 * np.finfo(float).eps


def fd_rtol(h):
    """Bound of max|[A B] − FD| / max|[A B]| (module docstring)."""
    return (EPS64 / DELTA + NewtonOptions().tol) * max(1.0, 2.0 / abs(h)) + DELTA**2


def _tight(method):
    """The same method with its Newton solves at the rounding floor (the same step map)."""
    return attrs.evolve(method, newton=TIGHT)


def _damping(q, v, u):
    return -0.1 * np.asarray(v) + u[..., :1]


def _forced(system: Any) -> Any:
    if isinstance(system, (LagrangianSystem, MechanicalSystem)):
        return attrs.evolve(system, force=_damping, n_controls=1)
    return attrs.evolve(system, system=attrs.evolve(system.system, force=_damping,
                                                    n_controls=1))


def _implements(method: Method) -> bool:
    return type(method)._step_linearization_impl is not Method._step_linearization_impl


def _fd(method, system, state, h, u):
    n = state.q.shape[-1]
    tight = _tight(method)

    def f(q, p, uu):
        st = attrs.evolve(state, q=q, p=p, v=system.legendre_inv(q, p), carry={})
        new = tight.step(system, st, h, u=uu)
        return np.concatenate([new.q, new.p], -1)

    cols = []
    for j in range(2 * n):
        e = np.zeros(2 * n)
        e[j] = DELTA
        cols.append((f(state.q + e[:n], state.p + e[n:], u)
                     - f(state.q - e[:n], state.p - e[n:], u)) / (2 * DELTA))
    if u is not None:
        e = np.array([DELTA])
        cols.append((f(state.q, state.p, u + e) - f(state.q, state.p, u - e)) / (2 * DELTA))
    return np.stack(cols, -1)


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
    assert isinstance(system, (LagrangianSystem, MechanicalSystem, ConstrainedSystem)), name
    forced = _forced(system)
    q0, v0 = np.asarray(q0, dtype=float), np.asarray(v0, dtype=float)
    for batched in (False, True):
        qb = np.stack([q0, q0]) if batched else q0
        vb = np.stack([v0, 0.5 * v0]) if batched else v0
        for sys_, u in ((system, None), (forced, np.array([0.2]))):
            state = method.initial_state(sys_, qb, vb)
            lin = method.step_linearization(sys_, state, h, u=u)
            AB = np.concatenate([lin.A, lin.B], -1)
            err = np.max(np.abs(AB - _fd(method, sys_, state, h, u))) / np.max(np.abs(AB))
            assert err <= fd_rtol(h), (name, batched, u, err)
