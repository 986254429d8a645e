"""SFT export: selection, samples, split, dedup, reproducibility, bad input, bookkeeping.

Everything runs on real lakes (Recorder -> Lance) in tmp folders; formats' shapes and their
loading with `datasets` are in test_export_formats.py.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from PIL import Image

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.curation import curation
from episodelake.lake.export import (
    EmptySelection,
    ExportFolderNotOurs,
    ExportSpec,
    SetEpisodesMissing,
    UnknownFormat,
    list_exports,
    run_export,
)
from episodelake.lake.export.split import split_of
from episodelake.lake.storage.errors import InvalidInput, SqlRefused
from episodelake.lake.vocab.prompts import HistoryStep, build_messages
from tests.factories import response, screenshot

T0 = datetime(2026, 5, 1, tzinfo=UTC)
TASKS = [f"task-{k}" for k in range(8)]


def record(rec: Recorder, task: str, n_steps: int, *, seed: int, success: bool = True,
           step_rewards: list[float] | None = None, responses: list[str] | None = None,
           screens: list[bytes] | None = None, episode_id: str | None = None) -> str:
    """One finished episode with distinct screenshots; returns its id."""
    with rec.start_episode(task, f"Goal of {task}", episode_id=episode_id,
                           created_at=T0 + timedelta(minutes=seed)) as ep:
        for n in range(n_steps):
            ep.log_step(screens[n] if screens else screenshot(seed * 100 + n),
                        responses[n] if responses else response("click", thinking=f"{task} step {n}",
                                                                coordinate=[10 * n, 20 + seed]),
                        step_reward=step_rewards[n] if step_rewards else 1.0)
        ep.finish(success=success, eval_score=1.0 if success else 0.0)
    return ep.episode_id


def build_lake(path: Path, *, episodes_per_task: int = 2, steps: int = 4) -> Lake:
    """Eight tasks, two successful episodes each, one failed episode for task-0, and one
    episode whose step 1 the judge scored 0."""
    lake = Lake(path)
    with Recorder(lake, anchor=None) as rec:
        seed = 0
        for task in TASKS:
            for _ in range(episodes_per_task):
                record(rec, task, steps, seed=seed, episode_id=f"ep-{seed:03d}")
                seed += 1
        record(rec, "task-0", steps, seed=seed, success=False, episode_id="ep-failed")
        record(rec, "task-1", steps, seed=seed + 1, step_rewards=[1.0, 0.0, 1.0, 1.0][:steps],
               episode_id="ep-judged")
    lake.invalidate()
    return lake


def export(lake: Lake, out: Path, fmt: str = "swift", **options):
    return run_export(lake, ExportSpec(format=fmt, out=out, **options))


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Lake:
    return build_lake(tmp_path_factory.mktemp("export") / "lake")


# -- samples -----------------------------------------------------------------------------------
def test_a_step_sample_is_the_collectors_prompt_plus_the_recorded_response(built, tmp_path):
    result = export(built, tmp_path / "out", "swift", where="episode_id = 'ep-003'", history_images=2,
                    val_fraction=0)
    rows = built.steps("ep-003").to_pylist()
    lines = jsonl(tmp_path / "out" / "train.jsonl")
    assert result.samples == {"train": 4, "val": 0} and len(lines) == 4
    for t, line in enumerate(lines):
        history = [HistoryStep.from_step(r, image=r["image_sha256"]) for r in rows[:t]]
        expected = build_messages("Goal of task-1", history, screenshot=rows[t]["image_sha256"],
                                  history_length=2)
        expected_images = [p["image"] for m in expected if isinstance(m["content"], list)
                           for p in m["content"] if p["type"] == "image"]
        assert line["messages"][0] == expected[0]  # the system prompt, as the collectors send it
        assert [m["role"] for m in line["messages"]] == [m["role"] for m in expected] + ["assistant"]
        assert line["messages"][-1]["content"] == rows[t]["model_response"]
        assert [Path(p).stem for p in line["images"]] == expected_images
        assert len(line["images"]) == min(t, 2) + 1


def test_history_length_limits_the_steps_shown(built, tmp_path):
    export(built, tmp_path / "out", "swift", where="episode_id = 'ep-003' AND step = 3",
           history_length=1, history_images=0, val_fraction=0)
    (line,) = jsonl(tmp_path / "out" / "train.jsonl")
    rows = built.steps("ep-003").to_pylist()
    expected = build_messages("Goal of task-1", [HistoryStep.from_step(rows[2])], screenshot="x",
                              history_length=0)
    assert line["messages"][1]["content"].startswith(expected[1]["content"][0]["text"])
    assert "1. click" in line["messages"][1]["content"] and len(line["images"]) == 1


def test_episode_granularity_is_one_conversation_with_every_screenshot(built, tmp_path):
    export(built, tmp_path / "out", "swift", granularity="episode", where="episode_id = 'ep-003'",
           val_fraction=0)
    (line,) = jsonl(tmp_path / "out" / "train.jsonl")
    roles = [m["role"] for m in line["messages"]]
    assert roles == ["system"] + ["user", "assistant"] * 4
    assert len(line["images"]) == 4 == sum(m["content"].count("<image>") for m in line["messages"])
    with pytest.raises(InvalidInput, match="granularity 'episode' needs style 'mai-ui'"):
        ExportSpec(format="swift", out=tmp_path / "x", granularity="episode", style="gui-owl")


def test_max_images_splits_an_episode_into_consecutive_conversations(built, tmp_path):
    export(built, tmp_path / "out", "swift", granularity="episode", where="episode_id = 'ep-003'",
           val_fraction=0, max_images=2)
    first, second = jsonl(tmp_path / "out" / "train.jsonl")
    rows = built.steps("ep-003").to_pylist()
    assert [Path(p).stem for p in first["images"] + second["images"]] == [r["image_sha256"] for r in rows]
    assert [m["content"] for m in first["messages"] + second["messages"] if m["role"] == "assistant"] == \
        [r["model_response"] for r in rows]
    assert "Actions taken before the screenshots below:\n1. click" in second["messages"][1]["content"]


# -- selection ---------------------------------------------------------------------------------
def test_default_selection_is_successful_episodes_only(built, tmp_path):
    default = export(built, tmp_path / "a", val_fraction=0)
    everything = export(built, tmp_path / "b", include_failed=True, val_fraction=0)
    assert default.manifest["counts"]["episodes"] == 17
    assert everything.manifest["counts"]["episodes"] == 18
    assert everything.samples["train"] == default.samples["train"] + 4


def test_good_steps_only_keeps_steps_the_judge_scored_1(built, tmp_path):
    result = export(built, tmp_path / "out", where="episode_id = 'ep-judged'", good_steps_only=True,
                    val_fraction=0)
    lines = jsonl(tmp_path / "out" / "train.jsonl")
    assert result.samples["train"] == 3
    # the history still shows the step scored 0: samples are the real prompts
    assert len(lines[1]["images"]) == 3 and lines[1]["messages"][-1]["content"].count("step 2")


def test_where_sees_columns_of_episodes_and_steps(built, tmp_path):
    result = export(built, tmp_path / "out", where="task_name = 'task-2' AND s.step < 2", val_fraction=0)
    assert result.samples["train"] == 4 and result.manifest["tasks"]["train"] == ["task-2"]


def test_a_where_that_writes_or_reads_files_is_refused(built, tmp_path):
    with pytest.raises(SqlRefused, match="where"):
        export(built, tmp_path / "out", where="true; DROP TABLE episodes")
    with pytest.raises(SqlRefused, match="where"):
        export(built, tmp_path / "out", where="episode_id IN (SELECT * FROM read_csv('/etc/passwd'))")
    assert not (tmp_path / "out").exists()


def test_a_set_exports_its_members_as_of_its_pinned_tag(tmp_path):
    lake = build_lake(tmp_path / "lake", episodes_per_task=1)
    lake.create_tag("v1")
    s = curation.create_set(lake, "good", kind="sft", pinned_tag="v1")
    for eid in ("ep-000", "ep-001", "ep-002"):
        curation.add_member(lake, s["set_id"], eid)
    result = export(lake, tmp_path / "out", set="good", val_fraction=0)
    assert result.manifest["counts"]["episodes"] == 3
    assert result.manifest["source"]["tag"] == "v1"
    assert result.manifest["source"]["set"]["name"] == "good"
    assert set(result.manifest["source"]["lake_versions"]) == {"episodes", "steps", "sets", "set_members"}


# -- split and dedup ---------------------------------------------------------------------------
def test_split_is_by_task_without_overlap_and_stable(built, tmp_path):
    result = export(built, tmp_path / "out", val_fraction=0.4, seed=3)
    train, val = result.manifest["tasks"]["train"], result.manifest["tasks"]["val"]
    assert train and val and not set(train) & set(val)
    assert sorted(train + val) == TASKS
    for split, name in (("train", "train.jsonl"), ("val", "val.jsonl")):
        goals = {line["messages"][1]["content"].split("\n")[0] for line in jsonl(tmp_path / "out" / name)}
        assert goals == {f"Task: Goal of {t}" for t in result.manifest["tasks"][split]}
    # a task's split depends on the seed and its own name only
    assert all(split_of(t, 3, 0.4) == "val" for t in val)
    assert all(split_of(t, 3, 0.4) == "train" for t in train)


def test_identical_samples_are_written_once(tmp_path):
    lake = Lake(tmp_path / "lake")
    screens = [screenshot(1), screenshot(2)]
    replies = [response("click", coordinate=[1, 1]), response("click", coordinate=[2, 2])]
    with Recorder(lake, anchor=None) as rec:
        for k in range(3):
            record(rec, "same", 2, seed=k, screens=screens, responses=replies)
    lake.invalidate()
    deduped = export(lake, tmp_path / "a", val_fraction=0)
    kept = export(lake, tmp_path / "b", val_fraction=0, dedup=False)
    assert deduped.samples["train"] == 2 and deduped.manifest["counts"]["skipped"] == {"duplicate": 4}
    assert kept.samples["train"] == 6
    assert len(list((tmp_path / "b" / "images").rglob("*.png"))) == 2  # images are content-addressed


# -- reproducibility ---------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["llamafactory", "swift", "trl", "openai"])
def test_two_exports_from_one_tag_are_byte_identical(fmt, tmp_path):
    lake = build_lake(tmp_path / "lake", episodes_per_task=1, steps=3)
    lake.create_tag("v1")
    # relative paths: the two folders' files compare equal (absolute ones name their folder)
    first = export(lake, tmp_path / "a", fmt, tag="v1", val_fraction=0.3, relative_paths=True)
    absolute = export(lake, tmp_path / "abs", fmt, tag="v1", val_fraction=0.3)
    with Recorder(lake, anchor=None) as rec:  # the lake moves on; the tag does not
        record(rec, "task-3", 3, seed=77)
    lake.invalidate()
    second = export(lake, tmp_path / "b", fmt, tag="v1", val_fraction=0.3, relative_paths=True)
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    assert first.export_id != second.export_id
    before = tree(tmp_path / "abs")
    export(lake, tmp_path / "abs", fmt, tag="v1", val_fraction=0.3)  # the same folder again
    assert tree(tmp_path / "abs") == before
    assert absolute.manifest["counts"] == first.manifest["counts"]
    later = export(lake, tmp_path / "c", fmt, val_fraction=0.3)
    assert later.manifest["counts"]["episodes"] == first.manifest["counts"]["episodes"] + 1


def test_clawgui_export_into_the_same_folder_is_byte_identical(tmp_path):
    lake = build_lake(tmp_path / "lake", episodes_per_task=1, steps=2)
    export(lake, tmp_path / "out", "clawgui")
    before = tree(tmp_path / "out")
    export(lake, tmp_path / "out", "clawgui")
    assert tree(tmp_path / "out") == before


def test_an_earlier_export_is_replaced_whole(built, tmp_path):
    export(built, tmp_path / "out", "llamafactory", val_fraction=0)
    export(built, tmp_path / "out", "trl", val_fraction=0)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["manifest.json", "train.parquet"]


# -- images ------------------------------------------------------------------------------------
def test_images_are_copied_as_stored_unless_max_pixels(built, tmp_path):
    export(built, tmp_path / "a", "llamafactory", where="episode_id = 'ep-000'", val_fraction=0)
    rows = built.steps("ep-000").to_pylist()
    stored = {r["image_sha256"] for r in rows}
    assert {p.stem for p in (tmp_path / "a" / "images").rglob("*.png")} == stored
    for step, data in built.images("ep-000"):
        sha = rows[step]["image_sha256"]
        assert (tmp_path / "a" / "images" / sha[:2] / f"{sha}.png").read_bytes() == data
    export(built, tmp_path / "b", "llamafactory", where="episode_id = 'ep-000'", val_fraction=0,
           max_pixels=64 * 100)
    for path in (tmp_path / "b" / "images").rglob("*.png"):
        with Image.open(io.BytesIO(path.read_bytes())) as img:
            assert img.width * img.height <= 64 * 100
        assert path.stem not in stored


# -- bad input ---------------------------------------------------------------------------------
def test_an_empty_selection_says_what_matched_nothing(built, tmp_path):
    with pytest.raises(EmptySelection, match="task_name = 'nope'.*--include-failed"):
        export(built, tmp_path / "out", where="task_name = 'nope'")
    assert not (tmp_path / "out").exists()


def test_an_unknown_format_lists_the_known_ones(built, tmp_path):
    with pytest.raises(UnknownFormat, match="'parquetish'.*llamafactory, swift, trl, openai, clawgui"):
        export(built, tmp_path / "out", "parquetish")


def test_a_folder_that_is_not_an_export_is_left_alone(built, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    with pytest.raises(ExportFolderNotOurs, match="not empty and has no manifest.json"):
        export(built, out)
    (out / "manifest.json").write_text('{"name": "someone else"}')
    with pytest.raises(ExportFolderNotOurs):
        export(built, out)
    assert (out / "thesis.tex").read_text() == "precious"


def test_a_set_whose_episodes_were_deleted_names_them(tmp_path):
    lake = build_lake(tmp_path / "lake", episodes_per_task=1)
    s = curation.create_set(lake, "regressions", kind="failure")
    for eid in ("ep-000", "ep-001"):
        curation.add_member(lake, s["set_id"], eid)
    lake.dataset("episodes").delete("episode_id = 'ep-001'")
    lake.invalidate()
    with pytest.raises(SetEpisodesMissing, match="1 of 2 member episode.*ep-001"):
        export(lake, tmp_path / "out", set="regressions")
    empty = curation.create_set(lake, "empty")
    with pytest.raises(EmptySelection, match="has no members"):
        export(lake, tmp_path / "out", set=empty["name"])


@pytest.mark.parametrize(("option", "value", "field"), [
    ("granularity", "turn", "granularity"), ("history_images", -1, "history_images"),
    ("val_fraction", 1.0, "val_fraction"), ("max_pixels", 10, "max_pixels"), ("tag", "../x", "tag"),
    ("history_images", True, "history_images"), ("seed", "3", "seed"), ("dedup", 1, "dedup"),
    ("max_images", 0, "max_images"), ("where", "x" * 4001, "where"), ("colour", "red", "colour"),
])
def test_bad_options_name_the_field(tmp_path, option, value, field):
    with pytest.raises(InvalidInput, match=f"^{field}"):
        ExportSpec(format="swift", out=tmp_path, **{option: value})


def test_the_command_line_options_are_the_spec_fields(capsys, monkeypatch):
    """`elake export sft` has one option per field of `ExportSpec`, its help the field's
    description; an option not given leaves the spec's default."""
    from episodelake.api import cli

    monkeypatch.setenv("COLUMNS", "1000")  # no wrapping inside a description
    with pytest.raises(SystemExit):
        cli.main(["export", "sft", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for name, field in ExportSpec.model_fields.items():
        if name == "redact_rules":  # a nested model: the command line reads it from --redact-config
            continue
        assert f"--{name.replace('_', '-')}" in shown, name
        assert " ".join(field.description.split()) in shown, name
    assert "--no-dedup" in shown and "(default 3)" in shown


# -- bookkeeping and progress ------------------------------------------------------------------
def test_each_export_is_recorded_with_its_manifest(built, tmp_path):
    calls = []
    result = run_export(built, ExportSpec(format="openai", out=tmp_path / "out", val_fraction=0),
                        lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, 17) and calls[-1] == (17, 17) and len(calls) == 18  # once at the start
    row = built.sql("SELECT * FROM exports WHERE export_id = ?", [result.export_id]).to_pylist()[0]
    assert row["status"] == "finished" and row["format"] == "openai"
    assert row["samples"] == result.samples["train"] and row["out_dir"] == str((tmp_path / "out").resolve())
    assert json.loads(row["manifest"]) == result.manifest
    assert json.loads((tmp_path / "out" / "manifest.json").read_text()) == result.manifest
    listed = {r["export_id"]: r for r in list_exports(built)}[result.export_id]
    assert listed["manifest"] == result.manifest and listed["selection"]["format"] == "openai"


def test_the_cli_exports_and_reports(built, tmp_path, capsys):
    from episodelake.api import cli

    out = tmp_path / "out"
    assert cli.main(["--lake", str(built.path), "export", "sft", "--format", "trl", "--out", str(out),
                     "--where", "task_name = 'task-5'", "--val-fraction", "0", "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["counts"]["samples"] == {"train": 8, "val": 0}
    assert cli.main(["--lake", str(built.path), "export", "sft", "--format", "trl", "--out", str(out),
                     "--where", "task_name = 'nope'"]) == 1
    assert "no step matches" in capsys.readouterr().err
