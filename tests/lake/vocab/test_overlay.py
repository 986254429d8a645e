"""The one description of an action (`describe`) for every action type, and `draw_action`
drawing exactly that description: markers land on its points, in the documented colours."""

from __future__ import annotations

import io
import math

import pytest
from PIL import Image

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.overlay import (
    BADGE_COLOURS,
    BLUE,
    GREEN,
    ORANGE,
    PURPLE,
    RED,
    ActionView,
    describe,
    draw_action,
    thumbnail,
)

W, H = 400, 800


def view(summary: str, badge: str | None, kind: str, *points: tuple[float, float]) -> dict:
    return {"summary": summary, "badge": badge,
            "marker": {"kind": kind, "points": [{"x": x, "y": y} for x, y in points]}}


# (action_type, action, x, y, x2, y2, width, height) -> the description
CASES = [
    pytest.param("click", {"coordinate": [250, 500]}, 0.25, 0.5, None, None, W, H,
                 view("click (250, 500)", None, "click", (0.25, 0.5)), id="click"),
    pytest.param("long_press", {"coordinate": [500, 500]}, 0.5, 0.5, None, None, W, H,
                 view("long_press (500, 500)", None, "long_press", (0.5, 0.5)), id="long_press"),
    pytest.param("double_tap", {"coordinate": [100, 900]}, 0.1, 0.9, None, None, W, H,
                 view("double_tap (100, 900)", None, "double_tap", (0.1, 0.9)), id="double_tap"),
    pytest.param("swipe", {"direction": "up", "coordinate": [500, 750]}, 0.5, 0.75, None, None, W, H,
                 view("swipe up from (500, 750)", None, "swipe", (0.5, 0.75), (0.5, 0.65)), id="swipe-from-a-point"),
    # only a direction: from the centre, 20% of the shorter side (80 px of 400) to the left
    pytest.param("swipe", {"direction": "left"}, None, None, None, None, W, H,
                 view("swipe left", None, "swipe", (0.5, 0.5), (0.3, 0.5)), id="swipe-direction-only"),
    pytest.param("swipe", {"direction": "down"}, None, None, None, None, None, None,
                 view("swipe down", None, "swipe", (0.5, 0.5), (0.5, 0.7)), id="swipe-size-unknown"),
    pytest.param("swipe", {"direction": "up", "coordinate": [500, 50]}, 0.5, 0.05, None, None, W, H,
                 view("swipe up from (500, 50)", None, "swipe", (0.5, 0.05), (0.5, 0.0)), id="swipe-kept-on-screen"),
    pytest.param("swipe", {}, None, None, None, None, W, H,
                 view("swipe ?", "problem", "none"), id="swipe-without-direction"),
    pytest.param("drag", {"start_coordinate": [100, 100], "end_coordinate": [900, 900]}, 0.1, 0.1, 0.9, 0.9, W, H,
                 view("drag (100, 100) -> (900, 900)", None, "drag", (0.1, 0.1), (0.9, 0.9)), id="drag"),
    pytest.param("drag", {"start_coordinate": [100, 200]}, 0.1, 0.2, None, None, W, H,
                 view("drag (100, 200) -> (?)", "problem", "drag", (0.1, 0.2)), id="drag-without-end"),
    pytest.param("drag", {}, None, None, None, None, W, H,
                 view("drag (?) -> (?)", "problem", "none"), id="drag-without-points"),
    pytest.param("type", {"text": "hello"}, None, None, None, None, W, H,
                 view("type 'hello'", "text", "none"), id="type"),
    pytest.param("open", {"text": "Clock"}, None, None, None, None, W, H,
                 view("open 'Clock'", "text", "none"), id="open"),
    pytest.param("answer", {"text": "7:30"}, None, None, None, None, W, H,
                 view("answer '7:30'", "text", "none"), id="answer"),
    pytest.param("system_button", {"button": "back"}, None, None, None, None, W, H,
                 view("system_button back", "button", "none"), id="system_button"),
    pytest.param("wait", {}, None, None, None, None, W, H, view("wait", "wait", "none"), id="wait"),
    pytest.param("terminate", {"status": "success"}, None, None, None, None, W, H,
                 view("terminate success", "finish", "none"), id="terminate"),
    pytest.param("unparsed", {}, None, None, None, None, W, H, view("unparsed", "problem", "none"), id="unparsed"),
    pytest.param(None, None, None, None, None, None, None, None, view("unparsed", "problem", "none"), id="null"),
    pytest.param("click", {}, None, None, None, None, W, H,
                 view("click (?)", "problem", "none"), id="click-without-point"),
    pytest.param("click", {"coordinate": [1, 1]}, float("nan"), 0.5, None, None, W, H,
                 view("click (1, 1)", "problem", "none"), id="click-non-finite-point"),
]


@pytest.mark.parametrize("action_type, action, x, y, x2, y2, width, height, expected", CASES)
def test_description_of_every_action(action_type, action, x, y, x2, y2, width, height, expected):
    got = describe(action_type, action, x, y, x2, y2, width, height).model_dump()
    assert got["summary"] == expected["summary"] and got["badge"] == expected["badge"]
    assert got["marker"]["kind"] == expected["marker"]["kind"]
    assert [pytest.approx(p) for p in got["marker"]["points"]] == expected["marker"]["points"]


def blank(fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (W, H), (255, 255, 255)).save(out, fmt)
    return out.getvalue()


def drawn(action_type, action, x=None, y=None, x2=None, y2=None, **kw) -> Image.Image:
    v = describe(action_type, action, x, y, x2, y2, W, H)
    return Image.open(io.BytesIO(draw_action(blank(), v, **kw))).convert("RGB")


def badge_colour(img: Image.Image) -> tuple[int, int, int] | None:
    """The badge's background: the commonest colour in the top-left corner other than the
    white screen and the white text (None: no badge there)."""
    counts = img.crop((0, 0, 120, 40)).getcolors(120 * 40)
    inked = [(n, c) for n, c in counts if c != (255, 255, 255)]
    return max(inked)[1] if inked else None


def near(pixel, colour, tol=40) -> bool:
    return all(abs(a - b) <= tol for a, b in zip(pixel, colour, strict=True))


def test_click_is_a_red_dot_at_the_point():
    img = drawn("click", {"coordinate": [250, 500]}, 0.25, 0.5)
    assert near(img.getpixel((100, 400)), RED) and badge_colour(img) is None
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


def test_drag_is_a_line_from_green_start_to_red_end():
    img = drawn("drag", {"start_coordinate": [100, 100], "end_coordinate": [900, 900]}, 0.1, 0.1, 0.9, 0.9)
    assert near(img.getpixel((40, 80)), GREEN) and near(img.getpixel((360, 720)), RED)
    assert near(img.getpixel((200, 400)), PURPLE) and badge_colour(img) is None


def test_drag_without_end_is_its_start_and_a_problem_badge():
    img = drawn("drag", {"start_coordinate": [500, 500]}, 0.5, 0.5)
    assert near(img.getpixel((200, 400)), GREEN)
    assert not any(near(img.getpixel((200 + d, 400 + d)), PURPLE) for d in range(15, 200, 5))  # no line
    assert badge_colour(img) == BADGE_COLOURS["problem"]


@pytest.mark.parametrize("kind, args", [
    ("type", {"text": "hello"}), ("system_button", {"button": "back"}), ("terminate", {"status": "success"}),
    ("wait", {}), (None, None), ("click", {}),
])
def test_other_actions_are_a_badge_in_their_kind_colour(kind, args):
    img = drawn(kind, args)
    assert badge_colour(img) == BADGE_COLOURS[describe(kind, args, None, None).badge]
    assert img.getpixel((200, 400)) == (255, 255, 255)  # no marker in a made-up place


def test_formats_and_scaling():
    click = describe("click", {}, 0.5, 0.5)
    jpeg = draw_action(blank("JPEG"), click, fmt="jpeg", max_side=200)
    img = Image.open(io.BytesIO(jpeg))
    assert img.format == "JPEG" and img.size == (100, 200)
    webp = io.BytesIO()
    Image.new("RGB", (50, 50)).save(webp, "WEBP")
    assert draw_action(webp.getvalue(), describe("wait", {}, None, None))[:8] == b"\x89PNG\r\n\x1a\n"
    assert Image.open(io.BytesIO(thumbnail(blank(), 64))).size == (32, 64)


def test_bad_input_is_named():
    click = describe("click", {}, 0.5, 0.5)
    with pytest.raises(InvalidInput, match="image"):
        draw_action(b"not an image", click)
    with pytest.raises(InvalidInput, match="fmt"):
        draw_action(blank(), click, fmt="gif")


def test_the_description_is_a_typed_api_model():
    assert isinstance(describe("wait", {}, None, None), ActionView)


# the white outline -----------------------------------------------------------------------
SCREEN_RED = (200, 0, 0)  # a red icon filling the screen: a red marker on it shows only by its outline
WHITE = (255, 255, 255)


def on_red(action_type, action, x=None, y=None, x2=None, y2=None) -> Image.Image:
    out = io.BytesIO()
    Image.new("RGB", (W, H), SCREEN_RED).save(out, "PNG")
    v = describe(action_type, action, x, y, x2, y2, W, H)
    return Image.open(io.BytesIO(draw_action(out.getvalue(), v))).convert("RGB")


def around(centre: tuple[float, float], r: float, angles=range(23, 360, 45)) -> list[tuple[int, int]]:
    """Points at distance `r` from `centre`, by default eight off the axes (where a click's
    cross-hair runs)."""
    return [(round(centre[0] + r * math.cos(math.radians(a))), round(centre[1] + r * math.sin(math.radians(a))))
            for a in angles]


# On a 400x800 screen a marker unit is 8 px and a stroke 2 px, so the outline is 2 px: a ring
# of radius r spans r-2..r and its outline r-4..r+2; a 4 px line (x 198..201) is edged with
# white 2 px on each side.
@pytest.mark.parametrize("action_type, action, centre, colour, rims", [
    ("click", {}, (200, 400), RED, [9, 5]),  # outside the ring; between the dot and the ring
    ("double_tap", {}, (200, 400), RED, [9.5]),
    ("long_press", {}, (200, 400), ORANGE, [10.6, 3.3]),  # outside; between the dot and the rings
])
def test_a_point_marker_is_ringed_in_white_on_a_screen_of_its_colour(action_type, action, centre, colour, rims):
    img = on_red(action_type, action, centre[0] / W, centre[1] / H)
    assert near(img.getpixel(centre), colour, tol=10)
    for r in rims:
        assert [img.getpixel(p) for p in around(centre, r)] == [WHITE] * 8, (action_type, r)
    assert img.getpixel((20, 780)) == SCREEN_RED  # the outline hugs the marker


@pytest.mark.parametrize("action_type, action, xy, colour", [
    ("swipe", {}, (0.5, 0.75, 0.5, 0.25), BLUE),
    ("drag", {}, (0.5, 0.75, 0.5, 0.25), PURPLE),
])
def test_an_arrow_or_drag_line_has_a_white_edge_on_each_side(action_type, action, xy, colour):
    img = on_red(action_type, action, *xy)
    for y in (300, 400, 500):  # along the vertical line, away from its end dots and head
        assert near(img.getpixel((200, y)), colour, tol=10)
        assert img.getpixel((197, y)) == WHITE and img.getpixel((202, y)) == WHITE, (action_type, y)
        assert img.getpixel((190, y)) == SCREEN_RED
    start = (200, 600)  # the green start dot, radius 4, outlined to 6; the line leaves it upwards
    assert near(img.getpixel(start), GREEN, tol=10)
    assert [img.getpixel(p) for p in around(start, 5.4, range(23, 180, 45))] == [WHITE] * 4
