"""The lake's data model: the one source of truth for every table's columns.

Each table is a typed row class (`Episode`, `Step`, ...; see `rows` for how a field becomes
a column) that emits the table's Arrow schema (`EPISODES`, `STEPS`, ... and `TABLES`). The
writer, the SQL views, the API's row models and the exporters all derive their columns from
here. Changing a column means changing it here and nowhere else; readers that need "every
column but the image" ask :func:`columns` instead of listing names.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, ClassVar, Literal, get_args

import pyarrow as pa

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.rows import (
    Arrow,
    Binary,
    Blob,
    Float32,
    Int32,
    JsonObject,
    JsonText,
    JsonValue,
    Row,
)

#: Columns holding image bytes. SQL views leave them out unless a query names one.
IMAGE_COLUMNS = {"steps": ("image", "thumbnail")}
#: Columns no SQL query sees (the lake's views leave them out): only their own module reads them.
SECRET_COLUMNS = {"users": ("token_sha256",)}
#: The image columns holding what was recorded, never rewritten; the others are derived.
RECORDED_IMAGE_COLUMNS = {"steps": ("image",)}

#: String columns with a fixed set of values: each a `Literal` (what API models and type
#: checks use) and the tuple of its values (what validation and messages use).
SetKind = Literal["failure", "regression", "sft", "eval"]
FailureCategory = Literal["grounding", "planning", "perception", "environment", "other"]
JobStatus = Literal["queued", "running", "done", "failed", "interrupted", "cancelled"]
#: What a person may do on a served lake, each role including the ones before it.
Role = Literal["viewer", "curator", "admin"]
SET_KINDS: tuple[SetKind, ...] = get_args(SetKind)
FAILURE_CATEGORIES: tuple[FailureCategory, ...] = get_args(FailureCategory)
JOB_STATUSES: tuple[JobStatus, ...] = get_args(JobStatus)
ROLES: tuple[Role, ...] = get_args(Role)

#: The long side of the thumbnails `elake enrich --what thumbs` stores.
THUMBNAIL_SIDE = 240
#: Length of a screenshot's embedding (`elake enrich --what embed`; see `lake.similar`).
EMBEDDING_DIM = 512
Embedding = Annotated[list[float], Arrow(pa.list_(pa.float32(), EMBEDDING_DIM))]


class Episode(Row):
    """One episode: the task, who ran it, and its outcome."""

    table: ClassVar[str | None] = "episodes"
    episode_id: str
    run_id: str | None = None
    task_name: str | None = None
    task_goal: str | None = None
    env: str | None = None
    device: str | None = None
    model_name: str | None = None
    policy_version: str | None = None
    group_id: str | None = None
    created_at: datetime | None = None
    finished_at: datetime | None = None
    status: str | None = None  # running | finished | aborted
    success: bool | None = None
    eval_score: float | None = None
    eval_reason: str | None = None
    episode_reward: float | None = None
    episode_length: Int32 | None = None
    tags: list[str] | None = None
    extra: JsonObject | None = None
    # added after the first release of the table (older tables gain them, null)
    branch_of: str | None = None  # the episode this one branched from (`elake branch`)
    branch_step: Int32 | None = None  # the parent's step it branched at: steps before it were replayed


class OcrLine(Row):
    """One line of text found on a screenshot: its box in fractions of the image's width and
    height (x0, y0 the top left corner), so it can be drawn on the screenshot at any size."""

    text: str | None = None
    x0: Float32 | None = None
    y0: Float32 | None = None
    x1: Float32 | None = None
    y1: Float32 | None = None
    score: Float32 | None = None


class Step(Row):
    """One step: the screenshot, what the model answered, the parsed action, the rewards."""

    table: ClassVar[str | None] = "steps"
    episode_id: str
    step: Int32
    timestamp: datetime | None = None
    image: Blob | None = None
    image_format: str | None = None  # png | jpeg | webp
    image_sha256: str | None = None
    image_phash: int | None = None  # 64-bit perceptual hash, status bar cropped
    width: Int32 | None = None
    height: Int32 | None = None
    ui_tree_hash: str | None = None
    model_response: str | None = None
    thinking: str | None = None
    action_type: str | None = None
    action: JsonObject | None = None  # the parsed arguments
    action_valid: bool | None = None
    action_error: str | None = None  # why the action is invalid, when it is
    x: float | None = None
    y: float | None = None
    x2: float | None = None
    y2: float | None = None
    reward: float | None = None
    step_reward: float | None = None
    step_reward_reason: str | None = None
    anchor_key: str | None = None
    prompt: JsonText | None = None  # the messages behind the response
    info: JsonText | None = None  # whatever else the collector knew
    # derived after the write by `elake enrich` (null until then): each derivation's
    # columns and the version of the derivation that filled them
    image_error: str | None = None  # why a full decode refused the stored screenshot
    ocr_text: str | None = None  # the screen's text, one line per detected line
    ocr_boxes: list[OcrLine] | None = None  # each line with its box and score
    ocr_version: Int32 | None = None
    thumbnail: Binary | None = None  # JPEG, THUMBNAIL_SIDE px on the long side
    thumbnail_version: Int32 | None = None
    embedding: Embedding | None = None  # unit length; 0 apart: same screen
    embedding_version: Int32 | None = None


class Set(Row):
    """A curated set of episodes (failure cases, regressions, SFT data, evaluation)."""

    table: ClassVar[str | None] = "sets"
    set_id: str
    name: str | None = None
    kind: str | None = None
    description: str | None = None
    pinned_tag: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    deleted: bool | None = None
    # added after the first release of the table (older tables gain them, null)
    created_by: str | None = None  # the user who made it (null: before users, or the CLI)
    assigned_to: str | None = None  # the person asked to review its members


class SetMember(Row):
    """An episode in a set, with the curator's fields."""

    table: ClassVar[str | None] = "set_members"
    set_id: str
    episode_id: str
    failure_category: str | None = None
    failing_step: Int32 | None = None
    note: str | None = None
    added_by: str | None = None
    added_at: datetime | None = None
    removed: bool | None = None


class Annotation(Row):
    """A label or note on an episode or one of its steps."""

    table: ClassVar[str | None] = "annotations"
    annotation_id: str
    episode_id: str
    step: Int32 | None = None
    label: str | None = None
    note: str | None = None
    author: str | None = None
    created_at: datetime | None = None
    deleted: bool | None = None


class Export(Row):
    """An export job (SFT / eval datasets): what was selected, from which lake version, where to."""

    table: ClassVar[str | None] = "exports"
    export_id: str
    format: str | None = None
    selection: JsonText | None = None
    lake_versions: JsonText | None = None  # table -> version
    out_dir: str | None = None
    status: str | None = None
    samples: int | None = None
    created_at: datetime | None = None
    finished_at: datetime | None = None
    manifest: JsonText | None = None


class Run(Row):
    """Training runs and regression re-runs: one row per (run, iteration) with its metrics."""

    table: ClassVar[str | None] = "runs"
    run_id: str
    iteration: Int32
    kind: str | None = None  # train | rerun | rollout
    config: JsonText | None = None
    metrics: JsonText | None = None
    created_at: datetime | None = None


class Job(Row):
    """Long jobs (exports, re-runs, imports, judging, edits), started from the command line or
    the API: one row per job, the one record of every kind's progress and outcome
    (`lake.ops.jobs`). The kind's own record lives in its table (`exports`, `runs`);
    `result` is a small summary."""

    table: ClassVar[str | None] = "jobs"
    job_id: str
    kind: str | None = None  # export | rerun | import | judge | ...
    status: str | None = None  # JOB_STATUSES
    done: int | None = None  # progress: units done of total (episodes, tasks, ...)
    total: int | None = None  # null until the job knows
    error: JsonText | None = None  # {"type", "message"}
    params: JsonText | None = None  # what the job was asked to do
    who: str | None = None  # who asked for it: the user, or the API and the client's address
    owner: str | None = None  # the process that runs it (its lock name)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    # added after the first release of the table (older tables gain them, null)
    started_at: datetime | None = None  # its first progress report: accepted and running
    host: str | None = None  # the machine and process that ran it
    pid: int | None = None
    result: JsonText | None = None  # a summary of what it produced


class SavedView(Row):
    """A saved view: a named episode filter shared by everyone on the lake (the web app's URL
    query for it is `filters`, the API's episode filter fields as a JSON object)."""

    table: ClassVar[str | None] = "saved_views"
    view_id: str
    name: str | None = None
    filters: JsonValue | None = None  # episode filter field -> value
    created_at: datetime | None = None
    updated_at: datetime | None = None
    deleted: bool | None = None
    # added after the first release of the table (older tables gain them, null)
    created_by: str | None = None
    assigned_to: str | None = None  # the person asked to work through it, as a curation queue


class Lineage(Row):
    """What a training run, export or dataset read (lake versions or tag, the selection, the
    episodes) and what it produced (a checkpoint, an export, a dataset); written by
    `episodelake.lake.ops.lineage.record`, read by `elake lineage`."""

    table: ClassVar[str | None] = "lineage"
    lineage_id: str
    kind: str | None = None  # export | dataset | train
    output: str | None = None  # the export id, checkpoint path or dataset name made
    run_id: str | None = None  # the training run, when there is one
    tag: str | None = None  # the lake tag read, when one was
    lake_versions: JsonText | None = None  # table -> version read
    selection: JsonText | None = None  # set, where, view, options
    counts: JsonText | None = None  # episodes, steps, samples
    episode_ids: list[str] | None = None  # every episode read
    created_at: datetime | None = None


class Review(Row):
    """One person's review of a set member: their failure category, failing step and note.
    Two people reviewing one member are compared (`lake.curation.reviews`): agreed or
    disputed."""

    table: ClassVar[str | None] = "reviews"
    set_id: str
    episode_id: str
    reviewer: str
    failure_category: str | None = None
    failing_step: Int32 | None = None
    note: str | None = None
    reviewed_at: datetime | None = None


class SavedQuery(Row):
    """A SQL query saved under a name for the team (the SQL console's saved queries), with
    its owner: the one who may delete it, besides admins."""

    table: ClassVar[str | None] = "saved_queries"
    query_id: str
    name: str | None = None
    query: str | None = None
    owner: str | None = None
    created_at: datetime | None = None
    deleted: bool | None = None


class User(Row):
    """A person who may use a served lake, with a role (`ROLES`). The token is never stored,
    only its SHA-256 (tokens are 32 random bytes, so the hash cannot be guessed back); a
    removed user keeps the row, `removed` set, so the audit log's names keep meaning."""

    table: ClassVar[str | None] = "users"
    name: str
    role: str | None = None  # ROLES
    token_sha256: str | None = None
    created_at: datetime | None = None
    created_by: str | None = None
    removed: bool | None = None


class Audit(Row):
    """One change made to the lake's shared state (sets, members, notes, labels, views,
    users, edits): who made it, when, and the row before and after (JSON; null before a
    creation and after a deletion)."""

    table: ClassVar[str | None] = "audit"
    audit_id: str
    changed_at: datetime | None = None
    who: str | None = None
    action: str | None = None  # e.g. set.create, member.put, annotation.delete, user.add
    target_table: str | None = None
    target_id: str | None = None  # the row's key, its parts joined by "/"
    episode_id: str | None = None  # the episode the change concerns, if one (a purge removes the row)
    before: JsonText | None = None
    after: JsonText | None = None


#: The row class of each table, in the order tables are listed.
ROWS: tuple[type[Row], ...] = (Episode, Step, Set, SetMember, Annotation, Export, Run, Job,
                               SavedView, Lineage, User, Audit, Review, SavedQuery)
OCR_BOX = OcrLine.arrow_struct()
EPISODES = Episode.arrow_schema()
STEPS = Step.arrow_schema()
SETS = Set.arrow_schema()
SET_MEMBERS = SetMember.arrow_schema()
ANNOTATIONS = Annotation.arrow_schema()
EXPORTS = Export.arrow_schema()
RUNS = Run.arrow_schema()
JOBS = Job.arrow_schema()
SAVED_VIEWS = SavedView.arrow_schema()
LINEAGE = Lineage.arrow_schema()
USERS = User.arrow_schema()
AUDIT = Audit.arrow_schema()
REVIEWS = Review.arrow_schema()
SAVED_QUERIES = SavedQuery.arrow_schema()

TABLES: dict[str, pa.Schema] = {str(row.table): row.arrow_schema() for row in ROWS}

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
    "users": ("name",),
    "audit": ("audit_id",),
    "reviews": ("set_id", "episode_id", "reviewer"),
    "saved_queries": ("query_id",),
}

#: Tables whose rows are written once and never updated: appends, deduplicated on replay.
APPEND_ONLY = frozenset({"steps"})


def columns(table: str, *, images: bool = False) -> list[str]:
    """The column names of `table`, without image columns unless `images` is set."""
    skip = () if images else IMAGE_COLUMNS.get(table, ())
    return [name for name in TABLES[table].names if name not in skip]


def pick(table: str, names: list[str]) -> list[str]:
    """A projection of `table` (the columns a reader needs), checked against the schema when
    the reader's module loads: a column renamed or dropped here fails at import, naming it,
    instead of at the first scan."""
    unknown = [n for n in names if n not in TABLES[table].names]
    if unknown:
        raise ValueError(f"{table} has no column(s) {unknown}; its columns: {TABLES[table].names}")
    return list(names)


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

    schema = TABLES[table]
    names = set(schema.names)
    for row in rows:
        unknown = set(row) - names
        if unknown:
            raise InvalidInput(f"unknown column(s) for table {table!r}: {sorted(unknown)}")
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
