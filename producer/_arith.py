"""Integer arithmetic questions: generation, extraction from text, and safe evaluation."""

from __future__ import annotations

import ast
import random
import re

__all__ = ["MAX_EXPRESSION_CHARS", "evaluate", "find_expression", "generate_expressions"]

MAX_EXPRESSION_CHARS = 200
_EXPRESSION = re.compile(r"-?\d+(?:\s*[-+*]\s*-?\d+)+")
_LEADING_ZEROS = re.compile(r"\b0+(\d)")
_BINARY_OPS = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__}


def find_expression(text: str) -> str | None:
    """Return the last `a op b [op c ...]` expression (ops + - *) in the text, if any."""
    matches = _EXPRESSION.findall(text)
    if not matches:
        return None
    expr: str = matches[-1]
    return expr if len(expr) <= MAX_EXPRESSION_CHARS else None


def evaluate(expr: str) -> int:
    """Evaluate an integer expression of + - * with the usual precedence; ValueError if invalid."""
    if len(expr) > MAX_EXPRESSION_CHARS:
        raise ValueError("expression too long")
    try:
        tree = ast.parse(_LEADING_ZEROS.sub(r"\1", expr.strip()), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {expr!r}") from exc
    return _eval_node(tree.body)


def _eval_node(node: ast.expr) -> int:
    """Evaluate one whitelisted AST node."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _eval_node(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPS:
        return _BINARY_OPS[type(node.op)](_eval_node(node.left), _eval_node(node.right))
    raise ValueError(f"unsupported syntax: {ast.dump(node)}")


def generate_expressions(count: int, seed: int) -> list[str]:
    """Return `count` distinct expressions, the same list for the same seed in every process."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        expr = _random_expression(rng)
        if expr not in seen:
            seen.add(expr)
            out.append(expr)
    return out


def _random_expression(rng: random.Random) -> str:
    """Draw one expression: mostly two operands, sometimes three (to exercise precedence)."""
    kind = rng.random()
    if kind < 0.3:
        return f"{rng.randint(1, 999)} + {rng.randint(1, 999)}"
    if kind < 0.6:
        return f"{rng.randint(1, 999)} - {rng.randint(1, 999)}"
    if kind < 0.85:
        return f"{rng.randint(2, 99)} * {rng.randint(2, 99)}"
    a, b, c = rng.randint(1, 50), rng.randint(2, 20), rng.randint(1, 50)
    first, second = rng.choice("+-*"), rng.choice("+-")
    return f"{a} {first} {b} {second} {c}"
