"""A small Sphinx extension for the page a reader meets (registered in _config.yml,
`sphinx: extra_extensions`); it changes how the book renders, never what the notebooks hold.

* **No space between Chinese characters.** The Markdown breaks Chinese lines, and HTML renders each
  break as a space ("。 本书"). `CJKSpaces` removes ASCII whitespace between two CJK characters
  (ideographs, CJK punctuation, full-width forms) in prose: it reads a text block (paragraph, title,
  list item's paragraph, table cell ...) across its inline children (so "中文\n**粗体**" is joined
  too) and leaves code, literals, math and raw HTML alone; a formula or a literal counts as a
  non-CJK character, so "的 $x$ 值" keeps its spaces. It runs when a page is read, so titles, the
  tables of contents and the search index see the same text as the page.
* Tables are marked up by `booktools.tables` (every table by one rule: cells by their length, words
  kept whole, a card per row on a phone).

* **Every search term finds the pages that use it.** `index_search_terms` looks each word of
  book/_search_terms.txt (`booktools.search_terms`: the glossary's terms and the chapter titles' phrases)
  up in a page's text and lists the ones it finds as the page's keywords (`<meta name="keywords">`), which
  Sphinx's search index takes as they are: jieba cuts text node by node and may cut a term apart
  (学习率 in 的学习率会, 梯度累积 inside 原文的梯度累积步数), the search page looks up whole words only.
* **The theme as a reader meets it** (sphinx-book-theme 1.3 on pydata-sphinx-theme 0.17). `THEME_OPTIONS`
  empties pydata's top bar: it held a second search box at desk width, and its hidden ☰ and page-contents
  buttons came first in the page, so both themes' scripts (`document.querySelector(".primary-toggle")`)
  bound to them and the visible buttons opened nothing. `one_script_each` drops the second copy of each
  inline script Sphinx 7.4 writes twice (sphinx-thebe's `const THEBE_JS_URL` threw on every page).
  book/_templates/ holds the toggles with Chinese labels and the page head without fontawesome.js.

`booktools.layout` measures the first in the built pages (tests/test_page_prose.py); tests/test_page_nav.py
and tests/test_page_search.py check the rest in Chromium.
"""
from __future__ import annotations

import gettext
import html
import re

from docutils import nodes
from docutils.transforms import Transform
from sphinx.locale import get_translator

from booktools import reader_page
from booktools.layout import CJK_CLASS

CJK_GAP = re.compile(rf"(?<=[{CJK_CLASS}])[ \t\r\n]+(?=[{CJK_CLASS}])")
PLACEHOLDER = "\ufffc"  # stands for a literal or a formula: not CJK
# nodes whose text is not prose: code, literals, math, raw output
NOT_PROSE = (nodes.FixedTextElement, nodes.literal, nodes.math, nodes.raw, nodes.comment,
             nodes.substitution_definition, nodes.target, nodes.system_message)


def _excluded(node: nodes.Node, stop: nodes.Node) -> bool:
    while node is not None and node is not stop:
        if isinstance(node, NOT_PROSE):
            return True
        node = node.parent
    return isinstance(stop, NOT_PROSE)


def join_cjk(block: nodes.Element) -> int:
    """Remove ASCII whitespace between CJK characters in the prose Text nodes under `block`;
    return how many gaps were closed."""
    texts = list(block.findall(nodes.Text))
    if not texts:
        return 0
    editable = [not _excluded(t.parent, block) for t in texts]
    joined, starts = [], []
    pos = 0
    for t, ok in zip(texts, editable):
        s = str(t)
        starts.append(pos)
        joined.append(s if ok else PLACEHOLDER * len(s))
        pos += len(s)
    text = "".join(joined)
    drop = set()
    gaps = 0
    for m in CJK_GAP.finditer(text):
        gaps += 1
        drop.update(range(m.start(), m.end()))
    if not drop:
        return 0
    for t, ok, start in zip(texts, editable, starts):
        s = str(t)
        if not ok or not any(start + i in drop for i in range(len(s))):
            continue
        new = "".join(ch for i, ch in enumerate(s) if start + i not in drop)
        # by identity: Text nodes are strings, and list.index()/remove() would find the first
        # equal one (say, another "\n" soft break of the same paragraph)
        parent = t.parent
        i = next(k for k, child in enumerate(parent.children) if child is t)
        if new:
            parent.children[i] = nodes.Text(new)
            parent.children[i].parent = parent
        else:
            del parent.children[i]
    return gaps


class CJKSpaces(Transform):
    """Join Chinese text that the Markdown source broke across lines (see the module docstring)."""
    default_priority = 880  # after the parsers' own transforms, before Sphinx collects titles

    def apply(self, **kwargs) -> None:
        for block in list(self.document.findall(nodes.TextElement)):
            # the outermost text element only (a paragraph, not each emphasis inside it)
            if isinstance(block.parent, nodes.TextElement) or _excluded(block, None):
                continue
            join_cjk(block)


# --- search ---------------------------------------------------------------------------------------
RAW_SKIP = re.compile(r"<(style|script)\b.*?</\1>", re.IGNORECASE | re.DOTALL)
RAW_BLOCK = re.compile(r"</?(?:p|div|br|li|ul|ol|tr|td|th|table|h[1-6]|pre|section)\b[^>]*>", re.IGNORECASE)
RAW_TAG = re.compile(r"<[^<]+?>")


def page_text(node: nodes.Node) -> str:
    """What a reader reads of `node`: inline pieces joined as one line ("显存**占用**" → 显存占用), blocks
    apart, raw HTML without its tags, scripts and styles (as Sphinx's indexer reads it), comments left out."""
    if isinstance(node, nodes.comment):
        return ""
    if isinstance(node, nodes.raw):
        if "html" not in node.get("format", "").split():
            return ""
        return html.unescape(RAW_TAG.sub("", RAW_BLOCK.sub("\n", RAW_SKIP.sub("", node.astext()))))
    if isinstance(node, nodes.Text):
        return node.astext()
    return ("" if isinstance(node, nodes.TextElement) else "\n").join(page_text(c) for c in node.children)


def index_search_terms(app, doctree: nodes.document, docname: str) -> None:
    """List the search words the page uses as its keywords, which Sphinx indexes as they are."""
    from booktools.search_terms import read_words

    if app.builder.format != "html" or not app.builder.search:
        return
    text = page_text(doctree)
    used = [w for w in read_words() if w in text]
    if used:
        doctree.append(nodes.meta(name="keywords", content=", ".join(used)))


# --- the theme -------------------------------------------------------------------------------------
THEME_OPTIONS = {
    # pydata-sphinx-theme 0.17 fills its top bar with a search box unless told otherwise (navbar_persistent);
    # sphinx-book-theme 1.3 keeps its own bar and a search box in the book's contents. Empty, the top bar is
    # not drawn, nor its hidden ☰ and page-contents buttons that the themes' scripts bound to.
    "navbar_persistent": [],
    "search_bar_text": "搜索本书……",
    "toc_title": "本页内容",          # the page-contents column's heading ("目录" names the book's contents)
}


def theme_options(app, config) -> None:
    """Set THEME_OPTIONS beside Jupyter Book's own theme options (a `html_theme_options` key in
    _config.yml would replace them all), and the colour mode pages start in."""
    config.html_theme_options.update(THEME_OPTIONS)
    # the theme's script checks the mode the page names: without one it logs "Got invalid theme mode"
    config.html_context.setdefault("default_mode", "auto")


# What the themes and Sphinx say in English on a zh_CN page because their zh/zh_CN catalogs lack it: the
# links beside headings and definitions (title), the colour-mode switch, the launch buttons (name, logo).
# Given as a last fallback, so that a catalog that one day translates a string keeps its own word.
UI_STRINGS: dict[str, dict[str, str]] = {
    "sphinx": {"Link to this heading": "链接到本标题", "Link to this definition": "链接到本定义",
               "Link to this image": "链接到本图", "Link to this equation": "链接到本公式",
               "Link to this term": "链接到本术语", "Link to this table": "链接到本表",
               "Link to this code": "链接到本代码", "Color mode": "颜色模式", "System Settings": "跟随系统"},
    "booktheme": {"Launch on": "启动于", "Launch interactive content": "启动交互版本", "logo": "图标"},
}


class _Fallback(gettext.NullTranslations):
    """The last link of a translator's chain: ``strings`` where the catalogs before it had nothing."""

    def __init__(self, strings: dict[str, str]) -> None:
        super().__init__()
        self._strings = strings

    def gettext(self, message: str) -> str:
        return self._strings.get(message, message)


def chinese_ui_strings(app) -> None:
    """Add :data:`UI_STRINGS` behind each catalog's own zh_CN translations (the themes load theirs first)."""
    if not str(app.config.language).startswith("zh"):
        return
    for catalog, strings in UI_STRINGS.items():
        get_translator(catalog).add_fallback(_Fallback(strings))


def one_script_each(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Write each inline script once. Sphinx 7.4 registers an extension's inline script twice when the
    extension adds it after the builder started (sphinx-thebe, sphinx-togglebutton): once named None, once
    "", which its own check takes for two; the second `const THEBE_JS_URL` threw on every page."""
    files = context.get("script_files")
    if not isinstance(files, list):
        return
    seen, unique = set(), []
    for js in files:
        key = (js.filename or "", js.priority, tuple(sorted(js.attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    files[:] = unique  # in place: the builder resets this list from its own copy for every page


HIDDEN_CELL_LABEL = ('aria-label="Toggle hidden content"', 'aria-label="显示或隐藏代码"')
"""myst-nb writes the toggle of a collapsed (hide-input) cell with an English name and no hook to change it."""


def chinese_hidden_cell_label(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Name each collapsed cell's toggle in Chinese (:data:`HIDDEN_CELL_LABEL`)."""
    if isinstance(context.get("body"), str):
        context["body"] = context["body"].replace(*HIDDEN_CELL_LABEL)


def setup(app):
    app.add_transform(CJKSpaces)
    app.connect("config-inited", theme_options)
    app.connect("builder-inited", chinese_ui_strings)
    app.connect("doctree-resolved", index_search_terms)
    app.connect("html-page-context", one_script_each, priority=900)
    app.connect("html-page-context", chinese_hidden_cell_label)
    reader_page.setup(app)   # section anchors from titles, the header's PDF entry, the search snippets
    # env_version: bump it when a transform changes, so an incremental build re-reads every page
    return {"version": "1", "env_version": 2, "parallel_read_safe": True, "parallel_write_safe": True}
