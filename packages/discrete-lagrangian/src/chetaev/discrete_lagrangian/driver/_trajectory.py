"""The result of :func:`~chetaev.discrete_lagrangian.integrate`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from .._util._errors import InputError
from ..core._state import State

__all__ = ["Trajectory"]

_FORMAT_VERSION = 1


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return repr(x)


@attrs.frozen(eq=False)
class Trajectory:
    """A discrete trajectory with the time axis first.

    Attributes
    ----------
    t : ndarray (N+1,)
    q : ndarray (N+1, ..., n) or (N+1, ..., k, k) for group elements
    v : ndarray (N+1, ..., n) — velocities (trivialized velocities on a group)
    p : ndarray or None — momenta
    lam : ndarray (N+1, ..., m) or None — ``lam[0]`` is the consistent λ₀, ``lam[k]`` the
        multiplier the method assigns to node k
    success : bool
    message : str
    stats : dict — step count, Newton iterations, residuals, whether second derivatives
        came from finite differences, wall time
    system : the system integrated (not saved to disk)
    method : str — the method's name
    h : float — step size
    final : State — the last state, with the method's ``carry`` (restart data)
    controls : ndarray (N, ..., n_controls) or None — the piecewise-constant controls of a
        forced run (``controls[k]`` acted on the step from node k to k + 1); None without
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    p: np.ndarray | None
    lam: np.ndarray | None
    success: bool
    message: str
    stats: dict[str, Any]
    system: Any = None
    method: str = ""
    h: float = float("nan")
    final: State | None = None
    controls: np.ndarray | None = None

    def __attrs_post_init__(self) -> None:
        t = np.asarray(self.t)
        if t.ndim != 1 or t.dtype.kind == "c":  # complex (np.iscomplexobj of an array)
            raise InputError(f"Trajectory(t=...) must be a real 1-D array of times, got shape "
                             f"{t.shape} and dtype {t.dtype}.")
        nt = t.shape[0]
        for name in ("q", "v", "p", "lam"):
            x = getattr(self, name)
            if x is None:
                if name in ("q", "v"):
                    raise InputError(f"Trajectory({name}=...) is required (an array with the "
                                     "time axis first).")
                continue
            shape = x.shape if type(x) is np.ndarray else np.shape(x)
            if not shape or shape[0] != nt:
                raise InputError(
                    f"Trajectory({name}=...) must have the time axis first with {t.shape[0]} "
                    f"nodes (len(t)), got shape {np.shape(x)}."
                )
        if self.final is not None and not isinstance(self.final, State):
            raise InputError(f"Trajectory(final=...) must be a State or None, got "
                             f"{type(self.final).__name__}.")

    def final_state(self) -> State:
        """The last state reached (with the method's carry), ready to integrate on from."""
        if self.final is None:
            raise InputError("This trajectory has no final state (it holds no steps).")
        return self.final

    def _need_system(self, system: Any) -> Any:
        system = system if system is not None else self.system
        if system is None:
            raise InputError(
                "This trajectory has no system attached (it was loaded from disk): pass it, "
                "e.g. traj.energy(system)."
            )
        return system

    def energy(self, system: Any = None) -> np.ndarray:
        """Energy E(q, v) at every saved node, shape (N+1, ...)."""
        return np.asarray(self._need_system(system).energy(self.q, self.v))

    def constraint_residual(self, system: Any = None, kind: str = "position") -> np.ndarray:
        """Constraint residual at every saved node, shape (N+1, ..., m).

        ``kind="position"``: Φ(q) (holonomic) or Φ(q, v) (velocity constraint);
        ``kind="velocity"``: the hidden constraint ∂Φ/∂q·v (holonomic) or Φ(q, v);
        ``kind="all"``: both, concatenated on the last axis.
        """
        system = self._need_system(system)
        if not hasattr(system, "constraint"):
            raise InputError(
                "constraint_residual() needs a ConstrainedSystem; this trajectory's system "
                f"is a {type(system).__name__} without constraints."
            )
        if kind == "position":
            return np.asarray(system.residual(self.q, self.v))
        if kind == "velocity":
            return np.asarray(system.velocity_residual(self.q, self.v))
        if kind == "all":
            return np.concatenate(
                [system.residual(self.q, self.v), system.velocity_residual(self.q, self.v)],
                axis=-1,
            )
        raise InputError(f"`kind` must be 'position', 'velocity' or 'all', got {kind!r}.")

    # --- persistence --------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Save to ``.npz`` (arrays, metadata as JSON, and the final state's carry)."""
        arrays: dict[str, np.ndarray] = {"t": self.t, "q": self.q, "v": self.v}
        if self.p is not None:
            arrays["p"] = self.p
        if self.lam is not None:
            arrays["lam"] = self.lam
        if self.controls is not None:
            arrays["controls"] = np.asarray(self.controls)
        carry_kinds: dict[str, str] = {}
        final_meta: dict[str, Any] | None = None
        if self.final is not None:
            f = self.final
            arrays["final__q"] = np.asarray(f.q)
            arrays["final__v"] = np.asarray(f.v)
            if f.p is not None:
                arrays["final__p"] = np.asarray(f.p)
            if f.lam is not None:
                arrays["final__lam"] = np.asarray(f.lam)
            for k, val in f.carry.items():
                if val is None:
                    carry_kinds[k] = "none"
                elif isinstance(val, np.ndarray):
                    carry_kinds[k] = "array"
                    arrays["carry__" + k] = val
                elif isinstance(val, (bool, int, float, np.generic)):
                    kind = "array" if isinstance(val, np.generic) else type(val).__name__
                    carry_kinds[k] = kind
                    arrays["carry__" + k] = np.asarray(val)
                elif isinstance(val, (list, tuple)) and all(
                        isinstance(x, (np.ndarray, np.generic, int, float)) for x in val):
                    carry_kinds[k] = f"{type(val).__name__}:{len(val)}"
                    for i, x in enumerate(val):
                        arrays[f"carry__{k}__{i}"] = np.asarray(x)
                else:
                    raise InputError(
                        f"Cannot save carry entry {k!r} of type {type(val).__name__}: "
                        "carry values must be arrays, numbers, lists of arrays or None."
                    )
            final_meta = {"t": f.t, "n": f.n, "info": _jsonable(f.info),
                          "grid": None if f.grid is None else list(f.grid)}
        meta = {
            "format_version": _FORMAT_VERSION,
            "success": bool(self.success),
            "message": self.message,
            "stats": _jsonable(self.stats),
            "method": self.method,
            "h": float(self.h),
            "system": repr(self.system) if self.system is not None else None,
            "final": final_meta,
            "carry_kinds": carry_kinds,
        }
        arrays["metadata"] = np.array(json.dumps(meta))
        np.savez(path, **arrays)

    @classmethod
    def load(cls, path: str | Path, system: Any = None) -> Trajectory:
        """Load a trajectory written by :meth:`save` (attach ``system`` if given)."""
        try:
            data = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise InputError(
                f"Trajectory.load(path={str(path)!r}): cannot read the file ({err}). Pass the "
                "path of an .npz file written by Trajectory.save."
            ) from err
        if not hasattr(data, "files") or "metadata" not in data.files:
            raise InputError(
                f"Trajectory.load(path={str(path)!r}): the file is not a trajectory written by "
                "Trajectory.save (no metadata entry)."
            )
        with data:
            meta = json.loads(str(data["metadata"]))
            get = lambda k: np.array(data[k]) if k in data.files else None  # noqa: E731
            final = None
            if meta.get("final") is not None:
                carry: dict[str, Any] = {}
                for k, kind in meta["carry_kinds"].items():
                    if kind == "none":
                        carry[k] = None
                    elif kind == "array":
                        carry[k] = np.array(data["carry__" + k])
                    elif kind == "bool":
                        carry[k] = bool(data["carry__" + k])
                    elif kind == "int":
                        carry[k] = int(data["carry__" + k])
                    elif kind.startswith(("list:", "tuple:")):
                        typ, length = kind.split(":")
                        items = [np.array(data[f"carry__{k}__{i}"]) for i in range(int(length))]
                        carry[k] = items if typ == "list" else tuple(items)
                    else:
                        carry[k] = float(data["carry__" + k])
                fm = meta["final"]
                final = State(
                    t=fm["t"], q=get("final__q"), v=get("final__v"), p=get("final__p"),
                    lam=get("final__lam"), n=fm["n"], carry=carry, info=fm["info"],
                    grid=fm.get("grid"),
                )
            return cls(
                t=get("t"), q=get("q"), v=get("v"), p=get("p"), lam=get("lam"),
                success=meta["success"], message=meta["message"], stats=meta["stats"],
                system=system, method=meta["method"], h=meta["h"], final=final,
                controls=get("controls"),
            )
