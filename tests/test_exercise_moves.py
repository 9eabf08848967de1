"""Exercises that moved chapter keep their old ids working, and predict-then-run exercises record the
prediction without grading it."""
from __future__ import annotations

import json
from dataclasses import replace

import nbformat
import pytest

from batchlab.apps.grade import _judged, asked_exercises
from batchlab.ui import exercises as ex
from batchlab.ui.exercises import EXERCISES, RENAMED, check, current_id, expected, is_correct, judge
from booktools.exercise_cells import check_source, exercise_ids


def test_an_old_id_names_one_exercise_of_today_and_no_exercise_has_it():
    assert RENAMED and not set(RENAMED) & set(EXERCISES)
    assert all(new in EXERCISES for new in RENAMED.values())
    assert current_id("4.6-7") == "4.8-3" and current_id("4.1-1") == "4.1-1"


@pytest.mark.parametrize("old, new", sorted(RENAMED.items()))
def test_an_old_notebook_checks_and_grades_under_the_new_id(old, new, capsys):
    assert expected(old) == expected(new)
    assert is_correct(old, expected(new)) and ex.answers()[new] == expected(new)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f'bl.check("{old}", answer)')])
    assert asked_exercises(notebook) == (new,)
    assert _judged(json.dumps({old: expected(new)})) == {new}
    wrong = "Z" if EXERCISES[new].choices else -1.0
    assert _judged(json.dumps({old: wrong})) == set()
    # the chapter tool rewrites an old check cell to the id it has now
    assert exercise_ids(nbformat.v4.new_code_cell(f'check("{old}", 1)')) == [new]


@pytest.fixture
def predicted(monkeypatch):
    """A predict-then-run variant of 4.1-1 (its answer 8) under its own id."""
    monkeypatch.setitem(EXERCISES, "9.9-1", replace(EXERCISES["4.1-1"], predict=True))
    return "9.9-1"


def test_the_check_cell_asks_for_the_prediction_first(predicted):
    assert check_source(predicted).splitlines() == [
        "prediction = None  # 运行实验之前，先写下你的预测",
        "answer = None  # 运行之后，填你看到的结果",
        'bl.check("9.9-1", answer, prediction)']
    assert check_source("4.1-1") == 'answer = None  # 换成你的答案\nbl.check("4.1-1", answer)'


def test_a_prediction_is_recorded_and_compared_never_graded(predicted, capsys):
    truth = expected(predicted)
    check(predicted, truth, None)
    assert "先写下预测" in capsys.readouterr().out and predicted not in ex.predictions()
    check(predicted, truth, truth + 1)
    out = capsys.readouterr().out
    assert "正确" in out and "与结果不同" in out and ex.predictions()[predicted] == truth + 1
    check(predicted, truth, truth)
    assert "你的预测与结果一致" in capsys.readouterr().out
    # a right prediction with a wrong answer is still wrong: the verdict is the answer's
    check(predicted, truth + 1, truth)
    out = capsys.readouterr().out
    assert "不对" in out and "一致" not in out and not judge(predicted, truth + 1)
    assert _judged(json.dumps({predicted: truth + 1})) == set()


def test_an_ordinary_exercise_ignores_a_prediction(capsys):
    check("4.1-1", expected("4.1-1"), 3)
    assert "预测" not in capsys.readouterr().out and "4.1-1" not in ex.predictions()
