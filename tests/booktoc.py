"""What the book's _toc.yml lists, shared by the notebook and HTML checks."""
from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TOC = ROOT / "_toc.yml"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def toc_entries(toc_path: Path = TOC) -> list[str]:
    """Every `file:` (and the root) of a jb-book/jb-article _toc.yml, in order."""
    data = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    found: list[str] = [data["root"]] if data.get("root") else []

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                found.append(node["file"])
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(data)
    return found
