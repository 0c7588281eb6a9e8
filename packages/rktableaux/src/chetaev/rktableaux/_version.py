"""The version of chetaev-rktableaux: the one source read by setuptools (pyproject
``[tool.setuptools.dynamic]``) and exported as ``chetaev.rktableaux.__version__``."""

__version__ = "0.1.0"
