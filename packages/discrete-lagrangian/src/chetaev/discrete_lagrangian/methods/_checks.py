"""attrs validators for the options of the integrators (messages name the argument).

Kept apart from ``_validation`` (the checks of user data): these check a method's own
options once, at construction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._util._errors import InputError
from ..core._solver import NewtonOptions

__all__ = ["is_flag", "is_newton_options", "is_tolerance"]


def is_newton_options(inst: Any, attribute: Any, value: Any) -> None:
    """``newton`` must be a :class:`NewtonOptions`."""
    if not isinstance(value, NewtonOptions):
        raise InputError(
            f"{type(inst).__name__}({attribute.name}=...) must be a NewtonOptions, e.g. "
            f"NewtonOptions(tol=1e-12, max_iter=50); got {value!r}."
        )


def is_tolerance(inst: Any, attribute: Any, value: Any) -> None:
    """A tolerance: a real, finite, positive number."""
    ok = not isinstance(value, (bool, np.bool_, str, bytes)) and not np.iscomplexobj(value)
    if ok:
        try:
            ok = bool(np.isfinite(float(value)) and float(value) > 0)
        except (TypeError, ValueError):
            ok = False
    if not ok:
        raise InputError(
            f"{type(inst).__name__}({attribute.name}=...) must be a positive finite number "
            f"(e.g. 1e-10); got {value!r}."
        )


def is_flag(inst: Any, attribute: Any, value: Any) -> None:
    """A boolean option."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(
            f"{type(inst).__name__}({attribute.name}=...) must be True or False; got {value!r}."
        )
