"""Tiny Sphinx extension: tables computed from the code at build time.

``.. chetaev-tableaux-properties::`` inserts the properties table of every
Runge–Kutta family from :func:`chetaev.rktableaux.properties_table`, so the
documentation shows what the code computes, never a stored claim.
"""

from __future__ import annotations

import re

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList


class TableauxProperties(Directive):
    has_content = False

    def run(self) -> list[nodes.Node]:
        from chetaev.rktableaux import properties_table

        text = properties_table()
        container = nodes.container()
        self.state.nested_parse(StringList(text.splitlines(), source="properties_table"),
                                self.content_offset, container)
        return container.children


def setup(app):
    app.add_directive("chetaev-tableaux-properties", TableauxProperties)
    # numpydoc also listens to this event; run after it (priority > 500).
    app.connect("autodoc-process-docstring", escape_bars, priority=600)
    return {"parallel_read_safe": True, "version": "0.1"}


# --- docstrings: |x| is a norm in our docstrings, never an RST substitution -----------------

_CODE_SPAN = re.compile(r"(``.+?``|:\w+:`.+?`|`.+?`)")


def _escape_line(line: str) -> str:
    parts = _CODE_SPAN.split(line)
    for k in range(0, len(parts), 2):  # even parts are outside code spans
        parts[k] = re.sub(r"(?<!\\)\|", r"\\|", parts[k])
    return "".join(parts)


def escape_bars(app, what, name, obj, options, lines: list[str]) -> None:
    """Escape ``|`` outside literal blocks, code spans and tables in autodoc docstrings.

    The docstrings write norms and absolute values as ``|x|``, which reStructuredText would
    read as a substitution reference.
    """
    literal_indent: int | None = None
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if literal_indent is not None:
            if not stripped or indent > literal_indent:
                continue
            literal_indent = None
        grid_row = stripped.startswith("|") and stripped.endswith("|") and stripped.count("|") > 2
        table_row = stripped.startswith(("+-", "+=")) or grid_row
        if table_row or stripped.startswith((">>>", "...")):
            continue
        if "|" in line:
            lines[i] = _escape_line(line)
        if stripped.endswith("::") or stripped.startswith(".. math::") or stripped.startswith(
                ".. code-block::"):
            literal_indent = indent
