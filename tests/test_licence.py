"""The book's licences: code under MIT (``LICENSE``), text and figures under CC BY-SA 4.0 (``LICENSE-text``),
declared in ``pyproject.toml`` (SPDX) and shown in every built page's footer (``_config.yml``'s
``html.extra_footer``).

``LICENSE-text`` is the legal code verbatim as the npm package ``spdx-license-list`` 6.12.0 ships it
(``licenses/CC-BY-SA-4.0.json``, field ``licenseText``, plus a final newline; the package's tarball has
integrity ``sha512-+nUYqm3aZMSHbjsthK+i/HHI2okTElCvqwUd4k8QcSk+FTGgjq+fsdFj2wZOaX6XmR2JdWhf/NeflNnvKOjcnQ==``):
committed, never fetched at build time.
"""
from __future__ import annotations

import hashlib
import re
import tomllib

import pytest
from bs4 import BeautifulSoup

from booktools import ROOT
from tests.book_pages import PAGES

# sha256 of spdx-license-list 6.12.0's licenseText for CC-BY-SA-4.0 (the file adds one final newline)
CC_BY_SA_SHA256 = "c871544d989d2db1b0d0b7788f5591f56731c039c7d51e7a8f8da74c5679115a"
CC_BY_SA_URL = "https://creativecommons.org/licenses/by-sa/4.0/"
MIT_URL = "https://opensource.org/license/mit"
MIT_GRANT = ("Permission is hereby granted, free of charge, to any person obtaining a copy of this software and "
             "associated documentation files (the \"Software\")")


def licence_links(html: str) -> set[str]:
    """Which licences a page's footer links to: ``{"CC BY-SA 4.0", "MIT"}`` when both are there."""
    soup = BeautifulSoup(html, "html.parser")
    found = set()
    for footer in soup.select(".extra_footer"):
        for a in footer.find_all("a", href=True):
            if a["href"].startswith(CC_BY_SA_URL) and "CC BY-SA 4.0" in a.get_text():
                found.add("CC BY-SA 4.0")
            elif a["href"] == MIT_URL and "MIT" in a.get_text():
                found.add("MIT")
    return found


def test_the_text_licence_is_the_legal_code_verbatim():
    text = (ROOT / "LICENSE-text").read_text(encoding="utf-8")
    assert text.endswith("\n") and not text.endswith("\n\n")
    assert hashlib.sha256(text[:-1].encode("utf-8")).hexdigest() == CC_BY_SA_SHA256
    assert text.startswith("Creative Commons Attribution-ShareAlike 4.0 International\n")
    # one changed character is a different hash: the check can fail
    edited = text[:-1].replace("Section 8", "Section 9", 1)
    assert hashlib.sha256(edited.encode("utf-8")).hexdigest() != CC_BY_SA_SHA256


def test_the_code_licence_is_mit_and_names_what_it_covers():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    flat = re.sub(r"\s+", " ", text)
    assert "MIT License" in text and MIT_GRANT in flat
    assert re.search(r"Copyright \(c\) \d{4} \S", text)
    assert "LICENSE-text" in text and "CC BY-SA 4.0" in text
    # every path it names for the code exists, and the package and the chapters' code are among them
    code_part = text.split("- Text and figures")[0]
    named = set(re.findall(r"(?<![\w/.-])((?:\.?[\w-]+/)+|[\w.-]+\.(?:toml|txt|yml|py))(?=[\s,)])", code_part))
    assert {"src/", "tests/", "scripts/"} <= named
    missing = [p for p in named if not (ROOT / p).exists()]
    assert not missing, f"LICENSE names paths that do not exist: {missing}"


def test_pyproject_declares_the_licence_in_spdx():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "MIT"   # a PEP 639 SPDX expression, not the old table form
    assert project["license-files"] == ["LICENSE"]
    assert all((ROOT / f).is_file() for f in project["license-files"])


def test_the_footer_check_sees_a_missing_licence():
    page = ('<footer><div class="extra_footer"><p><a href="{cc}deed.zh-hans">CC BY-SA 4.0</a> '
            '<a href="{mit}">MIT 许可证</a></p></div></footer>')
    assert licence_links(page.format(cc=CC_BY_SA_URL, mit=MIT_URL)) == {"CC BY-SA 4.0", "MIT"}
    assert licence_links(page.format(cc=CC_BY_SA_URL, mit="https://example.org/")) == {"CC BY-SA 4.0"}
    assert licence_links("<footer><p>no licence</p></footer>") == set()


@pytest.mark.slow
def test_every_built_page_carries_both_licences(built):
    pages = [built.html / f"{doc}.html" for doc in PAGES] + [built.html / "search.html"]
    assert len(pages) > 5
    without = {p.name: licence_links(p.read_text(encoding="utf-8")) for p in pages}
    without = {name: found for name, found in without.items() if found != {"CC BY-SA 4.0", "MIT"}}
    assert not without, f"pages whose footer lacks a licence: {without}"
