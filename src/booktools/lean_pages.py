"""Lighter pages for a phone (issue 42): what a page carries that neither the reader nor the audit needs.

A Sphinx extension (``sphinx: extra_extensions`` in _config.yml):

* **code with fewer elements** — Pygments wraps every name, bracket and space of a code cell in its own
  ``<span>``; on 4.3 that was 3,400 of the page's 7,200 elements, all styled, laid out and kept in memory by
  a phone. After the build, :func:`unwrap_plain_tokens` leaves as plain text the tokens whose colour is the
  code block's own in every colour scheme (:func:`plain_token_classes` reads them from the built
  ``pygments.css``), so the page looks the same with about half the elements;
* **a description and an icon in every page's head** — search engines show the description under the link
  (:func:`description`: the page's first paragraph); the empty icon stops the browser asking the host for a
  ``/favicon.ico`` it does not have (a failed request in the console).
"""
from __future__ import annotations

import html
import re
from pathlib import Path

DESCRIPTION_CHARS = 110
"""About what a search result shows under a Chinese title."""
_TOKEN = re.compile(r'<span class="([a-z0-9]+)">([^<]*)</span>')
_PRE = re.compile(r"(<pre[^>]*>)(.*?)(</pre>)", re.S)
_RULE = re.compile(r'^html\[data-theme="(\w+)"\] \.highlight(?: \.([a-z0-9]+))? \{([^}]*)\}', re.M)
_PARAGRAPH = re.compile(r"<p[^>]*>(.*?)</p>", re.S)


def plain_token_classes(pygments_css: str) -> set[str]:
    """The Pygments token classes that look like plain code text in every colour scheme of ``pygments_css``:
    each scheme's rule for them sets only the colour, and that colour is the scheme's ``.highlight`` colour."""
    base: dict[str, str] = {}
    rules: dict[str, dict[str, str]] = {}
    for scheme, token, body in _RULE.findall(pygments_css):
        props = dict((k.strip(), v.strip().lower()) for k, v in
                     (p.split(":", 1) for p in body.split(";") if ":" in p))
        if not token:
            base[scheme] = props.get("color", "")
        else:
            rules.setdefault(token, {})[scheme] = props
    plain = set()
    for token, by_scheme in rules.items():
        if base and set(by_scheme) == set(base) and all(
                set(props) == {"color"} and props["color"] == base[scheme] for scheme, props in by_scheme.items()):
            plain.add(token)
    return plain


def unwrap_plain_tokens(page: str, plain: set[str]) -> str:
    """``page`` with every ``<span class="T">text</span>`` of a ``<pre>`` whose T is in ``plain`` left as
    its text (the characters stay exactly as they were)."""
    def strip(block: re.Match) -> str:
        body = _TOKEN.sub(lambda t: t.group(2) if t.group(1) in plain else t.group(0), block.group(2))
        return block.group(1) + body + block.group(3)

    return _PRE.sub(strip, page)


def description(body: str, limit: int = DESCRIPTION_CHARS) -> str:
    """The page's first paragraph of prose (12 characters or more) as plain text, cut after its last
    sentence that ends within ``limit`` characters (else at ``limit``, with an ellipsis)."""
    for m in _PARAGRAPH.finditer(body):
        text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", m.group(1)))).strip()
        if len(text) < 12:  # a caption-like line, not a paragraph
            continue
        if len(text) <= limit:
            return text
        cut = max(text.rfind(mark, 0, limit) for mark in "。；！？")
        return text[:cut + 1] if cut > 0 else text[:limit - 1] + "…"
    return ""


def _page_context(app, pagename, templatename, context, doctree) -> None:
    head = '<link rel="icon" href="data:," />\n'
    text = description(context.get("body", "")) or context.get("title", "")
    text = re.sub(r"<[^>]+>", "", html.unescape(text))
    if text:
        head += f'<meta name="description" content="{html.escape(text, quote=True)}" />\n'
    context["metatags"] = context.get("metatags", "") + head


def _build_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    css = out / "_static" / "pygments.css"
    plain = plain_token_classes(css.read_text(encoding="utf-8")) if css.is_file() else set()
    if not plain:
        return
    for path in out.rglob("*.html"):
        if "_static" in path.parts:
            continue
        page = path.read_text(encoding="utf-8")
        lean = unwrap_plain_tokens(page, plain)
        if lean != page:
            path.write_text(lean, encoding="utf-8")


def setup(app):
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _build_finished, priority=900)  # after pydata-sphinx-theme writes pygments.css
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
