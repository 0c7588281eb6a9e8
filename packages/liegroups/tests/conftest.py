"""Hypothesis profiles. ``ci`` (the default; nox exports HYPOTHESIS_PROFILE=ci) is derandomized:
every run draws the same examples, so a failure reproduces and a pass is not luck. ``dev``
(``HYPOTHESIS_PROFILE=dev``) draws fresh random examples, for exploring. Tests that set their
own ``max_examples`` keep it; the profile fixes everything else."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True,
                          max_examples=100, database=None)
settings.register_profile("dev", deadline=None, print_blob=True, max_examples=100)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
