"""Explorers that run live in the published page, with no server: Pyodide (CPython compiled to
WebAssembly) runs the book's own pure-Python files in the reader's browser, and Apache ECharts draws
what they answer.

Three parts, one module:

* **The runtime, vendored** (``python -m booktools.live vendor``, run by scripts/setup-env.sh): the npm
  tarballs in :data:`RUNTIME`, pinned by version and by the registry's sha512 integrity, are downloaded
  once from registry.npmjs.org into :data:`CACHE` (ignored by git) and only the files the pages load are
  kept. Nothing is fetched at build or test time.
* **The Python the page runs** (:func:`live_sources`): the files of ``batchlab`` the explorers need —
  formulas, the lecture and the page layer ``batchlab/page`` (the explorers' declarations, colours,
  numbers), each folder whole — zipped byte for byte from ``src/`` at build time
  (tests/test_live_explorers.py compares them), so no formula is written a second time in JavaScript.
* **A Sphinx extension** (``sphinx: extra_extensions`` in _config.yml): a page whose notebook holds an
  explorer's marker (``batchlab.page.spec.LIVE_CLASS``) gets book/_js/live.js; no other page loads any of
  it. After the build the runtime and the sources zip are copied to ``_static/live/``.

Chart library: ECharts rather than Vega-Lite — Chinese text is its home ground (its own fonts and
layout are tested with CJK labels), one 0.7 MB file with no compiler at run time (Vega-Lite needs
vega + vega-lite + vega-embed, ≈ 1.3 MB), an SVG renderer whose text stays text, and ``aria`` that
writes a description of each chart for screen readers. Updating the pins: see README, "Live explorers".
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import shutil
import sys
import tarfile
import urllib.request
import zipfile
from pathlib import Path

from batchlab.page.spec import LIVE_CLASS
from booktools import ROOT

SRC = ROOT / "src"
CACHE = ROOT / ".cache" / "live-runtime"
REGISTRY = "https://registry.npmjs.org"
LIVE_SCRIPT = "live.js"
"""The book's own loader (book/_js/live.js, served as ``_static/live.js``)."""
LIVE_STYLE = "live.css"
"""Its style (book/_static/live.css)."""
STATIC_FOLDER = "live"
"""Where the runtime and the sources land in the built site: ``_static/live/``."""
SOURCES_ZIP = "batchlab-live.zip"
SERVICE_WORKER = "bl-live-sw.js"
"""The service worker that keeps the runtime for the next page (book/_js/live-sw.js), written to the site's
root so that its scope is the whole book."""

RUNTIME: dict[str, dict] = {
    "pyodide": {
        "version": "314.0.8",
        "integrity": "sha512-74Wq1kXOC+CCEzAfxuRAO701nAcCMLjf8NrwvWpu8S41dVMXwXmLQ05dYB+F4e46AdnGo0oq7YHSVUpHsoarLQ==",
        "files": ["pyodide.js", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json",
                  "package.json"],
        "licence": "MPL-2.0",
    },
    "echarts": {
        "version": "6.1.0",
        "integrity": "sha512-q0yaFPggC9FUdsWH4blavRWFmxdrIodbkoKNAjJudAI6CA9gNPxHtV2RcZNEepZVlk4yvBYkOkbk6HIVpIyHZA==",
        "files": ["dist/echarts.common.min.js", "LICENSE", "NOTICE"],
        "licence": "Apache-2.0",
    },
}
"""The npm packages the live pages load: exact version, the registry's integrity hash, the files kept."""

LIVE_PACKAGES = ("batchlab/formulas", "batchlab/lecture", "batchlab/page")
LIVE_FILES = ("batchlab/__init__.py",)
"""Beside the folders: the package's own ``__init__`` (the page layer, ``batchlab/page``, is shipped whole:
tests/test_layers.py holds it to the standard library, the formulas, the lecture and itself)."""


def live_sources() -> list[Path]:
    """The files of ``src/`` the page runs, relative to ``src/``: whole folders and single modules."""
    files = [Path(f) for f in LIVE_FILES]
    for folder in LIVE_PACKAGES:
        files += sorted(p.relative_to(SRC) for p in (SRC / folder).glob("*.py"))
    return sorted(files)


def sources_zip() -> bytes:
    """:func:`live_sources` as one zip, each file's bytes as in ``src/`` (fixed dates: the same sources
    make the same zip)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for rel in live_sources():
            info = zipfile.ZipInfo(rel.as_posix(), date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, (SRC / rel).read_bytes())
    return buffer.getvalue()


# ----------------------------------------------------------------------------- vendoring
def _stamp() -> str:
    return json.dumps({name: (spec["version"], spec["integrity"]) for name, spec in RUNTIME.items()}, sort_keys=True)


def npm_tarball(name: str, version: str, integrity: str) -> bytes:
    """The published tarball of ``name@version`` from the npm registry, refused unless its sha512 is
    ``integrity`` (as the registry and ``npm pack --json`` print it)."""
    url = f"{REGISTRY}/{name}/-/{name}-{version}.tgz"
    with urllib.request.urlopen(url, timeout=120) as response:
        data = response.read()
    got = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    if got != integrity:
        raise SystemExit(f"{name}@{version}：校验和不符（得到 {got}，应为 {integrity}）")
    return data


def runtime_ready(cache: Path = CACHE) -> bool:
    """Is the pinned runtime already in ``cache``?"""
    stamp = cache / "stamp.json"
    return stamp.is_file() and stamp.read_text() == _stamp()


def vendor(cache: Path = CACHE) -> None:
    """Download each pinned tarball (unless ``cache`` has it), check its integrity and keep its files."""
    if runtime_ready(cache):
        return
    shutil.rmtree(cache, ignore_errors=True)
    for name, spec in RUNTIME.items():
        data = npm_tarball(name, spec["version"], spec["integrity"])
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in spec["files"]:
                target = cache / name / Path(member).name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(f"package/{member}").read())
        print(f"live: {name}@{spec['version']} ({len(data) / 2**20:.1f} MiB tarball) → {cache / name}")
    (cache / "stamp.json").write_text(_stamp())


# ----------------------------------------------------------------------------- Sphinx
def _has_explorer(app, pagename: str) -> bool:
    if pagename not in app.env.found_docs:
        return False
    path = Path(app.env.doc2path(pagename))
    return path.suffix == ".ipynb" and LIVE_CLASS in path.read_text(encoding="utf-8")


def _page_context(app, pagename, templatename, context, doctree) -> None:
    if _has_explorer(app, pagename):
        app.add_js_file(LIVE_SCRIPT, defer="defer")
        app.add_css_file(LIVE_STYLE)


def _copy_runtime(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    if not runtime_ready():
        raise RuntimeError("找不到 Pyodide 与 ECharts（实时控件的运行时）：先运行 scripts/setup-env.sh "
                           "（或 python -m booktools.live vendor）")
    target = Path(app.outdir) / "_static" / STATIC_FOLDER
    shutil.rmtree(target, ignore_errors=True)
    for name in RUNTIME:
        shutil.copytree(CACHE / name, target / name)
    sources = sources_zip()
    (target / SOURCES_ZIP).write_bytes(sources)
    precompress(target)
    write_service_worker(Path(app.outdir), sources)


def write_service_worker(outdir: Path, sources: bytes) -> Path:
    """book/_js/live-sw.js at the root of the site ``outdir``, its cache named by a hash of the pinned runtime
    and ``sources`` (the Python files the page runs): a build that changes either gets a new cache."""
    version = hashlib.sha256(_stamp().encode() + sources).hexdigest()[:16]
    template = (ROOT / "book" / "_js" / "live-sw.js").read_text(encoding="utf-8")
    out = outdir / SERVICE_WORKER
    out.write_text(template.replace("RUNTIME_VERSION", version), encoding="utf-8")
    return out


PRECOMPRESSED = (".wasm", ".zip", ".mjs", ".js", ".json")
"""The runtime's files written a second time gzip-compressed beside themselves (``X.gz``)."""


def precompress(folder: Path) -> list[Path]:
    """Write ``X.gz`` beside each runtime file of ``folder`` (:data:`PRECOMPRESSED`) that gzip makes
    smaller, with a fixed time stamp (the same file makes the same bytes). A host that serves precompressed
    files (nginx ``gzip_static on``, Netlify, Caddy ``precompressed``) sends them with ``Content-Encoding:
    gzip`` to every browser: the reader downloads ≈ 6 MB instead of ≈ 14 MB (the wasm and the standard
    library zip shrink to about 40 %). A host that does not simply serves ``X``; the ``.gz`` files cost
    it only disk. GitHub Pages compresses text types itself and ignores them."""
    import gzip

    written = []
    for path in sorted(folder.rglob("*")):
        if path.suffix in PRECOMPRESSED and path.is_file():
            data = path.read_bytes()
            packed = gzip.compress(data, compresslevel=9, mtime=0)
            if len(packed) < 0.9 * len(data):
                out = path.with_name(path.name + ".gz")
                out.write_bytes(packed)
                written.append(out)
    return written


def setup(app):
    app.setup_extension("booktools.frozen")  # the frozen explorers, as HTML: the live ones replace them
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _copy_runtime)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.live",
                                     description="下载并校验实时控件的运行时（Pyodide、ECharts）")
    parser.add_argument("command", choices=["vendor"])
    parser.parse_args(argv)
    vendor()
    return 0


if __name__ == "__main__":
    sys.exit(main())
