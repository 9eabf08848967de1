"""The bibliography and the book's citations agree (no kernel, no build).

Every entry of references.bib is cited at least once on a page the toc lists, every ``{cite}`` names an
entry that exists, and the references page that prints the bibliography is in the toc. Sphinx reports an
unknown key only as a warning of the strict build; an entry nobody cites would silently vanish from the
references page, which lists cited entries only.
"""
from __future__ import annotations

import re
from pybtex.database import parse_file

from booktools import ROOT
from booktools.toc import toc_entries
from tests.book_pages import toc_markdown

BIB = ROOT / "references.bib"
REFERENCES_PAGE = "book/references"
# MyST roles of sphinxcontrib-bibtex: {cite}, {cite:p}, {cite:t}, {cite:ps}, {cite:ts}, {cite:year}, ...;
# one role may name several keys, separated by commas.
CITE_ROLE = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]+)`")


def cited_keys(markdown: str) -> list[str]:
    """Keys cited in MyST markdown, in order, with repeats."""
    return [key.strip() for keys in CITE_ROLE.findall(markdown) for key in keys.split(",") if key.strip()]


def bib_keys() -> set[str]:
    return set(parse_file(str(BIB), bib_format="bibtex").entries.keys())


def test_cite_roles_are_parsed():
    text = "见 {cite:t}`a2019`，以及 {cite}`b2020, c2021`；`{code}` 与 {cite:p}`d2022` 和 McCandlish et al. 2018。"
    assert cited_keys(text) == ["a2019", "b2020", "c2021", "d2022"]


def test_every_bib_entry_is_cited_and_every_citation_exists():
    keys = bib_keys()
    assert keys, "references.bib holds no entry"
    cited = {page: set(cited_keys(text)) for page, text in toc_markdown().items()}
    all_cited = set().union(*cited.values())
    uncited = keys - all_cited
    assert not uncited, f"references.bib entries cited on no toc page (cite them or drop them): {sorted(uncited)}"
    unknown = {page: sorted(c - keys) for page, c in cited.items() if c - keys}
    assert not unknown, f"citations of keys missing from references.bib: {unknown}"


def test_references_page_is_in_the_toc_and_prints_the_bibliography():
    assert REFERENCES_PAGE in toc_entries(), f"_toc.yml must list {REFERENCES_PAGE}"
    page = (ROOT / f"{REFERENCES_PAGE}.md").read_text(encoding="utf-8")
    assert page.startswith("# 参考文献"), "the references page's title is 参考文献"
    assert "```{bibliography}" in page


def test_config_points_sphinx_at_the_bib_file():
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert [ROOT / f for f in config["bibtex_bibfiles"]] == [BIB]
    # JB1 passes only bibtex_bibfiles through; the style must sit under sphinx.config to take effect
    assert config["sphinx"]["config"]["bibtex_reference_style"] == "author_year"

