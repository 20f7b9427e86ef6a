"""Package exports loaded on first use (PEP 562), so that importing a package costs nothing.

A package lists its exports once, as the `from ... import` statements of its
`if TYPE_CHECKING:` block (what type checkers and readers see), and hands its own file to
`lazy_exports`: each name's module is imported when the name is first looked up, then the
name is an ordinary attribute. A command that uses two names of a package loads those two
modules, not the package's every dependency (pydantic models, HTTP clients, web servers).
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, source: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose exports are the imports of the
    `if TYPE_CHECKING:` block of its file `source`."""
    where = _typing_imports(Path(source).read_text(encoding="utf-8"))

    def attribute(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later look-ups find it directly
        return value

    def names() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return attribute, names


def _typing_imports(text: str) -> dict[str, str]:
    """Each name the file's `if TYPE_CHECKING:` blocks import, and its module."""
    where: dict[str, str] = {}
    for node in ast.parse(text).body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                for alias in statement.names:
                    where[alias.asname or alias.name] = statement.module
    return where
