import math
from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings, strategies as st

from batchlab.formulas.job import Job
from batchlab.formulas.presets import get_config
from batchlab.formulas.scaling import lr_schedule, scale_lr
from batchlab.measure.data import make_corpus
from batchlab.measure.model import GPT
from batchlab.measure.optim import Lamb
from batchlab.measure.train import History, evaluate, sweep, train


@pytest.fixture(scope="module")
def data():
    return make_corpus(48, 12, seed=3)


def flat_params(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


# ── the training loop ──────────────────────────────────────────────────────────────────────────────

# Not Adam: its first step is lr·g/(|g| + ε), which turns the 1e-9 rounding difference of a sum taken
# in another order into a 1e-6-sized step difference wherever |g| is near ε (1e-8). SGD is linear in
# the gradient and LAMB's ε is 1e-6, so they show what accumulation itself does.
@pytest.mark.parametrize("optimizer, atol", [("sgd", 1e-6), ("lamb", 1e-6)])
@pytest.mark.parametrize("steps", [1, 3])
def test_grad_accumulation_gives_the_same_parameters(data, optimizer, atol, steps):
    results = {}
    for k in (1, 2, 4):
        model = GPT(get_config("tiny"))
        hist = train(model, data, batch_size=16, steps=steps, optimizer=optimizer,
                     lr=0.1 if optimizer == "sgd" else 3e-3, num_microbatches=k, seed=5)
        results[k] = (flat_params(model), hist)
    start = flat_params(GPT(get_config("tiny")))
    base, base_hist = results[1]
    assert not torch.allclose(base, start, atol=1e-4)  # the runs did move the weights
    for k in (2, 4):
        params, hist = results[k]
        assert torch.allclose(params, base, atol=atol), f"num_microbatches={k}"
        # Same batches, whatever the accumulation: the losses agree step by step.
        assert hist.train_loss == pytest.approx(base_hist.train_loss, abs=1e-5)


def test_a_job_gives_the_batch_and_its_accumulation(data):
    """train(job=...): the batch and its micro-batch count are the job's (one record), the same run as stating
    them; the GPT must be the job's, dropout included."""
    job = Job(get_config("tiny"), seq_len=12, global_batch=16, micro_batch_size=4)
    by_job = train(GPT(get_config("tiny")), data, job=job, steps=2, lr=0.1, optimizer="sgd", seed=5)
    stated = train(GPT(get_config("tiny")), data, batch_size=16, num_microbatches=4, steps=2, lr=0.1,
                   optimizer="sgd", seed=5)
    assert by_job.train_loss == stated.train_loss
    assert (by_job.config["batch_size"], by_job.config["num_microbatches"]) == (16, job.num_microbatches) == (16, 4)
    dropped = replace(job, dropout=0.1)
    train(GPT(get_config("tiny", dropout=0.1)), data, job=dropped, steps=1, lr=0.1)  # training can have dropout
    with pytest.raises(ValueError, match="与作业的"):
        train(GPT(get_config("tiny")), data, job=dropped, steps=1, lr=0.1)
    with pytest.raises(ValueError, match="只能给一种"):
        train(GPT(get_config("tiny")), data, job=job, batch_size=16, steps=1, lr=0.1)
    with pytest.raises(ValueError, match="pipeline_stages = 1、data_parallel = 1"):
        train(GPT(get_config("tiny")), data, job=replace(job, pipeline_stages=2), steps=1, lr=0.1)
    with pytest.raises(ValueError, match="batch_size：请给出每步的序列数"):
        train(GPT(get_config("tiny")), data, steps=1, lr=0.1)


def test_history_records_each_step_and_evaluations(data):
    model = GPT(get_config("tiny"))
    held_out = make_corpus(16, 12, seed=3, sample_seed=99)
    hist = train(model, data, batch_size=8, steps=5, lr=3e-3, warmup_steps=2, decay="cosine",
                 eval_data=held_out, eval_every=2)
    assert hist.step == [1, 2, 3, 4, 5]
    assert hist.samples_seen == [8, 16, 24, 32, 40]
    assert hist.lr == [lr_schedule(s, 3e-3, 2, 5, "cosine") for s in range(1, 6)]
    assert hist.eval_step == [0, 2, 4, 5]
    assert hist.final_eval_loss == pytest.approx(evaluate(model, held_out))
    assert hist.eval_loss[-1] < hist.eval_loss[0]  # Adam at 3e-3 lowers the loss within 5 steps
    assert History().final_eval_loss is None


def test_same_seed_same_history_other_seed_other_batches(data):
    def run(seed):
        model = GPT(get_config("tiny"))
        return train(model, data, batch_size=8, steps=4, lr=3e-3, seed=seed), flat_params(model)

    (h1, p1), (h2, p2), (h3, _) = run(0), run(0), run(1)
    assert h1 == h2 and torch.equal(p1, p2)
    assert h1.train_loss != h3.train_loss


def test_dropout_run_is_reproducible_and_leaves_global_rng_alone(data):
    state = torch.random.get_rng_state()
    losses = []
    for _ in range(2):
        model = GPT(get_config("tiny", dropout=0.1))
        losses.append(train(model, data, batch_size=8, steps=2, lr=3e-3).train_loss)
    assert losses[0] == losses[1]
    assert torch.equal(torch.random.get_rng_state(), state)


def test_optimizer_factory_matches_the_named_one(data):
    runs = []
    for opt in ("sgd", lambda params, lr: torch.optim.SGD(params, lr=lr)):
        model = GPT(get_config("tiny"))
        train(model, data, batch_size=8, steps=2, optimizer=opt, lr=0.1)
        runs.append(flat_params(model))
    assert torch.equal(runs[0], runs[1])


def test_sweep_starts_every_run_from_the_same_weights(data):
    model = GPT(get_config("tiny"))
    before = flat_params(model)
    hists = sweep([{"batch_size": 8}, {"batch_size": 16, "lr": 6e-3}], model=model, data=data, steps=2, lr=3e-3)
    assert torch.equal(flat_params(model), before)  # the template is copied, never trained
    assert [h.config["batch_size"] for h in hists] == [8, 16] and hists[1].config["lr"] == 6e-3
    direct = train(GPT(get_config("tiny")), data, batch_size=8, steps=2, lr=3e-3)
    assert hists[0].train_loss == direct.train_loss
    built = sweep([{"batch_size": 8}], model=lambda: GPT(get_config("tiny")), data=data, steps=2, lr=3e-3)
    assert built[0].train_loss == direct.train_loss


@pytest.mark.parametrize("kwargs, message", [
    ({"batch_size": 30, "num_microbatches": 4}, "batch_size = 30 不能被 num_microbatches = 4 整除"),
    ({"batch_size": 100}, "batch_size = 100 超过了 len\\(data\\) = 48"),
    ({"batch_size": 0}, "batch_size = 0：必须是 ≥ 1 的整数"),
    ({"batch_size": 8, "steps": 0}, "steps = 0：必须是 ≥ 1 的整数"),
    ({"batch_size": 8, "lr": -1.0}, "lr = -1.0：必须是有限的正数"),
    ({"batch_size": 8, "optimizer": "rmsprop"}, "optimizer = 'rmsprop'：只能取 sgd, adam, adamw, lamb 之一"),
    ({"batch_size": 8, "warmup_steps": 5}, "warmup_steps = 5 超过了 total_steps = 3"),
    ({"batch_size": 8, "decay": "linear"}, "decay = 'linear'：只能取 'constant', 'cosine' 之一"),
])
def test_bad_training_inputs_raise_with_a_message(data, kwargs, message):
    args = {"steps": 3, "lr": 1e-3, **kwargs}
    with pytest.raises(ValueError, match=message):
        train(GPT(get_config("tiny")), data, **args)


def test_sweep_needs_model_and_data(data):
    with pytest.raises(ValueError, match="configs 为空"):
        sweep([], data=data)
    with pytest.raises(ValueError, match="第 0 次运行缺少 'model'"):
        sweep([{"batch_size": 8}], data=data, steps=1, lr=1e-3)


# ── learning-rate schedule and scaling rules ───────────────────────────────────────────────────────

@given(base=st.floats(1e-5, 10.0), warmup=st.integers(1, 60), extra=st.integers(0, 60),
       decay=st.sampled_from(["constant", "cosine"]))
def test_warmup_rises_monotonically_to_base_lr(base, warmup, extra, decay):
    total = warmup + extra
    lrs = [lr_schedule(s, base, warmup, total, decay) for s in range(1, warmup + 1)]
    assert lrs[0] == pytest.approx(base / warmup)
    assert all(a <= b for a, b in zip(lrs, lrs[1:]))
    assert lrs[-1] == pytest.approx(base)


@given(base=st.floats(1e-5, 10.0), warmup=st.integers(0, 50), decay_steps=st.integers(1, 300))
def test_cosine_falls_monotonically_and_ends_near_zero(base, warmup, decay_steps):
    total = warmup + decay_steps
    lrs = [lr_schedule(s, base, warmup, total, "cosine") for s in range(warmup + 1, total + 1)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))
    assert all(v > 0 for v in lrs)  # every update moves the weights
    # ½(1 − cos x) = sin²(x/2) ≤ x²/4 with x = π/(decay_steps + 1): the last step is tiny.
    assert lrs[-1] <= base * (math.pi / (decay_steps + 1)) ** 2 / 4 * (1 + 1e-9)
    assert lr_schedule(total, base, warmup, total, "constant") == base


def test_schedule_rejects_bad_arguments():
    with pytest.raises(ValueError, match="需要 total_steps"):
        lr_schedule(1, 1e-3, decay="cosine")
    with pytest.raises(ValueError, match="step = 0：必须是 ≥ 1 的整数"):
        lr_schedule(0, 1e-3)
    with pytest.raises(ValueError, match="step = 11 超过了 total_steps = 10"):
        lr_schedule(11, 1e-3, total_steps=10)
    with pytest.raises(ValueError, match="base_lr = 0：必须是有限的正数"):
        lr_schedule(1, 0)


def test_scaling_rules_on_known_numbers():
    assert scale_lr(0.1, 256, 8192, "linear") == pytest.approx(3.2)  # Goyal et al.: 0.1 per 256 images
    assert scale_lr(1e-3, 32, 128, "sqrt") == pytest.approx(2e-3)
    assert scale_lr(1e-3, 32, 128, "none") == 1e-3
    with pytest.raises(ValueError, match="rule = 'cubic'：只能取 'linear', 'sqrt', 'none' 之一"):
        scale_lr(1e-3, 32, 64, "cubic")
    with pytest.raises(ValueError, match="base_batch = 0：必须是 ≥ 1 的整数"):
        scale_lr(1e-3, 0, 64)


@given(lr=st.floats(1e-6, 1.0), a=st.integers(1, 4096), b=st.integers(1, 4096), c=st.integers(1, 4096),
       rule=st.sampled_from(["linear", "sqrt", "none"]))
def test_scaling_in_two_hops_equals_one_hop(lr, a, b, c, rule):
    assert scale_lr(scale_lr(lr, a, b, rule), b, c, rule) == pytest.approx(scale_lr(lr, a, c, rule), rel=1e-9)


# ── LAMB ───────────────────────────────────────────────────────────────────────────────────────────

def test_lamb_two_steps_match_a_hand_computation():
    lr, b1, b2, eps, wd = 0.1, 0.9, 0.999, 1e-6, 0.01
    w = torch.nn.Parameter(torch.tensor([3.0, -4.0], dtype=torch.float64))
    opt = Lamb([w], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    hand_w, m, v = [3.0, -4.0], [0.0, 0.0], [0.0, 0.0]
    for t, grad in enumerate(([0.5, -0.1], [-0.2, 0.3]), start=1):
        w.grad = torch.tensor(grad, dtype=torch.float64)
        opt.step()
        m = [b1 * mi + (1 - b1) * g for mi, g in zip(m, grad)]
        v = [b2 * vi + (1 - b2) * g * g for vi, g in zip(v, grad)]
        u = [(mi / (1 - b1 ** t)) / (math.sqrt(vi / (1 - b2 ** t)) + eps) + wd * wi
             for mi, vi, wi in zip(m, v, hand_w)]
        ratio = math.hypot(*hand_w) / math.hypot(*u)
        hand_w = [wi - lr * ratio * ui for wi, ui in zip(hand_w, u)]
        assert w.tolist() == pytest.approx(hand_w, rel=1e-12)
    assert opt.state[w]["step"] == 2


@settings(deadline=None, max_examples=40)
@given(seed=st.integers(0, 10_000), grad_scale=st.floats(1e-4, 1e4), lr=st.floats(1e-4, 0.5))
def test_lamb_moves_every_layer_by_lr_times_its_norm(seed, grad_scale, lr):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(5, 3), (3,), (2, 2, 2)]
    params = [torch.nn.Parameter(torch.randn(s, generator=gen, dtype=torch.float64) * (i + 1))
              for i, s in enumerate(shapes)]
    zero = torch.nn.Parameter(torch.zeros(4, dtype=torch.float64))  # like a bias at init
    opt = Lamb([*params, zero], lr=lr)
    before = [p.detach().clone() for p in params]
    for p in [*params, zero]:
        p.grad = torch.randn(p.shape, generator=gen, dtype=torch.float64) * grad_scale
    adam_step = zero.grad / (zero.grad.abs() + 1e-6)  # m̂/(√v̂ + ε) after one step
    opt.step()
    for p, w0 in zip(params, before):
        # The gradient's scale drops out: the step is lr·‖w‖ for every tensor.
        assert float((p.detach() - w0).norm()) == pytest.approx(lr * float(w0.norm()), rel=1e-9)
    # ‖w‖ = 0: trust ratio 1, a plain bias-corrected Adam step.
    assert torch.allclose(zero.detach(), -lr * adam_step, rtol=1e-9, atol=0)


def test_lamb_clamp_bounds_the_weight_norm_in_the_ratio():
    w = torch.nn.Parameter(torch.tensor([3.0, -4.0], dtype=torch.float64))
    opt = Lamb([w], lr=0.1, clamp=(0.0, 1.0))
    w.grad = torch.tensor([1.0, 1.0], dtype=torch.float64)
    opt.step()
    assert float((w.detach() - torch.tensor([3.0, -4.0], dtype=torch.float64)).norm()) == pytest.approx(0.1)
    assert opt.state[w]["trust_ratio"] == pytest.approx(1.0 / math.sqrt(2), rel=1e-5)


@pytest.mark.parametrize("kwargs, message", [
    ({"lr": 0.0}, "lr = 0.0 must be positive"),
    ({"betas": (0.9, 1.0)}, r"betas\[1\] = 1.0 must lie in \[0, 1\)"),
    ({"weight_decay": -0.1}, "weight_decay = -0.1 must be ≥ 0"),
    ({"clamp": (2.0, 1.0)}, "must be \\(lo, hi\\) with 0 ≤ lo ≤ hi"),
])
def test_lamb_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Lamb([torch.nn.Parameter(torch.ones(2))], **kwargs)


def test_lamb_trains_the_tiny_model(data):
    model = GPT(get_config("tiny"))
    hist = train(model, data, batch_size=16, steps=8, optimizer="lamb", lr=0.02)
    assert hist.train_loss[-1] < hist.train_loss[0] - 0.1


def test_steps_to_target_reads_the_first_eval_below_target():
    from batchlab.measure.train import History, steps_to_target

    h = History(eval_step=[0, 4, 8, 12], eval_loss=[4.0, 3.0, 2.5, 2.4], config={"batch_size": 16})
    assert steps_to_target(h, 2.6) == 8
    assert steps_to_target(h, 3.0) == 4
    assert steps_to_target(h, 1.0) is None
    with pytest.raises(ValueError, match="没有验证损失"):
        steps_to_target(History(), 1.0)


def test_steps_to_target_forgives_float_rounding_only():
    """Runs equal in exact arithmetic land 1e-7 apart, on either side of a shared target by the CPU's
    rounding: within the tolerance they reach it; a real gap of 1e-3 does not."""
    from batchlab.measure.train import History, steps_to_target

    target = 1.5713921785354614
    tied = History(eval_step=[31, 32], eval_loss=[1.6, 1.571392297744751])  # measured: accumulation vs one batch
    behind = History(eval_step=[31, 32], eval_loss=[1.6, target * 1.001])
    assert steps_to_target(tied, target) == 32
    assert steps_to_target(behind, target) is None
    assert steps_to_target(tied, target, rtol=0.0) is None


@given(b=st.floats(0.5, 1e5), noise=st.floats(0.5, 1e5))
def test_steps_and_samples_over_min_trade_off(b, noise):
    from batchlab.formulas.scaling import samples_over_min, steps_over_min

    s, e = steps_over_min(b, noise), samples_over_min(b, noise)
    assert s > 1 and e > 1
    # McCandlish et al. 2018: (S/S_min − 1)(E/E_min − 1) = 1 for every batch size.
    assert (s - 1) * (e - 1) == pytest.approx(1.0)


def test_critical_batch_doubles_both_costs():
    from batchlab.formulas.scaling import samples_over_min, steps_over_min

    assert steps_over_min(64, 64) == samples_over_min(64, 64) == 2.0
    with pytest.raises(ValueError, match="noise_scale = 0"):
        steps_over_min(8, 0)


def test_fit_recovers_the_model_and_rejects_a_flat_line():
    from batchlab.formulas.scaling import fit_steps_samples, steps_over_min

    sizes = [8, 32, 128, 512]
    steps = [100 * steps_over_min(b, 40) for b in sizes]       # S_min = 100, B_noise = 40
    fit = fit_steps_samples(sizes, steps)
    assert fit["s_min"] == pytest.approx(100) and fit["b_noise"] == pytest.approx(40)
    assert fit["e_min"] == pytest.approx(4000)
    with pytest.raises(ValueError, match="模型不适用"):
        fit_steps_samples(sizes, [10 + b for b in sizes])     # steps growing with B: no such model
