import pytest
import torch

from batchlab.formulas.noise import expected_sq_error
from batchlab.formulas.presets import get_config
from batchlab.measure.data import make_corpus
from batchlab.measure.model import GPT
from batchlab.measure.noise import gradient_trace_cov, minibatch_error, per_sample_grads


@pytest.fixture(scope="module")
def grads():
    data = make_corpus(64, 16, seed=1)
    model = GPT(get_config("tiny"))
    return model, data, per_sample_grads(model, data.inputs, data.targets, chunk_size=32)


def test_per_sample_mean_equals_autograd_gradient(grads):
    model, data, ps = grads
    assert ps.shape == (64, model.num_params())
    model.zero_grad()
    model.loss(data.inputs, data.targets).backward()
    full = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    assert torch.allclose(ps.mean(0), full, atol=1e-6)
    model.zero_grad()
    model.loss(data.inputs[:1], data.targets[:1]).backward()
    first = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    assert torch.allclose(ps[0], first, atol=1e-6)


def test_measured_error_follows_tr_sigma_over_b(grads):
    _, _, ps = grads
    stats = minibatch_error(ps, [1, 4, 16, 64], num_draws=400, seed=0)
    # 400 draws: the mean of a squared error has a relative spread of a few percent; 15% is generous
    # and still catches a wrong power of B (a factor of 2 at B = 4).
    for measured, theory in zip(stats.sq_error[:3], stats.sq_error_theory[:3]):
        assert measured == pytest.approx(theory, rel=0.15)
    assert stats.sq_error[3] == pytest.approx(0.0, abs=1e-6)  # B = N is the full gradient
    assert list(stats.cosine) == sorted(stats.cosine) and stats.cosine[-1] == pytest.approx(1.0)


def test_trace_cov_of_known_points():
    ps = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 2.0], [0.0, -2.0]])
    assert gradient_trace_cov(ps) == pytest.approx((1 + 1 + 4 + 4) / 4)


def test_minibatch_error_reports_the_infinite_data_law_and_rejects_bad_input():
    ps = torch.randn(32, 5, generator=torch.Generator().manual_seed(0))
    stats = minibatch_error(ps, [1, 4], num_draws=10)
    trace = gradient_trace_cov(ps)
    assert stats.sq_error_iid == pytest.approx((trace, trace / 4))
    assert stats.sq_error_theory[1] == pytest.approx(trace / 4 * 28 / 31)
    with pytest.raises(ValueError, match="num_draws = 0"):
        minibatch_error(ps, [1], num_draws=0)
    with pytest.raises(ValueError, match="batch_size = 2.5：必须是 ≥ 1 的整数"):
        minibatch_error(ps, [2.5])


def test_one_over_b_law_with_ordinary_autograd_gradients(grads):
    """Independent of the per-sample/Gram route: draw real mini-batches, backpropagate each, and
    compare E‖G_B − G‖² with tr(Σ)/B · (N−B)/(N−1)."""
    model, data, ps = grads
    full = ps.mean(0)
    trace = gradient_trace_cov(ps)
    gen = torch.Generator().manual_seed(5)
    for b in (4, 16):
        errors = []
        for _ in range(60):
            idx = torch.randperm(len(data), generator=gen)[:b]
            model.zero_grad()
            model.loss(data.inputs[idx], data.targets[idx]).backward()
            g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
            errors.append(float((g - full).pow(2).sum()))
        # 60 draws: the mean of a squared error spreads by roughly √(2/60) ≈ 18%; 40% still rejects a
        # wrong power of B (a factor 4 between these two sizes) and a missing finite-population factor
        # would not matter here, so the test is about the law, not the correction.
        assert sum(errors) / len(errors) == pytest.approx(expected_sq_error(trace, b, len(data)), rel=0.4)
