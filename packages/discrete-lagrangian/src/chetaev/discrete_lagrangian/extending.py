"""``chetaev.discrete_lagrangian.extending``: the pieces a method written in another package
builds on.

The integrators of ``chetaev.nh_integrators`` and ``chetaev.gni`` are written on the numerical
core of this package (see the architecture page of the docs): they read systems through the
system interface, add external forces through the forcing hooks of the PRK engines, linearize
their steps through the implicit-function-theorem helpers, and pick the compiled backend
through the same resolver as the methods of this package. This module is the one public door
to those pieces, so that no package imports another package's private modules; a method
written outside the project uses the same names.

System interface
    :func:`interface_of`, :class:`SystemInterface`.
External forces (issue 20)
    :func:`forced_hooks` (wrap a method's stage hooks with the stage force of a forced
    system, vector space or group), :func:`discrete_work` (the work of the discrete force over
    a step), :func:`forced_multiplier` (the consistent multiplier of the forced constrained
    equations) and :func:`forced_multiplier_control_jacobian` (its derivative in the control).
Step linearizations (issue 20)
    :class:`StepLinearization`, :class:`LinearizationNotSupportedError`,
    :func:`tangent_fields`, :func:`velocity_constraint_tangent_basis`,
    :func:`lie_step_jacobians`, :func:`control_jacobian`, :class:`QColumns`,
    :func:`constant_tangents`, :func:`no_controls`, :func:`with_multiplier_directions`.
Finite differences
    :func:`fd_jacobian` (the one central-difference Jacobian of the project: per-entry steps,
    all ``2n`` evaluations in one broadcast call; used where a user supplies no derivative).
Compositions
    :class:`ComposedSteps` (the step and the chain-rule step linearization of a composition
    of methods, shared by ``discretization_maps.Composition`` and ``chetaev.gni.Composition``).
Compiled backend (issue 17)
    :func:`resolve_backend`, :class:`BackendError`, :func:`compiled_step`,
    :class:`CompiledPlan`, :func:`build_source`, :func:`constraint_force_hooks`,
    :data:`ENGINE` (the engine's numba source), :data:`LINALG`, :data:`NEWTON` and
    :data:`BATCH_DRIVERS` (its LU and max-norm pieces, the one compiled Newton driver
    ``_newton`` with the step loop's bookkeeping, and the batch drivers, which a method with a
    step of its own reuses), :data:`DENSE_MATRIX` and :data:`STRUCTURED_MATRIX` (the Newton
    matrices ``_newton`` factorises: the analytic Jacobian, part of :data:`NEWTON`, or the
    hooks' structured matrix with its fallback to the Jacobian), :func:`inline_small` and
    :data:`INLINE_LINES` (numba's IR-level inlining of chosen functions of a module
    source), :data:`TAKE` (``_take`` / ``_take_copy``: work arrays as views of one buffer
    without reference counts), :func:`lie_plan` (the compiled Lie-group engine) and
    :data:`LIE_BATCH_DRIVERS` (its batch drivers, for a Lie-group method with a step of its
    own), :data:`MEMORY_KEY`, :func:`memory_in` and :func:`memory_carry` (what each member
    keeps between compiled steps, the ``mem`` row of every ``_run_one`` of ``MEM`` floats,
    carried in ``State.carry`` so that a continued run takes the same steps as one run).
"""

from __future__ import annotations

from ._util._fd import fd_jacobian
from .core._backend import BackendError, resolve_backend
from .core._compiled_lie import LIE_BATCH_DRIVERS, lie_plan
from .core._compiled_prk import (
    BATCH_DRIVERS,
    DENSE_MATRIX,
    ENGINE,
    INLINE_LINES,
    LINALG,
    MEMORY_KEY,
    NEWTON,
    STRUCTURED_MATRIX,
    TAKE,
    CompiledPlan,
    build_source,
    compiled_step,
    constraint_force_hooks,
    inline_small,
    memory_carry,
    memory_in,
)
from .core._forcing import discrete_work, forced_hooks, forced_multiplier_control_jacobian
from .core._interface import SystemInterface, interface_of
from .core._linearization import (
    LinearizationNotSupportedError,
    StepLinearization,
    lie_step_jacobians,
    tangent_fields,
    velocity_constraint_tangent_basis,
    with_multiplier_directions,
)
from .core._linearization import _control_jacobian as control_jacobian
from .core._linearization import _QColumns as QColumns
from .core._prk import _constant_tangents as constant_tangents
from .core._prk import fixed_order_product
from .methods._constrained_prk import _forced_multiplier as forced_multiplier
from .methods._dmaps_euclid import ComposedSteps
from .methods._vprk import _no_controls as no_controls

__all__ = [
    "BATCH_DRIVERS",
    "DENSE_MATRIX",
    "ENGINE",
    "INLINE_LINES",
    "LIE_BATCH_DRIVERS",
    "LINALG",
    "MEMORY_KEY",
    "NEWTON",
    "STRUCTURED_MATRIX",
    "TAKE",
    "BackendError",
    "CompiledPlan",
    "ComposedSteps",
    "LinearizationNotSupportedError",
    "QColumns",
    "StepLinearization",
    "SystemInterface",
    "build_source",
    "compiled_step",
    "constant_tangents",
    "constraint_force_hooks",
    "control_jacobian",
    "discrete_work",
    "fd_jacobian",
    "fixed_order_product",
    "forced_hooks",
    "forced_multiplier",
    "forced_multiplier_control_jacobian",
    "inline_small",
    "interface_of",
    "lie_plan",
    "lie_step_jacobians",
    "memory_carry",
    "memory_in",
    "no_controls",
    "resolve_backend",
    "tangent_fields",
    "velocity_constraint_tangent_basis",
    "with_multiplier_directions",
]
