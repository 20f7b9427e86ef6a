"""MkDocs hooks: the command-line and settings reference pages, generated at every build.

A page holds a marker line, `<!-- generated: cli -->`, `<!-- generated: settings -->` or
`<!-- generated: topics -->`, and the build replaces it with Markdown made from
`resultlog.cli.build_parser()`, from the fields of `resultlog.settings.Settings` or from the
topic table (`resultlog.topics.TOPICS`), so the reference cannot drift from the code. A
marker the build does not know fails it. mkdocs.yml names this file under `hooks`.

The Python API page is mkdocstrings', which reads sources where the import name puts them:
`on_config` copies the installed packages' folders to `build/api-sources` beside mkdocs.yml,
laid out as installed (resultlog.schemas is the folder schemas/: pyproject's package-dir).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import re
import shutil
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from mkdocs.plugins import event_priority
from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

__all__ = [
    "API_PACKAGES",
    "attribute_docstrings",
    "cli_reference",
    "lay_out_sources",
    "on_config",
    "on_page_markdown",
    "render_markers",
    "settings_reference",
    "topics_table",
]

API_PACKAGES = ("resultlog", "resultlog.schemas", "resultlog.consumers", "resultlog.producer")
"""The packages whose folders the API page reads (each sub-package has a folder of its own)."""
_UNIONS = (Union, UnionType)
_MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """Every command and sub-command: what it does, its usage and its arguments."""
    if parser is None:
        from resultlog.cli import build_parser

        parser = build_parser()
    parts = [_command_section(parser, "", parser.description or "")]
    parts.extend(
        _command_section(sub, name, summary) for name, sub, summary in _commands(parser, "")
    )
    return "\n".join(parts)


def _commands(
    parser: argparse.ArgumentParser, prefix: str
) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    """(full name, parser, one-line help) of every sub-command, depth first, in --help order."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, sub in action.choices.items():
            full = f"{prefix} {name}".strip()
            yield full, sub, summaries.get(name, "")
            yield from _commands(sub, full)


def _command_section(parser: argparse.ArgumentParser, name: str, summary: str) -> str:
    """One command as Markdown: a heading, its help line, its usage and an argument table."""
    title = f"resultlog {name}".strip()
    anchor = name.replace(" ", "-") or "resultlog"
    usage = " ".join(parser.format_usage().split())
    lines = [f"## `{title}` {{ #{anchor} }}", ""]
    if summary:
        lines += [_sentence(summary), ""]
    lines += ["```text", usage, "```", ""]
    rows = [_argument_row(action) for action in parser._actions if _documented(action)]
    if rows:
        lines += ["| argument | default | meaning |", "| --- | --- | --- |", *rows, ""]
    return "\n".join(lines)


def _documented(action: argparse.Action) -> bool:
    return not isinstance(action, argparse._HelpAction | argparse._SubParsersAction) and (
        action.help != argparse.SUPPRESS
    )


def _argument_row(action: argparse.Action) -> str:
    """One table row: the argument as typed, its default, its help and its choices."""
    if action.option_strings:
        takes_value = action.nargs != 0
        metavar = action.metavar or action.dest.upper()
        shown = ", ".join(
            f"{option} {metavar}" if takes_value else option for option in action.option_strings
        )
    else:
        shown = str(action.metavar or action.dest)
    meaning = action.help or ""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        meaning += f" (one of {', '.join(f'`{choice}`' for choice in action.choices)})"
    if action.required and action.option_strings:
        meaning += " (required)"
    default = action.default
    shown_default = (
        "" if default in (None, False, [], argparse.SUPPRESS) or action.nargs == 0 else default
    )
    default_cell = f"`{shown_default}`" if shown_default != "" else ""
    return f"| `{_cell(shown)}` | {default_cell} | {_cell(_sentence(meaning))} |"


def settings_reference(settings_class: Any = None) -> str:
    """Every setting: its environment variable, type, default and description."""
    if settings_class is None:
        from resultlog.settings import Settings

        settings_class = Settings
    prefix = settings_class.model_config.get("env_prefix", "")
    meanings = attribute_docstrings(settings_class)
    lines = ["| environment variable | type | default | meaning |", "| --- | --- | --- | --- |"]
    for name, field in settings_class.model_fields.items():
        names = _env_names(prefix, name, field)
        kind = _type_name(field)
        lines.append(
            f"| {' or '.join(f'`{env}`' for env in names)} | {_cell(kind)} "
            f"| {_default(field)} | {_cell(_sentence(meanings.get(name, '')))} |"
        )
    return "\n".join(lines) + "\n"


def attribute_docstrings(cls: type) -> dict[str, str]:
    """The docstring under each annotated attribute of `cls`, by name, read from its source.

    Pydantic can read them itself (`use_attribute_docstrings`), but then every command pays
    for parsing the settings' source at start-up: only the documentation needs them.
    """
    (node,) = ast.parse(textwrap.dedent(inspect.getsource(cls))).body
    assert isinstance(node, ast.ClassDef)
    found = {}
    for field, after in zip(node.body, node.body[1:], strict=False):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[field.target.id] = inspect.cleandoc(after.value.value)
    return found


def _env_names(prefix: str, name: str, field: FieldInfo) -> list[str]:
    """The environment variables a field reads: its aliases, or PREFIX + NAME."""
    alias = field.validation_alias
    choices = getattr(alias, "choices", None)
    if choices:
        return [str(choice) for choice in choices]
    if isinstance(alias, str):
        return [alias]
    return [(prefix + name).upper()]


_TYPE_WORDS = {"str": "text", "int": "integer", "float": "number", "bool": "true or false"}


def _type_name(field: FieldInfo) -> str:
    """The field's type in words: `integer`, `text, optional`, `one of A, B`, `secret`."""
    args = get_args(field.annotation) if get_origin(field.annotation) in _UNIONS else ()
    optional = type(None) in args
    kinds = [arg for arg in args if arg is not type(None)] or [field.annotation]
    (kind,) = kinds
    if get_origin(kind) is Literal:
        words = "one of " + ", ".join(f"`{value}`" for value in get_args(kind))
    elif kind is SecretStr:
        words = "secret text"
    else:
        words = _TYPE_WORDS.get(getattr(kind, "__name__", ""), str(kind))
    return words + (", optional" if optional else "")


def _default(field: FieldInfo) -> str:
    if field.default is PydanticUndefined or field.default is None:
        return ""
    return f"`{field.default}`"


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text[:1].upper() + text[1:] if text else text


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def topics_table() -> str:
    """The Kafka layout table: every topic of resultlog's one topic table."""
    from resultlog._topic_table import design_table

    return design_table()


_GENERATORS: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "settings": settings_reference,
    "topics": topics_table,
}


def render_markers(markdown: str, where: str) -> str:
    """Replace every generated-content marker; an unknown one is an error naming the page."""

    def replace(match: re.Match[str]) -> str:
        generator = _GENERATORS.get(match.group(1))
        if generator is None:
            raise ValueError(f"{where}: unknown marker {match.group(0)}")
        return generator()

    return _MARKER.sub(replace, markdown)


def lay_out_sources(target: Path) -> None:
    """Copy the installed packages' sources to `target`, laid out as their import names."""
    shutil.rmtree(target, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__", "*.so")
    for name in API_PACKAGES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.submodule_search_locations, name
        [folder] = spec.submodule_search_locations
        shutil.copytree(folder, target.joinpath(*name.split(".")), ignore=skip, dirs_exist_ok=True)


@event_priority(100)  # before mkdocstrings takes its search paths: they must exist by then
def on_config(config: Any, **_: Any) -> Any:
    """Lay the sources out in `build/api-sources` beside mkdocs.yml (mkdocs.yml's `paths`)."""
    lay_out_sources(Path(config.config_file_path).parent / "build" / "api-sources")
    return config


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """MkDocs hook: fill the page's generated sections."""
    return render_markers(markdown, page.file.src_uri)
