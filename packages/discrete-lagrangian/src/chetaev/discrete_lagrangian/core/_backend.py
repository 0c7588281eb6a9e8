"""The ``backend`` keyword of every method (issue 17): ``"numpy"``, ``"numba"``, ``"auto"``.

One mechanism for all :class:`~chetaev.discrete_lagrangian.Method` subclasses: the metaclass
of ``Method`` takes the keyword ``backend=`` off the constructor call, checks it here
(:func:`check_backend`) and stores it on the instance (``method.backend``). A method with a
compiled path declares ``compiled_backend = True`` and implements
``_compiled_plan(system)`` (None when this configuration has no compiled path).

``"auto"`` (the default) runs compiled when numba is importable, the system provides kernels
(built by ``symbolic.from_lagrangian``; a method on other systems reads them through its
``_backend_interface(system)``) and the method has a compiled path for this
configuration (no external forces yet); otherwise numpy. ``"numba"`` raises
:class:`BackendError` when one of these is missing, saying how to get it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from .._util._errors import InputError

__all__ = ["BACKENDS", "BackendError", "check_backend", "numpy_only", "resolve_backend"]

# Set by numpy_only(): resolve_backend then chooses numpy whatever the method's backend.
_NUMPY_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("chetaev_numpy_only",
                                                                   default=False)


@contextlib.contextmanager
def numpy_only() -> Iterator[None]:
    """Within the block every step runs on the numpy path (the reference), whatever the
    method's ``backend``: used by ``Method.step_linearization``, which reads the converged
    unknowns that the numpy step records in ``State.carry``."""
    token = _NUMPY_ONLY.set(True)
    try:
        yield
    finally:
        _NUMPY_ONLY.reset(token)

#: The values of the ``backend`` keyword.
BACKENDS = ("numpy", "numba", "auto")


class BackendError(InputError):
    """A ``backend`` value that is not one of :data:`BACKENDS`, or ``backend="numba"`` where
    no compiled path exists (numba missing, a system without kernels, a method or
    configuration without a compiled step)."""


def check_backend(value: Any, method_name: str, compiled: bool) -> str:
    """``value`` checked as a ``backend`` keyword of the method ``method_name``.

    Raises
    ------
    BackendError
        A value outside :data:`BACKENDS`; ``"numba"`` for a method without a compiled path
        (``compiled`` False) or when numba is not installed.
    """
    if not isinstance(value, str) or value not in BACKENDS:
        raise BackendError(
            f"`backend` must be one of {BACKENDS}, got {value!r}. Pass backend='auto' "
            "(compiled when possible), 'numba' or 'numpy'."
        )
    if value == "numba":
        if not compiled:
            raise BackendError(
                f"backend='numba': {method_name} has no compiled path yet (compiled: "
                "DiscreteEulerLagrange, VPRK, ConstrainedPRK, NonholonomicPRK, LieVPRK, "
                "LieNonholonomicPRK, GNI, ReducedGNI, DiscretizationMapMethod, Rattle, "
                "ExtrinsicEulerBA, LieDiscretizationMapMethod and DSOCSIntegrator; see the "
                "README's compiled fast path). Use "
                "backend='numpy' or 'auto'."
            )
        from ._kernels import INSTALL_FAST, numba_available

        if not numba_available():
            raise BackendError(
                f"backend='numba' needs numba, which is not installed: {INSTALL_FAST}. Or "
                "use backend='auto' (numpy when numba is missing)."
            )
    return value


def resolve_backend(method: Any, system: Any) -> Any:
    """The compiled plan of ``method`` on ``system`` when it runs compiled, else None.

    Raises
    ------
    BackendError
        ``backend="numba"`` and the system has no kernels or the configuration has no
        compiled path.
    """
    choice = getattr(method, "backend", "auto")
    if choice == "numpy" or _NUMPY_ONLY.get() or not getattr(method, "compiled_backend", False):
        return None
    from ._interface import interface_of
    from ._kernels import numba_available

    # a method on systems outside the system interface (chetaev.gni.ReducedGNI) reads its
    # kernels through its own ``_backend_interface(system)`` (an object with ``kernels``)
    own = getattr(method, "_backend_interface", None)
    try:
        iface = interface_of(system) if own is None else own(system)
    except InputError:
        if choice == "numba":
            raise
        return None
    kernels = iface.kernels
    if kernels is None:
        if choice == "numba":
            from ._kernels import why_no_kernels

            why = why_no_kernels(system) if own is None else "a system of plain callables"
            raise BackendError(
                f"backend='numba': this {type(system).__name__} has no compiled kernels "
                f"({why}). Build it with chetaev.discrete_lagrangian.symbolic.from_lagrangian "
                "(on a Lie group: from_trivialized_lagrangian; without array params), or give "
                "every callable it needs, second derivatives included, as a numba function "
                "(@numba.njit, with vectorized=False); or use backend='numpy' / 'auto'."
            )
        return None
    if choice == "auto" and not numba_available():
        return None
    why, plan = method._compiled_plan(system, iface)
    if plan is None and choice == "numba":
        raise BackendError(f"backend='numba': {method.name} has no compiled path for {why}. "
                           "Use backend='numpy' or 'auto'.")
    return plan
