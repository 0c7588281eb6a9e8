"""DSOCS and SOCS verify their derivative arguments before the first step (issue 14 item 4).

Every derivative argument (TwoPointLagrangian ``D1``, ``D2``, ``D11``, ``D12``, ``D22``;
KinematicConstraint ``jacobian``, slot by slot; SOCS ``constraint_jacobian`` (c_q, c_v, c_a);
``discrete_constraint_jacobian`` of ``DSOCS.from_discrete_nonholonomic``) wrong by a sign or
by a factor 2 raises ``DerivativeError`` from ``DSOCSIntegrator.initial_state`` (hence from
``integrate``); ``derivative_check=False`` opts out; every model of the package passes. The
tolerance is the derived one of ``chetaev.discrete_lagrangian.compare_derivative``.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import DerivativeError, integrate
from chetaev.dsocs import (
    DSOCS,
    SOCS,
    DSOCSIntegrator,
    KinematicConstraint,
    TwoPointLagrangian,
    VariationalConstraint,
    curvature_particle_dsocs,
    inertia_wheel_dsocs,
)

H = 0.05
Q0 = np.array([0.3, -0.2])
V0 = np.array([0.4, 0.5])
FACTORS = pytest.mark.parametrize("factor", [-1.0, 2.0], ids=["sign", "factor2"])


def _U(q):
    q = np.asarray(q, float)
    return np.cos(q[..., 0]) + 0.5 * q[..., 0] * q[..., 1] ** 2


def _dU(q):
    q = np.asarray(q, float)
    return np.stack([-np.sin(q[..., 0]) + 0.5 * q[..., 1] ** 2, q[..., 0] * q[..., 1]], -1)


def _hU(q):
    q = np.asarray(q, float)
    return np.stack([np.stack([-np.cos(q[..., 0]), q[..., 1]], -1),
                     np.stack([q[..., 1], q[..., 0]], -1)], -2)


def _g(q0, q1, q2):
    return (np.sum(q2 * q2, -1) - np.sum(q0 * q1, -1) + np.sin(q1[..., 0]))[..., None]


def _gjac(q0, q1, q2):
    e0 = np.zeros(np.shape(q1))
    e0[..., 0] = np.cos(q1[..., 0])
    return (-q1[..., None, :], (e0 - q0)[..., None, :], (2.0 * q2)[..., None, :])


def _dsocs(Ld=None, K=None, **kw) -> DSOCS:
    Ld = TwoPointLagrangian.mechanical(np.diag([1.0, 2.0]), _dU, H, potential=_U,
                                       potential_hess=_hU) if Ld is None else Ld
    K = KinematicConstraint(_g, _gjac) if K is None else K
    return DSOCS(Ld, K, VariationalConstraint(basis=lambda q0, q1, q2: np.ones((*np.shape(q1)[:-1],
                                                                                1, 2))),
                 h=H, **kw)


def _start(ds):
    return DSOCSIntegrator(start="paper").initial_state(ds, Q0, V0)


def test_correct_derivatives_pass():
    ds = _dsocs()
    ds.check_derivatives(Q0, Q0 + H * V0)
    _start(ds)


@FACTORS
@pytest.mark.parametrize("arg", ["D1", "D2", "D11", "D12", "D22"])
def test_a_wrong_lagrangian_derivative_is_caught(arg, factor):
    Ld = _dsocs().discrete_lagrangian
    f = getattr(Ld, arg)
    ds = _dsocs(Ld=attrs.evolve(Ld, **{arg: lambda a, b: factor * np.asarray(f(a, b))}))
    with pytest.raises(DerivativeError, match=f"`{arg}`.*derivative_check=False"):
        _start(ds)


@FACTORS
@pytest.mark.parametrize("slot", [0, 1, 2])
def test_a_wrong_kinematic_jacobian_is_caught_in_each_slot(slot, factor):
    def bad(q0, q1, q2):
        J = list(_gjac(q0, q1, q2))
        J[slot] = factor * J[slot]
        return tuple(J)

    ds = _dsocs(K=KinematicConstraint(_g, bad))
    with pytest.raises(DerivativeError, match=f"`jacobian`.*respect to q{slot}"):
        _start(ds)


@FACTORS
@pytest.mark.parametrize("slot", [0, 1, 2], ids=["c_q", "c_v", "c_a"])
def test_a_wrong_socs_constraint_jacobian_is_caught(slot, factor):
    good = curvature_particle_dsocs(lambda q: 1.0 + 0.3 * np.sin(q[..., 0]), H,
                                    closed_form=False)
    s = good.socs
    cj = s.constraint_jacobian

    def bad(q, v, a):
        J = list(cj(q, v, a))
        J[slot] = factor * np.asarray(J[slot])
        return tuple(J)

    ds = DSOCS.from_continuous(s.system, s.constraint, s.variations, H,
                               constraint_jacobian=bad, variations_depend_on=("v",))
    with pytest.raises(DerivativeError, match="`constraint_jacobian`"):
        integrate(ds, DSOCSIntegrator(start="paper"), Q0, V0, h=H, n_steps=2)
    with pytest.raises(DerivativeError, match="`constraint_jacobian`"):
        ds.socs.check_derivatives(Q0, V0)


@FACTORS
def test_a_wrong_discrete_constraint_jacobian_is_caught(factor):
    def gd(q0, q1):
        return (np.sum(q1 * q1, -1) - np.sum(q0 * q0, -1))[..., None]

    def gd_jac(q0, q1):
        return -2.0 * q0[..., None, :], factor * 2.0 * q1[..., None, :]

    Ld = TwoPointLagrangian.mechanical(np.eye(2), _dU, H)
    ds = DSOCS.from_discrete_nonholonomic(Ld, gd, lambda q: np.asarray(q, float)[..., None, :],
                                          discrete_constraint_jacobian=gd_jac, h=H)
    with pytest.raises(DerivativeError, match="`jacobian`"):
        _start(ds)


def test_derivative_check_false_opts_out_and_explicit_call_still_checks():
    Ld = _dsocs().discrete_lagrangian
    bad_Ld = attrs.evolve(Ld, D22=lambda a, b: -np.asarray(Ld.D22(a, b)))
    ds = _dsocs(Ld=bad_Ld, derivative_check=False)
    _start(ds)
    with pytest.raises(DerivativeError, match="`D22`"):
        ds.check_derivatives(Q0, Q0 + H * V0)
    # per-piece opt-out
    ds = _dsocs(Ld=attrs.evolve(bad_Ld, derivative_check=False))
    ds.check_derivatives(Q0, Q0 + H * V0)


def test_from_continuous_passes_the_opt_out_to_the_socs():
    s = curvature_particle_dsocs(1.0, H).socs
    ds = DSOCS.from_continuous(s.system, s.constraint, s.variations, H,
                               constraint_jacobian=lambda q, v, a: tuple(
                                   -np.asarray(j) for j in s.constraint_jacobian(q, v, a)),
                               derivative_check=False)
    assert ds.derivative_check is False and ds.socs.derivative_check is False
    _start(ds)


def test_the_check_runs_once_per_dsocs():
    calls = []
    Ld = _dsocs().discrete_lagrangian
    ds = _dsocs(Ld=attrs.evolve(Ld, D22=lambda a, b: calls.append(1) or Ld.D22(a, b)))
    _start(ds)
    first = len(calls)
    _start(ds)
    assert first > 0 and len(calls) == first


def test_socs_derivative_check_is_keyword_only_with_default_true():
    s = curvature_particle_dsocs(1.0, H).socs
    assert s.derivative_check is True
    with pytest.raises(TypeError):
        SOCS(s.system, s.constraint, s.variations, None, False)


MODELS = {
    "particle(k=1)": lambda: curvature_particle_dsocs(1.0, H),
    "particle(k(q))": lambda: curvature_particle_dsocs(lambda q: 1.0 + 0.3 * np.sin(q[..., 0]),
                                                       H, closed_form=False),
    "inertia-wheel(R-branch)": lambda: inertia_wheel_dsocs(h=H),
    "inertia-wheel(newton)": lambda: inertia_wheel_dsocs(h=H, solver="newton"),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_passes(name):
    ds = MODELS[name]()
    rng = np.random.default_rng(sorted(MODELS).index(name))
    for _ in range(3):
        q0, v0 = rng.uniform(-1, 1, 2), rng.uniform(0.2, 1, 2)
        ds.check_derivatives(q0, q0 + H * v0)
