"""Experiments of "New developments on the Geometric Nonholonomic Integrator" (Ferraro,
Jiménez, Martín de Diego).

* Orders of GNI Euler A/B (Thm 5.2), nonholonomic RATTLE, the composition of Remark 5.5 and
  the affine variant, on the project's nonlinear nonholonomic particle (the paper has
  no §5 example).
* The ball on a rotating table (§7.4): Fig. 1 (errors against the exact homogeneous-ball
  solution), Fig. 2 (the stable circle over 10⁴ steps), Fig. 3 (slopes 1, 1, 2 of position,
  ω and energy errors with the paper's start), and the exact conservation properties
  (energy for a bi-invariant metric; discrete momentum for I1 = I2).
"""

from __future__ import annotations

import numpy as np
from chetaev.discrete_lagrangian import integrate
from chetaev.gni import GNI, Composition, ReducedGNI, pre_post_from_node
from chetaev.gni.testing import nonholonomic_particle

from .._registry import Check, Outcome, check_bound, check_order, experiment
from ..models import chaplygin_ball
from ._common import grid_steps
from ._plotting import h_axis, log_bars

__all__ = [
    "adjoint_reversibility",
    "ball_conservation",
    "ball_figure_1",
    "ball_figure_2",
    "ball_figure_3",
    "particle_orders",
]

PAPER = "geometric-nonholonomic-integrator"

_VARIANTS = {
    "euler_a": (lambda: GNI("euler_a"), False, 1, "GNI Euler A (Thm 5.2)"),
    "euler_b": (lambda: GNI("euler_b"), False, 1, "GNI Euler B (Thm 5.2)"),
    "rattle": (lambda: GNI("rattle"), False, 2, "nonholonomic RATTLE (Rem. 5.1)"),
    "composition": (lambda: Composition((GNI("euler_b"), GNI("euler_a"))), False, 2,
                    "F_A^{h/2}∘F_B^{h/2} (Rem. 5.5)"),
    "affine_rattle": (lambda: GNI("rattle"), True, 2, "affine RATTLE (Def 6.1)"),
}


@experiment("gni-particle-orders", paper=PAPER,
            title="Orders of the GNI variants (nonholonomic particle)",
            claim="GNI Euler A and B are globally first-order convergent (Thm 5.2); "
                  "nonholonomic RATTLE is second order (cited from [24]); the composition of "
                  "Remark 5.5 'still generates a second order method'; affine RATTLE: order 2 "
                  "(not claimed by the paper)")
def particle_orders(quick: bool = False, method: str | None = None, h: float | None = None,
                    t_final: float | None = None) -> Outcome:
    """‖q_N − q(T)‖ and ‖v_N − v(T)‖ at T = 5 against DOP853 (see the docs' theory page), N = 50·2^k
    (k = 0..2 quick, 0..3 full); also the constraint residual of every node."""
    names = list(_VARIANTS) if method is None else [method]
    for name in names:
        if name not in _VARIANTS:
            raise ValueError(f"unknown method {name!r}; expected one of {sorted(_VARIANTS)}")
    T = 5.0 if t_final is None else float(t_final)
    h0 = T / 50 if h is None else float(h)
    hs = h0 / 2.0 ** np.arange(3 if quick else 4)
    checks, data = [], {}
    worst = 0.0
    for name in names:
        make, affine, order, label = _VARIANTS[name]
        problem = nonholonomic_particle(affine=affine)
        q_ref, v_ref, _ = problem.reference([T])
        eq, ev = [], []
        for hh in hs:
            traj = integrate(problem.system, make(), problem.q0, problem.v0, h=hh,
                             n_steps=grid_steps(T, hh))
            if not traj.success:
                raise RuntimeError(f"{label} failed at h = {hh}: {traj.message}")
            eq.append(float(np.linalg.norm(traj.q[-1] - q_ref[-1])))
            ev.append(float(np.linalg.norm(traj.v[-1] - v_ref[-1])))
            worst = max(worst, float(np.max(np.abs(traj.constraint_residual()))))
        data[name] = {"h": hs.tolist(), "error_q": eq, "error_v": ev, "label": label}
        # measured (deterministic method errors): fitted orders within 0.04 of the claim, quick
        # and full; worst margin 6.4 (RATTLE, order in v, quick 2.04)
        checks.append(check_order(f"{label}: order in q", hs, eq, order))
        checks.append(check_order(f"{label}: order in v", hs, ev, order))
    # measured: 3.3e-16 quick and full (round-off: the constraint is linear in v), margin 3e5
    checks.append(check_bound("max |Φ(q_k, v_k)| at the nodes", worst, 1e-10,
                              "0 to solver tolerance (averaged momentum satisfies the "
                              "constraint, §4)"))

    def plot(fig):
        ax = fig.add_subplot(111)
        for d in data.values():
            ax.loglog(d["h"], d["error_q"], "o-", label=d["label"])
            h_axis(ax, d["h"])
        ax.set_xlabel("h")
        ax.set_ylabel(f"‖q_N − q({T:g})‖")
        ax.set_title("Nonholonomic particle (see the docs' theory page)")
        ax.legend(fontsize=7)

    return Outcome(checks, data, plot,
                   notes="An earlier independent check found order 1 for Remark 5.5 composing the "
                         "(q, p̃, λ̃) maps; in the node-state form (q, v, λ) the A/B maps are "
                         "exactly adjoint and the composition is of order 2.")


def _regression(name: str, measured: float, expected: float, rel: float) -> Check:
    """Agreement with an independent numpy reproduction."""
    # measured: rel. diffs 7.3e-5 (Fig. 1 position), 1.4e-4 (Fig. 3 position and ω) against
    # rel = 0.01: margins 550, 72, 71 (the references are printed to 3–4 digits, i.e. ≤ 1.3e-4
    # relative rounding; deterministic method errors).
    return Check(f"{name} vs independent reproduction", measured,
                 f"{expected:.4g} (an independent numpy check, rel. diff ≤ {rel:g})",
                 bool(abs(measured / expected - 1.0) <= rel))


def _retraction(method: str | None) -> str:
    """``method`` of the ball experiments is the retraction of the reduced GNI."""
    if method is None:
        return "cayley"
    if method not in ("cayley", "exp"):
        raise ValueError(f"unknown method {method!r} for the ball scheme; expected the "
                         "retraction 'cayley' (the paper's) or 'exp'")
    return method


def _run_ball(method, system, state, h, n):
    xs, ws, states = [state.q], [state.carry["xi"]], [state]
    for _ in range(n):
        state = method.step(system, state, h)
        xs.append(state.q)
        ws.append(state.carry["xi"])
        states.append(state)
    return np.array(xs), ws, states


def _centred_energy(x, w, h, mass, inertia):
    """E_c,k = ½m|(x_{k+1} − x_{k−1})/(2h)|² + ½ω̄ᵀIω̄, ω̄ = (ω_k + ω_{k−1})/2 (paper §7.4, Exp.
    2), for
    the nodes x_0..x_{n+1} and increments ω_0..ω_n; returns E_c at k = 1..n."""
    k = np.arange(1, len(w))
    xd = (x[k + 1] - x[k - 1]) / (2 * h)
    wb = 0.5 * (w[k] + w[k - 1])
    return 0.5 * mass * np.sum(xd**2, 1) + 0.5 * np.sum(np.asarray(inertia) * wb**2, 1)


def _ball_errors(experiment_no, hs, T, start, exact, retraction="cayley"):
    """Max errors over [0, T] of position, ω (vs ω(t_k), or ω(t_k + h/2) for the consistent
    start) and the centred energy, for each h."""
    e = chaplygin_ball.EXPERIMENT_1 if experiment_no == 1 else chaplygin_ball.EXPERIMENT_2
    sysb = chaplygin_ball.system(experiment_no)
    meth = ReducedGNI(retraction=retraction)
    x0, _ = chaplygin_ball.initial(experiment_no)
    out = []
    for h in hs:
        n = round(T / h)
        tk = h * np.arange(n + 2)
        t_all = np.concatenate([tk, tk + h / 2])
        xr, vr = exact(t_all)
        xr_k, vr_k, vr_half = xr[: n + 2], vr[: n + 2], vr[n + 2:]
        if start == "paper":
            s = chaplygin_ball.paper_start(meth, experiment_no, h)
        else:
            s = meth.state_from_points(sysb, x0, xr_k[1], vr_half[0, 2:], h)
        x, w, _ = _run_ball(meth, sysb, s, h, n)
        x = np.concatenate([x0[None], x])  # x_0 .. x_{n+1}
        w = np.array(w)  # ω_0 .. ω_n
        eq = np.max(np.linalg.norm(x[: n + 1] - xr_k[: n + 1], axis=1))
        w_ref = vr_k[: n + 1, 2:] if start == "paper" else vr_half[: n + 1, 2:]
        ew = np.max(np.linalg.norm(w - w_ref, axis=1))
        Ec = _centred_energy(x, w, h, e["mass"], e["inertia"])
        Er = sysb.energy(xr_k[1: n + 1], vr_k[1: n + 1])
        eE = np.max(np.abs(Ec - Er))
        out.append((float(eq), float(ew), float(eE)))
    return np.array(out)


def _error_plot(hs, err, labels, title):
    def plot(fig):
        ax = fig.add_subplot(111)
        for i, lab in enumerate(labels):
            ax.loglog(hs, err[:, i], "o-", label=lab)
        ax.loglog(hs, err[0, 0] * (np.asarray(hs) / hs[0]), "k:", label="slope 1")
        ax.loglog(hs, err[0, 2] * (np.asarray(hs) / hs[0]) ** 2, "k--", label="slope 2")
        h_axis(ax, hs)
        ax.set_xlabel("h")
        ax.set_ylabel("max error")
        ax.set_title(title)
        ax.legend(fontsize=7)

    return plot


@experiment("gni-ball-figure-1", paper=PAPER,
            title="Fig. 1: homogeneous ball on a rotating table, errors against the exact "
                  "solution",
            claim="the reduced GNI ball scheme (42) converges ('order-one consistent', §7.4)")
def ball_figure_1(quick: bool = False, method: str | None = None, h: float | None = None,
                  t_final: float | None = None) -> Outcome:
    """Experiment 1, T = 10 (quick: 5), h = 0.1/2^k: max errors of position, ω and energy with
    the paper's start (paper §7.4, Exp. 1), and the consistent start (x_1 = x(h), ω_0 = ω(h/2))."""
    T = (5.0 if quick else 10.0) if t_final is None else float(t_final)
    h0 = 0.1 if h is None else float(h)
    hs = h0 / 2.0 ** np.arange(3 if quick else 4)

    def exact(t):
        return chaplygin_ball.exact_homogeneous(t, 1)

    ret = _retraction(method)
    paper = _ball_errors(1, hs, T, "paper", exact, ret)
    consistent = _ball_errors(1, hs, T, "consistent", exact, ret)
    from .._registry import fit_order

    slope = fit_order(hs, paper[:, 0], 1e-13)
    # measured (deterministic method errors ~1e-1..1e-3; round-off irrelevant), quick (T = 5,
    # h = 0.1..0.025) / full (T = 10, h = 0.1..0.0125): position (paper start) 1.99 / 2.00 vs
    # ≥ 0.75; centred energy 1.85 / 1.88 (margin 1.65 / 2.1); consistent position 2.02 / 2.02;
    # ω 1.87 / 1.90 (margin 2.0 / 2.5). The energy and ω fits are pre-asymptotic at the largest
    # step (local orders 1.32, 1.74, 1.92, 1.98 for the energy from h = 0.2 down to 0.0125): with
    # --h ≥ 0.125 they leave the band (quick h = 0.125: 1.78, 1.82; h = 0.16: 1.67, 1.71).
    checks = [
        Check("paper start: order of the position error", slope,
              "≥ 1 − 0.25 (paper: order-one consistent; independent numpy check: 2)",
              slope >= 0.75),
        check_order("paper start: order of the centred energy error", hs, paper[:, 2], 2),
        check_order("consistent start: order of the position error", hs, consistent[:, 0], 2),
        check_order("consistent start: order of the ω error (vs ω(t_k + h/2))", hs,
                    consistent[:, 1], 2),
    ]
    if h is None and T == 10.0 and ret == "cayley":
        checks.append(_regression("paper start, h = 0.1: max position error on [0, 10]",
                                  paper[0, 0], 4.011e-2, 0.01))
    data = {"h": hs.tolist(), "paper_start": paper.tolist(),
            "consistent_start": consistent.tolist(), "T": T}
    return Outcome(checks, data,
                   _error_plot(hs, paper, ["position", "ω", "energy"],
                               f"Exp. 1, paper start, T = {T:g}"),
                   notes="The paper gives no numbers for Fig. 1; its comparator [29] is not "
                         "reproduced (equations not given).")


def _circle_fit(x, y):
    A = np.column_stack([x, y, np.ones_like(x)])
    c = np.linalg.lstsq(A, x**2 + y**2, rcond=None)[0]
    xc, yc = c[0] / 2, c[1] / 2
    return np.array([xc, yc, np.sqrt(c[2] + xc**2 + yc**2)])


@experiment("gni-ball-figure-2", paper=PAPER,
            title="Fig. 2: the homogeneous ball's contact point stays on a circle",
            claim="with h = 0.1 over 10⁴ steps the trajectory stays on the circle of the exact "
                  "motion (centre (−1.5, 3.5), radius √2/0.4), without drift")
def ball_figure_2(quick: bool = False, method: str | None = None, h: float | None = None,
                  t_final: float | None = None) -> Outcome:
    """Experiment 1, paper start, h = 0.1, 10⁴ steps (quick: 2·10³); circle fits over the
    first and last 1000 steps."""
    hh = 0.1 if h is None else float(h)
    n = (2000 if quick else 10000) if t_final is None else round(float(t_final) / hh)
    sysb = chaplygin_ball.system(1)
    meth = ReducedGNI(retraction=_retraction(method))
    x0, _ = chaplygin_ball.initial(1)
    x, w, _ = _run_ball(meth, sysb, chaplygin_ball.paper_start(meth, 1, hh), hh, n - 1)
    x = np.concatenate([x0[None], x])
    fit = _circle_fit(x[:, 0], x[:, 1])
    win = min(1000, n // 2)
    first = _circle_fit(x[:win, 0], x[:win, 1])
    last = _circle_fit(x[-win:, 0], x[-win:, 1])
    exact = np.array([-1.5, 3.5, np.sqrt(2) / 0.4])
    w3 = float(np.max(np.abs([wi[2] for wi in w])))
    # Bands C·h² from the error constants measured at h = 0.2, 0.1, 0.05 (10⁴ steps at 0.1,
    # T = 1000 at the others): centre offset / h² = 2.000, 2.000, 2.000; radius offset / h² =
    # 1.514, 1.531, 1.542; drift / h² = 2.8e-4, 1.9e-4, 2.0e-4. Deterministic method errors
    # (round-off moves them by < 1e-12): the bands 3h², 2.5h² leave margins 1.5, 1.62; the
    # drift band 1e-3·h² leaves 3.6.
    c_off, r_off = float(np.linalg.norm(fit[:2] - exact[:2])), float(abs(fit[2] - exact[2]))
    checks = [
        check_bound("|fitted centre − (−1.5, 3.5)|", c_off, 3.0 * hh**2,
                    f"near the exact centre: ≤ 3h² = {3.0 * hh**2:.3g} (start offset = 2.000·h², "
                    "measured at h = 0.2, 0.1, 0.05; independent check 0.020 at h = 0.1; "
                    "margin 1.5)"),
        check_bound("|fitted radius − √2/0.4|", r_off, 2.5 * hh**2,
                    f"near the exact radius: ≤ 2.5h² = {2.5 * hh**2:.3g} (offset = 1.51–1.54·h², "
                    "measured at h = 0.2, 0.1, 0.05; independent numpy check 0.015 at h = 0.1; "
                    "margin ≥ 1.62)"),
        check_bound("drift: |fit(first window) − fit(last window)|",
                    float(np.max(np.abs(first - last))), 1e-3 * hh**2,
                    f"no secular drift: ≤ 1e-3·h² = {1e-3 * hh**2:.2g} (measured (1.9–2.8)e-4·h² "
                    "at h = 0.2, 0.1, 0.05; margin ≥ 3.6)"),
        # Round-off with a per-step bias: max|ω3| grows linearly in n (0.1, 0.5, 1 of its final
        # value at 10 %, 50 %, 100 % of the run), at a rate max|ω3|/(n·eps) = 0.01, 0.22, 1.2,
        # 0.50, 12.6 at h = 0.05, 0.08, 0.1, 0.12, 0.2 (T = 1000, OPENBLAS_NUM_THREADS=1).
        # At the default h = 0.1 the bound 1e-15·n = 4.5·n·eps leaves margin 3.75; at h = 0.2
        # it fails (1.4e-11 > 5e-12): the bound holds for h ≤ 0.12 only (see the TOL-C report).
        check_bound("max |ω3|", w3, 1e-15 * n, "0 (exact solution has ω3 = 0)"),
    ]
    data = {"x": x.tolist(), "fit": fit.tolist(), "n_steps": n, "h": hh}

    def plot(fig):
        ax = fig.add_subplot(111)
        ax.plot(x[:, 0], x[:, 1], ".", ms=0.8)
        ax.plot([0], [0], "k+", ms=10)
        th = np.linspace(0, 2 * np.pi, 400)
        ax.plot(exact[0] + exact[2] * np.cos(th), exact[1] + exact[2] * np.sin(th), "r--",
                lw=0.6, label="exact circle")
        ax.set_aspect("equal")
        ax.set_title(f"Exp. 1: (x_k, y_k), h = {hh:g}, {n} steps")
        ax.legend(fontsize=7)

    return Outcome(checks, data, plot)


@experiment("gni-ball-figure-3", paper=PAPER,
            title="Fig. 3: ball on a rotating table (Exp. 2), error slopes",
            claim="errors in position and angular velocity decrease like h, the energy error "
                  "like h² (Fig. 3 guide lines)")
def ball_figure_3(quick: bool = False, method: str | None = None, h: float | None = None,
                  t_final: float | None = None) -> Outcome:
    """Experiment 2, T = 15, paper start, h = 0.1/2^k (k = 0..2 quick, 0..4 full), max errors
    over [0, T] against DOP853 (rtol 1e-13); with the consistent start every slope is 2."""
    T = 15.0 if t_final is None else float(t_final)
    h0 = 0.1 if h is None else float(h)
    hs = h0 / 2.0 ** np.arange(3 if quick else 5)

    def exact(t):
        order = np.argsort(t)
        x, v = chaplygin_ball.reference(t[order], 2)
        inv = np.empty_like(order)
        inv[order] = np.arange(len(order))
        return x[inv], v[inv]

    ret = _retraction(method)
    paper = _ball_errors(2, hs, T, "paper", exact, ret)
    consistent = _ball_errors(2, hs, T, "consistent", exact, ret)
    # measured (deterministic): quick (h = 0.1..0.025) position slope 1.18, margin 1.40 — below
    # the 1.5 target for a method error; an O(h²) term of the first-order start still weighs
    # (quick with h = 0.125: 1.21, h = 0.08: 1.15); ω 1.00, energy 2.01, consistent 2.00
    # (margins ≥ 42). Full run (h = 0.1..0.00625, OPENBLAS_NUM_THREADS = 1): position 1.11
    # (margin 2.2), ω 1.00, energy 2.03, consistent 2.00.
    checks = [
        check_order("paper start: position error slope", hs, paper[:, 0], 1),
        check_order("paper start: ω error slope (vs ω(t_k))", hs, paper[:, 1], 1),
        check_order("paper start: centred energy error slope", hs, paper[:, 2], 2),
        check_order("consistent start: position error slope", hs, consistent[:, 0], 2),
    ]
    if h is None and T == 15.0 and ret == "cayley":
        # (the independent check's energy figure 6.06e-3 is not compared: its centred-energy window
        # is not fully specified; ours gives 6.26e-3 with the same slope 2)
        for i, (what, ref) in enumerate(zip(("position", "ω"), (4.51e-3, 5.85e-3))):
            checks.append(_regression(f"paper start, h = 0.1: max {what} error", paper[0, i],
                                      ref, 0.01))
    data = {"h": hs.tolist(), "paper_start": paper.tolist(),
            "consistent_start": consistent.tolist()}
    return Outcome(checks, data,
                   _error_plot(hs, paper, ["position", "ω", "energy"],
                               "Exp. 2, paper start (Fig. 3)"),
                   notes="The paper lets h decrease exponentially from 0.15 to about 8.4e-5 "
                         "and measures against a discrete trajectory with h ≈ 2.7e-5; here h = "
                         "0.1/2^k and the reference is DOP853 (rtol 1e-13) on the continuous "
                         "equations (paper §7.4, Exp. 2). The O(h) errors come from the "
                         "first-order "
                         "start (with a consistent start the scheme is symmetric and of order 2).")


@experiment("gni-ball-conservation", paper=PAPER,
            title="Exact discrete conservation laws of the ball scheme",
            claim="energy is preserved for a bi-invariant metric with V = 0 and a fixed table "
                  "(row 3.6, cited from [23]); the discrete nonholonomic momentum is preserved "
                  "under a horizontal symmetry (I1 = I2, row 3.8)")
def ball_conservation(quick: bool = False, method: str | None = None, h: float | None = None,
                      t_final: float | None = None) -> Outcome:
    """h = 0.1, 500 steps (quick: 200): E_d = ½p⁻ᵀG̃⁻¹p⁻ for I = 0.4·Id, Ω = 0; and
    J3 = I3ω3 + (h²/4)ω3‖ω‖²_I for I = (1, 1, 1.2) in experiment 2."""
    hh = 0.1 if h is None else float(h)
    n = (200 if quick else 500) if t_final is None else round(float(t_final) / hh)
    meth = ReducedGNI(retraction=_retraction(method))
    sysb = chaplygin_ball.system(1, inertia=(0.4, 0.4, 0.4), table_rate=0.0)
    x0, v0 = np.zeros(2), np.array([0.3, -0.2, 0.2, 0.3, 1.5])
    _, _, states = _run_ball(meth, sysb, meth.initial_state(sysb, x0, v0), hh, n)
    Ed = []
    for s in states:
        pm, _ = pre_post_from_node(s.v, s.lam, sysb.metric, sysb.K(s.q), hh)
        Ed.append(0.5 * pm @ np.linalg.solve(sysb.metric, pm))
    Ed = np.array(Ed)
    I = (1.0, 1.0, 1.2)
    sys2 = chaplygin_ball.system(2, inertia=I)
    e2 = dict(chaplygin_ball.EXPERIMENT_2, inertia=I)
    _, w, _ = _run_ball(meth, sys2, chaplygin_ball.paper_start(meth, e2, hh), hh, n)
    w = np.array(w)
    J3 = I[2] * w[:, 2] + hh**2 / 4 * w[:, 2] * (w**2 @ np.array(I))
    # measured (round-off quantities): quick (200 steps) E_d 4.1e-16, J3 6.7e-16; full (500)
    # 4.1e-16, 9.3e-15 against 1e-12 (margins ≥ 107; h = 0.2: J3 1.2e-14). The control ptp(ω3)
    # is 1.9e-3 quick (margin 1.9, deterministic) and 3.9e-2 full against > 1e-3; it depends on
    # the run length n·h: with
    # --h 0.05 (T = 10 quick) ω3 varies by only 9.3e-5 and the control fails (h = 0.2: 4.8e-2).
    checks = [
        check_bound("bi-invariant, Ω = 0: max |E_d − E_d(0)| / E_d(0)",
                    float(np.max(np.abs(Ed - Ed[0])) / Ed[0]), 1e-12, "0 (exact)"),
        check_bound("I1 = I2: max |J3 − J3(0)|", float(np.max(np.abs(J3 - J3[0]))), 1e-12,
                    "0 (exact)"),
        Check("I1 = I2: ptp(ω3) (ω3 itself is not conserved)", float(np.ptp(w[:, 2])),
              "> 1e-3 (the check is not trivial)", bool(np.ptp(w[:, 2]) > 1e-3)),
    ]
    data = {"E_d": Ed.tolist(), "J3": J3.tolist()}

    def plot(fig):
        ax = fig.add_subplot(111)
        ax.semilogy(np.maximum(np.abs(Ed - Ed[0]) / Ed[0], 1e-17), label="|ΔE_d|/E_d")
        ax.semilogy(np.maximum(np.abs(J3 - J3[0]), 1e-17), label="|ΔJ3|")
        ax.set_xlabel("step")
        ax.legend(fontsize=7)

    return Outcome(checks, data, plot)


@experiment("gni-adjoint-reversibility", paper=PAPER,
            title="Adjointness of GNI Euler A and B, reversibility of RATTLE and the ball scheme",
            claim="F_A^h∘F_B^{−h} = Id (Thm 5.4, Def 5.3); nonholonomic RATTLE and the reduced "
                  "ball scheme are time-reversible")
def adjoint_reversibility(quick: bool = False, method: str | None = None,
                          h: float | None = None, t_final: float | None = None) -> Outcome:
    """Nonholonomic particle (see the docs' theory page), node states along a RATTLE run (h = 0.1):
    max
    deviation of F_A^h∘F_B^{−h} and F_B^h∘F_A^{−h} from the identity; RATTLE and the ball
    scheme (Exp. 2) run N steps forward and N back (N = 50; 200 unless quick)."""
    hh = 0.1 if h is None else float(h)
    n = (50 if quick else 200) if t_final is None else round(float(t_final) / hh)
    problem = nonholonomic_particle()
    sys_ = problem.system
    A, B, Rt = GNI("euler_a"), GNI("euler_b"), GNI("rattle")
    run = integrate(sys_, Rt, problem.q0, problem.v0, h=hh, n_steps=20)
    s0 = A.initial_state(sys_, run.q, run.v)
    s0 = type(s0)(t=0.0, q=run.q, v=run.v, p=s0.p, lam=run.lam)

    def dev(s):
        return float(max(np.max(np.abs(s.q - s0.q)), np.max(np.abs(s.v - s0.v))))

    ab = max(dev(A.step(sys_, B.step(sys_, s0, -hh), hh)),
             dev(B.step(sys_, A.step(sys_, s0, -hh), hh)))
    aa = dev(A.step(sys_, A.step(sys_, s0, -hh), hh))
    s = Rt.initial_state(sys_, problem.q0, problem.v0)
    first = s
    for _ in range(n):
        s = Rt.step(sys_, s, hh)
    for _ in range(n):
        s = Rt.step(sys_, s, -hh)
    rattle_dev = float(max(np.max(np.abs(s.q - first.q)), np.max(np.abs(s.v - first.v))))
    sysb = chaplygin_ball.system(2)
    meth = ReducedGNI(retraction=_retraction(method))
    b0 = meth.initial_state(sysb, *chaplygin_ball.initial(2))
    b = b0
    for _ in range(n):
        b = meth.step(sysb, b, hh)
    for _ in range(n):
        b = meth.step(sysb, b, -hh)
    ball_dev = float(max(np.max(np.abs(b.q - b0.q)), np.max(np.abs(b.v - b0.v))))
    # measured (round-off quantities): adjointness 7.2e-16 against 1e-12; forward-and-back
    # RATTLE 9.4e-16 / 7.0e-15 and ball 6.1e-16 / 2.0e-14 (quick n = 50 / full n = 200) against
    # 1e-11 (worst margin 490, growing ~linearly in n); the control 1.2e-2 against > 1e-4
    # (margin 122).
    checks = [
        check_bound("max |F_A^h∘F_B^{−h}(z) − z|, |F_B^h∘F_A^{−h}(z) − z| (21 node states)", ab,
                    1e-12, "0 (Thm 5.4)"),
        Check("control: |F_A^h∘F_A^{−h}(z) − z| (Euler A is not symmetric)", aa,
              "> 1e-4 (the adjointness check can fail)", aa > 1e-4),
        check_bound(f"RATTLE: {n} steps forward and back, max deviation", rattle_dev, 1e-11,
                    "0 (symmetric)"),
        check_bound(f"ball scheme (Exp. 2): {n} steps forward and back, max deviation",
                    ball_dev, 1e-11, "0 (symmetric)"),
    ]
    def plot(fig):
        labels = ["F_A^h∘F_B^{−h} − Id (Thm 5.4)", "control: F_A^h∘F_A^{−h} − Id",
                  f"RATTLE, {n} steps and back", f"ball scheme, {n} steps and back"]
        log_bars(fig.add_subplot(111), labels, [ab, aa, rattle_dev, ball_dev],
                 [1e-12, 1e-4, 1e-11, 1e-11],
                 title=f"max deviation from the identity (h = {hh:g}); red: pass bound")
        fig.tight_layout()

    return Outcome(checks, {"adjoint": ab, "control": aa, "rattle": rattle_dev,
                            "ball": ball_dev}, plot)
