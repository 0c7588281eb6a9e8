"""Hostile input (issue 21): every public entry point of ``chetaev.nh_integrators`` called
with wrong shapes, dtypes (complex, int, object), NaN/inf, invalid values and mismatched
batches. Each case must raise a ``ValueError`` subclass (``InputError`` and its kin from
``chetaev.discrete_lagrangian``) whose message names the argument.

Verdicts (issue 21's scale): GOOD = such an error; POOR = another exception (numpy's
broadcast error, IndexError, LinAlgError, ...); BAD = a result (silently wrong or NaN).
Run this module as a script to print the counts."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from chetaev.discrete_lagrangian import NewtonOptions
from chetaev.nh_integrators import (
    LieNonholonomicPRK,
    NonholonomicPRK,
    sphere_lift,
    sphere_point,
    sphere_velocity,
    spherical_kepler,
    spherical_pendulum,
    tait_bryan,
)
from chetaev.nh_integrators import testing as nh
from chetaev.rktableaux import gauss

P0, PV0 = nh.PARTICLE_Q0, nh.PARTICLE_V0
PARTICLE = nh.particle_system()
DISC = nh.vertical_disc()
DG0, DE0 = nh.disc_initial()
NH = NonholonomicPRK(2)
LIE = LieNonholonomicPRK(2)


def _nh_state(**kw):
    st = NH.initial_state(PARTICLE, P0, PV0)
    return attrs.evolve(st, **kw)


def _lie_state(**kw):
    st = LIE.initial_state(DISC, DG0, DE0)
    return attrs.evolve(st, **kw)


def _V(x):
    return x[..., 2]


def _gV(x):
    return np.broadcast_to([0.0, 0.0, 1.0], np.shape(x)).copy()


# (case id, callable, argument the message must name)
CASES = [
    # ---------------------------------------------------------- constructors
    ("nh pair str", lambda: NonholonomicPRK("lobatto"), "pair"),
    ("nh pair float", lambda: NonholonomicPRK(3.0), "pair"),
    ("nh pair s=1", lambda: NonholonomicPRK(1), "pair"),
    ("nh pair gauss", lambda: NonholonomicPRK(gauss(2)), "pair"),
    ("nh form", lambda: NonholonomicPRK(2, form="euler"), "form"),
    ("nh newton dict", lambda: NonholonomicPRK(2, newton={"tol": 1e-10}), "newton"),
    (
        "nh newton simplified",
        lambda: NonholonomicPRK(2, newton=NewtonOptions(simplified=True)),
        "simplified",
    ),
    ("nh rule", lambda: NonholonomicPRK(2, multiplier_rule="carried-over"), "multiplier_rule"),
    ("nh rule int", lambda: NonholonomicPRK(2, multiplier_rule=1), "multiplier_rule"),
    (
        "nh rule weighted",
        lambda: NonholonomicPRK(2, multiplier_rule="weighted_sum"),
        "multiplier_rule",
    ),
    ("nh mode", lambda: NonholonomicPRK(2, multiplier_mode="x"), "multiplier_mode"),
    ("nh momenta", lambda: NonholonomicPRK(2, constraint_momenta="iiib"), "constraint_momenta"),
    ("nh reuse", lambda: NonholonomicPRK(2, jacobian_reuse="never"), "jacobian_reuse"),
    ("nh implicit str", lambda: NonholonomicPRK(2, implicit_velocity="yes"), "implicit_velocity"),
    (
        "nh implicit+ham",
        lambda: NonholonomicPRK(2, form="hamiltonian", implicit_velocity=True),
        "implicit_velocity",
    ),
    ("lie pair str", lambda: LieNonholonomicPRK("3"), "pair"),
    ("lie pair s=0", lambda: LieNonholonomicPRK(0), "pair"),
    ("lie retraction", lambda: LieNonholonomicPRK(2, retraction="rk4"), "retraction"),
    ("lie rule", lambda: LieNonholonomicPRK(2, multiplier_rule="carried"), "multiplier_rule"),
    ("lie form", lambda: LieNonholonomicPRK(2, form="euler"), "form"),
    ("lie newton", lambda: LieNonholonomicPRK(2, newton=5), "newton"),
    # ---------------------------------------------------------- NonholonomicPRK.initial_state
    ("nh q0 wrong n", lambda: NH.initial_state(PARTICLE, [1.0, 2.0], PV0), "q0"),
    ("nh q0 scalar", lambda: NH.initial_state(PARTICLE, 1.0, PV0), "q0"),
    ("nh v0 wrong n", lambda: NH.initial_state(PARTICLE, P0, [0.5, 1.0, 0.25, 0.0]), "v0"),
    ("nh v0 None", lambda: NH.initial_state(PARTICLE, P0, None), "v0"),
    ("nh q0 complex", lambda: NH.initial_state(PARTICLE, P0 + 1e-3j, PV0), "q0"),
    ("nh v0 complex", lambda: NH.initial_state(PARTICLE, P0, PV0 + 0j), "v0"),
    ("nh q0 object", lambda: NH.initial_state(PARTICLE, np.array([1, "a", 0], object), PV0), "q0"),
    ("nh q0 str", lambda: NH.initial_state(PARTICLE, "abc", PV0), "q0"),
    ("nh q0 nan", lambda: NH.initial_state(PARTICLE, [np.nan, 0.5, 0.0], PV0), "q0"),
    ("nh v0 inf", lambda: NH.initial_state(PARTICLE, P0, [np.inf, 1.0, 0.25]), "v0"),
    (
        "nh batch mismatch",
        lambda: NH.initial_state(PARTICLE, np.tile(P0, (2, 1)), np.tile(PV0, (3, 1))),
        "v0",
    ),
    ("nh lam0 shape", lambda: NH.initial_state(PARTICLE, P0, PV0, lam0=[0.0, 0.0]), "lam0"),
    ("nh lam0 nan", lambda: NH.initial_state(PARTICLE, P0, PV0, lam0=[np.nan]), "lam0"),
    ("nh lam0 complex", lambda: NH.initial_state(PARTICLE, P0, PV0, lam0=[1j]), "lam0"),
    ("nh t0 nan", lambda: NH.initial_state(PARTICLE, P0, PV0, t0=np.nan), "t0"),
    ("nh t0 str", lambda: NH.initial_state(PARTICLE, P0, PV0, t0="0"), "t0"),
    ("nh tol negative", lambda: NH.initial_state(PARTICLE, P0, PV0, tol=-1.0), "tol"),
    ("nh off constraint", lambda: NH.initial_state(PARTICLE, P0, [0.5, 1.0, 0.0]), "v0"),
    ("nh system", lambda: NH.initial_state(object(), P0, PV0), "system"),
    ("nh lie system", lambda: NH.initial_state(DISC, DG0, DE0), "system"),
    # ---------------------------------------------------------- NonholonomicPRK.step
    ("nh step h nan", lambda: NH.step(PARTICLE, _nh_state(), np.nan), "h"),
    ("nh step h 0", lambda: NH.step(PARTICLE, _nh_state(), 0.0), "h"),
    ("nh step h str", lambda: NH.step(PARTICLE, _nh_state(), "0.1"), "h"),
    ("nh step h complex", lambda: NH.step(PARTICLE, _nh_state(), 0.1 + 0j), "h"),
    ("nh step state", lambda: NH.step(PARTICLE, (P0, PV0), 0.1), "state"),
    ("nh step q shape", lambda: NH.step(PARTICLE, _nh_state(q=np.zeros(4)), 0.1), "state"),
    ("nh step v nan", lambda: NH.step(PARTICLE, _nh_state(v=np.full(3, np.nan)), 0.1), "state"),
    ("nh step lam shape", lambda: NH.step(PARTICLE, _nh_state(lam=np.zeros(2)), 0.1), "state"),
    (
        "nh step batch",
        lambda: NH.step(PARTICLE, _nh_state(v=np.tile(PV0, (2, 1)), p=np.tile(PV0, (2, 1))), 0.1),
        "state",
    ),
    # ---------------------------------------------------------- LieNonholonomicPRK
    ("lie g0 shape", lambda: LIE.initial_state(DISC, np.eye(4), DE0), "q0"),
    ("lie g0 off group", lambda: LIE.initial_state(DISC, 2 * np.eye(3), DE0), "q0"),
    ("lie g0 nan", lambda: LIE.initial_state(DISC, np.full((3, 3), np.nan), DE0), "q0"),
    ("lie g0 complex", lambda: LIE.initial_state(DISC, DG0 + 0j, DE0), "q0"),
    ("lie g0 object", lambda: LIE.initial_state(DISC, np.array(DG0, object), DE0), "q0"),
    ("lie g0 str", lambda: LIE.initial_state(DISC, "I", DE0), "q0"),
    ("lie eta0 shape", lambda: LIE.initial_state(DISC, DG0, [0.8, 0.0]), "v0"),
    ("lie eta0 inf", lambda: LIE.initial_state(DISC, DG0, [np.inf, 0.0, 1.2]), "v0"),
    ("lie eta0 complex", lambda: LIE.initial_state(DISC, DG0, DE0 + 1j), "v0"),
    ("lie eta0 None", lambda: LIE.initial_state(DISC, DG0, None), "v0"),
    (
        "lie batch mismatch",
        lambda: LIE.initial_state(DISC, np.stack([DG0] * 2), np.tile(DE0, (3, 1))),
        "v0",
    ),
    ("lie off constraint", lambda: LIE.initial_state(DISC, DG0, [0.8, 0.1, 1.2]), "v0"),
    ("lie lam0 shape", lambda: LIE.initial_state(DISC, DG0, DE0, lam0=[0.0, 1.0]), "lam0"),
    ("lie lam0 nan", lambda: LIE.initial_state(DISC, DG0, DE0, lam0=[np.nan]), "lam0"),
    ("lie t0 inf", lambda: LIE.initial_state(DISC, DG0, DE0, t0=np.inf), "t0"),
    ("lie system", lambda: LIE.initial_state(PARTICLE, P0, PV0), "system"),
    ("lie step h inf", lambda: LIE.step(DISC, _lie_state(), np.inf), "h"),
    ("lie step h str", lambda: LIE.step(DISC, _lie_state(), "x"), "h"),
    ("lie step state", lambda: LIE.step(DISC, None, 0.1), "state"),
    ("lie step eta shape", lambda: LIE.step(DISC, _lie_state(v=np.zeros(5)), 0.1), "state"),
    ("lie step g nan", lambda: LIE.step(DISC, _lie_state(q=np.full((3, 3), np.nan)), 0.1), "state"),
    # ---------------------------------------------------------- homogeneous spaces
    ("lift potential", lambda: sphere_lift(1.0, _gV), "potential"),
    ("lift potential_grad", lambda: sphere_lift(_V, None), "potential_grad"),
    ("lift mass 0", lambda: sphere_lift(_V, _gV, mass=0.0), "mass"),
    ("lift mass nan", lambda: sphere_lift(_V, _gV, mass=np.nan), "mass"),
    ("lift mass str", lambda: sphere_lift(_V, _gV, mass="1"), "mass"),
    ("lift mass complex", lambda: sphere_lift(_V, _gV, mass=1 + 1j), "mass"),
    ("lift regularization", lambda: sphere_lift(_V, _gV, regularization=-1.0), "regularization"),
    ("lift x0 not unit", lambda: sphere_lift(_V, _gV, x0=(0, 0, 2)), "x0"),
    ("lift x0 shape", lambda: sphere_lift(_V, _gV, x0=(0, 1)), "x0"),
    ("lift hess", lambda: sphere_lift(_V, _gV, potential_hess=3), "potential_hess"),
    ("pendulum alpha nan", lambda: spherical_pendulum(alpha=np.nan), "alpha"),
    ("pendulum alpha str", lambda: spherical_pendulum(alpha="g"), "alpha"),
    ("pendulum mass", lambda: spherical_pendulum(mass=-1.0), "mass"),
    ("kepler rho inf", lambda: spherical_kepler(rho=np.inf), "rho"),
    ("kepler center", lambda: spherical_kepler(center=(0, 0, 0)), "center"),
    ("sphere_point shape", lambda: sphere_point(np.eye(2)), "g"),
    ("sphere_point nan", lambda: sphere_point(np.full((3, 3), np.nan)), "g"),
    ("sphere_point complex", lambda: sphere_point(np.eye(3) + 0j), "g"),
    ("sphere_point x0", lambda: sphere_point(np.eye(3), x0=(1, 1, 1)), "x0"),
    ("sphere_velocity shape", lambda: sphere_velocity(np.eye(3), [1.0, 0.0]), "eta"),
    (
        "sphere_velocity batch",
        lambda: sphere_velocity(np.stack([np.eye(3)] * 2), np.zeros((3, 3))),
        "eta",
    ),
    ("sphere_velocity nan", lambda: sphere_velocity(np.eye(3), [np.nan, 0, 0]), "eta"),
    ("tait_bryan nan", lambda: tait_bryan(np.nan, 0.0, 0.0), "theta1"),
    ("tait_bryan complex", lambda: tait_bryan(0.0, 1j, 0.0), "theta2"),
    ("tait_bryan str", lambda: tait_bryan(0.0, 0.0, "x"), "theta3"),
    ("tait_bryan batch", lambda: tait_bryan(np.zeros(2), np.zeros(3), 0.0), "theta"),
    # ---------------------------------------------------------- testing models
    ("cvt eps nan", lambda: nh.cvt_system(np.nan), "eps"),
    ("cvt eps str", lambda: nh.cvt_system("a"), "eps"),
    ("chaotic m 1", lambda: nh.chaotic_system(1), "m"),
    ("chaotic m float", lambda: nh.chaotic_system(2.5), "m"),
    ("ensemble J 0", lambda: nh.chaotic_ensemble(0), "J"),
    ("sleigh mass 0", lambda: nh.sleigh_system(mass=0.0), "mass"),
    ("sleigh inertia nan", lambda: nh.sleigh_system(inertia=np.nan), "inertia"),
    ("particle_cvt n_cvt", lambda: nh.particle_cvt_system(n_cvt=-1), "n_cvt"),
    ("affine kappa inf", lambda: nh.affine_particle_system(np.inf), "kappa"),
    ("disc constraint", lambda: nh.vertical_disc(constraint="quadratic"), "constraint"),
    ("disc mass", lambda: nh.vertical_disc(mass=-1.0), "mass"),
    ("ball radius", lambda: nh.turntable_ball(radius=0.0), "radius"),
    ("ball a nan", lambda: nh.turntable_ball(a=np.nan), "a"),
    ("fit_order lengths", lambda: nh.fit_order([0.1, 0.05], [1e-3, 2e-4, 1e-5]), "errors"),
    ("fit_order negative h", lambda: nh.fit_order([-0.1, 0.05, 0.025], [1e-3, 1e-4, 1e-5]), "hs"),
    ("fit_order nan", lambda: nh.fit_order([0.1, 0.05, 0.025], [np.nan, 1e-4, 1e-5]), "errors"),
]


def verdict(call, arg: str) -> tuple[str, str]:
    """(GOOD | POOR | BAD, what happened)."""
    try:
        out = call()
    except ValueError as err:  # InputError, HypothesisError, ConstraintViolationError, ...
        text = str(err)
        if f"`{arg}" in text or f"{arg}=" in text or f"{arg} " in text:
            return "GOOD", f"{type(err).__name__}: {text[:100]}"
        return "POOR", f"{type(err).__name__} not naming `{arg}`: {text[:100]}"
    except Exception as err:
        return "POOR", f"{type(err).__name__}: {str(err)[:100]}"
    return "BAD", f"returned {type(out).__name__}"


@pytest.mark.parametrize(("case", "call", "arg"), CASES, ids=[c[0] for c in CASES])
def test_hostile_input_raises_a_typed_error_naming_the_argument(case, call, arg):
    result, detail = verdict(call, arg)
    assert result == "GOOD", f"{case}: {result}: {detail}"


if __name__ == "__main__":  # pragma: no cover - the GOOD/POOR/BAD counts for the report
    counts = {"GOOD": 0, "POOR": 0, "BAD": 0}
    for case, call, arg in CASES:
        result, detail = verdict(call, arg)
        counts[result] += 1
        if result != "GOOD":
            print(f"{result:4s} {case}: {detail}")
    print(counts)
