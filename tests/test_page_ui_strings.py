"""The themes' own words on a built page are Chinese: every name a screen reader or a tooltip gives (aria-label,
title, data-bs-title, placeholder, alt) is Chinese or a proper name, never an English phrase of the themes'.

Before: "Link to this heading" / "Link to this definition" on every heading's and API entry's ¶ (892 titles),
"Color mode" and "System Settings" on the colour switch, "Main" and "Page" naming the contents landmarks,
"Launch on Binder", "Launch interactive content" and "Binder logo" on the launch buttons
(booktools.sphinxext.UI_STRINGS and book/_templates give them Chinese).
"""
from __future__ import annotations

import re

from booktools import ROOT
from booktools.sphinxext import UI_STRINGS
from tests.book_pages import PAGES

ATTRIBUTE = re.compile(r'\b(aria-label|title|data-bs-title|placeholder|alt)="([^"]*)"')
CJK = re.compile(r"[\u4e00-\u9fff]")
# An English phrase as the themes write one ("Color mode", "Link to this heading", "Main"): Latin words only.
# Identifiers (batchlab.formulas.job.Job) and the references' author lists (commas) are not phrases.
PHRASE = re.compile(r"[A-Za-z]+(?: [A-Za-z]+)*")
NAMES = {"Binder", "Colab", "GitHub", "PDF", "batchlab"}   # proper names a Chinese page also writes so


def english_names(html: str) -> list[str]:
    """Each attribute of ``html`` (scripts left out) whose value is an English phrase of the themes'."""
    html = re.sub(r"<script\b.*?</script>", "", html, flags=re.S)
    return [f'{k}="{v}"' for k, v in ATTRIBUTE.findall(html)
            if PHRASE.fullmatch(v) and not CJK.search(v) and v not in NAMES]


def test_no_page_names_a_control_in_english(built):
    pages = [built.page(doc) for doc in PAGES] + [built.html / "search.html", built.html / "genindex.html"]
    faults = {p.name: sorted(set(english_names(p.read_text(encoding="utf-8")))) for p in pages}
    assert {k: v for k, v in faults.items() if v} == {}


def test_the_check_catches_the_themes_english():
    page = ('<a class="headerlink" href="#x" title="Link to this heading">#</a>'
            '<nav class="bd-links" aria-label="Main"></nav><img alt="Binder logo" src="b.svg">'
            '<button aria-label="颜色模式" title="Job"></button><span title="batchlab.formulas.job.Job"></span>'
            '<script>window.label = \'title="Color mode"\';</script>')
    assert english_names(page) == ['title="Link to this heading"', 'aria-label="Main"', 'alt="Binder logo"',
                                   'title="Job"']


def test_every_string_given_is_chinese():
    for strings in UI_STRINGS.values():
        assert all(CJK.search(word) for word in strings.values())


def test_the_templates_name_the_landmarks_in_chinese():
    templates = ROOT / "book" / "_templates"
    text = "".join(p.read_text(encoding="utf-8") for p in templates.glob("*.html"))
    assert 'aria-label="Main"' not in text and 'aria-label="Page"' not in text
    assert 'aria-label="全书目录"' in text and 'aria-label="本页内容"' in text
