"""The typed row classes emit exactly the schemas lakes hold: the one captured from the
first release of the tables (tests/lake/storage/data/schemas-v1.json, written before the row
classes existed) and the one a lake made now stores, field by field with its metadata."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated

import pyarrow as pa
import pytest

from episodelake.lake import Lake
from episodelake.lake.storage import schema
from episodelake.lake.storage.rows import Arrow, Int32, Row, arrow_type
from tests.factories import response, screenshot

CAPTURED = Path(__file__).with_name("data") / "schemas-v1.json"


def described(s: pa.Schema) -> list[dict]:
    return [{"name": f.name, "type": str(f.type), "nullable": f.nullable,
             "metadata": {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}} for f in s]


#: What the schema gained since the captured release: tables, and columns appended to older
#: tables (a lake of that release gains them, null, when it is opened).
ADDED_TABLES = ["users", "audit", "reviews", "saved_queries"]
ADDED_COLUMNS = {"sets": ["created_by", "assigned_to"], "saved_views": ["created_by", "assigned_to"],
                 "episodes": ["branch_of", "branch_step"]}


def test_each_row_class_emits_the_captured_schema_of_its_table():
    captured = json.loads(CAPTURED.read_text())
    emitted = {name: described(s) for name, s in schema.TABLES.items()}
    assert list(emitted) == [*captured, *ADDED_TABLES]
    for table, fields in captured.items():
        assert emitted[table][:len(fields)] == fields, table
        added = emitted[table][len(fields):]
        assert [f["name"] for f in added] == ADDED_COLUMNS.get(table, []), table
        assert all(f["nullable"] for f in added), table


def test_a_lake_stores_the_schemas_the_row_classes_emit(tmp_path):
    lake = Lake(tmp_path / "lake")
    with lake.writer() as w:
        w.append("episodes", {"episode_id": "e1", "task_name": "t", "extra": json.dumps({"k": 1})})
        w.append("steps", {"episode_id": "e1", "step": 0, "image": screenshot(1),
                           "model_response": response("click", coordinate=[10, 20]), "action_type": "click"})
    for table in ("episodes", "steps"):
        stored, emitted = lake.dataset(table).schema, schema.TABLES[table]
        assert stored.names == emitted.names, table
        for field in emitted:
            if field.metadata and b"lance-encoding:blob" in field.metadata:
                # a blob column: Lance stores it out of line, as its blob type
                assert "blob" in str(stored.field(field.name).type), field.name
                continue
            assert stored.field(field.name).equals(field, check_metadata=True), (table, field.name)


def test_a_row_class_reads_a_stored_row_and_parses_its_json():
    row = schema.Episode.model_validate({"episode_id": "e1", "extra": '{"seed": 3}'})
    assert row.extra == {"seed": 3}
    step = schema.Step.model_validate({"episode_id": "e1", "step": 2, "action": {"action": "click"},
                                       "ocr_boxes": [{"text": "OK", "x0": 0.1}]})
    assert step.action == {"action": "click"} and step.ocr_boxes and step.ocr_boxes[0].text == "OK"
    with pytest.raises(ValueError, match="episode_id"):
        schema.Episode.model_validate({"task_name": "no id"})


def test_the_type_mapping_and_its_refusals():
    class Box(Row):
        n: Int32
        when: datetime | None = None
        words: list[str] | None = None
        fixed: Annotated[list[float], Arrow(pa.list_(pa.float32(), 2))] | None = None

    s = Box.arrow_schema()
    assert s.field("n").type == pa.int32() and not s.field("n").nullable
    assert s.field("when").type == pa.timestamp("us", tz="UTC") and s.field("when").nullable
    assert s.field("words").type == pa.list_(pa.string())
    assert s.field("fixed").type == pa.list_(pa.float32(), 2)
    assert arrow_type(list[Box]) == pa.list_(Box.arrow_struct())

    class Odd(Row):
        mapping: dict[int, int] | None = None

    with pytest.raises(TypeError, match="column 'mapping': no Arrow type"):
        Odd.arrow_schema()


def test_a_readers_projection_is_checked_against_the_schema():
    assert schema.pick("steps", ["episode_id", "step"]) == ["episode_id", "step"]
    with pytest.raises(ValueError, match=r"steps has no column\(s\) \['stepp'\]"):
        schema.pick("steps", ["episode_id", "stepp"])
