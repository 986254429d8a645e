"""What the screen policy reads of a screen: the elements a user can act on, each with its
text, box and flags, and the screen's other text (titles, labels), whose hash names the screen.

From the UI tree (a uiautomator dump) where there is one, else the step's OCR lines, else a
4 x 8 grid of untexted cells (the screen policy's module docstring says what is left out and
why). Nothing here learns: the same screen always reads the same, so what acting read can be
kept with the step (`ScreenText.to_json`) and read back for learning.
"""

from __future__ import annotations

import hashlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from episodelake.lake.vocab.action_space import GRID

#: Flags of an element, in the order of its flag bits.
FLAGS = ("clickable", "long_clickable", "checkable", "checked", "editable", "scrollable", "focused")
#: Elements read per screen at most (a dense list is cut, top to bottom).
MAX_ELEMENTS = 64
#: The fallback grid when a screen has neither a tree nor OCR lines.
FALLBACK_COLS, FALLBACK_ROWS = 4, 8
#: The status bar's resource id (after the package), left out of what is read.
STATUS_BAR = ":id/status_bar"
#: The navigation bar's resource id, left out too: its Back and Home are the verbs back and
#: home, whose priors a tap on them bypassed (a fresh policy tapped Home or Back in 17 of 100
#: steps on the empty contact form, with the verb home at 1 in 100).
NAVIGATION_BAR = ":id/navigation_bar"
#: What the on-screen keyboard's package names contain (Gboard's and AOSP's
#: ``...inputmethod.latin``); its keys are left out of what is read. `type` writes a whole value,
#: while 35 keys took 9 in 10 of a tap's probability whenever a field had the focus, and each tap
#: wrote a stray letter into the field (31% of the taps on the contact form in the first long runs).
KEYBOARD_PACKAGE = "inputmethod"
#: Hex digits of a screen's signature (`ScreenText.signature`).
SIGNATURE_HEX = 10

_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")


@dataclass(frozen=True)
class Element:
    """One thing on screen to act on: its text, its box in fractions of the screen (x0, y0
    the top left corner) and its flags (names in `FLAGS`)."""

    text: str
    box: tuple[float, float, float, float]
    flags: frozenset[str] = frozenset()

    @property
    def centre(self) -> list[int]:
        """Where a tap on it lands, in the 0-999 coordinates of the action space."""
        x0, y0, x1, y1 = self.box
        return [min(GRID, max(0, round((x0 + x1) / 2 * GRID))), min(GRID, max(0, round((y0 + y1) / 2 * GRID)))]

    def contains(self, fx: float, fy: float) -> bool:
        x0, y0, x1, y1 = self.box
        return x0 <= fx <= x1 and y0 <= fy <= y1

    def to_json(self) -> list[Any]:
        bits = sum(1 << i for i, name in enumerate(FLAGS) if name in self.flags)
        return [self.text, *(round(v, 4) for v in self.box), bits]

    @classmethod
    def from_json(cls, item: Sequence[Any]) -> Element:
        text, x0, y0, x1, y1, bits = item
        return cls(text, (x0, y0, x1, y1), frozenset(name for i, name in enumerate(FLAGS) if bits >> i & 1))


def elements_from_tree(tree: str) -> list[Element]:
    """The actionable nodes of a uiautomator dump, top to bottom (module docstring)."""
    return read_tree(tree)[0]


def read_tree(tree: str) -> tuple[list[Element], str]:
    """(the actionable elements, the text of everything else: titles, labels, a toast)."""
    root = ET.fromstring(tree)
    nodes = list(root.iter("node"))
    if not nodes:
        return [], ""
    size = _bounds(nodes[0].get("bounds", ""))
    width, height = (size[2], size[3]) if size and size[2] > 0 and size[3] > 0 else (1080, 2400)
    found: list[Element] = []

    def walk(node: ET.Element, parent_text: str) -> str:
        """Adds the actionable nodes under `node`; returns the text its parent may read."""
        if _left_out(node):
            return ""
        own = " ".join(dict.fromkeys(t for t in (node.get("text", ""), node.get("content-desc", "")) if t.strip()))
        actionable = _flags(node)
        children = [walk(child, own or parent_text) for child in node.findall("node")]
        text = " ".join(dict.fromkeys(t for t in (own, *children) if t))
        box = _bounds(node.get("bounds", ""))
        if actionable and box is not None and box[2] > box[0] and box[3] > box[1]:
            found.append(Element(text or parent_text, (box[0] / width, box[1] / height, box[2] / width,
                                                       box[3] / height), actionable))
            return ""  # an actionable child's text is its own, not its parent's
        return text

    rest = walk(nodes[0], "")
    found.sort(key=lambda e: (e.box[1], e.box[0]))
    return found[:MAX_ELEMENTS], rest


def _left_out(node: ET.Element) -> bool:
    """The status bar (its clock and battery change between episodes and say nothing), the
    navigation bar and the keyboard (`NAVIGATION_BAR`, `KEYBOARD_PACKAGE`)."""
    rid = node.get("resource-id", "")
    return rid.endswith((STATUS_BAR, NAVIGATION_BAR)) or KEYBOARD_PACKAGE in node.get("package", "")


def _flags(node: ET.Element) -> frozenset[str]:
    flags = {name for name, attr in (("clickable", "clickable"), ("long_clickable", "long-clickable"),
                                     ("checkable", "checkable"), ("scrollable", "scrollable"))
             if node.get(attr) == "true"}
    if "EditText" in node.get("class", ""):
        flags.add("editable")
    if not flags - {"scrollable"}:
        return frozenset()  # a list itself is swiped, not tapped
    if node.get("checked") == "true":
        flags.add("checked")
    if node.get("focused") == "true":
        flags.add("focused")
    return frozenset(flags)


def _bounds(text: str) -> tuple[int, int, int, int] | None:
    match = _BOUNDS.match(text)
    if match is None:
        return None
    x0, y0, x1, y1 = (int(v) for v in match.groups())
    return x0, y0, x1, y1


def elements_from_ocr(lines: Sequence[dict[str, Any]]) -> list[Element]:
    """One element per OCR line (``steps.ocr_boxes``: text and box in fractions), top to bottom."""
    found = [Element(line["text"], (line["x0"], line["y0"], line["x1"], line["y1"]), frozenset({"clickable"}))
             for line in lines if line.get("text") and None not in (line.get(k) for k in ("x0", "y0", "x1", "y1"))]
    found.sort(key=lambda e: (e.box[1], e.box[0]))
    return found[:MAX_ELEMENTS]


def fallback_grid() -> list[Element]:
    """Untexted cells covering the screen, for a screen with neither tree nor OCR lines."""
    w, h = 1 / FALLBACK_COLS, 1 / FALLBACK_ROWS
    return [Element("", (c * w, r * h, (c + 1) * w, (r + 1) * h), frozenset({"clickable"}))
            for r in range(FALLBACK_ROWS) for c in range(FALLBACK_COLS)]


@dataclass(frozen=True)
class ScreenText:
    """What the policy reads of one screen: the elements to act on and the other text."""

    elements: list[Element]
    text: str = ""

    @property
    def signature(self) -> str | None:
        """Which screen this is, for "already tapped here": a hash of its text outside the
        elements (a page's title, a contact card's name), so the same page matches itself
        after a switch on it flipped, while a tap on one card's star or on a settings page
        does not mark the element at the same point of another card or of the list. None
        when there is no such text (OCR lines, the fallback grid): taps then count by their
        point alone."""
        text = " ".join(self.text.lower().split())
        return hashlib.sha1(text.encode()).hexdigest()[:SIGNATURE_HEX] if text else None

    def to_json(self) -> dict[str, Any]:
        return {"elements": [element.to_json() for element in self.elements], "text": self.text}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScreenText:
        return cls([Element.from_json(item) for item in data["elements"]], data.get("text") or "")


def read_screen(ui_tree: str | None = None, ocr_lines: Sequence[dict[str, Any]] = ()) -> ScreenText:
    """The screen's elements: from the tree, else the OCR lines, else the fallback grid."""
    elements, text = read_tree(ui_tree) if ui_tree else ([], "")
    if not elements and ocr_lines:
        elements = elements_from_ocr(ocr_lines)
    return ScreenText(elements or fallback_grid(), text)


def element_at(elements: Sequence[Element], coordinate: Sequence[float]) -> int:
    """The index of the smallest element containing a 0-999 point; -1 when none does."""
    fx, fy = coordinate[0] / GRID, coordinate[1] / GRID
    inside = [(e.box[2] - e.box[0]) * (e.box[3] - e.box[1]) for e in elements]
    hits = [i for i, e in enumerate(elements) if e.contains(fx, fy)]
    return min(hits, key=lambda i: inside[i]) if hits else -1
