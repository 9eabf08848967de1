"""The book's colours, shared by the matplotlib figures and the charts of the live explorers (a pure
module: the reader's browser imports it too)."""
from __future__ import annotations

__all__ = ["PALETTE", "OVERFLOW_COLOUR", "MEASURED_COLOUR", "ERROR_COLOUR", "WARNING_COLOUR", "FIT_COLOUR"]

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
OVERFLOW_COLOUR = PALETTE[3]
"""Red: what does not fit (a stage above the device's memory, a micro-batch size that does not fit)."""
MEASURED_COLOUR = "black"
ERROR_COLOUR = "#b00020"
WARNING_COLOUR = "#b06000"
FIT_COLOUR = "#2a7d2a"
