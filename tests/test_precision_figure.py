"""batchlab.ui.precision: the figure of 4.8's 「bf16 下的梯度累积：累积的精度」 is legible on a desk and a phone, draws
the bf16 criterion, leaves exact zeros off its log axis, and refuses what it cannot draw."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from batchlab.lecture.accumulation_precision import ACCUMULATORS, equivalence_tolerance  # noqa: E402
from batchlab.ui import style  # noqa: E402
from batchlab.ui.precision import ACCUMULATOR_SHORT, plot_accumulation_error  # noqa: E402
from tests.test_figures_legible import min_text_points, phone_png_points  # noqa: E402

COUNTS = (1, 2, 4, 8, 16, 32, 64)
# shaped like batchlab.measure.accumulation.accumulation_error's result (the measured decades, no torch)
ERRORS = {"fp32": {m: 0.0 if m == 1 else 1e-8 * m for m in COUNTS},
          "bf16": {m: 2.2e-3 * m ** 0.45 for m in COUNTS},
          "bf16-kahan": {m: 2.2e-3 for m in COUNTS},
          "bf16-fp32-main": {m: 2.2e-3 / m ** 0.3 for m in COUNTS}}


@pytest.fixture(autouse=True)
def book_style():
    with matplotlib.rc_context():
        style.setup()
        yield
    plt.close("all")


@pytest.mark.parametrize("allreduce", [None, ERRORS])
def test_desk_and_phone_drawings_are_legible_and_fit(allreduce):
    desk = plot_accumulation_error(ERRORS, allreduce)
    assert min_text_points(desk, tight=True) >= style.MIN_TEXT_PT
    assert desk.get_tightbbox(desk.canvas.get_renderer()).width * desk.dpi <= style.COLUMN_PX * 1.1
    phone = plot_accumulation_error(ERRORS, allreduce, layout="phone")
    width, points = phone_png_points(phone)
    assert width <= style.PHONE_PX and points >= style.MIN_TEXT_PT


def test_one_line_per_accumulator_the_criterion_drawn_and_zeros_left_out():
    fig = plot_accumulation_error(ERRORS, ERRORS)
    for ax in fig.axes:
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert {ACCUMULATOR_SHORT[n] for n in ACCUMULATORS} <= set(lines)
        assert list(lines[ACCUMULATOR_SHORT["fp32"]].get_xdata()) == list(COUNTS[1:])  # m = 1 is exactly 0
        assert list(lines[ACCUMULATOR_SHORT["bf16"]].get_xdata()) == list(COUNTS)
        criterion = [line for name, line in lines.items() if "2u" in name]
        assert len(criterion) == 1 and set(criterion[0].get_ydata()) == {equivalence_tolerance("bfloat16")}
    assert len(fig.axes) == 2 and len(plot_accumulation_error(ERRORS).axes) == 1


def test_it_refuses_an_unknown_layout_or_accumulator():
    with pytest.raises(ValueError, match="desk"):
        plot_accumulation_error(ERRORS, layout="tablet")
    with pytest.raises(ValueError, match="fp16"):
        plot_accumulation_error({**ERRORS, "fp16": {1: 1e-3}})
    with pytest.raises(ValueError):
        plot_accumulation_error({})


def test_the_tables_show_one_figure_and_the_verdicts():
    from batchlab.ui.precision import accumulation_table, error_reading, training_table

    text = str(accumulation_table(ERRORS, ERRORS))
    assert "不成立" in text and text.count("成立") == 8                  # bf16 fails both, the rest hold
    assert str(error_reading(1.43e-2)) == "1×10⁻²" and str(error_reading(2.6e-7)) == "< 10⁻⁶"
    curves = {"fp32": [4.17, 3.0], "bf16": [4.17, 3.001], "bf16-fp32-main": [4.17, 3.02]}
    rows = str(training_table(curves)).splitlines()[1:]
    assert "< 0.01" in rows[0] and rows[0].endswith("成立") and "0.02" in rows[1] and rows[1].endswith("不成立")
    with pytest.raises(ValueError):
        training_table({"bf16": [1.0]})
