"""Looking inside the screens from the web app, on a lake enriched with real OCR and
embeddings: text search from the search box opening the step with the words boxed on the
screenshot or marked in the reasoning, "screens like this" from any step, and the
redaction preview; each view passes axe-core."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.api.search_lake import PAYMENT_STEP, build_search_lake
from tests.browser.conftest import shot
from tests.browser.test_accessibility import axe_violations

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def web_lake(tmp_path_factory):
    pytest.importorskip("rapidocr_onnxruntime", reason="OCR needs the `ocr` extra: pip install -e '.[ocr]'")
    return build_search_lake(tmp_path_factory.mktemp("browser-search") / "lake")


def screen_at(page, step: int) -> None:
    page.wait_for_selector(f'[data-testid=screen][data-loaded-step="{step}"]')


def image_box(page) -> dict:
    return page.get_by_test_id("screen").locator("img").bounding_box()


def test_text_search_opens_the_step_with_the_matched_line_boxed(page):
    page.goto(page.base + "/")
    page.get_by_test_id("overview-policies").wait_for()
    page.keyboard.press("/")
    page.keyboard.type("payment failed")
    first = page.locator('[role=option][data-hit-field=screen][data-hit-episode="checkout-1"]')
    first.wait_for()
    assert first.get_attribute("data-hit-step") == str(PAYMENT_STEP)
    assert first.locator("mark").all_inner_texts() == ["Payment", "failed"]
    assert first.get_attribute("aria-selected") == "true"  # no episode matches: the first hit leads
    shot(page, "search-text-hits")
    assert axe_violations(page) == []
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf"/episodes/checkout-1/steps/{PAYMENT_STEP}\?find=payment%20failed$"))
    screen_at(page, PAYMENT_STEP)
    boxes = page.get_by_test_id("found-box")
    expect(boxes).to_have_count(1)
    # the box lies on the OCR line "Payment failed": the top third of the screen, from its left
    img, box = image_box(page), boxes.first.bounding_box()
    assert img["x"] <= box["x"] < img["x"] + 0.1 * img["width"], (img, box)
    assert img["y"] + 0.05 * img["height"] < box["y"] < img["y"] + 0.3 * img["height"], (img, box)
    assert 0.3 * img["width"] < box["width"] < 0.7 * img["width"], (img, box)
    found = page.get_by_test_id("found")
    expect(found).to_contain_text("found on the screen of step 1")
    shot(page, "search-found-on-screen")
    assert axe_violations(page) == []
    page.keyboard.press("a")  # stepping keeps the search: nothing on step 0
    screen_at(page, 0)
    expect(boxes).to_have_count(0)
    expect(found).to_contain_text("not on step 0")
    found.get_by_role("link", name=str(PAYMENT_STEP)).click()  # back through the list of steps with matches
    screen_at(page, PAYMENT_STEP)
    expect(boxes).to_have_count(1)
    found.get_by_role("link", name="clear").click()
    page.wait_for_url(re.compile(rf"/episodes/checkout-1/steps/{PAYMENT_STEP}$"))
    expect(boxes).to_have_count(0)


def test_the_search_box_lists_more_text_hits_on_request(page):
    page.goto(page.base + "/")
    page.get_by_test_id("overview-policies").wait_for()
    page.keyboard.press("/")
    page.keyboard.type("click")  # every step's raw response: 10 hits, 8 listed at first
    hits = page.locator("[role=option][data-hit-field]")
    expect(hits).to_have_count(8)
    page.keyboard.press("ArrowUp")  # from the first row up to the last: "more"
    more = page.get_by_test_id("more-text-hits")
    expect(more).to_have_attribute("aria-selected", "true")
    page.keyboard.press("Enter")
    expect(hits).to_have_count(10)
    expect(more).to_have_count(0)
    expect(page.get_by_role("listbox")).to_be_visible()  # still open, on the first new hit
    expect(hits.nth(8)).to_have_attribute("aria-selected", "true")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/episodes/[^/]+/steps/\d\?find=click$"))


def test_hits_in_the_reasoning_and_the_goal_are_marked_in_the_step_panel(page):
    page.goto(page.base + "/")
    page.get_by_test_id("overview-policies").wait_for()
    page.keyboard.press("/")
    page.keyboard.type("declining")  # the index matches stems: "declined" is what is marked
    hit = page.locator('[role=option][data-hit-field=thinking][data-hit-episode="checkout-2"]')
    hit.wait_for()
    assert hit.locator("mark").all_inner_texts() == ["declined"]
    hit.click()
    page.wait_for_url(re.compile(rf"/episodes/checkout-2/steps/{PAYMENT_STEP}\?find=declining$"))
    screen_at(page, PAYMENT_STEP)
    thinking = page.get_by_test_id("thinking")
    expect(thinking.locator("mark")).to_have_text(["declined"])
    expect(page.get_by_test_id("raw-response").locator("mark")).to_have_text(["declined"])  # opened
    assert page.get_by_test_id("raw-response").is_visible()
    expect(page.get_by_test_id("found")).to_contain_text("in the thinking")
    expect(page.get_by_test_id("found-box")).to_have_count(0)  # not on the screen

    page.keyboard.press("/")
    page.keyboard.type("shoes")
    goal = page.locator("[role=option][data-hit-field=goal]").first
    goal.wait_for()
    goal.click()
    page.wait_for_url(re.compile(r"/episodes/checkout-\d\?find=shoes$"))
    expect(page.get_by_test_id("found-goal").locator("mark")).to_have_text(["shoes"])
    assert axe_violations(page) == []


def test_screens_like_this_lists_the_twin_step_of_the_other_run_and_opens_it(page):
    page.goto(page.base + f"/episodes/checkout-1/steps/{PAYMENT_STEP}")
    screen_at(page, PAYMENT_STEP)
    toggle = page.get_by_test_id("similar-toggle")
    toggle.focus()
    page.keyboard.press("Enter")
    expect(toggle).to_have_attribute("aria-expanded", "true")
    rows = page.get_by_test_id("similar").locator("li")
    rows.first.wait_for()
    twin = rows.first
    assert (twin.get_attribute("data-episode"), twin.get_attribute("data-step")) == ("checkout-2", str(PAYMENT_STEP))
    expect(twin).to_contain_text("policy v2")
    expect(twin).to_contain_text("run run-b")
    expect(twin).to_contain_text("0.000")
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=similar] img')].every(i => i.complete && i.naturalWidth > 0)")
    shot(page, "similar-screens")
    assert rows.count() == 5  # every other enriched step, nearest first
    distances = [float(t) for t in page.locator(".similar-distance").all_inner_texts()]
    assert distances == sorted(distances)
    assert axe_violations(page) == []
    twin.get_by_role("link").click()
    page.wait_for_url(re.compile(rf"/episodes/checkout-2/steps/{PAYMENT_STEP}$"))
    screen_at(page, PAYMENT_STEP)  # the list stays open, now for this step
    expect(page.get_by_test_id("similar").locator("li").first).to_have_attribute("data-episode", "checkout-1")

    page.goto(page.base + "/episodes/raw-1/steps/0")  # never embedded: the API's message, not an empty list
    screen_at(page, 0)
    expect(page.get_by_test_id("similar-toggle")).to_have_attribute("aria-expanded", "true")
    alert = page.get_by_test_id("similar").get_by_role("alert")
    expect(alert).to_contain_text("elake enrich --what embed")
    assert page.get_by_test_id("similar").locator("li").count() == 0
    assert axe_violations(page) == []
    page.get_by_test_id("similar-toggle").click()
    expect(page.get_by_test_id("similar").get_by_role("alert")).to_have_count(0)


def test_the_redaction_preview_masks_the_phone_number_and_names_its_rule(page, web_server):
    page.goto(page.base + f"/episodes/checkout-1/steps/{PAYMENT_STEP}")
    screen_at(page, PAYMENT_STEP)
    page.get_by_test_id("redact-toggle").check()
    note = page.get_by_test_id("redaction-note")
    expect(note).to_contain_text("1 line masked (phone ×1)")
    expect(note).to_contain_text("Rules: card, email, phone.")
    img = page.get_by_test_id("screen").locator("img")
    expect(img).to_have_attribute("src", re.compile(r"\?redact=1$"))
    screen_at(page, PAYMENT_STEP)
    [region] = httpx.get(f"{web_server.url}/api/episodes/checkout-1/steps/{PAYMENT_STEP}/redaction").json()["regions"]
    # the pixels on screen at the phone number's line are the mask's, and the line above is kept
    pixel = """([x, y]) => { const i = document.querySelector('[data-testid=screen] img');
        const c = document.createElement('canvas'); c.width = i.naturalWidth; c.height = i.naturalHeight;
        const g = c.getContext('2d'); g.drawImage(i, 0, 0);
        return [...g.getImageData(Math.floor(x * c.width), Math.floor(y * c.height), 1, 1).data].slice(0, 3); }"""
    centre = [(region["x0"] + region["x1"]) / 2, (region["y0"] + region["y1"]) / 2]
    assert page.evaluate(pixel, centre) == [0, 0, 0]
    assert page.evaluate(pixel, [0.02, 0.05]) != [0, 0, 0]
    shot(page, "redaction-preview")
    assert axe_violations(page) == []
    page.keyboard.press("a")  # the preview stays on from step to step
    screen_at(page, 0)
    expect(note).to_contain_text("nothing masked")
    page.get_by_test_id("redact-toggle").uncheck()
    expect(img).not_to_have_attribute("src", re.compile(r"redact"))

    page.goto(page.base + "/episodes/raw-1/steps/0")  # no OCR text: the 409's message, never the original
    screen_at(page, 0)
    page.get_by_test_id("redact-toggle").check()
    error = page.get_by_test_id("redaction-error")
    expect(error).to_contain_text("elake enrich --what ocr")
    assert page.get_by_test_id("screen").locator("img").count() == 0
    violations = axe_violations(page)
    assert violations == [], json.dumps(violations, indent=1)
