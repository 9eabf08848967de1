"""The memory model of 4.3 (pure math): model states, activations after Korthikanti et al., schedules."""
from dataclasses import replace

import pytest
from hypothesis import assume, given, strategies as st

from batchlab.formulas.job import GIB, Job
from batchlab.formulas.memory import (bytes_per_param, chunk_peaks, device_params, grow_micro_batch,
                                      layer_activation_bytes, model_states, optimizer_shards, stage_activation_bytes,
                                      stage_memory)
from batchlab.formulas.partition import partition_layers
from batchlab.formulas.pipeline_schedules import runnable, schedule_order
from batchlab.formulas.presets import GPTConfig, get_config
from batchlab.lecture.case import CASE_STUDY

XL = get_config("gpt2-xl")
# The case study's shape: gpt2-xl, s = 1024, micro-batch 2, 4 stages, 2 replicas, m = 16 micro-batches.
CASE_JOB = Job(XL, seq_len=1024, global_batch=64, micro_batch_size=2, pipeline_stages=4, data_parallel=2)
MIXED = dict(precision="bf16-mixed", dropout=0.1)


def test_bytes_per_parameter_table():
    assert sum(bytes_per_param("bf16-mixed", "adam").values()) == 16  # 2 + 2 + 12
    assert bytes_per_param("bf16-mixed", "adam") == {"parameters": 2, "gradients": 2, "optimizer": 12}
    assert sum(bytes_per_param("fp32", "adam").values()) == 16
    assert sum(bytes_per_param("fp32", "sgd").values()) == 8
    assert sum(bytes_per_param("fp32", "sgd-momentum").values()) == 12
    assert sum(bytes_per_param("bf16-mixed", "sgd").values()) == 8  # the fp32 master copy stays


def test_zero1_shards_only_the_optimizer_states():
    job = Job(XL, seq_len=1024, global_batch=4, micro_batch_size=1, data_parallel=4,
              precision="bf16-mixed", optimizer="adam")
    full = model_states(1000, job)
    sharded = model_states(1000, replace(job, zero1=True))
    assert (sharded.parameters, sharded.gradients) == (full.parameters, full.gradients) == (2000, 2000)
    assert sharded.optimizer == full.optimizer // 4 == 3000


@given(s=st.integers(1, 2048), b=st.integers(1, 16), heads=st.integers(1, 32), head_dim=st.integers(1, 128))
def test_korthikanti_per_layer_formula(s, b, heads, head_dim):
    h = heads * head_dim
    config = GPTConfig(n_layer=1, n_head=heads, d_model=h, vocab_size=8, n_positions=2048)
    mixed = Job(config, seq_len=s, global_batch=b, micro_batch_size=b, **MIXED)
    # 16-bit activations, 1-byte dropout masks: s·b·h·(34 + 5·a·s/h), written as integers
    assert layer_activation_bytes(mixed) == 34 * s * b * h + 5 * heads * s * s * b
    assert layer_activation_bytes(mixed, recompute="selective") == 34 * s * b * h
    assert layer_activation_bytes(mixed, recompute="full") == 2 * s * b * h
    fused = replace(mixed, attention="fused")
    assert layer_activation_bytes(fused) == 34 * s * b * h
    # fp32, no dropout (the book's CPU runs): 64·sbh + 4·as²b
    fp32 = replace(mixed, precision="fp32", dropout=0.0)
    assert layer_activation_bytes(fp32) == 64 * s * b * h + 4 * heads * s * s * b


def test_logits_sit_on_the_last_stage_and_are_large_at_gpt2_vocabulary():
    job = replace(CASE_JOB, **MIXED)
    first, *_, last = partition_layers(XL, 4)
    act = {st.index: stage_activation_bytes(job, st) for st in (first, last)}
    logits = 4 * 1024 * 2 * 50257
    sbh, sb = 1024 * 2 * 1600, 1024 * 2
    # last: final-LN and head inputs (2·e·sbh) + fp32 logits; first: token ids (8·sb) + embedding dropout mask
    assert act[3] - act[0] == logits + 2 * 2 * sbh - (8 * sb + sbh)
    assert logits / layer_activation_bytes(job) > 0.5  # more than half a layer's activations


def test_schedules_decide_in_flight_activations():
    gpipe = stage_memory(replace(CASE_JOB, schedule="gpipe"))
    onef = stage_memory(replace(CASE_JOB, schedule="1f1b"))
    assert [s.in_flight for s in gpipe.stages] == [16] * 4 and [s.in_flight for s in onef.stages] == [4, 3, 2, 1]
    assert [s.states for s in gpipe.stages] == [s.states for s in onef.stages]
    for g, o in zip(gpipe.stages, onef.stages):
        assert g.activation_bytes * o.in_flight == o.activation_bytes * g.in_flight
    assert gpipe.peak_memory_fraction > onef.peak_memory_fraction
    assert gpipe.to_dict()["peak_memory_fraction"] == max(gpipe.peak_bytes_per_stage) / (64 * GIB)


def test_recompute_adds_the_part_of_one_layer_it_recomputes():
    none = stage_memory(CASE_JOB)
    assert all(s.working_bytes == 0 for s in none.stages)
    layer = layer_activation_bytes(CASE_JOB, recompute="none")
    for mode in ("full", "selective"):
        recomputed = stage_memory(replace(CASE_JOB, recompute=mode))
        kept = layer_activation_bytes(CASE_JOB, recompute=mode)
        # what the layer keeps is already in the in-flight bytes: only the recomputed rest is added
        assert 0 < kept < layer
        assert all(s.working_bytes == layer - kept for s in recomputed.stages)
        assert recomputed.peak_memory_fraction < none.peak_memory_fraction


@given(p=st.integers(1, 8), dp=st.integers(1, 4), exp_global=st.integers(3, 8), exp_micro=st.integers(0, 6))
def test_1f1b_memory_never_decreases_as_the_micro_batch_grows(p, dp, exp_global, exp_micro):
    config = get_config("gpt2", n_layer=8)
    global_batch = dp * 2 ** exp_global
    micro, bigger = 2 ** min(exp_micro, exp_global), 2 ** min(exp_micro + 1, exp_global)
    # A 1F1B job needs m ≥ p micro-batches (the Job refuses fewer), so only runnable pairs are compared.
    assume(runnable("1f1b", p, global_batch // (bigger * dp)))
    reports = [stage_memory(Job(config, seq_len=128, global_batch=global_batch, micro_batch_size=b,
                                pipeline_stages=p, data_parallel=dp, schedule="1f1b"))
               for b in (micro, bigger)]
    for small, large in zip(reports[0].stages, reports[1].stages):
        assert large.peak_bytes >= small.peak_bytes


@given(p=st.integers(1, 6), micro=st.integers(1, 16), m=st.integers(1, 16), k=st.sampled_from([2, 4]))
def test_gpipe_activations_depend_on_micro_times_m_only(p, micro, m, k):
    config = get_config("gpt2", n_layer=6)
    job = Job(config, seq_len=64, global_batch=micro * k * m, micro_batch_size=micro * k, pipeline_stages=p,
              schedule="gpipe")
    a = stage_memory(job)
    b = stage_memory(replace(job, micro_batch_size=micro))
    assert (a.job.num_microbatches, b.job.num_microbatches) == (m, m * k)
    assert [s.activation_bytes for s in a.stages] == [s.activation_bytes for s in b.stages]


@pytest.mark.parametrize("kwargs, message", [
    (dict(schedule="zb"), "schedule = 'zb'"),
    (dict(), None),
    (dict(device_memory_gib=0), "device_memory_gib = 0：必须在 0.001 到 1,000,000 之间"),
    (dict(device_memory_gib=1e-10), "device_memory_gib = 1e-10：必须在 0.001 到 1,000,000 之间"),
    (dict(global_batch=2**63), "global_batch = 9223372036854775808 超过了 上限 = 1048576"),
    (dict(seq_len=2048), "seq_len = 2048：必须在 1 到 gpt2-xl 的 n_positions = 1024 之间"),
])
def test_stage_memory_rejects_bad_input(kwargs, message):
    # The job record validates once, when it is made; stage_memory reads a valid one.
    args = dict(model=XL, pipeline_stages=4, micro_batch_size=2, seq_len=1024, global_batch=32) | kwargs
    if message is None:
        stage_memory(Job(**args))
        return
    with pytest.raises(ValueError, match=message):
        Job(**args)
    with pytest.raises(ValueError, match="recompute = 'half'"):
        Job(XL, seq_len=1024, global_batch=32, micro_batch_size=2, pipeline_stages=4, recompute="half")


@given(threshold=st.integers(1, 300), start=st.integers(1, 4), oom_at=st.one_of(st.none(), st.integers(1, 400)))
def test_growth_finds_the_largest_fitting_size(threshold, start, oom_at):
    # peak fraction rises with b and crosses 0.9 just after `threshold`; above `oom_at` the step crashes
    def measure(b):
        return None if (oom_at is not None and b >= oom_at) else 0.9 * b / threshold

    result = grow_micro_batch(measure, 0.9, start=start, limit=4096)
    fitting = [b for b in range(start, 4097) if measure(b) is not None and measure(b) <= 0.9]
    assert result["best"] == (max(fitting) if fitting else None)
    assert all(row["fits"] == (row["fraction"] is not None and row["fraction"] <= 0.9) for row in result["tried"])
    assert len(result["tried"]) <= 2 * 13  # doubling then bisection: logarithmic


def test_straight_line_criterion_flips_on_a_curve():
    from batchlab.lecture.verdicts import straight_line_residual

    b = [1, 2, 4, 8, 16]
    assert straight_line_residual(b, [100 + 37 * x for x in b]) == pytest.approx(0.0, abs=1e-12)
    assert straight_line_residual(b, [100 + 37 * x + 0.001 * x * x for x in b]) < 0.01
    assert straight_line_residual(b, [100 + 37 * x * x for x in b]) > 0.05  # quadratic: not a line
    with pytest.raises(ValueError, match="至少 3 个点"):
        straight_line_residual([1, 2], [1, 2])


def test_megatron_convention_keeps_fp32_gradients_and_all_reduces_them():
    """16 B/param is ZeRO's convention (16-bit gradients); Megatron-LM under bf16 keeps fp32 main gradients:
    18 B/param with Adam, and the all-reduce carries twice the bytes."""
    from batchlab.formulas.comm import step_communication

    assert sum(bytes_per_param("bf16-mixed", "adam").values()) == 16
    assert sum(bytes_per_param("bf16-mixed", "adam", fp32_grads=True).values()) == 18
    assert bytes_per_param("fp32", "adam", fp32_grads=True) == bytes_per_param("fp32", "adam")
    zero, megatron = CASE_STUDY.job, replace(CASE_STUDY.job, fp32_grads=True)
    assert megatron.gradient_bytes == 4 and zero.gradient_bytes == 2
    stage = zero.stages[1].params
    assert stage_memory(megatron).stages[1].states.gradients == 4 * stage == 2 * stage_memory(zero).stages[1].states.gradients
    assert step_communication(megatron).allreduce_bytes == 2 * step_communication(zero).allreduce_bytes


def test_activation_basis_names_the_attention_and_the_explorer_shows_it():
    # the case keeps the s×s scores (~70 % of a layer's bytes); whoever prints its activations must say so
    from batchlab.formulas.memory import activation_basis
    from batchlab.page.memory import render_memory_summary_html

    assert "显式注意力" in activation_basis("materialized") and "s×s" in activation_basis("materialized")
    assert "融合注意力" in activation_basis("fused") and "显式" not in activation_basis("fused")
    with pytest.raises(ValueError, match="attention = 'flash'"):
        activation_basis("flash")
    case = CASE_STUDY.job
    assert case.attention == "materialized"
    assert activation_basis("materialized") in render_memory_summary_html(stage_memory(case))
    fused = replace(case, attention="fused")
    assert activation_basis("fused") in render_memory_summary_html(stage_memory(fused))
    stored, kept = (stage_memory(j).stages[0].activation_bytes / GIB for j in (case, fused))
    assert stored == pytest.approx(16.71, abs=0.01) and kept == pytest.approx(4.99, abs=0.01)
    assert 0.65 < 1 - layer_activation_bytes(fused) / layer_activation_bytes(case) < 0.75


# ---------------------------------------------------------------------------
# Tensor, sequence and context parallelism (Korthikanti et al. 2022, Table 2), interleaving, ZeRO-1 (issue 30)
# ---------------------------------------------------------------------------

def _divisors(n: int) -> list[int]:
    return [t for t in range(1, n + 1) if n % t == 0]


@given(heads=st.sampled_from([4, 8, 12, 16]), head_dim=st.sampled_from([8, 16, 64]), s=st.sampled_from([64, 128, 512]),
       b=st.integers(1, 4), t=st.sampled_from([2, 4]))
def test_korthikanti_table_2_with_tensor_and_sequence_parallelism(heads, head_dim, s, b, t):
    assume(heads % t == 0)
    h = heads * head_dim
    config = GPTConfig(n_layer=1, n_head=heads, d_model=h, vocab_size=8, n_positions=512)
    job = Job(config, seq_len=s, global_batch=b, micro_batch_size=b, tensor_parallel=t, **MIXED)
    sbh, scores = s * b * h, 5 * heads * s * s * b
    # sbh·(10 + 24/t + 5as/(ht)) without SP; sbh·(34 + 5as/h)/t with SP, written as integers
    assert layer_activation_bytes(job) * t == (10 * t + 24) * sbh + scores
    assert layer_activation_bytes(job, recompute="selective") * t == (10 * t + 24) * sbh
    sp = replace(job, sequence_parallel=True)
    assert layer_activation_bytes(sp) * t == 34 * sbh + scores
    assert layer_activation_bytes(sp, recompute="selective") * t == 34 * sbh
    assert layer_activation_bytes(sp, recompute="full") * t == 2 * sbh


@given(model=st.sampled_from(["gpt2", "gpt2-medium", "gpt2-large"]), p=st.sampled_from([1, 2, 4]),
       recompute=st.sampled_from(["none", "selective", "full"]), zero1=st.booleans())
def test_memory_per_device_never_grows_with_t_and_sequence_parallelism_never_adds(model, p, recompute, zero1):
    config = get_config(model)
    peaks = []
    for t in _divisors(config.n_head):
        job = Job(config, seq_len=256, global_batch=4 * p, micro_batch_size=1, pipeline_stages=p, data_parallel=2,
                  tensor_parallel=t, recompute=recompute, zero1=zero1)
        report = stage_memory(job)
        peaks.append(max(report.peak_bytes_per_stage))
        if t > 1:
            with_sp = stage_memory(replace(job, sequence_parallel=True))
            for a, b in zip(with_sp.stages, report.stages):
                assert a.activation_bytes <= b.activation_bytes and a.states == b.states
    assert peaks == sorted(peaks, reverse=True) and peaks[-1] < peaks[0]


@given(model=st.sampled_from(["gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"]), p=st.sampled_from([1, 2, 3, 4]),
       tied=st.booleans(), data=st.data())
def test_the_t_devices_of_a_stage_hold_its_parameters_once_plus_the_replicated_ones(model, p, tied, data):
    # Σ over the t devices of one stage = the stage's parameters + (t − 1) copies of the replicated ones
    # (LayerNorms, row-parallel biases, position embedding), exactly when t divides the split part
    config = get_config(model, vocab_size=50304, tie_embeddings=tied)
    t = data.draw(st.sampled_from(_divisors(config.n_head)))
    job = Job(config, seq_len=128, global_batch=p, micro_batch_size=1, pipeline_stages=p, tensor_parallel=t)
    one = replace(job, tensor_parallel=1)
    h = config.d_model
    for stage in job.stages:
        replicated = stage.num_layers * 6 * h + (config.n_positions * h if stage.has_embedding else 0) \
            + (2 * h if stage.has_head else 0)
        assert t * device_params(job, stage) - (t - 1) * replicated == stage.params == device_params(one, stage)
        assert t * model_states(device_params(job, stage), job).parameters >= model_states(stage.params, one).parameters


@given(cp=st.sampled_from([1, 2, 4, 8]), b=st.integers(1, 4), t=st.sampled_from([1, 2, 4]),
       recompute=st.sampled_from(["none", "selective", "full"]))
def test_context_parallelism_divides_the_sequence_of_every_fused_term(cp, b, t, recompute):
    config = get_config("gpt2-medium")
    job = Job(config, seq_len=1024, global_batch=b, micro_batch_size=b, tensor_parallel=t, attention="fused",
              recompute=recompute)
    split = replace(job, context_parallel=cp)
    assert layer_activation_bytes(split) * cp == layer_activation_bytes(job)
    assert stage_activation_bytes(split) * cp == stage_activation_bytes(job)
    # stored scores: the local s/cp queries against all s keys, also 1/cp of the whole
    assert layer_activation_bytes(replace(split, attention="materialized")) * cp == \
        layer_activation_bytes(replace(job, attention="materialized"))


def test_zero1_is_megatrons_6_plus_12_over_d_and_shards_over_d_times_cp():
    job = Job(XL, seq_len=1024, global_batch=8, micro_batch_size=1, data_parallel=4, precision="bf16-mixed",
              fp32_grads=True)
    assert model_states(1000, job).total == 18_000
    assert model_states(1000, replace(job, zero1=True)).total == 1000 * (6 + 12 / 4)
    with_cp = replace(job, zero1=True, context_parallel=2)
    assert optimizer_shards(with_cp) == 8 and model_states(1000, with_cp).optimizer == 12_000 // 8
    assert optimizer_shards(job) == 1  # without ZeRO-1 nothing is sharded, whatever d and cp


@given(p=st.sampled_from([2, 3, 4]), v=st.sampled_from([2, 3, 4]), k=st.integers(2, 6))
def test_interleaving_holds_megatrons_extra_chunks_on_the_first_device(p, v, k):
    # with m ≥ 2p, device 0 holds p·v + p − 1 chunks of L/(p·v) layers: Megatron's 1 + (p − 1)/(p·v) on 1F1B's L
    config = get_config("gpt2", n_layer=p * v * 2, vocab_size=64)
    job = Job(config, seq_len=128, global_batch=k * p, micro_batch_size=1, pipeline_stages=p,
              schedule="interleaved-1f1b", virtual_stages=v, attention="fused", dropout=0.0)
    interleaved, plain = stage_memory(job), stage_memory(replace(job, schedule="1f1b", virtual_stages=1))
    layer = layer_activation_bytes(job)
    first = interleaved.stages[0]
    assert first.in_flight_chunks == p * v + p - 1 and first.in_flight == -(-(p * v + p - 1) // v)
    assert interleaved.to_dict()["in_flight_chunks"][0] == p * v + p - 1 and "in_flight_chunks" not in plain.to_dict()
    extra = first.activation_bytes - first.in_flight_chunks * 2 * layer  # the embedding's token ids, 2 layers a chunk
    assert extra == chunk_peaks(job.schedule, p, job.num_microbatches, v)[0][0] * 8 * 128
    assert first.activation_bytes > plain.stages[0].activation_bytes
    assert [s.states for s in interleaved.stages] == [s.states for s in plain.stages]


@given(p=st.integers(1, 5), v=st.integers(2, 4), k=st.integers(1, 12), extra=st.integers(0, 4), zbv=st.booleans())
def test_chunk_peaks_from_the_capped_order_equal_the_whole_orders(p, v, k, extra, zbv):
    schedule, v = ("zero-bubble", 2) if zbv else ("interleaved-1f1b", v)
    m = k * p + extra  # ZB-V takes m that are no multiple of p
    assume(runnable(schedule, p, m, v))
    frees = "W" if zbv else "B"
    whole = []
    for order in schedule_order(schedule, p, m, v):
        held, peak = [0] * v, [0] * v
        for kind, _, chunk in order:
            held[chunk] += 1 if kind == "F" else -1 if kind == frees else 0
            peak[chunk] = max(peak[chunk], held[chunk])
        whole.append(peak)
    assert chunk_peaks(schedule, p, m, v) == whole
