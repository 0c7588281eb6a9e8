"""Sphinx configuration for the chetaev documentation (``nox -s docs``)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "_ext"))

project = "chetaev"
author = "the chetaev developers"
copyright = "2026, the chetaev developers"


def _release() -> str:
    """The version of the packages (they share one), from the single source of one of them."""
    namespace: dict[str, str] = {}
    source = HERE.parent / "packages" / "liegroups" / "src" / "chetaev" / "liegroups"
    exec((source / "_version.py").read_text(encoding="utf-8"), namespace)
    return namespace["__version__"]


release = version = _release()

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "chetaev_tables",
    "chetaev_mathjax",
]

# MathJax is served from the packaged copy (docs/_ext/chetaev_mathjax.py sets mathjax_path):
# the pages render their math offline. Output as SVG; no menu, no external requests.
mathjax3_config = {"options": {"enableMenu": False}, "loader": {"load": []}}

# The gallery: every docs/examples/plot_*.py runs at build time; its figures are embedded.
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "write_computation_times": False,
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "show_memory": False,
    "show_signature": False,
}

exclude_patterns = ["_build", "_scripts", "examples/README.txt"]
templates_path: list[str] = []
html_static_path = ["_static"]
html_theme = "alabaster"

autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
suppress_warnings = ["ref.python"]

# numpydoc drops a docstring section it does not know (e.g. "Arguments", "Equations") from
# the page and only emits a Python UserWarning, which sphinx -W does not see: make it fail
# the build, so no parameter list or equation reference silently disappears.
import warnings  # noqa: E402

warnings.filterwarnings("error", message="Unknown section", category=UserWarning)

# Pages that document a package which is not installed (not yet in packages/) are left out, so
# the site builds at every stage of the project.
import importlib.util  # noqa: E402

_API_PAGES = {
    "liegroups": "chetaev.liegroups",
    "rktableaux": "chetaev.rktableaux",
    "discrete_lagrangian": "chetaev.discrete_lagrangian",
    "nh_integrators": "chetaev.nh_integrators",
    "gni": "chetaev.gni",
    "dsocs": "chetaev.dsocs",
    "examples": "chetaev.examples",
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


for _page, _module in _API_PAGES.items():
    if not _installed(_module):
        exclude_patterns.append(f"api/{_page}.rst")
# Topic pages written with a package's methods follow the same rule.
_TOPIC_PAGES = {
    "discretization_maps": "chetaev.discrete_lagrangian.discretization_maps",
    "gni_vs_prk": "chetaev.gni",
    "tableaux": "chetaev.rktableaux",
}
for _page, _module in _TOPIC_PAGES.items():
    if not _installed(_module):
        exclude_patterns.append(f"{_page}.rst")
