"""The app's layout at the sizes people use it: a laptop (1280x800, 1440x900) and a phone
(390x844). Each test measures the page as Chromium lays it out on the built app."""

from __future__ import annotations

import httpx
import pytest

from tests.browser.conftest import axe_violations, shot
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



BROKEN_WORDS = """() => {
  // words of table cells laid out over two lines: a single word whose range has boxes on
  // more than one line ("outco / me")
  const out = [];
  for (const cell of document.querySelectorAll('table th, table td')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.textContent;
      for (const m of text.matchAll(/\\S+/g)) {
        const r = document.createRange();
        r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
        const tops = new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top)));
        if (tops.size > 1 && m[0].length <= 20) out.push(m[0]);
      }
    }
  }
  return out;
}"""



def test_a_phone_shows_the_replay_near_the_top_and_lists_that_fit(page):
    """Issue 24, 3: at 390 px the top bar took 194 px, the screenshot began at y=772, the search
    results hung off the left edge and tables broke words letter by letter."""
    page.set_viewport_size({"width": 390, "height": 844})
    open_replay(page, "wifi_on-2")
    b = boxes(page)
    shot(page, "replay-phone")
    assert b["topbar"]["h"] <= 100, b
    assert b["img"]["y"] <= 420 and b["img"]["x"] >= 0 and b["img"]["right"] <= 390, b  # replay first
    assert b["scrollW"] <= 390, b
    assert axe_violations(page) == []
    page.get_by_test_id("search").locator("input").fill("wifi")
    results = page.get_by_role("listbox", name="search results")
    results.get_by_text("wifi_on-1").first.wait_for()
    r = results.bounding_box()
    assert r["x"] >= 0 and r["x"] + r["width"] <= 390, r
    page.keyboard.press("Escape")
    httpx_post(page, "/api/sets", {"name": "phone set", "kind": "failure"})
    for path in ["/reruns", "/groups", "/sets", "/exports", "/training"]:
        page.goto(page.base + path)
        page.locator("table.grid th, p[data-testid=runs]").first.wait_for()  # Training without runs: a line
        assert page.evaluate(BROKEN_WORDS) == [], path
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, path


def httpx_post(page, path: str, body: dict) -> dict:
    r = httpx.post(page.base + path, json=body)
    assert r.status_code in (200, 201), r.text
    return r.json()
