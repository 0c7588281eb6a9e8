"""``nonholonomic_particle(symbolic=True)``: the particle built by ``from_lagrangian`` is the
hand-written model (every derivative block, the constraint and the multiplier), with the same
initial data, on a seeded batch of states (needs sympy)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sympy")

from chetaev.discrete_lagrangian.testing import assert_systems_agree
from chetaev.gni.testing import nonholonomic_particle


@pytest.mark.parametrize("affine", [False, True], ids=["linear", "affine"])
def test_symbolic_particle_is_the_hand_written_one(affine: bool) -> None:
    sym, hand = nonholonomic_particle(affine, symbolic=True), nonholonomic_particle(affine)
    assert sym.affine == hand.affine
    np.testing.assert_array_equal(sym.q0, hand.q0)
    np.testing.assert_array_equal(sym.v0, hand.v0)
    assert_systems_agree(sym.system, hand.system, hand.q0, hand.v0)
    rng = np.random.default_rng(5)
    q, v = rng.standard_normal((2, 4, 3))
    assert_systems_agree(sym.system, hand.system, q, v)
    assert sym.system.constraint.is_affine == affine
