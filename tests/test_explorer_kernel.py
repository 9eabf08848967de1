"""An explorer run headless (nbclient, as ``jupyter nbconvert --execute`` and nbval run a chapter) sends no widget
traffic back to the kernel while its cell runs.

Chapter 4.5 hung in 2 of 14 loaded ``nbconvert --execute`` runs at its ``ExplorerWidget`` cell. The explorer drew
its figure by displaying inside ``with output:`` (an ``ipywidgets.Output``): the front end then captures the
kernel's output messages for the widget (nbclient registers an output hook for the cell's message id) and sends
every captured output back to the kernel as a ``comm_msg`` on the shell channel while the cell still runs — the
widget-traffic-against-the-executor shape. The explorer now sets the Output's ``outputs`` instead
(:func:`batchlab.ui.explorer_widget.drawn_outputs`): one state message from the kernel, nothing back, the same saved
state (the figure with its phone drawing in the metadata, as booktools.frozen reads it).
"""
from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

from batchlab.ui import style

pytestmark = pytest.mark.slow

SETUP = """import batchlab as bl
_ = bl.style.setup()
curve = bl.DEVICE_PRESETS["ascend-910b"].curve(bl.CASE_STUDY.job.model, "low")"""
EXPLORER = "w = bl.ExplorerWidget(bl.TradeoffExplorer(curve=curve, job=bl.CASE_STUDY_TUNED.job))\nw"
# the shape the explorer had: a figure displayed into an Output widget
CAPTURED = """import ipywidgets
out = ipywidgets.Output()
with out:
    bl.style.display_drawings(w.png, w.phone_png)
out"""


class CountingClient(NotebookClient):
    """nbclient, counting the output hooks it registers and the comm messages it sends to the kernel."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.hooks: list[str] = []
        self.sent: list[str] = []

    def register_output_hook(self, msg_id, hook) -> None:
        self.hooks.append(msg_id)
        send = hook.send
        hook.send = lambda *a, **kw: (self.sent.append(msg_id), send(*a, **kw))[1]
        super().register_output_hook(msg_id, hook)


def run(*sources: str) -> tuple[CountingClient, nbformat.NotebookNode]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    client = CountingClient(nb, kernel_name="python3", timeout=300)
    client.execute()
    return client, nb


def output_states(nb: nbformat.NotebookNode) -> list[list]:
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    return [m["state"].get("outputs", []) for m in state.values() if m["model_name"] == "OutputModel"]


def test_an_explorer_sends_nothing_back_while_its_cell_runs():
    client, nb = run(SETUP, EXPLORER)
    assert client.hooks == [] and client.sent == []
    (outputs,) = output_states(nb)   # the explorer's figure, saved as the page freezes it
    (figure,) = outputs
    assert figure["output_type"] == "display_data" and figure["data"]["image/png"]
    assert figure["metadata"][style.PHONE_METADATA]["image/png"]


def test_displaying_into_an_output_widget_is_traffic_the_check_sees():
    """The contrary case: the shape the explorer had makes nbclient capture and send back."""
    client, nb = run(SETUP, EXPLORER, CAPTURED)
    assert len(client.hooks) == 1 and client.sent
    explorer, captured = output_states(nb)
    assert captured and captured[0]["data"]["image/png"] == explorer[0]["data"]["image/png"]
