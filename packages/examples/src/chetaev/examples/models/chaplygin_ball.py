"""Chaplygin-type ball on a rotating table (GNI paper §7.4).

A thin wrapper of :func:`chetaev.gni.rolling_ball`: the reduced system on TR² × 𝔰𝔬(3) with
metric ``diag(m, m, I1, I2, I3)`` and the affine rolling constraints (40)
``ẋ − r ω2 + Ω y = 0``, ``ẏ + r ω1 − Ω x = 0``. Velocities are ``(ẋ, ẏ, ω1, ω2, ω3)``.

Paper parameters (both from the paper):

* Experiment 1 (Figs 1, 2), :data:`EXPERIMENT_1`: homogeneous ball I = 2/3, m = r = Ω = 1,
  (x0, y0) = (1, 1), (ẋ0, ẏ0) = (1, 1), ω0 = (0, 2, 0); exact solution
  :func:`exact_homogeneous` (a circle of centre (−1.5, 3.5), radius √2/0.4).
* Experiment 2 (Fig. 3), :data:`EXPERIMENT_2`: I = (1, 1.1, 1.2), m = 3, r = 1, Ω = 0.2,
  (x0, y0) = (1, 0), ω0 = (−0.2, 0, 0.4); reference :func:`reference` (DOP853, rtol 1e-13).

Formulation supported by the project: the reduced form (``chetaev.gni.ReducedSystem``, run by
``chetaev.gni.ReducedGNI``). Invariant: none exactly for Ω ≠ 0 (the energy changes); for
Ω = 0 the energy :func:`energy`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from chetaev.gni import BALL_EXPERIMENT_1, BALL_EXPERIMENT_2, ReducedSystem, ball_exact_homogeneous
from chetaev.gni import rolling_ball as _rolling_ball

__all__ = [
    "EXPERIMENT_1",
    "EXPERIMENT_2",
    "constraint_residual",
    "energy",
    "exact_homogeneous",
    "initial",
    "paper_start",
    "reference",
    "system",
]

EXPERIMENT_1: dict[str, Any] = dict(BALL_EXPERIMENT_1)
EXPERIMENT_2: dict[str, Any] = dict(BALL_EXPERIMENT_2)
_PARAMS = ("inertia", "mass", "radius", "table_rate")


def _exp(experiment):
    if isinstance(experiment, int):
        if experiment not in (1, 2):
            raise ValueError(f"experiment must be 1 or 2 (or a parameter dict); got {experiment}")
        return EXPERIMENT_1 if experiment == 1 else EXPERIMENT_2
    return experiment


def system(experiment=1, **overrides) -> ReducedSystem:
    """The reduced ball of experiment 1 or 2 (or a dict of parameters), with overrides."""
    e = _exp(experiment)
    kw = {k: e[k] for k in _PARAMS}
    kw.update(overrides)
    return _rolling_ball(**kw)


def initial(experiment=1):
    """``(x0, v0)``: contact point (2,) and velocity ``(ẋ, ẏ, ω)`` (5,), consistent with (40)."""
    e = _exp(experiment)
    return np.array(e["x0"], dtype=float), np.array(e["v0"], dtype=float)


def paper_start(method, experiment, h: float):
    """The paper's starting procedure (paper §7.4, Exp. 2): ``ω_0 := ω(0)``, ``x_1 = x_0 + h ẋ_0``;
    returns the ``ReducedGNI`` state at node 1."""
    sysb = system(experiment)
    x0, v0 = initial(experiment)
    return method.state_from_points(sysb, x0, x0 + h * v0[:2], v0[2:], h)


def exact_homogeneous(t, experiment=1):
    """Exact solution for I1 = I2 = I3 (experiment 1): ``(x (T, 2), v (T, 5))``."""
    e = _exp(experiment)
    return ball_exact_homogeneous(np.asarray(t, float), e["x0"], e["v0"], e["inertia"],
                                  e["mass"], e["radius"], e["table_rate"])


def reference(t, experiment=2):
    """DOP853 (rtol = atol = 1e-13) on the continuous reduced equations at times ``t``."""
    x0, v0 = initial(experiment)
    return system(experiment).reference(x0, v0, np.asarray(t, float))


def energy(x, v, experiment=1):
    """``E = ½ m|ẋ|² + ½ ωᵀIω``."""
    return system(experiment).energy(np.asarray(x, float), np.asarray(v, float))


def constraint_residual(x, v, experiment=1):
    """Residual of the rolling constraints (40) at ``(x, v)``."""
    return system(experiment).residual(np.asarray(x, float), np.asarray(v, float))
