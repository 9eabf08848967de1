"""The computed claims of chapter 4.3 (book/4.3-memory.ipynb), each against the error it replaced:
the dropout the case's bytes assume, both bytes-per-parameter conventions, the constant of the measured
line (above 1 %, not below), the batch-arithmetic bound on the micro-batch, the bubble at a fixed global
batch, the headroom a 90 % reading leaves, and the stage index i."""
from __future__ import annotations

import re
from dataclasses import replace

import nbformat
import pytest

from batchlab.formulas.fit import least_squares_line
from batchlab.formulas.job import GIB, Job
from batchlab.formulas.memory import bytes_per_param, grow_micro_batch, logit_bytes, stage_memory
from batchlab.formulas.tune import runnable_micro_batch_sizes
from batchlab.formulas.presets import get_config
from batchlab.page.numbers import percent
from batchlab.lecture.case import CASE_STUDY, CASE_STUDY_TUNED
from batchlab.measure.npu_smi import parse_npu_smi, sample_text
from booktools import ROOT

CHAPTER = ROOT / "book" / "4.3-memory.ipynb"
CASE = CASE_STUDY.job


def _chapter() -> nbformat.NotebookNode:
    return nbformat.read(CHAPTER, as_version=4)


def _output_of(marker: str) -> str:
    """The saved text output of the one code cell whose source contains ``marker``."""
    cells = [c for c in _chapter().cells if c.cell_type == "code" and marker in c.source]
    assert len(cells) == 1, f"{len(cells)} code cells contain {marker!r}"
    parts = []
    for out in cells[0].get("outputs", []):
        parts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def _prose() -> str:
    return "\n".join(c.source for c in _chapter().cells if c.cell_type == "markdown")


def _memory_bound(recompute: str) -> int:
    """The chapter's memory-only bound: the largest micro-batch at ≤ 90 % with m = p (1F1B)."""
    def fraction(b: int) -> float:
        g = b * CASE.data_parallel * CASE.pipeline_stages
        return stage_memory(replace(CASE, micro_batch_size=b, global_batch=g, recompute=recompute)).peak_memory_fraction
    return grow_micro_batch(fraction, target_fraction=0.9)["best"]


# 1. dropout: the case's stage-0 bytes are Korthikanti's 34sbh + 5as²b, by hand

def test_case_trains_with_dropout_and_stage0_matches_the_hand_count():
    s, b, h, a = CASE.seq_len, CASE.micro_batch_size, CASE.model.d_model, CASE.model.n_head
    assert CASE.dropout == pytest.approx(0.1)
    stage0 = stage_memory(CASE).stages[0]
    layers = CASE.stages[0].num_layers
    per_microbatch = layers * s * b * h * (34 + 5 * a * s / h) + 8 * s * b + s * b * h  # + token ids, embedding mask
    assert stage0.activation_bytes_per_microbatch == per_microbatch
    assert stage0.activation_bytes == stage0.in_flight * per_microbatch
    without = stage_memory(replace(CASE, dropout=0.0)).stages[0]
    assert without.activation_bytes == stage0.in_flight * (layers * s * b * h * (32 + 2 * a * s / h) + 8 * s * b)
    printed = _output_of("for att, d in product((case.attention, \"fused\"), (case.dropout, 0.0))")
    for value in (stage0.activation_bytes, without.activation_bytes):
        assert f"{value / GIB:.2f}" in printed
    assert f"{stage0.activation_bytes / GIB:.2f}" != f"{without.activation_bytes / GIB:.2f}"


# 1b. the attention the case's bytes assume: named where they are printed, the fused figures beside them

def _rows_of(printed: str, label: str) -> list[str]:
    return [line for line in printed.splitlines() if line.split()[:1] == [label]]


def test_case_activations_name_their_attention_and_show_the_fused_figures():
    assert CASE.attention == "materialized"      # every case number keeps the s×s scores unless it says so
    fused = {s: stage_memory(replace(CASE, schedule=s, attention="fused")).stages[0].activation_bytes / GIB
             for s in ("1f1b", "gpipe")}
    assert fused["1f1b"] == pytest.approx(4.99, abs=0.01) and fused["gpipe"] == pytest.approx(19.97, abs=0.01)
    stored = {s: stage_memory(replace(CASE, schedule=s)).stages[0].activation_bytes / GIB for s in ("1f1b", "gpipe")}
    assert stored["1f1b"] == pytest.approx(16.71, abs=0.01) and stored["gpipe"] == pytest.approx(66.85, abs=0.01)
    # the first table: both kinds, named, from the same job
    table = _output_of("for att, d in product((case.attention, \"fused\"), (case.dropout, 0.0))")
    explicit, flash = _rows_of(table, "显式注意力"), _rows_of(table, "融合注意力")
    assert len(explicit) == 2 and len(flash) == 2
    assert explicit[0].split()[-1] == f"{stored['1f1b']:.2f}" and flash[0].split()[-1] == f"{fused['1f1b']:.2f}"
    assert "s×s 分数占每层的 70%" in table
    # the schedule table's header names the kind; the fused stage 0 of both schedules is printed beside it
    assert "阶段 0 激活（显式注意力）" in _output_of('stage0_bytes(s, b, 2 * g) / base[s]')
    beside = _output_of("stage0_bytes(s, b, g, attention='fused')")
    assert f"GPipe {fused['gpipe']:.2f} GiB" in beside and f"1F1B {fused['1f1b']:.2f} GiB" in beside
    held = _output_of("held / boundary")
    assert f"{stored['1f1b']:.2f} GiB（显式注意力）" in held and f"融合注意力下 {fused['1f1b']:.2f} GiB" in held
    prose = _prose()
    assert "--use-flash-attn" in prose and "MindSpeed-LLM" in prose and 'attention = \"materialized\"' in prose


# 2. both bytes-per-parameter conventions, in the chapter's table

def test_both_gradient_conventions_are_in_the_table():
    assert sum(bytes_per_param("bf16-mixed", "adam").values()) == 16
    assert sum(bytes_per_param("bf16-mixed", "adam", fp32_grads=True).values()) == 18
    table = _output_of("bytes_per_param(precision, optimizer, fp32_grads=fp32_grads)")
    megatron = [line for line in table.splitlines() if "Megatron-LM" in line and " Adam " in f" {line} "]
    assert len(megatron) == 1 and megatron[0].split()[-1] == "18"
    assert "ZeRO" in _prose() and "18" in _prose()


def test_megatron_convention_is_labelled_bf16_and_fp16s_20_is_attributed():
    # Megatron-LM's own table: 18 B/param is bf16 parameters with fp32 gradients; fp16 with fp16 gradients is 20
    table = _output_of("bytes_per_param(precision, optimizer, fp32_grads=fp32_grads)")
    megatron = [line for line in table.splitlines() if "Megatron-LM" in line]
    assert megatron and all("Megatron-LM，bf16" in line for line in megatron)
    prose = _prose()
    assert "fp16 参数 + fp16 梯度是 20 字节/参数" in prose and "dist_optimizer.md" in prose


# 3. the measured line: what it shows, and its constant above 1 % at B = 1

@pytest.fixture(scope="module")
def measured_line():
    from batchlab.measure.memory import saved_activation_bytes
    from batchlab.measure.model import GPT

    from batchlab.measure.data import make_corpus

    tiny = get_config("tiny")
    data = make_corpus(num_sequences=64, seq_len=64, seed=0)   # the chapter's batches: inputs and targets apart
    sizes = [1, 2, 4, 8, 16]
    activations = []
    for b in sizes:
        x, y = data.batch(range(b))
        activations.append(saved_activation_bytes(GPT(tiny), x.clone(), y.clone()))
    return sizes, activations


def test_intercept_share_is_printed_and_not_below_one_percent(measured_line):
    sizes, activations = measured_line
    intercept, _ = least_squares_line(sizes, activations)
    share = intercept / activations[0]
    assert 0.01 < share < 0.02          # the old text said "不到 1%"
    printed = _output_of("与 B 无关的常数")
    assert percent(share) in printed          # the book's one format for a percentage
    assert "不到 1%" not in _prose()


def test_linearity_row_says_what_the_meter_shows_and_what_it_cannot():
    table = _output_of('bl.CLAIMS["device-linear"]')
    assert "计量器读数是 B 的直线" in table and "本书无法检验" in table
    assert "激活值与 Batch Size 近似线性  直线拟合" not in table


# 4. the micro-batch: the memory bound and the batch-arithmetic bound, separately

def test_arithmetic_bound_is_the_jobs_own_rule():
    allowed = runnable_micro_batch_sizes(CASE)
    per_replica = CASE.global_batch // CASE.data_parallel
    for b in range(1, per_replica + 1):
        try:
            replace(CASE, micro_batch_size=b)
            valid = True
        except ValueError:
            valid = False
        assert valid == (b in allowed), b
    assert max(allowed) == 8
    gpipe = replace(CASE, schedule="gpipe")  # GPipe runs m < p: every divisor is allowed
    assert max(runnable_micro_batch_sizes(gpipe)) == per_replica


def test_batch_arithmetic_binds_with_recompute_and_memory_without():
    arithmetic = max(runnable_micro_batch_sizes(CASE))
    assert _memory_bound("full") > arithmetic          # the old text reported the memory bound alone
    assert _memory_bound("selective") > arithmetic
    assert _memory_bound("none") < arithmetic
    both = max(b for b in runnable_micro_batch_sizes(CASE)
               if stage_memory(replace(CASE, micro_batch_size=b)).peak_memory_fraction <= 0.9)
    assert both == CASE_STUDY_TUNED.job.micro_batch_size
    printed = _output_of("grow_micro_batch(lambda b: case_fraction(b, mode)")
    full_row = next(line for line in printed.splitlines() if line.startswith("完全重计算"))
    assert full_row.split()[1:2] == [str(_memory_bound("full"))] and full_row.split()[-1] == "批次算术"


# 5. the bubble at a fixed global batch

def test_smaller_micro_batch_gives_a_smaller_bubble_at_a_fixed_global_batch():
    allowed = runnable_micro_batch_sizes(CASE)
    bubbles = [replace(CASE, micro_batch_size=b).plan.bubble_fraction for b in allowed]
    assert bubbles == sorted(bubbles) and bubbles[0] < bubbles[-1]
    # the lecture's mechanism needs fewer micro-batches, not smaller ones: at a fixed m the bubble does not move
    fixed_m = [replace(CASE, micro_batch_size=b, global_batch=b * CASE.data_parallel * 4).plan.bubble_fraction
               for b in (1, 2, 4)]
    assert len(set(fixed_m)) == 1
    verdict = _output_of("bubble[small] > bubble[large]")
    assert "不成立" in verdict


# 6. the 85–90 % target, evaluated

def test_headroom_of_a_90_percent_reading_against_the_largest_transient():
    cards = parse_npu_smi(sample_text("npu-smi-23.0-8cards"))
    idle = max(c.hbm_used_mb for c in cards if c.aicore_percent == 0) * 2**20
    capacity = CASE.device_memory_bytes
    assert 3 * 2**30 < idle < 3.5 * 2**30
    headroom = 0.1 * capacity
    allowed = runnable_micro_batch_sizes(CASE)
    assert all(logit_bytes(replace(CASE, micro_batch_size=b)) < headroom for b in allowed)
    assert logit_bytes(CASE) == 4 * CASE.seq_len * CASE.micro_batch_size * CASE.model.vocab_size
    # the memory-only bound of full recompute: the last stage is fullest and its logits' gradient does not fit
    big = _memory_bound("full")
    job = replace(CASE, micro_batch_size=big, recompute="full", global_batch=big * CASE.data_parallel * CASE.pipeline_stages)
    report = stage_memory(job)
    assert report.peak_bytes_per_stage.index(max(report.peak_bytes_per_stage)) == len(report.stages) - 1
    assert capacity - report.stages[-1].peak_bytes - idle < logit_bytes(job)
    # within the batch arithmetic no configuration reads 85–90 % (model + idle baseline)
    readings = [(max(stage_memory(replace(CASE, micro_batch_size=b, recompute=mode)).peak_bytes_per_stage) + idle) / capacity
                for mode in ("none", "selective", "full") for b in allowed]
    assert not any(0.85 <= r <= 0.90 for r in readings)
    assert "85%–90% 的：没有" in _output_of("0.85 <= reading(")


# 7–10. tied embedding, GPipe's re-materialisation, the fixture's provenance, the stage index

def test_last_stage_pays_for_the_tied_matrix():
    first, middle, last = CASE.stages[0], CASE.stages[1], CASE.stages[-1]
    vh = CASE.model.vocab_size * CASE.model.d_model
    assert last.params - middle.params == vh + 2 * CASE.model.d_model   # tied copy + final LayerNorm
    assert first.params - middle.params == vh + CASE.model.n_positions * CASE.model.d_model
    assert "V\\times h" in _prose() and "All-Reduce" in _prose()


def test_prose_names_gpipe_rematerialisation_and_the_fixture_status():
    prose = _prose()
    assert "{cite:t}`huang2019gpipe`" in prose and "re-materialization" in prose
    assert "重建的样例" in prose and "这份样例输出" in prose


def test_stage_index_is_i_not_s():
    text = _prose() + "\n".join(c.source for c in _chapter().cells if c.cell_type == "code")
    assert not re.search(r"p\s*-\s*s\b|p − s\b", text), "s is the sequence length; the stage index is i"
    assert "\\min(p-i" in text
