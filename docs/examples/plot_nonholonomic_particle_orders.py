"""
Orders of the nonholonomic Lobatto methods
==========================================

The nonholonomic particle of Martín de Diego and Sato Martín de Almagro (2018, §7.1):
``L = |v|²/2 − (x² + y²)/2`` with the constraint ``ż = y ẋ``. The Lobatto IIIA–IIIB
nonholonomic partitioned Runge–Kutta method with ``s`` stages converges with order
``2s − 2`` in ``q`` (the paper's Fig. 3). Errors are measured at ``T = 2`` against a
DOP853 solution of the index-reduced equations.
"""

import matplotlib.pyplot as plt
import numpy as np
from chetaev.discrete_lagrangian import integrate
from chetaev.examples.models import nonholonomic_particle as particle
from chetaev.nh_integrators import NonholonomicPRK
from chetaev.rktableaux import lobatto_iiia_iiib

T = 2.0
q_ref, v_ref, lam_ref = particle.reference(np.array([0.0, T]))
hs = np.array([0.2, 0.1, 0.05])

fig, ax = plt.subplots(figsize=(5.5, 4))
for s in (2, 3, 4):
    method = NonholonomicPRK(lobatto_iiia_iiib(s), multiplier_rule="continuous")
    errors = []
    for h in hs:
        sol = integrate(particle.system(), method, particle.Q0, particle.V0, h=h,
                        n_steps=round(T / h))
        errors.append(np.abs(sol.q[-1] - q_ref[-1]).max())
    slope = np.polyfit(np.log(hs), np.log(errors), 1)[0]
    ax.loglog(hs, errors, "o-", label=f"s = {s}: slope {slope:.2f} (expected {2 * s - 2})")
    print(f"s = {s}: errors {np.array(errors)}, fitted order {slope:.2f}")

ax.set_xticks(hs, [f"{h:g}" for h in hs])
ax.minorticks_off()
ax.set_xlabel("step size h")
ax.set_ylabel("max |q(T) − q_ref(T)|")
ax.set_title("Nonholonomic particle: order 2s − 2 in q")
ax.legend()
fig.tight_layout()
plt.show()
