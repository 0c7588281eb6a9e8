"""Compiled system kernels and the on-disk module cache of the compiled backend (issue 17).

A :class:`KernelSet` is the *source text* of a system's scalar kernels; it needs no numba.
Kernels come two ways:

- the symbolic front-end (:mod:`chetaev.discrete_lagrangian.symbolic`) emits them, and a
  system built by ``symbolic.from_lagrangian`` is registered with them
  (:func:`register_kernels`);
- a system whose callables are the user's numba functions gets kernels that call them
  (``systems._numba_kernels``; the functions are bound into the generated module by
  :func:`user_function`), built on first request and then registered.

:func:`kernels_of` reads them back (exposed as ``SystemInterface.kernels``); a system of
plain Python callables has none, and :func:`why_no_kernels` says why.

:func:`load_module` turns one generated module source (kernels + a method's compiled step +
the driver loop) into an imported module: the source is written once to
``$CHETAEV_CACHE_DIR`` (default ``~/.cache/chetaev/numba``) as ``chetaev_<sha>.py``, keyed by
the SHA-256 of the source and numba's version, and imported with importlib, so numba's own
on-disk cache (``cache=True``) holds the machine code across processes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import weakref
from pathlib import Path
from typing import Any

import attrs

__all__ = ["INSTALL_FAST", "KernelSet", "bind_user_function", "cache_dir", "kernels_of",
           "load_module", "numba_available", "register_kernels", "user_function",
           "why_no_kernels"]

#: How to get numba (the optional extra of the compiled backend).
INSTALL_FAST = 'pip install "chetaev-discrete-lagrangian[fast]"'


@attrs.frozen(eq=False)
class KernelSet:
    """Scalar kernels of one system, as plain source text (no numba needed to build it).

    Attributes
    ----------
    source : str
        Python source defining one function ``NAME(q, v, out)`` per entry of ``names``.
    names : tuple of str
        ``D1L, D2L, D11L, D12L, D21L, D22L`` and, with a velocity constraint, ``phi, phi_q,
        phi_v, phi_vq, phi_vv``; with a holonomic one ``hol_phi, hol_jac, hol_hess``.
    n, m : int
        Dimension and number of constraints (0 without).
    constraint : {None, "velocity", "holonomic"}
    mechanical : bool
        True when ``D22L`` does not depend on ``v`` (``L = ½ vᵀM(q)v − V(q)`` or more
        generally quadratic in ``v``): the inverse Legendre map is one linear solve.
    mass : tuple of tuple of float or None
        The constant mass matrix, when there is one.
    forced : bool
        The system has an external force (no compiled path for forces yet).
    """

    source: str
    names: tuple
    n: int
    m: int = 0
    constraint: str | None = None
    mechanical: bool = False
    mass: tuple | None = None
    forced: bool = False


_REGISTRY: dict[int, tuple[weakref.ref, KernelSet]] = {}


def register_kernels(system: Any, kernels: KernelSet | None) -> None:
    """Attach ``kernels`` to ``system`` (weakly: the entry goes with the system)."""
    if kernels is None:
        return
    key = id(system)

    def forget(ref, key=key):
        hit = _REGISTRY.get(key)
        if hit is not None and hit[0] is ref:
            del _REGISTRY[key]

    try:
        ref = weakref.ref(system, forget)
    except TypeError:  # pragma: no cover - every system class is weak-referenceable
        return
    _REGISTRY[key] = (ref, kernels)


def kernels_of(system: Any) -> KernelSet | None:
    """The :class:`KernelSet` of ``system``: registered by the symbolic front-end, or built
    from the system's numba functions (then registered); None for a system of plain
    callables (:func:`why_no_kernels` says which callable) or a symbolic one that was
    pickled (its kernels do not travel with it)."""
    hit = _REGISTRY.get(id(system))
    if hit is not None and hit[0]() is system:
        return hit[1]
    kernels, _ = _from_numba(system)
    if kernels is not None:
        register_kernels(system, kernels)
    return kernels


def why_no_kernels(system: Any) -> str:
    """Why ``system`` has no kernels (empty when it has them)."""
    return "" if kernels_of(system) is not None else _from_numba(system)[1]


def _from_numba(system: Any) -> tuple[KernelSet | None, str]:
    if not hasattr(system, "D1L"):  # not a Lagrangian system (a ReducedSystem, ...)
        return None, f"a {type(system).__name__} outside the system interface"
    from ..systems._numba_kernels import numba_kernels

    return numba_kernels(system)


#: The user's numba functions bound into generated modules, by fingerprint.
_USER_FUNCTIONS: dict[str, Any] = {}


def bind_user_function(key: str, function: Any) -> None:
    """Make ``function`` (a numba dispatcher) available to generated modules as
    ``user_function(key)``; ``key`` is its fingerprint (``systems._numba_kernels``)."""
    _USER_FUNCTIONS[key] = function


def user_function(key: str) -> Any:
    """The numba function bound under ``key`` (read by a generated module when it loads)."""
    try:
        return _USER_FUNCTIONS[key]
    except KeyError:  # pragma: no cover - a module is loaded only after its kernels are built
        raise RuntimeError(f"no numba function is bound under {key!r}") from None


def numba_available() -> bool:
    """Whether numba can be imported."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def cache_dir() -> Path:
    """``$CHETAEV_CACHE_DIR`` or ``~/.cache/chetaev/numba`` (created on demand)."""
    env = os.environ.get("CHETAEV_CACHE_DIR")
    path = Path(env) if env else Path.home() / ".cache" / "chetaev" / "numba"
    path.mkdir(parents=True, exist_ok=True)
    return path


_MODULES: dict[str, Any] = {}


def load_module(source: str) -> Any:
    """Import the generated module ``source`` (written to :func:`cache_dir` once, by its
    hash); the same module object for the same source within a process."""
    import numba

    key = hashlib.sha256((numba.__version__ + "\n" + source).encode()).hexdigest()[:24]
    mod = _MODULES.get(key)
    if mod is not None:
        return mod
    name = f"chetaev_jit_{key}"
    path = cache_dir() / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    _MODULES[key] = mod
    return mod
