"""Redacted exports: personal data on simulated phone screens is masked in the exported copies,
the lake keeps the originals, and the manifest says what was masked without saying what it was.

The sim's UI tree gives every text on screen with its bounds, so each planted name, phone
number, e-mail address and card number is checked against where it really is: the pixels of
its glyphs must all be the mask in the exported image (recall), and the glyphs of every other
text must be untouched (false redaction). Most tests give the steps the UI tree's text as
their stored text lines (exactly what OCR would find, without its 1-2 s per screen); one runs
the real OCR (`elake enrich --what ocr`) on a few screens.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from functools import partial
from pathlib import Path
from xml.etree import ElementTree

import pytest
from PIL import Image, ImageChops

from episodelake.api import cli
from episodelake.collectors.envs.sim import catalog
from episodelake.collectors.envs.sim.geometry import HEIGHT, WIDTH
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import Contact, Note, PhoneState
from episodelake.collectors.jobs.enrich import DERIVATIONS, enrich
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.curation.redact import MASK, RedactRules, load_rules, luhn_ok
from episodelake.lake.export import ExportSpec, run_export
from episodelake.lake.export.job import ExportResult, prepare_episode
from episodelake.lake.ops.updates import update_columns
from episodelake.lake.storage.errors import Conflict, InvalidInput
from tests.factories import response

# --- planted personal data -------------------------------------------------------------------

EMAIL = "ana.lee@example.com"
CARD = "4111 1111 1111 1111"
NEW_CONTACT = ("Ana Test", "+44 20 7946 0958")
DIALLED = "5550119"
NAMES = [name for name, _ in catalog.CONTACTS] + [NEW_CONTACT[0]]
#: Every text that is personal: what must be masked wherever it shows.
PLANTED = NAMES + [number for _, number in catalog.CONTACTS] + [NEW_CONTACT[1], DIALLED, EMAIL, CARD]
RULES = RedactRules(names=NAMES)

#: The share of the other texts on the screens (titles, buttons, messages, prices, the clock)
#: that a mask may touch: measured 0 with the UI tree's lines and 0 with OCR's on these
#: screens; a line holding a name and other words is masked whole, so it is not always 0.
FALSE_REDACTION_RATE = 0.02


def plant(state: PhoneState) -> None:
    state.contacts.append(Contact("c900", *NEW_CONTACT))
    state.notes.append(Note("n900", "Billing", f"card {CARD}"))
    state.notes.append(Note("n901", "Email", f"mail {EMAIL}"))


def show_contact(index: int, state: PhoneState) -> None:
    state.open_app("contacts")
    state.push("contacts", "detail", state.contacts[index].id)


#: Screens showing the planted data, and screens of other apps in the same set.
SCREENS = {
    "contacts_list": lambda s: s.open_app("contacts"),
    "contact_new": lambda s: (s.open_app("contacts"), s.push("contacts", "detail", "c900")),
    "contact_alice": lambda s: (s.open_app("contacts"), s.push("contacts", "detail", s.contacts[1].id)),
    "phone_recents": lambda s: (s.open_app("phone"), s.replace("recents")),
    "phone_contacts": lambda s: (s.open_app("phone"), s.replace("contacts")),
    "in_call": lambda s: s.start_call("555-0102"),
    "dial": lambda s: (s.open_app("phone"), s.route.fields.__setitem__("number", DIALLED)),
    **{f"contact_{i}": partial(show_contact, i) for i in range(4, 34, 6)},
    "messages": lambda s: s.open_app("messages"),
    "thread": lambda s: (s.open_app("messages"), s.push("messages", "thread", s.contacts[1].id)),
    "notes": lambda s: s.open_app("notes"),
    "settings": lambda s: s.open_app("settings"),
    "shop": lambda s: s.open_app("shop"),
    "clock": lambda s: s.open_app("clock"),
    "home": lambda s: None,
}


def sim_phone(screen: str) -> Phone:
    phone = Phone(0)
    plant(phone.state)
    SCREENS[screen](phone.state)
    phone.invalidate()
    return phone


def ui_text_lines(tree: str) -> list[dict]:
    """Each text of the UI tree as a stored text line: its text and its bounds as fractions."""
    lines = []
    for node in ElementTree.fromstring(tree).iter("node"):
        text = (node.get("text") or "").strip()
        if text:
            x0, y0, x1, y1 = map(int, re.findall(r"\d+", node.get("bounds", "")))
            lines.append({"text": text, "x0": x0 / WIDTH, "y0": y0 / HEIGHT, "x1": x1 / WIDTH,
                          "y1": y1 / HEIGHT, "score": 1.0})
    return lines


def planted_kind(text: str) -> str | None:
    """Which kind of planted personal data `text` shows, if any."""
    text = text.lower()
    for kind, values in (("email", [EMAIL]), ("card", [CARD]), ("name", NAMES)):
        if any(v.lower() in text for v in values):
            return kind
    return "phone" if any(p in text for p in PLANTED if p[-1].isdigit()) else None


def record_screens(lake: Lake, screens: list[str], *, episode_id: str = "ep-sim") -> dict[int, Phone]:
    """One finished episode, a step per screen; returns each step's phone."""
    phones = {}
    with Recorder(lake, anchor=None) as rec:
        with rec.start_episode("redact", "Call Alice", episode_id=episode_id) as ep:
            for step, screen in enumerate(screens):
                phones[step] = phone = sim_phone(screen)
                ep.log_step(phone.screenshot(), response("click", thinking=f"on {screen}"), ui_tree=phone.ui_tree())
            ep.finish(success=True, eval_score=1.0)
    return phones


def store_ui_text(lake: Lake, episode_id: str, phones: dict[int, Phone], steps: list[int] | None = None) -> None:
    """Store the UI tree's texts as the steps' text lines, as OCR stores what it reads."""
    rows = []
    for step in phones if steps is None else steps:
        lines = ui_text_lines(phones[step].ui_tree())
        rows.append({"episode_id": episode_id, "step": step, "ocr_text": "\n".join(b["text"] for b in lines),
                     "ocr_boxes": lines, "ocr_version": DERIVATIONS["ocr"].version})
    update_columns(lake, "steps", rows)


def export(lake: Lake, out: Path, **options) -> ExportResult:
    spec = {"format": "llamafactory", "val_fraction": 0.0, "history_images": 0, "redact": True,
            "redact_rules": RULES, **options}
    return run_export(lake, ExportSpec(out=out, **spec))


def exported_image(result: ExportResult, lake_sha: str) -> Image.Image:
    masked = result.manifest["redaction"]["images"].get(lake_sha)
    name = masked["sha256"] if masked else lake_sha
    return Image.open(result.out / "images" / name[:2] / f"{name}.png").convert("RGB")


def ink_box(img: Image.Image, line: dict) -> tuple[int, int, int, int] | None:
    """The pixel box of a text's glyphs inside its bounds: what differs from the background."""
    w, h = img.size
    bounds = (int(line["x0"] * w), int(line["y0"] * h), int(line["x1"] * w), int(line["y1"] * h))
    crop = img.crop(bounds)
    background = max(crop.getcolors(crop.width * crop.height), key=lambda c: c[0])[1]
    diff = ImageChops.difference(crop, Image.new("RGB", crop.size, background)).convert("L")
    box = diff.point(lambda v: 255 if v > 48 else 0).getbbox()
    return None if box is None else (bounds[0] + box[0], bounds[1] + box[1], bounds[0] + box[2], bounds[1] + box[3])


def score(lake: Lake, result: ExportResult, episode_id: str, phones: dict[int, Phone]) -> dict:
    """Planted texts whose glyphs are all masked, and other texts whose glyphs a mask touched."""
    shas = {r["step"]: r["image_sha256"] for r in lake.steps(episode_id).to_pylist()}
    counts: dict = {"planted": 0, "masked": 0, "other": 0, "touched": 0, "missed": [], "hit": [], "kinds": set()}
    for step, phone in phones.items():
        original = Image.open(io.BytesIO(lake.image(episode_id, step)[0])).convert("RGB")
        exported = exported_image(result, shas[step])
        changed = ImageChops.difference(original, exported).convert("L")
        for line in ui_text_lines(phone.ui_tree()):
            box = ink_box(original, line)
            if box is None:
                continue
            kind = planted_kind(line["text"])
            if kind is not None:
                counts["planted"] += 1
                counts["kinds"].add(kind)
                colours = exported.crop(box).getcolors(1 << 20)
                if colours == [(colours[0][0], MASK)]:
                    counts["masked"] += 1
                else:
                    counts["missed"].append((step, line["text"]))
            else:
                counts["other"] += 1
                if changed.crop(box).getbbox() is not None:
                    counts["touched"] += 1
                    counts["hit"].append((step, line["text"]))
    return counts


# --- the rules --------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "rule"), [
    ("555-0102", "phone"), ("5550119", "phone"), ("+44 20 7946 0958", "phone"), ("(415) 555-0199", "phone"),
    ("call 415.555.0199 now", "phone"), (EMAIL, "email"), ("mail ana.lee @ example .com", "email"),
    (CARD, "card"), ("card4111111111111111", "card"), ("Alice Chen", "name"), ("alicechen", "name"),
    ("Call Alice Chen", "name"), ("EMP-123456", "employee"),
    # not personal: times, prices, sizes, dates, addresses of machines, near-miss names
    ("13:00", None), ("84%", None), ("$24.99", None), ("64 GB total", None), ("USB-C Charger 30W", None),
    ("2026-12-03", None), ("192.168.1.10", None), ("4111 1111 1111 1112", None), ("Alice", None),
    ("Jon Parker", None), ("user@ host", None), ("Dr. Smith", None),
])
def test_rules_tell_personal_text_from_the_rest(text, rule):
    rules = RedactRules(names=["Alice Chen", "Jon Park"], patterns={"employee": r"EMP-\d{6}"})
    assert rules.redactor().rule_for(text) == rule


def test_luhn_and_rule_switches():
    assert luhn_ok("4111111111111111") and luhn_ok("79927398713") and not luhn_ok("4111111111111112")
    quiet = RedactRules(phone=False, email=False, card=False).redactor()
    assert [quiet.rule_for(t) for t in ("555-0102", EMAIL, CARD)] == [None, None, None]
    assert RedactRules().rule_names() == ["card", "email", "phone"]


def test_rules_load_from_toml_and_json(tmp_path):
    toml = tmp_path / "rules.toml"
    toml.write_text('names = ["Alice Chen"]\ncard = false\n[patterns]\nticket = "TCK-\\\\d+"\n')
    rules = load_rules(toml)
    assert rules.names == ["Alice Chen"] and not rules.card and rules.patterns == {"ticket": r"TCK-\d+"}
    as_json = tmp_path / "rules.json"
    as_json.write_text(json.dumps(rules.model_dump()))
    assert load_rules(as_json) == rules
    assert rules.recorded() == {"rules": ["email", "phone", "name", "ticket"], "names": 1,
                                "sha256": load_rules(as_json).recorded()["sha256"]}
    assert "Alice" not in json.dumps(rules.recorded())


@pytest.mark.parametrize(("name", "text", "message"), [
    ("a.toml", 'names = ["Alice", " "]', "names.1: an empty name"),
    ("b.toml", "phones = true", "phones: no such setting"),
    ("c.toml", 'phone = "yes"', "phone: input should be a valid boolean"),
    ("d.toml", '[patterns]\nid = "("', "patterns.id: not a regular expression"),
    ("e.toml", '[patterns]\nany = ".*"', "patterns.any: '.*' matches the empty string"),
    ("f.toml", '[patterns]\nphone = "x"', "patterns.phone: a rule name"),
    ("g.toml", "names = [", "not valid TOML"),
    ("h.json", "[1, 2]", "must be an object of settings"),
    ("missing.toml", None, "cannot be read"),
])
def test_a_bad_rules_file_names_the_file_and_the_field(tmp_path, name, text, message):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(InvalidInput, match=re.escape(f"redact_config: {path}: ")) as caught:
        load_rules(path)
    assert message in str(caught.value)


def test_the_spec_takes_rules_from_a_file_and_refuses_contradictions(tmp_path):
    rules_file = tmp_path / "rules.toml"
    rules_file.write_text('names = ["Alice Chen"]\n')
    spec = ExportSpec(format="llamafactory", out=tmp_path / "o", redact=True, redact_config=rules_file)
    assert spec.redact_rules == RedactRules(names=["Alice Chen"])
    recorded = spec.recorded()
    assert recorded["redact_rules"] == spec.redact_rules.recorded() and "redact_config" not in recorded
    assert "Alice" not in json.dumps(recorded)
    assert pickle.loads(pickle.dumps(spec)).redactor().rule_for("Alice Chen") == "name"
    with pytest.raises(InvalidInput, match="redact_config: .*add --redact"):
        ExportSpec(format="llamafactory", out=tmp_path / "o", redact_config=rules_file)
    with pytest.raises(InvalidInput, match="redact_rules: .*redact"):
        ExportSpec(format="llamafactory", out=tmp_path / "o", redact_rules=RULES)
    with pytest.raises(InvalidInput, match="redact_config: .*not both"):
        ExportSpec(format="llamafactory", out=tmp_path / "o", redact=True, redact_rules=RULES,
                   redact_config=rules_file)
    with pytest.raises(InvalidInput, match="redact_missing"):
        ExportSpec(format="llamafactory", out=tmp_path / "o", redact_missing="ignore")


# --- exports of sim screens --------------------------------------------------------------------

def test_a_redacted_export_masks_every_planted_text_and_keeps_the_originals(lake, tmp_path):
    phones = record_screens(lake, list(SCREENS))
    store_ui_text(lake, "ep-sim", phones)
    originals = {s: lake.image("ep-sim", s)[0] for s in phones}
    result = export(lake, tmp_path / "out")

    counts = score(lake, result, "ep-sim", phones)
    print(f"redaction (UI-tree text): {counts['masked']}/{counts['planted']} planted texts masked, "
          f"{counts['touched']}/{counts['other']} other texts touched")
    assert counts["planted"] >= 40 and counts["missed"] == []  # recall 100%
    assert counts["kinds"] == {"phone", "email", "card", "name"}
    assert counts["touched"] <= FALSE_REDACTION_RATE * counts["other"], counts["hit"]
    assert {s: lake.image("ep-sim", s)[0] for s in phones} == originals  # the lake keeps the originals

    redaction = result.manifest["redaction"]
    assert redaction["rules"] == RULES.recorded()
    assert set(redaction["regions"]) == {"card", "email", "phone", "name"}
    for entry in redaction["images"].values():
        assert (result.out / "images" / entry["sha256"][:2] / f"{entry['sha256']}.png").is_file()
        assert all(set(r) == {"rule", "box"} and len(r["box"]) == 4 for r in entry["regions"])
    text = (result.out / "manifest.json").read_text()
    assert not [p for p in PLANTED if p in text]  # rule names and boxes only, no personal data
    # the screens without personal data go out as stored, byte for byte
    settings = next(s for s, screen in enumerate(SCREENS) if screen == "settings")
    sha = lake.steps("ep-sim").to_pylist()[settings]["image_sha256"]
    assert sha not in redaction["images"]
    assert (result.out / "images" / sha[:2] / f"{sha}.png").read_bytes() == originals[settings]


def test_ocr_text_finds_the_planted_data_too(lake, tmp_path):
    screens = ["contact_new", "in_call", "notes", "phone_recents"]
    phones = record_screens(lake, screens)
    enrich(lake, ["ocr"])
    result = export(lake, tmp_path / "out")
    counts = score(lake, result, "ep-sim", phones)
    print(f"redaction (OCR text): {counts['masked']}/{counts['planted']} planted texts masked, "
          f"{counts['touched']}/{counts['other']} other texts touched")
    assert counts["planted"] >= 8 and counts["missed"] == []
    assert counts["kinds"] == {"phone", "email", "card", "name"}
    assert counts["touched"] <= FALSE_REDACTION_RATE * counts["other"], counts["hit"]


def test_screenshots_without_text_refuse_the_export_or_are_left_out(lake, tmp_path):
    phones = record_screens(lake, ["contact_alice", "settings", "in_call"])
    store_ui_text(lake, "ep-sim", phones, steps=[0, 1])
    out = tmp_path / "out"
    with pytest.raises(Conflict, match=r"1 of 3 screenshots .* no OCR text.*`elake enrich --what ocr`"):
        export(lake, out)
    assert not out.exists()  # refused before anything was written

    result = export(lake, out, redact_missing="skip")
    assert result.samples == {"train": 2, "val": 0}
    assert result.manifest["counts"]["skipped"] == {"no_text_to_redact": 1}
    unchecked = lake.steps("ep-sim").to_pylist()[2]["image_sha256"]
    written = {p.stem for p in (out / "images").rglob("*.png")}
    assert unchecked not in written and len(written) == 2
    plain = run_export(lake, ExportSpec(format="llamafactory", out=tmp_path / "plain", val_fraction=0.0))
    assert "redaction" not in plain.manifest and plain.manifest["spec"]["redact_rules"] is None


def test_text_read_on_one_step_serves_every_step_showing_the_same_screenshot(lake, tmp_path):
    phones = record_screens(lake, ["contact_alice", "contact_alice"])  # byte-identical screens
    store_ui_text(lake, "ep-sim", phones, steps=[0])
    result = export(lake, tmp_path / "out")
    assert result.manifest["counts"]["images"] == 1 and result.manifest["redaction"]["regions"] == {
        "name": 1, "phone": 1}


def test_images_read_ahead_are_redacted_the_same(lake, tmp_path):
    """The Ray export reads images in tasks with `prepare_episode(..., steps)`; the files and
    the manifest are the same as when the writer reads them."""
    phones = record_screens(lake, ["contact_alice", "notes", "shop"])
    store_ui_text(lake, "ep-sim", phones)
    here = export(lake, tmp_path / "here", relative_paths=True)

    def read_ahead(selection, spec):
        steps = selection.source.dataset("steps").checkout_version(selection.versions["steps"])
        for episode in selection.episodes:  # what a Ray task gets: pickled inputs and result
            episode, spec_copy = pickle.loads(pickle.dumps((episode, spec)))
            yield pickle.loads(pickle.dumps(prepare_episode(episode, spec_copy, steps)))

    ahead = run_export(lake, ExportSpec(out=tmp_path / "ahead", format="llamafactory", val_fraction=0.0,
                                        history_images=0, redact=True, redact_rules=RULES,
                                        relative_paths=True),
                       prepare=read_ahead)
    assert ahead.manifest == here.manifest
    assert here.manifest["redaction"]["images"]


def test_the_command_line_redacts_with_a_rules_file(lake, tmp_path, capsys):
    phones = record_screens(lake, ["contact_alice", "settings"])
    store_ui_text(lake, "ep-sim", phones)
    rules = tmp_path / "pii.toml"
    rules.write_text('names = ["Alice Chen"]\nphone = false\n')
    base = ["--lake", str(lake.path), "export", "sft", "--format", "llamafactory", "--val-fraction", "0",
            "--history-images", "0", "--json"]
    assert cli.main([*base, "--out", str(tmp_path / "out"), "--redact", "--redact-config", str(rules)]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["spec"]["redact_rules"]["rules"] == ["card", "email", "name"]
    assert manifest["redaction"]["regions"] == {"name": 1}  # the number is left: phone = false

    rules.write_text('names = "Alice Chen"\n')
    assert cli.main([*base, "--out", str(tmp_path / "bad"), "--redact", "--redact-config", str(rules)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"redact_config: {rules}: names: input should be a valid list" in err, err
    assert not (tmp_path / "bad").exists()
