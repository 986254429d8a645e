"""Random episode.json files: the ClawGUI importer skips or imports, it never raises.

Any file a folder can hold is either imported (its rows fit the lake's schema) or skipped
with a reason; nothing else escapes, and one bad file never stops the others.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodelake.collectors.clawgui import importer
from episodelake.lake import Lake
from episodelake.lake.storage.errors import InvalidInput
from tests.factories import response, screenshot

SCALARS = st.one_of(
    st.none(), st.booleans(), st.text(max_size=12),
    st.integers(min_value=-(2**70), max_value=2**70), st.integers(min_value=2**31 - 2, max_value=2**31 + 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["true", "false", "1", "0", "2026-11-30T10:00:00", "2026-11-30T10:00:00+08:00",
                     "not a time", "images/step_0000.png", "/etc/passwd", "../../x.png", "\ud800",
                     "ep-1", "../ep", "a b/c"]),
)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                         max_size=3), max_leaves=8)
META_KEYS = ["task_name", "task_goal", "episode_id", "created_at", "success", "eval_score", "eval_reason",
             "episode_reward", "episode_length", "finished_at", "group_id"]
STEP_KEYS = ["step", "image_path", "model_response", "timestamp", "reward", "step_reward", "step_reward_reason"]


def plausible_step(n: int):
    base = {"step": n, "image_path": f"images/step_{n:04d}.png", "model_response": response(),
            "timestamp": "2026-11-30T10:00:01", "step_reward": 1.0, "step_reward_reason": "ok"}
    return st.one_of(
        st.just(base),
        st.fixed_dictionaries({}, optional={k: JSON for k in STEP_KEYS}).map(lambda d: {**base, **d}),
        JSON,
    )


DOCS = st.one_of(
    JSON,
    st.fixed_dictionaries(
        {"meta_data": st.one_of(
            st.fixed_dictionaries({}, optional={k: JSON for k in META_KEYS}),
            JSON,
        )},
        optional={"episode": st.one_of(
            st.integers(0, 3).flatmap(lambda n: st.tuples(*[plausible_step(i) for i in range(n)]).map(list)),
            JSON,
        )},
    ),
)


def write(root: Path, n: int, doc: object) -> Path:
    folder = root / "task" / f"ep-{n}"
    (folder / "images").mkdir(parents=True)
    for step in range(3):
        (folder / "images" / f"step_{step:04d}.png").write_bytes(screenshot(step))
    path = folder / "episode.json"
    path.write_text(json.dumps(doc))  # NaN and Infinity as Python's json writes them
    return path


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=DOCS)
def test_any_episode_file_parses_to_rows_that_fit_or_to_a_reason(doc):
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), 0, doc)
        root = importer.ImportRoot(tmp)
        report = importer.ImportReport()
        deriver = importer.GroupDeriver()
        try:
            parsed = importer.parse_episode(root, path)
            group_id = importer._group(deriver, parsed, report)
            episode, steps = importer._rows(root, parsed, group_id, deriver, report, importer.DefaultKeyer())
        except InvalidInput as exc:
            assert str(exc)
            return
        assert len(steps) == len(parsed.records)
        # a step without its screenshot has no image_sha256 (null when stored) and says why
        assert all(s.get("image_sha256") is not None or json.loads(s["info"])["image_missing"] for s in steps)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(DOCS, min_size=1, max_size=6))
def test_a_folder_of_random_files_imports_every_good_one(docs):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "episode"
        paths = [write(root, n, doc) for n, doc in enumerate(docs)]
        good = {"meta_data": {"task_name": "good", "episode_id": "ep-good", "success": False, "eval_score": 0.0},
                "episode": [{"step": 0, "image_path": "images/step_0000.png", "model_response": response()}]}
        paths.append(write(root, len(docs), good))
        lake = Lake(Path(tmp) / "lake")
        report = importer.import_clawgui(lake, root, progress=False)
        assert report.episodes + len(report.skipped) == len(paths)
        stored = {r["episode_id"] for r in lake.sql("select episode_id from episodes").to_pylist()}
        assert "ep-good" in stored and lake.episode("ep-good")["success"] is False
        assert len(stored) <= report.episodes  # two files may name one episode id
