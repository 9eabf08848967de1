import warnings
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from batchlab.formulas.pipeline_schedules import pipeline_timeline  # noqa: E402
from batchlab.ui import convergence, noise as noise_ui, pipeline, style  # noqa: E402


def test_setup_finds_the_installed_cjk_font():
    # The project installs fonts-noto-cjk (.ci/run, binder/apt.txt): a missing font is a failure here.
    assert style.setup() in style.CJK_FONTS
    assert matplotlib.rcParams["axes.unicode_minus"] is False


def test_chinese_figures_draw_without_missing_glyphs():
    style.setup()
    fig = pipeline.plot_pipeline_timeline(pipeline_timeline("1f1b", 4, 8))
    stats = SimpleNamespace(batch_sizes=[1, 2, 4], rel_error=[1.0, 0.7, 0.0], rel_error_theory=[1.0, 0.7, 0.0],
                            cosine=[0.3, 0.5, 1.0])  # the fields of a MinibatchError that the figure reads
    fig2 = noise_ui.plot_estimate_error(stats)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph … missing from font" is a UserWarning
        fig.canvas.draw()
        fig2.canvas.draw()
    assert "1F1B" in fig.axes[0].get_title() and "阶段 0" in [t.get_text() for t in fig.axes[0].get_yticklabels()]
    plt.close("all")


def test_training_curves_plot_steps_and_samples():
    import pytest

    from batchlab.measure.train import History

    style.setup()
    runs = [History(samples_seen=[b, 2 * b, 3 * b, 4 * b], eval_step=[0, 2, 4], eval_loss=[4.0, 3.0, 2.0],
                    config={"batch_size": b}) for b in (8, 32)]
    fig = convergence.plot_training_curves(runs, ["B=8", "B=32"], floor=1.5)
    left, right = fig.axes
    assert list(right.lines[1].get_xdata()) == [64, 128]  # samples = steps × B; step 0 left out
    assert len(convergence.plot_training_curves(runs, ["a", "b"], by_samples=False).axes) == 1
    # one legend for both panels, below them; each run differs in colour and line style
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["B=8", "B=32"]
    assert left.lines[0].get_linestyle() != left.lines[1].get_linestyle()
    with pytest.raises(ValueError, match="2 histories but 1 labels"):
        convergence.plot_training_curves(runs, ["B=8"])
    plt.close("all")
