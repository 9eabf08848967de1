"""Numbers for people: one formatter for every table, figure label and printed line of the book.

Each function returns a :class:`Formatted` string — text, but a number to :func:`batchlab.ui.tables.text_table`,
which right-aligns it. Bytes are shown in binary units (GiB = 2³⁰ bytes, as ``npu-smi`` and the memory model
count), rates in TFLOP/s, fractions as percentages, model estimates with the significant figures a model
deserves, and tiny numbers in scientific notation instead of a row of zeros — except a gap at float32 rounding
level, whose digits are noise (:func:`float_gap`).

One format per quantity, across prose, tables, outputs, explorers and the CLI (tests/test_number_formats.py reads
every page for a second one): a learning rate is :func:`learning_rate` (3.0×10⁻³), a throughput
:func:`throughput` (3,200 tokens/s, three significant figures), a dropout rate :func:`dropout` (0.1), a percentage
:func:`percent` (one decimal at most, no space), a duration :func:`seconds` (0.407 秒, three significant figures).
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

from batchlab.lecture.verdicts import FLOAT32_ROUNDING, FLOAT32_ROUNDING_EXPONENT

__all__ = ["Formatted", "count", "decimal", "percent", "size", "flops_rate", "estimate", "scientific", "float_gap", "ratio",
           "listed", "labelled", "span", "learning_rate", "throughput", "dropout", "seconds", "PLAIN_RANGE", "series",
           "SERIES_SHOWN"]

_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


class Formatted(str):
    """A number already formatted for readers (a table right-aligns it)."""


def count(n: int) -> Formatted:
    """A whole number with thousands separators: 1,557,611,200."""
    return Formatted(f"{int(n):,}")


def decimal(x: float, digits: int = 2) -> Formatted:
    """A decimal number with ``digits`` places (thousands separated)."""
    return Formatted(f"{x:,.{digits}f}")


def percent(fraction: float, digits: int = 1) -> Formatted:
    """A fraction as a percentage: 0.3661 → 36.6%."""
    return Formatted(f"{100 * fraction:.{digits}f}%")


def size(nbytes: float, digits: int = 1) -> Formatted:
    """Bytes in the largest binary unit that keeps the number ≥ 1: 25159499776 → 23.4 GiB; below 1 KiB, bytes."""
    for unit, scale in _UNITS:
        if abs(nbytes) >= scale:
            return Formatted(f"{nbytes / scale:,.{digits}f} {unit}")
    return Formatted(f"{int(nbytes):,} B")


def flops_rate(flops_per_second: float) -> Formatted:
    """FLOP/s in TFLOP/s, three significant figures: 2.8e14 → 280 TFLOP/s, 1.3e11 → 0.130 TFLOP/s."""
    return Formatted(f"{_significant(flops_per_second / 1e12, 3)} TFLOP/s")


def estimate(x: float, figures: int = 3) -> Formatted:
    """A model's estimate to ``figures`` significant figures, thousands separated: 174729.9 → 175,000."""
    return Formatted(_significant(x, figures))


def scientific(x: float, figures: int = 2) -> Formatted:
    """A small (or huge) number as m×10ⁿ: 1.09e-07 → 1.1×10⁻⁷; 0 stays 0."""
    if x == 0:
        return Formatted("0")
    exponent = math.floor(math.log10(abs(x)))
    mantissa = x / 10**exponent
    if round(abs(mantissa), figures - 1) >= 10:  # 9.96 → 10.0: carry into the exponent
        mantissa, exponent = mantissa / 10, exponent + 1
    return Formatted(f"{mantissa:.{figures - 1}f}×10{str(exponent).translate(_SUPERSCRIPT)}")


def float_gap(x: float, figures: int = 2, say_why: bool = True) -> Formatted:
    """A relative gap between two float32 computations of the same quantity. Below
    :data:`~batchlab.lecture.verdicts.FLOAT32_ROUNDING` its digits are rounding noise that changes with the CPU's
    vector instructions, so it says what it means: 1.1e-07 → < 10⁻⁶（float32 舍入）, or only "< 10⁻⁶" with
    ``say_why=False`` (a table whose text says it, where the note would wrap every cell); above,
    :func:`scientific`."""
    if abs(x) < FLOAT32_ROUNDING:
        bound = f"< 10{str(FLOAT32_ROUNDING_EXPONENT).translate(_SUPERSCRIPT)}"
        return Formatted(f"{bound}（float32 舍入）" if say_why else bound)
    return scientific(x, figures)


def learning_rate(lr: float) -> Formatted:
    """A learning rate: below 1 as m.m×10⁻ⁿ (3e-3 → 3.0×10⁻³, 3e-3×√8 → 8.5×10⁻³, 0.1 → 1.0×10⁻¹); from 1 up
    (4.6's SGD rates) to three significant figures without trailing zeros (30, 42.4, 339)."""
    if abs(lr) >= 1:
        return Formatted(f"{lr:.3g}")
    return scientific(lr, 2)


def throughput(tokens_per_second: float, unit: bool = True) -> Formatted:
    """Tokens per second to three significant figures, thousands separated: 3200 → 3,200 tokens/s,
    160935.2 → 161,000 tokens/s (a model's estimate and a report's round figure read alike); ``unit=False``
    for a table column whose header names the unit."""
    number = _significant(tokens_per_second, 3)
    return Formatted(f"{number} tokens/s" if unit else number)


def dropout(rate: float) -> Formatted:
    """A dropout rate as its shortest decimal: 0.1 → 0.1, 0.0 → 0 (never 0.10 or 0.100)."""
    return Formatted(f"{rate:g}")


def seconds(s: float) -> Formatted:
    """A duration in seconds to three significant figures: 0.75 → 0.750 秒, 0.4071 → 0.407 秒, 12.345 → 12.3 秒."""
    return Formatted(f"{_significant(s, 3)} 秒")


def ratio(x: float, digits: int = 2) -> Formatted:
    """A dimensionless factor: 1.59 → 1.59×."""
    return Formatted(f"{x:.{digits}f}×")


def listed(values: Iterable[object], digits: int = 3, sep: str = "、") -> str:
    """Values in a row for a sentence: floats to ``digits`` places, anything else as written — 0.512、0.498."""
    return sep.join(f"{v:.{digits}f}" if isinstance(v, float) else str(v) for v in values)


def labelled(values: Mapping[str, object], sep: str = "，") -> str:
    """Each label followed by its value, in a row for a sentence: 基线 12，微批次 ×2 9."""
    return sep.join(f"{label} {value}" for label, value in values.items())


def span(bounds: Sequence[float], digits: int = 0, scale: float = 1.0) -> str:
    """A low–high range, both ends divided by ``scale`` to ``digits`` places: (2.8e14, 3.5e14), scale 1e12 → 280–350;
    ends that print the same print once (a preset with one figure: 1.64, not 1.64–1.64)."""
    low, high = bounds
    low_text, high_text = f"{low / scale:.{digits}f}", f"{high / scale:.{digits}f}"
    return low_text if low_text == high_text else f"{low_text}–{high_text}"


SERIES_SHOWN = 8
"""The most values :func:`series` writes out; a longer row shows its first six and last two around an ellipsis."""


def series(values: Iterable[object], shown: int = SERIES_SHOWN) -> str:
    """A row of values in brackets, each written as given (format numbers first): [12, 12, 12, 12]. Past
    ``shown`` values, the first ``shown`` − 2 and the last two around an ellipsis, then how many there are —
    [1,024, 1,023, 1,022, 1,021, 1,020, 1,019, …, 2, 1]（共 1,024 个）— so a row of a thousand stages stays one
    readable line."""
    items = [str(v) for v in values]
    if len(items) <= shown:
        return "[" + ", ".join(items) + "]"
    return "[" + ", ".join([*items[:shown - 2], "…", *items[-2:]]) + f"]（共 {count(len(items))} 个）"


PLAIN_RANGE = (1e-4, 1e15)
"""The magnitudes written as plain decimals by the significant-figure formats (:func:`estimate`, :func:`throughput`,
:func:`flops_rate`, :func:`seconds`); outside them (a value no chapter meets, but a reader may type) they write
m×10ⁿ (:func:`scientific`), never a row of 300 zeros."""


def _significant(x: float, figures: int) -> str:
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    if not PLAIN_RANGE[0] <= abs(x) < PLAIN_RANGE[1]:
        return scientific(x, figures)
    magnitude = math.floor(math.log10(abs(x)))
    decimals = figures - 1 - magnitude
    rounded = round(x, decimals)
    return f"{rounded:,.{max(decimals, 0)}f}"
