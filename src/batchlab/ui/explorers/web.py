"""The explorers' entry for the published page: book/_js/live.js calls these two functions through
Pyodide, with JSON text in and JSON text out, so the page holds no formula and no second copy of one.

``start(name, context)`` answers the controls and the first panel; ``update(name, context, values,
changed)`` the panel after the control ``changed`` moved (with the values that control moved in turn).
Whatever the page sends is checked by the explorer's own rules (:meth:`Explorer.check_values`); a refused
value answers the rule's wording, never a traceback.
"""
from __future__ import annotations

import json

from batchlab.ui.explorers.batch import BatchExplorer
from batchlab.ui.explorers.memory import MemoryExplorerSpec
from batchlab.ui.explorers.noise import NoiseExplorerSpec
from batchlab.ui.explorers.spec import Explorer, Panel, render_error_html
from batchlab.ui.explorers.tradeoff import TradeoffExplorerSpec

__all__ = ["EXPLORERS", "answer", "start", "update"]

EXPLORERS: dict[str, type[Explorer]] = {cls.name: cls for cls in (BatchExplorer, MemoryExplorerSpec,
                                                                 TradeoffExplorerSpec, NoiseExplorerSpec)}
"""Every explorer the page can run, by the name its marker carries."""


def answer(explorer: Explorer, values: dict, panel: Panel) -> dict:
    """What the page shows: the controls (with their current values), the summary and the chart."""
    try:
        controls = [c.as_record() for c in explorer.controls(values)]
    except ValueError:
        controls = None  # the page keeps the controls it has
    return {"values": values, "controls": controls, "summary_html": panel.summary_html,
            "chart": panel.chart, "error": panel.error}


def _explorer(name: str, context_json: str) -> Explorer:
    if name not in EXPLORERS:
        raise ValueError(f"explorer = {name!r}：可选 {', '.join(EXPLORERS)}")
    return EXPLORERS[name].from_context(json.loads(context_json))


def start(name: str, context_json: str) -> str:
    """The explorer's controls and first panel, as JSON text."""
    explorer = _explorer(name, context_json)
    values = explorer.initial_values()
    return json.dumps(answer(explorer, values, explorer.compute(values)), ensure_ascii=False)


def update(name: str, context_json: str, values_json: str, changed: str) -> str:
    """The panel after the control ``changed`` moved to the value in ``values_json``, as JSON text."""
    explorer = _explorer(name, context_json)
    values = json.loads(values_json)
    try:
        values = explorer.follow(values, changed)
    except (ValueError, KeyError, TypeError) as err:
        message = str(err)
        return json.dumps(answer(explorer, values, Panel(render_error_html(message), error=message)),
                          ensure_ascii=False)
    return json.dumps(answer(explorer, values, explorer.compute(values)), ensure_ascii=False)
