"""Experiments of "High-order geometric methods for nonholonomic mechanical systems" (§7).

One function per figure: Fig. 3 (particle orders), Figs. 4–5 (CVT energies), Fig. 6 (chaotic
ensemble μ(E, k)), Fig. 7 (disc on SE(2), both retractions), Fig. 8 (ball on a turntable).
Settings the paper omits are the project's proposals; errors are relative ∞-norm errors at the
final time (the paper does not define its norm; see the docs' theory page).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from chetaev.discrete_lagrangian import NewtonOptions, integrate, integrate_ensemble
from chetaev.nh_integrators import LieNonholonomicPRK, NonholonomicPRK
from chetaev.rktableaux import lobatto_iiia_iiib

from .._registry import Check, Outcome, check_bound, check_order, experiment, fit_order
from ..models import chaotic, cvt, nonholonomic_particle, turntable_ball, vertical_disc
from ._common import grid_steps

__all__ = [
    "ball_first_integrals",
    "chaotic_energy_mse",
    "cvt_energies",
    "disc_orders",
    "particle_orders",
]

PAPER = "high-order-nonholonomic"


def _rel(err: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(err)) / max(np.max(np.abs(ref)), 1e-300))


def _lambda_order(s: int) -> int:
    """Cor. 5.2.1: λ has order s for even s, s − 1 for odd s."""
    return s if s % 2 == 0 else s - 1


def _stages(method: str | None, default: int) -> int:
    """The ``method`` override of the Lobatto experiments: the stage count s (2..8)."""
    if method is None:
        return default
    try:
        s = int(method)
    except (TypeError, ValueError):
        s = 0
    if not 2 <= s <= 8:
        raise ValueError(f"method must be the Lobatto stage count s (an integer 2..8, e.g. "
                         f"'3') for this experiment, got {method!r}.")
    return s


def _order_plot(results: dict[Any, dict[str, Any]], labels: tuple[str, ...], title: str):
    def plot(fig) -> None:
        from matplotlib.ticker import NullFormatter

        axes = np.atleast_1d(fig.subplots(1, len(labels)))
        for ax, key in zip(axes, labels):
            for name, r in results.items():
                ax.loglog(r["hs"], r[key], "o-", ms=3, label=str(name))
            ax.set_xlabel("h", fontsize=8)
            ax.set_title(f"{title}: error in {key}", fontsize=9)
            ax.tick_params(labelsize=7)
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(True, which="major", alpha=0.3)
        axes[0].legend(fontsize=6)
        fig.tight_layout()

    return plot


# ----------------------------------------------------------------------------- Fig. 3
# Asymptotic regime per s (larger steps for high orders so that three points stay above the
# round-off floor; the largest steps of s = 4, 5 are pre-asymptotic and not used).
# s = 5: with h = 0.4 the local slope of q is 7.7 (then 7.9, 8.0) and the fit gave 7.86, 0.11
# from the edge of 8 ± 0.25 (margin 1.8); over h = 0.25 .. 0.125 the fits are q 7.97, p 8.06
# (h = 0.125 is below the floor for p), λ 4.08 (margins 7.8, 4.0, 3.0).
_PARTICLE_HS = {2: (0.2, 0.1, 0.05, 0.025), 3: (0.2, 0.1, 0.05, 0.025),
                4: (0.2, 0.1, 0.05, 0.025), 5: (0.25, 0.2, 1 / 6, 0.125)}
_NEWTON = NewtonOptions(tol=1e-14)
#: Order fits against a DOP853 reference (rtol = atol = 1e-13) use only relative errors above
#: 10 × its tolerance: closer to it the reference's own error and the accumulated round-off
#: (measured up to ~20 % at 2e-13) bend the slope.
_REF_FLOOR = 1e-12
#: Fig. 7, s = 4: with h = 0.1/2^k the error reaches 6e-13 at h = 0.025 (below the floor).
_DISC_HS_S4 = (0.15, 0.1, 0.075, 0.05)


@experiment("high-order-fig3-particle-orders", paper=PAPER,
            title="Fig. 3: nonholonomic particle, convergence of q, p, λ (Lobatto s = 2..5)",
            claim="q and p converge with order 2s − 2; λ with order s (even s) or s − 1 (odd s)")
def particle_orders(quick: bool = False, method: str | None = None, h: float | None = None,
                    t_final: float | None = None) -> Outcome:
    """Errors at T = 2 (the project's choice, not in the paper) against the index-reduced ODE
    (DOP853 1e-13) for
    Lobatto IIIA–IIIB s = 2, 3, 4, 5, Lagrangian form (``method="hamiltonian"`` for eq. 15).
    ``h`` scales the largest step of every sweep."""
    form = method or "lagrangian"
    T = t_final or nonholonomic_particle.T_FINAL
    sysm = nonholonomic_particle.system()
    q0, v0 = nonholonomic_particle.Q0, nonholonomic_particle.V0
    qr, vr, lr = nonholonomic_particle.reference(np.array([0.0, T]))
    checks: list[Check] = []
    results: dict[Any, dict[str, Any]] = {}
    residual = 0.0
    for s, hs in _PARTICLE_HS.items():
        hs = tuple(x * (h / hs[0]) for x in hs) if h else hs
        prk = NonholonomicPRK(lobatto_iiia_iiib(s), form=form, newton=_NEWTON,
                              multiplier_rule="carry")
        eq, ep, el = [], [], []
        for hh in hs:
            tr = integrate(sysm, prk, q0, v0, h=hh, n_steps=grid_steps(T, hh))
            if not tr.success:
                raise RuntimeError(f"s = {s}, h = {hh}: {tr.message}")
            eq.append(_rel(tr.q[-1] - qr[-1], qr[-1]))
            ep.append(_rel(tr.p[-1] - vr[-1], vr[-1]))
            el.append(_rel(tr.lam[-1] - lr[-1], lr[-1]))
            residual = max(residual, float(np.max(np.abs(sysm.residual(tr.q, tr.v)))))
        results[f"s={s}"] = {"hs": list(hs), "q": eq, "p": ep, "lambda": el}
        # measured (quick = full, deterministic errors above the 1e-12 floor; OPENBLAS 1 and
        # unset identical): fits within 0.09 of the claim; worst margins 2.9 (s=4 q 6.09),
        # 3.0 (s=5 λ 4.08), 4.0 (s=4 λ 4.06, s=5 p 8.06), all others ≥ 7.8.
        checks.append(check_order(f"s={s}: order of q", hs, eq, 2 * s - 2,
                                      floor=_REF_FLOOR))
        checks.append(check_order(f"s={s}: order of p", hs, ep, 2 * s - 2,
                                      floor=_REF_FLOOR))
        checks.append(check_order(f"s={s}: order of λ", hs, el, _lambda_order(s),
                                      floor=_REF_FLOOR))
    # measured: 2.8e-14 (Newton-stop quantity, tol 1e-14; OPENBLAS 1 and unset identical):
    # margin 3.6 (≥ 3)
    checks.append(check_bound("max |Φ(q_k, v_k)| at the nodes", residual, 1e-13,
                              "≤ 1e-13 (solver tolerance 1e-14)"))
    return Outcome(checks, {"T": T, "form": form, "errors": results},
                   _order_plot(results, ("q", "p", "lambda"), "particle"),
                   notes="Initial data q0 = (1, 0.5, 0), v0 = (0.5, 1, 0.25), T = 2: paper §7.1 "
                         "proposals (the paper gives none). Relative ∞-norm errors.")


# ----------------------------------------------------------------------------- Figs. 4–5
#: Band constant of the CVT energy check: max|ΔE_T| ≤ _CVT_ENERGY_C·h² (Lobatto-2, order 2).
#: The error constant C = max|ΔE_T|/h² measured at h = 0.05, 0.1, 0.1414, 0.2 (T = 500, ε = ½,
#: both regimes) is at most 3.01 (high energy, h = 0.2; 2.58 at h = 0.1): 4.5 leaves a margin
#: ≥ 1.5 on a deterministic method error at every measured h (the earlier 0.03 = 3h² left 1.16).
_CVT_ENERGY_C = 4.5
@experiment("high-order-fig4-5-cvt-energies", paper=PAPER,
            title="Figs. 4–5: pendulum-driven CVT, driver/passenger/total energies (Lobatto-2)",
            claim="h = 0.1 gives bounded energies without drift for each subsystem and the whole; "
                  "h = π/10 is erratic")
def cvt_energies(quick: bool = False, method: str | None = None, h: float | None = None,
                 t_final: float | None = None) -> Outcome:
    """Both initial conditions (low and high energy) as one batch, ε = ½, Lobatto-2 at
    h = 0.1 and h = π/10; T = 500 (the project's proposal; quick: T = 100). ``method``: the
    stage count s; ``h`` replaces the good step 0.1."""
    s = _stages(method, 2)
    T = t_final or (100.0 if quick else cvt.T_FINAL)
    h_good = h or 0.1
    sysm = cvt.system()
    q0 = np.stack([cvt.Q0, cvt.Q0])
    v0 = np.stack([cvt.V0_LOW, cvt.V0_HIGH])
    prk = NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule="carry")
    runs = {}
    for name, hh in (("0.1", h_good), ("pi/10", np.pi / 10)):
        tr = integrate(sysm, prk, q0, v0, h=hh, n_steps=round(T / hh))
        if not tr.success:
            raise RuntimeError(f"h = {hh}: {tr.message}")
        E = np.stack(cvt.energies(tr.q, tr.v), axis=0)  # (3, N, 2)
        runs[name] = (tr.t, E - E[:, :1])
    checks = []
    t, dE = runs["0.1"]
    _, dEbad = runs["pi/10"]
    half = len(t) // 2
    for j, regime in enumerate(("low", "high")):
        for k, sub in enumerate(("driver", "passenger", "total")):
            e = np.abs(dE[k, :, j])
            if sub == "total":
                # Lobatto-2 is order 2: max|ΔE_T| = C·h² with C measured (T = 500, ε = ½) at
                # h = 0.05, 0.1, 0.1414, 0.2: high 2.48, 2.58, 2.67, 3.01; low 1.31 at each
                # h ≤ 0.14, 1.47 at 0.2. A deterministic method error (round-off moves it by
                # ~1e-12), so the band _CVT_ENERGY_C·h² leaves margin ≥ 1.5 at every measured h.
                bound = _CVT_ENERGY_C * h_good**2
                checks.append(check_bound(
                    f"{regime}: max |ΔE_T|, h = {h_good:g}", e.max(), bound,
                    f"bounded (paper §7.2): ≤ {_CVT_ENERGY_C:g}·h² = {bound:.3g} (order 2; "
                    "C = max|ΔE_T|/h² measured 2.48–3.01 over h = 0.05–0.2, margin ≥ 1.5)"))
            # measured: halves ratio 0.735..1.06 (quick T = 100), 1.00..1.01 (full T = 500,
            # OPENBLAS 1): oscillating bounded errors (ratio 1 = no drift; a linear drift gives
            # ≥ 2); margin ≥ 1.42 to the band, i.e. ≥ 8 in excess over 1 (0.06 of 0.5).
            ratio = e[half:].max() / e[:half].max()
            checks.append(Check(f"{regime}: {sub} energy, max|ΔE| 2nd half / 1st half (h = 0.1)",
                                ratio, "no drift: < 1.5", bool(ratio < 1.5)))
        # measured: low 31.1 / 42.3, high 20.5 / 20.1 (quick T = 100 / full T = 500) against
        # > 10: worst margin 2.0 (deterministic method errors, resonant step π/10)
        ratio = np.abs(dEbad[1, :, j]).max() / np.abs(dE[1, :, j]).max()
        checks.append(Check(f"{regime}: passenger max|ΔE_p|, h = π/10 over h = 0.1", ratio,
                            "erratic at π/10: > 10", bool(ratio > 10)))

    def plot(fig) -> None:
        axes = fig.subplots(2, 2, sharex=True)
        for col, name in enumerate(("0.1", "pi/10")):
            tt, d = runs[name]
            for row, regime in enumerate(("low", "high")):
                ax = axes[row, col]
                for k, sub in enumerate(("E_d", "E_p", "E_T")):
                    ax.plot(tt, d[k, :, row], lw=0.6, label=sub)
                ax.set_title(f"{regime} energy, h = {name}", fontsize=8)
        axes[0, 0].legend(fontsize=7)
        axes[1, 0].set_xlabel("t")
        axes[1, 1].set_xlabel("t")

    data = {"T": T, "s": s, "max_abs_dE": {name: np.abs(d).max(axis=1).tolist()
                                           for name, (_, d) in runs.items()}}
    return Outcome(checks, data, plot,
                   notes="ε = ½, Lobatto-2 and both initial conditions are the paper's; "
                         "T is the project's choice. max_abs_dE[h][subsystem][regime].")


# ----------------------------------------------------------------------------- Fig. 6
#: End of the time window of the full-run collapse check. μ(E, k) is already an ensemble mean;
#: its time mean over 0 < t ≤ 100 averages ~1000 (h = 0.1) correlated samples, while a single
#: value at t = 200 is one sample of two decorrelated chaotic runs (the old check "ratio at
#: t = 200 within a factor 4" measured 0.21..2.9 over the variants below).
#: Measured ratio of the window means (h over h/2) over the paper's ensemble, three 1e-9
#: (round-off sized) and three 0.05 perturbations of its angles, OPENBLAS_NUM_THREADS = 1 and unset
#: (bitwise equal) and h = 0.1 and 0.08: Lobatto-2 in [0.89, 1.11], Lobatto-3 in [0.97, 1.09]. Runs
#: started 1e-9 apart separate after t ≈ 60..80; up to t = 100 μ/h^p still collapses, later windows
#: of 20 spread 0.5..2.4. The band [0.7, 1.4] is the independent numpy check's collapse band of the
#: t = 20 check: the measured spread uses at most 1/3 of its width in log ratio (margin ≥ 3), and a
#: wrong power p ± 2 would move the ratio by a factor 4.
_CHAOS_WINDOW = 100.0
@experiment("high-order-fig6-chaotic-mse", paper=PAPER,
            title="Fig. 6: fully chaotic system, ensemble energy MSE μ(E, k) (Lobatto-2, -3)",
            claim="μ(E, k)/h⁴ (Lobatto-2) and μ(E, k)/h¹⁰ (Lobatto-3) collapse for different h")
def chaotic_energy_mse(quick: bool = False, method: str | None = None, h: float | None = None,
                       t_final: float | None = None) -> Outcome:
    """Ensemble J = 9 (the project's proposal), h ∈ {0.1, 0.05}; the ratio of μ/h^p between the two
    step sizes at t = 20 must lie in [0.7, 1.4] (see the docs' theory page). The paper's p = 10
    for Lobatto-3 is a typo for 8 = 2(2s − 2) (see the docs' theory page, errata), recorded as a
    deficiency check. Runs
    longer than t = 20 also compare the time mean of μ/h^p over 0 < t ≤ 100 (see
    ``_CHAOS_WINDOW``), never a single late-time value: there the two step sizes follow
    decorrelated chaotic trajectories and one sample of the ratio flips with round-off."""
    T = t_final or (20.0 if quick else 200.0)
    h1 = h or 0.1
    hs = (h1, h1 / 2)
    sysm = chaotic.system()
    q0, v0 = chaotic.ensemble()
    E0 = chaotic.energy(q0, v0)
    checks: list[Check] = []
    curves = {}
    for s in (2, 3):
        prk = NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule="carry")
        mu = {}
        for hh in hs:
            # the paper's ensemble (J = 9: 10 members) as one chunk of integrate_ensemble
            tr = integrate_ensemble(sysm, prk, q0, v0, h=hh, n_steps=round(T / hh))
            if not tr.all_success:
                raise RuntimeError(f"s = {s}, h = {hh}: {tr.messages[int(np.argmin(tr.success))]}")
            mu[hh] = (tr.t, np.mean((chaotic.energy(tr.q, tr.v) - E0) ** 2, axis=-1))
        curves[s] = mu
        p = 2 * (2 * s - 2)
        at20 = [mu[hh][1][np.argmin(np.abs(mu[hh][0] - min(20.0, T)))] for hh in hs]
        ratio = (at20[0] / hs[0] ** p) / (at20[1] / hs[1] ** p)
        checks.append(Check(f"Lobatto-{s}: (μ/h^{p}) at h = {hs[0]:g} over h = {hs[1]:g}, "
                            f"t = {min(20.0, T):g}", ratio, "collapse: in [0.7, 1.4]",
                            bool(0.7 <= ratio <= 1.4)))
        if s == 3:
            r10 = (at20[0] / hs[0] ** 10) / (at20[1] / hs[1] ** 10)
            checks.append(Check("Lobatto-3: paper's scaling μ/h¹⁰, ratio between the two h",
                                r10, "collapse: in [0.7, 1.4]", bool(0.7 <= r10 <= 1.4),
                                deficiency="typo in the paper (see the errata on the docs' theory "
                                           "page): the collapse is with h⁸ = h^{2(2s−2)}, not h¹⁰"))
        if T > 20.0:
            t_w = min(_CHAOS_WINDOW, T)
            means = [np.mean(mu[hh][1][(mu[hh][0] > 0) & (mu[hh][0] <= t_w)]) / hh**p
                     for hh in hs]
            win = means[0] / means[1]
            checks.append(Check(f"Lobatto-{s}: time mean of μ/h^{p} over 0 < t ≤ {t_w:g}, "
                                f"ratio h = {hs[0]:g} over h = {hs[1]:g}", win,
                                "collapse: in [0.7, 1.4]", bool(0.7 <= win <= 1.4)))

    def plot(fig) -> None:
        axes = fig.subplots(1, 2)
        for ax, s in zip(axes, (2, 3)):
            p = 2 * (2 * s - 2)
            for hh, (tt, m) in curves[s].items():
                ax.semilogy(tt[1:], m[1:] / hh**p, lw=0.7, label=f"h = {hh:g}")
            ax.set_title(f"Lobatto-{s}: μ(E, k)/h^{p}", fontsize=9)
            ax.set_xlabel("t")
            ax.legend(fontsize=7)

    return Outcome(checks, {"T": T, "hs": hs, "E0": float(E0[0])}, plot,
                   notes="J = 9, h ∈ {0.1, 0.05}, T: the project's choice (odelab); E0 = 3.06. The "
                         "full-run collapse statistic is the time mean of the ensemble MSE "
                         "μ/h^p over 0 < t ≤ 100, not μ at t = T: after t ≈ 60..80 the runs "
                         "with the two step sizes follow decorrelated chaotic trajectories, and "
                         "a single late-time ratio then flips with round-off (measured 0.21..2.9 "
                         "at t = 200 over perturbed ensembles and step sizes), while the window "
                         "mean stays within 0.89..1.11.")


# ----------------------------------------------------------------------------- Fig. 7
@experiment("high-order-fig7-disc-orders", paper=PAPER,
            title="Fig. 7: vertical disc with spring on SE(2), convergence (cay and exp)",
            claim="g and η converge with order 2s − 2; λ with order s (even s) or s − 1 (odd s); "
                  "the constraint holds at the nodes")
def disc_orders(quick: bool = False, method: str | None = None, h: float | None = None,
                t_final: float | None = None) -> Outcome:
    """LieNonholonomicPRK s = 2, 3, 4 with both retractions (``method`` = "cayley" or "exp"
    to run one), T = 3 (the project's choice, not in the paper), against the exact reduced ODE
    (DOP853 1e-13). The step h = 0.2 first proposed is pre-asymptotic for λ at s = 2, so the sweep
    is h ∈ {0.1, 0.05, 0.025}; for s = 4 it is h ∈ {0.15, 0.1, 0.075, 0.05}, which keeps the errors
    above the reference floor 1e-12 (at h = 0.025 they are 6e-13)."""
    T = t_final or vertical_disc.T_FINAL
    hs = tuple(x * (h / 0.1) for x in (0.1, 0.05, 0.025)) if h else (0.1, 0.05, 0.025)
    retractions = (method,) if method else ("cayley", "exp")
    sysm = vertical_disc.lie_system()
    g0, eta0 = vertical_disc.initial_group()
    gr, er, lr = vertical_disc.reference(np.array([0.0, T]))
    checks: list[Check] = []
    results: dict[Any, dict[str, Any]] = {}
    v2 = 0.0
    for kind in retractions:
        for s in (2, 3, 4):
            prk = LieNonholonomicPRK(s, retraction=kind, multiplier_rule="carry")
            hs_s = hs if s < 4 else tuple(x * (hs[0] / 0.1) for x in _DISC_HS_S4)
            eg, ee, el = [], [], []
            for hh in hs_s:
                tr = integrate(sysm, prk, g0, eta0, h=hh, n_steps=grid_steps(T, hh))
                if not tr.success:
                    raise RuntimeError(f"{kind}, s = {s}, h = {hh}: {tr.message}")
                eg.append(_rel(tr.q[-1] - gr[-1], gr[-1]))
                ee.append(_rel(tr.v[-1] - er[-1], er[-1]))
                el.append(_rel(tr.lam[-1] - lr[-1], lr[-1]))
                v2 = max(v2, float(np.max(np.abs(tr.v[:, 1]))))
            results[f"{kind} s={s}"] = {"hs": list(hs_s), "g": eg, "eta": ee, "lambda": el}
            # measured (quick = full): fits within 0.05 of the claim; worst margin 5.0 (cayley,
            # s=2, λ 2.05), deterministic errors above the 1e-12 floor
            checks.append(check_order(f"{kind}, s={s}: order of g", hs_s, eg, 2 * s - 2,
                                      floor=_REF_FLOOR))
            checks.append(check_order(f"{kind}, s={s}: order of η", hs_s, ee, 2 * s - 2,
                                      floor=_REF_FLOOR))
            checks.append(check_order(f"{kind}, s={s}: order of λ", hs_s, el, _lambda_order(s),
                                      floor=_REF_FLOOR))
    # measured: 5.2e-16 (round-off: v₂ = 0 is linear in η), margin 1900
    checks.append(check_bound("max |v₂| at the nodes", v2, 1e-12))
    return Outcome(checks, {"T": T, "errors": results},
                   _order_plot(results, ("g", "eta", "lambda"), "disc"),
                   notes="m = 1, I_z = 0.5, (x, y, θ)0 = (1, 0.5, 0.3), η0 = (0.8, 0, 1.2), T = 3: "
                         "the project's choice, not in the paper. Relative ∞-norm errors.")


# ----------------------------------------------------------------------------- Fig. 8
@experiment("high-order-fig8-ball-integrals", paper=PAPER,
            title="Fig. 8: homogeneous ball on a rotating turntable, first integrals "
                  "(Lobatto-3, cay)",
            claim="I1, I2, I3 preserved to solver tolerance; the moving energy bounded without "
                  "drift")
def ball_first_integrals(quick: bool = False, method: str | None = None, h: float | None = None,
                         t_final: float | None = None) -> Outcome:
    """Physical constraint (see the docs' theory page), s = 3, cay, h = 0.1, T = 100 (the
    project's choices; quick: T = 50). Bounds from the docs' theory page: |ΔI_k| ≤ 1e-12,
    |ΔE_mov| ≤ 1e-8 and no growth
    (max over the second half ≤ 1.5 × the first). The full run adds the convergence against the
    closed form (T = 4, s = 2, 3, 4). ``method``: the stage count s of the long run."""
    T = t_final or (50.0 if quick else turntable_ball.T_FINAL)
    hh = h or 0.1
    s = _stages(method, 3)
    sysm = turntable_ball.system()
    g0, eta0 = turntable_ball.initial()
    tr = integrate(sysm, LieNonholonomicPRK(s, retraction="cayley", multiplier_rule="carry"),
                   g0, eta0, h=hh,
                   n_steps=round(T / hh))
    if not tr.success:
        raise RuntimeError(tr.message)
    I = turntable_ball.first_integrals(tr.q, tr.v)
    dI = I - I[0]
    # measured (quick T = 50 / full T = 100, OPENBLAS unset / 1): max |ΔI_k| ≤ 4.0e-15 / 9.4e-15
    # (round-off growing with the step count, margin ≥ 106); max |ΔE_mov| 1.9e-9 both (method
    # error, margin 5.2); halves ratio 1.00 (no drift, band 1.5); constraint residual 2.2e-15
    # (margin 450).
    checks = [check_bound(f"max |ΔI{k + 1}|", np.abs(dI[:, k]).max(), 1e-12) for k in range(3)]
    emov = np.abs(dI[:, 3])
    checks.append(check_bound("max |ΔE_mov|", emov.max(), 1e-8,
                              "bounded, ≤ 1e-8 (the project's independent check)"))
    halves = [p.max() for p in np.array_split(emov[1:], 2)]
    growth = halves[1] / halves[0]
    checks.append(Check("E_mov: max over 2nd half / 1st half", growth, "no drift: ≤ 1.5",
                        bool(growth <= 1.5)))
    checks.append(check_bound("max constraint residual",
                              np.abs(sysm.residual(tr.q, tr.v)).max(), 1e-12))
    data: dict[str, Any] = {"T": T, "h": hh, "s": s, "max_abs_dI": np.abs(dI).max(0).tolist()}
    if not quick:
        gr, er, _ = turntable_ball.reference(np.array([0.0, 4.0]))
        conv = {}
        for ss in (2, 3, 4):
            # asymptotic regime per s; for s = 4 the g error converges slightly faster than
            # h⁶ on this problem (measured 6.6), so g is checked as "at least 2s − 2" there
            hs = (0.2, 0.1, 0.05) if ss < 4 else (0.1, 0.08, 0.0625, 0.05)
            # measured fits: η 2.04, 4.00, 6.03; g 2.05, 4.06, 6.61 (≥ 5.75); worst margin 3.9
            # (s=3 g), deterministic errors
            eg, ee = [], []
            for hc in hs:
                tc = integrate(sysm,
                               LieNonholonomicPRK(ss, newton=_NEWTON, multiplier_rule="carry"),
                               g0, eta0, h=hc,
                               n_steps=grid_steps(4.0, hc))
                eg.append(_rel(tc.q[-1] - gr[-1], gr[-1]))
                ee.append(_rel(tc.v[-1] - er[-1], er[-1]))
            conv[ss] = (hs, eg, ee)
            checks.append(check_order(f"s={ss}: order of η vs the closed form", hs, ee,
                                      2 * ss - 2))
            if ss < 4:
                checks.append(check_order(f"s={ss}: order of g vs the closed form", hs, eg,
                                          2 * ss - 2))
            else:
                slope = fit_order(hs, eg, 1e-13)
                checks.append(Check(f"s={ss}: order of g vs the closed form", slope,
                                    f"≥ {2 * ss - 2} − 0.25 (order at least 2s − 2)",
                                    bool(slope >= 2 * ss - 2 - 0.25)))
        data["convergence"] = {k: {"hs": list(v[0]), "g": v[1], "eta": v[2]}
                               for k, v in conv.items()}

    def plot(fig) -> None:
        axes = fig.subplots(1, 2)
        for k in range(3):
            axes[0].plot(tr.t, dI[:, k], lw=0.7, label=f"I{k + 1} − I{k + 1}(0)")
        axes[0].legend(fontsize=7)
        axes[0].set_xlabel("t")
        axes[1].plot(tr.t, dI[:, 3], lw=0.7)
        axes[1].set_title("E_mov − E_mov(0)", fontsize=9)
        axes[1].set_xlabel("t")

    return Outcome(checks, data, plot,
                   notes="r = 1, a = 2/5, Ω = 1, R0 = I, (x, y)0 = (1, 0), ω0 = (0.3, −0.2, 0.5): "
                         "the project's choice, not in the paper; physical constraint (ω = R ω_b).")


