"""The version of chetaev-gni: the one source read by setuptools (pyproject
``[tool.setuptools.dynamic]``) and exported as ``chetaev.gni.__version__``."""

__version__ = "0.1.0"
