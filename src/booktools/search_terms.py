"""Write book/_search_terms.txt, the words the book's search must find, from the glossary and the titles.

Sphinx's search page splits a query only at spaces and punctuation, while the index holds the words
jieba cut the pages into; a term jieba does not know (屋顶线, 梯度累积) is cut into pieces in the index
and then never matches the whole term a reader types. The file lists every Chinese term of
book/glossary.md (first column, the part before any parenthesis), so the glossary stays the one list of
the book's terms, and every phrase of a toc page's title (`title_phrases`: 显存占用, 批大小调优). It
serves twice: as jieba's user dictionary (`html_search_options: dict` in _config.yml), so the index cuts
these words whole, and as the list `booktools.sphinxext` looks up in each page's text, so a page that
uses a word is indexed under it however jieba cut the sentence around it (学习率 inside 的学习率会).
usage: .venv/bin/python -m booktools.search_terms [--check]
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from booktools import ROOT
from booktools.toc import resolve_entry, toc_entries

GLOSSARY = ROOT / "book" / "glossary.md"
OUT = ROOT / "book" / "_search_terms.txt"
CJK = re.compile(r"[\u4e00-\u9fff]")
CJK_WORD = re.compile(r"[\u4e00-\u9fff]{2,}")
# High enough that jieba keeps each term whole instead of preferring its own split. A title word jieba
# already knows more often (影响, 训练) keeps its own frequency: lowering it would re-cut other sentences.
FREQUENCY = 1000
# Where searchtools.js splits a query (Sphinx 7.4's splitQuery: at anything but a letter, a digit or an
# emoji): a term with such a character (同分布，非同一次更新) is looked up as its parts.
QUERY_SPLIT = re.compile(r"[\W_]+")


AVOID = "不用的说法"
"""The glossary section listing wordings the book does not use: not terms, so not in the dictionary."""


def glossary_tables(text: str) -> dict[str, list[list[str]]]:
    """The glossary's Markdown tables by their '## ' heading: {heading: rows of cells}, each table's header
    row and separator dropped. The one reader of the glossary's layout (tests/test_glossary.py uses it too)."""
    tables: dict[str, list[list[str]]] = {}
    heading = ""
    for line in text.splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
        elif line.startswith("|") and not re.match(r"^\|[-| ]+\|$", line):
            tables.setdefault(heading, []).append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return {h: rows[1:] for h, rows in tables.items()}


def glossary_terms(text: str) -> list[str]:
    """Chinese terms in the first column of the glossary's tables (the part before any parenthesis;
    the '不用的说法' table excluded)."""
    terms = [re.split(r"[（(]", row[0])[0].strip()
             for heading, rows in glossary_tables(text).items() if heading != AVOID for row in rows]
    return list(dict.fromkeys(t for t in terms if CJK.search(t) and " " not in t))


def _glossary() -> list[str]:
    return glossary_terms(GLOSSARY.read_text(encoding="utf-8"))


def _jieba():
    """jieba with the glossary's terms in its dictionary, as the book's search index first cut the pages."""
    import jieba

    jieba.setLogLevel(60)
    jieba.initialize()
    for term in _glossary():
        jieba.add_word(term, FREQUENCY)
    return jieba


def toc_titles() -> list[str]:
    """The title (the first `# ` heading) of every page the toc lists, in toc order."""
    import nbformat

    titles = []
    for entry in toc_entries():
        path = resolve_entry(entry)[0]
        text = ("\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
                if path.suffix == ".ipynb" else path.read_text(encoding="utf-8"))
        titles.append(re.search(r"^# (.+)$", text, re.MULTILINE).group(1).strip())
    return titles


def title_phrases(title: str, cut=None) -> list[str]:
    """The phrases of a title a reader may search for. The title is cut into jieba's words (the glossary's
    terms in its dictionary); consecutive words of two or more Chinese characters form a run, which a
    one-character word (对、的、与、在、上、时、中) or anything not Chinese (a space, a colon, NPU) ends; every
    run and every consecutive part of it is a phrase. "4.3 批大小对显存占用的影响" → 批大小, 显存占用, 显存,
    占用, 影响; "4.5 案例拆解：在 NPU 上训练 GPT-2 时的批大小调优" → 案例拆解, 案例, 拆解, 训练, 批大小调优,
    批大小, 调优. `cut` defaults to that jieba's."""
    runs, run = [], []
    for word in [*(cut or _jieba().cut)(title), ""]:
        if CJK_WORD.fullmatch(word):
            run.append(word)
        elif run:
            runs.append(run)
            run = []
    return list(dict.fromkeys("".join(r[i:j]) for r in runs
                              for i in range(len(r)) for j in range(len(r), i, -1)))


def search_terms() -> list[str]:
    """Every term the book's search must find, as a reader types it: the glossary's Chinese terms, then
    each toc page's title phrases (`title_phrases`), each once."""
    cut = _jieba().cut
    return list(dict.fromkeys(_glossary() + [p for t in toc_titles() for p in title_phrases(t, cut)]))


def query_words(term: str) -> list[str]:
    """The words the search page looks up when a reader types `term`: the query split where
    searchtools.js splits it (most terms are one word)."""
    return [w for w in QUERY_SPLIT.split(term) if w]


def dictionary() -> str:
    """book/_search_terms.txt: one `word frequency n` line per word of `search_terms()` (jieba's format)."""
    freq = _jieba().dt.FREQ
    glossary = set(_glossary())
    words = dict.fromkeys(w for term in search_terms() for w in query_words(term))
    return "".join(f"{w} {FREQUENCY if w in glossary else max(FREQUENCY, freq.get(w, 0))} n\n" for w in words)


def read_words(path: Path = OUT) -> list[str]:
    """The words book/_search_terms.txt lists (its first column), in order."""
    return [line.split()[0] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        if OUT.read_text(encoding="utf-8") != dictionary():
            print(f"{OUT.relative_to(ROOT)} 与术语表、章节标题不一致：运行 .venv/bin/python -m booktools.search_terms",
                  file=sys.stderr)
            return 1
        return 0
    OUT.write_text(dictionary(), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
