"""Project-wide pytest hooks: the `slow` marker and nbval's rounding sanitizer.

* Book build, nbval and multi-process runs are marked ``slow``; ``pytest -m "not slow" tests`` is the
  quick subset for development. CI (``scripts/test.sh``) runs everything.
* nbval compares measured floats to two decimals. A regex replacement can only truncate, which makes
  a value near a boundary (0.1699 vs 0.1700) flicker; ``tests/nbval-sanitize.cfg`` therefore marks the
  float rule with the replacement ``ROUND2`` and this hook swaps in a function that rounds.
"""
from __future__ import annotations

import re

import pytest

# Submissions that tests/test_grade.py grades, some broken on purpose (an error cell, an endless loop,
# a truncated file): not chapters for `pytest --nbval` to run. (Here, not in a conftest.py of their own:
# a second module named conftest would shadow this one for `from conftest import …`.)
collect_ignore_glob = ["tests/fixtures/grading/*"]

ROUND_MARK = "ROUND2"
SLOW_FILES = {"test_html.py", "test_device.py"}  # the book build + browser; a child pytest process


try:  # hypothesis fails a case that takes over 200 ms by default: a timed assertion, which a busy
    # machine trips though nothing changed (4.2's cosine schedule did, once, with a core kept busy)
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("batchlab", deadline=None)
    _hypothesis_settings.load_profile("batchlab")
except ImportError:  # hypothesis not installed: nothing to configure
    pass


def round_floats(match: re.Match) -> str:
    """A float with three or more decimals, rounded to two (the sanitizer's ``ROUND2``)."""
    return f"{float(match.group(0)):.2f}"


def pytest_configure(config: pytest.Config) -> None:
    try:
        from nbval.plugin import IPyNbFile
    except ImportError:  # nbval not installed: nothing to patch
        return
    original = IPyNbFile.setup_sanitize_files
    if getattr(original, "_batchlab_rounding", False):
        return

    def setup_sanitize_files(self) -> None:
        original(self)
        for regex, replace in list(self.sanitize_patterns.items()):
            if replace == ROUND_MARK:
                self.sanitize_patterns[regex] = round_floats  # re.sub accepts a function

    setup_sanitize_files._batchlab_rounding = True
    IPyNbFile.setup_sanitize_files = setup_sanitize_files


def _book_file(name: str) -> bool:
    """tests/test_page_*.py: they use tests/test_html.py's book build and browser, so they are slow too."""
    return name.startswith("test_page_") and name.endswith(".py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".ipynb" or item.path.name in SLOW_FILES or _book_file(item.path.name):
            item.add_marker(pytest.mark.slow)

