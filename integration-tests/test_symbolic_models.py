"""Symbolic twins of the cross-package models (chetaev.discrete_lagrangian.symbolic).

Every hand-written nonholonomic model (nonholonomic particle, affine particle, CVT, chaotic
system, particle × CVT, Chaplygin sleigh, general particle, knife edge / vertical disc in
coordinates, vertical disc on SE(2) with a linear and a nonlinear constraint and as a general
Lagrangian, ball on a turntable on SO(3)×R², the S² lifts of the spherical pendulum and the
spherical Kepler problem, the examples' heavy top) is rebuilt from its Lagrangian and
constraints as sympy expressions. Values and every derivative block agree to 1e-13 relative on
random (seeded) states and batches; trajectories of the same method agree to round-off.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from chetaev.discrete_lagrangian import ConstrainedSystem, NewtonOptions, integrate
from chetaev.discrete_lagrangian.symbolic import from_lagrangian, from_trivialized_lagrangian
from chetaev.discrete_lagrangian.testing import assert_systems_agree
from chetaev.liegroups import SE2, SO3, Product, Rn
from chetaev.nh_integrators import (
    LieNonholonomicPRK,
    NonholonomicPRK,
    spherical_kepler,
    spherical_pendulum,
)
from chetaev.nh_integrators import testing as nht
from chetaev.rktableaux import lobatto_iiia_iiib

BATCHES = [(), (5,), (2, 3)]


def _qv(n):
    return list(sp.symbols(f"q0:{n}")), list(sp.symbols(f"v0:{n}"))


def _kinetic(v, masses=None):
    masses = masses or [1] * len(v)
    return sum(m * vi**2 for m, vi in zip(masses, v)) / 2


# ----------------------------------------------------------------------------- vector space
def particle(kappa=None):
    (x, y, z), v = _qv(3)
    phi = v[2] - y * v[0] - (kappa * sp.sin(x) if kappa is not None else 0)
    return from_lagrangian(_kinetic(v) - (x**2 + y**2) / 2, [x, y, z], v, nonholonomic=[phi])


def cvt(eps=0.5):
    (x, y, z), v = _qv(3)
    V = (x**2 + z**2 - 2 * sp.cos(y) + eps * sp.sin(2 * y)) / 2
    return from_lagrangian(_kinetic(v) - V, [x, y, z], v,
                           nonholonomic=[v[2] + sp.sin(y) * v[0]])


def chaotic(m=3):
    n = 2 * m + 1
    q, v = _qv(n)
    V = (sum(x**2 for x in q) + q[m + 1] ** 2 * q[m + 2] ** 2
         + sum(q[k] ** 2 * q[m + k] ** 2 for k in range(1, m + 1))) / 2
    phi = v[0] + sum(q[i] * v[i] for i in range(m + 1, n))
    return from_lagrangian(_kinetic(v) - V, q, v, nonholonomic=[phi])


def particle_cvt(eps=0.5, n_cvt=2):
    n = 3 + 3 * n_cvt
    q, v = _qv(n)
    V = (q[0] ** 2 + q[1] ** 2) / 2
    cons = [v[2] - q[1] * v[0]]
    for k in range(n_cvt):
        x, y, z = q[3 + 3 * k: 6 + 3 * k]
        V += (x**2 + z**2 - 2 * sp.cos(y) + eps * sp.sin(2 * y)) / 2
        cons.append(v[5 + 3 * k] + sp.sin(y) * v[3 + 3 * k])
    return from_lagrangian(_kinetic(v) - V, q, v, nonholonomic=cons)


def sleigh(mass=1.0, inertia=0.5, offset=0.5):
    (x, y, th), (vx, vy, w) = _qv(3)
    m, I, a = sp.symbols("m I a")
    return from_lagrangian(m * (vx**2 + vy**2) / 2 + I * w**2 / 2, [x, y, th], [vx, vy, w],
                           nonholonomic=[-sp.sin(th) * vx + sp.cos(th) * vy - a * w],
                           params={m: mass, I: inertia, a: offset})


def general_particle():
    (x, y, z), v = _qv(3)
    v2 = sum(vi**2 for vi in v)
    k, g = nht.GEN_KAPPA, nht.GEN_GAMMA
    return from_lagrangian(v2 / 2 + k * v2**2 / 4 - (x**2 + y**2) / 2, [x, y, z], v,
                           nonholonomic=[v[2] - y * v[0] + g * v[2] ** 2 / 2])


def knife_edge(mass=1.0, inertia_z=0.5):
    """The vertical disc in coordinates (a knife edge with a spring)."""
    (x, y, th), v = _qv(3)
    return from_lagrangian(_kinetic(v, [mass, mass, inertia_z]) - (x**2 + y**2) / 2,
                           [x, y, th], v,
                           nonholonomic=[-sp.sin(th) * v[0] + sp.cos(th) * v[1]])


def _knife_edge_hand():
    from chetaev.examples.models import vertical_disc

    return vertical_disc.coordinate_system()


VECTOR = {
    "particle": (nht.particle_system, particle, 3),
    "affine_particle": (nht.affine_particle_system, lambda: particle(kappa=0.3), 3),
    "cvt": (nht.cvt_system, cvt, 3),
    "chaotic": (nht.chaotic_system, chaotic, 7),
    "particle_cvt": (lambda: nht.particle_cvt_system(n_cvt=2), particle_cvt, 9),
    "sleigh": (nht.sleigh_system, sleigh, 3),
    "general_particle": (nht.general_particle_system, general_particle, 3),
    "knife_edge": (_knife_edge_hand, knife_edge, 3),
}


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("name", sorted(VECTOR))
def test_vector_twins_agree(name, batch):
    hand_f, sym_f, n = VECTOR[name]
    hand, sym = hand_f(), sym_f()
    assert isinstance(sym, ConstrainedSystem) and not sym.fd_second_derivatives
    assert type(sym.constraint) is type(hand.constraint)
    rng = np.random.default_rng(len(batch) + 17)
    q, v = rng.standard_normal((2, *batch, n))
    assert_systems_agree(sym, hand, q, v)


# ----------------------------------------------------------------------------- groups
def _entries(sym, shape):
    return sp.Matrix(*shape, list(sp.symbols(f"{sym}0:{shape[0] * shape[1]}")))


def vertical_disc(constraint="linear", quartic=None, mass=1.0, inertia_z=0.5):
    g = _entries("g", (3, 3))
    eta = list(sp.symbols("eta0:3"))
    ell = _kinetic(eta, [mass, mass, inertia_z]) - (g[0, 2] ** 2 + g[1, 2] ** 2) / 2
    if quartic is not None:
        ell += quartic * eta[0] ** 4 / 4
    phi = eta[1] if constraint == "linear" else eta[1] + eta[1] ** 3
    return from_trivialized_lagrangian(SE2, ell, eta, g=g, nonholonomic=[phi])


def turntable_ball(radius=1.0, a=0.4, table_rate=1.0):
    G = Product(SO3, Rn(2))
    g = sp.MatrixSymbol("g", 6, 6)
    eta = list(sp.symbols("w0:3")) + list(sp.symbols("vx vy"))
    r, Om = radius, table_rate
    ell = a * r * r * sum(e**2 for e in eta[:3]) / 2 + (eta[3] ** 2 + eta[4] ** 2) / 2
    spatial = [sum(g[i, j] * eta[j] for j in range(3)) for i in range(3)]  # ω = R ω_b
    phis = [eta[3] + Om * g[4, 5] - r * spatial[1], eta[4] - Om * g[3, 5] + r * spatial[0]]
    return from_trivialized_lagrangian(G, ell, eta, g=g, nonholonomic=phis)


def sphere_lift(V_of_x3, mass=1.0, regularization=1.0):
    """Lift to SO(3) of (m/2)|ẋ|² − V(x) on S² with x = g e₃: ℓ = (m/2)(η₁² + η₂²) +
    (M/2)η₃² − V(g e₃), φ = η₃."""
    R = sp.MatrixSymbol("R", 3, 3)
    eta = list(sp.symbols("eta0:3"))
    ell = _kinetic(eta, [mass, mass, regularization]) - V_of_x3(R[2, 2])
    return from_trivialized_lagrangian(SO3, ell, eta, g=R, nonholonomic=[eta[2]])


def _examples_heavy_top():
    from chetaev.examples.models import heavy_top as ht

    R = sp.MatrixSymbol("R", 3, 3)
    eta = list(sp.symbols("eta0:3"))
    I = sp.Matrix(ht.I_PIVOT.tolist())
    e = sp.Matrix(eta)
    ell = (e.T * I * e)[0] / 2 - ht.MASS * ht.G * sum(R[2, j] * ht.CHI[j] for j in range(3))
    return ht.so3_system(), from_trivialized_lagrangian(SO3, ell, eta, g=R)


GROUPS = {
    "vertical_disc": (SE2, lambda: nht.vertical_disc(), lambda: vertical_disc()),
    "vertical_disc_nonlinear": (SE2, lambda: nht.vertical_disc(constraint="nonlinear"),
                                lambda: vertical_disc("nonlinear")),
    "vertical_disc_general": (SE2, lambda: nht.vertical_disc_general(quartic=0.3),
                              lambda: vertical_disc(quartic=0.3)),
    "turntable_ball": (Product(SO3, Rn(2)), nht.turntable_ball, turntable_ball),
    "sphere_pendulum": (SO3, spherical_pendulum, lambda: sphere_lift(lambda c: c)),
    "sphere_kepler": (SO3, spherical_kepler,
                      lambda: sphere_lift(lambda c: -c / sp.sqrt(1 - c**2))),
}


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("name", sorted(GROUPS))
def test_group_twins_agree(name, batch):
    group, hand_f, sym_f = GROUPS[name]
    hand, sym = hand_f(), sym_f()
    assert type(sym.system) is type(hand.system) and not sym.fd_second_derivatives
    assert type(sym.constraint) is type(hand.constraint)
    rng = np.random.default_rng(len(batch) + 23)
    g = group.random(rng, batch)
    eta = rng.standard_normal((*batch, group.dim))
    if name == "sphere_kepler":  # V is singular at x = ±e₃: keep |g₂₂| away from 1
        keep = np.abs(g[..., 2, 2]) < 0.9
        g, eta = (g[keep], eta[keep]) if batch else (g, eta)
    assert_systems_agree(sym, hand, g, eta)


def test_examples_heavy_top_twin_agrees():
    pytest.importorskip("chetaev.examples")
    hand, sym = _examples_heavy_top()
    rng = np.random.default_rng(3)
    g = SO3.random(rng, (6,))
    eta = rng.standard_normal((6, 3))
    assert_systems_agree(sym, hand, g, eta)
    # measured (1 run(s), threads 1 & unset): worst |diff| 0 vs allowed 1.4e-15, margin ∞
    np.testing.assert_allclose(sym.inertia, hand.inertia, rtol=1e-15)


# ----------------------------------------------------------------------------- trajectories
TIGHT = NewtonOptions(tol=1e-14)


@pytest.mark.parametrize("name", ["cvt", "chaotic", "sleigh", "general_particle"])
def test_vector_trajectories_agree_to_round_off(name):
    """NonholonomicPRK (s = 3), 100 steps, hand-written vs symbolic: agreement to round-off.

    Measured: max 2.2e-15 in q and v (chaotic), 0 (CVT, sleigh); λ 1.1e-13 (general particle:
    its Newton solve stops at tol 1e-14 relative, so λ differs at that level); the bound
    1e-12 (relative to max(1, |x|)) leaves a margin for growth over the run."""
    hand_f, sym_f, _ = VECTOR[name]
    q0, v0 = {"cvt": (nht.CVT_Q0, nht.CVT_V0_LOW), "sleigh": (nht.SLEIGH_Q0, nht.SLEIGH_V0),
              "general_particle": (nht.GEN_Q0, nht.GEN_V0)}.get(
        name, (nht.chaotic_ensemble()[0][3], nht.chaotic_ensemble()[1][3]))
    method = NonholonomicPRK(lobatto_iiia_iiib(3), newton=TIGHT)
    a = integrate(hand_f(), method, q0, v0, h=0.05, n_steps=100)
    b = integrate(sym_f(), method, q0, v0, h=0.05, n_steps=100)
    assert a.success and b.success
    for x, y in [(a.q, b.q), (a.v, b.v), (a.lam, b.lam)]:
        # measured (18 runs of this line, threads 1 & unset): worst 3.71e-14 vs 1.3e-12,
        # margin 35
        assert np.max(np.abs(x - y)) <= 1e-12 * max(1.0, np.max(np.abs(x)))


@pytest.mark.parametrize("name", ["vertical_disc", "turntable_ball"])
def test_group_trajectories_agree_to_round_off(name):
    """LieNonholonomicPRK (s = 3), 100 steps: measured 0 difference (disc and ball); the same
    bound as above."""
    _, hand_f, sym_f = GROUPS[name]
    g0, eta0 = nht.disc_initial() if name == "vertical_disc" else nht.ball_initial()
    method = LieNonholonomicPRK(lobatto_iiia_iiib(3), newton=TIGHT)
    a = integrate(hand_f(), method, g0, eta0, h=0.05, n_steps=100)
    b = integrate(sym_f(), method, g0, eta0, h=0.05, n_steps=100)
    assert a.success and b.success
    for x, y in [(a.q, b.q), (a.v, b.v), (a.lam, b.lam)]:
        # measured (18 runs of this line, threads 1 & unset): worst 3.71e-14 vs 1.3e-12,
        # margin 35
        assert np.max(np.abs(x - y)) <= 1e-12 * max(1.0, np.max(np.abs(x)))
