"""Ensembles in chunks: :func:`integrate_ensemble`, on this process or on a Dask cluster.

An ensemble is one batched initial condition ``q0, v0`` of shape ``(N, ...)`` (and,
optionally, a system whose parameters carry the same leading batch axis, see
:func:`take_members`). :func:`integrate_ensemble` splits the N members into chunks of
``chunk_size`` consecutive members and runs each chunk as one batched
:func:`~chetaev.discrete_lagrangian.integrate`:

- **engines**: ``client=None`` runs the chunks one after the other in this process (no
  dependency beyond the package); a ``dask.distributed.Client`` runs each chunk as a Dask
  task (a ``LocalCluster`` on a laptop, or any cluster the client points at), with BLAS
  limited to one thread inside the task (``threadpoolctl``, a dependency of the package, as
  in every batched ``integrate``; without it the environment variables
  ``OPENBLAS_NUM_THREADS`` & co. are set, which only acts on worker processes that load numpy
  afterwards);
- **bitwise**: the integrators treat each member of a batch independently (Newton stops an
  entry once it has converged; no numerical choice depends on the number of members), so the
  result equals one batched ``integrate`` of the whole ensemble bitwise, whatever the chunk
  size and the engine (tested for VPRK and NonholonomicPRK);
- **per-member failure**: a batched ``integrate`` stops the whole batch at the first step a
  member fails. A chunk that fails is therefore split in halves, recursively, until each
  failing member runs alone (a batch of one); the halves that succeed run batched and give
  the same numbers as inside the whole batch. A failed member's trajectory holds its saved
  nodes up to the failure and NaN after (at the same grid times as the others), and
  ``EnsembleResult.success[i]`` / ``messages[i]`` say what happened to member ``i``;
- **store and resume**: with ``store=PATH`` (a directory that the workers can write to: a
  shared filesystem on a cluster) each finished chunk is written atomically (temporary name,
  then ``os.replace``) as ``chunk_<lo>_<hi>.npz`` with its index range, the method, the system
  description, h and the run's probe hash (method, system, h, n_steps, save_every, q0/v0
  bytes, observable names). A second call with the same arguments loads the finished chunks
  and computes only the missing index ranges (in chunks of the new ``chunk_size``); a store
  written by other arguments raises :class:`StoreMismatchError`. A chunk whose worker is lost
  is recomputed by Dask and rewrites the same file: nothing is lost or duplicated (a worker
  killed while writing may leave a ``.chunk_*.tmp`` file, which is ignored);
- **progress**: ``progress=True`` shows chunks done / total with an ETA: tqdm (when installed)
  or a stderr line on the embedded engine; with a client, Dask's progress feed of the chunk
  futures (as ``distributed.progress``), drawn from a thread of its own while the driver
  collects the chunks;
- **observables**: ``{name: f}`` with ``f(trajectory)`` evaluated on the worker for each
  chunk's :class:`~chetaev.discrete_lagrangian.Trajectory` (time axis first, then the chunk's
  members); ``f`` must return an array with the chunk's members on the **first** axis. With
  observables only they and the final states are kept (not the trajectories).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from .._util._errors import InputError
from .._util._validation import as_float, as_int
from ._blas import BlasOneThread
from ._integrate import integrate
from ._trajectory import Trajectory

__all__ = [
    "EnsembleResult",
    "ObservableError",
    "StoreMismatchError",
    "integrate_ensemble",
    "take_members",
]

_FIELDS = ("q", "v", "p", "lam")
_MANIFEST = "manifest.json"
_CHUNK_RE = re.compile(r"^chunk_(\d+)_(\d+)\.npz$")
#: Default number of members per chunk (each chunk is one batched ``integrate``).
DEFAULT_CHUNK_SIZE = 1024


class StoreMismatchError(InputError):
    """``store`` holds chunks of a run with other arguments (method, system, h, n_steps,
    save_every, q0/v0 or observable names); the message names the arguments that differ."""


class ObservableError(InputError, RuntimeError):
    """An observable failed on a chunk, or returned an array without the chunk's members on
    its first axis; the message names it and the chunk's index range.

    The chunks finished before stay in the store. A ``ValueError`` (the ``observables``
    argument is at fault) and, as before, a ``RuntimeError``."""


# ----------------------------------------------------------------------------- members
def _is_param_holder(obj: Any) -> bool:
    return hasattr(obj, "params") and hasattr(obj, "source") and callable(obj)


def _take(obj: Any, index: Any, n_members: int | None, seen: dict[int, Any]) -> Any:
    key = id(obj)
    if key in seen:
        return seen[key]
    out = obj
    if _is_param_holder(obj) and obj.params:
        params = []
        for p in obj.params:
            p = np.asarray(p)
            if p.ndim == 0 or p.shape[0] == 1:
                params.append(p)
                continue
            if n_members is not None and p.shape[0] != n_members:
                raise InputError(
                    f"The system has a parameter array of shape {p.shape} whose leading (batch) "
                    f"axis does not match the ensemble's {n_members} members: give every "
                    "batched parameter the members on its first axis (or length 1 to share it)."
                )
            params.append(np.ascontiguousarray(p[index]))
        out = type(obj)(obj.source, obj.name, tuple(params))
    elif attrs.has(type(obj)):
        changes = {}
        for a in attrs.fields(type(obj)):
            if not a.init:
                continue
            val = getattr(obj, a.name)
            new = _take(val, index, n_members, seen)
            if new is not val:
                changes[a.alias if getattr(a, "alias", None) else a.name.lstrip("_")] = new
        if changes:
            out = attrs.evolve(obj, **changes)
            from ..systems._derivcheck import _VERIFIED

            try:
                if _VERIFIED.get(obj):
                    _VERIFIED[out] = True  # generated callables: checked by construction
            except TypeError:
                pass
    seen[key] = out
    return out


def take_members(system: Any, index: Any, n_members: int | None = None) -> Any:
    """The system of the members ``index`` of an ensemble whose parameters carry a batch axis.

    A system built by :mod:`chetaev.discrete_lagrangian.symbolic` with array ``params``
    (e.g. ``params={k: np.linspace(1, 2, N)}``, a parameter sweep) evaluates its callables
    with the parameter batch aligned to the leading axis of the state batch. To integrate the
    members ``q0[index]``, the parameters must be cut the same way: this returns a copy of
    ``system`` whose parameter arrays are ``p[index]`` (arrays whose leading axis has length 1,
    and scalars, are shared). Systems without batched parameters are returned unchanged.
    :func:`integrate_ensemble` calls it for every chunk.

    Parameters
    ----------
    system : system
        Any system; attrs-based systems are walked field by field (a
        :class:`~chetaev.discrete_lagrangian.ConstrainedSystem` and its inner system).
    index : slice or array of int
        The members to keep (along the leading batch axis).
    n_members : int, optional
        The ensemble's size: when given, a batched parameter whose leading axis has another
        length raises :class:`InputError`.

    Returns
    -------
    system
        The system of those members (the same object when nothing is batched).
    """
    return _take(system, index, n_members, {})


# ----------------------------------------------------------------------------- fingerprints
_ADDR = re.compile(r" at 0x[0-9a-fA-F]+")


def _fingerprint(obj: Any, h: Any, depth: int = 0, seen: set[int] | None = None) -> None:
    """Feed a description of ``obj`` that is stable across processes into the hash ``h``."""
    seen = set() if seen is None else seen
    up = h.update
    if depth > 40 or id(obj) in seen:
        up(b"<cycle>")
        return
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes, np.generic)):
        up(repr((type(obj).__name__, obj)).encode())
        return
    if isinstance(obj, np.ndarray):
        up(f"ndarray{obj.dtype.str}{obj.shape}".encode())
        if obj.dtype.hasobject:
            for x in obj.ravel():
                _fingerprint(x, h, depth + 1, seen)
        else:
            up(np.ascontiguousarray(obj).tobytes())
        return
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type)):
        up(f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', repr(obj))}"
           .encode())
        code = getattr(obj, "__code__", None)
        if code is not None:  # a closure or lambda: its code and captured values
            up(code.co_code)
            _fingerprint(code.co_consts, h, depth + 1, seen)
            for cell in obj.__closure__ or ():
                try:
                    _fingerprint(cell.cell_contents, h, depth + 1, seen)
                except ValueError:
                    up(b"<empty cell>")
        return
    seen.add(id(obj))
    if isinstance(obj, (list, tuple)):
        up(f"{type(obj).__name__}{len(obj)}".encode())
        for x in obj:
            _fingerprint(x, h, depth + 1, seen)
        return
    if isinstance(obj, dict):
        up(f"dict{len(obj)}".encode())
        for k in sorted(obj, key=repr):
            _fingerprint(k, h, depth + 1, seen)
            _fingerprint(obj[k], h, depth + 1, seen)
        return
    if isinstance(obj, types.MethodType):
        _fingerprint(obj.__func__, h, depth + 1, seen)
        _fingerprint(obj.__self__, h, depth + 1, seen)
        return
    up(f"{type(obj).__module__}.{type(obj).__qualname__}".encode())
    if attrs.has(type(obj)):
        for a in attrs.fields(type(obj)):
            if not a.init:
                continue  # derived values and caches: the constructor's arguments define it
            up(a.name.encode())
            _fingerprint(getattr(obj, a.name), h, depth + 1, seen)
        return
    try:
        red = obj.__reduce_ex__(4)
    except Exception:  # fall back to the address-free repr
        red = None
    if isinstance(red, tuple) and len(red) >= 2:
        _fingerprint(red[1:3], h, depth + 1, seen)
    else:
        up(_ADDR.sub("", repr(obj)).encode())


def _digest(obj: Any) -> str:
    h = hashlib.sha256()
    _fingerprint(obj, h)
    return h.hexdigest()


def _describe(obj: Any, limit: int = 400) -> str:
    text = _ADDR.sub("", repr(obj))
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------- one chunk
def _nan_like(x: np.ndarray) -> np.ndarray:
    return np.full(x.shape, np.nan) if np.issubdtype(x.dtype, np.floating) else np.zeros_like(x)


def _bisect(system: Any, method: Any, q0: np.ndarray, v0: np.ndarray, h: float, n_steps: int,
            save_every: int, tr: Trajectory | None = None) -> list[tuple[int, int, Trajectory]]:
    """Pieces ``(a, b, trajectory of the members [a, b))`` covering ``q0``: a batch that
    fails is split in halves until the failing members run alone (each as a batch of one);
    the members of every successful piece ran batched, with the numbers of the whole batch."""
    if tr is None:
        tr = integrate(system, method, q0, v0, h=h, n_steps=n_steps, save_every=save_every)
    m = q0.shape[0]
    if tr.success or m == 1:
        return [(0, m, tr)]
    k = m // 2
    out = []
    for a, b in ((0, k), (k, m)):
        sub = _take(system, slice(a, b), m, {})
        out += [(a + x, a + y, piece) for x, y, piece in
                _bisect(sub, method, q0[a:b], v0[a:b], h, n_steps, save_every)]
    return out


def _member_fallback(system: Any, method: Any, q0: np.ndarray, v0: np.ndarray, h: float,
                     n_steps: int, save_every: int, lo: int, tr: Trajectory
                     ) -> tuple[Trajectory, np.ndarray, list[str], np.ndarray, np.ndarray]:
    """Complete a chunk whose batched run failed: the members that succeed keep their
    (bitwise batched) trajectories; a failed member's saved nodes stay at their grid times,
    NaN after its last good node."""
    pieces = _bisect(system, method, q0, v0, h, n_steps, save_every, tr)
    m = q0.shape[0]
    idx = list(range(0, n_steps + 1, save_every))
    if idx[-1] != n_steps:
        idx.append(n_steps)
    t = np.array([k * h for k in idx])  # the driver's grid t_k = t0 + k·h with t0 = 0
    arrays: dict[str, Any] = {}
    for name in _FIELDS:
        xs = [getattr(piece, name) for _, _, piece in pieces]
        if any(x is None for x in xs):
            arrays[name] = None
            continue
        x0 = np.asarray(xs[0])
        out = np.full((t.shape[0], m, *x0.shape[2:]), np.nan)
        for (a, b, piece), x in zip(pieces, xs):
            rows = np.searchsorted(t, piece.t)
            ok = (rows < t.shape[0]) & (t[np.minimum(rows, t.shape[0] - 1)] == piece.t)
            out[rows[ok], a:b] = np.asarray(x)[ok]  # an off-grid last node (failure) drops
        arrays[name] = out
    success = np.zeros(m, dtype=bool)
    messages = [""] * m
    finals_q: list[np.ndarray] = []
    finals_v: list[np.ndarray] = []
    for a, b, piece in pieces:
        success[a:b] = piece.success
        messages[a:b] = [piece.message] * (b - a)
        fq, fv = np.asarray(piece.final_state().q), np.asarray(piece.final_state().v)
        finals_q.append(fq if piece.success else _nan_like(fq))
        finals_v.append(fv if piece.success else _nan_like(fv))
    traj = Trajectory(t=t, q=arrays["q"], v=arrays["v"], p=arrays["p"], lam=arrays["lam"],
                      success=bool(success.all()),
                      message=f"members [{lo}, {lo + m}) completed piecewise after a failure "
                              "of the chunk", stats=dict(tr.stats), system=system,
                      method=tr.method, h=h)
    return (traj, success, messages, np.concatenate(finals_q, axis=0),
            np.concatenate(finals_v, axis=0))


def _run_chunk(system: Any, method: Any, q0: np.ndarray, v0: np.ndarray, h: float,
               n_steps: int, save_every: int, observables: Mapping[str, Callable] | None,
               lo: int, store: str | None, meta: dict[str, Any], one_thread: bool
               ) -> dict[str, Any]:
    """Integrate the members [lo, lo + len(q0)) as one batch; return (or store) the chunk."""
    hi = lo + q0.shape[0]
    ctx = BlasOneThread(env_fallback=True) if one_thread else None
    if ctx is not None:
        ctx.__enter__()
    try:
        tr = integrate(system, method, q0, v0, h=h, n_steps=n_steps, save_every=save_every)
        if tr.success:
            success = np.ones(q0.shape[0], dtype=bool)
            messages = [tr.message] * q0.shape[0]
            final_q, final_v = tr.final_state().q, tr.final_state().v
        else:
            tr, success, messages, final_q, final_v = _member_fallback(
                system, method, q0, v0, h, n_steps, save_every, lo, tr)
        data: dict[str, Any] = {"lo": lo, "hi": hi, "success": success,
                                "messages": np.array(messages, dtype=str),
                                "final_q": np.asarray(final_q), "final_v": np.asarray(final_v),
                                "t": tr.t}
        if observables:
            for name, fun in observables.items():
                try:
                    val = np.asarray(fun(tr))
                except Exception as err:  # re-raised with the chunk's range
                    raise ObservableError(
                        f"observable {name!r} failed on the members [{lo}, {hi}): "
                        f"{type(err).__name__}: {err}"
                    ) from None
                if val.ndim == 0 or val.shape[0] != hi - lo:
                    raise ObservableError(
                        f"observable {name!r} returned shape {val.shape} on the members "
                        f"[{lo}, {hi}): it must put the chunk's {hi - lo} members on the first "
                        "axis (e.g. traj.q[-1], or np.moveaxis(E, 1, 0) for a (time, member) "
                        "array)."
                    )
                data["obs__" + name] = val
        else:
            for name in _FIELDS:
                x = getattr(tr, name)
                if x is not None:
                    data[name] = x
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    if store is None:
        return data
    _write_chunk(Path(store), data, meta)
    return {"lo": lo, "hi": hi, "success": success, "messages": data["messages"]}


def _write_chunk(store: Path, data: dict[str, Any], meta: dict[str, Any]) -> None:
    lo, hi = data["lo"], data["hi"]
    arrays = {k: np.asarray(v) for k, v in data.items() if k not in ("lo", "hi")}
    arrays["meta"] = np.array(json.dumps({**meta, "lo": lo, "hi": hi}))
    fd, tmp = tempfile.mkstemp(prefix=f".chunk_{lo}_{hi}.", suffix=".tmp", dir=store)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, store / f"chunk_{lo:010d}_{hi:010d}.npz")
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ----------------------------------------------------------------------------- the result
def _load_chunk(path: Path, probe: str | None = None) -> dict[str, Any]:
    with np.load(path, allow_pickle=False) as f:
        meta = json.loads(str(f["meta"]))
        if probe is not None and meta.get("probe") != probe:
            raise StoreMismatchError(
                f"store chunk {path.name} belongs to another run (probe {meta.get('probe')!r}, "
                f"this run {probe!r}). Use another `store` directory or delete this one."
            )
        out: dict[str, Any] = {k: np.array(f[k]) for k in f.files if k != "meta"}
    out["lo"], out["hi"] = int(meta["lo"]), int(meta["hi"])
    out["messages"] = [str(m) for m in out["messages"]]
    return out


@attrs.define(eq=False)
class EnsembleResult:
    """The result of :func:`integrate_ensemble`: its chunks, gathered in index order.

    The arrays concatenate the chunks along the member axis when first accessed (chunks
    written to a store are read from it then, not kept in memory before; :meth:`iter_chunks`
    reads one chunk at a time for ensembles too large to gather).

    Attributes
    ----------
    n_members : int
    chunks : list of (lo, hi)
        The members of each chunk, in index order.
    success : ndarray of bool (n_members,)
        Per member: the run reached the final time.
    messages : list of str (n_members,)
        Per member: the driver's message (the Newton failure of a failed member).
    method : str
    h : float
    store : Path or None
    stats : dict
        ``chunks_total``, ``chunks_computed`` (in this call), ``chunks_loaded`` (from the
        store), ``wall_time_s``.
    """

    n_members: int
    chunks: list[tuple[int, int]] = attrs.field(repr=False)
    success: np.ndarray = attrs.field(repr=False)
    messages: list[str] = attrs.field(repr=False)
    method: str
    h: float
    store: Path | None
    stats: dict[str, Any]
    observable_names: tuple[str, ...]
    _memory: dict[int, dict[str, Any]] = attrs.field(factory=dict, repr=False)
    _paths: dict[int, Path] = attrs.field(factory=dict, repr=False)
    _cache: dict[str, Any] = attrs.field(factory=dict, repr=False)

    @property
    def all_success(self) -> bool:
        """True when every member reached the final time."""
        return bool(np.all(self.success))

    def chunk(self, i: int) -> dict[str, Any]:
        """The arrays of chunk ``i`` (``lo``, ``hi``, ``t``, ``q`` … or ``obs__<name>``)."""
        lo = self.chunks[i][0]
        if lo in self._memory:
            return self._memory[lo]
        return _load_chunk(self._paths[lo])

    def iter_chunks(self) -> Iterator[dict[str, Any]]:
        """The chunks in index order, one at a time (read lazily from the store)."""
        for i in range(len(self.chunks)):
            yield self.chunk(i)

    def _gather(self, key: str, axis: int) -> np.ndarray | None:
        if key not in self._cache:
            parts = [c.get(key) for c in self.iter_chunks()]
            self._cache[key] = (None if not parts or any(p is None for p in parts)
                                else np.concatenate(parts, axis=axis))
        return self._cache[key]

    def _trajectory_field(self, name: str) -> np.ndarray | None:
        if self.observable_names:
            raise InputError(
                f"This ensemble ran with observables {list(self.observable_names)}: only they "
                f"and the final states were kept, not the trajectories' `{name}`. Run without "
                "`observables` to keep the trajectories."
            )
        return self._gather(name, 1)

    @property
    def t(self) -> np.ndarray:
        """Saved times (N + 1,) (every ``save_every``-th node and the last)."""
        return self.chunk(0)["t"]

    @property
    def q(self) -> np.ndarray:
        """Positions (T, n_members, ...), time axis first as in a Trajectory."""
        return self._trajectory_field("q")

    @property
    def v(self) -> np.ndarray:
        """Velocities (T, n_members, ...)."""
        return self._trajectory_field("v")

    @property
    def p(self) -> np.ndarray | None:
        """Momenta (T, n_members, ...) or None."""
        return self._trajectory_field("p")

    @property
    def lam(self) -> np.ndarray | None:
        """Multipliers (T, n_members, m) or None."""
        return self._trajectory_field("lam")

    @property
    def final_q(self) -> np.ndarray:
        """Final positions (n_members, ...) (NaN for a failed member)."""
        return self._gather("final_q", 0)

    @property
    def final_v(self) -> np.ndarray:
        """Final velocities (n_members, ...) (NaN for a failed member)."""
        return self._gather("final_v", 0)

    @property
    def observables(self) -> dict[str, np.ndarray]:
        """Each observable's values, members on the first axis."""
        return {name: self._gather("obs__" + name, 0) for name in self.observable_names}


# ----------------------------------------------------------------------------- the store
def _open_store(store: Any, fields: dict[str, str], describe: dict[str, Any]) -> Path:
    path = Path(store)
    path.mkdir(parents=True, exist_ok=True)
    manifest = path / _MANIFEST
    if manifest.exists():
        old = json.loads(manifest.read_text())
        differ = [k for k in fields if old.get("fields", {}).get(k) != fields[k]]
        if differ:
            raise StoreMismatchError(
                f"`store` {str(path)!r} holds a run with other arguments: "
                f"{', '.join(differ)} differ (stored: "
                f"{ {k: old.get('describe', {}).get(k) for k in differ} }). Pass the same "
                "arguments to resume it, or another `store` directory for a new run."
            )
        return path
    text = json.dumps({"probe": _probe(fields), "fields": fields, "describe": describe},
                      indent=1)
    fd, tmp = tempfile.mkstemp(prefix=".manifest.", dir=path)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, manifest)
    return path


def _probe(fields: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def _finished(path: Path, n: int) -> dict[int, tuple[int, Path]]:
    done: dict[int, tuple[int, Path]] = {}
    for entry in sorted(os.listdir(path)):
        m = _CHUNK_RE.match(entry)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if 0 <= lo < hi <= n:
                done[lo] = (hi, path / entry)
    covered = 0
    out = {}
    for lo in sorted(done):  # keep a non-overlapping cover (older layouts may overlap)
        hi, p = done[lo]
        if lo >= covered:
            out[lo] = (hi, p)
            covered = hi
    return out


def _gaps(done: dict[int, tuple[int, Path]], n: int, size: int) -> list[tuple[int, int]]:
    todo, pos = [], 0
    for lo in [*sorted(done), n]:
        while pos < lo:
            todo.append((pos, min(pos + size, lo)))
            pos = todo[-1][1]
        if lo < n:
            pos = done[lo][0]
    return todo


# ----------------------------------------------------------------------------- progress
def _progress_line(prefix: str, done: int, total: int, elapsed: float) -> str:
    """``prefix: done/total chunks, elapsed …, ETA …`` (the ETA from the mean chunk time)."""
    eta = f"{elapsed / done * (total - done):.1f} s" if done else "?"
    return f"{prefix}: {done}/{total} chunks, elapsed {elapsed:.1f} s, ETA {eta}"


class _Progress:
    """The embedded engine's progress: a tqdm bar when tqdm is installed (it is not a
    dependency of the package), else a line on stderr (chunks done / total, ETA)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, 0, enabled and total > 0
        self.start = time.perf_counter()
        self.bar = None
        if self.enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                self._line()
            else:
                self.bar = tqdm(total=total, unit="chunk", desc="ensemble")

    def _line(self) -> None:
        sys.stderr.write("\r" + _progress_line("ensemble", self.done, self.total,
                                               time.perf_counter() - self.start))
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    def update(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(1)
        else:
            self._line()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _dask_progress_bar(futures: list[Any], client: Any) -> Any:
    """Dask's progress (the scheduler's ``Progress`` feed, as ``distributed.progress``) of the
    chunk futures, drawn on stderr as chunks done / total with an ETA.

    ``distributed.progress`` blocks in a console until the futures finish; the bar runs
    instead in a thread of its own (:class:`_DaskProgress`), so the driver keeps collecting
    the chunks as they complete."""
    from distributed.diagnostics.progressbar import TextProgressBar

    class _ChunkBar(TextProgressBar):
        # the feed's response: {"all": n keys, "remaining": n not finished, "status": ...}
        def _draw_bar(self, **response: Any) -> None:
            total, left = response["all"], response["remaining"]
            with contextlib.suppress(ValueError):  # stderr closed
                sys.stderr.write("\r" + _progress_line("ensemble (dask)", total - left, total,
                                                       self.elapsed))
                sys.stderr.flush()

        def _draw_stop(self, **response: Any) -> None:
            total, left = response.get("all", 0), response.get("remaining", 0)
            with contextlib.suppress(ValueError):
                if response.get("status") == "error":
                    sys.stderr.write(f" (stopped: {total - left}/{total} chunks finished)")
                sys.stderr.write("\n")
                sys.stderr.flush()

    return _ChunkBar(futures, scheduler=client.scheduler.address, start=False)


class _DaskProgress:
    """Run Dask's progress bar of ``futures`` in a thread; :meth:`close` waits for it.

    The bar stops by itself when every future has finished, one has erred or been
    cancelled; :meth:`close` waits up to ``timeout`` s for that (the futures must still be
    held, so that the scheduler knows their keys), then closes the bar's connection. A bar
    that cannot start (no scheduler feed) is dropped: progress never stops a run."""

    def __init__(self, futures: list[Any], client: Any) -> None:
        self.bar = None
        self.thread = None
        if not futures:
            return
        try:
            self.bar = _dask_progress_bar(futures, client)
        except Exception:  # pragma: no cover - an old distributed: no bar, the run goes on
            self.bar = None
            return
        self.thread = threading.Thread(target=self._listen, name="chetaev-ensemble-progress",
                                       daemon=True)
        self.thread.start()

    def _listen(self) -> None:
        try:
            self.bar._loop_runner.run_sync(self.bar.listen)
        except Exception as err:  # the run goes on without a bar: say so, once
            with contextlib.suppress(ValueError):
                sys.stderr.write(f"\nensemble (dask): the progress bar stopped "
                                 f"({type(err).__name__}: {err}); the run continues\n")

    def wait_started(self, timeout: float = 10.0) -> None:
        """Wait until the scheduler's feed has answered once (it has found the keys)."""
        end = time.monotonic() + timeout
        while (self.thread is not None and self.thread.is_alive()
               and not hasattr(self.bar, "_last_response") and time.monotonic() < end):
            time.sleep(0.01)

    def close(self, timeout: float = 10.0) -> None:
        if self.thread is None:
            return
        self.thread.join(timeout)
        if self.thread.is_alive():  # not finished (e.g. interrupted): close its connection
            comm = getattr(self.bar, "comm", None)
            if comm is not None:
                with contextlib.suppress(Exception):
                    self.bar.loop.add_callback(comm.abort)
            self.thread.join(timeout)


# ----------------------------------------------------------------------------- the driver
def _as_batch(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number)
                                   or arr.dtype == bool) or np.iscomplexobj(arr):
        raise InputError(f"`{name}` must be a real array with the members on its first axis, "
                         f"got dtype {arr.dtype}.")
    if arr.ndim < 2 or arr.shape[0] < 1:
        raise InputError(
            f"`{name}` must have a leading batch axis (one row per member), got shape "
            f"{arr.shape}; for one trajectory use integrate(), or pass {name}[None]."
        )
    return np.ascontiguousarray(arr, dtype=float)


def integrate_ensemble(
    system: Any,
    method: Any,
    q0: Any,
    v0: Any,
    *,
    h: float,
    t_final: float | None = None,
    n_steps: int | None = None,
    chunk_size: int | None = None,
    client: Any = None,
    store: str | os.PathLike | None = None,
    observables: Mapping[str, Callable[[Trajectory], Any]] | None = None,
    save_every: int = 1,
    progress: bool = False,
    controls: Any = None,
) -> EnsembleResult:
    """Integrate an ensemble in chunks, in this process or on a Dask cluster.

    Each chunk of ``chunk_size`` consecutive members runs as one batched
    :func:`~chetaev.discrete_lagrangian.integrate` (from t0 = 0); the result equals one
    batched ``integrate`` of the whole ensemble bitwise, whatever ``chunk_size`` and engine
    (module docstring).

    Parameters
    ----------
    system : system
        Any system ``integrate`` accepts; parameters with a leading batch axis of length
        ``N`` are cut with the members (:func:`take_members`).
    method : integrator
    q0, v0 : array_like, shape (N, ...)
        Initial data, the N members on the first axis (same N for both).
    h : float
        Step size.
    t_final, n_steps : float, int
        Exactly one (as in ``integrate``).
    chunk_size : int, optional
        Members per chunk (≥ 1); default ``min(N, 1024)``.
    client : dask.distributed.Client, optional
        Run the chunks as Dask tasks on this client's cluster (BLAS limited to one thread per
        task). ``None``: the embedded engine, chunks one after the other in this process.
    store : path, optional
        Directory holding the finished chunks (created if missing); a second call with the
        same arguments resumes. With a client it must be writable by the workers.
    observables : mapping str -> callable, optional
        ``f(trajectory)`` per chunk, evaluated on the worker; returns the chunk's members on
        the first axis. Only they and the final states are kept.
    save_every : int
        Keep every k-th node of the trajectories (as in ``integrate``).
    progress : bool
        Show chunks done / total with an ETA. Embedded engine: a tqdm bar if tqdm is
        installed (it is not a dependency), else a line on stderr. With a ``client``: Dask's
        progress of the chunk futures (the scheduler's feed, as ``distributed.progress``),
        drawn on stderr from a thread of its own while the chunks are collected.
    controls : None
        Not supported yet (issue 20): piecewise-constant controls run with
        ``integrate(..., controls=U)``; anything but None raises :class:`InputError`.

    Returns
    -------
    EnsembleResult

    Raises
    ------
    InputError
        Mismatched batch shapes, ``chunk_size`` ≤ 0, bad ``h``/``n_steps``/``save_every``,
        observables that are not callables.
    StoreMismatchError
        ``store`` holds a run with other arguments.
    ObservableError
        An observable failed on a chunk (the message names its index range); the chunks
        finished before stay in the store.
    """
    wall = time.perf_counter()
    if controls is not None or int(getattr(system, "n_controls", 0) or 0):
        raise InputError(
            "integrate_ensemble does not take `controls` yet (issue 20): run a controlled "
            "system with integrate(system, method, q0, v0, h=..., controls=U), U of shape "
            "(n_steps, N, n_controls), as one batch."
        )
    q0 = _as_batch(q0, "q0")
    if v0 is None:
        raise InputError("`v0` is required: the members' initial velocities, shape (N, ...).")
    v0 = _as_batch(v0, "v0")
    if q0.shape[0] != v0.shape[0]:
        raise InputError(
            f"`q0` and `v0` must hold the same number of members on their first axis, got "
            f"shapes {q0.shape} and {v0.shape} (mismatched batch shapes)."
        )
    n = q0.shape[0]
    h = as_float(h, "h", positive=True)
    save_every = as_int(save_every, "save_every", minimum=1)
    if (t_final is None) == (n_steps is None):
        raise InputError("Give exactly one of `t_final` and `n_steps`.")
    if n_steps is None:
        n_float = as_float(t_final, "t_final") / h
        n_steps = round(n_float)
        if n_steps < 0 or abs(n_steps - n_float) > 1e-9 * max(1.0, abs(n_float)):
            raise InputError(f"t_final = {t_final:g} is not a non-negative integer multiple of "
                             f"h = {h:g}; pass n_steps=... or adjust t_final.")
    n_steps = as_int(n_steps, "n_steps", minimum=0)
    if chunk_size is None:
        chunk_size = min(n, DEFAULT_CHUNK_SIZE)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
            or chunk_size <= 0:
        raise InputError(f"`chunk_size` must be a positive integer (members per chunk), got "
                         f"{chunk_size!r}.")
    chunk_size = int(chunk_size)
    observables = dict(observables) if observables else {}
    for name, fun in observables.items():
        if not isinstance(name, str) or not callable(fun):
            raise InputError(f"`observables` must map names (str) to callables f(trajectory), "
                             f"got {name!r}: {fun!r}.")
    if not (hasattr(method, "initial_state") and hasattr(method, "step")):
        raise InputError(f"`method` must be an integrator (e.g. VPRK(gauss(2))), got "
                         f"{type(method).__name__}.")
    take_members(system, slice(0, 1), n)  # checks the batched parameters' lengths
    method_name = str(getattr(method, "name", type(method).__name__))

    fields = {
        "method": _digest(method),
        "system": _digest(system),
        "h": repr(h),
        "n_steps": str(n_steps),
        "save_every": str(save_every),
        "q0": hashlib.sha256(f"{q0.shape}".encode() + q0.tobytes()).hexdigest(),
        "v0": hashlib.sha256(f"{v0.shape}".encode() + v0.tobytes()).hexdigest(),
        "observables": ",".join(sorted(observables)),
    }
    probe = _probe(fields)
    describe = {"method": _describe(method), "system": _describe(system), "h": h,
                "n_steps": n_steps, "save_every": save_every, "q0": f"shape {q0.shape}",
                "v0": f"shape {v0.shape}", "observables": sorted(observables),
                "n_members": n}
    meta = {"probe": probe, "method": describe["method"], "system": describe["system"],
            "h": h}

    path = None
    done: dict[int, tuple[int, Path]] = {}
    if store is not None:
        path = _open_store(store, fields, describe)
        done = _finished(path, n)
    todo = _gaps(done, n, chunk_size)
    summaries: dict[int, dict[str, Any]] = {}
    for lo, (hi, p) in done.items():  # the finished chunks: refuse those of another run
        with np.load(p, allow_pickle=False) as f:
            if json.loads(str(f["meta"])).get("probe") != probe:
                raise StoreMismatchError(
                    f"store chunk {p.name} belongs to another run: use another `store` "
                    "directory or delete this one."
                )
            summaries[lo] = {"lo": lo, "hi": hi, "success": np.array(f["success"]),
                             "messages": [str(m) for m in f["messages"]]}
    memory: dict[int, dict[str, Any]] = {}
    bar = _Progress(len(todo), progress and client is None)

    def args(lo: int, hi: int) -> tuple:
        return (take_members(system, slice(lo, hi), n), method, q0[lo:hi], v0[lo:hi], h,
                n_steps, save_every, observables or None, lo,
                None if path is None else str(path), meta)

    def keep(res: dict[str, Any]) -> None:
        summaries[res["lo"]] = res
        if path is None:
            memory[res["lo"]] = res
        bar.update()

    try:
        if client is None:
            for lo, hi in todo:
                keep(_run_chunk(*args(lo, hi), False))
        else:
            _run_on_client(client, todo, args, keep, progress)
    finally:
        bar.close()

    order = sorted(summaries)
    chunks = [(lo, int(summaries[lo]["hi"])) for lo in order]
    success = np.concatenate([np.asarray(summaries[lo]["success"], dtype=bool) for lo in order])
    messages = [str(m) for lo in order for m in summaries[lo]["messages"]]
    paths = {}
    if path is not None:
        for lo, hi in chunks:
            paths[lo] = path / f"chunk_{lo:010d}_{hi:010d}.npz"
    return EnsembleResult(
        n_members=n, chunks=chunks, success=success, messages=messages, method=method_name,
        h=h, store=path,
        stats={"chunks_total": len(chunks), "chunks_computed": len(todo),
               "chunks_loaded": len(done), "wall_time_s": time.perf_counter() - wall},
        observable_names=tuple(observables), memory=memory, paths=paths,
    )


def _run_on_client(client: Any, todo: list[tuple[int, int]], args: Callable,
                   keep: Callable[[dict[str, Any]], None], progress: bool = False) -> None:
    """Submit every chunk as a Dask task; collect them as they finish (a lost worker's
    task is rescheduled by the scheduler); on an error cancel the rest and re-raise. With
    ``progress``, Dask's progress of the futures is drawn meanwhile (:class:`_DaskProgress`)."""
    try:
        from distributed import as_completed
    except ImportError as err:  # pragma: no cover - a client implies distributed
        raise InputError("`client` needs dask.distributed: pip install "
                         "chetaev-discrete-lagrangian[distributed]") from err
    futures = [client.submit(_run_chunk, *args(lo, hi), True, pure=False,
                             key=f"chetaev-ensemble-chunk-{lo}-{hi}-{os.urandom(4).hex()}")
               for lo, hi in todo]
    bar = _DaskProgress(futures, client) if progress else None
    try:
        for fut in as_completed(futures):
            keep(fut.result())
    finally:
        if bar is not None:
            bar.wait_started()  # the scheduler must see the keys before they are cancelled
        for fut in futures:
            if not fut.done():
                fut.cancel()
        if bar is not None:
            bar.close()  # the last update (finished, erred or cancelled) drawn
