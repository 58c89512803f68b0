"""mkdocs hook: the reference tables, built from the code at every build so that they cannot drift.

A page holds a marker on a line of its own, `<!-- reference: NAME -->`, which `on_page_markdown`
replaces with what `NAME` builds:

- `settings`: one row per field of `asynceval.Settings` (the environment variable is the field's
  name upper-cased; type and default from the field; the description from the attribute
  docstring under the field in `asynceval/config.py`);
- `events`: one row per named emitter of `asynceval.events` (the event name and level from its
  call of the writer, the fields from its signature, when it is written from its docstring);
- `cli`: the help of `asynceval` and of every subcommand, from the command line's own parsers.

A setting or an emitter without a docstring, an event name without an emitter, or an unknown
marker stops the build: the reference says everything or nothing.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

MARKER = re.compile(r"^<!-- reference: (?P<name>[a-z]+) -->$", re.M)
HELP_WIDTH = 96  # the CLI's help is rendered at this width, whatever the terminal


class MissingReference(Exception):
    """The code lacks what the reference needs (a docstring, an emitter), or a marker is unknown."""


# -- settings -----------------------------------------------------------------------------------


def setting_docstrings() -> dict[str, str]:
    """The attribute docstring under each field of `Settings`, by field name."""
    from asynceval import config

    tree = ast.parse(inspect.getsource(config.Settings))
    body = tree.body[0].body  # type: ignore[attr-defined]
    found = {}
    for node, after in zip(body, [*body[1:], None], strict=True):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            found[node.target.id] = " ".join(str(after.value.value).split())
    return found


def _type_text(annotation: Any) -> str:
    """A field's type for a reader: `int`, `float`, `bool`, the choices of a Literal; None (the
    "unset" of a setting) is left to the default column."""
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{arg}`" for arg in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_text(arg) for arg in args)
    if getattr(annotation, "__name__", "") == "SecretStr":
        return "secret str"
    return getattr(annotation, "__name__", str(annotation))


def _default_text(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) and value >= 10_000:
        return f"{value:,}".replace(",", "")
    return str(value)


def settings_table() -> str:
    from asynceval import Settings

    described = setting_docstrings()
    rows = ["| variable | type | default | rule |", "| --- | --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        if name not in described:
            raise MissingReference(f"Settings.{name} has no docstring in asynceval/config.py")
        rule = described[name].replace("|", "\\|")
        annotation, default = _type_text(field.annotation), _default_text(field.default)
        rows.append(f"| {name.upper()} | {annotation} | {default} | {rule} |")
    return "\n".join(rows)


# -- events -------------------------------------------------------------------------------------


def event_names() -> dict[str, str]:
    """Every event name constant of `asynceval.events` (an upper-case name whose value is the
    name in lower case), by constant."""
    from asynceval import events

    return {
        name: value
        for name, value in vars(events).items()
        if name.isupper() and isinstance(value, str) and value == name.lower()
    }


_EMITTER_MODULES = frozenset({"asynceval.events", "asynceval._events_signals"})
"""Where the named emitters live: `asynceval.events` and its room for provider signals."""


def _emitters() -> Iterator[tuple[str, str, Callable[..., None], ast.AST]]:
    """(event name, level, emitter, its syntax tree) of each named emitter, in the order of the
    source: a public function of `asynceval.events` that calls the writer with a level and an
    event name constant."""
    from asynceval import events

    names = event_names()
    for function in vars(events).values():
        if not inspect.isfunction(function) or function.__module__ not in _EMITTER_MODULES:
            continue
        if function.__name__.startswith("_"):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_write"):
                continue
            level, name = node.args[0], node.args[1]
            if isinstance(level, ast.Constant) and isinstance(name, ast.Name) and name.id in names:
                yield names[name.id], str(level.value).upper(), function, tree
                break


def _fields_text(function: Callable[..., None], tree: ast.AST) -> str:
    """The fields an emitter writes, in the order of its source: the keys of its dict literals
    and of its `fields["key"] = ...` lines; "..." when it spreads a parameter (`**limits`, the
    caller's `**fields`) into the line."""
    parameters = set(inspect.signature(function).parameters)
    keys: list[tuple[int, int, str]] = []
    more = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    more = more or (isinstance(value, ast.Name) and value.id in parameters)
                elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                    keys.append((key.lineno, key.col_offset, key.value))
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            keys.append((node.lineno, node.col_offset, node.slice.value))
    fields = list(dict.fromkeys(key for *_, key in sorted(keys)))
    return ", ".join(fields + (["..."] if more else []))


def events_table() -> str:
    rows = ["| event | level | fields | written when |", "| --- | --- | --- | --- |"]
    seen = set()
    for name, level, function, tree in _emitters():
        doc = inspect.getdoc(function)
        if not doc:
            raise MissingReference(f"asynceval.events.{function.__name__} has no docstring")
        when = " ".join(doc.split()).replace("|", "\\|")
        rows.append(f"| {name} | {level} | {_fields_text(function, tree)} | {when} |")
        seen.add(name)
    missing = sorted(set(event_names().values()) - seen)
    if missing:
        raise MissingReference(f"event names without an emitter in asynceval.events: {missing}")
    return "\n".join(rows)


# -- the command line ---------------------------------------------------------------------------


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """(command path, parser) of `parser` and of each subcommand below it, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _help(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=HELP_WIDTH)
    return parser.format_help().rstrip()


def cli_reference() -> str:
    from asynceval.cli import _parser

    sections = []
    for path, parser in _commands(_parser()):
        if path and not any(
            isinstance(action, argparse._SubParsersAction) for action in parser._actions
        ):
            title = " ".join(("asynceval", *path))
        elif not path:
            title = "asynceval"
        else:
            continue  # `logs`, `sim`: their subcommands have the options
        sections.append(f"## {title}\n\n```text\n{_help(parser)}\n```")
    return "\n\n".join(sections)


BUILDERS: dict[str, Callable[[], str]] = {
    "settings": settings_table,
    "events": events_table,
    "cli": cli_reference,
}


def render(markdown: str) -> str:
    """`markdown` with each reference marker replaced by what it names."""

    def build(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in BUILDERS:
            raise MissingReference(f"unknown reference marker {name!r} (known: {sorted(BUILDERS)})")
        return BUILDERS[name]()

    return MARKER.sub(build, markdown)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return render(markdown)
