"""One loader for the test modules of this directory that other tests read tables from.

The suite runs with ``--import-mode=importlib``, where test modules are not importable by
name; the registry (``test_protocol.py``) and the tests built on its tables
(``test_forces_protocol.py``, ``test_compiled_protocol.py``) are read by other tests through
:func:`sibling`, which executes each file once per process. ``conftest.py`` puts this
directory on ``sys.path`` so that tests can ``from _siblings import sibling``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["sibling"]


def sibling(filename: str) -> ModuleType:
    """The test module ``filename`` of this directory, executed once and cached.

    Parameters
    ----------
    filename : str
        A file name in ``integration-tests/``, e.g. ``"test_protocol.py"``.

    Returns
    -------
    types.ModuleType
        The module, registered in ``sys.modules`` under a private name (not the one pytest
        gives the same file when it collects it).
    """
    name = f"_chetaev_sibling_{Path(filename).stem}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(filename))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return module
