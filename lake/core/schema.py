"""The lake's data model: the one source of truth for every table's Arrow schema.

The writer, the SQL views, the API models and the exporters all derive their columns from
here. Changing a column means changing it here and nowhere else; readers that need "every
column but the image" ask :func:`columns` instead of listing names.
"""

from __future__ import annotations

from typing import Literal, get_args

import pyarrow as pa

#: Metadata that makes Lance store a column out of line as a blob (read lazily, by row).
BLOB_METADATA = {"lance-encoding:blob": "true"}

#: Columns holding image bytes. SQL views leave them out unless a query names one.
IMAGE_COLUMNS = {"steps": ("image", "thumbnail")}
#: The image columns holding what was recorded, never rewritten; the others are derived.
RECORDED_IMAGE_COLUMNS = {"steps": ("image",)}

EPISODE_STATUSES = ("running", "finished", "aborted")
#: String columns with a fixed set of values: each a `Literal` (what API models and type
#: checks use) and the tuple of its values (what validation and messages use).
SetKind = Literal["failure", "regression", "sft", "eval"]
FailureCategory = Literal["grounding", "planning", "perception", "environment", "other"]
JobStatus = Literal["queued", "running", "done", "failed", "interrupted", "cancelled"]
SET_KINDS: tuple[SetKind, ...] = get_args(SetKind)
FAILURE_CATEGORIES: tuple[FailureCategory, ...] = get_args(FailureCategory)
JOB_STATUSES: tuple[JobStatus, ...] = get_args(JobStatus)

_ts = pa.timestamp("us", tz="UTC")

EPISODES = pa.schema(
    [
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("run_id", pa.string()),
        pa.field("task_name", pa.string()),
        pa.field("task_goal", pa.string()),
        pa.field("env", pa.string()),
        pa.field("device", pa.string()),
        pa.field("model_name", pa.string()),
        pa.field("policy_version", pa.string()),
        pa.field("group_id", pa.string()),
        pa.field("created_at", _ts),
        pa.field("finished_at", _ts),
        pa.field("status", pa.string()),
        pa.field("success", pa.bool_()),
        pa.field("eval_score", pa.float64()),
        pa.field("eval_reason", pa.string()),
        pa.field("episode_reward", pa.float64()),
        pa.field("episode_length", pa.int32()),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("extra", pa.string()),  # JSON text
    ]
)

#: One line of text found on a screenshot: its box in fractions of the image's width and
#: height (x0, y0 the top left corner), so it can be drawn on the screenshot at any size.
OCR_BOX = pa.struct([
    pa.field("text", pa.string()),
    pa.field("x0", pa.float32()),
    pa.field("y0", pa.float32()),
    pa.field("x1", pa.float32()),
    pa.field("y1", pa.float32()),
    pa.field("score", pa.float32()),
])
#: The long side of the thumbnails `elake enrich --what thumbs` stores.
THUMBNAIL_SIDE = 240
#: Length of a screenshot's embedding (`elake enrich --what embed`; see `lake.similar`).
EMBEDDING_DIM = 512

STEPS = pa.schema(
    [
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("step", pa.int32(), nullable=False),
        pa.field("timestamp", _ts),
        pa.field("image", pa.large_binary(), metadata=BLOB_METADATA),
        pa.field("image_format", pa.string()),  # png | jpeg | webp
        pa.field("image_sha256", pa.string()),
        pa.field("image_phash", pa.int64()),  # 64-bit perceptual hash, status bar cropped
        pa.field("width", pa.int32()),
        pa.field("height", pa.int32()),
        pa.field("ui_tree_hash", pa.string()),
        pa.field("model_response", pa.string()),
        pa.field("thinking", pa.string()),
        pa.field("action_type", pa.string()),
        pa.field("action", pa.string()),  # JSON text of the parsed arguments
        pa.field("action_valid", pa.bool_()),
        pa.field("action_error", pa.string()),  # why the action is invalid, when it is
        pa.field("x", pa.float64()),
        pa.field("y", pa.float64()),
        pa.field("x2", pa.float64()),
        pa.field("y2", pa.float64()),
        pa.field("reward", pa.float64()),
        pa.field("step_reward", pa.float64()),
        pa.field("step_reward_reason", pa.string()),
        pa.field("anchor_key", pa.string()),
        pa.field("prompt", pa.string()),  # JSON text of the messages behind the response
        pa.field("info", pa.string()),  # JSON text: whatever else the collector knew
        # derived after the write by `elake enrich` (null until then): each derivation's
        # columns and the version of the derivation that filled them
        pa.field("image_error", pa.string()),  # why a full decode refused the stored screenshot
        pa.field("ocr_text", pa.string()),  # the screen's text, one line per detected line
        pa.field("ocr_boxes", pa.list_(OCR_BOX)),  # each line with its box and score
        pa.field("ocr_version", pa.int32()),
        pa.field("thumbnail", pa.large_binary()),  # JPEG, THUMBNAIL_SIDE px on the long side
        pa.field("thumbnail_version", pa.int32()),
        pa.field("embedding", pa.list_(pa.float32(), EMBEDDING_DIM)),  # unit length; 0 apart: same screen
        pa.field("embedding_version", pa.int32()),
    ]
)

SETS = pa.schema(
    [
        pa.field("set_id", pa.string(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("description", pa.string()),
        pa.field("pinned_tag", pa.string()),
        pa.field("created_at", _ts),
        pa.field("updated_at", _ts),
        pa.field("deleted", pa.bool_()),
    ]
)

SET_MEMBERS = pa.schema(
    [
        pa.field("set_id", pa.string(), nullable=False),
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("failure_category", pa.string()),
        pa.field("failing_step", pa.int32()),
        pa.field("note", pa.string()),
        pa.field("added_by", pa.string()),
        pa.field("added_at", _ts),
        pa.field("removed", pa.bool_()),
    ]
)

ANNOTATIONS = pa.schema(
    [
        pa.field("annotation_id", pa.string(), nullable=False),
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("step", pa.int32()),
        pa.field("label", pa.string()),
        pa.field("note", pa.string()),
        pa.field("author", pa.string()),
        pa.field("created_at", _ts),
        pa.field("deleted", pa.bool_()),
    ]
)

#: Export jobs (SFT / eval datasets): what was selected, from which lake version, where to.
EXPORTS = pa.schema(
    [
        pa.field("export_id", pa.string(), nullable=False),
        pa.field("format", pa.string()),
        pa.field("selection", pa.string()),  # JSON text
        pa.field("lake_versions", pa.string()),  # JSON text: table -> version
        pa.field("out_dir", pa.string()),
        pa.field("status", pa.string()),
        pa.field("samples", pa.int64()),
        pa.field("created_at", _ts),
        pa.field("finished_at", _ts),
        pa.field("manifest", pa.string()),  # JSON text
    ]
)

#: Training runs and regression re-runs: one row per (run, iteration) with its metrics.
RUNS = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("iteration", pa.int32(), nullable=False),
        pa.field("kind", pa.string()),  # train | rerun | rollout
        pa.field("config", pa.string()),  # JSON text
        pa.field("metrics", pa.string()),  # JSON text
        pa.field("created_at", _ts),
    ]
)

#: Long jobs (exports, re-runs, imports, judging), started from the command line or the API:
#: one row per job, the one record of every kind's progress and outcome (`lake.jobs`). The
#: kind's own record lives in its table (`exports`, `runs`); `result` is a small summary.
JOBS = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("kind", pa.string()),  # export | rerun | import | judge
        pa.field("status", pa.string()),  # JOB_STATUSES
        pa.field("done", pa.int64()),  # progress: units done of total (episodes, tasks, ...)
        pa.field("total", pa.int64()),  # null until the job knows
        pa.field("error", pa.string()),  # JSON text: {"type", "message"}
        pa.field("params", pa.string()),  # JSON text: what the job was asked to do
        pa.field("who", pa.string()),  # who asked for it: the user, or the API and the client's address
        pa.field("owner", pa.string()),  # the process that runs it (its lock name)
        pa.field("created_at", _ts),
        pa.field("updated_at", _ts),
        pa.field("finished_at", _ts),
        # added after the first release of the table (older tables gain them, null)
        pa.field("started_at", _ts),  # its first progress report: accepted and running
        pa.field("host", pa.string()),  # the machine and process that ran it
        pa.field("pid", pa.int64()),
        pa.field("result", pa.string()),  # JSON text: a summary of what it produced
    ]
)

#: Saved views: a named episode filter shared by everyone on the lake (the web app's URL
#: query for it is `filters`, the API's episode filter fields as a JSON object).
SAVED_VIEWS = pa.schema(
    [
        pa.field("view_id", pa.string(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("filters", pa.string()),  # JSON text: episode filter field -> value
        pa.field("created_at", _ts),
        pa.field("updated_at", _ts),
        pa.field("deleted", pa.bool_()),
    ]
)

#: Lineage: what each training run, export and dataset read (lake versions or tag, the
#: selection, the episodes) and what it produced (a checkpoint, an export, a dataset);
#: written by `episodelake.lake.core.lineage.record`, read by `elake lineage`.
LINEAGE = pa.schema(
    [
        pa.field("lineage_id", pa.string(), nullable=False),
        pa.field("kind", pa.string()),  # export | dataset | train
        pa.field("output", pa.string()),  # the export id, checkpoint path or dataset name made
        pa.field("run_id", pa.string()),  # the training run, when there is one
        pa.field("tag", pa.string()),  # the lake tag read, when one was
        pa.field("lake_versions", pa.string()),  # JSON text: table -> version read
        pa.field("selection", pa.string()),  # JSON text: set, where, view, options
        pa.field("counts", pa.string()),  # JSON text: episodes, steps, samples
        pa.field("episode_ids", pa.list_(pa.string())),  # every episode read
        pa.field("created_at", _ts),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "episodes": EPISODES,
    "steps": STEPS,
    "sets": SETS,
    "set_members": SET_MEMBERS,
    "annotations": ANNOTATIONS,
    "exports": EXPORTS,
    "runs": RUNS,
    "jobs": JOBS,
    "saved_views": SAVED_VIEWS,
    "lineage": LINEAGE,
}

#: The key of each table: rows with the same key are the same row (upserts, replays, dedup).
KEYS: dict[str, tuple[str, ...]] = {
    "episodes": ("episode_id",),
    "steps": ("episode_id", "step"),
    "sets": ("set_id",),
    "set_members": ("set_id", "episode_id"),
    "annotations": ("annotation_id",),
    "exports": ("export_id",),
    "runs": ("run_id", "iteration"),
    "jobs": ("job_id",),
    "saved_views": ("view_id",),
    "lineage": ("lineage_id",),
}

#: Tables whose rows are written once and never updated: appends, deduplicated on replay.
APPEND_ONLY = frozenset({"steps"})


def columns(table: str, *, images: bool = False) -> list[str]:
    """The column names of `table`, without image columns unless `images` is set."""
    skip = () if images else IMAGE_COLUMNS.get(table, ())
    return [name for name in TABLES[table].names if name not in skip]


def empty(table: str) -> pa.Table:
    return TABLES[table].empty_table()


def conform(table: str, rows: list[dict]) -> pa.Table:
    """Build an Arrow table of `table`'s schema from dict rows; missing keys become null.

    Unknown keys are an error, so a typo in a collector never silently drops a field. A
    value that does not fit its column is `InvalidInput` naming the column: Arrow's own
    errors (ArrowInvalid, ArrowTypeError, OverflowError, UnicodeEncodeError) do not say which
    column, and must not reach a caller raw. Callers that take values from users check them
    first (`collectors.record.recorder.field_value`); this is the net under every write.
    """
    from episodelake.lake.core.errors import InvalidInput

    schema = TABLES[table]
    names = set(schema.names)
    for row in rows:
        unknown = set(row) - names
        if unknown:
            raise ValueError(f"unknown column(s) for table {table!r}: {sorted(unknown)}")
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
        for column in schema:
            for row in rows:
                try:
                    pa.array([row.get(column.name)], type=column.type)
                except (pa.ArrowException, OverflowError, TypeError, ValueError) as bad:
                    raise InvalidInput(f"{column.name}: the value does not fit a {column.type} "
                                       f"column of {table!r} ({type(bad).__name__}: {bad})") from None
        raise InvalidInput(f"{table}: the rows do not fit the table's schema ({exc})") from None
