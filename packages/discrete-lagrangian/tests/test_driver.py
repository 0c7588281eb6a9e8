"""The driver and the Trajectory type, with a minimal explicit method (Störmer–Verlet)."""

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import (
    ConvergenceError,
    InputError,
    Method,
    State,
    Trajectory,
    integrate,
)
from chetaev.discrete_lagrangian.testing import henon_heiles


@attrs.frozen
class _Verlet(Method):
    """Velocity Verlet with a carry counter (for restart tests) and optional failure."""

    fail_at: int | None = None
    name = "verlet-test"

    def _initial_state_impl(self, system, q0, v0, t0=0.0):
        q0 = np.asarray(q0, float)
        v0 = np.asarray(v0, float)
        return State(t=t0, q=q0, v=v0, p=system.legendre(q0, v0),
                     carry={"acc": system.acceleration(q0, v0), "count": 0})

    def _step_impl(self, system, state, h):
        if self.fail_at is not None and state.n == self.fail_at:
            raise ConvergenceError(step=state.n, t=state.t, residual=1.0, tol=1e-12,
                                   iterations=5, hint="halve h")
        a = state.carry["acc"]
        vh = state.v + 0.5 * h * a
        q1 = state.q + h * vh
        a1 = system.acceleration(q1, vh)
        v1 = vh + 0.5 * h * a1
        return State(t=state.t + h, q=q1, v=v1, p=system.legendre(q1, v1), n=state.n + 1,
                     carry={"acc": a1, "count": int(state.carry["count"]) + 1,
                            "hist": [q1, v1], "none": None, "h": h},
                     info={"newton_iterations": 0, "residual": 0.0})


SYS = henon_heiles()
Q0 = np.array([0.1, -0.2])
V0 = np.array([0.3, 0.1])


def test_shapes_and_stats():
    tr = integrate(SYS, _Verlet(), Q0, V0, h=0.1, n_steps=10)
    assert tr.success and "10 steps" in tr.message
    assert tr.q.shape == (11, 2) and tr.v.shape == (11, 2) and tr.p.shape == (11, 2)
    assert tr.lam is None
    # measured: exactly 0 (OPENBLAS_NUM_THREADS=1): margin inf; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(tr.t, 0.1 * np.arange(11), rtol=0, atol=1e-14)
    assert tr.stats["n_steps"] == 10
    assert tr.stats["fd_second_derivatives"] is False
    assert tr.final_state().n == 10


def test_t_final_and_save_every():
    tr = integrate(SYS, _Verlet(), Q0, V0, h=0.1, t_final=1.0, save_every=3)
    assert tr.q.shape == (5, 2)  # 0, 3, 6, 9, and the final 10
    # measured: 1.1e-16 (OPENBLAS_NUM_THREADS=1): margin 90; rtol=0 (was the default 1e-7)
    np.testing.assert_allclose(tr.t, [0, 0.3, 0.6, 0.9, 1.0], rtol=0, atol=1e-14)


def test_batched_time_axis_first():
    q0 = np.tile(Q0, (4, 1)) * np.arange(1, 5)[:, None]
    tr = integrate(SYS, _Verlet(), q0, np.tile(V0, (4, 1)), h=0.1, n_steps=5)
    assert tr.q.shape == (6, 4, 2)
    single = integrate(SYS, _Verlet(), q0[2], V0, h=0.1, n_steps=5)
    np.testing.assert_array_equal(tr.q[:, 2], single.q)


def test_save_load_and_bitwise_restart(tmp_path):
    full = integrate(SYS, _Verlet(), Q0, V0, h=0.1, n_steps=20)
    first = integrate(SYS, _Verlet(), Q0, V0, h=0.1, n_steps=12)
    path = tmp_path / "traj.npz"
    first.save(path)
    loaded = Trajectory.load(path)
    for name in ("t", "q", "v", "p"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(first, name))
    assert loaded.message == first.message and loaded.stats == first.stats
    assert loaded.method == "verlet-test"
    rest = integrate(SYS, _Verlet(), loaded.final_state(), None, h=0.1, n_steps=8)
    np.testing.assert_array_equal(rest.q[-1], full.q[-1])
    np.testing.assert_array_equal(rest.v[-1], full.v[-1])
    assert rest.final_state().carry["count"] == 20
    with pytest.raises(InputError, match="pass it"):
        loaded.energy()
    assert loaded.final_state().carry["hist"][1].shape == (2,)
    np.testing.assert_array_equal(loaded.energy(SYS), first.energy())


def test_failure_becomes_data():
    tr = integrate(SYS, _Verlet(fail_at=4), Q0, V0, h=0.1, n_steps=10)
    assert not tr.success
    assert "Newton did not converge at step 4" in tr.message
    assert "Try: halve h." in tr.message
    assert tr.q.shape == (5, 2)
    assert tr.final_state().n == 4


def test_callback_stops():
    tr = integrate(SYS, _Verlet(), Q0, V0, h=0.1, n_steps=10, callback=lambda s: s.n >= 3)
    assert tr.success and "callback" in tr.message and tr.q.shape == (4, 2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"h": -0.1, "n_steps": 3}, "`h` must be positive"),
        ({"h": float("nan"), "n_steps": 3}, "`h` must be finite"),
        ({"h": 0.1}, "exactly one of `t_final` and `n_steps`"),
        ({"h": 0.1, "n_steps": 3, "t_final": 1.0}, "exactly one"),
        ({"h": 0.3, "t_final": 1.0}, "not a non-negative integer multiple of h"),
        ({"h": 0.1, "n_steps": 2.5}, "`n_steps` must be an integer"),
        ({"h": 0.1, "n_steps": 3, "save_every": 0}, "`save_every` must be >= 1"),
    ],
)
def test_bad_driver_arguments(kwargs, match):
    with pytest.raises(InputError, match=match):
        integrate(SYS, _Verlet(), Q0, V0, **kwargs)


def test_constraint_residual_needs_constrained_system():
    tr = integrate(SYS, _Verlet(), Q0, V0, h=0.1, n_steps=2)
    with pytest.raises(InputError, match="needs a ConstrainedSystem"):
        tr.constraint_residual()


def test_non_finite_step_stops_the_run_with_a_message():
    """A step returning NaN (here: a Verlet step from t = 0.3 on) is not stored silently."""

    @attrs.frozen
    class _Blowup(_Verlet):
        def _step_impl(self, system, state, h):
            new = _Verlet._step_impl(self, system, state, h)
            return attrs.evolve(new, q=new.q * np.nan) if state.n == 3 else new

    tr = integrate(SYS, _Blowup(), Q0, V0, h=0.1, n_steps=10)
    assert not tr.success
    assert "Step 3 (from t = 0.3) produced non-finite values in q" in tr.message
    assert "halve h" in tr.message
    assert len(tr.t) == 4 and np.all(np.isfinite(tr.q))  # nodes 0..3, all finite


@attrs.frozen
class _CheckedVerlet(_Verlet):
    """Verlet with the driver's post-step hook: a warning from step 3, a failure at step 6."""

    def check_step(self, system, previous, state, h):
        assert previous.n + 1 == state.n
        if state.n == 6:
            raise ConvergenceError(step=state.n, t=state.t, residual=2.0, tol=1e-12,
                                   iterations=0, hint="post-condition test")
        if state.n >= 3:
            return RuntimeWarning(f"mode at step {state.n}")
        return None


def test_check_step_warns_once_and_fails_the_run():
    with pytest.warns(RuntimeWarning, match="mode at step 3") as record:
        tr = integrate(SYS, _CheckedVerlet(), Q0, V0, h=0.1, n_steps=5)
    assert len([w for w in record if "mode at step" in str(w.message)]) == 1
    assert tr.success and tr.message.endswith("mode at step 3")
    with pytest.warns(RuntimeWarning):
        tr = integrate(SYS, _CheckedVerlet(), Q0, V0, h=0.1, n_steps=10)
    assert not tr.success and "post-condition test" in tr.message
    assert tr.stats["n_steps"] == 5 and tr.final_state().n == 5
