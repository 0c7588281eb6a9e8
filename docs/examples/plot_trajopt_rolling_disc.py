"""
Steering a rolling disc: trajectory optimisation with adjoint gradients
=======================================================================

The vertical rolling disc on R⁴, q = (x, y, θ, φ), rolls without slipping
(ẋ = R cos θ φ̇, ẏ = R sin θ φ̇: two nonholonomic constraints) and is driven by a steering
torque u₁ and an axle torque u₂, held constant over each step of ``NonholonomicPRK``
(s = 2). From rest at the origin it has to reach the pose (x, y, θ) = (2, 1, π/2) at rest in
T = 3, with a small control effort. The gradient of the cost with respect to the 40 controls
is one backward (adjoint) pass through the exact step linearizations A_k, B_k of
``step_linearization``; it agrees with central finite differences, which need 80
trajectories (integrated here as one batch). ``scipy.optimize.least_squares`` (Gauss–Newton)
uses the same backward pass for the Jacobian of the residuals.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from chetaev.examples.control import trajopt

problem = trajopt.DiscSteering()  # h = 0.15, N = 20, target (2, 1, π/2)
U = 0.3 * np.random.default_rng(0).normal(size=(problem.n_steps, 2))
start = time.perf_counter()
cost, grad = problem.cost_and_gradient(U)
t_adjoint = time.perf_counter() - start
start = time.perf_counter()
grad_fd = problem.fd_gradient(U, delta=1e-6)
t_fd = time.perf_counter() - start
start = time.perf_counter()
problem.rollout(U)
t_one = time.perf_counter() - start
print(f"adjoint vs central differences: max |Δ∇C| / max |∇C| = "
      f"{np.abs(grad - grad_fd).max() / np.abs(grad).max():.1e}")
print(f"cost: adjoint 1 trajectory with linearizations ({t_adjoint:.2f} s), "
      f"differences {2 * U.size} trajectories in one batch ({t_fd:.2f} s; one at a time "
      f"≈ {2 * U.size} × {t_one:.2f} s)")

result = problem.solve(ftol=1e-3)
qN = result.q[-1]
print(f"least_squares: {result.n_evaluations} passes, {result.seconds:.1f} s, "
      f"C = {result.cost:.3f}")
print(f"final pose ({qN[0]:.3f}, {qN[1]:.3f}, {qN[2]:.3f}), |p_N| = "
      f"{np.linalg.norm(result.p[-1]):.3f}")

t = problem.h * np.arange(problem.n_steps + 1)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.8))
ax1.plot(result.q[:, 0], result.q[:, 1], "-o", ms=2)
for k in range(0, problem.n_steps + 1, 4):  # heading arrows
    x, y, th = result.q[k, :3]
    ax1.arrow(x, y, 0.15 * np.cos(th), 0.15 * np.sin(th), head_width=0.04, color="C1")
ax1.plot(*problem.target[:2], "k*", ms=10, label="target")
ax1.set_aspect("equal")
ax1.set_title("contact point and heading")
ax1.legend(fontsize=8)
ax2.step(t[:-1], result.U[:, 0], where="post", label="u₁ steering")
ax2.step(t[:-1], result.U[:, 1], where="post", label="u₂ axle")
ax2.set_xlabel("t")
ax2.set_title("optimal torques")
ax2.legend(fontsize=8)
fig.tight_layout()
plt.show()
