"""The version of chetaev-dsocs: the one source read by setuptools (pyproject
``[tool.setuptools.dynamic]``) and exported as ``chetaev.dsocs.__version__``."""

__version__ = "0.1.0"
