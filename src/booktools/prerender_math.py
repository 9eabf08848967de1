"""Formulas typeset when the book is built, so that no page downloads a math engine to be read (issue 42).

MathJax in the reader's browser cost a chapter page 1.17 MB of script (265 KB compressed) and about a
second of a phone's CPU, and re-laid the page out formula by formula. This Sphinx extension
(``sphinx: extra_extensions`` in _config.yml) runs the same MathJax (the npm package ``mathjax`` at the
version scripts/vendor_js.sh vendors, :data:`MATHJAX`) once at build time with Node:

* it registers the HTML math renderer ``prerendered`` (``html_math_renderer`` in _config.yml): the pages are
  written exactly as with Sphinx's MathJax renderer (``span.math`` ``\\(…\\)``, ``div.math`` ``\\[…\\]``) but
  load no MathJax and no MathJax configuration;
* after the build, :func:`prerender` replaces every formula of every page by MathJax's CommonHTML (the
  markup MathJax writes in the browser: ``mjx-container``, its glyphs drawn with the vendored MathJax fonts,
  and the assistive MathML a screen reader reads) and puts into the page's head the stylesheet of exactly
  the glyphs that page uses. A formula MathJax cannot typeset fails the build.

Node runs src/booktools/node/prerender_math.js; MathJax's Node files come from the npm tarball, checked
against its registry hash and kept in :data:`CACHE` (``python -m booktools.prerender_math vendor``, run by
scripts/setup-env.sh).
"""
from __future__ import annotations

import argparse
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from booktools import ROOT

MATHJAX = {"version": "3.2.2",
           "integrity": "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw=="}
"""The npm package ``mathjax`` the build runs: the version and hash scripts/vendor_js.sh vendors for the fonts."""
CACHE = ROOT / ".cache" / "mathjax-node"
"""Where MathJax's ``es5/`` folder is kept for Node (ignored by git)."""
SCRIPT = Path(__file__).with_name("node") / "prerender_math.js"
RENDERER = "prerendered"
FONTS = "_static/mathjax/es5/output/chtml/fonts/woff-v2"
"""The vendored MathJax fonts in the built site (scripts/vendor_js.sh); the pages' stylesheets point here."""
FONT_MARK = "@MJX-FONTS@"
SKIPPED = ("es5/sre/", "es5/a11y/explorer", "es5/a11y/complexity", "es5/a11y/semantic-enrich", "es5/ui/")
"""Parts of the tarball the build does not run (speech rules, the menu): not unpacked."""

INLINE = re.compile(r'(<span class="math notranslate nohighlight">)\\\((.*?)\\\)(</span>)', re.S)
BLOCK = re.compile(r'(<div class="math notranslate nohighlight"[^>]*>)(.*?)(</div>)', re.S)
DISPLAY = re.compile(r"\\\[(.*?)\\\]", re.S)
EQNO = re.compile(r'<span class="eqno">.*?</span></span>|<span class="eqno">.*?</span>', re.S)


# ----------------------------------------------------------------------------- MathJax for Node
def _stamp() -> str:
    return json.dumps(MATHJAX, sort_keys=True)


def ready(cache: Path = CACHE) -> bool:
    """Is the pinned MathJax unpacked in ``cache``?"""
    stamp = cache / "stamp.json"
    return stamp.is_file() and stamp.read_text() == _stamp()


def vendor(cache: Path = CACHE) -> None:
    """Download the pinned ``mathjax`` tarball (unless ``cache`` has it), check its hash, unpack ``es5/``."""
    from booktools.live import npm_tarball

    if ready(cache):
        return
    data = npm_tarball("mathjax", MATHJAX["version"], MATHJAX["integrity"])
    shutil.rmtree(cache, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            name = member.name.removeprefix("package/")
            if member.isfile() and name.startswith("es5/") and not name.startswith(SKIPPED):
                target = cache / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
    (cache / "stamp.json").write_text(_stamp())
    print(f"prerender_math: mathjax@{MATHJAX['version']} → {cache}")


# ----------------------------------------------------------------------------- the pages
def formulas(page: str) -> list[tuple[str, bool]]:
    """Every formula of a written page in order: (TeX, displayed?)."""
    found: list[tuple[str, bool, int]] = []
    for m in INLINE.finditer(page):
        found.append((html.unescape(m.group(2)), False, m.start()))
    for m in BLOCK.finditer(page):
        for tex, _ in _block_parts(m.group(2)):
            found.append((tex, True, m.start()))
    return [(tex, display) for tex, display, _ in sorted(found, key=lambda f: f[2])]


def _block_parts(inner: str) -> list[tuple[str, tuple[int, int]]]:
    """The displayed formulas of a ``div.math``'s inner HTML and where each stands: ``\\[…\\]`` parts, or the
    whole text (an amsmath environment Sphinx writes without delimiters), equation numbers left out."""
    parts = [(html.unescape(m.group(1)), m.span()) for m in DISPLAY.finditer(inner)]
    if parts:
        return parts
    text = EQNO.sub("", inner)
    start = inner.find(text.strip()) if text.strip() else -1
    return [(html.unescape(text.strip()), (start, start + len(text.strip())))] if start >= 0 else []


def typeset(pages: list[list[tuple[str, bool]]]) -> list[dict]:
    """Each page's formulas typeset by MathJax in one Node run: per page ``html`` (one string a formula),
    ``css`` (its stylesheet, fonts at :data:`FONT_MARK`) and ``errors`` (formulas MathJax could not read)."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("找不到 Node.js：构建时排版公式需要它（Debian：apt-get install nodejs）")
    if not ready():
        raise RuntimeError("找不到构建用的 MathJax：先运行 scripts/setup-env.sh（或 python -m booktools.prerender_math vendor）")
    job = {"mathjax": str(CACHE / "es5"), "font_url": FONT_MARK, "pages": pages}
    done = subprocess.run([node, str(SCRIPT)], input=json.dumps(job), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"MathJax 排版失败：{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)["pages"]


def _style(css: str, fonts: str) -> str:
    # font-display: swap — the text around a formula never waits for a math font
    css = css.replace(FONT_MARK, fonts).replace("  src: url(", "  font-display: swap;\n  src: url(")
    css = re.sub(r"\n\s*\n", "\n", css)
    return f'<style id="MJX-CHTML-styles">{css}</style>'


def rewrite(page: str, typeset_page: dict, fonts: str) -> str:
    """``page`` with its formulas replaced by ``typeset_page``'s markup (in :func:`formulas`' order) and the
    page's MathJax stylesheet at the end of its head."""
    rendered = iter(typeset_page["html"])
    spans = {m.start(): m for m in INLINE.finditer(page)}
    blocks = {m.start(): m for m in BLOCK.finditer(page)}
    out, last = [], 0
    for start in sorted(spans | blocks):
        m = spans.get(start) or blocks[start]
        out.append(page[last:start])
        if start in spans:
            out.append(m.group(1) + next(rendered) + m.group(3))
        else:
            inner, pieces, at = m.group(2), [], 0
            for _, (a, b) in _block_parts(inner):
                pieces += [inner[at:a], next(rendered)]
                at = b
            out.append(m.group(1) + "".join(pieces) + inner[at:] + m.group(3))
        last = m.end()
    out.append(page[last:])
    text = "".join(out)
    head_end = text.index("</head>")
    return text[:head_end] + _style(typeset_page["css"], fonts) + "\n" + text[head_end:]


def prerender(html_dir: Path) -> dict[str, int]:
    """Typeset every formula of every page under ``html_dir`` in place; page (relative path) -> formulas."""
    pages = [p for p in sorted(html_dir.rglob("*.html")) if "_static" not in p.parts]
    texts = {p: p.read_text(encoding="utf-8") for p in pages}
    with_math = [p for p in pages if formulas(texts[p])]
    results = typeset([formulas(texts[p]) for p in with_math])
    counts = {}
    for path, result in zip(with_math, results):
        if result["errors"]:
            raise RuntimeError(f"{path.relative_to(html_dir)}：MathJax 无法排版其中 {result['errors']} 个公式")
        fonts = os.path.relpath(html_dir / FONTS, path.parent).replace(os.sep, "/")
        path.write_text(rewrite(texts[path], result, fonts), encoding="utf-8")
        counts[path.relative_to(html_dir).as_posix()] = len(result["html"])
    return counts


# ----------------------------------------------------------------------------- Sphinx
def _build_finished(app, exception) -> None:
    if exception is None and app.builder.format == "html" and app.builder.math_renderer_name == RENDERER:
        prerender(Path(app.outdir))


def setup(app):
    """Register the ``prerendered`` math renderer (Sphinx's MathJax markup, no MathJax loaded) and the
    post-build typesetting."""
    from sphinx.ext.mathjax import html_visit_displaymath, html_visit_math

    app.setup_extension("sphinx.ext.mathjax")  # its mathjax_inline / mathjax_display delimiters
    app.add_html_math_renderer(RENDERER, (html_visit_math, None), (html_visit_displaymath, None))
    app.connect("build-finished", _build_finished)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.prerender_math",
                                     description="下载并校验构建时排版公式所用的 MathJax")
    parser.add_argument("command", choices=["vendor"])
    parser.parse_args(argv)
    vendor()
    return 0


if __name__ == "__main__":
    sys.exit(main())
