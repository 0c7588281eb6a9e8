"""BLAS limited to one thread around batched runs (issue 17).

A batched step multiplies many small matrices (the stage mix of a PRK step is one product of
an ``s × s`` matrix with a ``(s, B n)`` array): OpenBLAS splits such products across its
threads and the synchronisation costs more than the product (measured on the chaotic ensemble
of 10⁴ members, 2 cores: 2.5–2.7× the CPU time of one thread, ``benchmarks/bench_blas_threads.py``).
:func:`limit_blas_for_batches` wraps ``integrate`` so that a run whose initial data has batch
axes holds BLAS at one thread (``threadpoolctl``) for its duration, then restores the previous
limits; a single trajectory is left alone.

The limit is process-wide (BLAS has one thread pool), so entries are counted under a lock:
the first of nested or concurrent batched runs sets the limit and the last one restores it.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["BLAS_ENV", "BlasOneThread", "limit_blas_for_batches"]

#: Environment variables read by the BLAS/OpenMP runtimes when they load.
BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
            "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")

_lock = threading.Lock()
_depth = 0
_limits: Any = None
_controller: Any = None


def _get_controller() -> Any:
    """The process's ``threadpoolctl.ThreadpoolController`` (built once: building it scans
    the loaded libraries, ~2 ms; entering its ``limit`` afterwards costs ~70 µs)."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


class BlasOneThread:
    """Context: BLAS limited to one thread while inside (reentrant, thread-safe).

    Parameters
    ----------
    env_fallback : bool
        Without ``threadpoolctl``, set the variables :data:`BLAS_ENV` to 1 instead (which acts
        only on processes that load numpy afterwards, e.g. fresh Dask workers); otherwise do
        nothing.
    """

    def __init__(self, env_fallback: bool = False) -> None:
        self.env_fallback = env_fallback

    def __enter__(self) -> BlasOneThread:
        global _depth, _limits
        with _lock:
            if _depth == 0:
                try:
                    _limits = _get_controller().limit(limits=1, user_api="blas")
                except ImportError:
                    _limits = None
                    if self.env_fallback:
                        for name in BLAS_ENV:
                            os.environ[name] = "1"
            _depth += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        global _depth, _limits
        with _lock:
            _depth -= 1
            if _depth == 0 and _limits is not None:
                _limits.restore_original_limits()
                _limits = None


def _is_batched(system: Any, q0: Any) -> bool:
    """Whether ``q0`` (an array or a State) has axes beyond one configuration of ``system``
    (vector space: ``(n,)``; group: ``group.shape``). False when that cannot be told: the
    driver then reports bad input itself."""
    try:
        q = np.asarray(getattr(q0, "q", q0))
        group = getattr(system, "group", None)
        return q.ndim > (1 if group is None else len(tuple(group.shape)))
    except Exception:
        return False


def limit_blas_for_batches(integrate: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate the driver: a batched run holds BLAS at one thread (:class:`BlasOneThread`)."""

    @functools.wraps(integrate)
    def wrapper(*args: Any, **kwargs: Any) -> Any:  # integrate(system, method, q0, ...)
        system = args[0] if args else kwargs.get("system")
        q0 = args[2] if len(args) > 2 else kwargs.get("q0")
        if not _is_batched(system, q0):
            return integrate(*args, **kwargs)
        with BlasOneThread():
            return integrate(*args, **kwargs)

    return wrapper
