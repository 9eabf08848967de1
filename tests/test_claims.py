"""Claim cards (batchlab.ui.claims) show the verdict a criterion gave, in the book's words, for people."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from batchlab.lecture.claims import CLAIMS, Claim
from batchlab.lecture.verdicts import SAME_DISTRIBUTION, UNTESTABLE, VERDICT, VERDICT_LABELS, late_oscillation, update_verdict
from batchlab.ui.claims import claim_card
from batchlab.page.numbers import percent
from booktools import ROOT

REPR = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\{['\"\d]|\['|object at 0x|Claim\(|\(\('")


def test_a_contrary_measurement_flips_the_rendered_verdict():
    def run(losses):
        return SimpleNamespace(eval_samples=[128 * i for i in range(len(losses))], eval_loss=losses)

    large = run([3.0, 2.6, 2.3, 2.1, 2.0, 1.92, 1.86, 1.82, 1.8])
    steady, jumpy = [3.0, 2.0, 1.6, 1.55, 1.52, 1.51, 1.505, 1.502, 1.5], [3.0, 2.0, 1.6, 1.55, 1.5, 1.56, 1.5, 1.56, 1.5]
    cards = {losses is jumpy: claim_card(CLAIMS["late-oscillation"], {"波动之比": 0}, late_oscillation([run(losses)], [large]))
             for losses in (steady, jumpy)}
    assert "成立" in cards[True].html() and "不成立" not in cards[True].html()
    assert "不成立" in cards[False].html()
    assert cards[True].text.startswith("【成立】") and cards[False].text.startswith("【不成立】")
    assert "batchlab-claim--holds" in cards[True].html() and "batchlab-claim--fails" in cards[False].html()


@pytest.mark.parametrize("gap, reseeded, word", [(1e-8, 1e-3, VERDICT[True]), (1e-3, 1e-3, SAME_DISTRIBUTION),
                                                 (1e-1, 1e-3, VERDICT[False])])
def test_every_verdict_word_of_a_criterion_renders(gap, reseeded, word):
    card = claim_card("同一次更新", criterion="相对差异 ≤ 10⁻⁵", measurement=f"差异 {gap}",
                      verdict=update_verdict(gap, reseeded))
    assert card.verdict == word and card.verdict in VERDICT_LABELS
    assert f">{word}</span>" in card.html()
    assert VERDICT_LABELS[word] in card.html()   # the meaning, as the badge's tooltip


def test_only_the_glossarys_verdict_words_are_accepted():
    with pytest.raises(ValueError):
        claim_card("x", criterion="y", measurement="z", verdict="大致成立")
    assert claim_card("x", criterion="y", measurement="z", verdict=UNTESTABLE).verdict == UNTESTABLE


def test_no_python_repr_reaches_the_reader():
    card = claim_card(CLAIMS["memory-only"], [("显存", percent(0.42)), ("样本数", 4096), ("损失", 2.34567),
                                              ("在边上", False)], False, note="只作参考")
    for shown in (card.html(), card.text, str(card), card._repr_html_()):
        assert not REPR.search(shown), shown
    assert "4,096" in card.text and "2.35" in card.text and "42.0%" in card.text and "否" in card.text
    for raw in (None, {"a": 1}, [1, 2], object()):
        with pytest.raises(TypeError):
            claim_card("x", criterion="y", measurement=[("值", raw)], verdict=True)


def test_html_is_escaped_and_the_criterion_is_required():
    card = claim_card("a < b", criterion="<script>", measurement="x & y", verdict=True)
    assert "<script>" not in card.html() and "&lt;script&gt;" in card.html() and "x &amp; y" in card.html()
    with pytest.raises(ValueError):
        claim_card("没有判据的说法", "测量", True)
    with pytest.raises(ValueError):
        claim_card(CLAIMS["early-fast"], {}, True)


def test_every_registered_claim_has_words_and_a_criterion():
    assert all(isinstance(c, Claim) and c.text and c.criterion for c in CLAIMS.values())
    assert len({c.text for c in CLAIMS.values()}) == len(CLAIMS)


def test_the_stylesheet_styles_the_cards():
    css = (ROOT / "book" / "_static" / "page.css").read_text(encoding="utf-8")
    for cls in ("batchlab-claim", "batchlab-claim__verdict", "batchlab-claim--fails", "batchlab-claim__body"):
        assert f".{cls}" in css


def test_moved_besides_names_what_refutes_only_memory():
    from batchlab.lecture.verdicts import moved_besides, only_memory_moves
    still = {"memory": 2.0, "bubble": 1.01, "steps": 0.98}
    moved = {**still, "steps": 0.5}
    assert moved_besides(still, "memory") == [] and only_memory_moves(still, "memory")
    assert moved_besides(moved, "memory") == ["steps"] and not only_memory_moves(moved, "memory")


def test_reader_names_come_from_the_label_tables():
    from batchlab.formulas.job import OPTIMIZER_STATES
    from batchlab.ui.names import CODE_NAMES, LABELS, name
    assert name("recompute", "selective") == "选择性重计算" and name("schedule", "1f1b") == "1F1B"
    assert name("precision", "bf16-mixed") == "16 位混合精度" and name("partition", "compute") == "按计算量均衡"
    assert set(OPTIMIZER_STATES) <= set(LABELS["optimizer"])
    assert {"gpipe", "1f1b", "none", "selective", "full", "bf16-mixed", "adam"} <= CODE_NAMES and "fp32" not in CODE_NAMES
    for kind, labels in LABELS.items():   # the short form: the label before its explanation
        assert all(name(kind, code) and not {"（", "："} & set(name(kind, code)) for code in labels), kind
    with pytest.raises(ValueError):
        name("recompute", "partial")


def _stored_card(chapter: str, claim_text: str) -> str:
    """The stored HTML of the one claim card in ``chapter`` whose claim is ``claim_text``."""
    import nbformat

    path = next((ROOT / "book").glob(f"{chapter}-*.ipynb"))
    found = [o["data"]["text/html"] for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"
             for o in c.get("outputs", []) if "text/html" in o.get("data", {})]
    cards = [card for html in found for card in re.findall(r'<div class="batchlab-claim.*?</dl></div>', html, re.S)
             if f"原文：“{claim_text}”" in card]
    assert len(cards) == 1, (chapter, claim_text, len(cards))
    return cards[0]


def _verdict_of(card: str) -> str:
    return re.search(r'class="batchlab-claim__verdict"[^>]*>([^<]+)<', card).group(1)


def test_a_model_does_not_judge_a_measured_claim():
    """Issue 28: 4.4's 「微批次 2 → 4 提速」 is the 原文's measurement on 910B; the roofline model, an upper
    bound with no per-micro-batch overhead, cannot judge it. The card says so (it was 不成立)."""
    assert "实测" in CLAIMS["case-faster"].criterion
    card = _stored_card("4.4", CLAIMS["case-faster"].text)
    assert _verdict_of(card) == UNTESTABLE
    assert "模型下不成立" in card and "屋顶线模型" in card


def test_linear_scaling_card_is_judged_as_prescribed():
    """Issue 28: 4.2 judges 「大批次需线性缩放学习率」 as the 原文 prescribes it, with warm-up on both sides."""
    assert "加预热" in CLAIMS["needs-linear"].criterion and "不加预热" not in CLAIMS["needs-linear"].criterion
    card = _stored_card("4.2", CLAIMS["needs-linear"].text)
    assert _verdict_of(card) in VERDICT.values() and "加预热时的平均" in card
