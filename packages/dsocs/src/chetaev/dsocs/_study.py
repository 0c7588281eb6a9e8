"""Convergence studies of §4 (Figs 3 and 6) against independent references.

* Particle (§4.1, Fig 3): exact solution for k ≡ 1, error = max_k |x_k − x(kh)| over [0, 500].
* Inertia wheel (§4.2, Fig 6): reference = scipy DOP853 on the closed-loop ODE (paper §4.2, eqs.
(8)–(10)),
  error = max_k |θ_k − θ_ref(kh)| over [0, 2000].

The discrete trajectories come from fast scalar loops of the same step equations
(:func:`particle_trajectory`, :func:`~chetaev.dsocs.iwp_trajectory`), which the tests
check against the DSOCS step run through ``integrate``.
"""

from __future__ import annotations

import math

import attrs
import numpy as np
from chetaev.discrete_lagrangian.testing import fit_order

from ._errors import DSOCSInputError
from ._wheel import InertiaWheelParameters, iwp_closed_loop_rhs, iwp_trajectory

__all__ = [
    "ConvergenceStudy",
    "convergence_study",
    "iwp_reference",
    "particle_trajectory",
]


def particle_trajectory(q0, q1, h: float, n_steps: int, k=1.0) -> np.ndarray:
    """Nodes of the particle DSOCS by the closed-form step in plain floats, (N+1, 2).

    Same formula as :func:`~chetaev.dsocs.particle_closed_form_step`; ``k`` constant or
    callable k(q) → float.
    """
    out = np.empty((n_steps + 1, 2))
    x0, y0 = float(q0[0]), float(q0[1])
    x1, y1 = float(q1[0]), float(q1[1])
    out[0] = x0, y0
    out[1] = x1, y1
    sgn = 1.0 if h > 0 else -1.0
    kc = None if callable(k) else float(k)
    sqrt = math.sqrt
    for i in range(1, n_steps):
        ax, ay = x1 - x0, y1 - y0
        kk = kc if kc is not None else float(k(np.array([x1, y1])))
        c = kk * sqrt(ax * ax + ay * ay) * sgn
        u = c / (1.0 + sqrt(1.0 + c * c))
        cp = 1.0 - 2.0 * u * u
        sp = 2.0 * u * sqrt(1.0 - u * u)
        x2 = x1 + cp * ax - sp * ay
        y2 = y1 + sp * ax + cp * ay
        out[i + 1] = x2, y2
        x0, y0, x1, y1 = x1, y1, x2, y2
    return out


def iwp_reference(t_final: float, params: InertiaWheelParameters | None = None,
                  q0=(0.5, 0.0), v0=(0.0, 0.5), rtol: float = 1e-12, atol: float = 1e-12):
    """Dense DOP853 solution of the closed-loop ODE (paper §4.2, eqs. (8)–(10)); returns ``sol(t)``
    → (4, ...)."""
    from scipy.integrate import solve_ivp

    params = params or InertiaWheelParameters()
    rhs = iwp_closed_loop_rhs(params)
    y0 = [q0[0], q0[1], v0[0], v0[1]]
    sol = solve_ivp(rhs, (0.0, t_final), y0, method="DOP853", rtol=rtol, atol=atol,
                    dense_output=True)
    if not sol.success:  # pragma: no cover - scipy failure
        raise RuntimeError(f"reference solve failed: {sol.message}")
    return sol.sol


@attrs.frozen(eq=False)
class ConvergenceStudy:
    """Errors against h, the fitted slope, and where the maximum error occurred."""

    problem: str
    start: str
    t_final: float
    h: np.ndarray
    error: np.ndarray
    t_at_max: np.ndarray
    n_spurious: np.ndarray

    @property
    def slope(self) -> float:
        """Least-squares slope of log(error) on log(h) over all h (``fit_order`` with floor 0:
        the study's errors are far above round-off)."""
        return fit_order(self.h, self.error, floor=0.0)

    def table(self) -> str:
        """A plain-text table of the study."""
        lines = [f"{self.problem}, start={self.start}, [0, {self.t_final:g}]",
                 "       h     max error   t at max"]
        for h, e, t in zip(self.h, self.error, self.t_at_max):
            lines.append(f"{h:8.4g}  {e:12.4e}  {t:9.4g}")
        lines.append(f"LS slope: {self.slope:.3f}")
        return "\n".join(lines)


def convergence_study(problem: str = "particle", hs=None, t_final: float | None = None,
                      start: str = "paper", params: InertiaWheelParameters | None = None,
                      reference=None, rule: str = "R-branch") -> ConvergenceStudy:
    """Max error over [0, t_final] against h for the paper's two examples (Figs 3, 6).

    Parameters
    ----------
    problem : "particle" (k ≡ 1, q(0) = 0, q̇(0) = (1, 1), exact reference) or
        "inertia_wheel" (θ(0) = 0.5, ψ(0) = 0, θ̇(0) = 0, ψ̇(0) = 0.5, DOP853 reference).
    hs : step sizes; defaults {0.1, …, 0.001} (particle) and {0.1, …, 0.002} (wheel) —
        the docs' theory page.
    t_final : 500 (particle) or 2000 (wheel) by default, as in the paper.
    start : "paper" (q1 = q0 + h v0) or "second_order" (q1 = q0 + h v0 + ½h² a0).
    reference : optional precomputed ``iwp_reference`` dense solution (reuse across calls).
    rule : "R-branch" or "paper" root selection for the wheel.
    """
    if start not in ("paper", "second_order"):
        raise DSOCSInputError(f"start must be 'paper' or 'second_order'; got {start!r}.")
    errs, tmax, nsp = [], [], []
    if problem == "particle":
        hs = [0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001] if hs is None else hs
        t_final = 500.0 if t_final is None else float(t_final)
        s2 = math.sqrt(2.0)
        for h in hs:
            n = round(t_final / h)
            q1 = np.array([h, h])
            if start == "second_order":
                q1 = q1 + 0.5 * h**2 * np.array([-s2, s2])
            traj = particle_trajectory(np.zeros(2), q1, h, n, 1.0)
            t = h * np.arange(n + 1)
            x = np.cos(s2 * t - math.pi / 4) - s2 / 2
            e = np.abs(traj[:, 0] - x)
            errs.append(e.max())
            tmax.append(t[np.argmax(e)])
            nsp.append(0)
    elif problem == "inertia_wheel":
        hs = [0.1, 0.05, 0.02, 0.01, 0.005, 0.002] if hs is None else hs
        t_final = 2000.0 if t_final is None else float(t_final)
        params = params or InertiaWheelParameters()
        ref = reference if reference is not None else iwp_reference(t_final, params)
        t_max = getattr(ref, "t_max", None)
        if t_max is not None and t_max < t_final * (1.0 - 1e-12):
            raise DSOCSInputError(
                f"the reference solution ends at t = {t_max:g} < t_final = {t_final:g} (it "
                "would be extrapolated); pass reference=iwp_reference(t_final) or a smaller "
                "t_final."
            )
        rhs = iwp_closed_loop_rhs(params)
        q0 = np.array([0.5, 0.0])
        v0 = np.array([0.0, 0.5])
        a0 = np.array(rhs(0.0, [*q0, *v0])[2:])
        for h in hs:
            n = round(t_final / h)
            q1 = q0 + h * v0 + (0.5 * h**2 * a0 if start == "second_order" else 0.0)
            traj, ns = iwp_trajectory(q0, q1, h, n, params, rule=rule)
            t = h * np.arange(n + 1)
            e = np.abs(traj[:, 0] - ref(t)[0])
            errs.append(e.max())
            tmax.append(t[np.argmax(e)])
            nsp.append(ns)
    else:
        raise DSOCSInputError(
            f"problem must be 'particle' or 'inertia_wheel'; got {problem!r}."
        )
    return ConvergenceStudy(problem, start, float(t_final), np.asarray(hs, float),
                            np.asarray(errs), np.asarray(tmax), np.asarray(nsp))
