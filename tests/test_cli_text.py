"""What a reader of the calculator reads (issue 43): its reports and help in one language, Chinese — flags, JSON
keys, flag values, units, model and product names stay as typed — and numbers the way the book writes them
(:mod:`batchlab.page.numbers`), even for absurd values a reader may type: no decimals hundreds of digits long, no
line of thousands of characters."""
from __future__ import annotations

import re

import pytest

from batchlab.apps.cli import COMMANDS, main

# ── one language ─────────────────────────────────────────────────────────────────────────────────

ALLOWED = {
    # what the reader types: model presets, flag values (schedules, recompute, precisions, optimizers, attention,
    # devices, dtypes) and the metavars argparse writes for flags
    "tiny", "pico", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpipe", "1f1b", "interleaved-1f1b",
    "zero-bubble", "none", "selective", "full", "bf16-mixed", "fp32", "sgd", "sgd-momentum", "adam", "adamw",
    "materialized", "fused", "auto", "cpu", "cuda", "npu", "float32", "bfloat16", "float16", "local", "distributed",
    "START", "INCREMENT", "SAMPLES", "DIR", "FILE", "N", "M", "K",
    # units and symbols of the book's formulas
    "GiB", "MiB", "KiB", "B", "TFLOP", "TB", "GB", "s", "tokens", "token", "FLOPs", "MFU", "MLP", "p", "m", "v", "t",
    "k", "n", "cp", "h", "as²b", "p-1", "m+p-1",
    # job fields, as refusals and notes name them (precision = 'fp32')
    "precision", "attention", "schedule", "recompute", "optimizer",
    # names of products, papers and tools
    "GPipe", "1F1B", "ZB-H1", "ZB-V", "Megatron-LM", "DeepSpeed", "ZeRO-1", "Narayanan", "Korthikanti",
    "FlashAttention", "SDPA", "Ascend", "NPU", "GPU", "CUDA", "CPU", "PR", "torch", "CSV", "UTF-8", "JSON", "python",
    "batchlab", "dropout", "all-reduce", "Batch", "Size", "Adam", "bf16", "GPT-2", "ZeRO", "torch.distributed.pipelining",
    # the commands, and the JSON key the device line names
    "plan", "tune", "pipeline", "device", "bench-matmul", "grade", "measures",
}
"""The Latin words a Chinese report may hold; identifiers with an underscore (JSON keys and job fields, as
refusals and notes name them) are allowed as such."""
WORD = re.compile(r"(?<![\w-])(?:--)?[A-Za-z][\w.+²-]*(?<![.-])")


def foreign_words(text: str) -> set[str]:
    """The English words of ``text`` that are neither a flag, an identifier nor one of :data:`ALLOWED`."""
    return {w for w in WORD.findall(text) if not w.startswith("-") and "_" not in w and w not in ALLOWED
            and not re.fullmatch(r"[A-Z_]+", w)}  # argparse's metavars: the flag's name in capitals


def test_the_checker_flags_an_english_label_and_passes_a_chinese_one():
    assert foreign_words("num_microbatches 16 per replica per step") == {"per", "replica", "step"}
    assert foreign_words("微批次数  16，每个副本每步（--micro-batch 2，gpt2-xl，295 TFLOP/s）") == set()


TEXT_CASES = {
    "plan": ["plan", "--global-batch", "64", "--micro-batch", "2", "--pipeline-stages", "4", "--data-parallel", "2",
             "--schedule", "interleaved-1f1b", "--virtual-stages", "2", "--grad-accum", "4", "--tokens-per-second",
             "3200", "--zero1", "--fp32-grads", "--rampup-batch-size", "16", "16", "6000"],
    "plan-unfit": ["plan", "--global-batch", "8", "--micro-batch", "1", "--pipeline-stages", "4",
                   "--device-memory-gib", "1", "--schedule", "gpipe"],
    "tune": ["tune", "--global-batch", "64", "--pipeline-stages", "4", "--data-parallel", "2"],
    "tune-unfit": ["tune", "--global-batch", "64", "--pipeline-stages", "1", "--device-memory-gib", "1"],
    "tune-not-searched": ["tune", "--model", "tiny", "--n-layer", "1024", "--d-model", "4", "--global-batch", "720720",
                          "--pipeline-stages", "64"],
    "pipeline": ["pipeline", "--global-batch", "64", "--micro-batch", "2", "--pipeline-stages", "4", "--tensor-parallel",
                 "5", "--sequence-parallel", "--run", "local"],
    "pipeline-local": ["pipeline", "--model", "tiny", "--n-layer", "2", "--d-model", "64", "--global-batch", "8",
                       "--micro-batch", "2", "--pipeline-stages", "2", "--run", "local"],
    "device": ["device", "--device", "cpu"],
    "bench-matmul": ["bench-matmul", "--m", "1", "8", "--k", "64", "--n", "64", "--repeats", "2", "--min-seconds",
                     "0.001", "--device", "cpu"],
}


@pytest.mark.parametrize("label", list(TEXT_CASES))
def test_every_text_report_is_chinese(label, capsys):
    assert main(TEXT_CASES[label]) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    if label == "device":  # the hardware's own name is data, not a label
        from batchlab.measure.device import device_name

        text = text.replace(device_name("cpu"), "")
    if label == "bench-matmul":
        # "device" and "of best" are what tests/test_matmul_bench.py reads off this table (see the report of issue 43)
        from batchlab.measure.device import device_name

        text = text.replace("device  cpu", "").replace("of best", "").replace(device_name("cpu"), "")
    assert foreign_words(text) == set(), text


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_every_help_is_chinese(command, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "1000")  # argparse wraps at hyphens otherwise
    with pytest.raises(SystemExit) as exit_:
        main(["-h"] if command is None else [command, "-h"])
    text = capsys.readouterr().out
    assert exit_.value.code == 0 and text.startswith("用法：") and "\n选项：\n" in text
    assert not [line for line in text.splitlines() if line.endswith(":")]  # every heading with a full-width colon
    assert foreign_words(text.replace("python -m batchlab", "")) == set(), text


# ── numbers the book's way, whatever the value ───────────────────────────────────────────────────

LONGEST_LINE = 400
"""The longest line a report may print (the widest today: tune's reason sentence, about 200 characters)."""


def assert_readable(text: str) -> None:
    assert max(map(len, text.splitlines())) <= LONGEST_LINE, max(text.splitlines(), key=len)[:300]
    assert not re.search(r"\d[\d,.]{30,}", text), re.search(r"\d[\d,.]{30,}", text).group()[:80]


@pytest.mark.parametrize("argv", [
    ["plan", "--global-batch", "64", "--micro-batch", "2", "--tokens-per-second", "1e-300"],
    ["tune", "--global-batch", "64", "--peak-tflops", "1e-300", "--bandwidth-tbs", "1e-300"],
    ["tune", "--global-batch", "64", "--device-memory-gib", "999999.5"],
    ["pipeline", "--schedule", "gpipe", "--pipeline-stages", "1024", "--n-layer", "1024", "--global-batch", "1",
     "--micro-batch", "1"],
    ["pipeline", "--pipeline-stages", "1024", "--n-layer", "1024", "--global-batch", "1048576", "--micro-batch", "1"],
    ["plan", "--global-batch", "1048576", "--micro-batch", "1", "--pipeline-stages", "48", "--schedule", "gpipe"],
    ["plan", "--model", "tiny", "--n-layer", "1024", "--global-batch", "1024", "--micro-batch", "1",
     "--pipeline-stages", "1024", "--schedule", "gpipe"],
])
def test_absurd_accepted_values_print_readable_numbers(argv, capsys):
    assert main(argv) == 0
    assert_readable(capsys.readouterr().out)


def test_the_readability_check_catches_what_the_reports_printed_before():
    from batchlab.page.numbers import series, throughput

    old = f"{9.73e-300:,.{302}f} tokens/s"  # the tune table's cell for --peak-tflops 1e-300 before issue 43
    with pytest.raises(AssertionError):
        assert_readable(old)
    with pytest.raises(AssertionError):
        assert_readable(str(list(range(1024, 0, -1))))  # pipeline's in-flight row at 1,024 stages
    assert_readable(throughput(9.73e-300) + " " + series([f"{n:,}" for n in range(1024, 0, -1)]))


def test_series_shows_a_long_row_by_its_ends_and_its_length():
    from batchlab.page.numbers import SERIES_SHOWN, count, series

    assert series([12, 12, 12, 12]) == "[12, 12, 12, 12]"
    assert series(range(1, SERIES_SHOWN + 1)) == "[1, 2, 3, 4, 5, 6, 7, 8]"  # at the limit: every value
    assert series(map(count, range(1024, 0, -1))) == "[1,024, 1,023, 1,022, 1,021, 1,020, 1,019, …, 2, 1]（共 1,024 个）"


@pytest.mark.parametrize("value, shown", [
    (9.73e-300, "9.73×10⁻³⁰⁰ tokens/s"), (1e30, "1.00×10³⁰ tokens/s"),
    (160935.2, "161,000 tokens/s"), (3200, "3,200 tokens/s"), (0.5, "0.500 tokens/s"),  # the chapters' range, unchanged
])
def test_significant_figures_turn_scientific_only_outside_the_plain_range(value, shown):
    from batchlab.page.numbers import PLAIN_RANGE, throughput

    assert throughput(value) == shown
    assert ("×10" in shown) == (not PLAIN_RANGE[0] <= value < PLAIN_RANGE[1])
