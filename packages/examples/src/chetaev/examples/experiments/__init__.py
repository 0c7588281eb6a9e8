"""One module per paper; each experiment function is registered with
:func:`chetaev.examples.experiment` when its module is imported (here, all of them)."""

import importlib
import pkgutil

__all__ = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))

for _name in __all__:
    importlib.import_module(f"{__name__}.{_name}")
