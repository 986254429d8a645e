"""`SpecModel`: the base of the product's specs (an export, an episode filter, the advantage
settings, a training run), each one pydantic model that is its only definition.

The API validates request bodies and query parameters against these models itself, so its
OpenAPI document shows each field's type, range and description as the model states them.
Python callers and the command line construct them directly; there a bad value raises the
product's `InvalidInput` (or the model's own subclass of it) naming the field, like every
other check in the product, instead of pydantic's multi-line report. Checks that span fields
raise that error themselves, so its message is the same on every path.

The command line's flags come from the same fields (`add_options`): one `--flag` per field,
its description as the help, the model's default shown and applied by the model.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ValidationError

from episodelake.lake.errors import InvalidInput


def describe(exc: ValidationError) -> str:
    """One line per bad field, `field: what is wrong, not <value>`; a nested field is named by
    its own name, which is also its command-line flag."""
    parts = []
    for error in exc.errors(include_url=False):
        names = [str(p) for p in error["loc"] if isinstance(p, str)]
        name = names[-1] if names else "value"
        if error["type"] == "extra_forbidden":
            parts.append(f"{name}: no such setting")
            continue
        message = error["msg"][:1].lower() + error["msg"][1:]
        given = error.get("input")
        shown = "" if error["type"] == "missing" or isinstance(given, dict) else f", not {given!r}"
        parts.append(f"{name}: {message}{shown}")
    return "; ".join(parts)


class SpecModel(BaseModel):
    #: What a bad value raises: the model's own kind of `InvalidInput`, also for a bad value of
    #: a spec nested in it (pydantic validates a nested spec through its `__init__`).
    error: ClassVar[type[InvalidInput]] = InvalidInput

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise self.error(describe(exc)) from None
        except InvalidInput as exc:
            if isinstance(exc, self.error):
                raise
            raise self.error(str(exc)) from None


def _option_type(annotation: Any) -> tuple[type | None, tuple | None]:
    """The argparse type and choices of a field; (None, None) for a nested model."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = kinds[0] if len(kinds) == 1 else None
    if typing.get_origin(annotation) is Literal:
        choices = typing.get_args(annotation)
        return type(choices[0]), choices
    if not isinstance(annotation, type) or issubclass(annotation, BaseModel):
        return None, None
    return annotation, None


def add_options(parser: Any, model: type[BaseModel], only: Iterable[str] | None = None) -> None:
    """One `--flag` per field of `model` (or of `only`), nested models left out: the field's
    description is the help, booleans get `--flag/--no-flag`, a `Literal` its choices. Every
    flag defaults to None, so `given_options` leaves out what was not given and the model's
    own default applies (the help shows it)."""
    names = set(model.model_fields if only is None else only)
    for name, field in model.model_fields.items():
        kind, choices = _option_type(field.annotation)
        if name not in names or kind is None:
            continue
        help_text = (field.description or "").replace("%", "%%")
        if not field.is_required() and field.default is not None and field.default is not False:
            help_text += f" (default {field.default})"
        flag = "--" + name.replace("_", "-")
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None,
                                help=help_text)
        else:
            parser.add_argument(flag, type=kind, choices=choices, default=None, help=help_text)


def given_options(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The `add_options` flags of `model` given on the command line, by field name."""
    return {name: getattr(args, name) for name in model.model_fields
            if getattr(args, name, None) is not None}
