"""Forces and controls across the protocol registry (issue 20): never silently ignored.

For each pair of ``test_protocol.CASES``: a method that declares ``supports_forces`` takes one
step of the problem with an external force (a dissipative F = −c v added to the registry's
system) and a control; every other method raises ``ForcesNotSupportedError`` (an
``InputError``) naming itself, both for a forced system (in ``initial_state``, hence in
``integrate``) and for a control ``u`` given to ``step``. ``NonholonomicPRK`` takes forces in
both its forms (the forced nonholonomic PRK; the Hamiltonian form on the engine's
Hamiltonian unknowns). The Lie-group PRKs (``LieVPRK``, ``LieNonholonomicPRK``, including the
S² homogeneous-space lift) take the left-trivialized force as a stage force of the Lie engine.
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
    LagrangianSystem,
    MechanicalSystem,
    TrivializedLagrangianSystem,
    TrivializedMechanicalSystem,
    integrate,
)
from chetaev.gni import ReducedSystem

_REGISTRY = sibling("test_protocol.py")
CASES, IDS = _REGISTRY.CASES, _REGISTRY.IDS
_SYSTEMS = (LagrangianSystem, MechanicalSystem, TrivializedLagrangianSystem,
            TrivializedMechanicalSystem, ReducedSystem)


def _damping(q, v, u):
    return -0.1 * np.asarray(v) + u[..., :1]


def _forced(system: Any) -> Any:
    """The registry's system with F = −0.1 v + u (one control; on a reduced system
    ``v = (ẋ, ξ)``; a DSOCS takes ``force=`` itself, issue 20), or None for a system of
    another kind."""
    from chetaev.dsocs import DSOCS

    if isinstance(system, (*_SYSTEMS, DSOCS)):
        return attrs.evolve(system, force=_damping, n_controls=1)
    if isinstance(system, ConstrainedSystem) and isinstance(system.system, _SYSTEMS):
        return attrs.evolve(system, system=attrs.evolve(system.system, force=_damping,
                                                        n_controls=1))
    return None


@pytest.mark.parametrize(("name", "make_method", "make_problem"), CASES, ids=IDS)
def test_forces_are_taken_or_refused(name: str, make_method, make_problem) -> None:
    method = make_method()
    system, q0, v0, h = make_problem()
    forced = _forced(system)
    u = np.array([0.2])
    if method.supports_forces:
        assert forced is not None, name
        s0 = method.initial_state(forced, q0, v0)
        s1 = method.step(forced, s0, h, u=u)
        free = method.step(system, method.initial_state(system, q0, v0), h)
        # the force changes the step (q, or only v for a method whose first force term is
        # the right discrete force: GNI Euler B, f_d⁻ = 0)
        assert np.all(np.isfinite(s1.q)) and not (np.array_equal(s1.q, free.q)
                                                  and np.array_equal(s1.v, free.v))
        assert np.isfinite(s1.info["work"])
        sol = integrate(forced, method, q0, v0, h=h, n_steps=3, controls=np.full((3, 1), 0.2))
        assert sol.success, sol.message
        return
    msg = r"does not take external forces yet; use VPRK or ConstrainedPRK"
    if forced is not None:
        with pytest.raises(ForcesNotSupportedError, match=msg):
            method.initial_state(forced, q0, v0)
        with pytest.raises(ForcesNotSupportedError, match=msg):
            integrate(forced, method, q0, v0, h=h, n_steps=2, controls=np.zeros((2, 1)))
    s0 = method.initial_state(system, q0, v0)
    with pytest.raises(ForcesNotSupportedError, match=msg):
        method.step(system, s0, h, u=u)


def test_nonholonomic_prk_takes_forces_in_its_lagrangian_form() -> None:
    """The registry's NonholonomicPRK cases: forced in both forms (issue 20; the Hamiltonian
    form on the engine's Hamiltonian unknowns, issue 15)."""
    nh = [(name, make_method()) for name, make_method, _ in CASES if name.startswith("NHPRK")]
    assert len(nh) >= 3
    for name, method in nh:
        assert method.supports_forces, name


def test_every_registry_method_takes_forces() -> None:
    """Issue 20: every method of the registry takes forces (``supports_forces``): the GNI
    cases (all variants, the composition), the discretization maps (vector space and Lie
    group), ReducedGNI (``ReducedSystem(force=...)``) and DSOCS (``DSOCS(force=...)``) as well
    as the PRK methods; each is stepped with a force above."""
    assert len(CASES) >= 20
    for name, make_method, _ in CASES:
        assert make_method().supports_forces, name


def test_lie_group_prks_take_forces() -> None:
    """The registry's LieVPRK and LieNonholonomicPRK cases (SO(3), SE(2), the S² lift) are
    forced methods (issue 20); each is stepped with a force above."""
    lie = [(name, make_method()) for name, make_method, _ in CASES
           if name.startswith(("LieVPRK", "LieNHPRK"))]
    assert len(lie) >= 4
    for name, method in lie:
        assert method.supports_forces, name
