"""The built book served as a static host serves it, for the speed checks (benchmarks/bench.py's phone
profile, tests/test_page_lighthouse.py): gzip-compressed when the browser accepts it, as GitHub Pages,
nginx and Netlify send text. Python's ``http.server`` compresses nothing, and an uncompressed page reads
3–4× slower than a reader meets it, so the assumption is stated here once.
"""
from __future__ import annotations

import contextlib
import functools
import gzip
import http.server
import mimetypes
import threading
from pathlib import Path
from typing import Iterator

COMPRESSED = (".html", ".css", ".js", ".mjs", ".json", ".svg", ".txt", ".map", ".wasm", ".zip")
"""What a host sends gzip-compressed: text types on the fly, the runtime's binaries when a precompressed
``X.gz`` lies beside them (booktools.live.precompress)."""


@contextlib.contextmanager
def serve_like_a_host(folder: Path) -> Iterator[str]:
    """``folder`` over HTTP/1.1 keep-alive on 127.0.0.1, as a static host sends files: gzip-compressed when
    the browser accepts it (a precompressed ``X.gz`` beside ``X`` when there is one, as nginx's gzip_static
    and Netlify serve them; else text types compressed on the fly, as GitHub Pages does); yields the origin."""

    class Host(http.server.SimpleHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            path = Path(self.translate_path(self.path.split("?")[0].split("#")[0]))
            if path.is_dir():
                path = path / "index.html"
            if not path.is_file():
                self.send_error(404)
                return
            body = path.read_bytes()
            encoded = None
            if "gzip" in self.headers.get("Accept-Encoding", ""):
                packed = path.with_name(path.name + ".gz")
                if packed.is_file():
                    body, encoded = packed.read_bytes(), "gzip"
                elif path.suffix in COMPRESSED and path.suffix not in (".wasm", ".zip"):
                    body, encoded = gzip.compress(body, 6), "gzip"
            self.send_response(200)
            kind = "application/wasm" if path.suffix == ".wasm" else (
                "text/javascript" if path.suffix in (".js", ".mjs") else mimetypes.guess_type(path.name)[0])
            if kind and (kind.startswith("text/") or kind in ("application/json", "image/svg+xml")) \
                    and "charset" not in kind:
                kind += "; charset=utf-8"
            self.send_header("Content-Type", kind or "application/octet-stream")
            if encoded:
                self.send_header("Content-Encoding", encoded)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Host, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
