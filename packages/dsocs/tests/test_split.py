"""The DSOCS is a system, ``DSOCSIntegrator`` the method (issue 15).

The system holds the pieces of Theorem 3.3 (L_d, D_K, D_V); ``DSOCS.at(h)`` gives them at a
step, and a DSOCS built by ``from_continuous`` without ``h`` is the family over the step. The
method holds the solve options (tol, max_iter, root selection, a problem-specific solver) and
takes h from ``step`` only. Equalities below are exact where both sides run the same floating
point operations (the same pieces built at the same h, the same solve).
"""

from __future__ import annotations

import numpy as np
import pytest
from chetaev.discrete_lagrangian import integrate
from chetaev.dsocs import (
    DSOCSInputError,
    DSOCSIntegrator,
    curvature_particle_dsocs,
    inertia_wheel_dsocs,
    iwp_root_filter,
    particle_closed_form_step,
)

Q0, V0 = np.zeros(2), np.array([1.0, 0.4])


def k_var(q):  # a curvature k(x, y) = 1 + 0.3 x (the protocol registry's)
    return 1.0 + 0.3 * np.asarray(q, float)[..., 0]


@pytest.mark.parametrize("start", ["paper", "second_order"])
def test_the_family_runs_at_the_steps_h_like_a_dsocs_built_at_that_h(start):
    family = curvature_particle_dsocs(k_var, closed_form=False)
    assert family.h is None and family.discrete_lagrangian is None
    for h in (0.05, 0.02):
        fixed = curvature_particle_dsocs(k_var, h, closed_form=False)
        a = integrate(family, DSOCSIntegrator(start=start), Q0, V0, h, n_steps=30)
        b = integrate(fixed, DSOCSIntegrator(start=start), Q0, V0, h, n_steps=30)
        assert a.success and b.success
        # same pieces at the same h, same solve: bitwise (nodes 1.. ; node 0's v differs by
        # design: the family's start waits for the first step, where h is known)
        np.testing.assert_array_equal(a.q, b.q)


def test_at_discretizes_once_per_step_and_checks_a_fixed_h():
    family = curvature_particle_dsocs(k_var, closed_form=False)
    d = family.at(0.05)
    assert family.at(0.05) is d and d.h == 0.05 and family.at(0.02) is not d
    fixed = curvature_particle_dsocs(k_var, 0.05, closed_form=False)
    q0, q1, q2 = np.zeros(2), np.array([0.05, 0.01]), np.array([0.1, 0.025])
    np.testing.assert_array_equal(d.residual(q0, q1, q2), fixed.residual(q0, q1, q2))
    assert fixed.at(0.05) is fixed
    with pytest.raises(DSOCSInputError, match=r"discretized with h = 0.05"):
        fixed.at(0.1)
    with pytest.raises(DSOCSInputError, match=r"at\(h\)"):
        family.residual(q0, q1, q2)
    with pytest.raises(DSOCSInputError, match=r"at\(h\)"):
        family.step(q0, q1)
    with pytest.raises(DSOCSInputError, match=r"h"):
        family.at(0.0)


def test_closed_form_without_h_says_how():
    with pytest.raises(DSOCSInputError, match=r"DSOCSIntegrator\(solver="):
        curvature_particle_dsocs(1.0)


def test_the_methods_solver_takes_h_from_the_step():
    h = 0.05
    legacy = curvature_particle_dsocs(1.0, h)  # closed-form step held by the DSOCS
    family = curvature_particle_dsocs(1.0, closed_form=False)
    method = DSOCSIntegrator(start="paper",
                             solver=lambda q0, q1, hh: particle_closed_form_step(q0, q1, hh, 1.0))
    a = integrate(family, method, Q0, V0, h, n_steps=40)
    b = integrate(legacy, DSOCSIntegrator(start="paper"), Q0, V0, h, n_steps=40)
    np.testing.assert_array_equal(a.q, b.q)  # the same closed form at the same h


def test_the_methods_root_filter_and_options_win():
    h = 0.1
    q0, q1 = np.array([0.05, 0.0]), np.array([0.049, 0.01])
    safe = inertia_wheel_dsocs(h, solver="newton")  # the filter held by the DSOCS (compat)
    unsafe = inertia_wheel_dsocs(h, solver="newton-unsafe")
    method = DSOCSIntegrator(root_filter=lambda a, b, c, hh: iwp_root_filter(hh)(a, b, c))
    q2m, infom = method.solve(unsafe, q0, q1, h)
    q2s, infos = safe.step(q0, q1)
    np.testing.assert_array_equal(q2m, q2s)
    assert infom == infos
    # the method's options win; unset ones fall back to the DSOCS's, then to the defaults
    strict = DSOCSIntegrator(max_iter=1, max_deflations=0)
    assert strict.options(safe, h)[:3] == (1e-12, 1, 0)
    assert DSOCSIntegrator().options(safe, h)[:3] == (1e-12, 50, 3)
    assert strict.options(safe, h)[3] is safe.root_filter
    assert method.options(safe, h)[3] is not safe.root_filter


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"tol": -1.0}, "tol"), ({"tol": float("nan")}, "tol"), ({"max_iter": 2.7}, "max_iter"),
    ({"max_iter": 0}, "max_iter"), ({"max_deflations": -1}, "max_deflations"),
    ({"root_filter": 3.0}, "root_filter"), ({"solver": "closest"}, "solver"),
])
def test_method_options_are_checked(kwargs, match):
    with pytest.raises(DSOCSInputError, match=match):
        DSOCSIntegrator(**kwargs)


# --------------------------------------------------------------------------------------------
# The compatibility keywords warn, say what to write instead, and change nothing
# --------------------------------------------------------------------------------------------
def test_compatibility_keywords_warn_and_give_the_same_result():
    import warnings

    from chetaev.dsocs import DSOCS, curvature_particle_solver, inertia_wheel_step_options

    h = 0.05
    family = curvature_particle_dsocs(k_var, closed_form=False)
    socs = family.socs
    q0, q1 = np.zeros(2), np.array([0.05, 0.02])
    # DSOCS.from_continuous(..., h, solver=...) -> the family, its member at h, and the method
    with pytest.warns(DeprecationWarning, match=r"DSOCSIntegrator\(solver=\.\.\.\).*without h"):
        old = DSOCS.from_continuous(
            socs.system, socs.constraint, socs.variations, h,
            constraint_jacobian=socs.constraint_jacobian, variations_depend_on=("v",),
            solver=lambda a, b: particle_closed_form_step(a, b, h, k_var))
    new = DSOCS.from_continuous(socs.system, socs.constraint, socs.variations,
                                constraint_jacobian=socs.constraint_jacobian,
                                variations_depend_on=("v",)).at(h)
    method = DSOCSIntegrator(solver=curvature_particle_solver(k_var))
    np.testing.assert_array_equal(old.trajectory(q0, q1, 20),
                                  new.trajectory(q0, q1, 20, method=method))
    # DSOCS(..., h=..., tol=..., max_iter=...) -> DSOCS(...) and DSOCSIntegrator(tol=..., ...)
    pieces = (new.discrete_lagrangian, new.kinematic_constraint, new.variational_constraint)
    with pytest.warns(DeprecationWarning, match=r"DSOCSIntegrator\(tol=\.\.\., max_iter=\.\.\.\)"):
        old = DSOCS(*pieces, h=h, tol=1e-10, max_iter=20)
    a = integrate(old, DSOCSIntegrator(start="paper"), Q0, V0, h, n_steps=20)
    b = integrate(DSOCS(*pieces), DSOCSIntegrator(start="paper", tol=1e-10, max_iter=20),
                  Q0, V0, h, n_steps=20)
    np.testing.assert_array_equal(a.q[1:], b.q[1:])  # node 0's v differs by design (no h)
    # the package's own builders and the new forms do not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        curvature_particle_dsocs(1.0, h)
        inertia_wheel_dsocs(0.1, solver="newton")
        DSOCS(*pieces)
        DSOCSIntegrator(**inertia_wheel_step_options(solver="newton"))


def test_the_wheel_step_options_equal_the_builders_default_step():
    h = 0.1
    q0, q1 = np.array([0.05, 0.0]), np.array([0.049, 0.01])
    from chetaev.dsocs import inertia_wheel_step_options

    plain = inertia_wheel_dsocs(h, solver="newton-unsafe")
    for solver in ("R-branch", "newton", "paper"):
        held = inertia_wheel_dsocs(h, solver=solver)
        method = DSOCSIntegrator(**inertia_wheel_step_options(solver=solver))
        np.testing.assert_array_equal(held.step(q0, q1)[0],
                                      plain.step(q0, q1, method=method)[0])
