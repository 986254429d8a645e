"""`SpecModel`: the base of the product's specs (an export, an episode filter, the advantage
settings, a training run), each one pydantic model that is its only definition.

The API validates request bodies and query parameters against these models itself, so its
OpenAPI document shows each field's type, range and description as the model states them.
Python callers and the command line construct them directly; there a bad value raises the
product's `InvalidInput` (or the model's own subclass of it) naming the field, like every
other check in the product, instead of pydantic's multi-line report. Checks that span fields
raise that error themselves, so its message is the same on every path. The command line
makes its flags from the same fields.

`InvalidInput` is a `ValueError`, and pydantic reports any `ValueError` a validator raises
inside its `ValidationError`; `raised` hands such an error back as the check raised it (its
class and its message), which is how the message stays the same on every path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from episodelake.lake.storage.errors import InvalidInput


def _check_error(error: Mapping[str, Any]) -> InvalidInput | None:
    """The `InvalidInput` a validator raised, when pydantic reports it as this error."""
    found = (error.get("ctx") or {}).get("error") if error.get("type") == "value_error" else None
    return found if isinstance(found, InvalidInput) else None


def raised(errors: Sequence[Mapping[str, Any]]) -> InvalidInput | None:
    """The product's error a model's own check raised, when it is the only problem found
    (`errors`: a `ValidationError`'s, or FastAPI's request validation errors); else None.

    Before `InvalidInput` was a `ValueError` such an error left pydantic as it was raised;
    now pydantic wraps it, and this unwraps it, so a caller still gets its class (a
    `ConfigError`, say) and its message, which names the field in the check's own words."""
    return _check_error(errors[0]) if len(errors) == 1 else None


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
        own = _check_error(error)
        if own is not None:  # a check's own message names the field in its own words
            parts.append(str(own))
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
            own = raised(exc.errors(include_url=False))
            if own is None:
                raise self.error(describe(exc)) from None
            # a check's own error (this model's, or a nested spec's): its class if it is of
            # this model's kind, else this model's kind with its message
            raise (own if isinstance(own, self.error) else self.error(str(own))) from None
        except InvalidInput as exc:  # raised outside a validator, which pydantic lets through
            if isinstance(exc, self.error):
                raise
            raise self.error(str(exc)) from None
