"""The nbval sanitizer rounds measured floats to two decimals (conftest.py), rather than truncating."""
import re
from pathlib import Path

from nbval.plugin import get_sanitize_patterns

from conftest import ROUND_MARK, round_floats

CFG = Path(__file__).with_name("nbval-sanitize.cfg")


def sanitize(text: str) -> str:
    for regex, replace in get_sanitize_patterns(CFG.read_text(encoding="utf-8")):
        text = re.sub(regex, round_floats if replace == ROUND_MARK else replace, text)
    return text


def test_values_either_side_of_a_truncation_boundary_compare_equal():
    assert sanitize("loss 0.1699") == sanitize("loss 0.1701") == "loss 0.17"
    assert sanitize("B_simple = 18.296") == "B_simple = 18.30"


def test_different_values_still_differ_and_short_numbers_are_untouched():
    assert sanitize("0.158") != sanitize("0.273")
    assert sanitize("m = 16, 15.8%") == "m = 16, 15.8%"
    assert sanitize("-1.23456") == "-1.23"
    assert sanitize("at 0x7f3a2b1c9d80") == "at 0xADDRESS"
