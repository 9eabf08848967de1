"""The theme's stylesheets trimmed to what the book uses (issue 42).

pydata-sphinx-theme's stylesheet carries all of Bootstrap: 397 KB (66 KB compressed) that block the first
paint of every page, 92 % of it rules for classes no page of the book has, and every rule is matched
against every element a phone lays out. After the build (a Sphinx extension, ``sphinx: extra_extensions``)
:func:`trim_site` rewrites the theme's stylesheets (:data:`THEME_CSS`) in place, keeping a rule when one of
its selectors can match: every class and id the selector requires appears in some page of the site or in
some script of ``_static`` (the theme's scripts add classes such as ``show`` at run time; any name a script
spells counts). Selectors that need no class (elements, attributes such as ``html[data-theme=dark]``), the
at-rules that hold no selectors (``@font-face``, ``@keyframes``) and the custom properties stay whole, so the
pages look as before in both colour schemes; the file names stay, so every page links the same file.
"""
from __future__ import annotations

import re
from pathlib import Path

import tinycss2

THEME_CSS = ("styles/pydata-sphinx-theme.css", "styles/sphinx-book-theme.css", "sphinx-design.min.css")
"""The theme's stylesheets under ``_static`` (the book's own, written for the book, are not trimmed)."""
SKIPPED_SCRIPTS = ("live", "mathjax")
"""Folders of ``_static`` whose scripts are not the theme's (the live runtime, MathJax): not read for names."""
_NAME = re.compile(r"[A-Za-z_][\w-]*")
_CLASS_ATTR = re.compile(r'\bclass="([^"]*)"')
_ID_ATTR = re.compile(r'\bid="([^"]*)"')
_SELECTOR_NAME = re.compile(r"([.#])((?:\\.|[\w-])+)")
_OPEN_ENDED = (":is(", ":where(", ":has(", ":host")


def used_names(html_dir: Path) -> set[str]:
    """Every class and id of the site's pages, and every name-like word of the scripts in ``_static``."""
    names: set[str] = set()
    for page in html_dir.rglob("*.html"):
        if "_static" in page.parts:
            continue
        text = page.read_text(encoding="utf-8", errors="replace")
        for attr in _CLASS_ATTR.findall(text):
            names.update(attr.split())
        names.update(_ID_ATTR.findall(text))
    static = html_dir / "_static"
    for script in static.rglob("*.js"):
        if script.relative_to(static).parts[0] in SKIPPED_SCRIPTS:
            continue
        names.update(_NAME.findall(script.read_text(encoding="utf-8", errors="replace")))
    return names


def _split_selectors(prelude: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(prelude):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(prelude[start:i])
            start = i + 1
    parts.append(prelude[start:])
    return [p.strip() for p in parts if p.strip()]


def _without_negations(selector: str) -> str:
    # a class named inside :not(…) need not be on the page for the selector to match
    out, i = [], 0
    while i < len(selector):
        if selector.startswith(":not(", i):
            depth, j = 0, i + 4
            while j < len(selector):
                depth += selector[j] == "("
                depth -= selector[j] == ")"
                j += 1
                if depth == 0:
                    break
            i = j
        else:
            out.append(selector[i])
            i += 1
    return "".join(out)


def selector_can_match(selector: str, used: set[str]) -> bool:
    """Can ``selector`` match something in a site whose classes, ids and script words are ``used``?"""
    if any(mark in selector for mark in _OPEN_ENDED):
        return True
    bare = re.sub(r"\[[^\]]*\]", "", _without_negations(selector))  # attribute values are not class names
    return all(name.replace("\\", "") in used for _, name in _SELECTOR_NAME.findall(bare))


def _trim_rules(rules: list, used: set[str]) -> list:
    kept = []
    for rule in rules:
        if rule.type == "qualified-rule":
            selectors = [s for s in _split_selectors(tinycss2.serialize(rule.prelude))
                         if selector_can_match(s, used)]
            if selectors:
                kept.append(",".join(selectors) + "{" + tinycss2.serialize(rule.content) + "}")
        elif rule.type == "at-rule":
            keyword = rule.lower_at_keyword
            if rule.content is not None and keyword in ("media", "supports", "layer", "container", "document"):
                inner = _trim_rules(tinycss2.parse_rule_list(rule.content, skip_comments=True,
                                                             skip_whitespace=True), used)
                if inner:
                    kept.append(f"@{rule.at_keyword}{tinycss2.serialize(rule.prelude)}{{{''.join(inner)}}}")
            else:
                kept.append(tinycss2.serialize([rule]))
    return kept


def trim(css: str, used: set[str]) -> str:
    """``css`` with only the rules whose selectors can match (:func:`selector_can_match`), at-rules kept
    (those holding rules trimmed the same way), comments and the source map reference dropped."""
    rules = tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True)
    return "".join(_trim_rules(rules, used)) + "\n"


def trim_site(html_dir: Path) -> dict[str, tuple[int, int]]:
    """Trim each of :data:`THEME_CSS` in ``html_dir/_static`` in place; name -> (bytes before, after)."""
    used = used_names(html_dir)
    sizes = {}
    for name in THEME_CSS:
        path = html_dir / "_static" / name
        if not path.is_file():
            continue
        css = path.read_text(encoding="utf-8")
        lean = trim(css, used)
        path.write_text(lean, encoding="utf-8")
        path.with_name(path.name + ".map").unlink(missing_ok=True)
        sizes[name] = (len(css.encode()), len(lean.encode()))
    return sizes


def _build_finished(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        trim_site(Path(app.outdir))


def setup(app):
    # after the pages are final (the math and code rewrites run at 900)
    app.connect("build-finished", _build_finished, priority=950)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
