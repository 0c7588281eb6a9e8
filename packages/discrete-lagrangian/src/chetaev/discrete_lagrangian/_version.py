"""The version of chetaev-discrete-lagrangian: the one source read by setuptools (pyproject
``[tool.setuptools.dynamic]``) and exported as ``chetaev.discrete_lagrangian.__version__``."""

__version__ = "0.1.0"
