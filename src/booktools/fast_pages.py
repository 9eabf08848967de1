"""A chapter page that paints before its scripts run (issue 42: Lighthouse's mobile audit).

A Sphinx extension (``sphinx: extra_extensions`` in _config.yml), run after the build has written every
page. On a phone (Lighthouse's mobile preset: slow 4G, a CPU 4× slower than a laptop's) the theme's page
spent its first seconds on three things that this undoes:

* **fifteen stylesheets, one imported by another** — each a request the first paint waits for, on a link
  with a 150 ms round trip. :func:`merge_stylesheets` writes them, in order, into one file (named by its
  content, so a reader's browser keeps it from page to page) and the page links that one;
* **eleven scripts in the head** — each stops the browser reading the page until it has arrived and run.
  :func:`defer_scripts` marks every one ``defer``: they arrive while the page is read and run after it, in
  the same order as before (an inline script becomes a ``data:`` script so that it keeps its place in that
  order);
* **the whole page laid out before the first screen is shown** — 3,000–5,500 elements, most of them far
  below the screen. book/_static/page.css gives each section ``content-visibility: auto``: the browser lays
  out a section when it comes near the screen. The theme's script then asked every code block whether it
  scrolls sideways (to make it reachable by Tab), which lays out the whole page again; :func:`patch_theme_js`
  makes it ask only the blocks on screen, and again whenever a section comes into view.
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import posixpath
import re
from pathlib import Path

_LINK = re.compile(r'[ \t]*<link\b(?=[^>]*\brel="stylesheet")(?=[^>]*\bhref="([^"]+)")(?:(?=[^>]*\bmedia="([^"]+)"))?[^>]*>\n?')
_SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script>", re.S)
_URL = re.compile(r"""url\(\s*(['"]?)([^'")]+)\1\s*\)""")
_IMPORT = re.compile(r"""@import\s+(?:url\()?\s*['"]([^'"]+)['"]\s*\)?\s*;""")

THEME_PATCHES = Path(__file__).with_name("js") / "theme_patches.json"
"""The pinned theme's script and the replacements :func:`patch_theme_js` makes in it (old, new)."""
_LITERALS = re.compile(r"""\s*(?:(?:let|var|const)\s+\w+\s*=\s*(?:'[^'\\]*'|"[^"\\]*"|true|false|-?\d+(?:\.\d+)?)\s*;?\s*)+""")
"""An inline script that only names values (sphinx-togglebutton's hints, sphinx-thebe's addresses): it needs
nothing and is read by scripts as they start (togglebutton.js looks for ``togglebuttonSelector`` once it
runs), so it stays where it is and runs at once."""
_SEARCH_PAGE = re.compile(r'<script\b[^>]*src="[^"]*searchtools\.js')
"""The search page keeps its scripts as Sphinx orders them: searchtools.js starts searching at
DOMContentLoaded and the book's search.js (booktools.reader_page) must be ready before it."""
_FIGURE = re.compile(r"<figure\b[^>]*>.*?</figure>", re.S)
_CAPTION = re.compile(r"<figcaption>(.*?)</figcaption>", re.S)
_ALT_IS_SRC = re.compile(r'<img\b[^>]*\bsrc="([^"]+)"[^>]*\balt="(\1)"[^>]*>')
_IMG = re.compile(r"<img\b([^>]*)>")


def _local(href: str) -> str | None:
    """``href`` without its query, or None for another site's or a data: address."""
    if re.match(r"^[a-z]+:", href) or href.startswith("//"):
        return None
    return href.split("?")[0].split("#")[0]


def _css_text(path: Path, static: Path, seen: frozenset = frozenset()) -> str:
    """The stylesheet ``path`` with its ``@import``\\ s written in place and every relative ``url()`` made
    relative to ``static`` (where the merged file lives)."""
    text = path.read_text(encoding="utf-8")
    here = path.parent

    def rebase(m: re.Match) -> str:
        quote, target = m.group(1), m.group(2).strip()
        if _local(target) is None or target.startswith("/"):
            return m.group(0)
        moved = posixpath.relpath((here / target).resolve().as_posix(), static.resolve().as_posix())
        return f"url({quote}{moved}{quote})"

    def inline(m: re.Match) -> str:
        target = (here / m.group(1)).resolve()
        if target in seen or not target.is_file():
            raise ValueError(f"{path.name}：@import {m.group(1)} 找不到或循环引用")
        return _css_text(target, static, seen | {target})

    # the imported sheets are rebased on their own folder: keep them out of this one's url() pass
    imported: list[str] = []

    def hold(m: re.Match) -> str:
        imported.append(inline(m))
        return f"\0{len(imported) - 1}\0"

    text = _URL.sub(rebase, _IMPORT.sub(hold, text))
    return re.sub(r"\0(\d+)\0", lambda m: imported[int(m.group(1))], text)


SHEET_MARK = "/* bl-sheet: {} */"
"""The line before each sheet's part of a merged stylesheet (:func:`without_sheet` finds the parts by it)."""


def without_sheet(merged: str, name: str) -> str:
    """A merged stylesheet without the part that came from the sheet named ``name`` (``page.css``): what a page
    looks like without that file (the contrary cases of the page checks)."""
    marks = list(re.finditer(r"^/\* bl-sheet: (\S+) \*/$", merged, re.M))
    for i, m in enumerate(marks):
        if m.group(1) == name:
            end = marks[i + 1].start() if i + 1 < len(marks) else len(merged)
            return merged[:m.start()] + merged[end:]
    raise ValueError(f"合并的样式表里没有 {name}")


def merge_stylesheets(page: str, page_path: Path, out: Path, written: dict[tuple, str]) -> str:
    """``page`` with its head's stylesheet links replaced by one link to their merged copy in
    ``out/_static`` (written once per distinct list of sheets; ``written`` maps each list to its file name)."""
    head_end = page.find("</head>")
    head = page[:head_end]
    links = [(m, _local(m.group(1))) for m in _LINK.finditer(head)]
    links = [(m, href) for m, href in links if href is not None]
    if len(links) < 2:
        return page
    static = out / "_static"
    sheets = tuple(((page_path.parent / href).resolve(), m.group(2) or "") for m, href in links)
    if sheets not in written:
        parts = []
        for sheet, media in sheets:
            css = re.sub(r"^@charset[^;]*;", "", _css_text(sheet, static))
            parts.append(SHEET_MARK.format(sheet.name) + "\n" + (f"@media {media} {{\n{css}\n}}" if media else css))
        merged = "\n".join(parts)
        name = f"bl-{hashlib.sha256(merged.encode()).hexdigest()[:12]}.css"
        (static / name).write_text(merged, encoding="utf-8")
        written[sheets] = name
    href = posixpath.relpath((static / written[sheets]).as_posix(), page_path.parent.as_posix())
    start = links[0][0].start()
    rest = _LINK.sub(lambda m: "" if _local(m.group(1)) is not None else m.group(0), head[start:])
    new_head = head[:start] + f'<link rel="stylesheet" href="{href}" />\n' + rest
    return new_head + page[head_end:]


def defer_scripts(page: str) -> str:
    """``page`` with every classic script that would stop the browser reading it marked ``defer``; an inline
    one becomes a ``data:`` script so that it still runs after those before it and before those after it.
    Scripts already ``async``, modules and data blocks (a ``type`` other than JavaScript) are left as they are,
    and so is an inline script before the first script file (it needs nothing loaded and may have to run before
    the first paint: the theme's, which sets the light or dark colours the reader chose) or one that only names
    values (:data:`_LITERALS`)."""
    seen_file = False

    def one(m: re.Match) -> str:
        nonlocal seen_file
        attrs, body = m.group(1), m.group(2)
        kind = re.search(r'type="([^"]+)"', attrs)
        if kind and kind.group(1) not in ("text/javascript", "application/javascript"):
            return m.group(0)
        if re.search(r"\b(async|defer)\b", attrs):
            return m.group(0)
        if "src=" in attrs:
            seen_file = True
            return f"<script defer{attrs}>{body}</script>"
        if not body.strip() or not seen_file or _LITERALS.fullmatch(body):
            return m.group(0)
        data = base64.b64encode(body.encode("utf-8")).decode("ascii")
        return f'<script defer{attrs} src="data:text/javascript;base64,{data}"></script>'

    return _SCRIPT.sub(one, page)


def caption_alt(page: str) -> str:
    """``page`` with each captioned figure's image described by its caption (without its number) where the
    image's ``alt`` was only its file's address, as Sphinx writes it for an image with no description: a
    screen reader read the address aloud."""
    def one(m: re.Match) -> str:
        block = m.group(0)
        cap = _CAPTION.search(block)
        if not cap:
            return block
        text = re.sub(r'<span class="caption-number">.*?</span>', "", cap.group(1), flags=re.S)
        text = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", text))).strip()
        if not text:
            return block
        return _ALT_IS_SRC.sub(lambda i: i.group(0).replace(f'alt="{i.group(2)}"',
                                                            f'alt="{html.escape(text, quote=True)}"'), block)

    return _FIGURE.sub(one, page)


def patch_theme_js(out: Path) -> None:
    """Narrow the theme's sideways-scrolling check to the blocks on screen (:data:`THEME_PATCHES`); each
    replaced text must be found exactly once, else the build stops (a new theme version needs a look)."""
    spec = json.loads(THEME_PATCHES.read_text(encoding="utf-8"))
    path = out / spec["file"]
    text = path.read_text(encoding="utf-8")
    if all(new in text for _, new in spec["patches"]):
        return
    for old, new in spec["patches"]:
        if text.count(old) != 1:
            raise ValueError(f"{spec['file']} 里找不到 {old!r}：主题版本变了，请检查 {THEME_PATCHES.name}")
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")


def lazy_images(page: str) -> str:
    """``page`` with every image after its first second-level heading loaded only when the reader nears it
    (``loading="lazy"``) and decoded off the main thread; an image that says how it loads keeps that."""
    article = page.find("<article")
    start = page.find("<h2", article) if article >= 0 else -1
    if start < 0:
        return page
    def lazy(m: re.Match) -> str:
        attrs = m.group(1)
        added = ("" if re.search(r"\bloading=", attrs) else ' loading="lazy"') + \
            ("" if re.search(r"\bdecoding=", attrs) else ' decoding="async"')
        return f"<img{added}{attrs}>"

    return page[:start] + _IMG.sub(lazy, page[start:])


def speed_up(out: Path) -> None:
    """Every page of the built site ``out``: one stylesheet, scripts deferred, images below the first
    section lazy, figures described by their captions, the theme's script patched."""
    written: dict[tuple, str] = {}
    patch_theme_js(out)
    for path in out.rglob("*.html"):
        if "_static" in path.parts or "_sources" in path.parts:
            continue
        page = path.read_text(encoding="utf-8")
        fast = caption_alt(merge_stylesheets(page, path, out, written))
        if not _SEARCH_PAGE.search(fast):
            fast = lazy_images(defer_scripts(fast))
        if fast != page:
            path.write_text(fast, encoding="utf-8")


FIRST_SCRIPT = "nav.js"
"""The book's script that must run before the theme's (all are deferred): it drops the search terms that
sphinx_highlight.js, deferred, would otherwise mark on the page as soon as it runs (book/_js/nav.js, 4).
Registered here with a priority below Sphinx's own scripts (200), so it comes first."""


def _build_finished(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        speed_up(Path(app.outdir))


def setup(app):
    # after every other step that rewrites pages or the theme's files (trim_css: 950, lean_pages: 900)
    app.add_js_file(FIRST_SCRIPT, priority=150)
    app.connect("build-finished", _build_finished, priority=990)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
