"""Read Ascend cards from ``npu-smi info``: :func:`read_npu_smi` runs the tool, :func:`parse_npu_smi`
parses its text into one :class:`NpuCard` per card, and :func:`sample_text` returns a sample output
shipped with the package (``samples/``), so a chapter can parse one wherever its copy runs.

This module does not import torch (nor any batchlab module that does), so it loads instantly, works
on hosts where torch_npu or CANN is broken, and is covered by the torch-free tests.

Reading the numbers: ``HBM-Usage(MB)`` is the whole card as the driver sees it, for every process,
including the NPU runtime and torch's allocator cache. An idle 910B card already shows about 3 GB in
use (firmware and runtime), so compare readings against an idle baseline rather than against zero.
For the bytes that torch's allocator holds in this process, use
:func:`batchlab.measure.device_memory.memory_info` instead.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from importlib import resources

__all__ = ["NpuCard", "SAMPLES", "parse_npu_smi", "read_npu_smi", "sample_text"]

SAMPLES = ("npu-smi-23.0-8cards", "npu-smi-24.1-2cards")
"""The sample outputs in ``samples/`` (``<name>.txt``): the compact 23.0 layout with 8 cards, and
the wider 24.1 layout with 2 cards and a process table."""


@dataclass
class NpuCard:
    """One card as reported by ``npu-smi info`` (MB are the tool's MiB-sized units)."""

    npu_id: int
    chip: int
    name: str
    health: str
    power_w: float | None
    temp_c: float | None
    aicore_percent: float | None
    hbm_used_mb: int
    hbm_total_mb: int
    bus_id: str

    @property
    def hbm_fraction(self) -> float:
        """Used share of HBM, 0..1 (0 when the total is unknown)."""
        return self.hbm_used_mb / self.hbm_total_mb if self.hbm_total_mb else 0.0


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _tokens(cell: str) -> list[str]:
    # 'used / total', 'used/ total' and 'used /total' all become one token 'used/total',
    # so a ratio counts as a single field whatever the padding.
    return re.sub(r"\s*/\s*", "/", cell).split()


def _blocks(text: str) -> list[list[list[str]]]:
    """Rows of cells, grouped by the ``+---+`` / ``+===+`` separator lines."""
    blocks: list[list[list[str]]] = []
    current: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("+"):
            if current:
                blocks.append(current)
            current = []
        elif line.startswith("|"):
            current.append(_cells(line))
    if current:
        blocks.append(current)
    return blocks


def _row_fields(header: list[str], row: list[str]) -> dict[str, str]:
    """Map each header token to its value, cell by cell, so column widths do not matter."""
    fields: dict[str, str] = {}
    for head_cell, value_cell in zip(header, row):
        names, values = _tokens(head_cell), _tokens(value_cell)
        if len(values) > len(names) and "Name" in names:
            # A name with spaces: give the extra tokens to 'Name'.
            i = names.index("Name")
            extra = len(values) - len(names)
            values = values[:i] + [" ".join(values[i : i + extra + 1])] + values[i + extra + 1 :]
        if len(values) != len(names):
            raise ValueError(f"npu-smi row {' | '.join(row)!r} does not match header cell {head_cell!r}")
        fields.update(zip(names, values))
    return fields


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:  # 'NA' and similar placeholders
        return None


def _ratio(value: str | None, what: str) -> tuple[int, int]:
    if value is None:
        raise ValueError(f"npu-smi card table has no {what} column")
    used, _, total = value.partition("/")
    return int(used), int(total)


def parse_npu_smi(text: str) -> list[NpuCard]:
    """Parse ``npu-smi info`` output into one :class:`NpuCard` per card.

    Rows are split on ``|``; each card is a pair of rows matched against the two header
    rows, so older compact and newer wider layouts both work. The process table that
    follows the card table is ignored.

    Raises:
        ValueError: no card table, a header without cards, or rows that do not fit the header.
    """
    blocks = _blocks(text)
    header: list[list[str]] | None = None
    cards: list[NpuCard] = []
    for block in blocks:
        flat = " ".join(" ".join(row) for row in block)
        if header is None:
            tokens = flat.split()
            if "Name" in tokens and "Health" in tokens and len(block) >= 2:
                header = block[:2]
            continue
        if "Process" in flat and ("Process id" in flat or "Process name" in flat):
            break  # the process table starts: no more cards
        if len(block) % 2:
            raise ValueError(f"npu-smi card block has {len(block)} rows; expected pairs: {block!r}")
        for first, second in zip(block[::2], block[1::2]):
            fields = _row_fields(header[0], first)
            fields.update(_row_fields(header[1], second))
            used, total = _ratio(fields.get("HBM-Usage(MB)"), "HBM-Usage(MB)")
            cards.append(
                NpuCard(
                    npu_id=int(fields["NPU"]),
                    chip=int(fields.get("Chip", "0")),
                    name=fields.get("Name", ""),
                    health=fields.get("Health", ""),
                    power_w=_number(fields.get("Power(W)")),
                    temp_c=_number(fields.get("Temp(C)")),
                    aicore_percent=_number(fields.get("AICore(%)")),
                    hbm_used_mb=used,
                    hbm_total_mb=total,
                    bus_id=fields.get("Bus-Id", ""),
                )
            )
    if header is None:
        raise ValueError("no npu-smi card table found (expected a header row with 'NPU', 'Name' and 'Health')")
    if not cards:
        raise ValueError("npu-smi card table has a header but no card rows")
    return cards


def read_npu_smi() -> list[NpuCard] | None:
    """Run ``npu-smi info`` and parse it; ``None`` when npu-smi is not on PATH.

    Errors from a present but failing npu-smi (driver problems) propagate.
    """
    exe = shutil.which("npu-smi")
    if exe is None:
        return None
    result = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=60, check=True)
    return parse_npu_smi(result.stdout)


def sample_text(name: str) -> str:
    """The text of the sample ``npu-smi info`` output ``name`` (one of :data:`SAMPLES`), read from the
    installed package, so it does not depend on the working directory.

    Raises:
        ValueError: ``name`` is not one of :data:`SAMPLES` (one Chinese line listing them).
    """
    if name not in SAMPLES:
        raise ValueError(f"没有名为 {name!r} 的 npu-smi 样例，可选：{'、'.join(SAMPLES)}")
    return (resources.files("batchlab.measure") / "samples" / f"{name}.txt").read_text(encoding="utf-8")
