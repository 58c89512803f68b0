"""Answers to simple arithmetic questions, so examples built on the simulator pass or fail for real.

"What is 2 + 3?", "Compute 12*7", "17 - 5 =", "what is 8 / 2", "3 x 4", "2.5 × 4", "(1 + 2) * 3",
"10 divided by 4": integers or decimals, + - * / x × ÷ and the words plus, minus, times,
multiplied by, divided by, with the usual precedence and parentheses. Computed exactly (fractions).
"""

from __future__ import annotations

import re
from fractions import Fraction

_WORDS = (
    (re.compile(r"\bmultiplied\s+by\b", re.IGNORECASE), "*"),
    (re.compile(r"\bdivided\s+by\b", re.IGNORECASE), "/"),
    (re.compile(r"\btimes\b", re.IGNORECASE), "*"),
    (re.compile(r"\bplus\b", re.IGNORECASE), "+"),
    (re.compile(r"\bminus\b", re.IGNORECASE), "-"),
)
_NUMBER = r"\d+(?:\.\d+)?"
_OPERAND = rf"[(\s]*-?\s*{_NUMBER}[)\s]*"
_EXPRESSION = re.compile(rf"{_OPERAND}(?:[-+*/x×÷]{_OPERAND})+")
_TOKEN = re.compile(rf"\s*({_NUMBER}|[-+*/x×÷()])")
_TRIGGER = re.compile(
    r"what\s+is|what's|whats|how\s+much\s+is|compute|calculate|evaluate|solve|result\s+of",
    re.IGNORECASE,
)
_FILLER = re.compile(r"[\s?=.!:]*")


def solve(question: str) -> str | None:
    """The result of the arithmetic question in `question` as a number string, or None.

    A question qualifies when it contains an expression with at least one operator and either a
    trigger phrase ("what is", "compute", "calculate", ...) or nothing else but punctuation and
    "=". Integral results have no ".0"; others are rounded to at most 6 decimals. Division by zero
    and malformed expressions give None. Edge case: "what is 2024-01-01?" is read as subtraction.
    """
    text = question
    for pattern, symbol in _WORDS:
        text = pattern.sub(symbol, text)
    match = _EXPRESSION.search(text)
    if match is None:
        return None
    rest = text[: match.start()] + " " + text[match.end() :]
    if not (_TRIGGER.search(rest) or _FILLER.fullmatch(rest)):
        return None
    result = _evaluate(match.group())
    return None if result is None else format_number(result)


def format_number(value: Fraction) -> str:
    """`value` as the shortest decimal string with at most 6 decimals ("5", "-2.5", "0.333333")."""
    if value.denominator == 1:
        return str(value.numerator)
    text = f"{float(round(value, 6)):.6f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _evaluate(expression: str) -> Fraction | None:
    tokens = _TOKEN.findall(expression)
    while tokens and tokens[-1] == ")" and tokens.count(")") > tokens.count("("):
        tokens.pop()  # "(what is 2 + 3)": the closing parenthesis belongs to the prose
    while tokens and tokens[0] == "(" and tokens.count("(") > tokens.count(")"):
        tokens.pop(0)
    parser = _Parser(tokens)
    try:
        value = parser.sum()
    except (ZeroDivisionError, IndexError, ValueError):
        return None
    return value if parser.done() else None


class _Parser:
    """Recursive descent over tokens: sum := product (('+'|'-') product)*, and so on."""

    def __init__(self, tokens: list[str]) -> None:
        self._tokens = tokens
        self._pos = 0

    def done(self) -> bool:
        return self._pos == len(self._tokens)

    def sum(self) -> Fraction:
        value = self.product()
        while not self.done() and self._tokens[self._pos] in "+-":
            op = self._next()
            right = self.product()
            value = value + right if op == "+" else value - right
        return value

    def product(self) -> Fraction:
        value = self.unary()
        while not self.done() and self._tokens[self._pos] in ("*", "/", "x", "×", "÷"):
            op = self._next()
            right = self.unary()
            value = value / right if op in ("/", "÷") else value * right
        return value

    def unary(self) -> Fraction:
        token = self._next()
        if token == "-":
            return -self.unary()
        if token == "(":
            value = self.sum()
            if self._next() != ")":
                raise ValueError("unbalanced parenthesis")
            return value
        return Fraction(token)

    def _next(self) -> str:
        token = self._tokens[self._pos]
        self._pos += 1
        return token
