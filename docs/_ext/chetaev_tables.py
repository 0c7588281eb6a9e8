"""Tiny Sphinx extension: tables computed from the code at build time.

``.. chetaev-tableaux-properties::`` inserts the properties table of every
Runge–Kutta family from :func:`chetaev.rktableaux.properties_table`, so the
documentation shows what the code computes, never a stored claim.
"""

from __future__ import annotations

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
    return {"parallel_read_safe": True, "version": "0.1"}
