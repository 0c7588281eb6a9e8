"""
Retractions on SO(3): exponential and Cayley
============================================

A retraction ``τ`` maps the Lie algebra to the group. ``exp`` turns ``ξ`` into a rotation by
the angle ``|ξ|``; Cayley, ``cay(ξ) = (I − ξ̂/2)⁻¹(I + ξ̂/2)``, turns it by
``2 arctan(|ξ|/2)`` — cheaper (no trigonometric functions) and still a second-order
approximation of ``exp`` near 0. The right panel shows the trivialized tangent
``dτ⁻¹`` that the Lie-group integrators use: its distance from the identity.
"""

import matplotlib.pyplot as plt
import numpy as np
from chetaev.liegroups import SO3, retraction

axis = np.array([1.0, 2.0, 2.0]) / 3.0
norms = np.linspace(0.0, 3.0, 61)
xis = norms[:, None] * axis

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8, 3.6))
for kind, style in (("exp", "-"), ("cayley", "--")):
    tau = retraction(SO3, kind)
    R = tau(xis)                                      # a batch of rotation matrices
    angle = np.arccos(np.clip((np.trace(R, axis1=-2, axis2=-1) - 1) / 2, -1, 1))
    ax1.plot(norms, angle, style, label=kind)
    dinv = tau.dL_inv(xis)
    ax2.plot(norms, np.linalg.norm(dinv - np.eye(3), axis=(-2, -1)), style, label=kind)
    print(kind, "angle at |ξ| = 3:", angle[-1])
ax1.set_xlabel("|ξ|")
ax1.set_title("rotation angle of τ(ξ)")
ax2.set_xlabel("|ξ|")
ax2.set_title("‖dτ⁻¹(ξ) − I‖ (left trivialized)")
for ax in (ax1, ax2):
    ax.legend()
fig.tight_layout()
plt.show()
