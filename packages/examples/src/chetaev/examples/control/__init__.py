"""Control examples built on forces and exact step linearizations (issue 20).

* :mod:`.lqr` — discrete LQR stabilising the inverted spherical pendulum (holonomic,
  ``ConstrainedPRK``), designed on the step linearization in constraint-tangent coordinates;
* :mod:`.trajopt` — trajectory optimisation of the vertical rolling disc (nonholonomic,
  ``NonholonomicPRK``) steered by torques, with adjoint gradients from the step linearizations.
"""

from . import lqr, trajopt

__all__ = ["lqr", "trajopt"]
