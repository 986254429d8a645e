"""The `dpo` and `prm` export formats: pairs from anchor states by the stated rule, every step
with its verdict, both loading with `datasets` (offline) and both masked by --redact.

The lake: episode groups of one task whose episodes start on the same screen (the same UI
tree, so the same anchor key) and act differently there; some succeed, some fail, and the
judge scored their steps differently.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
datasets = pytest.importorskip("datasets", reason="the exports are loaded with `datasets`: pip install -e '.[dev]'")

from episodelake.collectors.jobs.enrich import DERIVATIONS  # noqa: E402
from episodelake.collectors.record.recorder import Recorder  # noqa: E402
from episodelake.lake import Lake  # noqa: E402
from episodelake.lake.curation.redact import TEXT_MASK  # noqa: E402
from episodelake.lake.export.dpo import Candidate, outranks  # noqa: E402
from episodelake.lake.ops.updates import update_columns  # noqa: E402
from episodelake.lake.storage.errors import InvalidInput  # noqa: E402
from tests.factories import response, screenshot  # noqa: E402
from tests.lake.export.test_export import export, jsonl  # noqa: E402

PHONE = "+1 (415) 555-0199"
#: (group, task, episode, success, [(ui tree, x, step reward)] per step)
EPISODES = [
    ("g-a", "task-a", "a0", True, [("home", 100, 1.0), ("inbox", 200, 1.0), ("sent", 300, 1.0)]),
    ("g-a", "task-a", "a1", True, [("home", 100, 1.0), ("inbox", 250, 0.0), ("sent", 300, 1.0)]),
    ("g-a", "task-a", "a2", False, [("home", 600, 0.0), ("other", 200, 0.0)]),
    ("g-a", "task-a", "a3", False, [("home", 700, 1.0), ("inbox", 200, 0.0)]),
    ("g-b", "task-a", "b0", False, [("home", 900, 0.0)]),  # another group: pairs with nothing above
    ("g-c", "task-c", "c0", True, [("list", 100, 1.0), ("detail", 100, None)]),
    ("g-c", "task-c", "c1", True, [("list", 500, 0.0), ("detail", 400, 1.0)]),
    # steps the judge never scored: no reward and no reason (a 4th item is the step's reason)
    ("g-d", "task-d", "d0", False, [("start", 100, None, None), ("next", 300, 1.0), ("end", 200, None, None)]),
]
#: Steps without a verdict: null step_reward and null reason.
UNJUDGED = {("d0", 0), ("d0", 2)}
#: Steps with a null step_reward (c0's second step has a reason but no reward).
NO_REWARD = {(eid, k) for _, _, eid, _, steps in EPISODES for k, step in enumerate(steps) if step[2] is None}


def build(path: Path) -> Lake:
    lake = Lake(path)
    with Recorder(lake) as rec:  # the default anchor keyer: the UI tree's hash
        for n, (group, task, eid, success, steps) in enumerate(EPISODES):
            with rec.start_episode(task, f"Goal of {task}, call {PHONE}", episode_id=eid, group_id=group) as ep:
                for k, (tree, x, reward, *reason) in enumerate(steps):
                    said = reason[0] if reason else f"{eid} step {k}: {'good' if reward else 'wrong'}, called {PHONE}"
                    ep.log_step(screenshot(n * 10 + k), response("click", thinking=f"{eid} {k}", coordinate=[x, 500]),
                                ui_tree=f"<node screen='{tree}'/>", step_reward=reward, step_reward_reason=said)
                ep.finish(success=success, eval_score=1.0 if success else 0.0)
    update_columns(lake, "steps", [{"episode_id": eid, "step": k, "ocr_text": "", "ocr_boxes": [],
                                    "ocr_version": DERIVATIONS["ocr"].version}
                                   for _, _, eid, _, steps in EPISODES for k in range(len(steps))])
    lake.invalidate()
    return lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    return build(tmp_path_factory.mktemp("preference") / "lake")


def facts(lake: Lake) -> dict[tuple[str, int], dict]:
    rows = lake.sql("SELECT episode_id, step, group_id, task_name, anchor_key, success, step_reward, action "
                    "FROM episodes JOIN steps USING (episode_id)").to_pylist()
    return {(r["episode_id"], r["step"]): r for r in rows}


def expected_pairs(lake: Lake) -> set[tuple]:
    """Every ordered pair the rule allows, found independently of the format's code."""
    out = set()
    for a, b in itertools.permutations(facts(lake).values(), 2):
        same = a["group_id"] == b["group_id"] and a["anchor_key"] == b["anchor_key"] and a["task_name"] == b["task_name"]
        better = (a["success"] and not b["success"]) or (
            a["success"] == b["success"] and (a["step_reward"] or 0) > (b["step_reward"] or 0))
        if same and a["episode_id"] != b["episode_id"] and a["action"] != b["action"] and better:
            out.add((a["episode_id"], a["step"], b["episode_id"], b["step"]))
    return out


def load(out: Path, cache: Path):
    return datasets.load_dataset("json", data_files={"train": str(out / "train.jsonl")}, cache_dir=str(cache))


def test_every_dpo_pair_shares_task_and_anchor_and_chosen_outranks_rejected(lake, tmp_path):
    export(lake, tmp_path / "out", "dpo", include_failed=True, val_fraction=0, history_images=1)
    lines = jsonl(tmp_path / "out" / "train.jsonl")
    stored = facts(lake)
    got = set()
    for line in lines:
        c, r = line["chosen_from"], line["rejected_from"]
        chosen, rejected = stored[(c["episode_id"], c["step"])], stored[(r["episode_id"], r["step"])]
        assert chosen["task_name"] == rejected["task_name"] == line["task"]
        assert chosen["anchor_key"] == rejected["anchor_key"] == line["anchor_key"] is not None
        assert chosen["group_id"] == rejected["group_id"] == line["group_id"]
        assert (chosen["success"], rejected["success"]) == (c["success"], r["success"])
        assert (chosen["success"] and not rejected["success"]) or (
            chosen["success"] == rejected["success"] and (chosen["step_reward"] or 0) > (rejected["step_reward"] or 0))
        assert line["chosen"] != line["rejected"]
        got.add((c["episode_id"], c["step"], r["episode_id"], r["step"]))
    assert got == expected_pairs(lake) and len(got) == len(lines)
    # the screen "home" of g-a: the two successful episodes beat the two failed ones; a0 and a1
    # took the same action there, so they are no pair; b0 (another group) is in none
    assert ("a0", 0, "a2", 0) in got and ("a1", 0, "a3", 0) in got and ("a0", 0, "a1", 0) not in got
    assert not any("b0" in (p[0], p[2]) for p in got)


def test_dpo_loads_as_trl_preference_rows_with_one_image_per_part(lake, tmp_path):
    export(lake, tmp_path / "out", "dpo", include_failed=True, val_fraction=0, history_images=2)
    ds = load(tmp_path / "out", tmp_path / "hf")["train"]
    assert {"prompt", "chosen", "rejected", "images"} <= set(ds.column_names)
    ds = ds.cast_column("images", datasets.Sequence(datasets.Image()))
    for row in ds:
        parts = [p for m in row["prompt"] for p in m["content"]]
        assert sum(p["type"] == "image" for p in parts) == len(row["images"]) >= 1
        assert [m["role"] for m in row["prompt"]][:2] == ["system", "user"] and row["prompt"][-1]["role"] == "user"
        assert [m["role"] for m in row["chosen"]] == [m["role"] for m in row["rejected"]] == ["assistant"]
        assert all(image.size == (108, 240) for image in row["images"])


def test_the_rule_is_success_first_then_the_judges_reward():
    def cand(success: bool, reward: float) -> Candidate:
        return Candidate("t", "e", 0, "g", "k", success, reward, ("click", "{}"), [], [], [])

    assert outranks(cand(True, 0.0), cand(False, 1.0))
    assert not outranks(cand(False, 1.0), cand(True, 0.0))
    assert outranks(cand(False, 1.0), cand(False, 0.0)) and not outranks(cand(True, 1.0), cand(True, 1.0))


def test_no_pair_is_a_clear_error(lake, tmp_path):
    with pytest.raises(InvalidInput, match="dpo: no two selected steps"):
        export(lake, tmp_path / "out", "dpo", where="task_name = 'task-a' AND episode_id = 'a0'", val_fraction=0)


def test_prm_has_every_step_with_the_judges_verdict_and_reason(lake, tmp_path):
    export(lake, tmp_path / "out", "prm", include_failed=True, val_fraction=0)
    lines = jsonl(tmp_path / "out" / "train.jsonl")
    stored = facts(lake)
    assert {(line["episode_id"], line["step"]) for line in lines} == set(stored)  # success and failure alike
    for line in lines:
        reward = stored[(line["episode_id"], line["step"])]["step_reward"]
        assert line["step_reward"] == reward and line["label"] == (None if reward is None else reward > 0)
        if (line["episode_id"], line["step"]) not in UNJUDGED:
            assert line["reason"].startswith(f"{line['episode_id']} step {line['step']}")
        assert line["completion"][0]["role"] == "assistant"
    ds = load(tmp_path / "out", tmp_path / "hf")["train"]
    assert ds.num_rows == len(lines) and {"prompt", "completion", "label", "images"} <= set(ds.column_names)


@pytest.mark.parametrize("fmt", ["dpo", "prm"])
def test_redact_masks_both_formats(lake, tmp_path, fmt):
    result = export(lake, tmp_path / "out", fmt, include_failed=True, val_fraction=0, redact=True)
    text = (tmp_path / "out" / "train.jsonl").read_text(encoding="utf-8")
    assert PHONE not in text and TEXT_MASK in text
    assert result.manifest["redaction"]["text_matches"]["phone"] > 0
    raw = lake.sql("SELECT step_reward_reason FROM steps WHERE episode_id = 'a0' AND step = 0").to_pylist()
    assert PHONE in raw[0]["step_reward_reason"]  # the lake keeps the original


def test_episode_granularity_is_refused(lake, tmp_path):
    with pytest.raises(InvalidInput, match="granularity"):
        export(lake, tmp_path / "out", "prm", granularity="episode", include_failed=True, val_fraction=0)


class BatchProcessor:
    """The tiny Qwen2-VL's tokenizer and image processor behind the processor interface TRL's
    collator calls (lists of texts, padding sides); transformers' Qwen2VLProcessor needs
    torchvision, which this install leaves out."""

    def __init__(self, folder: Path):
        from transformers import AutoImageProcessor, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        self.image_processor = AutoImageProcessor.from_pretrained(folder, local_files_only=True)

    def apply_chat_template(self, messages, **kwargs):
        return self.tokenizer.apply_chat_template(messages, **kwargs)

    def __call__(self, text, images=None, padding=True, padding_side="right", return_tensors="pt",
                 add_special_tokens=False):
        out = {}
        if images is not None:
            vision = self.image_processor(images=[i.convert("RGB") for group in images for i in group],
                                          return_tensors="pt")
            grids = iter(vision["image_grid_thw"])
            merge = self.image_processor.merge_size ** 2
            expanded = []
            for t in text:
                first, *rest = t.split("<|image_pad|>")
                expanded.append(first + "".join("<|image_pad|>" * (int(next(grids).prod()) // merge) + piece
                                                for piece in rest))
            text = expanded
            out.update(pixel_values=vision["pixel_values"], image_grid_thw=vision["image_grid_thw"])
        self.tokenizer.padding_side = padding_side
        tokens = self.tokenizer(text, padding=padding, return_tensors=return_tensors,
                                add_special_tokens=add_special_tokens)
        return {**out, "input_ids": tokens["input_ids"], "attention_mask": tokens["attention_mask"]}


def test_trls_vision_preference_collator_takes_the_pairs(lake, tmp_path):
    """TRL (a dev dependency, not the product's): its DPO collator batches the rows, and a
    tiny Qwen2-VL (built offline) runs on the batch."""
    import trl.trainer.dpo_trainer as collator_module
    from transformers import AutoModelForImageTextToText

    from tests.trainer.tiny_vlm import build_tiny_vlm

    export(lake, tmp_path / "out", "dpo", include_failed=True, val_fraction=0, history_images=1)
    ds = load(tmp_path / "out", tmp_path / "hf")["train"].cast_column("images", datasets.Sequence(datasets.Image()))
    folder = build_tiny_vlm(tmp_path / "tiny-vlm")
    collator = collator_module.DataCollatorForVisionPreference(processor=BatchProcessor(folder))
    batch = collator([dict(ds[i]) for i in range(3)])
    assert batch["input_ids"].shape[0] == 6  # chosen and rejected of each pair
    assert int(batch["completion_mask"].sum()) > 0
    model = AutoModelForImageTextToText.from_pretrained(folder, local_files_only=True)
    ids = batch["input_ids"]
    out = model(input_ids=ids, attention_mask=batch["attention_mask"], pixel_values=batch["pixel_values"],
                image_grid_thw=batch["image_grid_thw"], mm_token_type_ids=(ids == model.config.image_token_id).long())
    assert out.logits.shape[:2] == ids.shape


def test_prm_writes_a_step_without_a_verdict_as_null_never_false(lake, tmp_path):
    """A step the judge never scored is unknown, not wrong: label, step_reward and reason are
    null (JSON null), and --where "step_reward IS NOT NULL" leaves exactly those out."""
    export(lake, tmp_path / "all", "prm", include_failed=True, val_fraction=0)
    lines = {(line["episode_id"], line["step"]): line for line in jsonl(tmp_path / "all" / "train.jsonl")}
    for key in UNJUDGED:
        assert lines[key]["label"] is None and lines[key]["step_reward"] is None and lines[key]["reason"] is None
    assert lines[("d0", 1)]["label"] is True  # the same episode's judged step keeps its verdict
    assert NO_REWARD == UNJUDGED | {("c0", 1)}
    assert lines[("c0", 1)]["label"] is None and lines[("c0", 1)]["reason"]  # a reason without a reward
    assert all(isinstance(line["label"], bool) for key, line in lines.items() if key not in NO_REWARD)
    text = (tmp_path / "all" / "train.jsonl").read_text(encoding="utf-8")
    assert '"label": null' in text and '"label": false' in text
    ds = load(tmp_path / "all", tmp_path / "hf")["train"]  # nulls load (as None) beside booleans
    assert sum(label is None for label in ds["label"]) == len(NO_REWARD)
    result = export(lake, tmp_path / "judged", "prm", include_failed=True, val_fraction=0,
                    where="step_reward IS NOT NULL")
    judged = jsonl(tmp_path / "judged" / "train.jsonl")
    assert result.samples["train"] == len(judged) == len(lines) - len(NO_REWARD)
    assert all(isinstance(line["label"], bool) for line in judged)
