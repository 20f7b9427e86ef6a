"""How commands print figures: JSON as `replay --json` prints it, sums of money for people."""

from __future__ import annotations

from decimal import Decimal

__all__ = ["json_text", "usd"]

# A double holds 15 significant decimal digits faithfully: digits past them in an exact sum
# of costs are the residue of the costs' binary fractions, not money.
_DIGITS = 15


def json_text(value: object) -> str:
    """`value` as JSON, written as `replay --json` writes a summary (pydantic's serializer):
    each float as the shortest text that reads back as the same bits (the fold's exact sum)."""
    from pydantic_core import to_json

    return to_json(value).decode()


def usd(value: float) -> str:
    """A sum of USD for people: at most 15 significant digits, plain decimal (0.006668 for
    the exact sum 0.0066679999999999994 of the doubles nearest 0.000142, 0.000169, ...)."""
    text = format(Decimal(format(value, f".{_DIGITS}g")), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text
