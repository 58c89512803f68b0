"""Arithmetic questions get the number as the whole answer."""

from __future__ import annotations

from fractions import Fraction

import pytest

from asynceval.sim._arith import format_number, solve


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is 2 + 3?", "5"),
        ("Compute 12*7", "84"),
        ("17 - 5 =", "12"),
        ("what is 8 / 2", "4"),
        ("What is 8 / 3?", "2.666667"),
        ("Calculate 2.5 × 4.", "10"),
        ("what is 3 x 4", "12"),
        ("What is 10 ÷ 4?", "2.5"),
        ("What is 2 + 3 * 4?", "14"),
        ("What is (2 + 3) * 4?", "20"),
        ("What is -3 + 5?", "2"),
        ("What is 0.1 + 0.2?", "0.3"),
        ("What is 7 minus 10?", "-3"),
        ("what is 6 multiplied by 7", "42"),
        ("What is 2 + 3? Answer with the number only.", "5"),
    ],
)
def test_arithmetic_question_is_answered_with_the_result(question: str, expected: str) -> None:
    assert solve(question) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Tell me about the 2019-2020 season.",
        "Summarize the document.",
        "What is 5 / 0?",
        "What is 2 +?",
    ],
)
def test_text_that_is_not_a_computable_question_gets_no_arithmetic_answer(text: str) -> None:
    assert solve(text) is None


def test_numbers_are_formatted_without_trailing_zeros() -> None:
    assert format_number(Fraction(10, 2)) == "5"
    assert format_number(Fraction(-5, 2)) == "-2.5"
    assert format_number(Fraction(1, 3)) == "0.333333"
