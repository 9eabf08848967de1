"""Measured memory (4.3): saved activations of the tiny GPT against the memory model, recomputation,
and the lecture's growth procedure surviving out-of-memory errors."""
import pytest
import torch

from batchlab.formulas.job import Job
from batchlab.formulas.memory import stage_activation_bytes
from batchlab.formulas.partition import partition_layers
from batchlab.formulas.presets import get_config
from batchlab.measure.memory import (MicroBatchTrial, find_micro_batch, is_out_of_memory, saved_activation_bytes,
                                     step_peak)
from batchlab.measure.model import GPT, next_token_loss

TINY = get_config("tiny")


def tokens(b, s, seed=0):
    x = torch.randint(0, TINY.vocab_size, (b, s), generator=torch.Generator().manual_seed(seed))
    return x, x


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("b, s", [(1, 16), (4, 32), (8, 64), (3, 48)])
def test_model_agrees_with_measurement_on_the_tiny_model(recompute, b, s):
    measured = saved_activation_bytes(GPT(TINY, recompute=recompute), *tokens(b, s))
    stage = partition_layers(TINY, 1)[0]
    job = Job(TINY, seq_len=s, global_batch=b, micro_batch_size=b, precision="fp32", recompute=recompute)
    modelled = stage_activation_bytes(job, stage)
    # the model leaves out LayerNorm statistics, the causal mask and scalars: ~1 %, always above
    assert modelled <= measured <= 1.03 * modelled


def test_activations_are_linear_in_the_micro_batch():
    model = GPT(TINY)
    one, two, four, eight = (saved_activation_bytes(model, *tokens(b, 32)) for b in (1, 2, 4, 8))
    slope = two - one  # a straight line in b: equal steps per added sequence
    assert four - two == 2 * slope and eight - four == 4 * slope
    # what does not grow with b (causal masks, positions, the loss scalar) is small
    assert 0 < one - slope < 0.01 * one


def test_recomputation_keeps_the_gradients():
    grads = {}
    for mode in ("none", "selective", "full"):
        model = GPT(TINY, recompute=mode)
        model.loss(*tokens(4, 32)).backward()
        grads[mode] = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    assert torch.allclose(grads["none"], grads["selective"], atol=1e-6)
    assert torch.allclose(grads["none"], grads["full"], atol=1e-6)


def test_cpu_step_peak_is_states_plus_activations():
    model = GPT(TINY)
    states = 2 * 4 * model.num_params()
    assert step_peak(model, *tokens(2, 32)) == states + saved_activation_bytes(model, *tokens(2, 32))


def job(s, b=1, **fields):
    """The tiny model's job at sequence length s; the finder starts at micro-batch b."""
    return Job(TINY, seq_len=s, global_batch=b, micro_batch_size=b, **fields)


def test_finder_returns_the_largest_fitting_size():
    model = GPT(TINY)
    budget = 20_000_000
    result = find_micro_batch(job(64), model, target_fraction=0.9, capacity_bytes=budget, limit=256)
    best = result.best
    assert step_peak(model, *tokens(best, 64)) <= 0.9 * budget < step_peak(model, *tokens(best + 1, 64))
    assert [r.micro_batch_size for r in result.tried][:3] == [1, 2, 4]
    assert (result.job, result.capacity_bytes, result.target_fraction) == (job(64), budget, 0.9)
    assert result.tried[0].peak_bytes == step_peak(model, *(t.clone() for t in tokens(1, 64)))  # two buffers
    # the job's own micro-batch is where the search starts; without a model the job's is built
    assert find_micro_batch(job(64, 4), capacity_bytes=budget, limit=256).tried[0].micro_batch_size == 4


def test_finder_measures_the_jobs_dropout():
    """Dropout is the job's: a memory run can have it, and its masks are then among the saved bytes."""
    plain = find_micro_batch(job(32), capacity_bytes=10**9, limit=2)
    dropped = find_micro_batch(job(32, dropout=0.1), capacity_bytes=10**9, limit=2)
    assert all(d.peak_bytes > p.peak_bytes for d, p in zip(dropped.tried, plain.tried))
    with pytest.raises(ValueError, match="与作业的"):
        find_micro_batch(job(32, dropout=0.1), GPT(TINY), capacity_bytes=10**9)


def test_finder_survives_a_simulated_out_of_memory_error():
    model = GPT(TINY)
    calls = []

    def loss_fn(logits, y):
        calls.append(logits.shape[0])
        if logits.shape[0] >= 6:
            raise torch.OutOfMemoryError("NPU out of memory. Tried to allocate 2.00 GiB")
        return next_token_loss(logits, y)

    result = find_micro_batch(job(16), model, capacity_bytes=10**9, loss_fn=loss_fn)
    assert result.best == 5
    assert MicroBatchTrial(micro_batch_size=8, peak_bytes=None, fraction=None, fits=False) in result.tried
    assert all(p.grad is None for p in model.parameters())  # nothing half-done left behind
    model.loss(*tokens(2, 16)).backward()                   # and the model still trains


def test_other_errors_are_not_swallowed():
    def broken(logits, y):
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        find_micro_batch(job(8), capacity_bytes=10**9, loss_fn=broken)
    assert is_out_of_memory(RuntimeError("NPU out of memory. Tried to allocate"))
    assert not is_out_of_memory(ValueError("out of memory"))
    with pytest.raises(ValueError, match="capacity_bytes：CPU 上没有"):
        find_micro_batch(job(8))


def test_measured_model_states_match_the_table_and_ignore_the_batch():
    from batchlab.formulas.memory import model_states
    from batchlab.measure.memory import model_state_bytes

    readings = []
    for b in (1, 8):
        model = GPT(TINY)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        model.loss(*tokens(b, 32)).backward()
        opt.step()
        readings.append(model_state_bytes(model, opt))
    assert readings[0] == readings[1]
    job = Job(TINY, seq_len=32, global_batch=1, micro_batch_size=1, precision="fp32", optimizer="adam")
    table = model_states(GPT(TINY).num_params(), job)
    n_tensors = len(list(GPT(TINY).parameters()))
    assert readings[0].parameters == table.parameters and readings[0].gradients == table.gradients
    # Adam also keeps one 4-byte step counter per parameter tensor, which the table leaves out
    assert readings[0].optimizer == table.optimizer + 4 * n_tensors
    assert readings[0].total == readings[0].parameters + readings[0].gradients + readings[0].optimizer


def test_search_at_gpt2_vocabulary_needs_no_dense_chain():
    # the lecture's procedure on a GPT-2-vocabulary job: the sequences are uniform ids (a peak does not
    # depend on which tokens), not the Markov corpus, whose dense chain would need ~30 GB of host memory
    wide = get_config("tiny", vocab_size=50257)
    job = Job(wide, seq_len=16, global_batch=1, micro_batch_size=1, precision="fp32")
    result = find_micro_batch(job, capacity_bytes=10**9, limit=2)
    assert [t.micro_batch_size for t in result.tried][0] == 1 and result.best >= 1
