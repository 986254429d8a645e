"""Model families: the registry of response formats and prompt layouts, one module per family.

Every path that reads a model response (the recorder, the ClawGUI importer, the API, the
trainer's policies) goes through :func:`parse_response`, so one response means the same action
everywhere, and a response that cannot be read is stored as ``unparsed`` with the reason
instead of being guessed into a ``wait`` as the reference framework does. Prompts are built by
:func:`episodelake.lake.vocab.prompts.build_messages` with the layout of the family named.

Registered families (each module's docstring is its full description), in the order
``fmt="auto"`` tries them:

- ``qwen-vl``: Qwen-VL's ``mobile_use`` / ``computer_use`` tool calls, absolute pixels
- ``gui-owl``: an ``Action:`` line, then the tool call (1000-wide grid); a prompt layout
- ``mai-ui``: ``<thinking>`` then a ``mobile_use`` tool call on the 0-999 grid, the default
  and what :func:`format_tool_call` writes; a prompt layout
- ``ui-tars``: ``Thought:`` then ``Action: click(start_box=...)``

The action record
-----------------
Responses become the stored action record described in :mod:`episodelake.lake.vocab.action_space`
(``action_type``, ``action`` in the MAI-UI vocabulary on the 0-999 grid, ``x, y, x2, y2`` as
fractions of the screenshot). A coordinate outside its family's range makes the action
invalid, with the reason in ``error``; the clamped point is kept so a viewer can still show
where the model pointed. An action with a missing or bad argument keeps its ``action_type``
and is marked invalid with an error such as ``"click: missing 'coordinate'"``.

Fallbacks
---------
When a family's structure is broken, and only then: the JSON is retried with fullwidth
punctuation made ASCII, trailing text after the object dropped, and missing closing braces
added; then the text outside ``<thinking>`` (or the broken tool call's body) is searched for
``click(x, y)`` and ``click at x, y`` (also tap, long_press, double_tap). A fallback is used
only when it finds exactly one distinct action; two different candidates make the response
``unparsed`` with both named. Fallback results carry ``fmt="fallback"``.

Adding a family
---------------
Write a module here defining ``FAMILY = ModelFamily(name=..., summary=..., doc=__doc__,
parse=..., example=..., detect=..., layout=...)`` (see :mod:`.base`: use
:func:`~.base.parse_tool_call_text` or :func:`~.base.normalise_arguments` with a
:class:`~.base.CoordinateScale` to share the validation), add it to ``_BUILT_IN`` below in its
detection place (or call :func:`register` from your own package), and list it above and in
docs/extending.md; tests/lake/vocab/families/test_registry.py checks that every registered
family is documented and parses its example. A family without a summary, a docstring or an
example is refused.
"""

from __future__ import annotations

from typing import Any

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.action_space import action_summary
from episodelake.lake.vocab.chat import HistoryStep
from episodelake.lake.vocab.families import gui_owl, mai_ui, qwen_vl, ui_tars
from episodelake.lake.vocab.families.base import (
    CoordinateScale,
    FormatParser,
    ModelFamily,
    ParsedAction,
    PromptLayout,
    normalise_arguments,
    parse_tool_call_text,
    unparsed,
)
from episodelake.lake.vocab.families.gui_owl import GUI_OWL_SCALE
from episodelake.lake.vocab.families.mai_ui import MAI_UI_SCALE, format_tool_call
from episodelake.lake.vocab.families.ui_tars import UI_TARS_SCALE

#: Detection order: Qwen-VL's computer_use call and GUI-Owl's Action line are narrower than
#: MAI-UI's bare tool call, which UI-TARS never writes.
_BUILT_IN = (qwen_vl.FAMILY, gui_owl.FAMILY, mai_ui.FAMILY, ui_tars.FAMILY)

#: The default family: what ``fmt="auto"`` reads a response as when no family detects it.
DEFAULT = mai_ui.FAMILY.name

FAMILIES: dict[str, ModelFamily] = {}


def register(family: ModelFamily, *, replace: bool = False) -> None:
    """Add a family (tried by ``fmt="auto"`` after those already registered).

    A name already taken is refused unless `replace`; so is one without a summary, a
    docstring or an example response, and the reserved name ``auto``."""
    if family.name == "auto":
        raise InvalidInput("'auto' is reserved for family detection; pick another name")
    if family.name in FAMILIES and not replace:
        raise InvalidInput(f"model family {family.name!r} is already registered; pass replace=True")
    if not family.summary.strip() or not (family.doc or "").strip() or not family.example.strip():
        raise InvalidInput(f"model family {family.name!r}: summary, doc and example are required")
    FAMILIES[family.name] = family


for _family in _BUILT_IN:
    register(_family)


def families() -> list[str]:
    """Registered family names, in the order auto-detection tries them."""
    return list(FAMILIES)


def get_family(name: str) -> ModelFamily:
    try:
        return FAMILIES[name]
    except KeyError:
        raise InvalidInput(f"fmt: unknown action format {name!r}; registered: {families()}") from None


def prompt_styles() -> list[str]:
    """The families with a prompt layout: the styles `build_messages` accepts."""
    return [name for name, family in FAMILIES.items() if family.layout is not None]


def parse_response(
    text: str, *, fmt: str = "auto", image_size: tuple[int, int] | None = None
) -> ParsedAction:
    """Read one model response. Never raises for bad model output: see ``error`` instead.

    `fmt` names a family, or ``auto`` to detect it. `image_size` is (width, height) of the
    image the model saw; only families with pixel coordinates (``qwen-vl``) need it.
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected str, not {type(text).__name__}")
    family = None if fmt == "auto" else get_family(fmt)
    if image_size is not None:
        width, height = image_size
        if width <= 0 or height <= 0:
            raise InvalidInput(f"image_size: width and height must be positive, got {image_size}")
    if not text.strip():
        return unparsed("empty response")
    if family is None:
        family = next((f for f in FAMILIES.values() if f.detect is not None and f.detect(text)),
                      FAMILIES[DEFAULT])
    return family.parse(text, image_size)


def history_step(response: str, image: Any = None) -> HistoryStep:
    """A prompt's history step from a raw response, summarised by the action it parses to."""
    parsed = parse_response(response)
    return HistoryStep(response=response, summary=action_summary(parsed.action_type, parsed.action),
                       image=image)


__all__ = [
    "DEFAULT", "FAMILIES", "GUI_OWL_SCALE", "MAI_UI_SCALE", "UI_TARS_SCALE", "CoordinateScale",
    "FormatParser", "ModelFamily", "ParsedAction", "PromptLayout", "families", "format_tool_call",
    "get_family", "history_step", "normalise_arguments", "parse_response", "parse_tool_call_text",
    "prompt_styles", "register", "unparsed",
]
