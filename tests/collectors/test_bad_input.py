"""Bad input to the recorder is `InvalidInput` naming the field, with nothing stored.

No Arrow, PIL or Python numeric error may escape from `start_episode`, `log_step` or
`finish`, whatever the value; the property tests throw odd values at every field.
"""

from __future__ import annotations

import struct
import zlib
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.storage.errors import Conflict, InvalidInput, NotFound
from tests.factories import response, screenshot


@pytest.fixture(params=["decode", "structure"])
def rec(lake, request):
    r = Recorder(lake, anchor=None, image_checks=request.param)
    yield r
    r.close()


def _steps(rec, episode_id: str) -> list[int]:
    rec.flush()
    rec.lake.invalidate()
    return rec.lake.steps(episode_id, columns=["step"])["step"].to_pylist()


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_claiming(width: int, height: int, *, header: bytes = b"IHDR", depth: int = 8) -> bytes:
    """A tiny PNG file, every CRC right, whose header claims `width` x `height` pixels."""
    fields = struct.pack(">IIBBBBB", width, height, depth, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(header, fields)
            + _chunk(b"IDAT", zlib.compress(b"\x00" * min(height * (1 + width), 4096)))
            + _chunk(b"IEND", b""))


def with_damaged_pixels(png: bytes, at: float) -> bytes:
    """`png` with one byte of its compressed pixel stream flipped and the CRC recomputed."""
    pos, out = 8, bytearray(png[:8])
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, body = png[pos + 4:pos + 8], bytearray(png[pos + 8:pos + 8 + length])
        if kind == b"IDAT" and not out.count(b"IDAT"):
            body[int(len(body) * at)] ^= 0x5A
        out += _chunk(kind, bytes(body))
        pos += 12 + length
    return bytes(out)


# -- values the schema cannot hold -------------------------------------------------------------
class Loud:
    """A value whose text cannot be had: `str()` and `repr()` raise."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    __repr__ = __str__


STEP_FIELDS = [
    ("reward", 10**400, "reward"),
    ("step_reward", -(10**400), "step_reward"),
    ("reward", float("nan"), "reward"),
    ("step", 2**31, "step"),
    ("step", -1, "step"),
    ("step", True, "step"),
    ("step", 1.0, "step"),
    ("timestamp", "yesterday", "timestamp"),
    ("timestamp", 1_700_000_000, "timestamp"),
    ("step_reward_reason", 7, "step_reward_reason"),
    ("ui_tree", b"\xff", "ui_tree"),
    ("prompt", {(1, 2): "tuple keys"}, "prompt"),
    ("info", float("inf"), "info"),
    ("info", [Loud()], "info"),
]


def _ids(cases: list[tuple]) -> list[str]:
    return [f"{name}-{n}" for n, (name, _, _) in enumerate(cases)]


@pytest.mark.parametrize(("name", "value", "field"), STEP_FIELDS, ids=_ids(STEP_FIELDS))
def test_step_values_that_do_not_fit_are_refused_naming_the_field(rec, name, value, field):
    ep = rec.start_episode("t", "g")
    ep.log_step(screenshot(1), response())
    with pytest.raises(InvalidInput, match=f"^{field}:"):
        ep.log_step(screenshot(2), response(), **{name: value})
    ep.log_step(screenshot(3), response())  # the bad step took no number
    ep.finish()
    assert _steps(rec, ep.episode_id) == [0, 1]


FINISH_FIELDS = [
    ("episode_length", 2**31, "episode_length"),
    ("episode_length", -3, "episode_length"),
    ("eval_score", 10**400, "eval_score"),
    ("episode_reward", float("inf"), "episode_reward"),
    ("success", "false", "success"),
    ("extra", ["not", "an", "object"], "extra"),
    ("eval_reason", "\udcff", "eval_reason"),
]


@pytest.mark.parametrize(("name", "value", "field"), FINISH_FIELDS, ids=_ids(FINISH_FIELDS))
def test_finish_values_that_do_not_fit_are_refused_and_the_episode_stays_open(rec, name, value, field):
    ep = rec.start_episode("t", "g")
    ep.log_step(screenshot(1), response())
    with pytest.raises(InvalidInput, match=f"^{field}:"):
        ep.finish(**{name: value})
    rec.flush()
    assert rec.lake.episode(ep.episode_id)["status"] == "running"
    ep.finish(success=True, eval_score=1.0)  # the handle is untouched and finishes normally
    rec.flush()
    stored = rec.lake.episode(ep.episode_id)
    assert stored["status"] == "finished" and stored["episode_length"] == 1


START_FIELDS = [
    ("created_at", "yesterday", "created_at"),
    ("tags", "smoke", "tags"),
    ("tags", 5, "tags"),
    ("extra", {"x": float("nan")}, "extra"),
    ("extra", "text", "extra"),
    ("task_name", 5, "task_name"),
    ("group_id", "a/b", "group_id"),
    ("run_id", 3.5, "run_id"),
    ("resume", "yes", "resume"),
]


@pytest.mark.parametrize(("name", "value", "field"), START_FIELDS, ids=_ids(START_FIELDS))
def test_start_values_that_do_not_fit_are_refused_and_nothing_is_stored(rec, name, value, field):
    args = {"task_name": "t", "episode_id": "e-1", name: value}
    task = args.pop("task_name")
    with pytest.raises(InvalidInput, match=field):
        rec.start_episode(task, "g", **args)
    with pytest.raises(NotFound):
        rec.lake.episode("e-1")
    rec.start_episode("t", "g", episode_id="e-1").finish()  # the id was not taken


def test_naive_and_aware_timestamps_are_stored_in_utc(rec):
    ep = rec.start_episode("t", "g", created_at=datetime(2026, 1, 1, 12, 0))
    ep.log_step(screenshot(1), response(), timestamp=datetime(2026, 1, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))))
    ep.finish()
    rec.flush()
    step = rec.lake.steps(ep.episode_id).to_pylist()[0]
    assert step["timestamp"] == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert rec.lake.episode(ep.episode_id)["created_at"] == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


# -- screenshots -----------------------------------------------------------------------------------
def test_a_decompression_bomb_header_is_refused_before_any_decoder(rec):
    ep = rec.start_episode("t", "g")
    for width, height in ((100_000, 100_000), (8_000, 7_000), (2**31 - 1, 1)):
        with pytest.raises(InvalidInput, match="^image: .*pixel limit"):
            ep.log_step(png_claiming(width, height), response())
    ep.log_step(png_claiming(4, 4), response())
    assert _steps(rec, ep.episode_id) == [0]


@pytest.mark.parametrize("bad", [
    png_claiming(0, 5),  # no pixels
    png_claiming(4, 4, header=b"IHDX"),  # the first chunk is not the header
    png_claiming(4, 4, depth=7),  # no such bit depth
])
def test_damaged_png_headers_are_refused(rec, bad):
    with pytest.raises(InvalidInput, match="^image: "):
        rec.start_episode("t", "g").log_step(bad, response())


def test_a_pixel_stream_that_is_not_zlib_is_refused_by_both_checks(rec):
    damaged = with_damaged_pixels(screenshot(1), at=0.0)  # the zlib header, CRC recomputed
    with pytest.raises(InvalidInput, match="^image: .*damaged"):
        rec.start_episode("t", "g").log_step(damaged, response())


def test_damaged_pixels_with_recomputed_crcs_need_the_decode_check(lake):
    """`structure` cannot see this (documented in docs/recording.md); `decode` refuses it."""
    damaged = with_damaged_pixels(screenshot(1, size=(540, 1200)), at=0.5)
    with Recorder(lake, anchor=None, image_checks="decode") as rec:
        with pytest.raises(InvalidInput, match="^image: .*damaged"):
            rec.start_episode("t", "g").log_step(damaged, response())
    with Recorder(lake, anchor=None, image_checks="structure") as rec:
        assert rec.start_episode("t", "g").log_step(damaged, response()).step == 0


@pytest.mark.parametrize("image", [
    Image.new("CMYK", (4, 4)),  # PNG cannot hold CMYK
    np.zeros((0, 5, 3), np.uint8),
    Image.new("RGB", (1, 1)).crop((0, 0, 0, 0)),
])
def test_images_pil_cannot_store_are_refused(rec, image):
    with pytest.raises(InvalidInput, match="^image: "):
        rec.start_episode("t", "g").log_step(image, response())


def test_a_lost_screenshot_must_be_said_and_is_recorded_in_info(rec):
    ep = rec.start_episode("t", "g")
    with pytest.raises(InvalidInput, match="^image: no screenshot.*image_missing"):
        ep.log_step(None, response())
    with pytest.raises(InvalidInput, match="^image_missing: given together with an image"):
        ep.log_step(screenshot(1), response(), image_missing="lost")
    with pytest.raises(InvalidInput, match="^info: expected a JSON object"):
        ep.log_step(None, response(), image_missing="the device timed out", info=["x"])
    ep.log_step(None, response(), image_missing="the device timed out", info={"attempt": 2})
    ep.finish()
    rec.flush()
    step = rec.lake.steps(ep.episode_id).to_pylist()
    assert len(step) == 1 and step[0]["image_sha256"] is None
    assert '"image_missing": "the device timed out"' in step[0]["info"] and '"attempt": 2' in step[0]["info"]
    with pytest.raises(NotFound, match="no screenshot"):
        rec.lake.image(ep.episode_id, 0)


# -- odd values at every field ------------------------------------------------------------------------
ODD = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**31 - 2, max_value=2**70),
    st.just(10**400), st.just(-(10**5000)), st.floats(), st.text(max_size=8), st.binary(max_size=12),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.floats(), max_size=2),
    st.datetimes(), st.datetimes(timezones=st.just(UTC)), st.just("\udcff"), st.just(Loud()),
    st.just({(1, 2): 3}), st.sampled_from([np.int64(3), np.float32(1.5), np.bool_(True), np.float64("nan")]),
    st.just(b"\x89PNG\r\n\x1a\n" + b"\x00" * 30), st.just(png_claiming(100_000, 100_000)),
)
STEP_ARGS = ["image", "model_response", "step", "reward", "step_reward", "step_reward_reason", "prompt",
             "info", "ui_tree", "timestamp", "image_missing"]
FINISH_ARGS = ["success", "eval_score", "eval_reason", "episode_reward", "episode_length", "status", "extra"]
START_ARGS = ["task_name", "task_goal", "episode_id", "group_id", "tags", "extra", "created_at", "run_id",
              "policy_version", "env", "device", "model_name", "resume"]
ODD_SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@settings(ODD_SETTINGS, max_examples=150)
@given(name=st.sampled_from(STEP_ARGS), value=ODD)
def test_log_step_takes_any_value_or_refuses_it_cleanly(lake, name, value):
    with Recorder(lake, anchor=None, image_checks="structure") as rec:
        ep = rec.start_episode("t", "g")
        args = {"image": screenshot(1), "model_response": response(), name: value}
        image, text = args.pop("image"), args.pop("model_response")
        try:
            ep.log_step(image, text, **args)
            stored = 1
        except (InvalidInput, Conflict) as exc:
            assert str(exc).split(":")[0] in (name, "image", "info", "image_missing"), exc
            stored = 0
        ep.finish()
    assert len(rec.lake.steps(ep.episode_id, columns=["step"])) == stored


@settings(ODD_SETTINGS, max_examples=80)
@given(name=st.sampled_from(FINISH_ARGS), value=ODD)
def test_finish_takes_any_value_or_refuses_it_cleanly(lake, name, value):
    with Recorder(lake, anchor=None, image_checks="structure") as rec:
        ep = rec.start_episode("t", "g")
        try:
            ep.finish(**{name: value})
            finished = True
        except (InvalidInput, Conflict) as exc:
            assert str(exc).startswith(name), exc
            finished = False
    assert rec.lake.episode(ep.episode_id)["status"] == ("finished" if finished else "running")


@settings(ODD_SETTINGS, max_examples=80)
@given(name=st.sampled_from(START_ARGS), value=ODD)
def test_start_episode_takes_any_value_or_refuses_it_cleanly(lake, name, value):
    args = {"task_name": "t", "task_goal": "g", name: value}
    with Recorder(lake, anchor=None, image_checks="structure") as rec:
        try:
            ep = rec.start_episode(args.pop("task_name"), args.pop("task_goal"), **args)
        except (InvalidInput, Conflict) as exc:
            reused_id = isinstance(exc, Conflict) and name == "episode_id"
            assert reused_id or str(exc).startswith((name, "tag")), exc
            return
        ep.finish()
    assert rec.lake.episode(ep.episode_id)["status"] == "finished"


# -- the net under every write ---------------------------------------------------------------------------
@pytest.mark.parametrize(("table", "row", "column"), [
    ("steps", {"episode_id": "e", "step": 2**31}, "step"),
    ("steps", {"episode_id": "e", "step": 0, "timestamp": "yesterday"}, "timestamp"),
    ("steps", {"episode_id": "e", "step": 0, "reward": 10**400}, "reward"),
    ("set_members", {"set_id": "s", "episode_id": "e", "failing_step": -(2**40)}, "failing_step"),
])
def test_rows_that_do_not_fit_name_their_column_on_every_write_path(lake, table, row, column):
    with pytest.raises(InvalidInput, match=f"^{column}: the value does not fit"):
        lake.upsert(table, [row])
    with lake.writer() as writer, pytest.raises(InvalidInput, match=f"^{column}: "):
        writer.append(table, row)
    assert lake.dataset(table).count_rows() == 0
