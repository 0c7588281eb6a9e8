"""GNI RATTLE (chetaev.gni) versus the s = 2 nonholonomic PRK (chetaev.nh_integrators).

Finding: they COINCIDE. With ``Lambda^1 = lambda_k`` carried, ``NonholonomicPRK(
lobatto_iiia_iiib(2))`` reduces to ``p_{k+1/2} = p_k + (h/2)(D1L(q_k) + muᵀλ_k)``,
``q_{k+1} = q_k + h M⁻¹ p_{k+1/2}``, ``p_{k+1} = p_{k+1/2} + (h/2)(D1L(q_{k+1}) + muᵀλ_{k+1})``
with ``mu M⁻¹ p_{k+1} + a = 0`` (high-order paper §5.1), which is exactly the GNI
with the trapezoidal discrete Lagrangian (16) in the node representation
``(q_k, v_k = G⁻¹ p̄_k, λ_k)``: ``p⁻_k = p̄_k + (h/2) muᵀλ_k`` and
``p̄_{k+1} = p⁺_{k+1} + (h/2) muᵀλ_{k+1}`` (GNI paper Def. 4.1, Remark 5.1).
Both take λ_0 from the continuous problem. So q, v and λ agree to solver tolerance at every
node (1e-12 with NH-PRK's Newton solved to round-off), for linear and affine constraints, not
merely to O(h³) per step. The GNI midpoint
variant is the control: it differs from both at O(h³) per step, which this check detects.
"""

import numpy as np
import pytest

gni = pytest.importorskip("chetaev.gni")
nh = pytest.importorskip("chetaev.nh_integrators")
rk = pytest.importorskip("chetaev.rktableaux")

from chetaev.discrete_lagrangian import NewtonOptions  # noqa: E402
from chetaev.discrete_lagrangian.testing import fit_order  # noqa: E402
from chetaev.gni.testing import nonholonomic_particle  # noqa: E402

# NH-PRK solves its step by Newton; with its default tolerance (1e-12 relative) the carried
# multipliers drift apart at ~1e-10 (λ is a momentum difference divided by h). Solving to
# round-off shows the two maps are the same.
TIGHT = NewtonOptions(tol=1e-14)


def _run(method, problem, h, n):
    s = method.initial_state(problem.system, problem.q0, problem.v0)
    out = [s]
    for _ in range(n):
        s = method.step(problem.system, s, h)
        out.append(s)
    return out


@pytest.mark.parametrize("affine", [False, True])
def test_gni_rattle_coincides_with_nhprk_s2(affine):
    problem = nonholonomic_particle(affine=affine)
    h, n = 0.05, 200
    a = _run(gni.GNI("rattle"), problem, h, n)
    carried = nh.NonholonomicPRK(rk.lobatto_iiia_iiib(2), newton=TIGHT, multiplier_rule="carry")
    b = _run(carried, problem, h, n)
    dq = max(np.max(np.abs(sa.q - sb.q)) for sa, sb in zip(a, b))
    dv = max(np.max(np.abs(sa.v - sb.v)) for sa, sb in zip(a, b))
    dl = max(np.max(np.abs(np.ravel(sa.lam) - np.ravel(sb.lam))) for sa, sb in zip(a, b))
    assert dq < 1e-11 and dv < 1e-11 and dl < 1e-10, (dq, dv, dl)


def test_per_step_difference_detects_a_third_order_change():
    """Control: from the same node states, GNI midpoint differs from the NH-PRK s = 2 step
    by O(h³) (slope 3), while GNI RATTLE differs by round-off only."""
    problem = nonholonomic_particle()
    prk = nh.NonholonomicPRK(rk.lobatto_iiia_iiib(2), newton=TIGHT, multiplier_rule="carry")
    s0 = prk.initial_state(problem.system, problem.q0, problem.v0)
    hs = np.array([0.2, 0.1, 0.05, 0.025])
    d_mid, d_rat = [], []
    for h in hs:
        ref = prk.step(problem.system, s0, h)
        d_mid.append(np.linalg.norm(gni.GNI("midpoint").step(problem.system, s0, h).q - ref.q))
        d_rat.append(np.linalg.norm(gni.GNI("rattle").step(problem.system, s0, h).q - ref.q))
    # measured (1 run(s), threads 1 & unset): worst 0.0018 vs 0.25, margin 139
    assert abs(fit_order(hs, d_mid) - 3) < 0.25  # all four points far above the 1e-11 floor
    # measured (1 run(s), threads 1 & unset): worst 1.39e-17 vs 1e-13, margin 7.21e+03 (loose)
    assert max(d_rat) < 1e-13
