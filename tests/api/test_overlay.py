"""`draw_action`: a pure function of image bytes and an action; markers land where the
normalised coordinates say, in the documented colours."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from episodelake.api.overlay import (
    BLUE,
    GREEN,
    ORANGE,
    PURPLE,
    RED,
    badge_text,
    draw_action,
    thumbnail,
)
from episodelake.lake.errors import InvalidInput

W, H = 400, 800


def blank(fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (W, H), (255, 255, 255)).save(out, fmt)
    return out.getvalue()


def drawn(*args, **kw) -> Image.Image:
    return Image.open(io.BytesIO(draw_action(blank(), *args, **kw))).convert("RGB")


def has_badge(img: Image.Image) -> bool:
    """Dark pixels in the top-left corner, where badges go."""
    corner = img.crop((0, 0, 120, 40)).convert("L")
    return corner.getextrema()[0] < 60


def near(pixel, colour, tol=40) -> bool:
    return all(abs(a - b) <= tol for a, b in zip(pixel, colour, strict=True))


def test_click_is_a_red_dot_at_the_point():
    img = drawn("click", {"coordinate": [250, 500]}, 0.25, 0.5)
    assert near(img.getpixel((100, 400)), RED) and not has_badge(img)
    assert img.getpixel((300, 100)) == (255, 255, 255)


def test_long_press_is_an_orange_double_ring():
    img = drawn("long_press", {}, 0.5, 0.5)
    assert near(img.getpixel((200, 400)), ORANGE)
    assert any(near(img.getpixel((200 + dx, 400)), ORANGE) for dx in range(6, 14))


def test_swipe_arrow_starts_green_and_goes_its_direction():
    img = drawn("swipe", {"direction": "up"}, 0.5, 0.75)
    assert near(img.getpixel((200, 600)), GREEN)
    assert near(img.getpixel((200, 560)), BLUE)  # above the start: it points up
    assert img.getpixel((200, 640)) == (255, 255, 255)


def test_drag_accepts_its_end_point():
    img = drawn("drag", {"start_coordinate": [100, 100], "end_coordinate": [900, 900]}, 0.1, 0.1, 0.9, 0.9)
    assert near(img.getpixel((40, 80)), GREEN) and near(img.getpixel((360, 720)), RED)
    assert near(img.getpixel((200, 400)), PURPLE)


@pytest.mark.parametrize("kind, args, text", [
    ("type", {"text": "hello"}, 'type: "hello"'),
    ("system_button", {"button": "back"}, "system_button: back"),
    ("terminate", {"status": "success"}, "terminate: success"),
    ("wait", {}, "wait"),
    (None, None, "unparsed"),
])
def test_other_actions_get_a_badge(kind, args, text):
    assert badge_text(kind, args) == text
    assert has_badge(drawn(kind, args, None, None))


def test_click_without_coordinates_is_a_badge_not_a_guess():
    img = drawn("click", {}, None, None)
    assert img.getpixel((200, 400)) == (255, 255, 255) and has_badge(img)


def test_formats_and_scaling():
    jpeg = draw_action(blank("JPEG"), "click", {}, 0.5, 0.5, fmt="jpeg", max_side=200)
    img = Image.open(io.BytesIO(jpeg))
    assert img.format == "JPEG" and img.size == (100, 200)
    webp = io.BytesIO()
    Image.new("RGB", (50, 50)).save(webp, "WEBP")
    assert draw_action(webp.getvalue(), "wait", {}, None, None)[:8] == b"\x89PNG\r\n\x1a\n"
    assert Image.open(io.BytesIO(thumbnail(blank(), 64))).size == (32, 64)


def test_bad_input_is_named():
    with pytest.raises(InvalidInput, match="image"):
        draw_action(b"not an image", "click", {}, 0.5, 0.5)
    with pytest.raises(InvalidInput, match="fmt"):
        draw_action(blank(), "click", {}, 0.5, 0.5, fmt="gif")
