"""Compiled system kernels and the on-disk module cache of the compiled backend (issue 17).

A :class:`KernelSet` is the *source text* of a system's scalar kernels (emitted by the
symbolic front-end, :mod:`chetaev.discrete_lagrangian.symbolic`); it needs no numba. A system
built by ``symbolic.from_lagrangian`` is registered with its kernels
(:func:`register_kernels`; read back by :func:`kernels_of` and exposed as
``SystemInterface.kernels``); any other system has none.

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

__all__ = ["INSTALL_FAST", "KernelSet", "cache_dir", "kernels_of", "load_module",
           "numba_available", "register_kernels"]

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
    """The registered :class:`KernelSet` of ``system``, or None (a system of plain
    callables, or one that was pickled: kernels do not travel with the system yet)."""
    hit = _REGISTRY.get(id(system))
    if hit is not None and hit[0]() is system:
        return hit[1]
    return None


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
