"""Numbers for people: each formatter's output, and tables that right-align them and show no Python repr."""
import math

import pytest
from hypothesis import given, strategies as st

from batchlab.page.numbers import Formatted, count, estimate, flops_rate, percent, ratio, scientific, size
from batchlab.ui.tables import text_table


def test_formats():
    assert count(1_557_611_200) == "1,557,611,200"
    assert percent(0.36608) == "36.6%" and percent(1.25, 0) == "125%"
    assert size(23.43 * 2**30) == "23.4 GiB" and size(6.25 * 2**20) == "6.2 MiB" and size(512) == "512 B"
    assert flops_rate(2.8e14) == "280 TFLOP/s" and flops_rate(1.3e11) == "0.130 TFLOP/s"
    assert estimate(174729.906) == "175,000" and estimate(0.08612) == "0.0861"
    assert scientific(1.09e-7) == "1.1×10⁻⁷" and scientific(0.0) == "0" and scientific(9.96e-3) == "1.0×10⁻²"
    assert ratio(1.5938) == "1.59×"
    assert all(isinstance(f, Formatted) for f in (count(1), percent(0.1), size(1), scientific(1.0)))


@given(st.floats(min_value=1e-12, max_value=1e12))
def test_scientific_round_trips_to_two_figures(x):
    mantissa, exponent = scientific(x).split("×10")
    value = float(mantissa) * 10 ** int(exponent.translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")))
    assert 1.0 <= abs(float(mantissa)) < 10.0
    assert value == pytest.approx(x, rel=0.051)


def test_tables_right_align_formatted_numbers_and_show_no_repr():
    table = text_table(["设置", "显存", "放得下", "备注"], [["a", size(2**31), True, None], ["bb", size(2**20), False, "x"]])
    assert table.numeric == (False, True, False, False)
    assert table.cells == (("a", "2.0 GiB", "是", "—"), ("bb", "1.0 MiB", "否", "x"))
    assert "True" not in table.text and "None" not in table.text


def test_sentence_helpers():
    from batchlab.page.numbers import labelled, listed
    assert listed([0.51234, 0.49, 3]) == "0.512、0.490、3"
    assert listed([1.0, 2.0], digits=1, sep="，") == "1.0，2.0"
    assert listed([]) == ""
    assert labelled({"基线": 12, "微批次 ×2": 9}) == "基线 12，微批次 ×2 9"
    assert labelled({"a": "1、2", "b": "3"}, sep="；") == "a 1、2；b 3"


def test_span_scales_both_ends():
    from batchlab.page.numbers import span
    assert span((2.8e14, 3.5e14), scale=1e12) == "280–350"
    assert span((1.6e12, 1.8e12), 1, 1e12) == "1.6–1.8"
    assert span((150.4, 218.75)) == "150–219"
    assert span((1.6384e12, 1.6384e12), 2, 1e12) == "1.64"  # one figure prints once
    with pytest.raises(ValueError):
        span((1.0,))


def test_a_gap_at_float32_rounding_says_so_instead_of_its_digits():
    from batchlab.lecture.verdicts import FLOAT32_ROUNDING, SAME_UPDATE_TOLERANCE, same_update
    from batchlab.page.numbers import float_gap
    noise = "< 10⁻⁶（float32 舍入）"
    for g in (0.0, 9.1e-8, 1.1e-7, 2.2e-7, math.nextafter(FLOAT32_ROUNDING, 0)):  # just below the threshold
        assert float_gap(g) == noise and isinstance(float_gap(g), Formatted)
    assert float_gap(FLOAT32_ROUNDING) == "1.0×10⁻⁶"                              # at it: a number again
    assert float_gap(math.nextafter(FLOAT32_ROUNDING, 1)) == "1.0×10⁻⁶"           # just above
    assert float_gap(3.3e-2) == scientific(3.3e-2) == "3.3×10⁻²"
    # One rule: the text names the threshold (10⁻⁶), and "same update" allows ten times it (10⁻⁵, as 4.6's
    # criterion says), so every gap shown as rounding noise is the same update.
    assert FLOAT32_ROUNDING == 1e-6 and SAME_UPDATE_TOLERANCE == 1e-5
    assert same_update(math.nextafter(FLOAT32_ROUNDING, 0)) and same_update(SAME_UPDATE_TOLERANCE)
    assert not same_update(math.nextafter(SAME_UPDATE_TOLERANCE, 1))


def test_a_rounding_gap_is_one_right_aligned_number_in_a_table():
    from batchlab.page.numbers import float_gap
    table = text_table(["做法", "相对差异"], [["累积", float_gap(1.5e-7)], ["BatchNorm", float_gap(3.3e-2)]])
    assert table.numeric == (False, True)
    assert table.cells[0][1] == "< 10⁻⁶（float32 舍入）" and "1.5" not in table.text + table.html()


def test_one_format_per_quantity():
    from batchlab.page.numbers import dropout, learning_rate, seconds, throughput
    assert learning_rate(3e-3) == "3.0×10⁻³" and learning_rate(3e-3 * 8 ** 0.5) == "8.5×10⁻³"
    assert learning_rate(0.024) == "2.4×10⁻²" and learning_rate(0.1) == "1.0×10⁻¹"
    assert learning_rate(30.0) == "30" and learning_rate(30 * 2 ** 0.5) == "42.4" and learning_rate(339.4) == "339"
    assert throughput(3200) == "3,200 tokens/s" and throughput(160_935.2) == "161,000 tokens/s"
    assert throughput(20000, unit=False) == "20,000" and isinstance(throughput(1.0), Formatted)
    assert dropout(0.1) == "0.1" and dropout(0.0) == "0"
    assert seconds(0.75) == "0.750 秒" and seconds(0.4071) == "0.407 秒" and seconds(12.345) == "12.3 秒"


def test_symbols_render_once_per_medium():
    from batchlab.page.symbols import html, mathtext, tex, typeset
    assert tex("B_noise") == r"$B_\text{noise}$" and tex("G_B") == "$G_B$"
    assert html("S_min") == "<i>S</i><sub>min</sub>" and html("G_B") == "<i>G</i><sub><i>B</i></sub>"
    assert mathtext("E_min") == r"$E_\mathrm{min}$"
    label = typeset("S/{S_min} 预测 <{B_simple}>")
    assert label == "S/S_min 预测 <B_simple>"
    assert label.__html__() == "S/<i>S</i><sub>min</sub> 预测 &lt;<i>B</i><sub>simple</sub>&gt;"
    table = text_table(["B", label], [[1, 2.0]])
    assert "<sub>min</sub>" in table.html() and "S/S_min" in table.text and "&lt;<i>B" in table.html()
    with pytest.raises(ValueError):
        tex("B_nois")
