"""Pickling of systems: a typed error with advice when a system holds a lambda.

Methods, states, trajectories and systems built from module-level functions pickle with the
standard library (and continue bit for bit after a round trip). A system whose callables are
lambdas or locally defined functions cannot be pickled by reference; instead of the standard
library's ``Can't pickle <lambda>`` from deep inside, pickling it raises
:class:`~chetaev.discrete_lagrangian.UnpicklableError` naming the class, the field and the
function, and saying what to do.

The check runs only when an object is pickled (``copyreg`` reducers registered for the system
and constraint classes; other packages register theirs with :func:`register_picklable`).
"""

from __future__ import annotations

import copyreg
import pickle
import sys
from typing import Any

from .._util._errors import UnpicklableError

__all__ = ["register_picklable"]

_ADVICE = (
    "Pickle stores functions by their importable name, so lambdas and functions defined "
    "inside other functions cannot be pickled (e.g. sent to a process pool or a Dask "
    "worker). Define the callables as module-level functions (def potential(q): ...), or "
    "pickle with cloudpickle (cloudpickle.dumps(obj)), which serializes them by value."
)


def _describe(f: Any) -> str:
    return getattr(f, "__qualname__", None) or repr(f)


def _by_value_pickler() -> bool:
    """True inside cloudpickle (which pickles lambdas by value, so nothing is to be raised)."""
    frame = sys._getframe(2)
    while frame is not None:
        if "cloudpickle" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def _check_callable(owner: Any, field: str, f: Any) -> None:
    try:
        pickle.dumps(f, protocol=pickle.HIGHEST_PROTOCOL)
    except UnpicklableError:
        raise
    except Exception as exc:  # the standard library raises PicklingError/AttributeError/TypeError
        if _by_value_pickler():
            return
        raise UnpicklableError(
            f"Cannot pickle this {type(owner).__name__}: its field `{field.lstrip('_')}` holds "
            f"{_describe(f)!r} ({type(exc).__name__}: {exc}). {_ADVICE}"
        ) from exc


def _walk(owner: Any, field: str, value: Any, depth: int = 0) -> None:
    if depth > 3:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _walk(owner, f"{field}[{k!r}]", v, depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _walk(owner, f"{field}[{i}]", v, depth + 1)
    elif callable(value) and not isinstance(value, type) and getattr(
            type(value), "__module__", "") in ("builtins", "functools"):
        _check_callable(owner, field, value)


def _reduce(obj: Any):
    rv = object.__reduce_ex__(obj, 4)
    state = rv[2] if len(rv) > 2 else None
    if isinstance(state, tuple) and len(state) == 2:  # (dict, slots) protocol of __reduce_ex__
        items = [*(state[0] or {}).items(), *(state[1] or {}).items()]
    elif isinstance(state, dict):
        items = list(state.items())
    else:
        items = []
    for field, value in items:
        _walk(obj, str(field), value)
    return rv


def register_picklable(*classes: type) -> None:
    """Make pickling instances of ``classes`` raise :class:`UnpicklableError` (with advice)
    when a field holds a lambda or a local function, instead of the standard library's
    error. Instances without such fields pickle as before."""
    for cls in classes:
        copyreg.pickle(cls, _reduce)


def _register_own() -> None:
    """Register every class of the public ``systems`` module (its ``__all__``, the one list)."""
    from .. import systems

    register_picklable(*(obj for obj in map(systems.__dict__.get, systems.__all__)
                         if isinstance(obj, type)))


_register_own()
