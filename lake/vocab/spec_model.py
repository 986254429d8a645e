"""`SpecModel`: the base of the product's specs (an export, an episode filter, the advantage
settings, a training run), each one pydantic model that is its only definition.

The API validates request bodies and query parameters against these models itself, so its
OpenAPI document shows each field's type, range and description as the model states them.
Python callers and the command line construct them directly; there a bad value raises the
product's `InvalidInput` (or the model's own subclass of it) naming the field, like every
other check in the product, instead of pydantic's multi-line report. Checks that span fields
raise that error themselves, so its message is the same on every path. The command line
makes its flags from the same fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from episodelake.lake.storage.errors import InvalidInput


def describe(exc: ValidationError, *, name: Callable[[str], str] = str,
             secret: Callable[[str], bool] = lambda field: False) -> str:
    """One line for every bad field of a spec or a settings object, `field: what is wrong, not
    <value>`; a nested field is named by its own name, which is also its command-line flag.
    `name` says how a field is shown (settings name their environment variable); the value
    given is never shown for a field that is `secret` (a token)."""
    parts = []
    for error in exc.errors(include_url=False):
        names = [str(p) for p in error["loc"] if isinstance(p, str)]
        field = names[-1] if names else "value"
        if error["type"] == "extra_forbidden":
            parts.append(f"{name(field)}: no such setting")
            continue
        message = error["msg"][:1].lower() + error["msg"][1:]
        given = error.get("input")
        hidden = error["type"] == "missing" or isinstance(given, dict) or secret(field)
        parts.append(f"{name(field)}: {message}{'' if hidden else f', not {given!r}'}")
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
