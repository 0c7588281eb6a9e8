"""The version of chetaev-liegroups: the one source read by setuptools (pyproject
``[tool.setuptools.dynamic]``) and exported as ``chetaev.liegroups.__version__``."""

__version__ = "0.1.0"
