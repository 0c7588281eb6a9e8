"""Post-conditions the driver checks after every step (issue 21): finiteness, overflow and
the constraint levels a method declares in ``guarantees``."""

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    OVERFLOW_BOUND,
    POSTCONDITION_FACTOR,
    ConstrainedPRK,
    Method,
    PostConditionError,
    State,
    integrate,
)
from chetaev.discrete_lagrangian.discretization_maps import StageConstrainedBaseline, rattle
from chetaev.discrete_lagrangian.testing import spherical_pendulum
from chetaev.rktableaux import gauss, lobatto_iiia_iiib

Q0 = np.array([np.sin(1.0), 0.0, -np.cos(1.0)])
V0 = np.array([0.0, 0.8, 0.0])


@attrs.frozen
class _Drifting(Method):
    """ConstrainedPRK (RATTLE) that pushes q off the sphere by ``offset`` from step 3 on."""

    offset: float
    inner: ConstrainedPRK = attrs.field(factory=lambda: ConstrainedPRK(lobatto_iiia_iiib(2)))

    @property
    def guarantees(self):
        return self.inner.guarantees

    def _initial_state_impl(self, system, q0, v0, t0=0.0):
        return self.inner.initial_state(system, q0, v0, t0)

    def _step_impl(self, system, state, h):
        new = self.inner.step(system, state, h)
        return attrs.evolve(new, q=new.q * (1 + self.offset)) if state.n >= 3 else new


def test_constraint_drift_beyond_the_factor_fails_the_run():
    bound = POSTCONDITION_FACTOR * 1e-12  # tol = 1e-12, S = max(1, |q0|, |v0|) = 1
    tr = integrate(spherical_pendulum(), _Drifting(10 * bound), Q0, V0, h=0.1, n_steps=10)
    assert not tr.success
    assert "Step 3 (from t = 0.3) converged but its position constraint residual" in tr.message
    assert f"exceeds the bound {bound:.1e}" in tr.message and "halve h" in tr.message
    assert tr.stats["n_steps"] == 3 and len(tr.t) == 4


def test_constraint_drift_within_the_factor_passes():
    tr = integrate(spherical_pendulum(), _Drifting(1e-14), Q0, V0, h=0.1, n_steps=10)
    assert tr.success
    # derived: the offset moves |q|² − 1 by ~2e-14 on top of the Newton residual (≤ tol = 1e-12,
    # S = 1): both far below the bound 1e-8, and not 0 since the offset is not
    assert 0 < tr.stats["max_constraint_residual"] < POSTCONDITION_FACTOR * 1e-12


def test_post_condition_error_is_a_convergence_error_and_pickles():
    import pickle

    err = PostConditionError(step=4, t=0.4, residual=1e-3, tol=1e-8,
                             what="velocity constraint residual")
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.step == 4 and again.what == err.what
    assert "Step 4 (from t = 0.4) converged but its velocity constraint residual" in str(err)


@pytest.mark.parametrize(
    ("method", "levels"),
    [
        (ConstrainedPRK(lobatto_iiia_iiib(3)), {"position", "velocity"}),
        (ConstrainedPRK(gauss(2), check_hypotheses=False), set()),
        (rattle(), {"position", "velocity"}),
        (StageConstrainedBaseline(), set()),
    ],
    ids=["lobatto3", "gauss-no-hypotheses", "rattle", "stage-baseline"],
)
def test_declared_guarantees(method, levels):
    assert set(method.guarantees) == levels
    # exact: the guarantees store the method's tolerance itself (no arithmetic on it)
    assert all(tol == method.newton.tol for tol in method.guarantees.values())


@attrs.frozen
class _Explode(Method):
    """q ← q + h v with v doubling each step: overflows (finite but huge) quickly."""

    name = "explode"

    def _initial_state_impl(self, system, q0, v0, t0=0.0):
        return State(t=t0, q=np.asarray(q0, float), v=np.asarray(v0, float))

    def _step_impl(self, system, state, h):
        return State(t=state.t + h, q=state.q + h * state.v, v=1e30 * state.v, n=state.n + 1)


def test_overflow_is_a_failure_not_a_success():
    tr = integrate(None, _Explode(), [0.0], [1.0], h=1.0, n_steps=20)
    assert not tr.success
    assert f"produced values of norm above {OVERFLOW_BOUND:.1e} in v" in tr.message
    assert np.all(np.abs(tr.v) <= OVERFLOW_BOUND) and tr.stats["n_steps"] == 5  # v = 1e150
