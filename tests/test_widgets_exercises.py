import pytest

from batchlab.formulas.roofline import DEVICE_PRESETS
from batchlab.page.batch import BatchExplorer
from batchlab.ui.explorer_widget import ExplorerWidget
from batchlab.ui.exercises import EXERCISES, ask, check, expected, is_correct


def calculator(**kwargs) -> ExplorerWidget:
    """4.1's global-batch calculator, as the chapter shows it."""
    return ExplorerWidget(BatchExplorer(**kwargs))


def test_calculator_default_shows_case_study():
    calc = calculator()
    assert calc.result.num_microbatches == 16
    assert "15.8%" in calc.summary.value and "64 = 2 (micro) × 2 (DP) × 16 (num_microbatches)" in calc.summary.value


@pytest.mark.parametrize("control, value, expect", [
    ("global_batch", 128, "128 = 2 (micro) × 2 (DP) × 32 (num_microbatches)"),
    ("micro_batch_size", 4, "64 = 4 (micro) × 2 (DP) × 8 (num_microbatches)"),
    ("pipeline_stages", 8, "(p-1)/(m+p-1) = <b>30.4%</b>"),  # 7 / 23
    ("data_parallel", 4, "64 = 2 (micro) × 4 (DP) × 8 (num_microbatches)"),
    ("stated_grad_accum", 16, "符合Megatron/DeepSpeed 的读法"),
    ("stated_grad_accum", 4, "符合原文的读法"),
])
def test_each_control_changes_the_displayed_result(control, value, expect):
    calc = calculator()
    before = calc.summary.value
    assert expect not in before
    calc.controls[control].value = value
    assert expect in calc.summary.value and calc.summary.value != before


def test_invalid_input_shows_a_message_not_a_traceback():
    calc = calculator()
    calc.controls["global_batch"].value = 63
    assert calc.result is None
    assert "配置无效" in calc.summary.value and "全局批大小 (Global Batch) = 63 不能被" in calc.summary.value
    calc.controls["global_batch"].value = 64
    assert calc.result is not None and "配置无效" not in calc.summary.value


def test_pipeline_not_filled_is_flagged():
    calc = calculator(global_batch=8, micro_batch_size=2, pipeline_stages=4, data_parallel=2)
    assert "流水线填不满" in calc.summary.value


@pytest.mark.parametrize("exercise_id", list(EXERCISES))
def test_every_exercise_accepts_its_answer_and_rejects_another(exercise_id, capsys):
    truth = expected(exercise_id)
    choices = EXERCISES[exercise_id].choices
    wrong = next(letter for letter in choices if letter != truth) if choices else truth + 1
    assert is_correct(exercise_id, truth)
    assert not is_correct(exercise_id, wrong)
    check(exercise_id, wrong)
    assert "不对。提示" in capsys.readouterr().out
    ask(exercise_id)
    assert EXERCISES[exercise_id].text() in capsys.readouterr().out   # the terminal form: symbols without $…$


def test_stated_precision_accepts_the_rounded_and_the_exact_answer():
    assert is_correct("4.1-3", 0.47) and is_correct("4.1-3", 7 / 15)
    assert not is_correct("4.1-3", 0.48) and not is_correct("4.1-3", 0.46)


def test_choice_answers_are_letters(capsys):
    assert is_correct("4.1-6", "c") and is_correct("4.1-6", " C ")
    check("4.1-6", 1)
    assert "请填选项字母（A、B、C）之一" in capsys.readouterr().out


def test_no_question_gives_its_answer_as_an_example():
    for exercise_id, exercise in EXERCISES.items():
        truth = expected(exercise_id)
        if not exercise.choices:
            assert f"如 {truth:g}" not in exercise.question, exercise_id


def test_exercise_answers_are_the_books_numbers():
    # Pinned by hand, so a swapped or mistyped formula behind an exercise cannot pass unnoticed.
    assert [expected(k) for k in ("4.1-1", "4.1-2", "4.1-4", "4.2-5")] == [8, 2, 12, 8192]
    assert expected("4.1-6") == "C" and expected("4.2-6") == "B"  # lr follows the global batch; S/S_min 2.25 → 1.08
    assert expected("4.1-3") == pytest.approx(7 / 15) and expected("4.1-5") == pytest.approx(0.5)
    assert expected("4.2-1") == pytest.approx(0.024) and expected("4.2-2") == pytest.approx(0.012)
    assert expected("4.2-3") == pytest.approx(5.0) and expected("4.2-4") == pytest.approx(9.0)
    # 4.3: 16 B/param; 12 layers × (12·1600² + 13·1600) × 16 B; s·b·h·(34 + 5as/h) for one layer
    assert expected("4.3-1") == 16 and expected("4.3-3") == 8 and expected("4.3-5") == 1.0
    assert expected("4.3-2") == pytest.approx(12 * (12 * 1600**2 + 13 * 1600) * 16 / 2**30)
    assert expected("4.3-4") == pytest.approx((34 * 1024 * 2 * 1600 + 5 * 25 * 1024**2 * 2) / 2**30)
    # 4.4: M = 2 × 1024; 2·128·4096·8192 FLOP; that over 2·(128·4096 + 4096·8192 + 128·8192) bytes;
    # (8 + 3)·2t over (16 + 3)·t; only an unchanged efficiency makes the step slower
    assert expected("4.4-1") == 2048 and expected("4.4-5") == "A"
    assert expected("4.4-2") == pytest.approx(2 * 128 * 4096 * 8192 / 1e9)
    assert expected("4.4-3") == pytest.approx(2 * 128 * 4096 * 8192 / (2 * (128 * 4096 + 4096 * 8192 + 128 * 8192)))
    assert expected("4.4-4") == pytest.approx(22 / 19)
    # 4.5 lab (GPT-2 large, 16 cards): m = 128 / (2 × 4); 72·l·h²·(1 + s/6h + V/12lh) with l 36, h 1280
    flops = 72 * 36 * 1280**2 * (1 + 1024 / (6 * 1280) + 50257 / (12 * 36 * 1280))
    assert expected("4.5-1") == 16 and expected("4.5-5") == "C"
    assert expected("4.5-2") == pytest.approx(flops / 1e9)
    low = DEVICE_PRESETS["ascend-910b"].peak_flops[0]  # the 910B preset's low end, 294.912 TFLOP/s (910B3)
    assert expected("4.5-3") == pytest.approx(100 * 20_000 * flops / (16 * low))
    assert "295 TFLOP/s" in EXERCISES["4.5-3"].question


@pytest.mark.parametrize("answer, says", [(None, "还没有作答"), ("8", "请填一个数字"), (True, "请填一个数字")])
def test_malformed_answers_get_a_message(answer, says, capsys):
    check("4.1-1", answer)
    assert says in capsys.readouterr().out
    with pytest.raises(ValueError, match="exercise_id = '9.9'：没有这道练习"):
        check("9.9", 1)
