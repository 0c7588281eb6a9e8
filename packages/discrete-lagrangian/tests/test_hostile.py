"""Hostile input (issue 21): every public entry point of chetaev.discrete_lagrangian (the
system constructors aside) called as a careless or hostile user would. Each case must raise
a typed error (``InputError``, a ``ValueError``) whose message names the argument.

``CASES`` is a table (id, call, regex); ``python -m`` tooling can classify it GOOD (typed
error, named argument), POOR (another exception) or BAD (no error).
"""

import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    VPRK,
    ConstrainedPRK,
    DiscreteEulerLagrange,
    InputError,
    LieVPRK,
    NewtonOptions,
    State,
    Trajectory,
    integrate,
    reference_solution,
)
from chetaev.discrete_lagrangian import discretization_maps as dm
from chetaev.discrete_lagrangian.testing import (
    cartesian_pendulum,
    free_rigid_body,
    henon_heiles,
    spherical_pendulum,
)
from chetaev.rktableaux import gauss, lobatto_iiia_iiib

HH = henon_heiles()
SPH = spherical_pendulum()
RB = free_rigid_body()
Q2, V2 = np.array([0.1, -0.2]), np.array([0.3, 0.1])
QS, VS = np.array([np.sin(1.0), 0.0, -np.cos(1.0)]), np.array([0.0, 0.8, 0.0])
W0 = np.array([0.3, 1.0, 0.2])
RATTLE = ConstrainedPRK(lobatto_iiia_iiib(2))


def _run(system, method, q0, v0, **kw):
    kw.setdefault("h", 0.1)
    if "t_final" not in kw:
        kw.setdefault("n_steps", 2)
    return integrate(system, method, q0, v0, **kw)


def _pendulum_state():
    return _run(SPH, RATTLE, QS, VS).final_state()


def _traj(**kw):
    base = {"t": np.zeros(2), "q": np.zeros((2, 2)), "v": np.zeros((2, 2)), "p": None,
            "lam": None, "success": True, "message": "", "stats": {}}
    base.update(kw)
    return Trajectory(**base)


def _not_a_trajectory(tmp):
    path = tmp / "x.npz"
    np.savez(path, a=np.zeros(2))
    return Trajectory.load(path)


CASES = [
    # --- integrate: arguments -----------------------------------------------------------
    ("h-complex", lambda: _run(HH, VPRK(gauss(2)), Q2, V2, h=0.1j), r"`h`"),
    ("h-array", lambda: _run(HH, VPRK(gauss(2)), Q2, V2, h=np.array([0.1, 0.2])), r"`h`"),
    ("h-zero", lambda: _run(HH, VPRK(gauss(2)), Q2, V2, h=0.0), r"`h` must be positive"),
    ("n_steps-inf", lambda: _run(HH, VPRK(gauss(2)), Q2, V2, n_steps=np.inf), r"`n_steps`"),
    ("n_steps-negative", lambda: _run(HH, VPRK(gauss(2)), Q2, V2, n_steps=-1), r"`n_steps`"),
    ("t_final-nan", lambda: _run(HH, VPRK(gauss(2)), Q2, V2, t_final=np.nan), r"`t_final`"),
    ("save_every-fraction", lambda: _run(HH, VPRK(gauss(2)), Q2, V2, save_every=1.5),
     r"`save_every`"),
    ("t0-inf", lambda: _run(HH, VPRK(gauss(2)), Q2, V2, t0=np.inf), r"`t0`"),
    ("callback-not-callable", lambda: _run(HH, VPRK(gauss(2)), Q2, V2, callback=3),
     r"`callback`"),
    ("method-not-a-method", lambda: _run(HH, "VPRK", Q2, V2), r"`method`"),
    # --- integrate: initial data --------------------------------------------------------
    ("q0-complex", lambda: _run(HH, VPRK(gauss(2)), Q2 + 0j, V2), r"`q0` must be real"),
    ("v0-complex", lambda: _run(SPH, RATTLE, QS, VS + 1e-3j), r"`v0` must be real"),
    ("q0-object", lambda: _run(HH, VPRK(gauss(2)), np.array([object(), 1.0]), V2), r"`q0`"),
    ("q0-string", lambda: _run(HH, VPRK(gauss(2)), "abc", V2), r"`q0`"),
    ("q0-wrong-length", lambda: _run(HH, VPRK(gauss(2)), [0.1, 0.2, 0.3], V2), r"`q0`"),
    ("v0-nan", lambda: _run(HH, DiscreteEulerLagrange(), Q2, [np.nan, 0.0]), r"`v0`"),
    ("q0-inf", lambda: _run(SPH, RATTLE, [np.inf, 0, 0], VS), r"`q0`"),
    ("batch-mismatch-vprk", lambda: _run(HH, VPRK(gauss(2)), np.zeros((3, 2)),
                                         np.zeros((4, 2))), r"q0 and v0 batch shapes"),
    ("batch-mismatch-lie", lambda: _run(RB, LieVPRK(gauss(2)),
                                        np.broadcast_to(np.eye(3), (3, 3, 3)),
                                        np.zeros((4, 3))), r"batch shapes of q0"),
    ("batch-mismatch-lie-dm", lambda: _run(RB, dm.LieDiscretizationMapMethod("rattle"),
                                           np.broadcast_to(np.eye(3), (3, 3, 3)),
                                           np.zeros((4, 3))), r"batch shapes of q0"),
    ("q0-not-in-group", lambda: _run(RB, LieVPRK(gauss(2)), 2 * np.eye(3), W0), r"`q0`"),
    ("unconstrained-method-on-constrained", lambda: _run(SPH, VPRK(gauss(2)), QS, VS),
     r"ConstrainedPRK"),
    ("constrained-method-on-unconstrained", lambda: _run(HH, RATTLE, Q2, V2),
     r"needs a ConstrainedSystem"),
    ("lie-method-on-vector-space", lambda: _run(HH, LieVPRK(gauss(2)), Q2, V2),
     r"Lie group"),
    # --- integrate: a State passed as q0 -----------------------------------------------
    ("state-from-another-system", lambda: _run(cartesian_pendulum(3, length=2.0), RATTLE,
                                               _pendulum_state(), None),
     r"`q0` is a State that does not fit"),
    ("state-of-wrong-dimension", lambda: _run(HH, VPRK(gauss(2)),
                                              _run(SPH.system, VPRK(gauss(2)), QS, VS)
                                              .final_state(), None), r"`q0`"),
    ("state-with-v0", lambda: _run(SPH, RATTLE, _pendulum_state(), VS), r"`v0` must be None"),
    ("state-with-nan", lambda: _run(SPH, RATTLE, State(t=0.0, q=QS * np.nan, v=VS), None),
     r"`q0` is a State whose `q`"),
    # --- NewtonOptions ------------------------------------------------------------------
    ("newton-max_iter-fraction", lambda: NewtonOptions(max_iter=2.7), r"max_iter"),
    ("newton-max_iter-bool", lambda: NewtonOptions(max_iter=True), r"max_iter"),
    ("newton-tol-negative", lambda: NewtonOptions(tol=-1.0), r"tol"),
    ("newton-tol-string", lambda: NewtonOptions(tol="tight"), r"tol"),
    ("newton-tol-complex", lambda: NewtonOptions(tol=1e-12j), r"tol"),
    ("newton-atol-nan", lambda: NewtonOptions(atol=np.nan), r"atol"),
    ("newton-max_stall-zero", lambda: NewtonOptions(max_stall=0), r"max_stall"),
    ("newton-refresh_rate-inf", lambda: NewtonOptions(refresh_rate=np.inf), r"refresh_rate"),
    ("newton-simplified-string", lambda: NewtonOptions(simplified="yes"), r"simplified"),
    # --- State and Trajectory ------------------------------------------------------------
    ("state-t-string", lambda: State(t="now", q=QS, v=VS), r"State\(t="),
    ("state-t-nan", lambda: State(t=np.nan, q=QS, v=VS), r"State\(t="),
    ("state-n-fraction", lambda: State(t=0.0, q=QS, v=VS, n=2.5), r"State\(n="),
    ("trajectory-t-2d", lambda: _traj(t=np.zeros((2, 1))), r"Trajectory\(t="),
    ("trajectory-q-length", lambda: _traj(q=np.zeros((3, 2))), r"Trajectory\(q="),
    ("trajectory-final-type", lambda: _traj(final="state"), r"Trajectory\(final="),
    ("trajectory-load-missing", lambda: Trajectory.load("/nonexistent/x.npz"),
     r"Trajectory.load\(path="),
    ("trajectory-residual-kind", lambda: _run(SPH, RATTLE, QS, VS).constraint_residual(
        kind="hidden"), r"`kind`"),
    # --- methods ------------------------------------------------------------------------
    ("vprk-newton-string", lambda: VPRK(gauss(2), newton="fast"), r"newton="),
    ("vprk-not-a-tableau", lambda: VPRK("gauss"), r"(?i)tableau"),
    ("cprk-constraint_tol-negative", lambda: ConstrainedPRK(lobatto_iiia_iiib(2),
                                                           constraint_tol=-1.0),
     r"constraint_tol"),
    ("cprk-constraint_tol-nan", lambda: ConstrainedPRK(lobatto_iiia_iiib(2),
                                                      constraint_tol=np.nan), r"constraint_tol"),
    ("cprk-fast_path-string", lambda: ConstrainedPRK(lobatto_iiia_iiib(2), fast_path="no"),
     r"fast_path"),
    ("cprk-newton-none", lambda: ConstrainedPRK(lobatto_iiia_iiib(2), newton=None), r"newton="),
    ("lievprk-retraction", lambda: LieVPRK(gauss(2), retraction="qr"), r"`retraction`"),
    ("lievprk-constraint_tol-inf", lambda: LieVPRK(gauss(2), constraint_tol=np.inf),
     r"constraint_tol"),
    ("del-kind", lambda: DiscreteEulerLagrange(kind="simpson"), r"`kind`"),
    ("del-alpha-nan", lambda: DiscreteEulerLagrange(kind="alpha", alpha=np.nan), r"`alpha`"),
    ("del-newton-number", lambda: DiscreteEulerLagrange(newton=3), r"newton="),
    # --- discretization maps -----------------------------------------------------------
    ("dm-theta-string", lambda: dm.DiscretizationMapMethod("half"), r"`theta`"),
    ("dm-theta-complex", lambda: dm.DiscretizationMapMethod(0.5j), r"`theta`"),
    ("dm-theta-out-of-range", lambda: dm.DiscretizationMapMethod(2.0), r"`theta`"),
    ("dm-map-theta-nan", lambda: dm.DiscretizationMap(np.nan), r"`theta`"),
    ("dm-compose-weights", lambda: dm.compose(dm.rattle(), dm.rattle(), weights=[1.0]),
     r"weights"),
    ("dm-lie-kind", lambda: dm.LieDiscretizationMapMethod("rk4"), r"kind"),
    ("dm-rattle-newton", lambda: dm.rattle(newton="tight"), r"newton="),
    ("dm-on-unconstrained", lambda: _run(HH, dm.rattle(), Q2, V2), r"ConstrainedSystem"),
    # --- reference_solution ------------------------------------------------------------
    ("ref-t-unsorted", lambda: reference_solution(HH, Q2, V2, [0.0, 1.0, 0.5]), r"`t`"),
    ("ref-t-complex", lambda: reference_solution(HH, Q2, V2, [0.0, 1j]), r"`t`"),
    ("ref-rtol-negative", lambda: reference_solution(HH, Q2, V2, [0.0, 1.0], rtol=-1.0),
     r"`rtol`"),
    ("ref-atol-nan", lambda: reference_solution(HH, Q2, V2, [0.0, 1.0], atol=np.nan),
     r"`atol`"),
    ("ref-batch-mismatch", lambda: reference_solution(HH, np.zeros((3, 2)), np.zeros((4, 2)),
                                                      [0.0, 1.0]), r"`q0`.*`v0`"),
    ("ref-q0-complex", lambda: reference_solution(HH, Q2 + 0j, V2, [0.0, 1.0]), r"`q0`"),
    ("ref-q0-not-in-group", lambda: reference_solution(RB, 2 * np.eye(3), W0, [0.0, 1.0]),
     r"`q0`"),
    ("ref-not-a-system", lambda: reference_solution(None, Q2, V2, [0.0, 1.0]), r"`system`"),
    ("ref-off-constraint", lambda: reference_solution(SPH, 1.1 * QS, VS, [0.0, 1.0]),
     r"q0"),
]


@pytest.mark.parametrize(("call", "match"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_raises_a_typed_error_naming_the_argument(call, match):
    with pytest.raises(InputError, match=match):
        call()


def test_load_of_a_file_that_is_not_a_trajectory(tmp_path):
    with pytest.raises(InputError, match=r"Trajectory.load\(path=.*not a trajectory"):
        _not_a_trajectory(tmp_path)


def test_integer_input_is_accepted_as_float():
    """int arrays are valid input (converted to float64), not hostile."""
    a = _run(HH, VPRK(gauss(2)), np.array([0, 0]), np.array([1, 0]))
    b = _run(HH, VPRK(gauss(2)), [0.0, 0.0], [1.0, 0.0])
    # bitwise by design: the ints are converted exactly to float64 at the input, after which
    # both runs are the same sequence of operations on the same values
    np.testing.assert_array_equal(a.q, b.q)
    assert NewtonOptions(max_iter=20.0).max_iter == 20
