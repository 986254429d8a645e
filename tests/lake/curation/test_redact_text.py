"""Redacted exports mask personal data in the samples' text too: the goal, the model's
response (with its thinking) and the text of `type` / `answer` actions, in every format that
writes samples, by the same rules as the screenshots; the manifest says which rule masked
which field of which step, never the text; the lake keeps the originals. Task text that holds
no personal data (every goal of the sim's 284 tasks, the sim oracle's responses) stays as it
was."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from episodelake.collectors.agents.oracle import OraclePolicy
from episodelake.collectors.envs.base import Task
from episodelake.collectors.envs.sim import catalog, tasks
from episodelake.collectors.envs.sim.device import SimDevice
from episodelake.collectors.jobs.enrich import DERIVATIONS
from episodelake.collectors.loop import run_episode
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.curation.redact import TEXT_MASK, RedactRules
from episodelake.lake.export import ExportSpec, run_export
from episodelake.lake.export.formats import checked
from episodelake.lake.ops.updates import update_columns
from episodelake.lake.storage.errors import InvalidInput
from tests import factories

NAME, PHONE, EMAIL, CARD, TICKET = "Alice Chen", "+1 (415) 555-0199", "ana.lee@example.com", \
    "4111 1111 1111 1111", "EMP-123456"
PLANTED = [NAME, PHONE, EMAIL, CARD, TICKET, "555-0102"]
RULES = RedactRules(names=[NAME, *(name for name, _ in catalog.CONTACTS)], patterns={"employee": r"EMP-\d{6}"})
#: Masked stretches of task text outside its personal data, per word (measured: 0 of 6,651).
FALSE_REDACTION_RATE = 0.01

GOAL = f"Text {NAME} at {PHONE} that badge {TICKET} is ready"
STEPS = [  # (thinking, action arguments): each field holds planted data somewhere
    (f"{NAME} is in contacts; her card {CARD} is on file", {"action": "click", "coordinate": [500, 300]}),
    ("type her address in the To field", {"action": "type", "text": f"{EMAIL}"}),
    ("now the message", {"action": "type", "text": f"Hi {NAME.split()[0]}, call 555-0102 about {TICKET}"}),
    ("done", {"action": "answer", "text": f"Sent to {NAME}"}),
]


def record(lake: Lake) -> None:
    with Recorder(lake, anchor=None, image_checks="structure") as rec:
        with rec.start_episode("message", GOAL, episode_id="ep-pii") as ep:
            for n, (thinking, args) in enumerate(STEPS):
                ep.log_step(factories.screenshot(n), factories.response(thinking=thinking, **args))
            ep.finish(success=True, eval_score=1.0)
    # the screens show no text: what OCR stores for them, so the export can check them
    update_columns(lake, "steps", [{"episode_id": "ep-pii", "step": n, "ocr_text": "", "ocr_boxes": [],
                                    "ocr_version": DERIVATIONS["ocr"].version} for n in range(len(STEPS))])


def exported_text(out: Path) -> str:
    """Every text a training tool reads from the folder (Parquet as its rows' JSON)."""
    texts = [p.read_text(encoding="utf-8") for p in sorted(out.rglob("*.json*"))]
    texts += [json.dumps(pq.read_table(p).drop_columns(["images"]).to_pylist()) for p in sorted(out.rglob("*.parquet"))]
    return "\n".join(texts)


def test_rules_mask_only_the_matched_characters():
    redactor = RULES.redactor()
    text = f"Call {NAME} on {PHONE} or mail {EMAIL}; card {CARD}, badge {TICKET}, at 13:00 on 2026-12-03"
    masked, rules = redactor.mask_text(text)
    assert masked == ("Call [REDACTED] on [REDACTED] or mail [REDACTED]; card [REDACTED], "
                      "badge [REDACTED], at 13:00 on 2026-12-03")
    assert rules == ["name", "phone", "email", "card", "employee"]  # a card is not a phone too
    assert redactor.mask_text("Set an alarm for 07:30.") == ("Set an alarm for 07:30.", [])
    action = json.dumps({"action": "type", "text": f'say "{NAME}"'})
    masked_action, rules = redactor.mask_json(action)
    assert json.loads(masked_action) == {"action": "type", "text": f'say "{TEXT_MASK}"'} and rules == ["name"]
    assert redactor.mask_json("not json, Alice Chen") == (f"not json, {TEXT_MASK}", ["name"])


@pytest.mark.parametrize("fmt", ["llamafactory", "swift", "trl", "openai"])
@pytest.mark.parametrize("granularity", ["step", "episode"])
def test_every_sample_format_leaves_no_planted_text(lake, tmp_path, fmt, granularity):
    record(lake)
    spec = ExportSpec(out=tmp_path / "out", format=fmt, granularity=granularity, val_fraction=0.0,
                      history_images=0, redact=True, redact_rules=RULES)
    result = run_export(lake, spec)
    text = exported_text(result.out)
    assert [p for p in PLANTED if p in text] == []
    assert [p for p in PLANTED if p.lower() in text.lower().replace("\\", "")] == []
    assert TEXT_MASK in text and "Hi Alice," in text  # a first name alone is not a listed name
    redaction = result.manifest["redaction"]
    fields = {(r["step"], r["field"]): r["rules"] for r in redaction["texts"]}
    assert fields == {
        (None, "task_goal"): {"employee": 1, "name": 1, "phone": 1},
        (0, "model_response"): {"card": 1, "name": 1},
        (1, "model_response"): {"email": 1}, (1, "action"): {"email": 1},
        (2, "model_response"): {"employee": 1, "phone": 1}, (2, "action"): {"employee": 1, "phone": 1},
        (3, "model_response"): {"name": 1}, (3, "action"): {"name": 1},
    }
    assert redaction["text_matches"] == {"card": 1, "email": 2, "employee": 3, "name": 4, "phone": 3}
    assert not [p for p in PLANTED if p in json.dumps(result.manifest)]  # rules and places only
    # the lake keeps the originals
    assert lake.episode("ep-pii")["task_goal"] == GOAL
    assert CARD in lake.steps("ep-pii").to_pylist()[0]["model_response"]


def test_history_lines_show_the_masked_action_text(lake, tmp_path):
    record(lake)
    result = run_export(lake, ExportSpec(out=tmp_path / "out", format="swift", val_fraction=0.0,
                                         history_images=0, style="gui-owl", redact=True, redact_rules=RULES))
    last = json.loads((result.out / "train.jsonl").read_text().splitlines()[-1])
    user = next(m["content"] for m in last["messages"] if m["role"] == "user")
    assert f"type '{TEXT_MASK}'" in user and "Previous actions" in user
    assert EMAIL not in user


def test_an_export_without_redact_keeps_the_text(lake, tmp_path):
    record(lake)
    plain = run_export(lake, ExportSpec(out=tmp_path / "out", format="swift", val_fraction=0.0, history_images=0))
    assert all(p in exported_text(plain.out) for p in (NAME, EMAIL, CARD, TICKET))


def test_a_format_that_copies_episodes_as_stored_refuses_to_redact(tmp_path):
    with pytest.raises(InvalidInput, match="redact: the clawgui format writes episodes as stored.*llamafactory"):
        checked(ExportSpec(out=tmp_path / "out", format="clawgui", redact=True))


#: The sim's phone numbers (its contacts', the ones tasks dial or save): 555-01xx.
SIM_NUMBER = re.compile(r"555-01\d\d")


def test_task_text_is_masked_only_where_it_is_personal(lake):
    """Every sim task's goal, and the sim oracle's responses on one task of each kind, with
    the sim's contacts listed as names: every contact name and phone number in them is
    masked, and the masks take no other word (beyond FALSE_REDACTION_RATE)."""
    redactor = RULES.redactor()
    goals = sorted({t.goal for t in tasks.all_tasks()})
    device = SimDevice(0)
    first: dict[str, str] = {}  # one task of each kind
    for task in tasks.all_tasks():
        first.setdefault(task.name, task.id)
    with Recorder(lake, anchor=None) as rec:
        for task_id in sorted(first.values()):
            run_episode(device, OraclePolicy(device), rec, Task(task_id, seed=1))
    responses = lake.sql("select model_response from steps").column(0).to_pylist()
    names = re.compile("|".join(re.escape(n) for n in RULES.names), re.IGNORECASE)
    words = personal = masked = 0
    wrong: list[str] = []
    for text in goals + responses:
        words += len(text.split())
        truth = [m.span() for rx in (SIM_NUMBER, names) for m in rx.finditer(text)]
        found = [span for _, span in redactor.matches(text)]
        personal += len(truth)
        masked += sum(any(s <= a and b <= e for s, e in found) for a, b in truth)
        wrong += [text[s:e] for s, e in found if not any(a <= s and e <= b for a, b in truth)]
    print(f"text redaction on sim task text: {len(goals)} goals and {len(responses)} responses "
          f"({words} words): {masked}/{personal} names and numbers masked, {len(wrong)} other "
          "stretches masked")
    assert len(goals) >= 250 and len(responses) >= 100 and personal >= 100
    assert masked == personal  # recall 100%
    assert len(wrong) <= FALSE_REDACTION_RATE * words, wrong[:10]
