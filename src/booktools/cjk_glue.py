"""No Chinese punctuation at the start of a rendered line after a formula, a code name or a link.

MathJax draws an inline formula as an inline block, and Sphinx keeps an inline code name on one line
(``span.pre {white-space: nowrap}``); Chromium breaks a line right after either, even before “），” or “。”, which
Chinese typesetting never puts at a line's start (measured before this module: 60 such line starts over the
chapters, preface and glossary at 390 and 1280 px). This transform wraps each such element together with the
closing punctuation that follows it in a ``<span class="bl-glue">`` that book/_static/text.css keeps on one line.
Plain text is left to the browser, whose line breaking already keeps closing punctuation off a line's start.
"""
from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform

__all__ = ["CLOSING", "GLUED", "glue", "GlueFormulaPunctuation", "setup"]

CLOSING = "，。、；：！？）」』”’》〉】…%"
"""Characters a line must not start with (the book's Chinese closing punctuation)."""

GLUED = (nodes.math, nodes.literal, nodes.reference, nodes.image, addnodes.pending_xref)
"""Inline elements after which a browser may break before closing punctuation."""


def glue(tree: nodes.Node) -> int:
    """Wrap every inline formula, code name or link of ``tree`` followed by closing punctuation with that
    punctuation; return how many were wrapped."""
    wrapped = 0
    for node in list(tree.findall(lambda n: isinstance(n, GLUED))):
        parent = node.parent
        if isinstance(parent, nodes.inline) and "bl-glue" in parent["classes"]:
            continue
        if parent is None:
            continue
        index = parent.index(node)
        after = parent[index + 1] if index + 1 < len(parent) else None
        if not isinstance(after, nodes.Text):
            continue
        text = str(after)
        run = len(text) - len(text.lstrip(CLOSING))
        if run == 0:
            continue
        box = nodes.inline("", "", classes=["bl-glue"])
        parent.remove(node)
        box += node
        box += nodes.Text(text[:run])
        parent.insert(index, box)
        rest = text[run:]
        if rest:
            parent.replace(after, nodes.Text(rest))
        else:
            parent.remove(after)
        wrapped += 1
    return wrapped


class GlueFormulaPunctuation(SphinxTransform):
    """Apply :func:`glue` to each document after parsing."""

    default_priority = 700

    def apply(self, **kwargs: Any) -> None:
        glue(self.document)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_transform(GlueFormulaPunctuation)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
