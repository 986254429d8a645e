"""Command-line flags made from a spec model's fields, so a spec is defined once.

`elake export sft` (`ExportSpec`) and `elake train` (`TrainConfig`, `AdvantageConfig`) take one
`--flag` per field: its type (a `Literal` gives the choices, a boolean `--flag/--no-flag`),
the field's description as its help, the model's default shown there and applied by the
model. The flags parse only the type; ranges and cross-field checks stay the model's, so a bad
value is refused by the same `InvalidInput` naming the field as in the API and in Python.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo


@dataclass(frozen=True)
class Fields:
    """Fields of `model` to offer as flags (all, or those in `only`), listed in the help under
    `heading`. A nested model's field gets no flag (give its own fields instead)."""

    model: type[BaseModel]
    only: Iterable[str] | None = None
    heading: str | None = None

    def options(self) -> list[inspect.Parameter]:
        wanted = set(self.model.model_fields if self.only is None else self.only)
        return [option for name, field in self.model.model_fields.items()
                if name in wanted and (option := _option(name, field, self.heading)) is not None]


def flag(name: str) -> str:
    """The flag of field `name`."""
    return "--" + name.replace("_", "-")


def _flag_type(annotation: Any) -> Any:
    """What a field's flag parses its value to; None for a nested model (no flag)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = kinds[0] if len(kinds) == 1 else None
    if typing.get_origin(annotation) is Literal:
        return annotation
    if isinstance(annotation, type) and not issubclass(annotation, BaseModel):
        return annotation
    return None


def _option(name: str, field: FieldInfo, heading: str | None) -> inspect.Parameter | None:
    kind = _flag_type(field.annotation)
    if kind is None:
        return None
    help_text = field.description or ""
    if not field.is_required() and field.default is not None and field.default is not False:
        help_text += f" (default {field.default})"
    decls = f"{flag(name)}/--no-{flag(name)[2:]}" if kind is bool else flag(name)
    # Every flag defaults to None: a flag not given leaves the field out, so the model's own
    # default (or the caller's base settings) applies.
    option = typer.Option(decls, help=help_text, show_default=False, rich_help_panel=heading)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                             annotation=Annotated[kind | None, option])


def with_parameters(extra: Iterable[inspect.Parameter], bind: Callable[[dict[str, Any]], dict[str, Any]],
                    into: Iterable[str]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the options `extra`, after its own (Typer reads a command's options from
    its signature). When the command runs, `bind` turns the values of `extra` into the
    command's parameters named `into`, which are not options themselves."""
    extra, into = list(extra), set(into)

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for name, p in signature.parameters.items() if name not in into]
        clash = {p.name for p in own} & {p.name for p in extra}
        if clash:
            raise TypeError(f"{command.__name__}: its own parameters {sorted(clash)} are also shared options")

        @functools.wraps(command)
        def run(**kwargs: Any) -> Any:
            bound = bind({option.name: kwargs.pop(option.name) for option in extra})
            return command(**kwargs, **bound)

        run.__signature__ = signature.replace(  # type: ignore[attr-defined]  # functions take it; Callable does not declare it
            parameters=[*own, *extra])
        return run

    return decorate


def with_fields(*sections: Fields) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the flags of `sections`, after its own. The command takes a `given`
    argument: the fields whose flag was given, by name."""
    options = [option for section in sections for option in section.options()]

    def given(values: dict[str, Any]) -> dict[str, Any]:
        return {"given": {name: value for name, value in values.items() if value is not None}}

    return with_parameters(options, given, into=["given"])
