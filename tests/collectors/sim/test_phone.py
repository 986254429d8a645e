"""The simulated phone: every action type does what it should, invalid actions are recorded
no-ops, screenshots are reproducible, and the three observations agree with each other."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest
from PIL import Image

from episodelake.collectors.envs.sim.geometry import IMAGE_SIZE, to_coordinate
from episodelake.collectors.envs.sim.navigation import find, tap
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import STEP_SECONDS, WAIT_SECONDS


def go(phone: Phone, *actions: dict) -> None:
    for action in actions:
        outcome = phone.step(action)
        assert outcome.valid, outcome.reason


def press(phone: Phone, name: str, kind: str = "click") -> None:
    action = tap(phone, name, kind)
    assert action is not None, f"{name} is not on {phone.screen_id()}"
    go(phone, action)


def open_app(app: str, seed: int = 0) -> Phone:
    phone = Phone(seed)
    go(phone, {"action": "open", "text": app})
    return phone


def center(phone: Phone, name: str) -> list[int]:
    widget = find(phone, name)
    assert widget is not None and widget.visible is not None
    return to_coordinate(*widget.visible.center)


# --- action types ------------------------------------------------------------------------------

def test_click_flips_a_switch_and_opens_screens():
    phone = open_app("Settings")
    press(phone, "network")
    assert phone.screen().key == "settings/network"
    assert phone.state.settings.wifi
    press(phone, "wifi_switch")
    assert not phone.state.settings.wifi
    assert "wifi_switch=off" in phone.screen_id()


def test_click_on_empty_space_is_a_valid_no_op():
    phone = Phone(0)
    before = phone.screen_id()
    outcome = phone.step({"action": "click", "coordinate": [500, 400]})
    assert outcome.valid and "nothing" in outcome.result
    assert phone.screen_id() == before


def test_long_press_asks_to_delete_a_note():
    phone = open_app("Notes")
    press(phone, "note_n1", kind="long_press")
    assert phone.state.dialog is not None and phone.state.dialog.kind == "delete_note"
    press(phone, "button1")
    assert phone.state.note("n1") is None


def test_the_carts_checkout_button_opens_the_checkout():
    phone = open_app("Shop")
    phone.state.cart = {"p01": 1}
    press(phone, "cart")
    press(phone, "checkout")
    assert phone.screen_id().startswith("shop/checkout[") and "order=p01x1" in phone.screen_id()


def test_cancel_closes_a_delete_confirmation_and_keeps_the_item():
    phone = open_app("Contacts")
    contact = phone.state.contacts[0]
    press(phone, f"contact_{contact.id}")
    press(phone, "more")
    press(phone, "menu_delete")
    assert phone.state.dialog is not None and phone.state.dialog.kind == "delete_contact"
    press(phone, "button2")
    assert phone.state.dialog is None and phone.state.contact(contact.id) is not None


def test_double_tap_likes_a_product():
    phone = open_app("Shop")
    press(phone, "featured_p01")
    press(phone, "product_image", kind="double_tap")
    assert phone.state.favorites == ["p01"]


def test_swipe_up_scrolls_content_down_and_back():
    phone = open_app("Contacts")
    assert find(phone, "contact_c34").visible is None  # Zoe Martin, below the fold
    go(phone, {"action": "swipe", "direction": "up"})
    offset = phone.state.route.scroll
    assert offset > 0
    go(phone, {"action": "swipe", "direction": "down", "coordinate": [500, 600]})
    assert phone.state.route.scroll == 0
    outcome = phone.step({"action": "swipe", "direction": "down"})
    assert outcome.valid and "top" in outcome.result


def test_swipe_opens_the_app_drawer_and_switches_tabs():
    phone = Phone(0)
    go(phone, {"action": "swipe", "direction": "up"})
    assert phone.screen().key == "home/drawer"
    phone = open_app("Phone")
    go(phone, {"action": "swipe", "direction": "right"})
    assert phone.state.route.screen == "contacts"


def test_drag_moves_a_slider_and_a_list():
    phone = open_app("Settings")
    press(phone, "display")
    slider = find(phone, "brightness")
    start = to_coordinate(*slider.rect.center)
    end = to_coordinate(slider.rect.left + 30 + (slider.rect.width - 60) * 0.8, slider.rect.center[1])
    go(phone, {"action": "drag", "start_coordinate": start, "end_coordinate": end})
    assert phone.state.settings.brightness == 80
    phone = open_app("Contacts")
    go(phone, {"action": "drag", "startCoordinate": [500, 800], "endCoordinate": [500, 300]})
    assert phone.state.route.scroll > 0


def test_type_goes_to_the_focused_field_only():
    phone = open_app("Notes")
    press(phone, "new_note")
    outcome = phone.step({"action": "type", "text": "lost"})
    assert outcome.valid and "nothing was typed" in outcome.result
    press(phone, "title")
    assert phone.state.focus == "title" and "keyboard=letters" in phone.screen_id()
    go(phone, {"action": "type", "text": "Trip"})
    press(phone, "key_s")
    assert phone.state.route.fields["title"] == "Trips"


def test_dialer_takes_typed_digits_without_focus():
    phone = open_app("Phone")
    go(phone, {"action": "type", "text": "555-0199"})
    press(phone, "dial_button")
    assert phone.state.active_call == "555-0199"
    assert phone.screen().key == "phone/call"


def test_open_unknown_app_is_invalid():
    phone = Phone(0)
    outcome = phone.step({"action": "open", "text": "Camera"})
    assert not outcome.valid and "Camera" in outcome.reason and "Settings" in outcome.reason
    assert phone.step({"action": "open", "text": "dialer"}).valid
    assert phone.state.foreground == "phone"


def test_back_hides_the_keyboard_before_leaving_and_home_resumes_the_app():
    phone = open_app("Contacts")
    press(phone, "search")
    go(phone, {"action": "system_button", "button": "back"})
    assert phone.state.focus is None and phone.screen().key == "contacts/main"
    press(phone, "contact_c02")
    go(phone, {"action": "system_button", "button": "home"})
    assert phone.screen().key == "home"
    go(phone, {"action": "open", "text": "Contacts"})
    assert phone.screen().key == "contacts/detail"  # Android resumes the back stack
    go(phone, {"action": "system_button", "button": "back"}, {"action": "system_button", "button": "back"})
    assert phone.screen().key == "home"


def test_menu_button_opens_the_overflow_menu():
    phone = open_app("Contacts")
    press(phone, "contact_c02")
    go(phone, {"action": "system_button", "button": "menu"})
    assert phone.state.menu_open
    press(phone, "menu_delete")
    assert phone.state.dialog is not None and phone.state.dialog.kind == "delete_contact"
    go(phone, {"action": "click", "coordinate": [500, 50]})  # outside the dialog
    assert phone.state.dialog is None and phone.state.contact("c02") is not None
    outcome = Phone(0).step({"action": "system_button", "button": "menu"})
    assert outcome.valid and "no menu" in outcome.result


def test_enter_submits_a_search():
    phone = open_app("Shop")
    press(phone, "search")
    go(phone, {"action": "type", "text": "cable"}, {"action": "system_button", "button": "enter"})
    assert phone.screen().key == "shop/results"
    assert find(phone, "result_p01") is not None and find(phone, "result_p02") is not None


def test_wait_only_moves_the_clock():
    phone = Phone(0)
    before, clock = phone.screen_id(), phone.state.clock_s
    go(phone, {"action": "wait"})
    assert phone.state.clock_s == clock + STEP_SECONDS + WAIT_SECONDS
    assert phone.screen_id() == before


def test_terminate_ends_the_episode_and_answer_is_recorded():
    phone = Phone(0)
    go(phone, {"action": "answer", "text": "555-0102"})
    assert phone.state.answer == "555-0102" and not phone.done
    outcome = phone.step({"action": "terminate", "status": "success"})
    assert outcome.valid and outcome.done and phone.state.terminated == "success"
    late = phone.step({"action": "wait"})
    assert not late.valid and late.done


# --- invalid actions ---------------------------------------------------------------------------

@pytest.mark.parametrize(("action", "reason"), [
    ({"action": "click", "coordinate": [1200, 300]}, "outside the screen"),
    ({"action": "click", "coordinate": [-1, 300]}, "outside the screen"),
    ({"action": "click"}, "needs 'coordinate'"),
    ({"action": "click", "coordinate": [True, 3]}, "two numbers"),
    ({"action": "long_press", "coordinate": [1, 2, 3]}, "two numbers"),
    ({"action": "fly"}, "unknown action"),
    ({"coordinate": [1, 2]}, "unknown action"),
    ({"action": "swipe", "direction": "diagonal"}, "direction"),
    ({"action": "drag", "start_coordinate": [1, 2]}, "end_coordinate"),
    ({"action": "type"}, "string 'text'"),
    ({"action": "open", "text": " "}, "app name"),
    ({"action": "system_button", "button": "power"}, "button"),
    ({"action": "terminate", "status": "maybe"}, "status"),
    (["click", 1, 2], "JSON object"),
])
def test_invalid_actions_are_recorded_no_ops(action, reason):
    phone = open_app("Settings")
    before = phone.snapshot()
    outcome = phone.step(action)
    assert not outcome.valid and not outcome.done
    assert reason in outcome.reason
    assert phone.state.clock_s == before.clock_s + STEP_SECONDS  # time passes, nothing else
    phone.state.clock_s = before.clock_s
    assert phone.state == before


# --- observations --------------------------------------------------------------------------------

def _run(seed: int) -> list[bytes]:
    phone = open_app("Notes", seed)
    frames = [phone.screenshot()]
    for step in ("new_note", "title", "Hello"):
        if find(phone, step) is not None:
            go(phone, {"action": "click", "coordinate": center(phone, step)})
        else:
            go(phone, {"action": "type", "text": step})
        frames.append(phone.screenshot())
    return frames


def test_screenshots_are_byte_identical_for_a_seed_and_differ_across_seeds():
    first, again, other = _run(5), _run(5), _run(6)
    assert first == again
    assert all(a != b for a, b in zip(first, other, strict=True))  # the clock differs


def test_a_clone_evolves_like_the_original_and_apart_from_it():
    phone = open_app("Settings", seed=3)
    twin = phone.clone()
    press(phone, "display")
    assert twin.screen().key == "settings/main"
    press(twin, "display")
    assert twin.screenshot() == phone.screenshot()


def test_screenshot_is_a_phone_sized_png_and_the_clock_moves():
    phone = Phone(0)
    image = Image.open(io.BytesIO(phone.screenshot()))
    assert image.format == "PNG" and image.size == IMAGE_SIZE and image.mode == "RGB"
    clocks = {phone.state.clock_text}
    for _ in range(4):
        go(phone, {"action": "wait"})
        clocks.add(phone.state.clock_text)
    assert len(clocks) == 5


def test_dark_theme_changes_every_screen():
    phone = open_app("Settings")
    light = phone.screenshot()
    phone.state.settings.dark = True
    phone.invalidate()
    assert phone.screenshot() != light and phone.screen_id().endswith("theme=dark]")


def test_ui_tree_is_a_uiautomator_dump():
    phone = open_app("Settings")
    press(phone, "network")
    root = ET.fromstring(phone.ui_tree())
    nodes = list(root.iter("node"))
    switch = next(n for n in nodes if n.get("resource-id") == "com.android.settings:id/wifi_switch")
    assert switch.get("class") == "android.widget.Switch" and switch.get("checked") == "true"
    assert switch.get("clickable") == "true"
    clock = next(n for n in nodes if n.get("resource-id") == "com.android.systemui:id/clock")
    assert clock.get("text") == phone.state.clock_text
    left, top = (int(v) for v in switch.get("bounds")[1:].split("]")[0].split(","))
    assert 0 <= left < 1080 and 0 <= top < 2400


def test_offscreen_rows_are_not_in_the_tree():
    phone = open_app("Contacts")
    tree = phone.ui_tree()
    assert "contact_c01" in tree and "contact_c34" not in tree


def test_resource_ids_are_unique_on_every_screen(oracle_screens):
    for screen in oracle_screens:
        ids = [w.rid for w in screen.walk() if w.rid]
        assert len(ids) == len(set(ids)), [r for r in ids if ids.count(r) > 1]
