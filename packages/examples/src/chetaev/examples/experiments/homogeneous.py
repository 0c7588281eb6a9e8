"""Experiments of "High-order integrators for Lagrangian systems on homogeneous spaces via
nonholonomic mechanics" (§5): the spherical pendulum and the spherical Kepler problem on
S² = SO(3)/SO(2), integrated as nonholonomic systems on SO(3) with ``LieNonholonomicPRK``.

Settings the paper omits are the project's proposals: m = M = α = ρ = 1, X = e₃; the reference is
the ambient ODE on S² ⊂ R³ (DOP853, rtol 1e-13), independent of the group lift.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from chetaev.discrete_lagrangian import SingularMatrixError, integrate
from chetaev.nh_integrators import LieNonholonomicPRK

from .._registry import Check, Outcome, check_bound, check_order, experiment
from ..models import sphere_pendulum, spherical_kepler
from ._common import grid_steps
from ._plotting import h_axis

__all__ = [
    "kepler_orbits",
    "pendulum_energy_by_multiplier_rule",
    "sphere_orders",
    "weighted_sum_closure",
]

PAPER = "homogeneous-spaces-rkmk"
#: Order fits against the DOP853 reference (rtol = atol = 1e-13) use only errors above
#: 10 × its tolerance.
_REF_FLOOR = 1e-12


def _sphere_errors(model: Any, s: int, kind: str, hs: tuple[float, ...], T: float
                   ) -> tuple[list[float], list[float], list[float], float]:
    xr, vr = model.reference(np.array([0.0, T]))
    sysm = model.lift_system()
    ex, ev, el, off = [], [], [], 0.0
    for h in hs:
        tr = integrate(sysm, LieNonholonomicPRK(s, retraction=kind, multiplier_rule="carry"),
                       model.G0, model.ETA0, h=h,
                       n_steps=grid_steps(T, h))
        if not tr.success:
            raise RuntimeError(f"s = {s}, h = {h}: {tr.message}")
        x, v = model.to_ambient(tr.q, tr.v)
        ex.append(float(np.max(np.abs(x[-1] - xr[-1]))))
        ev.append(float(np.max(np.abs(v[-1] - vr[-1]))))
        el.append(float(np.max(np.abs(tr.lam[-1]))))  # exact multiplier: λ ≡ 0
        off = max(off, float(np.max(np.abs(np.linalg.norm(x, axis=-1) - 1.0))),
                  float(np.max(np.abs(tr.v[:, 2]))))
    return ex, ev, el, off


@experiment("homogeneous-fig5-sphere-orders", paper=PAPER,
            title="Fig. 5: spherical pendulum and Kepler problem, convergence "
                  "(τ = exp, s = 2, 3, 4)",
            claim="slopes 2, 4, 6 in configuration and velocity; multipliers: s = 2 better than "
                  "predicted (Λ ≡ 0), order 2 for s = 3 and 4 for s = 4")
def sphere_orders(quick: bool = False, method: str | None = None, h: float | None = None,
                  t_final: float | None = None) -> Outcome:
    """x = g e₃ and ẋ against the ambient ODE at T (pendulum T = 2, h = 0.2/2ʲ; Kepler T = 1,
    h = 0.1/2ʲ; the docs' theory page). ``method`` chooses the retraction (default "exp", as Fig.
    5)."""
    kind = method or "exp"
    cases = {"pendulum": (sphere_pendulum, (0.2, 0.1, 0.05), 2.0),
             "kepler": (spherical_kepler, (0.1, 0.05, 0.025), 1.0)}
    checks: list[Check] = []
    results: dict[str, dict[str, Any]] = {}
    off = 0.0
    for name, (model, hs0, T) in cases.items():
        T = t_final or T
        for s in (2, 3, 4):
            # the pendulum's s = 4 error reaches round-off (~2e-13) at h = 0.05: larger steps
            # Kepler's s = 4 error is 3e-13 at h = 0.025, below the reference floor
            hs = {("pendulum", 4): (0.25, 0.2, 0.125, 0.1),
                  ("kepler", 4): (0.125, 0.1, 0.0625, 0.05)}.get((name, s), hs0)
            if h:
                hs = tuple(x * h / hs[0] for x in hs)
            ex, ev, el, o = _sphere_errors(model, s, kind, hs, T)
            off = max(off, o)
            results[f"{name} s={s}"] = {"hs": list(hs), "x": ex, "xdot": ev, "Lambda": el}
            # measured (quick = full: the sweep has no quick variant): fitted orders within
            # 0.09 of 2s − 2 and of the Λ order; worst margins 2.8 (pendulum s=4 x 6.09, Λ 3.91)
            # and 3.3 (Kepler s=4 Λ 3.92): deterministic errors above the 1e-12 floor; max |Λ|
            # of s = 2 (exact 0, round-off) 4.9e-13 against 1e-11: margin 20.
            checks.append(check_order(f"{name}, s={s}: order of x", hs, ex, 2 * s - 2,
                                      floor=_REF_FLOOR))
            checks.append(check_order(f"{name}, s={s}: order of ẋ", hs, ev, 2 * s - 2,
                                      floor=_REF_FLOOR))
            if s == 2:
                checks.append(check_bound(f"{name}, s=2: max |Λ| (exact 0; F2)", max(el), 1e-11))
            else:
                checks.append(check_order(f"{name}, s={s}: order of Λ", hs, el,
                                          2 if s == 3 else 4))
    # measured: 2.4e-14 (round-off/Newton-stop quantity): margin 4.2 (≥ 3)
    checks.append(check_bound("max(| |x| − 1 |, |η₃|) at the nodes", off, 1e-13))

    def plot(fig) -> None:
        axes = fig.subplots(1, 2)
        for key, r in results.items():
            axes[0].loglog(r["hs"], r["x"], "o-", label=key)
            if not key.endswith("s=2"):
                axes[1].loglog(r["hs"], r["Lambda"], "o-", label=key)
        axes[0].set_title("error in x = g e₃", fontsize=9)
        axes[1].set_title("|Λ| (exact multiplier 0)", fontsize=9)
        all_hs = sorted({h for r in results.values() for h in r["hs"]})
        for ax in axes:
            h_axis(ax, all_hs)
            ax.tick_params(axis="y", labelsize=7)
            ax.set_xlabel("h")
            ax.legend(fontsize=6)
        fig.tight_layout()

    return Outcome(checks, {"retraction": kind, "errors": results}, plot,
                   notes="m = M = α = ρ = 1, X = e₃ (not in the paper: the project's choice); "
                         "reference: ambient ODE on "
                         "S² (DOP853, rtol 1e-13).")


def _fifths(a: np.ndarray) -> list[float]:
    return [float(np.max(p)) for p in np.array_split(np.abs(a), 5)]


@experiment("homogeneous-fig1-4-pendulum-energy", paper=PAPER,
            title="Figs. 1–4: spherical pendulum, energy and multipliers per multiplier rule "
                  "(τ = cay, h = 0.1)",
            claim="s = 2, 4: energy and multipliers bounded; s = 3 with Λ-concatenation: the "
                  "multiplier drifts; s = 3 with another closure works well; x stays on S²")
def pendulum_energy_by_multiplier_rule(quick: bool = False, method: str | None = None,
                                       h: float | None = None, t_final: float | None = None
                                       ) -> Outcome:
    """Runs (s, rule) = (2, carry), (3, carry), (3, zero_first), (4, carry) to T = 200 (quick:
    T = 30). Bounded means: max over the last fifth ≤ 1.25 × the first fifth and below the
    magnitudes of an independent numpy check at h = 0.1 (×1.5; at another h scaled by the
    measured order, (h/0.1)^p). The Fig. 4 closure C3 (Σ bⱼΛʲ = 0) is
    singular on the lift (see the docs' theory page); Fig. 4 is reproduced with C2
    ("zero_first")."""
    T = t_final or (30.0 if quick else 200.0)
    hh = h or 0.1
    kind = method or "cayley"
    sysm = sphere_pendulum.lift_system()
    runs = {}
    for s, rule in ((2, "carry"), (3, "carry"), (3, "zero_first"), (4, "carry")):
        tr = integrate(sysm, LieNonholonomicPRK(s, retraction=kind, multiplier_rule=rule),
                       sphere_pendulum.G0, sphere_pendulum.ETA0, h=hh, n_steps=round(T / hh))
        if not tr.success:
            raise RuntimeError(f"s = {s}, {rule}: {tr.message}")
        x, v = sphere_pendulum.to_ambient(tr.q, tr.v)
        E = sphere_pendulum.energy(x, v)
        runs[s, rule] = (tr, E - E[0], x)
    checks: list[Check] = []
    # (max |E − E0|, max |Λ|) of the independent numpy check at h = 0.1, and the orders with
    # which they scale: the band at another h is C·(h/0.1)^p, C from the check (unchanged at the
    # default h). Measured (deterministic method errors; quick T = 30) at h = 0.05, 0.1, 0.2:
    # E: s=2 1.71e-3, 6.91e-3, 2.84e-2 (p = 2), s=3 zero_first 1.48e-7, 2.46e-6, 4.29e-5 (p = 4),
    # s=4 8.90e-12, 6.22e-10, 4.92e-8 (p = 6); Λ: s=3 zero_first 5.81e-6, 4.67e-5, 3.83e-4
    # (p = 3), s=4 1.77e-8, 2.94e-7, 5.19e-6 (p = 4); s=2 Λ is exactly 0: its max is round-off,
    # growing ~1/h and with the step count (h = 0.05..0.2, T = 30 and 200: worst 5.1e-14 at
    # h = 0.05, 4.0e-14 at h = 0.1, T = 200) against the floor 1e-13: margin 2.5 at the default h,
    # 1.97 under --h 0.05 — below the ≥ 3 target for round-off (flagged in issue 14's audit, not
    # yet derived from the solve's conditioning). The ×1.5 bands leave
    # margin 1.5 at h = 0.1 (our values reproduce the check's to 3 digits), ≥ 1.51 at h = 0.05
    # and 1.21..1.46 at h = 0.2 (pre-asymptotic: local orders 2.04..6.3). The fifths ratios are
    # 0.992..1.018 at every h (no drift; band 1.25). Full run (T = 200, h = 0.1, OPENBLAS 1):
    # the same maxima to 3 digits (reached within T = 30).
    bounds = {(2, "carry"): (6.91e-3, 7e-15), (3, "zero_first"): (2.46e-6, 4.67e-5),
              (4, "carry"): (6.22e-10, 2.94e-7)}
    lam_orders = {2: 0, 3: 3, 4: 4}
    rel_h = hh / 0.1
    on_sphere = 0.0
    for (s, rule), (tr, dE, x) in runs.items():
        on_sphere = max(on_sphere, float(np.max(np.abs(np.linalg.norm(x, axis=-1) - 1.0))),
                        float(np.max(np.abs(tr.v[:, 2]))))
        if (s, rule) not in bounds:
            continue
        emax, lmax = bounds[s, rule]
        emax *= rel_h ** (2 * s - 2)
        lmax *= rel_h ** lam_orders[s]
        checks.append(check_bound(f"s={s} {rule}: max |E − E0|", np.abs(dE).max(), 1.5 * emax,
                                  f"bounded, ≤ 1.5 × {emax:.2e} (the project's independent check"
                                  f"{'' if rel_h == 1 else f' × (h/0.1)^{2 * s - 2}'})"))
        f = _fifths(dE)
        checks.append(Check(f"s={s} {rule}: energy error, last fifth / first fifth", f[-1] / f[0],
                            "no drift: ≤ 1.25", bool(f[-1] <= 1.25 * f[0])))
        checks.append(check_bound(f"s={s} {rule}: max |Λ|", np.abs(tr.lam).max(),
                                  max(1.5 * lmax, 1e-13),
                                  "bounded (the project's independent check)"))
        if s > 2:
            fl = _fifths(tr.lam[:, 0])
            checks.append(Check(f"s={s} {rule}: |Λ|, last fifth / first fifth", fl[-1] / fl[0],
                                "no drift: ≤ 1.25", bool(fl[-1] <= 1.25 * fl[0])))
    tr3, _, _ = runs[3, "carry"]
    late = tr3.t > tr3.t[-1] / 2
    slope = float(np.polyfit(tr3.t[late], tr3.lam[late, 0], 1)[0])
    # The drift rate is O(h²): measured slope/h² = −0.0204, −0.0204, −0.0206 at h = 0.05, 0.1,
    # 0.2 (quick T = 30; full −2.04e-4 at h = 0.1), so the threshold is 5e-5·(h/0.1)², unchanged
    # at the default h and a margin 4.1 at every measured h (deterministic).
    slope_min = 5e-5 * rel_h**2
    checks.append(Check("s=3 carry: Λ drift per unit time (the paper's instability)", slope,
                        f"drifts: |slope| > {slope_min:.2g} (an independent numpy check: "
                        "−2.05e-4 at h = 0.1; the rate scales with h²)",
                        bool(abs(slope) > slope_min)))
    fl = _fifths(tr3.lam[:, 0])
    checks.append(Check("s=3 carry: |Λ|, last fifth / first fifth", fl[-1] / fl[0],
                        "bounded: ≤ 1.25", bool(fl[-1] <= 1.25 * fl[0]),
                        deficiency="s = 3 with Λ-concatenation: the multiplier error is "
                                   "multiplied by R_A(∞) = +1 each step and drifts (paper §5.1, "
                                   "Fig. 3b); "
                                   "use multiplier_rule='zero_first'"))
    # measured: worst 3.0e-15 quick (h = 0.05..0.2), 6.2e-15 full (round-off), margin 16
    checks.append(check_bound("max(| |x| − 1 |, |η₃|) over all runs", on_sphere, 1e-13,
                              "x on S², 𝔪-constraint to round-off"))

    def plot(fig) -> None:
        axes = fig.subplots(1, 3)
        for (s, rule), (tr, dE, x) in runs.items():
            axes[0].plot(x[:, 0], x[:, 1], lw=0.4, label=f"s={s} {rule}")
            axes[1].semilogy(tr.t[1:], np.abs(dE[1:]) + 1e-18, lw=0.6, label=f"s={s} {rule}")
            axes[2].semilogy(tr.t[1:], np.abs(tr.lam[1:, 0]) + 1e-18, lw=0.6,
                             label=f"s={s} {rule}")
        axes[0].set_aspect("equal")
        axes[0].set_title("x = g e₃ (x₁, x₂) (Fig. 1)", fontsize=8)
        axes[1].set_title("|E − E0| (Figs. 2, 4a)", fontsize=8)
        axes[2].set_title("|Λ| (Figs. 3, 4b)", fontsize=8)
        for ax in axes:
            ax.tick_params(labelsize=6)
        axes[1].set_xlabel("t", fontsize=8)
        axes[2].set_xlabel("t", fontsize=8)
        axes[1].legend(fontsize=5)
        fig.tight_layout()

    data = {"T": T, "h": hh, "retraction": kind, "lambda_slope_s3_carry": slope,
            "max_abs_dE": {f"s={s} {r}": float(np.abs(d).max()) for (s, r), (_, d, _) in
                           runs.items()}}
    return Outcome(checks, data, plot,
                   notes="m = M = α = 1 (not in the paper: the project's choice); magnitudes "
                         "from the project's independent check (not in the paper).")


@experiment("homogeneous-fig4-weighted-sum-closure", paper=PAPER,
            title="Fig. 4: s = 3 with the closure Σ bⱼΛʲ = 0 (C3)",
            claim="the extra equation Σ bⱼΛʲ = 0 'works rather well'")
def weighted_sum_closure(quick: bool = False, method: str | None = None,
                         h: float | None = None, t_final: float | None = None) -> Outcome:
    """One step of the C3 closure on the pendulum lift: the step is well posed (1) or the
    Newton matrix is singular (0). On the lift C3 is implied by the end-point constraint
    (discrete Noether identity, the docs' theory page), so the paper's claim cannot be
    reproduced."""
    hh = h or 0.1
    sysm = sphere_pendulum.lift_system()
    prk = LieNonholonomicPRK(3, retraction=method or "cayley", multiplier_rule="weighted_sum")
    state = prk.initial_state(sysm, sphere_pendulum.G0, sphere_pendulum.ETA0)
    try:
        prk.step(sysm, state, hh)
        solvable, msg = 1.0, "step solved"
    except SingularMatrixError as exc:
        solvable, msg = 0.0, str(exc)
    check = Check("C3 step is well posed (1 = solved, 0 = singular)", solvable, "1 (well posed)",
                  solvable == 1.0,
                  deficiency="C3 is implied by φ(η_{k+1}) = 0 on a homogeneous-space lift "
                             "(a discrete Noether identity; see the docs' theory page): singular; "
                             "Fig. 4 is reproduced with C2 "
                             "('zero_first') in homogeneous-fig1-4-pendulum-energy")
    def plot(fig) -> None:
        # the closures that can be solved on the lift, for comparison with the paper's Fig. 4
        ax1, ax2 = fig.subplots(1, 2)
        T = 30.0
        for rule, style in (("carry", "-"), ("zero_first", "--")):
            other = LieNonholonomicPRK(3, retraction=method or "cayley", multiplier_rule=rule)
            tr = integrate(sysm, other, sphere_pendulum.G0, sphere_pendulum.ETA0, h=hh,
                           n_steps=round(T / hh))
            x, v = sphere_pendulum.to_ambient(tr.q, tr.v)
            E = sphere_pendulum.energy(x, v)
            ax1.semilogy(tr.t[1:], np.abs(E[1:] - E[0]) + 1e-18, style, lw=0.8,
                         label=f"s=3 {rule}")
            ax2.semilogy(tr.t[1:], np.abs(tr.lam[1:, 0]) + 1e-18, style, lw=0.8,
                         label=f"s=3 {rule}")
        verdict = "solved" if solvable == 1.0 else "singular Newton matrix at the first step"
        fig.suptitle(f"C3 (Σ bⱼΛʲ = 0): {verdict}; the other s = 3 closures:", fontsize=9)
        ax1.set_title("|E − E0|", fontsize=8)
        ax2.set_title("|Λ|", fontsize=8)
        for ax in (ax1, ax2):
            ax.set_xlabel("t", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=7)
        fig.tight_layout()

    return Outcome([check], {"message": msg}, plot, notes=msg)


@experiment("homogeneous-fig6-kepler-orbits", paper=PAPER,
            title="Fig. 6: spherical Kepler orbits (τ = exp, h = 0.01, s = 2, 3, 4)",
            claim="numerical precession as for planar Kepler with symplectic methods; the lower "
                  "the order, the more noticeable; the orbit stays on S²")
def kepler_orbits(quick: bool = False, method: str | None = None, h: float | None = None,
                  t_final: float | None = None) -> Outcome:
    """Position error against the ambient reference at T = 36 (about 10 radial periods; quick:
    T = 3.6, one period), energy error, |x| − 1 and |η₃| (independent numpy check: 2.6e-3, 1.3e-7,
    9.2e-12 at T = 36). Runs of T ≥ 20 also measure the s = 3 multiplier drift."""
    T = t_final or (3.6 if quick else 36.0)
    hh = h or 0.01
    kind = method or "exp"
    n = round(T / hh)
    t = hh * np.arange(n + 1)
    xr, _ = spherical_kepler.reference(t)
    sysm = spherical_kepler.lift_system()
    checks: list[Check] = []
    orbits, errs = {}, {}
    on_sphere = 0.0
    for s in (2, 3, 4):
        tr = integrate(sysm, LieNonholonomicPRK(s, retraction=kind, multiplier_rule="carry"),
                       spherical_kepler.G0,
                       spherical_kepler.ETA0, h=hh, n_steps=n)
        if not tr.success:
            raise RuntimeError(f"s = {s}: {tr.message}")
        x, v = spherical_kepler.to_ambient(tr.q, tr.v)
        E = spherical_kepler.energy(x, v)
        errs[s] = float(np.max(np.abs(x[-1] - xr[-1])))
        orbits[s] = x
        on_sphere = max(on_sphere, float(np.max(np.abs(np.linalg.norm(x, axis=-1) - 1.0))),
                        float(np.max(np.abs(tr.v[:, 2]))))
        # independent numpy check (h = 0.01, T = 36): 5.26e-4, 2.42e-8, 2.67e-12; ×1.5, scaled by
        # h^{2s−2}. Measured (quick T = 3.6): 5.26e-4, 2.42e-8, 2.65e-12, i.e. the maximum is
        # reached within the first orbit and reproduces the check; full (T = 36): 5.26e-4,
        # 2.42e-8, 2.67e-12: margin 1.50 (deterministic method error, ≥ 1.5; round-off on E is
        # ~1e-14); the s-ratios of |x − x_ref| are ≥ 4.8e3 against 10 (margin ≥ 480) and the
        # full-run Λ drift of s = 3 is 1.19e-5 against 2e-6 (margin 6.0).
        bound = 1.5 * {2: 5.26e-4, 3: 2.42e-8, 4: 2.67e-12}[s] * (hh / 0.01) ** (2 * s - 2)
        checks.append(check_bound(f"s={s}: max |E − E0|", float(np.abs(E - E[0]).max()), bound,
                                  f"bounded, ≤ {bound:.2e} (independent long-run check × 1.5)"))
        if s == 3:
            lam3 = tr
        if s == 4:
            eta4 = tr.v
    if T >= 20.0:  # the Λ drift of s = 3 needs several radial periods to stand out
        late = lam3.t > lam3.t[-1] / 2
        slope = float(np.polyfit(lam3.t[late], lam3.lam[late, 0], 1)[0])
        checks.append(Check("s=3 (Λ-concatenation): Λ drift per unit time", slope,
                            "drifts as for the pendulum: |slope| > 2e-6 (an independent numpy "
                            "check: +1.2e-5)",
                            bool(abs(slope) > 2e-6)))
        fl = _fifths(lam3.lam[:, 0])
        checks.append(Check("s=3: |Λ|, last fifth / first fifth", fl[-1] / fl[0],
                            "bounded: ≤ 1.25", bool(fl[-1] <= 1.25 * fl[0]),
                            deficiency="s = 3 with Λ-concatenation: R_A(∞) = +1, the multiplier "
                                       "drifts (paper §5.1, Fig. 3b; an independent numpy check of "
                                       "long runs)"))
    for lo, hi in ((2, 3), (3, 4)):
        ratio = errs[lo] / errs[hi]
        checks.append(Check(f"|x − x_ref| at T: s={lo} over s={hi}", ratio,
                            "lower order drifts more: > 10", bool(ratio > 10)))
    # measured: 2.1e-15 quick, 6.0e-15 full (round-off quantity), margin 16
    checks.append(check_bound("max(| |x| − 1 |, |η₃|)", on_sphere, 1e-13))

    def plot(fig) -> None:
        fig.set_size_inches(11.0, 3.8)
        ax, ax1, ax2 = fig.subplots(1, 3)
        styles = {2: ("tab:red", "-"), 3: ("tab:blue", "--"), 4: ("tab:green", ":")}
        # the precession is ~1e-3 of the radius at T = 36: draw each orbit's deviation from the
        # reference magnified by one common factor, so s = 2 shows it and s = 3, 4 hug the
        # reference (the lower the order, the more precession)
        dev = max(float(np.max(np.linalg.norm(x - xr, axis=-1))) for x in orbits.values())
        mag = 10 ** np.floor(np.log10(0.15 / max(dev, 1e-300)))
        ax.plot(xr[:, 0], xr[:, 1], color="0.75", lw=2.5, label="reference")
        for s, x in orbits.items():
            xm = xr + mag * (x - xr)
            color, ls = styles[s]
            ax.plot(xm[:, 0], xm[:, 1], color=color, ls=ls, lw=0.7, label=f"s={s}")
        ax.set_aspect("equal")
        ax.set_title(f"orbits (x₁, x₂), deviation ×{mag:.0e} (Fig. 6)", fontsize=8)
        ax.legend(fontsize=6, loc="lower left")
        for s, x in orbits.items():
            color, ls = styles[s]
            ax1.semilogy(t[1:], np.linalg.norm(x - xr, axis=-1)[1:] + 1e-18, color=color,
                         ls=ls, lw=0.8, label=f"s={s}")
        ax1.set_title("|x − x_ref|: precession grows with t", fontsize=8)
        ax1.set_xlabel("t", fontsize=8)
        ax1.legend(fontsize=6)
        for k in range(3):
            ax2.plot(t, eta4[:, k], lw=0.6, label=f"η{k + 1}")
        ax2.set_title("η(t), s = 4 (Fig. 7a)", fontsize=8)
        ax2.set_xlabel("t", fontsize=8)
        ax2.legend(fontsize=6)
        for a in (ax, ax1, ax2):
            a.tick_params(labelsize=7)
        fig.tight_layout()

    return Outcome(checks, {"T": T, "h": hh, "position_error": errs}, plot,
                   notes="m = M = ρ = 1, X = e₃ (inferred, paper §5.2).")
