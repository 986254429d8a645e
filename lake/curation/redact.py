"""Personal data on screenshots and in text: which text lines hold it, and masking them in a copy.

A screenshot's text comes as lines with boxes in fractions of the image (`schema.OCR_BOX`,
what `elake enrich --what ocr` stores in `steps.ocr_boxes`). `RedactRules` say what counts as
personal: phone numbers, e-mail addresses, card-like numbers (13 to 19 digits that pass the
Luhn check), names from a list and custom regular expressions. A line that matches any rule
is painted over whole with a solid mask: a blur can be read back by a model (or undone), a
solid rectangle cannot, and masking the whole line needs no guess of where inside it the
match lies (OCR gives one box per line, not per character).

Text that leaves in samples (the goal, the model's response with its thinking, an action's
text) is masked where it matches, by the same rules: there the match's place is known, so
only the matched characters give way to `TEXT_MASK`, and the rest of the text stays as it was.

The lake keeps every original: only the copies an export writes (and the API's preview) are
masked. What was masked is told by rule name and box only (`Region.recorded`), never by
the text that matched, so a record of the redaction holds no personal data itself.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, field_validator

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.spec_model import SpecModel, describe

#: The mask's colour: solid black, the conventional "removed" block.
MASK = (0, 0, 0)
#: The mask reaches this share of a line's height past its box on every side (at least
#: `MIN_PAD_PX` pixels): OCR boxes hug the glyphs, and a descender or an accent just outside
#: one must not stay readable.
PAD = 0.2
MIN_PAD_PX = 2
#: Built-in rules, in the order a line is tested (the first match names its region).
BUILT_IN = ("card", "email", "phone")
#: What stands for masked text: it says that something was removed, and holds no character
#: that a JSON string (a tool call's arguments) would need escaped.
TEXT_MASK = "[REDACTED]"
_RULE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")

# A run of digits and the separators people write between them ("+1 (415) 555-0199",
# "555-0101", "5550119"), not glued to letters, '@' or a decimal point.
_NUMBER_RUN = re.compile(r"(?<![\w@.])\+?\(?\d[\d ().\-/]*\d(?![\w@])")
_DATE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}")
_IP = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_CARD = re.compile(r"(?<![\d.])\d(?:[ -]?\d){12,18}(?![\d.])")
# OCR often reads "a.b@c.com" with a space on either side of the '@' or the dots.
_EMAIL = re.compile(r"[\w.+\-]+ ?@ ?[\w\-]+(?: ?\. ?[A-Za-z0-9\-]+)*? ?\. ?[A-Za-z]{2,}")


def luhn_ok(digits: str) -> bool:
    """The Luhn checksum every payment card number passes (and 9 in 10 random numbers fail)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


Span = tuple[int, int]


def _phone_spans(text: str) -> list[Span]:
    spans = []
    for match in _NUMBER_RUN.finditer(text):
        run = match.group().strip()
        digits = re.sub(r"\D", "", run)
        if 7 <= len(digits) <= 15 and not _DATE.fullmatch(run) and not _IP.fullmatch(run):
            spans.append(match.span())
    return spans


def _card_spans(text: str) -> list[Span]:
    return [m.span() for m in _CARD.finditer(text) if luhn_ok(re.sub(r"\D", "", m.group()))]


def _email_spans(text: str) -> list[Span]:
    return [m.span() for m in _EMAIL.finditer(text)]


_BUILT_IN: dict[str, Callable[[str], list[Span]]] = {"card": _card_spans, "email": _email_spans,
                                                     "phone": _phone_spans}


class RedactRules(SpecModel):
    """What counts as personal data on a screen. Read from a TOML or JSON file with these
    keys at the top (`load_rules`), or given inline to the API."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    phone: bool = Field(True, description="mask phone numbers (7 to 15 digits with the usual "
                        "separators; dates and IP addresses are not numbers to mask)")
    email: bool = Field(True, description="mask e-mail addresses")
    card: bool = Field(True, description="mask card-like numbers: 13 to 19 digits passing the "
                       "Luhn check")
    names: list[str] = Field(default_factory=list, max_length=100_000,
                             description="people's names to mask wherever a line contains one "
                             "(case-insensitive, whole words, any spacing between the parts)")
    patterns: dict[str, str] = Field(default_factory=dict, max_length=1000,
                                     description="more rules: rule name -> regular expression "
                                     "(Python syntax); a line it finds a match in is masked")

    @field_validator("names")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        for i, name in enumerate(names):
            if not name.strip():
                raise InvalidInput(f"names.{i}: an empty name would match nothing; remove it")
            if len(name) > 200:
                raise InvalidInput(f"names.{i}: a name of {len(name)} characters; at most 200")
        return names

    @field_validator("patterns")
    @classmethod
    def _patterns(cls, patterns: dict[str, str]) -> dict[str, str]:
        for rule, pattern in patterns.items():
            if not _RULE_NAME.match(rule) or rule in (*BUILT_IN, "name"):
                raise InvalidInput(
                    f"patterns.{rule}: a rule name is lower-case letters, digits, '-' or '_' "
                    f"(64 at most) and not one of {', '.join((*BUILT_IN, 'name'))}")
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise InvalidInput(f"patterns.{rule}: not a regular expression ({exc})") from None
            if compiled.search("") is not None:
                raise InvalidInput(f"patterns.{rule}: {pattern!r} matches the empty string, so "
                                   "it would mask every line; make it need at least one character")
        return patterns

    def rule_names(self) -> list[str]:
        """The rules in force, in the order a line is tested."""
        return ([r for r in BUILT_IN if getattr(self, r)] + (["name"] if self.names else [])
                + sorted(self.patterns))

    def recorded(self) -> dict:
        """The rules as an export's manifest states them: which rules, how many names, and a
        digest that tells two rule sets apart, but never a name or a pattern itself."""
        text = json.dumps(self.model_dump(), sort_keys=True, ensure_ascii=False)
        return {"rules": self.rule_names(), "names": len(self.names),
                "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}

    def redactor(self) -> Redactor:
        """The rules compiled, once per distinct rule set in a process."""
        return _compiled(json.dumps(self.model_dump(), sort_keys=True))


@functools.lru_cache(maxsize=8)
def _compiled(rules: str) -> Redactor:
    return Redactor(RedactRules.model_validate_json(rules))


def load_rules(path: Path) -> RedactRules:
    """Rules from a TOML (`.toml`) or JSON file; a bad file is `InvalidInput` naming the file
    and the field."""
    import tomllib

    where = f"redact_config: {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{where}: cannot be read ({type(exc).__name__}: {exc})") from None
    try:
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        kind = "TOML" if path.suffix.lower() == ".toml" else "JSON (name a TOML file *.toml)"
        raise InvalidInput(f"{where}: not valid {kind} ({exc})") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{where}: the rules must be an object of settings, not {type(data).__name__}")
    try:
        return RedactRules.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"{where}: {describe(exc)}") from None
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from None


@dataclass(frozen=True)
class Region:
    """One masked line: the rule that matched it and its box (fractions of the image)."""

    rule: str
    box: tuple[float, float, float, float]

    def recorded(self) -> dict:
        return {"rule": self.rule, "box": [round(v, 4) for v in self.box]}


class Redactor:
    """Compiled `RedactRules`: finds the lines to mask. Plain compiled expressions, so it
    pickles (a Ray export ships it to its tasks)."""

    def __init__(self, rules: RedactRules):
        self.rules = rules
        self._built_in = [r for r in BUILT_IN if getattr(rules, r)]
        self._expressions: list[tuple[str, re.Pattern[str]]] = []
        if rules.names:
            parts = sorted({r"\s*".join(map(re.escape, n.split())) for n in rules.names}, key=len, reverse=True)
            self._expressions.append(
                ("name", re.compile(r"(?<!\w)(?:" + "|".join(parts) + r")(?!\w)", re.IGNORECASE)))
        self._expressions += [(rule, re.compile(rules.patterns[rule])) for rule in sorted(rules.patterns)]

    def rule_for(self, text: str) -> str | None:
        """The first rule that finds personal data in `text`, or None."""
        for rule in self._built_in:
            if _BUILT_IN[rule](text):
                return rule
        return next((rule for rule, rx in self._expressions if rx.search(text)), None)

    def matches(self, text: str) -> list[tuple[str, Span]]:
        """Every stretch of `text` holding personal data, with its rule, in text order. Where
        two rules find overlapping stretches, the one tested first keeps its own (a card
        number is a card, not also a phone number)."""
        found: list[tuple[str, Span]] = []
        for rule in self._built_in:
            found += [(rule, span) for span in _BUILT_IN[rule](text)]
        for rule, rx in self._expressions:
            found += [(rule, m.span()) for m in rx.finditer(text) if m.end() > m.start()]
        kept: list[tuple[str, Span]] = []
        for rule, (start, end) in found:
            if all(end <= s or start >= e for _, (s, e) in kept):
                kept.append((rule, (start, end)))
        return sorted(kept, key=lambda m: m[1])

    def mask_text(self, text: str) -> tuple[str, list[str]]:
        """`text` with each match replaced by `TEXT_MASK`, and the rule of each match."""
        found = self.matches(text)
        if not found:
            return text, []
        parts, at = [], 0
        for _, (start, end) in found:
            parts += [text[at:start], TEXT_MASK]
            at = end
        parts.append(text[at:])
        return "".join(parts), [rule for rule, _ in found]

    def mask_json(self, text: str) -> tuple[str, list[str]]:
        """`mask_text` for JSON text (a step's stored action): the strings inside are masked
        and the JSON written again, so a pattern can never break its quoting; text that is
        not JSON is masked as text."""
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return self.mask_text(text)
        rules: list[str] = []

        def walk(item: Any) -> Any:
            if isinstance(item, str):
                masked, found = self.mask_text(item)
                rules.extend(found)
                return masked
            if isinstance(item, list):
                return [walk(v) for v in item]
            if isinstance(item, dict):
                return {k: walk(v) for k, v in item.items()}
            return item

        masked = walk(value)
        return (json.dumps(masked, ensure_ascii=False) if rules else text), rules

    def find(self, lines: Iterable[Mapping[str, Any]]) -> list[Region]:
        """The regions to mask among text lines (`schema.OCR_BOX` dicts)."""
        found = []
        for line in lines:
            rule = self.rule_for(line.get("text") or "")
            if rule is not None:
                found.append(Region(rule, (float(line["x0"]), float(line["y0"]),
                                           float(line["x1"]), float(line["y1"]))))
        return found


def mask_pixels(img: Any, regions: Iterable[Region]) -> None:
    """Paint each region (padded, see `PAD`) with the solid mask, in place on a PIL image."""
    from PIL import ImageDraw

    w, h = img.size
    draw = ImageDraw.Draw(img)
    fill = MASK + (255,) if img.mode == "RGBA" else MASK
    for region in regions:
        x0, y0, x1, y1 = region.box
        pad = max(MIN_PAD_PX, PAD * (y1 - y0) * h)
        draw.rectangle((max(0, int(x0 * w - pad)), max(0, int(y0 * h - pad)),
                        min(w - 1, int(x1 * w + pad + 0.999)), min(h - 1, int(y1 * h + pad + 0.999))),
                       fill=fill)
