"""Test configuration of chetaev.liegroups: the hypothesis profiles.

``ci`` (the default): derandomized (the examples are a fixed function of the test, so every
machine runs the same ones), no deadline (shared CI machines), no example database (nothing
carried between runs).  ``dev``: random examples for local exploration
(``HYPOTHESIS_PROFILE=dev python -m pytest ...``).
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, database=None,
                          print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
