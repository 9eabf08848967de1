"""The literature's verdict on the 原文's 4.2 table: the data hangs together, every verdict word is the book's,
and a contrary finding flips a verdict (and a supporting one flips it back)."""
from __future__ import annotations

from dataclasses import replace

import pytest
from pybtex.database import parse_file

from batchlab.lecture import scaling_literature as lit
from batchlab.lecture.verdicts import UNTESTABLE, VERDICT, VERDICT_LABELS
from booktools import ROOT

HOLDS, FAILS = VERDICT[True], VERDICT[False]


def _with_relation(claim: str, relation: str, findings=lit.SCALING_FINDINGS) -> tuple[lit.Finding, ...]:
    """The findings with every bearing on ``claim`` given ``relation``."""
    return tuple(replace(f, bearings=tuple(replace(b, relation=relation) if b.claim == claim else b
                                           for b in f.bearings)) for f in findings)


def _plus(claim: str, relation: str, settings=None) -> tuple[lit.Finding, ...]:
    """The findings plus one reported in ``settings`` (by default the claim's own; pre-training for a
    general claim)."""
    settings = settings or lit.TABLE_CLAIMS[claim].settings or (lit.PRETRAINING,)
    extra = lit.Finding("x", "某来源", "某结果", "某设置", (lit.Bearing(claim, relation, "为检验判据而设"),),
                        settings=settings)
    return (*lit.SCALING_FINDINGS, extra)


def test_every_bearing_names_a_claim_and_every_claim_a_row():
    ranges = {row.batch_range for row in lit.LECTURE_TABLE} | {"本书建议"}
    assert all(c.batch_range in ranges for c in lit.TABLE_CLAIMS.values())
    for finding in lit.SCALING_FINDINGS:
        assert finding.bearings and finding.reported and finding.setting
        assert all(b.claim in lit.TABLE_CLAIMS and b.relation in lit.RELATIONS for b in finding.bearings)


def test_every_cited_finding_has_a_reference_entry():
    keys = set(parse_file(str(ROOT / "references.bib"), bib_format="bibtex").entries.keys())
    assert {f.key for f in lit.SCALING_FINDINGS} <= keys
    assert {f.key for f in lit.SCALING_FINDINGS} == {"merrill2025critical", "zhang2024critical",
                                                     "deepseek2024llm", "li2024surge"}


def test_the_numbers_are_the_ones_the_sources_report():
    by_key = {f.key: f for f in lit.SCALING_FINDINGS}
    assert "43%" in by_key["merrill2025critical"].reported and "1B" in by_key["merrill2025critical"].reported
    assert "2304" in by_key["deepseek2024llm"].reported and "4608" in by_key["deepseek2024llm"].reported
    assert "先升后降" in by_key["li2024surge"].reported
    assert "数据量" in by_key["zhang2024critical"].reported


def test_verdicts_use_the_books_words():
    for key in lit.TABLE_CLAIMS:
        assert lit.literature_verdict(key) in VERDICT_LABELS


def test_todays_verdicts():
    verdict = {key: lit.literature_verdict(key) for key in lit.TABLE_CLAIMS}
    assert verdict == {"small-early-fast": HOLDS, "small-use": UNTESTABLE, "mid-use": UNTESTABLE,
                       "large-linear": FAILS, "large-use": FAILS, "huge-optimizer": FAILS}
    assert [lit.row_verdict(r.batch_range) for r in lit.LECTURE_TABLE] == [UNTESTABLE, UNTESTABLE, FAILS, FAILS]


@pytest.mark.parametrize("relation", lit.RELATIONS)
def test_a_pretraining_finding_cannot_judge_a_fine_tuning_claim(relation):
    # every cited finding on the small-batch use case is about pre-training: the claim (fine-tuning, RLHF,
    # small datasets) stays untested whatever a pre-training source reports, and its row is not refuted
    assert lit.literature_verdict("small-use", _plus("small-use", relation, (lit.PRETRAINING,))) == UNTESTABLE
    assert lit.row_verdict("32–64", _plus("small-use", relation, (lit.PRETRAINING,))) == UNTESTABLE


def test_a_finding_in_the_claims_own_setting_decides_it():
    fine_tuned = _plus("small-use", lit.CONTRADICTS, (lit.FINE_TUNING,))
    assert lit.literature_verdict("small-use", fine_tuned) == FAILS and lit.row_verdict("32–64", fine_tuned) == FAILS
    supported = _plus("small-use", lit.SUPPORTS, (lit.RLHF,))
    assert lit.literature_verdict("small-use", supported) == HOLDS and lit.row_verdict("32–64", supported) == HOLDS


def test_a_claim_about_training_in_general_takes_every_setting():
    for settings in ((lit.PRETRAINING,), (lit.FINE_TUNING,), (lit.CV_NLP,)):
        assert lit.literature_verdict("small-early-fast",
                                      _plus("small-early-fast", lit.CONTRADICTS, settings)) == FAILS


@pytest.mark.parametrize("relation", [lit.CONTRADICTS, lit.QUALIFIES])
def test_a_contrary_or_qualifying_finding_flips_a_claim_that_holds(relation):
    assert lit.literature_verdict("small-early-fast") == HOLDS
    assert lit.literature_verdict("small-early-fast", _plus("small-early-fast", relation)) == FAILS


def test_a_supporting_finding_flips_a_claim_that_fails():
    assert lit.literature_verdict("huge-optimizer") == FAILS
    supported = _with_relation("huge-optimizer", lit.SUPPORTS)
    assert lit.literature_verdict("huge-optimizer", supported) == HOLDS
    assert lit.row_verdict("4096+", supported) == HOLDS


def test_no_finding_is_untestable_and_one_decides():
    assert lit.literature_verdict("mid-use") == UNTESTABLE
    assert lit.literature_verdict("mid-use", _plus("mid-use", lit.SUPPORTS)) == HOLDS
    assert lit.row_verdict("128–256", _plus("mid-use", lit.SUPPORTS)) == HOLDS
    assert lit.literature_verdict("mid-use", _plus("mid-use", lit.CONTRADICTS)) == FAILS


def test_contradicted_names_the_claims_with_a_contrary_finding():
    # Li et al. restrict linear scaling (not for Adam-type optimizers): a qualification, not a contrary result
    assert [k for k in lit.TABLE_CLAIMS if lit.contradicted(k)] == ["huge-optimizer"]
    assert lit.relations_to("large-linear") == [("Li et al. 2024", lit.QUALIFIES)]
    assert lit.contradicted("small-early-fast", _plus("small-early-fast", lit.CONTRADICTS))


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError):
        lit.Bearing("small-use", "大概", "?")
    with pytest.raises(KeyError):
        lit.literature_verdict("no-such-claim")
    with pytest.raises(KeyError):
        lit.row_verdict("8–16")
    with pytest.raises(ValueError):
        lit.TableClaim("32–64", "适用场景", "某说法", ("强化学习以外",))
    with pytest.raises(ValueError):
        lit.Finding("x", "某来源", "某结果", "某设置", (), settings=())
