"""ScreenPolicy: what it reads of real simulated screens (elements, their text, boxes and
flags, the match features), that the episode loop hands it the UI tree, and that a recorded
step scores back to the element it chose."""

from __future__ import annotations

import json
import pickle

import pytest
import torch

from episodelake.collectors.envs.base import Task
from episodelake.collectors.envs.sim import navigation as nav
from episodelake.collectors.envs.sim.device import SimDevice
from episodelake.collectors.envs.sim.geometry import HEIGHT, WIDTH
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.tasks import get_task
from episodelake.collectors.envs.sim.tasks import long as long_tasks
from episodelake.collectors.loop import Observation, run_episode
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.vocab.families import parse_response
from episodelake.trainer.config import TrainConfig
from episodelake.trainer.loop import build_policy, split_tasks
from episodelake.trainer.policies.base import Sample
from episodelake.trainer.policies.screen import (
    ELEMENT_FEATURES,
    PROGRESS_FEATURES,
    SPAN_FEATURES,
    ScreenConfig,
    ScreenPolicy,
    collate,
    encode,
)
from episodelake.trainer.policies.screen_progress import (
    FORM_MARK,
    SCREEN_MARK,
    TAPPED_MARK,
    done_words,
    form_values,
    match_features,
    next_value,
    open_field,
    tapped_note,
    typed_of,
    value_spans,
)
from episodelake.trainer.policies.screen_read import (
    FALLBACK_COLS,
    FALLBACK_ROWS,
    Element,
    ScreenText,
    element_at,
    read_screen,
)
from episodelake.trainer.policies.tiny import VERBS, goal_words, text_spans
from episodelake.trainer.ppo import ppo_loss

FAVOURITES = "Add Anna Li, Carlos Diaz and David Nguyen to favourite contacts."
ADD_TWO = "Add two contacts: Nora Blake with the number 555-0141, and Omar Haddad with the number 555-0142."
F = {name: i for i, name in enumerate(ELEMENT_FEATURES)}


def _phone_on(app: str, *taps: str) -> Phone:
    phone = Phone(0)
    phone.step({"action": "open", "text": app})
    for name in taps:
        phone.step(nav.tap(phone, name))
    return phone


def _element(screen: ScreenText, text: str) -> tuple[int, Element]:
    return next((i, e) for i, e in enumerate(screen.elements) if e.text.startswith(text))


def test_the_contact_list_reads_as_rows_with_names_and_boxes():
    phone = _phone_on("Contacts")
    screen = read_screen(phone.ui_tree())
    texts = [e.text for e in screen.elements]
    assert any(t.startswith("Anna Lee") for t in texts) and any(t.startswith("Anna Li") for t in texts)
    assert "Search contacts" in texts
    assert not {"Back", "Home"} & set(texts)  # the navigation bar's buttons are the verbs back and home
    _, row = _element(screen, "Anna Li")
    widget = phone.screen().find("contact_c04")
    box = widget.visible
    assert row.box == pytest.approx((box.left / WIDTH, box.top / HEIGHT, box.right / WIDTH, box.bottom / HEIGHT))
    assert {"clickable", "long_clickable"} <= row.flags
    assert "editable" in _element(screen, "Search contacts")[1].flags
    assert "Contacts" in screen.text.split()  # the title is read, not offered as a target
    assert ":" not in screen.text  # the status bar's clock is left out


def test_a_switch_reads_its_rows_text_and_state():
    phone = _phone_on("Settings", "devices")
    screen = read_screen(phone.ui_tree())
    switches = [e for e in screen.elements if "checkable" in e.flags]
    assert [e.text for e in switches] == ["Bluetooth", "NFC"]
    assert all("checked" not in e.flags for e in switches)
    phone.step(nav.tap(phone, "nfc_switch"))
    assert "checked" in next(e for e in read_screen(phone.ui_tree()).elements if e.text == "NFC").flags


def test_the_settings_list_rows_carry_their_subtitles():
    screen = read_screen(_phone_on("Settings").ui_tree())
    _, row = _element(screen, "Connected devices")
    assert row.text == "Connected devices Bluetooth, NFC"
    features = match_features(["turn", "on", "nfc", "then", "mobile", "data"], ["connected", "devices", "bluetooth", "nfc"])
    assert features["matched"] == 1.0 and features["coverage"] == pytest.approx(1 / 3)


def test_match_features_tell_a_name_from_its_near_duplicate():
    goal = ["add", "anna", "li", "carlos", "diaz", "and", "david", "nguyen", "to", "favourite", "contacts"]
    right = match_features(goal, ["anna", "li", "a"])
    near = match_features(goal, ["anna", "lee", "a"])
    assert right["overlap"] == 1.0 and near["overlap"] == 0.5
    assert right["position"] == pytest.approx(1 / 10)
    star = match_features(goal, ["favorite"])  # American spelling on screen, British in the goal
    assert star["overlap"] == 0.0 and star["fuzzy"] > 0.6 and star["matched"] == 1.0
    assert match_features(goal, ["back"])["matched"] == 0.0


def test_encoding_marks_what_the_episode_already_tapped():
    phone = _phone_on("Contacts")
    screen = read_screen(phone.ui_tree())
    index, row = _element(screen, "Anna Li")
    tap = f'<tool_call>{{"name": "mobile_use", "arguments": {{"action": "click", "coordinate": {row.centre}}}}}</tool_call>'
    config = ScreenConfig(seed=0)
    fresh = encode(config, FAVOURITES, screen, [])
    after = encode(config, FAVOURITES, screen, [tap])
    assert fresh.element_features[index, F["tapped"]] == 0 and after.element_features[index, F["tapped"]] == 1
    assert after.element_features[:, F["tapped"]].sum() == 1
    assert fresh.element_features[index, F["overlap"]] == 1.0
    assert element_at(screen.elements, row.centre) == index


def _tap_on(screen: ScreenText, element: Element, *, named: bool = True) -> str:
    """A recorded tap on `element`, naming the screen it was on as the policy's responses do
    (or not: another agent's response)."""
    where = f" {SCREEN_MARK}{screen.signature}" if named else ""
    return (f"<thinking>\nscreen policy: click (p=0.500){where}\n</thinking>\n<tool_call>"
            f'{{"name": "mobile_use", "arguments": {{"action": "click", "coordinate": {element.centre}}}}}</tool_call>')


def test_a_tap_marks_its_own_screen_not_another_at_the_same_point():
    """The favourite star sits at the same point on every contact card, and a settings page's
    switch at the point of a list row: a tap on one card's star (or a page's switch) marks that
    element on that screen, before and after it flipped, and not the next card's star (or the
    list row), which a point-only record marked as done."""
    config = ScreenConfig(seed=0)
    phone = _phone_on("Contacts", "contact_c01")
    first = read_screen(phone.ui_tree())
    index, star = _element(first, "Favorite")
    tap = _tap_on(first, star)
    phone.step(nav.tap(phone, "favorite"))
    flipped = read_screen(phone.ui_tree())
    assert "checked" in flipped.elements[index].flags and flipped.signature == first.signature
    assert encode(config, FAVOURITES, flipped, [tap]).element_features[index, F["tapped"]] == 1
    other = read_screen(_phone_on("Contacts", "contact_c02").ui_tree())
    other_index, other_star = _element(other, "Favorite")
    assert other_star.centre == star.centre and other.signature != first.signature
    assert encode(config, FAVOURITES, other, [tap]).element_features[other_index, F["tapped"]] == 0
    # a response that does not name its screen counts by its point alone, as before
    unnamed = _tap_on(first, star, named=False)
    assert encode(config, FAVOURITES, other, [unnamed]).element_features[other_index, F["tapped"]] == 1

    settings = _phone_on("Settings", "network")
    page = read_screen(settings.ui_tree())
    _, switch = _element(page, "Wi-Fi calling")
    settings.step(nav.tap(settings, "wifi_calling_switch"))
    settings.step({"action": "system_button", "button": "back"})
    listing = read_screen(settings.ui_tree())
    row_index, row = _element(listing, "Connected devices")
    assert row.contains(switch.centre[0] / 999, switch.centre[1] / 999)  # the same point
    assert encode(config, FAVOURITES, listing, [_tap_on(page, switch)]).element_features[row_index, F["tapped"]] == 0
    row_tap = _tap_on(listing, row)  # a list row tapped before is marked when the list recurs
    assert encode(config, FAVOURITES, listing, [row_tap]).element_features[row_index, F["tapped"]] == 1


TOUR = "Turn on NFC, then Do Not Disturb, then mobile data."
P = {name: i for i, name in enumerate(PROGRESS_FEATURES)}


def _named_tap(screen: ScreenText, element: Element) -> str:
    """A recorded tap naming its screen and the text of the element it hit, as acting writes it."""
    return _tap_on(screen, element).replace("</thinking>", f"{tapped_note(element).strip()}\n</thinking>")


def _back_on(screen: ScreenText) -> str:
    return (f"<thinking>\nscreen policy: back (p=0.500) {SCREEN_MARK}{screen.signature}\n</thinking>\n<tool_call>"
            '{"name": "mobile_use", "arguments": {"action": "system_button", "button": "back"}}</tool_call>')


def test_goal_words_done_come_from_tapped_titles_and_in_place_changes():
    """A tapped element whose title is a goal word reaches it (a row naming it in a subtitle
    does not); a tap that stayed on its screen (a switch) changed it, one that moved on (a
    contact's row) did not."""
    goal = goal_words(TOUR)
    phone = _phone_on("Settings")
    listing = read_screen(phone.ui_tree())
    _, devices = _element(listing, "Connected devices")
    to_page = _named_tap(listing, devices)
    assert TAPPED_MARK + '"Connected devices Bluetooth, NFC"' in to_page
    phone.step(nav.tap(phone, "devices"))
    page = read_screen(phone.ui_tree())
    _, switch = _element(page, "NFC Tap")
    flip = _named_tap(page, switch)
    assert done_words(goal, [to_page], page.signature) == (set(), set())
    phone.step(nav.tap(phone, "nfc_switch"))
    assert done_words(goal, [to_page, flip], read_screen(phone.ui_tree()).signature) == ({"nfc"}, {"nfc"})
    flipped = read_screen(phone.ui_tree())
    phone.step({"action": "system_button", "button": "back"})
    listing = read_screen(phone.ui_tree())
    back = _back_on(flipped)  # the next response names the screen the tap left the episode on
    assert done_words(goal, [to_page, flip, back], listing.signature) == ({"nfc"}, {"nfc"})
    contacts = read_screen(_phone_on("Contacts").ui_tree())
    _, row = _element(contacts, "Anna Li")
    card = read_screen(_phone_on("Contacts", "contact_c04").ui_tree())
    assert done_words(goal_words(FAVOURITES), [_named_tap(contacts, row)], card.signature) == ({"anna", "li"}, set())
    assert done_words(goal, [_tap_on(page, switch)], page.signature) == (set(), set())  # another agent's tap


def test_rows_naming_a_goal_word_not_reached_are_marked_pending():
    config = ScreenConfig(seed=0)
    phone = _phone_on("Settings", "devices")
    page = read_screen(phone.ui_tree())
    _, switch = _element(page, "NFC Tap")
    flip = _named_tap(page, switch)
    phone.step(nav.tap(phone, "nfc_switch"))
    back = _back_on(read_screen(phone.ui_tree()))
    phone.step({"action": "system_button", "button": "back"})
    listing = read_screen(phone.ui_tree())
    fresh, after = encode(config, TOUR, listing, []), encode(config, TOUR, listing, [flip, back])
    devices, _ = _element(listing, "Connected devices")
    sound, _ = _element(listing, "Sound & vibration")
    display, _ = _element(listing, "Display")
    assert fresh.element_features[devices, F["pending"]] == 1 and after.element_features[devices, F["pending"]] == 0
    assert after.element_features[sound, F["pending"]] == 1 and after.element_features[display, F["pending"]] == 0
    assert fresh.progress[P["pending_visible"]] == 1
    assert after.progress[P["done_share"]] == pytest.approx(1 / 6)  # nfc of nfc, do, not, disturb, mobile, data
    assert after.progress[P["all_done"]] == 0


def test_ending_is_likelier_once_every_goal_word_changed():
    """A fresh policy rarely ends an episode (the verb prior), but does so about 1 time in 5 once
    every goal word was changed in place: a goal reached and not ended is undone by the steps
    left in the budget."""
    phone = _phone_on("Settings", "devices")
    page = read_screen(phone.ui_tree())
    _, switch = _element(page, "NFC Tap")
    flip = _named_tap(page, switch)
    phone.step(nav.tap(phone, "nfc_switch"))
    after = read_screen(phone.ui_tree())
    policy = ScreenPolicy(ScreenConfig(seed=0))

    def p_end(goal: str, history: list[str]) -> float:
        encoded = encode(policy.config, goal, after, history)
        with torch.no_grad():
            out = policy.module(collate([encoded]))
        return float(torch.softmax(out["verb"][0], 0)[VERBS.index("terminate")])

    assert encode(policy.config, "Turn on NFC.", after, [flip]).progress[P["all_done"]] == 1
    assert p_end("Turn on NFC.", [flip]) > 0.1 > 0.03 > p_end("Turn on NFC.", [])
    assert p_end(TOUR, [flip]) < 0.03


def test_a_screen_opened_again_is_a_new_visit_for_tapped():
    """The empty contact form recurs with the same signature: its fields tapped while filling
    the first contact are not marked tapped when the form opens again for the second (they
    still count in `taps`), while a tap earlier in the same visit is marked."""
    config = ScreenConfig(seed=0)
    phone = _phone_on("Contacts", "add_contact")
    form = read_screen(phone.ui_tree())
    index, name = _element(form, "Name")
    tap_name = _named_tap(form, name)
    for action in (nav.tap(phone, "name"), {"action": "type", "text": "Nora Blake"}, nav.press(phone, "save"),
                   {"action": "system_button", "button": "back"}):  # saved: the new card, then the list
        phone.step(action)
    listing = read_screen(phone.ui_tree())
    _, create = _element(listing, "Create contact")
    phone.step(nav.tap(phone, "add_contact"))
    again = read_screen(phone.ui_tree())
    assert again.signature == form.signature and again.elements[index].text == "Name"
    same_visit = encode(config, "Add two contacts.", form, [tap_name])
    new_visit = encode(config, "Add two contacts.", again, [tap_name, _back_on(form), _named_tap(listing, create)])
    assert same_visit.element_features[index, F["tapped"]] == 1
    assert new_visit.element_features[index, F["tapped"]] == 0
    assert new_visit.element_features[index, F["taps"]] == pytest.approx(1 / 3)


def test_acting_names_the_screen_so_learning_reads_the_same_taps():
    """The response names the screen it acted on; encoding the recorded history at learning
    time gives the features acting saw."""
    phone = _phone_on("Contacts")
    screen = read_screen(phone.ui_tree())
    policy = ScreenPolicy(ScreenConfig(seed=3))
    reply = policy.act(Observation(FAVOURITES, 0, b"", [], {}, seed=1, ui_tree=phone.ui_tree()))
    assert f"{SCREEN_MARK}{screen.signature}" in reply.response
    parsed = parse_response(reply.response)
    if parsed.action_type in ("click", "long_press"):
        hit = element_at(screen.elements, parsed.action["coordinate"])
        assert encode(policy.config, FAVOURITES, screen, [reply.response]).element_features[hit, F["tapped"]] == 1
        assert tapped_note(screen.elements[hit]) in reply.response  # what it tapped, for `done_words`
    assert read_screen(None, [{"text": "OK", "x0": 0.1, "y0": 0.1, "x1": 0.2, "y1": 0.2}]).signature is None


def test_value_spans_are_the_goals_names_numbers_and_quoted_texts_in_order():
    def values(goal: str) -> list[str]:
        return value_spans(goal, text_spans(goal))

    assert values(ADD_TWO) == ["Nora Blake", "555-0141", "Omar Haddad", "555-0142"]
    assert values(FAVOURITES) == ["Anna Li", "Carlos Diaz", "David Nguyen"]  # a comma ends a name
    assert values('Create a note titled "Groceries" with the text "milk and eggs".') == ["Groceries", "milk and eggs"]
    assert values("Turn on wifi.") == []  # the opening verb is not a value


def test_the_next_value_is_the_first_one_not_typed():
    values = ["Nora Blake", "555-0141", "Omar Haddad", "555-0142"]
    assert next_value(values, set()) == "Nora Blake"
    assert next_value(values, {"Nora Blake", "555-0141"}) == "Omar Haddad"
    assert next_value(values, {"Nora Blake"}) == "555-0141"
    assert next_value(values, set(values)) is None


def _typed(text: str) -> str:
    return f'<tool_call>{{"name": "mobile_use", "arguments": {{"action": "type", "text": "{text}"}}}}</tool_call>'


def test_the_keyboard_is_not_read_but_the_form_is():
    """With a field focused the keyboard covers the bottom of the screen; its keys are left out
    (`type` writes whole values), the form's fields and buttons are still read, and the form
    keeps its signature."""
    phone = _phone_on("Contacts", "add_contact", "name")
    assert phone.state.focus == "name"
    tree = phone.ui_tree()
    assert "inputmethod" in tree and 'content-desc="space"' in tree
    screen = read_screen(tree)
    texts = [e.text for e in screen.elements]
    assert {"Name", "Phone", "Save", "Cancel"} <= set(texts)
    assert not {"q", "space", "delete", "?123", "enter"} & set(texts)
    assert screen.signature == read_screen(_phone_on("Contacts", "add_contact").ui_tree()).signature


def test_a_forms_first_open_field_is_pending_until_every_value_is_typed():
    """On the contact form the name field (the first not filled) is marked pending, then the
    phone field once the name is in; the contact list's lone search box never is."""
    config = ScreenConfig(seed=0)
    phone = _phone_on("Contacts", "add_contact")
    form = read_screen(phone.ui_tree())
    name, _ = _element(form, "Name")
    number, _ = _element(form, "Phone")
    assert open_field(form.elements, set()) == name
    assert encode(config, ADD_TWO, form, []).element_features[[name, number], F["pending"]].tolist() == [1, 0]
    for action in (nav.tap(phone, "name"), {"action": "type", "text": "Nora Blake"}):
        phone.step(action)
    typed = [_tap_on(form, form.elements[name]), _typed("Nora Blake")]
    after = read_screen(phone.ui_tree())
    number, _ = _element(after, "Phone")
    assert open_field(after.elements, {"Nora Blake"}) == number
    assert encode(config, ADD_TWO, after, typed).element_features[number, F["pending"]] == 1
    every_value = [_typed(v) for v in value_spans(ADD_TWO, text_spans(ADD_TWO))]
    assert encode(config, ADD_TWO, after, every_value).element_features[:, F["pending"]].sum() == 0
    listing = read_screen(_phone_on("Contacts").ui_tree())
    assert open_field(listing.elements, set()) == -1


def test_values_typed_on_another_screen_are_not_this_forms():
    """A value typed into the list's search box is still the form's next value; one typed on
    the form counts when the same form opens again (the second contact's turn)."""
    listing = read_screen(_phone_on("Contacts").ui_tree())
    form = read_screen(_phone_on("Contacts", "add_contact").ui_tree())
    in_search = _typed("Nora Blake").replace("<tool_call>", f"<thinking>{SCREEN_MARK}{listing.signature}</thinking><tool_call>")
    in_form = _typed("Nora Blake").replace("<tool_call>", f"<thinking>{SCREEN_MARK}{form.signature}</thinking><tool_call>")
    assert typed_of([in_search], form.signature) == set() and typed_of([in_search]) == {"Nora Blake"}
    assert typed_of([in_form], form.signature) == {"Nora Blake"}
    assert typed_of([_typed("Nora Blake")], form.signature) == {"Nora Blake"}  # another agent's: no screen named
    spans = encode(ScreenConfig(seed=0), ADD_TWO, form, [in_search])
    nxt = SPAN_FEATURES.index("next")
    assert [s.text for s, f in zip(spans.spans, spans.span_numeric, strict=True) if f[nxt]] == ["Nora Blake"]


def test_a_field_holding_its_typed_value_no_longer_asks_for_typing_or_a_tap():
    """Once the focused name field shows the name the episode typed, `type` loses its boost
    (typing more would spoil the value) and the field its match pull (its text matches the goal
    because the episode wrote it), while the empty phone field below still awaits a value."""
    phone = _phone_on("Contacts", "add_contact", "name")
    config = ScreenConfig(seed=0)
    typed = _typed("Nora Blake")
    phone.step({"action": "type", "text": "Nora Blake"})
    screen = read_screen(phone.ui_tree())
    index, field = _element(screen, "Nora Blake")
    assert {"editable", "focused"} <= field.flags
    other_agent = encode(config, ADD_TWO, screen, [])  # typed by someone else: not the episode's value
    own = encode(config, ADD_TWO, screen, [typed])
    assert other_agent.field_awaiting == 1 and own.field_awaiting == 0
    assert other_agent.element_features[index, F["overlap"]] == 1 and own.element_features[index, F["overlap"]] == 0
    phone.step(nav.tap(phone, "phone"))
    assert encode(config, ADD_TWO, read_screen(phone.ui_tree()), [typed]).field_awaiting == 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_fresh_policy_types_the_next_goal_value_into_a_focused_field_once(seed):
    """The type priors: with a field focused a fresh policy types far more often than the 3 in
    100 it did, picks the goal's first value not typed yet (the name in the empty name field;
    the first long runs typed a number there 32 times for each name), and not the one the episode already typed."""
    phone = _phone_on("Contacts", "add_contact")
    policy = ScreenPolicy(ScreenConfig(seed=seed))

    def read(history: list[str]) -> tuple[float, dict[str, float]]:
        encoded = encode(policy.config, ADD_TWO, read_screen(phone.ui_tree()), history)
        with torch.no_grad():
            out = policy.module(collate([encoded]))
        spans = torch.softmax(out["spans"][0], 0)
        return (float(torch.softmax(out["verb"][0], 0)[VERBS.index("type")]),
                {span.text: float(p) for span, p in zip(encoded.spans, spans, strict=True)})

    unfocused, _ = read([])
    phone.step(nav.tap(phone, "name"))
    focused, spans = read([])
    assert unfocused < 0.1 < 0.3 < focused
    assert spans["Nora Blake"] > 0.5 and max(p for text, p in spans.items() if text != "Nora Blake") < 0.1
    phone.step({"action": "type", "text": "Nora Blake"})
    phone.step(nav.tap(phone, "phone"))
    focused_again, after = read([_typed("Nora Blake")])  # the name typed, the phone field focused
    assert focused_again > 0.3 and after["Nora Blake"] < spans["Nora Blake"] / 10 and after["555-0141"] > 0.5


def test_a_fresh_policy_prefers_the_named_row():
    """The match prior: from the start, the pointer puts more weight on the row the goal names
    (never trained on) than on its near-duplicate."""
    phone = _phone_on("Contacts")
    screen = read_screen(phone.ui_tree())
    policy = ScreenPolicy(ScreenConfig(seed=1))
    with torch.no_grad():
        out = policy.module(collate([encode(policy.config, FAVOURITES, screen, [])]))
    points = out["points"][0, 0]
    right, _ = _element(screen, "Anna Li")
    near, _ = _element(screen, "Anna Lee")
    assert points[right] > points[near]
    assert int(points.argmax()) in {right, _element(screen, "Carlos Diaz")[0], _element(screen, "David Nguyen")[0]}


def test_without_a_tree_it_reads_ocr_lines_and_else_a_grid():
    lines = [{"text": "Anna Li", "x0": 0.2, "y0": 0.4, "x1": 0.5, "y1": 0.45, "score": 0.9},
             {"text": "Contacts", "x0": 0.05, "y0": 0.06, "x1": 0.3, "y1": 0.09, "score": 0.9}]
    screen = read_screen(None, lines)
    assert [e.text for e in screen.elements] == ["Contacts", "Anna Li"]
    assert screen.elements[1].box == (0.2, 0.4, 0.5, 0.45)
    grid = read_screen(None, [])
    assert len(grid.elements) == FALLBACK_COLS * FALLBACK_ROWS and not grid.elements[0].text


def test_what_it_read_round_trips_through_the_steps_info():
    screen = read_screen(_phone_on("Settings", "sound").ui_tree())
    again = ScreenText.from_json(screen.to_json())
    assert [e.text for e in again.elements] == [e.text for e in screen.elements]
    assert [e.flags for e in again.elements] == [e.flags for e in screen.elements]
    assert again.text == screen.text


def test_the_episode_loop_hands_it_the_tree_and_records_what_it_read(tmp_path):
    lake = Lake(tmp_path / "lake")
    policy = ScreenPolicy(ScreenConfig(seed=2))
    task_id = "favourite_contacts[first=Anna Li,second=Carlos Diaz,third=David Nguyen]"
    recorder = Recorder(lake, anchor=None)
    try:
        summary = run_episode(SimDevice(0), policy, recorder, Task(task_id, seed=5), max_steps=5)
        recorder.flush()
    finally:
        recorder.close()
    rows = lake.steps(summary.episode_id).to_pylist()
    assert len(rows) == summary.steps
    infos = [json.loads(row["info"]) for row in rows]
    assert all(info["screen"]["elements"] for info in infos)
    assert any(e[0] == "Contacts" for e in infos[0]["screen"]["elements"])  # the home screen's icon
    samples = [Sample(summary.episode_id, row["step"], get_task(task_id).goal, b"", tuple(r["model_response"] for r in rows[:k]),
                      (), row["model_response"], 1.0, info=info) for k, (row, info) in enumerate(zip(rows, infos, strict=True))]
    prepared = policy.prepare(samples)
    for item, row in zip(prepared, rows, strict=True):
        parsed = parse_response(row["model_response"])
        assert item.verb >= 0
        if parsed.action_type == "click":
            assert item.argument >= 0  # the recorded tap lands on the element it chose
            assert item.elements[item.argument].centre == list(parsed.action["coordinate"])


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_advantage_sign_moves_the_chosen_elements_probability(sign):
    phone = _phone_on("Contacts")
    policy = ScreenPolicy(ScreenConfig(seed=0))
    screen = read_screen(phone.ui_tree())
    _, row = _element(screen, "Carlos Diaz")
    tap = f'<tool_call>{{"name": "mobile_use", "arguments": {{"action": "click", "coordinate": {row.centre}}}}}</tool_call>'
    prepared = policy.prepare([Sample("e", 0, FAVOURITES, b"", (), (), tap, sign, info={"screen": screen.to_json()})])
    assert prepared[0].argument == _element(screen, "Carlos Diaz")[0]
    before = policy.score(prepared).logp.detach()
    loss, _ = ppo_loss(policy.score(prepared), before, torch.tensor([sign]), clip_eps=0.2)
    loss.backward()
    torch.optim.SGD(policy.module.parameters(), lr=0.1).step()
    after = policy.score(prepared).logp.detach()
    assert bool(((after - before)[0, 1] * sign > 0).item())


def test_it_saves_loads_pickles_and_is_chosen_by_the_config(tmp_path):
    config = TrainConfig(policy="screen", difficulty="long", seed=3)
    policy = build_policy(config)
    assert isinstance(policy, ScreenPolicy) and config.lr == 3e-3 and config.threads == 1
    policy.save(tmp_path / "p")
    loaded = build_policy(config, tmp_path / "p")
    for key, value in policy.module.state_dict().items():
        assert torch.equal(value, loaded.module.state_dict()[key])
    agent = pickle.loads(pickle.dumps(policy.agent())).open(SimDevice(0))
    phone = Phone(0)
    reply = agent.act(Observation("Turn on NFC, then Do Not Disturb, then mobile data.", 0, b"", [], {}, 1,
                                  phone.ui_tree()))
    assert parse_response(reply.response).valid


def test_after_saving_one_contact_a_fresh_policy_goes_back_and_after_both_it_ends():
    """On the saved contact's card (no edit field) with the second contact's values still to
    type, `back` (toward the form again) is the likeliest verb, where the card's Favorite star
    drew the first long runs; with every value typed and saved, `terminate` gains."""
    policy = ScreenPolicy(ScreenConfig(seed=0))
    phone = _phone_on("Contacts", "add_contact")
    form = read_screen(phone.ui_tree()).signature
    history = []
    for field, value in (("name", "Nora Blake"), ("phone", "555-0141")):
        phone.step(nav.tap(phone, field))
        phone.step({"action": "type", "text": value})
        history.append(_typed(value).replace("<tool_call>", f"<thinking>{SCREEN_MARK}{form} {FORM_MARK}</thinking><tool_call>"))
    phone.step(nav.tap(phone, "save"))
    card = read_screen(phone.ui_tree())
    assert not any("editable" in e.flags for e in card.elements)

    def verbs(history: list[str]) -> dict[str, float]:
        encoded = encode(policy.config, ADD_TWO, card, history)
        assert encoded.progress.tolist()[-2:] == ([1.0, 0.0] if len(history) == 2 else [0.0, 1.0])
        with torch.no_grad():
            out = policy.module(collate([encoded]))
        return dict(zip(VERBS, torch.softmax(out["verb"][0], 0).tolist(), strict=True))

    first = verbs(history)
    assert first["back"] > 0.5 and first["back"] == max(first.values())
    both = verbs(history + [_typed("Omar Haddad").replace("<tool_call>", f"{FORM_MARK}<tool_call>"),
                            _typed("555-0142").replace("<tool_call>", f"{FORM_MARK}<tool_call>")])
    assert both["terminate"] > 10 * first["terminate"]
    listing = encode(policy.config, FAVOURITES, read_screen(_phone_on("Contacts").ui_tree()), [])
    assert listing.progress.tolist()[-2:] == [0.0, 0.0]  # names to star are never typed


def _typed_reply(policy: ScreenPolicy, goal: str, phone: Phone) -> str:
    """The policy's first `type` response on the phone's screen (it is favoured with a field focused)."""
    for seed in range(40):
        reply = policy.act(Observation(goal, 0, b"", [], {}, seed=seed, ui_tree=phone.ui_tree()))
        if parse_response(reply.response).action_type == "type":
            return reply.response
    raise AssertionError("the policy never typed into the focused field")


def test_only_values_typed_into_a_form_count_as_entered():
    """A text typed on a form (two or more edit fields) is marked so in the response; a name
    typed into the contact list's search box is not, and so does not turn the contact card
    toward back (`values_left`) as a value entered would: there the star is the goal."""
    policy = ScreenPolicy(ScreenConfig(seed=0))
    form = _typed_reply(policy, ADD_TWO, _phone_on("Contacts", "add_contact", "name"))
    search = _typed_reply(policy, FAVOURITES, _phone_on("Contacts", "search"))
    assert FORM_MARK in form and FORM_MARK not in search
    assert form_values([form]) == {parse_response(form).action["text"]} and form_values([search]) == set()
    card = read_screen(_phone_on("Contacts", "contact_c01").ui_tree())  # a contact card
    assert not any("editable" in e.flags for e in card.elements)
    looked_up = [_typed("Anna Li"), _typed("Carlos Diaz")]  # typed, but into the search box
    assert encode(policy.config, FAVOURITES, card, looked_up).progress.tolist()[-2:] == [0.0, 0.0]
    entered = [_typed("Anna Li") + FORM_MARK]
    assert encode(policy.config, FAVOURITES, card, entered).progress.tolist()[-2:] == [1.0, 0.0]


def test_a_checkpoint_from_an_older_network_is_refused_by_name(tmp_path):
    """A checkpoint saved before an input feature was added (the span features grew from 3 to
    4) is refused with the tensor and both shapes named, not torch's size-mismatch trace."""
    from safetensors.torch import load_file, save_file

    ScreenPolicy(ScreenConfig(seed=0)).save(tmp_path / "p")
    weights = load_file(str(tmp_path / "p" / "model.safetensors"))
    weights["span_prior.weight"] = weights["span_prior.weight"][:, :3].contiguous()  # as saved before `next`
    save_file(weights, str(tmp_path / "p" / "model.safetensors"))
    with pytest.raises(ValueError, match=r"earlier release.*span_prior\.weight \[1, 3\] \(this release: \[1, 4\]\)"):
        ScreenPolicy.load(tmp_path / "p")


def test_the_long_split_holds_out_the_values_never_trained_on():
    train, held_out = split_tasks(TrainConfig(policy="screen", difficulty="long", seed=7))
    assert len(held_out) == 18 and len(train) == 56
    unseen = [*long_tasks.HELD_OUT_TOGGLES, *long_tasks.HELD_OUT_FAVOURITES,
              *(name for name, _ in long_tasks.HELD_OUT_NEW_CONTACTS)]
    assert all(any(f"={value}" in task_id for value in unseen) for task_id in held_out)
    assert not any(f"={value}," in task_id or f"={value}]" in task_id for task_id in train for value in unseen)
    assert split_tasks(TrainConfig(policy="screen", difficulty="long", seed=1))[1] == held_out
