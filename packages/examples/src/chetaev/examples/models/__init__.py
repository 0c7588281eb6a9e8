"""One module per model of the papers.

Each model module exposes its parameters (the paper's defaults; where a paper is silent, the
defaults the project proposes, marked as such in the docstring), standard
initial conditions, every formulation the project supports (Lagrangian, Hamiltonian,
Lie-group, reduced), its invariants, and the exact solution or reference ODE where known.
"""

import importlib
import pkgutil

__all__ = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))

for _name in __all__:
    importlib.import_module(f"{__name__}.{_name}")
