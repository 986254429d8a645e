"""The app's layout at the sizes people use it: a laptop (1280x800, 1440x900) and a phone
(390x844). Each test measures the page as Chromium lays it out on the built app."""

from __future__ import annotations

import pytest

from tests.browser.conftest import shot
from tests.browser.test_daily_use import open_replay

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def boxes(page) -> dict:
    return page.evaluate("""() => {
      const box = (sel) => { const e = document.querySelector(sel); if (!e) return null;
        const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height, bottom: r.bottom, right: r.right}; };
      return {topbar: box('.topbar'), centre: box('main.centre'), img: box('[data-testid=screen] img'),
              strip: box('[data-testid=filmstrip]'), thumb: box('[data-testid=filmstrip] .thumb img'),
              scrollW: document.documentElement.scrollWidth, innerW: innerWidth, innerH: innerHeight};
    }""")


@pytest.mark.parametrize("size", [(1280, 800), (1440, 900)])
def test_the_replay_fits_a_laptop_screen(page, size):
    """Issue 24, 1: the filmstrip was squeezed to 8 px at 1280x800 (51 px at 1440x900) and the
    screenshot's bottom cut off; now both are whole inside the window, the strip under it."""
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    open_replay(page, "wifi_on-2")
    b = boxes(page)
    shot(page, f"replay-{width}x{height}")
    assert b["strip"]["h"] >= b["thumb"]["h"] + 20, b  # thumbnails and their labels, whole
    assert b["thumb"]["bottom"] <= b["strip"]["bottom"] <= height, b
    assert b["img"]["bottom"] <= b["strip"]["y"], b  # the screenshot ends above the strip
    assert b["img"]["y"] >= b["topbar"]["bottom"] and b["img"]["h"] >= 300, b
    assert page.evaluate("document.querySelector('main.centre').scrollHeight <= document.querySelector('main.centre').clientHeight + 1")
    # zoomed, the image doubles inside its frame and the strip stays where it was
    page.keyboard.press("z")
    page.wait_for_selector('[data-testid=screen][data-zoom="2"]')
    zoomed = boxes(page)
    assert zoomed["strip"] == b["strip"], (b, zoomed)
    assert page.get_by_test_id("screen").locator("img").evaluate("i => i.clientHeight") >= 1.9 * b["img"]["h"]

