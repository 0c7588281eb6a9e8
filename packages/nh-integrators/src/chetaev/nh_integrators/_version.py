"""The version of chetaev-nh-integrators: the one source read by setuptools (pyproject
``[tool.setuptools.dynamic]``) and exported as ``chetaev.nh_integrators.__version__``."""

__version__ = "0.1.0"
