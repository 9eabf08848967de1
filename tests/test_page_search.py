"""The book's search, run in Chromium on the built book (search.html?q=…, Sphinx's searchtools.js over the
built searchindex.js, the network off), finds every page that uses each term a reader may type: every
Chinese term of the glossary and every phrase of a toc page's title.

A title's phrases (`booktools.search_terms.title_phrases`): the title is cut into jieba's words (the
glossary's terms in its dictionary); consecutive words of two or more Chinese characters form a run, which
a one-character word (对、的、与、在、上、时、中) or anything not Chinese ends; the run and each consecutive
part of it are phrases. "4.3 批大小对显存占用的影响" gives 批大小, 显存占用, 显存, 占用 and 影响;
"4.5 案例拆解：在 NPU 上训练 GPT-2 时的批大小调优" gives 案例拆解, 案例, 拆解, 训练, 批大小调优, 批大小, 调优.

A page uses a term when the term stands in the text a reader reads on it (its article: inline pieces
joined, "显存<b>占用</b>" is 显存占用, blocks and table cells apart). A term the search box splits (it
splits a query at punctuation: 同分布，非同一次更新) finds the pages that use each of its parts.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from bs4 import BeautifulSoup

from booktools import browser as chromium
from booktools.search_terms import (glossary_terms, GLOSSARY, query_words, read_words, search_terms,
                                    title_phrases, toc_titles)
from tests.book_pages import PAGES

TERMS = search_terms()
# the searches the issue reported failing (issue 29): 0 pages for the first three, 3 of 6 for 学习率
REPORTED = {"流水线并行": "book/4.1-definition", "显存占用": "book/4.3-memory",
            "批大小调优": "book/4.5-case-study", "学习率": "book/4.2-convergence"}
BLOCKS = ["p", "div", "li", "td", "th", "tr", "table", "caption", "figcaption", "pre", "dt", "dd",
          "blockquote", "section", "br", "ul", "ol"] + [f"h{i}" for i in range(1, 7)]


def reader_text(page: Path) -> str:
    """The text of the page's article as a reader reads it: inline pieces joined, blocks apart."""
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    article = soup.find("article") or soup
    for tag in article.find_all(["script", "style", "template"]):
        tag.decompose()
    for tag in article.find_all(BLOCKS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    return article.get_text("")


def pages_found(built, hrefs: list[str]) -> set[str]:
    """The toc pages (docnames) that a list of result links points to."""
    return {str(Path(unquote(urlsplit(h).path)).relative_to(built.html).with_suffix("")) for h in hrefs}


def search_faults(texts: dict[str, str], found: dict[str, set[str]]) -> list[str]:
    """For each searched term: the pages that use it but were not found, and the found pages that do not
    use it (in Chinese; empty when the search finds exactly the pages that use each term)."""
    faults = []
    for term, pages in found.items():
        words = query_words(term)
        using = {doc for doc, text in texts.items() if all(w in text for w in words)}
        if not using:
            faults.append(f"没有一页用到“{term}”：它不该在检索词里")
        if using - pages:
            faults.append(f"搜索“{term}”没有找到 {sorted(using - pages)}（找到 {len(pages)} 页，{len(using)} 页用到它）")
        if pages - using:
            faults.append(f"搜索“{term}”找到的 {sorted(pages - using)} 并不含这个词")
    return faults


@pytest.fixture(scope="module")
def texts(built) -> dict[str, str]:
    return {doc: reader_text(built.page(doc)) for doc in PAGES}


@pytest.fixture(scope="module")
def searched(built, browser) -> dict[str, set[str]]:
    hrefs = chromium.search_many(browser, built.html / "search.html", TERMS)
    return {term: pages_found(built, h) for term, h in hrefs.items()}


def test_the_terms_are_the_glossarys_and_the_titles():
    """Every glossary term and every title phrase is searched, and the search index knows each word."""
    glossary = glossary_terms(GLOSSARY.read_text(encoding="utf-8"))
    phrases = [p for t in toc_titles() for p in title_phrases(t)]
    assert set(glossary) | set(phrases) == set(TERMS)
    assert {"显存占用", "批大小调优", "收敛速度", "计算效率", "常见误区", "案例拆解"} <= set(phrases)
    assert set(REPORTED) <= set(TERMS)
    assert read_words() == list(dict.fromkeys(w for t in TERMS for w in query_words(t)))


def test_title_phrases_follow_the_stated_rule():
    assert title_phrases("4.3 批大小对显存占用的影响") == ["批大小", "显存占用", "显存", "占用", "影响"]
    assert title_phrases("4.5 案例拆解：在 NPU 上训练 GPT-2 时的批大小调优") == [
        "案例拆解", "案例", "拆解", "训练", "批大小调优", "批大小", "调优"]
    assert query_words("同分布，非同一次更新") == ["同分布", "非同一次更新"]


def test_every_term_finds_the_pages_that_use_it(texts, searched):
    """Each term finds every page that uses it and no page that does not."""
    faults = search_faults(texts, searched)
    assert not faults, "\n".join(faults)
    for term, doc in REPORTED.items():
        assert doc in searched[term], (term, searched[term])


def test_search_check_catches_a_term_missing_from_the_index(built, browser, texts, tmp_path):
    """A copy of the site whose index lost one term (as before issue 29: 显存占用 found nothing): the
    check reports the pages it no longer finds; and a found page that lacks the term is reported too."""
    copy = tmp_path / "html"
    shutil.copytree(built.html, copy, ignore=shutil.ignore_patterns("_images", "*.pdf"))
    index = copy / "searchindex.js"
    data = json.loads(re.fullmatch(r"\s*Search\.setIndex\((.*)\)\s*;?\s*", index.read_text(encoding="utf-8"),
                                   re.DOTALL).group(1))
    dropped = [data[key].pop("显存占用", None) for key in ("terms", "titleterms")]
    assert any(d is not None for d in dropped), "索引里没有“显存占用”：这个坏样本没有弄坏任何东西"
    index.write_text(f"Search.setIndex({json.dumps(data)})", encoding="utf-8")
    hrefs = chromium.search_results(browser, copy / "search.html", "显存占用")
    found = {str(Path(unquote(urlsplit(h).path)).relative_to(copy.resolve()).with_suffix("")) for h in hrefs}
    faults = search_faults(texts, {"显存占用": found})
    assert any("没有找到" in f and "book/4.3-memory" in f for f in faults), faults
    without = next(d for d in PAGES if "屋顶线" not in texts[d])
    wrong = search_faults(texts, {"屋顶线": searched_pages(texts, "屋顶线") | {without}})
    assert wrong == [f"搜索“屋顶线”找到的 {[without]} 并不含这个词"], wrong


def searched_pages(texts: dict[str, str], term: str) -> set[str]:
    return {doc for doc, text in texts.items() if term in text}


def loads_search_index(html: str) -> bool:
    """Does a page load the search index (searchindex.js, 250 kB) or Sphinx's search scripts?"""
    return bool(re.search(r'<script[^>]+src="[^"]*(?:searchindex|searchtools|language_data)\.js', html))


def test_only_the_search_page_loads_the_index(built):
    """A reader's page does not fetch the search index (pydata loads it everywhere for a search-as-you-type
    the book leaves off; book/_templates/layout.html): only search.html, which runs the query."""
    loading = [str(p.relative_to(built.html)) for p in built.pages()
               if loads_search_index(p.read_text(encoding="utf-8"))]
    assert loading == ["search.html"], loading
    assert loads_search_index('<script src="../searchindex.js"></script>')
    assert not loads_search_index('<script src="../_static/nav.js"></script>')
