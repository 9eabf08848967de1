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


# --------------------------------------------------------------------------- the field and the snippets (issue 42)
ICON_GAP_PX = 4   # the query starts at least this far right of the magnifier


def field_layout(tab) -> list[dict]:
    """Every visible search field (form.bd-search) of the page: where its magnifier ends and its query starts."""
    return tab.evaluate(chromium.script("search_fields"))


def icon_faults(fields: list[dict]) -> list[str]:
    return [f"搜索框（{f['where']}）的放大镜（{f['icon'][0]:.0f}–{f['icon'][1]:.0f} px）盖住了输入的字（从 {f['text']:.0f} px 起）"
            for f in fields if f["icon"][1] + ICON_GAP_PX > f["text"]]


@pytest.mark.parametrize("width", [390, 1280])
def test_the_magnifier_sits_beside_the_query(built, browser, width):
    """On the search page and in the pop-up the header's search button opens, at 390 and 1280 px, the query
    starts right of the magnifier (it was drawn over the query's first character). Without nav.css's rule
    (the stylesheet refused) the same measurement finds the icon over the text."""
    for refuse in (False, True):
        context = chromium.offline_context(browser, viewport={"width": width, "height": 900})
        if refuse:
            chromium.refuse_stylesheet(context, "nav.css")
        try:
            tab = context.new_page()
            tab.goto(built.page("search").as_uri() + "?q=" + "显存", wait_until="load")
            page_fields = field_layout(tab)
            tab.goto(built.page("book/4.3-memory").as_uri(), wait_until="load")
            tab.locator(".search-button__button:visible").first.click()
            tab.wait_for_selector("#pst-search-dialog[open] form.bd-search input", state="visible")
            popup = field_layout(tab)
        finally:
            context.close()
        assert len(page_fields) == 1 and len(popup) == 1, (page_fields, popup)
        faults = icon_faults(page_fields + popup)
        if refuse:
            assert len(faults) == 2, faults
        else:
            assert not faults, "\n".join(faults)


SNIPPET_TERMS = ["显存占用", "临界批大小", "学习率", "stage_memory"]
TEX = re.compile(r"\\[A-Za-z(\[)\]]|\$")
MAX_SNIPPET = 200   # characters: one sentence, or the stretch of it around the word (search.js MAX_SIDE)


def snippets(built, browser, terms: list[str], refuse_search_js: bool = False) -> dict[str, list[tuple[str, str]]]:
    """{term: [(result link, its snippet)]} from the book's search page served over http (a page fetches the
    result pages to cut snippets from: file:// refuses it), search.js refused where asked."""
    from urllib.parse import quote

    found = {}
    with chromium.launch(loopback=True, beside=browser) as served, chromium.serve(built.html) as origin:
        context = chromium.served_context(served, origin)
        if refuse_search_js:
            context.route("**/_static/search.js*", lambda r: r.abort())
        try:
            tab = context.new_page()
            for term in terms:
                tab.goto(f"{origin}/search.html?q={quote(term)}", wait_until="load")
                tab.wait_for_function(chromium.script("search_done"))
                found[term] = tab.wait_for_function(chromium.script("search_snippets"), timeout=20_000).json_value()
        finally:
            context.close()
    return found


def snippet_faults(built, found: dict[str, list[tuple[str, str]]]) -> list[str]:
    """Snippets that show TeX source, run past one sentence, or list the page's headings."""
    headings = {}
    faults = []
    for term, results in found.items():
        for href, text in results:
            doc = unquote(urlsplit(href).path).removesuffix(".html")
            if doc not in headings:
                soup = built.soup(doc)
                headings[doc] = {" ".join(h.get_text(" ", strip=True).rstrip("#").split())
                                 for h in soup.select("article h2, article h3")}
            listed = [h for h in headings[doc] if len(h) > 3 and h in text]
            if TEX.search(text):
                faults.append(f"“{term}”的摘要（{href}）含 TeX 源码：{text[:120]}")
            if len(text) > MAX_SNIPPET:
                faults.append(f"“{term}”的摘要（{href}）有 {len(text)} 字，不是一句：{text[:120]}…")
            if len(listed) >= 2:
                faults.append(f"“{term}”的摘要（{href}）是标题列表：{listed[:3]}")
    return faults


def test_snippets_show_the_matched_sentence_in_plain_text(built, browser):
    """Every result with a snippet shows one sentence in plain text: no TeX, no heading list; most hold the
    word searched (a match only in a heading shows that section's first sentence). Sphinx's own snippets
    (search.js refused) fail the same check: TeX source or the print-only heading list, and 240-character
    stretches."""
    found = snippets(built, browser, SNIPPET_TERMS)
    assert all(found[t] for t in SNIPPET_TERMS), found
    faults = snippet_faults(built, found)
    assert not faults, "\n".join(faults)
    holding = [t for t, results in found.items() for _, text in results if t.lower() in text.lower()]
    assert len(holding) >= 0.6 * sum(len(r) for r in found.values()), found
    sphinx_own = snippet_faults(built, snippets(built, browser, ["临界批大小"], refuse_search_js=True))
    assert any("TeX" in f or "标题列表" in f for f in sphinx_own) and any("不是一句" in f for f in sphinx_own), sphinx_own


PRERENDERED = ('<article class="bd-article"><h2>标题</h2><p>临界批大小 <mjx-container class="MathJax"><mjx-math>'
               '<mjx-c class="mjx-c1D435"></mjx-c></mjx-math><mjx-assistive-mml><math><msub><mi>B</mi><mtext>crit'
               '</mtext></msub></math></mjx-assistive-mml></mjx-container> 由噪声尺度决定。第二句。</p></article>')


def test_a_formula_reads_as_plain_text(built, browser):
    """search.js writes a formula's TeX as the reader reads it."""
    context = chromium.offline_context(browser)
    try:
        tab = context.new_page()
        tab.goto(built.page("search").as_uri(), wait_until="load")
        plain = tab.evaluate("""cases => cases.map(c => window.batchlabSearch.texToPlain(c))""",
                             [r"\(1/B\)", r"\(\operatorname{tr}(\Sigma)/|G|^2\)", r"\(B_{\text{crit}} = E_{\min}/S_{\min}\)",
                              r"\[\frac{p-1}{m+p-1}\]", r"\(\sqrt{B} \times \eta\)"])
        # a formula typeset at build time (mjx-container): its assistive MathML's text, not its glyphs
        summary = tab.evaluate("html => window.batchlabSearch.summary(html, ['临界批大小'], '')", PRERENDERED)
    finally:
        context.close()
    assert plain == ["1/B", "tr(Σ)/|G|^2", "Bcrit = Emin/Smin", "(p-1)/(m+p-1)", "√B × η"], plain
    assert summary == "临界批大小 Bcrit 由噪声尺度决定。", summary


def test_no_highlights_after_a_search(built, browser):
    """After a search, the next page opened shows no highlighted words and no 「隐藏搜索结果」 link (nav.js
    drops what searchtools.js stored for sphinx_highlight.js); with nav.js refused both appear."""
    seen = {}
    for refuse in (False, True):
        context = chromium.offline_context(browser)
        if refuse:
            context.route("**/_static/nav.js*", lambda r: r.abort())
        try:
            tab = context.new_page()
            tab.goto(built.page("search").as_uri() + "?q=" + "学习率", wait_until="load")
            tab.wait_for_function(chromium.script("search_done"))
            for doc in ("book/4.2-convergence", "book/4.6-misconceptions"):
                tab.goto(built.page(doc).as_uri(), wait_until="load")
                tab.wait_for_timeout(200)
                seen[refuse, doc] = tab.evaluate(chromium.script("search_highlights"))
        finally:
            context.close()
    assert seen[False, "book/4.2-convergence"] == [0, 0] and seen[False, "book/4.6-misconceptions"] == [0, 0], seen
    assert seen[True, "book/4.2-convergence"][0] > 0, seen
