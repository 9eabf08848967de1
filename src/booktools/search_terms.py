"""Write book/_search_terms.txt, jieba's user dictionary for the book's search, from the glossary.

Sphinx's search page splits a query only at spaces and punctuation, while the index holds the words
jieba cut the pages into; a term jieba does not know (屋顶线, 梯度累积) is cut into pieces in the index
and then never matches the whole term a reader types. Every Chinese term of book/glossary.md (first
column, the part before any parenthesis) goes into the dictionary, so the glossary stays the one
list of the book's terms. usage: .venv/bin/python -m booktools.search_terms [--check]
"""
from __future__ import annotations

import re
import sys

from booktools import ROOT

GLOSSARY = ROOT / "book" / "glossary.md"
OUT = ROOT / "book" / "_search_terms.txt"
CJK = re.compile(r"[\u4e00-\u9fff]")
# High enough that jieba keeps each term whole instead of preferring its own split.
FREQUENCY = 1000


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


def dictionary() -> str:
    return "".join(f"{term} {FREQUENCY} n\n" for term in glossary_terms(GLOSSARY.read_text(encoding="utf-8")))


def main(argv: list[str]) -> int:
    if "--check" in argv:
        if OUT.read_text(encoding="utf-8") != dictionary():
            print(f"{OUT.relative_to(ROOT)} 与术语表不一致：运行 .venv/bin/python -m booktools.search_terms", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(dictionary(), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
