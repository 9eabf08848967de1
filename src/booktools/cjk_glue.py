"""No Chinese punctuation at the start of a rendered line after a formula.

MathJax draws an inline formula as an inline block, and a browser may break a line right after one, even before
“），” or “。”, which Chinese typesetting never puts at a line's start (seen in 4.1–4.6: “）。” and “，” opening a
line after $B$, $m$…). This transform wraps each inline formula with the closing punctuation that follows it in a
``<span class="bl-glue">`` that book/_static/text.css keeps on one line. Text without a formula is left to the
browser, whose line breaking already keeps closing punctuation off a line's start.
"""
from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform

__all__ = ["CLOSING", "glue", "GlueFormulaPunctuation", "setup"]

CLOSING = "，。、；：！？）」』”’》〉】…%"
"""Characters a line must not start with (the book's Chinese closing punctuation)."""


def glue(tree: nodes.Node) -> int:
    """Wrap every inline formula of ``tree`` followed by closing punctuation with that punctuation; return how
    many were wrapped."""
    wrapped = 0
    for math in list(tree.findall(nodes.math)):
        parent = math.parent
        if parent is None:
            continue
        index = parent.index(math)
        after = parent[index + 1] if index + 1 < len(parent) else None
        if not isinstance(after, nodes.Text):
            continue
        text = str(after)
        run = len(text) - len(text.lstrip(CLOSING))
        if run == 0:
            continue
        box = nodes.inline("", "", classes=["bl-glue"])
        parent.remove(math)
        box += math
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
