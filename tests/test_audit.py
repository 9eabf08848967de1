"""The case-study audit (4.5): each audited quantity pinned to an independent computation, and each
verdict flipping when the reported number changes."""
from dataclasses import replace

import pytest

from batchlab.formulas.roofline import DEVICE_PRESETS, RateCurve
from batchlab.formulas.throughput import mfu
from batchlab.lecture.audit import (MEMORY_AXES, audit_case, memory_can_drop, memory_grid, matching_settings,
                                    modelled_speedup)
from batchlab.lecture.case import CASE_STUDY, CASE_STUDY_TUNED

FLAT = {"flat": RateCurve((1, 10**6), (1e14, 1e14), "flat")}
PEAKS = (256e12, 376e12)


def test_implied_mfu_is_narayanans_flops_over_eight_cards():
    l, h, s, v = 48, 1600, 1024, 50257
    flops_per_token = 72 * l * h**2 * (1 + s / (6 * h) + v / (12 * l * h))
    assert mfu(3200, CASE_STUDY.job, 256e12) == pytest.approx(3200 * flops_per_token / (8 * 256e12))
    assert mfu(3200, CASE_STUDY.job, 256e12) < 0.02  # far from the reported 42 %


def test_speedup_with_a_flat_rate_is_the_bubble_ratio():
    # same rate per FLOP: (16 + 3) slots of t against (8 + 3) slots of 2t
    assert modelled_speedup(CASE_STUDY.job, CASE_STUDY_TUNED.job, FLAT["flat"]) == pytest.approx(19 / 22)


def test_memory_grid_covers_every_setting_and_doubling_the_micro_batch_never_lowers_it():
    before, after = memory_grid(CASE_STUDY.job), memory_grid(CASE_STUDY_TUNED.job)
    # schedule × recompute × precision × ZeRO-1 × dropout (0, 0.1) × attention (materialized, fused)
    assert len(before) == 2 * 3 * 2 * 2 * 2 * 2 == len(MEMORY_AXES["schedule"]) * 48
    assert memory_can_drop(before, after) == []   # the verdict survives the dropout and attention axes
    # GPipe holds all m micro-batches: micro × m is the same before and after, so its activations are equal
    key = ("gpipe", "none", "bf16-mixed", False, 0.1, "materialized")
    assert after[key] == pytest.approx(before[key])
    # the case's own setting (1F1B, dropout 0.1) is the chapter's 23.4 GiB of 64 on stage 0; without dropout less
    case = ("1f1b", "none", "bf16-mixed", False, 0.1, "materialized")
    assert before[case] * 64 == pytest.approx(23.43, abs=0.01)
    assert before[case[:4] + (0.0, "materialized")] < before[case] and before[case[:5] + ("fused",)] < before[case]
    assert matching_settings(before, before[key]) and not matching_settings(before, 5.0)


def test_each_verdict_flips_with_the_reported_number():
    rows = {r.claim: r for r in audit_case(CASE_STUDY, CASE_STUDY_TUNED, FLAT, PEAKS)}
    assert rows["模型参数量 1.5B"].reproduced and rows["初始配置：微批次数与气泡"].reproduced
    assert not rows["初始配置：显存占用 92%"].reproduced
    assert not rows["初始配置：NPU 利用率 42% 是模型算力利用率（MFU）"].reproduced
    assert rows["利用率与吞吐的提升互相吻合"].reproduced
    # contrary reports: a memory figure the model does give, a utilisation equal to the implied MFU,
    # a speed-up equal to the model's, inconsistent utilisation
    grid = memory_grid(CASE_STUDY.job)
    implied = mfu(3200, CASE_STUDY.job, 300e12)
    speed = modelled_speedup(CASE_STUDY.job, CASE_STUDY_TUNED.job, FLAT["flat"])
    before = replace(CASE_STUDY, reported={"memory_fraction": grid[("1f1b", "none", "bf16-mixed", False, 0.1, "materialized")],
                                           "npu_utilization": implied, "tokens_per_second": 3200.0})
    after = replace(CASE_STUDY_TUNED, reported={"memory_fraction": 0.85, "npu_utilization": implied,
                                                "tokens_per_second": 3200.0 * speed})
    rows2 = audit_case(before, after, FLAT, PEAKS)
    by_start = lambda text: next(r for r in rows2 if r.claim.startswith(text))  # noqa: E731
    assert by_start("初始配置：显存占用").reproduced
    assert by_start("初始配置：NPU 利用率").reproduced
    assert by_start("吞吐提升").reproduced
    assert not by_start("利用率与吞吐的提升").reproduced


def test_the_utilisation_verdict_reads_the_throughput_both_ways():
    """Whole cluster or per card, 42 % is not the MFU; a report equal to the per-card reading flips it."""
    row = lambda case: next(r for r in audit_case(case, CASE_STUDY_TUNED, FLAT, PEAKS)  # noqa: E731
                            if r.claim.startswith("初始配置：NPU 利用率"))
    assert "按整个集群" in row(CASE_STUDY).computed and "按每张卡" in row(CASE_STUDY).computed
    assert not row(CASE_STUDY).reproduced
    per_card = mfu(3200 * 8, CASE_STUDY.job, 300e12)
    assert 0.05 < per_card < 0.15
    assert row(replace(CASE_STUDY, reported={**CASE_STUDY.reported, "npu_utilization": per_card})).reproduced


def test_an_impossible_per_card_reading_is_dropped_not_raised():
    """At 60,000 tokens/s per card the 8 cards would run past their peak: that reading is left out."""
    fast = replace(CASE_STUDY, reported={**CASE_STUDY.reported, "tokens_per_second": 60_000.0})
    row = next(r for r in audit_case(fast, CASE_STUDY_TUNED, FLAT, PEAKS) if r.claim.startswith("初始配置：NPU 利用率"))
    assert "按整个集群" in row.computed and "按每张卡" not in row.computed


def test_exercise_4_5_5_asks_the_cluster_reading_and_names_the_per_card_one(capsys):
    # the audit accepts both readings of 3200 tokens/s; the exercise asks one (the whole cluster's) and says so,
    # and a student who read it per card is told why B is not the answer, not just "wrong"
    from batchlab.ui.exercises import EXERCISES, check, expected, is_correct

    exercise, peak = EXERCISES["4.5-5"], DEVICE_PRESETS["ascend-910b"].peak_flops[0]
    tokens, cards = CASE_STUDY.reported["tokens_per_second"], CASE_STUDY.job.devices
    cluster, per_card = mfu(tokens, CASE_STUDY.job, peak), mfu(tokens * cards, CASE_STUDY.job, peak)
    assert per_card == pytest.approx(cards * cluster)
    assert f"整个 {cards} 卡集群" in exercise.question
    assert expected("4.5-5") == "C" and is_correct("4.5-5", "C")
    assert exercise.choices["B"] == f"约 {per_card:.0%}"        # the per-card reading is a choice, as computed
    assert not is_correct("4.5-5", "B")
    check("4.5-5", "B")
    said = capsys.readouterr().out
    assert "不对" in said and "每张卡" in said and f"{per_card:.0%}" in said and "整个集群" in said


def test_exercise_4_5_2_hint_says_the_72_form_is_derived_not_eq_3():
    from batchlab.ui.exercises import EXERCISES

    hint = EXERCISES["4.5-2"].hint
    assert "72·l·h²" in hint and "推出" in hint and "式 3" in hint and "完全重计算" in hint and "V/(16" in hint
    assert not hint.startswith("Narayanan et al. 2021：72")


def test_chapter_4_5_says_which_attention_the_tuner_and_the_audit_assume():
    # the tuner's memory column is the case job's, which keeps the s×s scores; the stored page says so and
    # shows the fused shares beside it; the audit's prose names both kinds it sweeps
    import nbformat

    from batchlab.formulas.memory import activation_basis
    from booktools import ROOT

    cells = nbformat.read(ROOT / "book" / "4.5-case-study.ipynb", as_version=4).cells
    tuner = [c for c in cells if c.cell_type == "code" and 'bl.tune(replace(before.job, attention="fused")' in c.source]
    assert len(tuner) == 1
    printed = "".join(out.get("text", "") for out in tuner[0].outputs)
    assert activation_basis(CASE_STUDY.job.attention) in printed and "换成融合注意力后的显存占比" in printed
    prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert "案例的 `Job` 是显式注意力" in prose and "显式/融合注意力" in prose and "--use-flash-attn" in prose


def test_the_lab_predictions_4_5_7_and_4_5_8_follow_from_the_bubble_and_the_in_flight_count():
    # doubling the lab case's micro-batch (m 16 -> 8, p 4): with a flat rate the step is 19 slots of t against
    # 11 slots of 2t, 19/22 -> "slower"; on the 910B low end the matmul is past the ridge, the same answer.
    # Memory: 1F1B's first stage keeps min(p, m) = 4 micro-batches in flight either way, each twice as large,
    # beside model states that do not move, so the peak grows by (S + 2A)/(S + A), less than 2x.
    from batchlab.formulas.memory import stage_memory
    from batchlab.ui.exercises import EXERCISES, expected
    from batchlab.ui.exercises.chapter_4_5 import LAB_CASE

    lab = LAB_CASE.job
    doubled = replace(lab, micro_batch_size=2 * lab.micro_batch_size)
    assert modelled_speedup(lab, doubled, FLAT["flat"]) == pytest.approx(19 / 22)
    assert expected("4.5-7") == "C" and "15.8% → 27.3%" in EXERCISES["4.5-7"].hint
    first = stage_memory(lab).stages[0]
    states = first.states.parameters + first.states.gradients + first.states.optimizer
    assert first.in_flight == stage_memory(doubled).stages[0].in_flight == lab.pipeline_stages
    ratio = (states + 2 * first.activation_bytes) / (states + first.activation_bytes)
    assert expected("4.5-8") == pytest.approx(ratio) and 1 < ratio < 2
    assert all(EXERCISES[i].predict for i in ("4.5-4", "4.5-5", "4.5-7", "4.5-8"))
