"""Tensor parallelism, ZeRO-1 and interleaving in the communication count and the modelled step (issue 30 §2):
each count against a hand count, each refusal against the input that trips it."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import assume, given, strategies as st

from batchlab.formulas.comm import (allreduce_bytes, p2p_messages, step_communication,
                                    tensor_parallel_bytes_per_layer, zero1_bytes)
from batchlab.formulas.job import Job
from batchlab.formulas.memory import device_params
from batchlab.formulas.pipeline_schedules import bubble_fraction, runnable
from batchlab.formulas.presets import get_config
from batchlab.formulas.roofline import DEVICE_PRESETS, RateCurve, roofline_curve
from batchlab.formulas.throughput import model_step

MEDIUM = get_config("gpt2-medium")  # 16 heads: t ∈ {1, 2, 4, 8, 16}
JOB = Job(MEDIUM, seq_len=1024, global_batch=32, micro_batch_size=2, pipeline_stages=4, data_parallel=2,
          precision="bf16-mixed")
LINK = 100e9


@given(t=st.sampled_from([1, 2, 4, 8]), b=st.integers(1, 4), cp=st.sampled_from([1, 2, 4]),
       recompute=st.sampled_from(["none", "selective", "full"]))
def test_tensor_parallel_bytes_are_four_ring_allreduces_of_the_activations_per_layer(t, b, cp, recompute):
    job = replace(JOB, micro_batch_size=b, global_batch=b * 2 * 4, tensor_parallel=t, context_parallel=cp,
                  recompute=recompute)
    tensor = b * (1024 // cp) * 1024 * 2  # [b, s/cp, h] in bf16
    collectives = 6 if recompute == "full" else 4  # 2 forward (+ 2 recomputed) + 2 backward
    assert tensor_parallel_bytes_per_layer(job) == pytest.approx(collectives * 2 * (t - 1) / t * tensor)
    if t > 1:  # sequence parallelism: all-gather + reduce-scatter instead of each all-reduce, the same bytes
        assert tensor_parallel_bytes_per_layer(replace(job, sequence_parallel=True)) == \
            tensor_parallel_bytes_per_layer(job)


def test_step_communication_counts_tp_and_zero1_and_leaves_t1_alone():
    plain = step_communication(JOB)
    assert plain.tensor_parallel_bytes == 0
    assert plain.allreduce_bytes == allreduce_bytes(max(s.params for s in JOB.stages) * 2, 2)
    tp = step_communication(replace(JOB, tensor_parallel=4))
    layers, m = 6, JOB.num_microbatches
    assert tp.tensor_parallel_bytes == pytest.approx(m * layers * 4 * 2 * 3 / 4 * 2 * 1024 * 1024 * 2)
    largest = max(device_params(replace(JOB, tensor_parallel=4), s) for s in JOB.stages)
    assert tp.allreduce_bytes == allreduce_bytes(largest * 2, 2) < plain.allreduce_bytes
    # ZeRO-1 under Megatron's fp32 gradients: reduce-scatter 4 B + all-gather 2 B per parameter, (n − 1)/n each
    megatron = replace(JOB, zero1=True, fp32_grads=True, context_parallel=2)
    largest = max(s.params for s in JOB.stages)
    assert step_communication(megatron).allreduce_bytes == zero1_bytes(4 * largest, 2 * largest, 4) \
        == pytest.approx(3 / 4 * 6 * largest)
    assert step_communication(replace(megatron, zero1=False)).allreduce_bytes == pytest.approx(2 * 3 / 4 * 4 * largest)


@given(p=st.integers(1, 6), v=st.integers(1, 4), m=st.integers(1, 12))
def test_interleaving_multiplies_the_boundaries_zbv_keeps_its_middle_on_one_device(p, v, m):
    loop = p * v - 1 if p > 1 else 0
    assert p2p_messages(p, m, v, "interleaved-1f1b") == 2 * loop * m
    assert p2p_messages(p, m, 2, "zero-bubble") == 2 * (2 * p - 2) * m
    assert p2p_messages(p, m) == 2 * (p - 1) * m
    if p > 1 and v > 1:
        assert p2p_messages(p, m, v, "interleaved-1f1b") > p2p_messages(p, m)


def test_sequence_parallel_boundaries_send_a_t_th_of_the_activations():
    job = replace(JOB, tensor_parallel=4)
    assert step_communication(replace(job, sequence_parallel=True)).p2p_bytes * 4 == step_communication(job).p2p_bytes
    assert step_communication(replace(job, context_parallel=2)).p2p_bytes * 2 == step_communication(job).p2p_bytes


def test_model_step_adds_the_tp_collectives_and_splits_the_flops():
    flat = RateCurve((1, 10**6), (1e14, 1e14), tensor_parallel=4)
    job = replace(JOB, tensor_parallel=4)
    step = model_step(job, flat, link_bandwidth=LINK)
    layers = 6  # 24 layers over 4 stages; the last stage also runs the head
    assert step.tensor_parallel_seconds == pytest.approx(layers * tensor_parallel_bytes_per_layer(job) / LINK)
    one = model_step(JOB, RateCurve((1, 10**6), (1e14, 1e14)))
    assert step.slot_seconds - step.tensor_parallel_seconds == pytest.approx(one.slot_seconds / 4)
    assert step.step_seconds == pytest.approx(step.slot_seconds * (JOB.num_microbatches + 3))


def test_model_step_refuses_a_curve_of_another_t_and_a_missing_link_bandwidth():
    job = replace(JOB, tensor_parallel=2)
    with pytest.raises(ValueError, match="tensor_parallel = 1 的矩阵乘"):
        model_step(job, RateCurve((1, 10), (1e12, 1e12)), link_bandwidth=LINK)
    with pytest.raises(ValueError, match="需要卡间带宽 link_bandwidth"):
        model_step(job, RateCurve((1, 10), (1e12, 1e12), tensor_parallel=2))
    # the 910B preset has no link figure with a source; the A100's has, and the curve carries it
    with pytest.raises(ValueError, match="需要卡间带宽"):
        model_step(job, DEVICE_PRESETS["ascend-910b"].curve(MEDIUM, tensor_parallel=2))
    a100 = DEVICE_PRESETS["a100-sxm-80gb"].curve(MEDIUM, tensor_parallel=2)
    assert a100.link_bandwidth == 300e9 and model_step(job, a100).tensor_parallel_seconds > 0


@given(p=st.sampled_from([2, 4]), k=st.integers(1, 4), v=st.sampled_from([2, 3]))
def test_the_step_follows_the_schedules_bubble(p, k, v):
    config = get_config("gpt2", n_layer=12)
    m = k * p
    assume(runnable("interleaved-1f1b", p, m, v) and config.n_layer % (p * v) == 0)
    job = Job(config, seq_len=256, global_batch=m, micro_batch_size=1, pipeline_stages=p)
    curve = RateCurve((1, 10**6), (1e13, 1e13))
    plain = model_step(job, curve)
    inter = model_step(replace(job, schedule="interleaved-1f1b", virtual_stages=v), curve)
    assert inter.bubble_fraction == bubble_fraction(p, m, "interleaved-1f1b", v) < plain.bubble_fraction
    assert inter.step_seconds == pytest.approx(inter.slot_seconds * (m + (p - 1) / v))
    assert inter.tokens_per_second > plain.tokens_per_second


@given(t=st.sampled_from([2, 4, 8, 16]))
def test_tensor_parallelism_moves_the_roofline_point_down(t):
    # [M, h] × [h, 4h/t]: a narrower matmul at the same rows reaches no more of the peak, and at some M less
    one, split = (roofline_curve(MEDIUM, 300e12, 1.6e12, tensor_parallel=k) for k in (1, t))
    assert all(a <= b for a, b in zip(split.flops_per_second, one.flops_per_second))
    assert split.flops_per_second[0] < one.flops_per_second[0]


def test_a_link_bandwidth_needs_a_source():
    from batchlab.formulas.roofline import DevicePeak
    with pytest.raises(ValueError, match="卡间带宽也必须写明数据来源"):
        DevicePeak("x", 1e12, 1e11, "a source", link_bandwidth=1e9)
    assert DevicePeak("x", 1e12, 1e11, "a source", link_bandwidth=1e9, link_source="opened page").link_bandwidth == 1e9
    with pytest.raises(ValueError, match="link_bandwidth"):
        RateCurve((1, 10), (1e12, 1e12), link_bandwidth=0)
    with pytest.raises(ValueError, match="tensor_parallel"):
        RateCurve((1, 10), (1e12, 1e12), tensor_parallel=0)


def test_rows_are_the_tokens_one_device_holds():
    from batchlab.formulas.roofline import tokens_per_matmul
    assert tokens_per_matmul(2, 1024) == 2048 and tokens_per_matmul(2, 1024, 4) == 512
    with pytest.raises(ValueError, match="context_parallel"):
        tokens_per_matmul(2, 1024, 0)


def test_context_parallelism_splits_the_rows_and_the_flops():
    flat = RateCurve((1, 10**6), (1e14, 1e14))
    one, two = model_step(JOB, flat), model_step(replace(JOB, context_parallel=2), flat)
    assert two.rows * 2 == one.rows == 2 * 1024
    assert two.slot_seconds * 2 == pytest.approx(one.slot_seconds)
