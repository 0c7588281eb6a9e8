"""Serve MathJax from a packaged copy, so the math renders offline (no CDN).

The copy comes from the ``django-static-mathjax`` wheel on PyPI (MathJax 3.2.2 as static
files, no dependencies; installed by ``nox -s docs``). At the end of an HTML build the
self-contained ``es5/tex-svg-full.js`` (every TeX extension built in, SVG output with its
own glyph paths: no font files and no further downloads) is copied to
``_static/mathjax/tex-svg-full.js``, which ``mathjax_path`` points to.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from sphinx.errors import ExtensionError

MATHJAX_FILE = "tex-svg-full.js"
MATHJAX_PATH = f"mathjax/{MATHJAX_FILE}"


def packaged_mathjax() -> Path:
    """Path of the packaged ``tex-svg-full.js``; an error says how to install it."""
    spec = importlib.util.find_spec("mathjax")
    if spec is not None and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            path = Path(root) / "static" / "mathjax" / "es5" / MATHJAX_FILE
            if path.is_file():
                return path
    raise ExtensionError(
        "MathJax is not installed: the documentation serves its own copy so that the math "
        "renders offline. Install it with `pip install django-static-mathjax` (or build with "
        "`nox -s docs`, which does).")


def _copy(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        target = Path(app.outdir) / "_static" / "mathjax"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(packaged_mathjax(), target / MATHJAX_FILE)


def setup(app):
    packaged_mathjax()  # fail early, with the remedy
    app.config.mathjax_path = MATHJAX_PATH
    app.connect("build-finished", _copy)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
