"""Agent responses to action records, and action records back to response text.

Every path that reads a model response (the recorder, the ClawGUI importer, the API, the
trainer's policies) goes through :func:`parse_response`, so one response means the same action
everywhere, and a response that cannot be read is stored as ``unparsed`` with the reason
instead of being guessed into a ``wait`` as the reference framework does.

The action record
-----------------
Responses become the stored action record described in :mod:`episodelake.lake.vocab.action_space`
(``action_type``, ``action`` in the MAI-UI vocabulary on the 0-999 grid, ``x, y, x2, y2`` as
fractions of the screenshot). A coordinate outside its format's range makes the action
invalid, with the reason in ``error``; the clamped point is kept so a viewer can still show
where the model pointed. An action with a missing or bad argument keeps its ``action_type``
and is marked invalid with an error such as ``"click: missing 'coordinate'"``.

Formats
-------
``mai-ui``
    ``<thinking>...</thinking>`` then ``<tool_call>{"name": "mobile_use", "arguments":
    {...}}</tool_call>``. ``arguments`` may be an object, a JSON string, or absent (the action
    at the top level). Coordinates on the 0-999 grid. camelCase keys (``startCoordinate``) are
    read as snake_case. The default, and what :func:`format_tool_call` writes.
``gui-owl``
    An ``Action: <description>`` line, then the same tool call. Its prompt calls the screen
    1000x1000 while the environment divides by 999, so 1000 is accepted (and clamped).
    ``swipe`` with ``coordinate`` and ``coordinate2`` is a drag; ``terminate`` status
    ``failure`` is ``fail``. Detected by the ``Action:`` line or those arguments.
``qwen-vl``
    Qwen-VL's ``mobile_use`` / ``computer_use`` tool call, coordinates in absolute pixels of
    the image the model saw: pass ``image_size=(width, height)``; without it a coordinate
    cannot be placed and the action is invalid. ``left_click``, ``double_click``, ``key`` with
    a system key, and Back/Home/Menu/Enter buttons map onto our actions. A ``mobile_use`` call
    looks exactly like MAI-UI's, so auto-detection only picks this format for
    ``computer_use``; collectors that run a Qwen-VL model pass ``fmt="qwen-vl"``.
``ui-tars``
    ``Thought: ...`` then ``Action: click(start_box='(x,y)')`` (or ``point='<point>x
    y</point>'``, or a 4-number box, whose centre is taken), ``long_press``, ``left_double``,
    ``drag(start_box, end_box)``, ``type(content='')``, ``scroll(direction=...)``,
    ``open_app(app_name='')``, ``press_home()``, ``press_back()``, ``hotkey(key='enter')``,
    ``wait()``, ``finished()``; coordinates on a 0-1000 scale. ``scroll`` names where the view
    moves, so ``scroll(direction='down')`` is a finger swipe ``up``.

Fallbacks
---------
When a format's structure is broken, and only then: the JSON is retried with fullwidth
punctuation made ASCII, trailing text after the object dropped, and missing closing braces
added; then the text outside ``<thinking>`` (or the broken tool call's body) is searched for
``click(x, y)`` and ``click at x, y`` (also tap, long_press, double_tap). A fallback is used
only when it finds exactly one distinct action; two different candidates make the response
``unparsed`` with both named. Fallback results carry ``fmt="fallback"``.

Modules
-------
:mod:`.common` holds what the formats share (the action record, the registry, argument
validation, the tool-call reader, the fallbacks); each format has its module
(:mod:`.qwen_vl`, :mod:`.gui_owl`, :mod:`.mai_ui`, :mod:`.ui_tars`), imported here in
detection order.

Adding a format
---------------
``register_format(name, parser, detect=...)``: ``parser(text, image_size)`` returns a
:class:`ParsedAction` (use :func:`parse_tool_call_text` or :func:`normalise_arguments` with a
:class:`CoordinateScale` to share the validation); ``detect(text)`` says whether
``fmt="auto"`` should use it. Formats are tried in registration order; a built-in format is a
module here with ``parse`` and ``detect``, registered below in its place. Document each new
format under *Formats* above: a test checks that every registered name appears there.
"""

from __future__ import annotations

from episodelake.collectors.record.actions import gui_owl, mai_ui, qwen_vl, ui_tars
from episodelake.collectors.record.actions.common import (
    CoordinateScale,
    FormatParser,
    ParsedAction,
    formats,
    history_step,
    normalise_arguments,
    parse_response,
    parse_tool_call_text,
    register_format,
    unparsed,
)
from episodelake.collectors.record.actions.gui_owl import GUI_OWL_SCALE
from episodelake.collectors.record.actions.mai_ui import MAI_UI_SCALE, format_tool_call
from episodelake.collectors.record.actions.ui_tars import UI_TARS_SCALE

# Detection order: Qwen-VL's computer_use call and GUI-Owl's Action line are narrower than
# MAI-UI's bare tool call, which UI-TARS never writes.
for _name, _module in (("qwen-vl", qwen_vl), ("gui-owl", gui_owl), ("mai-ui", mai_ui),
                       ("ui-tars", ui_tars)):
    register_format(_name, _module.parse, detect=_module.detect)

__all__ = [
    "GUI_OWL_SCALE", "MAI_UI_SCALE", "UI_TARS_SCALE", "CoordinateScale", "FormatParser",
    "ParsedAction", "format_tool_call", "formats", "history_step", "normalise_arguments",
    "parse_response", "parse_tool_call_text", "register_format", "unparsed",
]
