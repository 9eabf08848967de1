import warnings
from dataclasses import replace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from batchlab.formulas.presets import get_config
from batchlab.formulas.scaling import scale_lr  # noqa: E402
from batchlab.measure.data import make_corpus  # noqa: E402
from batchlab.measure.model import GPT  # noqa: E402
from batchlab.measure.noise import gradient_cloud, minibatch_error, per_sample_grads  # noqa: E402
from batchlab.ui import noise as noise_ui, style  # noqa: E402
from batchlab.page.noise import LR_CHOICES, NoiseExplorer, lr_choices  # noqa: E402
from batchlab.page.numbers import scientific  # noqa: E402
from batchlab.ui.explorer_widget import ExplorerWidget  # noqa: E402

SIZES = [1, 2, 4, 8, 16, 32, 64]


def widget(*args, **kwargs) -> ExplorerWidget:
    """The noise explorer as the chapter shows it."""
    return ExplorerWidget(NoiseExplorer(*args, **kwargs))


@pytest.fixture(scope="module", autouse=True)
def book_style():
    # The book's fonts (as every chapter sets them), undone after this module.
    with matplotlib.rc_context():
        style.setup()
        yield


@pytest.fixture(scope="module")
def tiny_grads():
    data = make_corpus(64, 16, seed=1)
    return per_sample_grads(GPT(get_config("tiny")), data.inputs, data.targets, chunk_size=32)


@pytest.fixture(scope="module")
def precomputed(tiny_grads):
    return gradient_cloud(tiny_grads, SIZES, num_draws=150, seed=0), minibatch_error(tiny_grads, SIZES, 150, 0)


def test_cloud_shrinks_as_the_batch_grows(precomputed):
    cloud, _ = precomputed
    spread = [float(np.linalg.norm(p - cloud.center, axis=1).mean()) for p in cloud.points]
    assert all(a > b for a, b in zip(spread, spread[1:])), spread
    assert spread[-1] == pytest.approx(0.0, abs=1e-9)  # B = N: every draw is G itself
    # Doubling B shrinks the spread by about √2 (with the finite-population factor, a bit more).
    assert spread[0] / spread[2] == pytest.approx(2.0, rel=0.25)


def test_cloud_coordinates_are_the_projection_onto_e1_and_e2():
    # Small P, so the plane can be built the slow way (SVD of the P-dimensional vectors) and compared.
    gen = torch.Generator().manual_seed(2)
    ps = torch.randn(40, 30, generator=gen, dtype=torch.float64) * torch.linspace(0.2, 2.0, 30) + 1.0
    cloud = gradient_cloud(ps, [1, 40], num_draws=60, seed=0)
    full = ps.mean(dim=0)
    e1 = full / full.norm()
    sideways = (ps - full) - ((ps - full) @ e1)[:, None] * e1
    e2 = torch.linalg.svd(sideways, full_matrices=False).Vh[0]
    coords = torch.stack([ps @ e1, ps @ e2], dim=1).numpy()
    single = cloud.points[0]  # B = 1: each point is one sample's coordinates (e2's sign is free)
    for x, y in single:
        assert np.isclose(coords[:, 0], x).any() and np.isclose(np.abs(coords[:, 1]), abs(y)).any()
    assert cloud.center == pytest.approx([float(full.norm()), 0.0], abs=1e-9)
    assert np.allclose(cloud.points[1], cloud.center)
    assert 0.0 < cloud.captured <= 1.0 and cloud.num_samples == 40


def test_cloud_rejects_bad_input(tiny_grads):
    with pytest.raises(ValueError, match="batch_size = 65：不能超过样本总数 num_samples = 64"):
        gradient_cloud(tiny_grads, [1, 65])
    with pytest.raises(ValueError, match="‖G‖ = 0"):
        gradient_cloud(torch.tensor([[1.0, 0.0], [-1.0, 0.0]]), [1])


def explorer_lr(explorer):
    c = {k: w.value for k, w in explorer.controls.items()}
    return scale_lr(c["base_lr"], c["base_batch"], c["batch_size"], c["lr_rule"])


@pytest.mark.parametrize("control, value", [
    ("batch_size", 64), ("lr_rule", "sqrt"), ("lr_rule", "none"), ("base_batch", 8), ("base_lr", 1e-2),
])
def test_every_control_changes_the_summary(precomputed, control, value):
    cloud, stats = precomputed
    explorer = widget(cloud, stats, base_batch=32, base_lr=3e-3, batch_size=16)
    before = explorer.summary.value
    explorer.controls[control].value = value
    after = explorer.summary.value
    assert after != before
    i = stats.batch_sizes.index(explorer.controls["batch_size"].value)
    assert f"B = <b>{explorer.controls['batch_size'].value}</b>" in after
    assert f"{stats.rel_error[i]:.3f}" in after and f"{stats.cosine[i]:.3f}" in after
    assert f"学习率 <b>{scientific(explorer_lr(explorer))}</b>" in after


def test_summary_names_the_rule_and_its_numbers(precomputed):
    cloud, stats = precomputed
    explorer = widget(cloud, stats, base_batch=16, base_lr=1e-3, batch_size=64)
    assert "线性缩放" in explorer.summary.value and "学习率 <b>4.0×10⁻³</b>" in explorer.summary.value
    explorer.controls["lr_rule"].value = "sqrt"
    assert "平方根缩放" in explorer.summary.value and "学习率 <b>2.0×10⁻³</b>" in explorer.summary.value


@pytest.mark.parametrize("base_lr", [3e-3, 1e-3, 2.5e-4])
def test_the_slider_shows_the_base_rate_the_code_sets(precomputed, base_lr):
    """Issue 28: a log slider snapped 3e-3 to its nearest step, 10^-2.5, and the frozen view (and the PDF)
    showed 3.2e-3. The slider's stops are fixed values, labelled as the summary writes them."""
    cloud, stats = precomputed
    explorer = widget(cloud, stats, base_batch=32, base_lr=base_lr)
    slider = explorer.controls["base_lr"]
    assert slider.value == base_lr and slider.label == scientific(base_lr)
    assert f"基准学习率 {slider.label}" in explorer.summary.value
    assert set(LR_CHOICES) <= {v for _, v in lr_choices(base_lr)}
    with pytest.raises(ValueError, match="base_lr"):
        widget(cloud, stats, base_lr=3.0)


def test_the_chapters_frozen_slider_shows_the_chapters_base_rate():
    """The stored widget state of 4.2 (what the HTML page before it goes live, and the PDF, draw): the
    base-rate slider's label at its index is the rate the chapter's code passes, in the summary's format."""
    import re

    import nbformat

    from booktools import ROOT

    nb = nbformat.read(ROOT / "book" / "4.2-convergence.ipynb", as_version=4)
    call = next(c.source for c in nb.cells if c.cell_type == "code" and "bl.NoiseExplorer(" in c.source)
    base_lr = float(re.search(r"base_lr=([0-9.e+-]+)", call).group(1))
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    sliders = [m["state"] for m in state.values() if m["state"].get("description") == "基准学习率"]
    assert len(sliders) == 1 and sliders[0]["_options_labels"][sliders[0]["index"]] == scientific(base_lr)
    summaries = [m["state"]["value"] for m in state.values() if "基准学习率" in str(m["state"].get("value", ""))]
    assert summaries and all(f"基准学习率 {scientific(base_lr)}" in v for v in summaries)


def test_explorer_moves_points_without_leaking_figures(precomputed):
    cloud, stats = precomputed
    open_before = plt.get_fignums()
    explorer = widget(cloud, stats)
    cloud_ax, curve_ax = explorer.figure.axes
    artists = (len(cloud_ax.get_children()), len(curve_ax.get_children()))
    images = set()
    for b in SIZES:
        explorer.controls["batch_size"].value = b
        offsets = cloud_ax.collections[0].get_offsets()
        assert np.allclose(offsets, cloud.points[SIZES.index(b)])
        assert explorer.png.startswith(b"\x89PNG")
        images.add(explorer.png)
    assert len(images) == len(SIZES)  # every B shows a different picture
    assert (len(cloud_ax.get_children()), len(curve_ax.get_children())) == artists  # moved, not redrawn
    # Blitting marks artists as animated only while it draws the background: savefig still shows them.
    assert not any(a.get_animated() for ax in explorer.figure.axes for a in noise_ui.updated_artists(ax))
    assert plt.get_fignums() == open_before


def test_explorer_rejects_mismatched_inputs(precomputed):
    cloud, stats = precomputed
    short = replace(stats, batch_sizes=stats.batch_sizes[:3])
    with pytest.raises(ValueError, match="梯度云的批大小 \\[8, 16, 32, 64\\] 在 stats 里没有"):
        widget(cloud, short)
    with pytest.raises(ValueError, match="lr_rule = 'cubic'：只能取 'linear', 'sqrt', 'none' 之一"):
        widget(cloud, stats, lr_rule="cubic")


def test_plots_keep_fixed_limits_and_draw_all_glyphs(precomputed):
    cloud, stats = precomputed
    limits = []
    for b in (1, 64):
        fig = noise_ui.plot_gradient_cloud(cloud, b)
        limits.append((fig.axes[0].get_xlim(), fig.axes[0].get_ylim()))
        fig2 = noise_ui.plot_variance_curve(stats, b)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "Glyph … missing from font" is a UserWarning
            fig.canvas.draw()
            fig2.canvas.draw()
        plt.close(fig)
        plt.close(fig2)
    assert limits[0] == limits[1]  # the axes stay put, so the reader sees the cloud shrink
    with pytest.raises(ValueError, match="batch_size = 3：不在梯度云的批大小"):
        noise_ui.plot_gradient_cloud(cloud, 3)
