"""Tests for batchlab.measure.npu_smi: parsing ``npu-smi info`` needs no torch and no fake NPU."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from batchlab.measure import npu_smi
from batchlab.measure.npu_smi import SAMPLES, NpuCard, parse_npu_smi, read_npu_smi, sample_text


def test_npu_smi_imports_without_torch() -> None:
    code = ("import sys, batchlab.measure.npu_smi; "
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_parse_compact_8_cards() -> None:
    cards = parse_npu_smi(sample_text("npu-smi-23.0-8cards"))
    assert [c.npu_id for c in cards] == list(range(8))
    assert [c.hbm_used_mb for c in cards] == [3161, 59356, 60112, 3407, 12288, 3161, 41920, 3298]
    assert {c.hbm_total_mb for c in cards} == {65536}
    assert [c.power_w for c in cards] == [93.6, 351.2, 348.9, 97.0, 102.5, 90.1, 288.7, 95.3]
    assert [c.temp_c for c in cards] == [36, 52, 51, 38, 39, 35, 47, 37]
    assert [c.aicore_percent for c in cards] == [0, 87, 91, 0, 3, 0, 64, 0]
    assert [c.bus_id for c in cards] == [
        "0000:C1:00.0", "0000:C2:00.0", "0000:81:00.0", "0000:82:00.0",
        "0000:01:00.0", "0000:02:00.0", "0000:41:00.0", "0000:42:00.0",
    ]
    assert [c.health for c in cards].count("Warning") == 1 and cards[3].health == "Warning"
    assert {c.name for c in cards} == {"910B3"} and {c.chip for c in cards} == {0}
    assert cards[1].hbm_fraction == pytest.approx(59356 / 65536)


def test_parse_wide_2_cards_with_process_table() -> None:
    cards = parse_npu_smi(sample_text("npu-smi-24.1-2cards"))
    assert cards == [
        NpuCard(npu_id=0, chip=0, name="910B4", health="OK", power_w=312.8, temp_c=49.0,
                aicore_percent=76.0, hbm_used_mb=58620, hbm_total_mb=65536, bus_id="0000:9D:00.0"),
        NpuCard(npu_id=1, chip=0, name="910B4", health="OK", power_w=88.4, temp_c=34.0,
                aicore_percent=0.0, hbm_used_mb=2950, hbm_total_mb=65536, bus_id="0000:9F:00.0"),
    ]
    assert cards[1].hbm_fraction == pytest.approx(2950 / 65536)


def test_samples_are_the_shipped_files_and_an_unknown_name_is_refused() -> None:
    shipped = sorted(p.stem for p in Path(npu_smi.__file__).with_name("samples").glob("*.txt"))
    assert sorted(SAMPLES) == shipped
    with pytest.raises(ValueError) as refused:
        sample_text("npu-smi-25.0")
    message = str(refused.value)
    assert "\n" not in message and "样例" in message and all(name in message for name in SAMPLES)


def test_sample_text_does_not_depend_on_the_working_directory(tmp_path: Path) -> None:
    code = ("from batchlab.measure.npu_smi import parse_npu_smi, sample_text; "
            "print(len(parse_npu_smi(sample_text('npu-smi-23.0-8cards'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "8", proc.stderr


def test_parse_rejects_text_without_card_table() -> None:
    with pytest.raises(ValueError, match="no npu-smi card table"):
        parse_npu_smi("command not found: npu-smi\n")


def test_read_npu_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert read_npu_smi() is None  # not on PATH
    if os.name == "nt":
        pytest.skip("shell script stand-in needs a POSIX shell")
    sample = tmp_path / "sample.txt"
    sample.write_text(sample_text("npu-smi-24.1-2cards"), encoding="utf-8")
    script = tmp_path / "npu-smi"
    script.write_text(f"#!/bin/sh\ncat '{sample}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/bin{os.pathsep}/usr/bin")
    cards = read_npu_smi()
    assert cards is not None and [c.hbm_used_mb for c in cards] == [58620, 2950]
