"""Request and response models. Row models subclass the lake's typed rows, never by hand.

Each row model is a subclass of its table's row class in `lake/storage/schema.py`: it hides
the columns the API does not show (`Field(exclude=True)`: image bytes, embeddings, the
`deleted` flag) and adds the computed ones (`image_url`, `action_view`, counts), so a column
added to the table shows up in the API and its OpenAPI document without touching this file.
JSON columns typed `JsonObject` (`action`, `extra`) are parsed into objects on the way out.
Request models are separate and carry only what a caller may set.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from episodelake.api.errors import ErrorDetail
from episodelake.api.listing import EpisodeFilter
from episodelake.collectors.jobs.branch import BranchSpec
from episodelake.collectors.jobs.rerun import RerunSpec
from episodelake.lake.curation.fields import MAX_NAME, MAX_TEXT
from episodelake.lake.curation.reviews import ReviewState
from episodelake.lake.export.spec import ExportOptions
from episodelake.lake.storage import schema
from episodelake.lake.storage.layout import ID_MAX, ID_PATTERN
from episodelake.lake.storage.schema import Role
from episodelake.lake.vocab.overlay import ActionView

_HIDDEN = "stored, not shown by the API"


class Episode(schema.Episode):
    """One row of the episodes table."""

    model_config = ConfigDict(extra="ignore")


class StepDetail(schema.Step):
    """One step with its prompt and collector info (JSON text), without image bytes."""

    model_config = ConfigDict(extra="ignore")
    image: bytes | None = Field(None, exclude=True, description=_HIDDEN)
    thumbnail: bytes | None = Field(None, exclude=True, description=_HIDDEN)
    embedding: list[float] | None = Field(None, exclude=True, description=_HIDDEN)
    image_url: str | None = None
    action_view: ActionView


class Step(StepDetail):
    """One step without its image bytes (fetch image_url) or its prompt (see StepDetail)."""

    prompt: str | None = Field(None, exclude=True, description=_HIDDEN)
    info: str | None = Field(None, exclude=True, description=_HIDDEN)


class Versioned(BaseModel):
    """The version of a row people edit (a set, a saved view, a saved query): the number of
    changes of its own fields, and who made the last one, when. GET answers it as the `ETag`
    header too; a change sent with `If-Match` (that ETag) from an older version gets a 412."""

    version: int = Field(0, description="changes of the row's own fields so far (0: made before the audit log); "
                         "send it back as `If-Match: \"<version>\"` with a change")
    changed_by: str | None = Field(None, description="who saved this version (null: unknown)")
    changed_at: datetime | None = Field(None, description="when this version was saved")


class Set(Versioned, schema.Set):
    """A curated set of episodes, with its live member count and its version (members are
    rows of their own: filing an episode does not make a new version of the set)."""

    model_config = ConfigDict(extra="ignore")
    deleted: bool | None = Field(None, exclude=True, description=_HIDDEN)
    members: int = 0


class Review(schema.Review):
    """One person's review of a set member."""


class Member(schema.SetMember):
    """An episode in a set, with the member's curation fields and the episode's outcome."""

    model_config = ConfigDict(extra="ignore")
    removed: bool | None = Field(None, exclude=True, description=_HIDDEN)
    task_name: str | None = None
    success: bool | None = None
    episode_length: int | None = None
    policy_version: str | None = None
    reviews: list[Review] = Field(default_factory=list, description="each reviewer's label, oldest first")
    review_state: ReviewState | None = Field(None, description="to review (fewer than two reviews), agreed "
                                             "(all the same category and failing step) or disputed")


class ReviewPut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    failure_category: FailureCategory | None = None
    failing_step: StrictInt | None = Field(None, ge=0, le=1_000_000)
    note: str | None = Field(None, max_length=MAX_TEXT)
    reviewer: str | None = Field(None, max_length=MAX_NAME, description="on a server without users only: "
                                 "who reviews (with users, the signed-in person)")


class Membership(schema.SetMember):
    """A set that an episode belongs to."""

    model_config = ConfigDict(extra="ignore")
    removed: bool | None = Field(None, exclude=True, description=_HIDDEN)
    set_name: str | None = None
    set_kind: str | None = None


class Annotation(schema.Annotation):
    """One row of the annotations table."""

    model_config = ConfigDict(extra="ignore")
    deleted: bool | None = Field(None, exclude=True, description=_HIDDEN)


SetKind = schema.SetKind
FailureCategory = schema.FailureCategory


class EpisodeDetail(BaseModel):
    episode: Episode
    steps: list[Step]
    memberships: list[Membership]
    annotations: list[Annotation]


class EpisodePage(BaseModel):
    items: list[Episode]
    next_cursor: str | None = Field(None, description="pass as `cursor` for the next page; null at the end")
    total: int | None = Field(None, description="matching episodes; given on the first page only")


class QueuePosition(BaseModel):
    """Where an episode stands in a filtered, sorted episode list: what an annotation queue
    shows ("12 of 240") and steps through."""

    position: int | None = Field(description="1-based; null when the filter leaves the episode out")
    total: int = Field(description="episodes the filter selects")
    previous: str | None = Field(description="the episode before it in the list; null at the start")
    next: str | None = Field(description="the episode after it in the list; null at the end")


class SavedView(Versioned, schema.SavedView):
    """A named episode filter that everyone on the lake shares, with its version."""

    model_config = ConfigDict(extra="ignore")
    filters: EpisodeFilter
    deleted: bool | None = Field(None, exclude=True, description=_HIDDEN)


class SavedViewCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=MAX_NAME)
    filters: EpisodeFilter = Field(description="the episode filter's fields; only those set are kept")


class SavedViewUpdate(BaseModel):
    """A saved view's new filters (its name and id stay)."""

    model_config = ConfigDict(extra="forbid")
    filters: EpisodeFilter = Field(description="the episode filter's fields, replacing the view's; only "
                                   "those set are kept")


class SavedViewAssign(BaseModel):
    """Who a saved view is assigned to, as a curation queue."""

    model_config = ConfigDict(extra="forbid")
    assigned_to: str = Field(min_length=1, max_length=MAX_NAME, description="the person asked to work "
                             "through the view's episodes (on a lake with users, one of them)")


class TaskNode(BaseModel):
    task_name: str | None
    task_goal: str | None
    episodes: int
    successes: int
    failures: int
    unjudged: int
    success_rate: float | None = Field(description="successes / judged episodes; null if none judged")
    mean_length: float | None


class SuccessCell(BaseModel):
    """One task under one policy version of one run."""

    run_id: str | None
    task_name: str | None
    policy_version: str | None
    episodes: int
    judged: int = Field(description="episodes with a success verdict (the rate's denominator)")
    successes: int
    success_rate: float | None


class Bin(BaseModel):
    lo: float
    hi: float
    count: int


class Stats(BaseModel):
    episodes: int
    steps: int
    success_by_task_policy: list[SuccessCell] = Field(
        description="per run, task and policy version, by run then task then version")
    step_reward_histogram: list[Bin]
    step_reward_nulls: int
    length_histogram: list[Bin]


class PolicySuccess(BaseModel):
    """One policy version of one run: versions of different runs are different policies,
    even when their names are the same."""

    run_id: str | None
    policy_version: str | None
    episodes: int
    successes: int
    success_rate: float | None = Field(description="over judged episodes; null when none is judged")


class RunActivity(BaseModel):
    run_id: str | None
    episodes: int
    successes: int
    success_rate: float | None
    policy_versions: list[str]
    last_episode_at: datetime | None


class CategoryCount(BaseModel):
    failure_category: str | None = Field(description="null: members filed without a category")
    members: int
    sets: int


class Overview(BaseModel):
    """The landing page: how the policies do, what ran last, what fails most, what was curated."""

    episodes: int
    steps: int
    success_by_policy: list[PolicySuccess]
    latest_runs: list[RunActivity]
    failure_categories: list[CategoryCount]
    recent_sets: list[Set]


class SqlRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=20_000, examples=["select task_name, count(*) from episodes group by 1"])
    max_rows: int | None = Field(None, ge=1, description="at most the server's cap")


class SqlColumn(BaseModel):
    name: str
    type: str


class SavedQuery(Versioned, schema.SavedQuery):
    """A named SQL query the team shares, with its owner and its version."""

    model_config = ConfigDict(extra="ignore")
    deleted: bool | None = Field(None, exclude=True, description=_HIDDEN)


class SavedQueryCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=MAX_NAME)
    query: str = Field(min_length=1, max_length=20_000)


class SavedQueryUpdate(BaseModel):
    """A saved query's new name or text; only the fields sent change."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, min_length=1, max_length=MAX_NAME)
    query: str | None = Field(None, min_length=1, max_length=20_000)


class SqlTable(BaseModel):
    """A table as SQL sees it: its columns, image columns marked (selected only when named)."""

    name: str
    columns: list[SqlColumn]
    image_columns: list[str] = Field(description="blob columns: a query gets them only by naming them")


class SqlResult(BaseModel):
    columns: list[SqlColumn]
    rows: list[list[Any]]
    truncated: bool = Field(description="a cap cut the result: more rows matched")
    truncated_by: Literal["rows", "bytes"] | None = Field(
        None, description="which cap cut it: the row cap or the byte cap (Settings.sql_max_bytes)")
    elapsed_ms: float


class SetCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=MAX_NAME)
    kind: SetKind = "failure"
    description: str | None = Field(None, max_length=MAX_TEXT)
    pinned_tag: str | None = Field(None, max_length=200)


class SetUpdate(BaseModel):
    """Only the fields sent change; null clears description or pinned_tag."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, min_length=1, max_length=MAX_NAME)
    kind: SetKind | None = None
    description: str | None = Field(None, max_length=MAX_TEXT)
    pinned_tag: str | None = Field(None, max_length=200)
    assigned_to: str | None = Field(None, max_length=MAX_NAME, description="the person asked to review "
                                    "its members (on a lake with users, one of them); null unassigns")


class MemberPut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    failure_category: FailureCategory | None = None
    failing_step: StrictInt | None = Field(None, ge=0, le=1_000_000, description="a step number: "
                                           "true, 1.0 or \"1\" are refused, not read as 1")
    note: str | None = Field(None, max_length=MAX_TEXT)
    added_by: str | None = Field(None, max_length=MAX_NAME)


class MembersAdd(BaseModel):
    """Episodes to file into a set at once: listed, or every episode a filter matches."""

    model_config = ConfigDict(extra="forbid")
    episode_ids: list[str] | None = Field(None, max_length=10_000, description="these episodes")
    filter: EpisodeFilter | None = Field(None, description="every episode the episode list's filter matches "
                                         "(its query fields as an object)")
    failure_category: FailureCategory | None = None
    note: str | None = Field(None, max_length=MAX_TEXT)


class MembersAdded(BaseModel):
    set_id: str
    added: int = Field(description="episodes filed now")
    already: int = Field(description="episodes that were members already (their curation kept)")


class AnnotationCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: StrictInt | None = Field(None, ge=0, le=1_000_000, description="null annotates the whole episode")
    label: str | None = Field(None, max_length=MAX_NAME)
    note: str | None = Field(None, max_length=MAX_TEXT)
    author: str | None = Field(None, max_length=MAX_NAME)


class GroupSummary(BaseModel):
    group_id: str
    task_name: str | None
    episodes: int
    successes: int
    mean_reward: float | None


class GroupStep(BaseModel):
    episode_id: str
    step: int
    action_type: str | None
    reward: float | None
    step_reward: float | None
    discounted_return: float | None
    advantage: float | None
    image_url: str


class AnchorGroup(BaseModel):
    anchor_key: str
    episodes: int = Field(description="distinct episodes with a step at this anchor")
    steps: list[GroupStep]


class GroupDetail(BaseModel):
    group_id: str
    gamma: float
    episodes: list[Episode]
    anchors: list[AnchorGroup] = Field(description="anchor-state groups, most shared first")
    unanchored_steps: int = Field(description="steps without an anchor key")
    advantages_note: str = Field(description="which advantages and returns these are (the trainer's defaults)")


class Health(BaseModel):
    ok: bool
    lake: str = Field(description="the lake's name (its folder's or prefix's last part)")
    location: str | None = Field(None, description="where the lake lives: for admins, and on a "
                                 "server that needs no token")
    tables: dict[str, int]
    tags: list[str]


class Me(BaseModel):
    """Who the server takes the caller for."""

    name: str | None = Field(description="null on a server that needs no token (anyone on this machine)")
    role: Role = Field(description="what they may do: viewer reads; curator also changes sets, notes, "
                       "labels and views and starts exports and re-runs; admin also deletes and manages users")
    sign_in: bool = Field(description="whether this server needs a token")


class UserOut(BaseModel):
    name: str
    role: Role
    created_at: datetime | None = None
    created_by: str | None = None


class UserCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=ID_MAX, pattern=ID_PATTERN)
    role: Role


class UserUpdate(BaseModel):
    """A user's new role."""

    model_config = ConfigDict(extra="forbid")
    role: Role


class UserCreated(UserOut):
    token: str = Field(description="shown once: only its hash is kept")


class AuditEntry(BaseModel):
    audit_id: str
    changed_at: datetime | None
    who: str | None
    action: str | None
    target_table: str | None
    target_id: str | None
    episode_id: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None


def _default(spec: type, name: str) -> Any:
    """A spec dataclass's default for `name`: request models show it, the spec owns it."""
    return next(f.default for f in dataclasses.fields(spec) if f.name == name)


class JobProgress(BaseModel):
    """A job's progress: units (episodes, tasks) done of total; live while this server runs
    it, else as last recorded in the jobs table."""

    done: int
    total: int | None = Field(description="null until the job has resolved what it will do")


class JobOut(BaseModel):
    """One long job (export, re-run, import, judging), started from the command line or the
    API, from the lake's jobs table."""

    job_id: str = Field(description="the export's or re-run's id, for those kinds")
    kind: str = Field(description="export | rerun | import | judge")
    status: schema.JobStatus = Field(
        description="queued | running | done | failed | interrupted (the process running it "
        "stopped) | cancelled")
    progress: JobProgress
    error: ErrorDetail | None = None
    params: dict[str, Any] | None = Field(None, description="what the job was asked to do")
    result: dict[str, Any] | None = Field(None, description="a summary of what it produced, once done")
    who: str | None = Field(None, description="who asked for it: a user, or the API and the client's address")
    host: str | None = Field(None, description="the machine that ran it")
    pid: int | None = Field(None, description="the process that ran it")
    created_at: datetime
    started_at: datetime | None = Field(None, description="when it was accepted and began")
    updated_at: datetime | None = None
    finished_at: datetime | None = None


class ExportFormatInfo(BaseModel):
    name: str
    summary: str


class ExportCreate(ExportOptions):
    """An export's options (`episodelake.lake.export.spec.ExportOptions`, where each field is
    defined); the server picks the folder and writes image paths relative to it."""


class ExportSummary(BaseModel):
    export_id: str
    format: str | None
    status: str | None = Field(description="running | finished | failed | interrupted (its server "
                               "stopped) | deleted")
    samples: int | None = Field(None, description="samples written, once finished")
    counts: dict[str, Any] | None = Field(None, description="the manifest's counts, once finished")
    selection: dict[str, Any] | None = Field(None, description="the spec and what it resolved to")
    created_at: datetime | None
    finished_at: datetime | None = None
    progress: JobProgress | None = Field(None, description="of its job")
    error: ErrorDetail | None = None
    download_url: str | None = Field(None, description="a zip of the folder; null unless finished and "
                                     "written under this server's exports folder")


class ExportDetail(ExportSummary):
    lake_versions: dict[str, Any] | None = None
    manifest: dict[str, Any] | None = None


class RerunCreate(BaseModel):
    """A re-run of a set's tasks on the simulated phone (other envs: `elake rerun`)."""

    model_config = ConfigDict(extra="forbid")
    set: str = Field(min_length=1, max_length=MAX_NAME, description="the set's name or id")
    policy: str = Field(min_length=1, max_length=40, examples=["oracle", "noisy:0.3", "random"],
                        description="oracle | noisy[:P] (a share P of random steps) | random")
    n: int = Field(_default(RerunSpec, "n"), ge=1, le=100, description="episodes per task")
    max_steps: int = Field(_default(RerunSpec, "max_steps"), ge=1, le=100)
    seed: int = Field(_default(RerunSpec, "seed"), ge=0, le=2**31 - 1)
    confidence: float = Field(_default(RerunSpec, "confidence"), gt=0, lt=1,
                              description="of the delta's interval")


class RerunSet(BaseModel):
    set_id: str | None = None
    name: str | None = None
    kind: str | None = None
    pinned_tag: str | None = None


class Outcome(BaseModel):
    """Success counts of a group of episodes; unjudged ones are left out of the rate."""

    episodes: int
    successes: int
    unjudged: int
    rate: float | None


class RerunTask(BaseModel):
    task: str
    goal: str | None
    status: str = Field(description="fixed | broke | still passing | still failing | unknown")
    before: Outcome
    after: Outcome
    episode_ids: list[str]


class RerunSummary(BaseModel):
    rerun_id: str
    created_at: datetime | None
    status: str | None = Field(description="queued | running | finished | failed | interrupted (the "
                               "process running it stopped) | cancelled")
    set: RerunSet | None
    policy: str | None
    env: str | None
    n: int | None
    before: float | None = Field(None, description="success rate of the set's episodes")
    after: float | None = Field(None, description="success rate of the re-run's episodes")
    delta: float | None = Field(None, description="after - before")
    interval: list[float] | None = Field(None, description="the delta's confidence interval [low, high]")
    fixed: int = 0
    broke: int = 0
    progress: JobProgress | None = Field(None, description="of its job (none for re-runs recorded before jobs were)")
    error: ErrorDetail | None = None


class RerunDetail(BaseModel):
    """A re-run's report; one still running (or failed) has its status and set only."""

    rerun_id: str
    status: str | None
    set: RerunSet | None = None
    spec: dict[str, Any] | None = None
    tasks: list[RerunTask] = []
    before: Outcome | None = None
    after: Outcome | None = None
    delta: float | None = None
    interval: list[float] | None = None
    confidence: float | None = None
    interval_method: str | None = None
    fixed: list[str] = []
    broke: list[str] = []
    progress: JobProgress | None = None
    error: ErrorDetail | None = None


class BranchCreate(BaseModel):
    """Branches of one episode from its step K on the simulated phone (other envs and model
    endpoints: `elake branch`)."""

    model_config = ConfigDict(extra="forbid")
    episode_id: str = Field(min_length=1, max_length=ID_MAX, pattern=ID_PATTERN, description="the parent")
    at: Annotated[StrictInt, Field(ge=0)] | Literal["failing"] = Field(
        description="the parent's step K (the branch stands where the parent stood before its K-th action), "
        "or 'failing': a curator's failing_step, else the first step the judge scored low")
    policy: str = Field(min_length=1, max_length=40, examples=["random", "noisy:0.3", "oracle"],
                        description="oracle | noisy[:P] (a share P of random steps) | random")
    n: int = Field(_default(BranchSpec, "n"), ge=1, le=20, description="branches to record")
    max_steps: int | None = Field(None, ge=1, le=100, description="steps of a branch's whole trajectory, the "
                                  "replayed ones included; default: the command line's "
                                  f"{_default(BranchSpec, 'max_steps')}, or K + 10 where that leaves fewer "
                                  "than 10 steps after K")
    seed: int = Field(_default(BranchSpec, "seed"), ge=0, le=2**31 - 1, description="of the branches' agents")


class BranchRefusal(BaseModel):
    """A branch that was not recorded, and why (the episode and the step named)."""

    parent: str | None
    step: int | None
    error: str | None


class BranchJob(BaseModel):
    """A branch job (kind `branch`; its id is the branches' `run_id`): what it was asked, its
    progress, and the branches it recorded so far."""

    branch_id: str
    parent: str | None = Field(description="the episode branched")
    step: int | None = Field(description="the parent's step K the branches start from")
    at: str | None = Field(None, description="as asked: a step number or 'failing'")
    n: int | None = None
    policy: str | None = None
    status: schema.JobStatus
    progress: JobProgress
    error: ErrorDetail | None = None
    who: str | None = None
    created_at: datetime
    finished_at: datetime | None = None
    branches: list[Episode] = Field(description="the episodes this job recorded")
    refused: list[BranchRefusal] = Field(description="branches not recorded, and why (listed once the job ends)")


class EpisodeBranches(BaseModel):
    """An episode's branches (`episodes.branch_of` = it) and the branch jobs started from it."""

    episode_id: str
    branches: list[Episode] = Field(description="by branch step, then oldest first")
    jobs: list[BranchJob] = Field(description="branch jobs of this episode, newest first")


class RunSummary(BaseModel):
    run_id: str
    kind: str | None = Field(description="train | rerun | rollout")
    iterations: int = Field(description="iterations recorded")
    last_iteration: int
    started_at: datetime | None
    updated_at: datetime | None
    last_metrics: dict[str, float | None] = Field(
        description="the last iteration's numeric metrics, nested keys joined with '.'")
    algo: str | None = Field(None, description="the run's advantage estimator (gigpo, grpo), if recorded")
    policy: str | None = Field(None, description="the policy trained (tiny, vlm, ...), if recorded")
    seed: int | None = Field(None, description="the run's seed, if recorded")
    config: dict[str, Any] = Field(default_factory=dict, description="the run's whole configuration, "
                                   "as its last iteration recorded it")


class MeanInterval(BaseModel):
    mean: float
    low: float | None = Field(description="95% t-interval over the runs; null with one run")
    high: float | None
    n: int = Field(description="runs in the mean")


class RunArm(BaseModel):
    label: str = Field(description="the settings this arm differs in from the others, e.g. "
                       "'algo=gigpo lr_decay_to=0.1'")
    settings: dict[str, Any] = Field(description="every setting the arm's runs share (nested "
                                     "keys joined with '.')")
    runs: list[str] = Field(description="its runs' ids, by seed")
    seeds: list[int | None]
    iterations: list[int] = Field(description="the iterations at least one run reached")
    per_iteration: list[MeanInterval] = Field(description="the metric at each of `iterations` "
                                              "over the runs that reached it")
    curves: list[list[float | None]] = Field(description="each run's metric per iteration, "
                                             "in the order of `runs`")
    final: MeanInterval | None = Field(description="the mean of each run's last 5 points, over "
                                       "runs; null when no run has a value")


class RunsOverSeeds(BaseModel):
    metric: str
    arms: list[RunArm] = Field(description="training runs whose settings differ only in the "
                               "seed (and settings that do not change results), most runs first")


class RunIteration(BaseModel):
    iteration: int
    created_at: datetime | None
    metrics: dict[str, Any] = Field(description="as recorded; non-finite numbers as null")


class RunDetail(BaseModel):
    run_id: str
    kind: str | None
    config: dict[str, Any] | None = Field(description="the last iteration's config")
    iterations: list[RunIteration]
    series: dict[str, list[float | None]] = Field(
        description="each numeric metric (nested keys joined with '.') per iteration, in the order of "
                    "`iterations`; null where an iteration lacks it")
