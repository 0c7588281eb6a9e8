"""The version of chetaev-examples: the one source read by setuptools (pyproject
``[tool.setuptools.dynamic]``) and exported as ``chetaev.examples.__version__``."""

__version__ = "0.1.0"
