"""booktools: the tools that build and check this book, not part of the book's teaching code.

The chapters teach with `batchlab`; this package only serves the repository around them: the reader of
`_toc.yml` (`booktools.toc`), the headless-Chromium page checks (`booktools.render_check`, launching
the browser through `booktools.browser`), the Colab set-up cell (`booktools.colab_cell`) and the
search dictionary (`booktools.search_terms`). The tests and benchmarks import it; each tool also runs
as `python -m booktools.<name>`. It works on a checkout, installed editable (`-e .` in
requirements.txt): ROOT below is that checkout's root.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (src/booktools/__init__.py -> src/booktools -> src -> root)."""
