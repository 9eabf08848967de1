"""What a reader meets around the text: section anchors, the header's PDF entry and the search page's
snippets (a Sphinx extension, set up by `booktools.sphinxext`).

* **Meaningful section anchors.** docutils makes a section's id from its title in ASCII only, so a Chinese
  heading ("梯度累积：用时间换显存") got a counter (`#id3`, `#id11`), which says nothing in a shared link and
  moves when a heading is added above it, and a mixed one kept only its Latin letters
  ("在小模型上测量：哪一项随 B 增长？" → `#b`). `SectionAnchors` gives such a section the id `section_slug`
  makes of its title ("梯度累积-用时间换显存"; a number in front stays: "4-3-1-…"); a section with a label
  (`(name)=`) or an ASCII title (the API page's module names) keeps the id it has. The pages' own tables of contents, the heading links
  and the cross-references all read the new id.
* **The header's 「.pdf」 entry opens the book's PDF** (`batch-size-book.pdf`, written into the built site by
  `booktools.pdf`), instead of sphinx-book-theme's `window.print()` of the page on screen.
* **No value dumps on the API page.** autodoc writes a constant's value and a parameter's default into the
  signature (`findings: Sequence[Finding] = (Finding(key='merrill2025critical', …), …)`: screens of one run
  of text on a phone); `short_values` keeps one of at most LONG_VALUE characters, drops a longer constant's
  value (its docstring says what it holds) and writes a longer default as "…".
* **Search snippets** (book/_js/search.js, on the search page only): the matched sentence in plain text,
  and no highlights carried to the next page.
"""
from __future__ import annotations

import re
import unicodedata

from docutils import nodes
from docutils.transforms import Transform
from sphinx import addnodes

from booktools.layout import CJK_CLASS

AUTO_ID = re.compile(r"^id\d+$")
CJK = re.compile(f"[{CJK_CLASS}]")
NOT_WORD = re.compile(r"[^\w]+")
PDF_NAME = "batch-size-book.pdf"   # booktools.pdf.PDF_NAME (not imported: that module loads a browser driver)
SEARCH_JS = "search.js"
LONG_VALUE = 60   # characters of " = value" a constant's signature may show


def section_slug(title: str) -> str:
    """The anchor of a section titled `title`: its words (Chinese characters, letters, digits) lower-cased
    and joined by single hyphens; every other run of characters (spaces, punctuation, full-width marks)
    becomes one hyphen ("4.3 批大小对显存占用的影响" → "4-3-批大小对显存占用的影响")."""
    text = unicodedata.normalize("NFKC", title).lower().replace("_", " ")
    return NOT_WORD.sub("-", text).strip("-") or "section"


class SectionAnchors(Transform):
    """Give each section without a label whose title holds Chinese (or whose ids are all docutils' counters,
    `id3`) the anchor of its title."""
    default_priority = 300   # after docutils has propagated explicit targets (260) onto sections

    def apply(self, **kwargs) -> None:
        doc = self.document
        for section in list(doc.findall(nodes.section)):
            ids = section["ids"]
            title = next(iter(section.findall(nodes.title)), None)
            if not ids or title is None:
                continue
            if any(doc.nametypes.get(n) for n in section["names"]):   # a label names it: its id comes first
                section["ids"] = sorted(ids, key=lambda i: bool(AUTO_ID.match(i)))
                continue
            # the ids docutils made from the title (a counter, or its Latin letters); others stay (an API
            # section also carries its module's target, #module-batchlab.formulas)
            implicit = {doc.nameids.get(n) for n in section["names"]}
            made = [i for i in ids if AUTO_ID.match(i) or i in implicit]
            if not made or not (all(AUTO_ID.match(i) for i in made) or CJK.search(title.astext())):
                continue   # an ASCII title's id is its words already
            base = section_slug(title.astext())
            new, n = base, 1
            while new in doc.ids:
                n += 1
                new = f"{base}-{n}"
            for old in made:
                doc.ids.pop(old, None)
                for name, ref in list(doc.nameids.items()):
                    if ref == old:
                        doc.nameids[name] = new
            section["ids"] = [new] + [i for i in ids if i not in made]
            doc.ids[new] = section


def short_values(app, domain: str, objtype: str, content: nodes.Element) -> None:
    """Drop a Python constant's or attribute's value from its signature, and shorten a parameter's default
    value to "…", when it is longer than LONG_VALUE characters."""
    if domain != "py":
        return
    for signature in content.parent.findall(addnodes.desc_signature):
        for annotation in list(signature.findall(addnodes.desc_annotation)):
            text = annotation.astext().strip()
            if objtype in ("data", "attribute") and text.startswith("=") and len(text) > LONG_VALUE:
                annotation.parent.remove(annotation)
        for default in list(signature.findall(nodes.inline)):
            if "default_value" in default["classes"] and len(default.astext()) > LONG_VALUE:
                default.children = []
                default += nodes.Text("…")


def pdf_entry(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    """The download menu's 「.pdf」 opens the book's PDF instead of printing the page."""
    pathto = context.get("pathto")
    for group in context.get("header_buttons") or []:
        for i, button in enumerate(group.get("buttons") or []):
            if button.get("label") == "download-pdf-button":
                group["buttons"][i] = {"type": "link", "url": pathto(PDF_NAME, 1), "text": ".pdf",
                                       "tooltip": "下载全书 PDF", "icon": "fas fa-file-pdf",
                                       "label": "download-pdf-button"}


def search_script(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    """The search page's snippet rules (book/_js/search.js), after Sphinx's searchtools.js."""
    if pagename == "search":
        app.add_js_file(SEARCH_JS, priority=600)


def setup(app) -> None:
    """Register the anchors, the short values, the PDF entry and the search script (called by booktools.sphinxext.setup)."""
    app.add_transform(SectionAnchors)
    app.connect("object-description-transform", short_values)
    # after sphinx-book-theme writes its header buttons (priority 501)
    app.connect("html-page-context", pdf_entry, priority=510)
    app.connect("html-page-context", search_script)
