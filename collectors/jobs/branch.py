"""Branches: N continuations of a recorded episode from its state at step K (`elake branch`).

A branch restores the parent's state at step K and lets a policy act from there: the device
is reset to the parent's task and seed (``episodes.task_name``, ``extra.seed``) and the
parent's recorded actions 0..K-1 are carried out again through the same `Device` interface
(the simulated phone, an adb phone, a ClawGUI-Server / MobileWorld server), by the one episode
loop (:mod:`episodelake.collectors.loop`, which checks the screen before every replayed action
and at K, and records nothing of a branch whose screen diverged). Each branch is an ordinary
episode of its own: its whole trajectory (the replayed rows marked ``replayed`` in
``steps.info``, with the parent's responses and rewards), ``branch_of`` = the parent and
``branch_step`` = K; it joins the parent's episode group (or, for a parent without one, a
group of the parent's branches at K), so its step K shares an anchor group with the parent's.

``--at failing`` branches at the parent's failing step: a curator's ``failing_step`` (a set
member's; the given set's first when one is given), else the first step whose judge step
reward is below `LOW_STEP_REWARD` (the screen on which the first unpaid action was taken).

A branch job is a job like a re-run (`episodelake.lake.ops.jobs`, kind ``branch``, its id
the episodes' ``run_id``), with progress per branch; refused branches (bad input, a
divergence) are listed in its result with the episode and step, and the job fails when
nothing could be branched at all. The trainer's branch mode (`--branch failing`) plans its
branches with :func:`failing_branches`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from episodelake.collectors.envs.base import Branch, DeviceSpec, ReplayStep, Task
from episodelake.collectors.envs.devices import rerun_device, rerun_envs
from episodelake.collectors.jobs.batch import AgentSpec, RunSettings, run_batch
from episodelake.collectors.jobs.rerun import check_policy, policy_agent
from episodelake.collectors.loop import EpisodeSummary
from episodelake.lake.derive.anchor import DEFAULT_THRESHOLD, phash64
from episodelake.lake.ops.jobs import Job
from episodelake.lake.storage.errors import InvalidInput, NotFound
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.layout import check_id
from episodelake.lake.vocab.seeds import derive

#: A judge step reward below this is "low": `--at failing` branches at the first such step.
LOW_STEP_REWARD = 0.5
#: The tag of every branch episode.
BRANCH_TAG = "branch"
#: What the step rows of a parent must hold to be replayed.
_REPLAY_COLUMNS = ["step", "model_response", "ui_tree_hash", "image_phash", "reward", "step_reward",
                   "step_reward_reason", "prompt", "info"]
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class BranchSpec:
    """What `elake branch` is asked: which parents (ids, a set, a condition over
    `episodes JOIN steps`), at which step (`at`: ``failing`` or a step number), how many
    branches each (`n`), with which policy (as `elake rerun` takes it: oracle, noisy[:P],
    random, model with `model_url` and `model`)."""

    episode_ids: tuple[str, ...] = ()
    set: str | None = None
    where: str | None = None
    at: str = "failing"
    n: int = 3
    policy: str = "random"
    model_url: str | None = None
    model: str | None = None
    #: Steps of a branch's whole trajectory, the replayed ones included.
    max_steps: int = 20
    #: Seeds the branches' agents (each branch's own stream derives from it).
    seed: int = 0
    #: Largest perceptual-hash distance (bits) of a replayed screen from the parent's, where
    #: a step has no UI tree to compare.
    threshold: int = DEFAULT_THRESHOLD
    #: Environment server URLs (parents recorded on env mobileworld).
    servers: tuple[str, ...] = ()
    #: The adb device (parents recorded on env adb; default: the only one attached).
    serial: str | None = None

    def __post_init__(self) -> None:
        if not self.episode_ids and self.set is None and self.where is None:
            raise InvalidInput("choose the episodes to branch: EPISODE_ID, --set NAME or --where SQL")
        if self.episode_ids and (self.set is not None or self.where is not None):
            raise InvalidInput("give episode ids, or --set/--where, not both")
        for episode_id in self.episode_ids:
            check_id(episode_id, "episode_id")
        self.step_number()  # refuses an `at` that is neither
        check_policy(self.policy, (), self.model_url, self.model)
        for name in ("n", "max_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 1000:
                raise InvalidInput(f"{name} must be an integer from 1 to 1000, not {value!r}")
        if not 0 <= self.threshold < 64:
            raise InvalidInput(f"threshold must be 0..63 bits, not {self.threshold!r}")

    def step_number(self) -> int | None:
        """`at` as a step number, None for ``failing``."""
        if self.at == "failing":
            return None
        try:
            step = int(self.at)
        except ValueError:
            raise InvalidInput(f"at: 'failing' or a step number, not {self.at!r}") from None
        if step < 0:
            raise InvalidInput(f"at: a step number is 0 or more, not {step}")
        return step


@dataclass
class BranchReport:
    """What a branch job did: per branch, its parent and step and the episode recorded, or
    why it was refused (the episode and the step named)."""

    branch_id: str
    branches: list[dict] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        recorded = [b for b in self.branches if b.get("episode_id")]
        return {"branch_id": self.branch_id, "branches": self.branches, "refused": self.refused,
                "recorded": len(recorded),
                "successes": sum(1 for b in recorded if b.get("success"))}


# -- the parent ----------------------------------------------------------------------------------
def failing_step(lake: Lake | None, episode_id: str, steps: list[dict], *,
                 set_id: str | None = None) -> int:
    """The parent's failing step: a curator's ``failing_step`` (of `set_id`'s member when
    given; not looked up without `lake`), else the first step whose judge step reward is below
    `LOW_STEP_REWARD`."""
    if lake is not None:
        query = ("SELECT failing_step FROM set_members WHERE episode_id = ? AND failing_step IS NOT NULL "
                 "AND NOT coalesce(removed, false)")
        params: list[Any] = [episode_id]
        if set_id is not None:
            query += " AND set_id = ?"
            params.append(set_id)
        curated = lake.sql(query + " ORDER BY added_at DESC NULLS LAST LIMIT 1", params).to_pylist()
        if curated:
            return int(curated[0]["failing_step"])
    for row in sorted(steps, key=lambda r: r["step"]):
        if row["step_reward"] is not None and row["step_reward"] < LOW_STEP_REWARD:
            return int(row["step"])
    raise InvalidInput(f"episode {episode_id}: no failing step to branch at: no set member names its "
                       f"failing_step and the judge gave no step a reward below {LOW_STEP_REWARD}; "
                       "give the step (--at K)")


def parent_seed(episode: dict) -> int | None:
    """The seed the parent's device was reset with (``extra.seed``), if it recorded one."""
    extra = json.loads(episode["extra"]) if episode.get("extra") else {}
    seed = extra.get("seed") if isinstance(extra, dict) else None
    return int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else None


def replay_steps(lake: Lake | None, episode_id: str, rows: list[dict], at: int) -> tuple[ReplayStep, ...]:
    """The parent's steps 0..`at` as a branch replays them. Refused, naming the episode and the
    step: `at` beyond the recorded steps, a step missing, a step before `at` without a recorded
    action. A step with neither a UI-tree hash nor a perceptual hash gets the perceptual hash of
    its stored screenshot (read from `lake`)."""
    recorded = [r["step"] for r in rows]
    if not rows:
        raise InvalidInput(f"episode {episode_id}: no recorded steps to branch from")
    if at > max(recorded):
        raise InvalidInput(f"episode {episode_id}: step {at} is beyond the episode's recorded steps "
                           f"(0..{max(recorded)}); branch at a step it has")
    by_step = {r["step"]: r for r in rows}
    out = []
    for step in range(at + 1):
        row = by_step.get(step)
        if row is None:
            raise InvalidInput(f"episode {episode_id}: step {step} is not recorded, so the steps before "
                               f"{at} cannot be replayed; branch at step {step} or earlier")
        if step < at and not (row["model_response"] or "").strip():
            raise InvalidInput(f"episode {episode_id}: step {step} has no recorded action to replay; "
                               f"branch at step {step} or earlier")
        phash = row["image_phash"]
        if row["ui_tree_hash"] is None and phash is None:
            if lake is None:
                raise InvalidInput(f"episode {episode_id}: step {step} has neither a UI-tree hash nor a "
                                   "perceptual hash to check the replay against")
            try:
                phash = phash64(lake.image(episode_id, step)[0])
            except NotFound:
                raise InvalidInput(f"episode {episode_id}: step {step} has no UI tree and no screenshot "
                                   "to check the replay against") from None
        out.append(ReplayStep(step, row["model_response"] or "", row["ui_tree_hash"], phash, row["reward"],
                              row["step_reward"], row["step_reward_reason"], row["prompt"], row["info"]))
    return tuple(out)


@dataclass(frozen=True)
class BranchPoint:
    """A parent at step K, ready to branch: its env, task, seed, group and replayed steps."""

    episode_id: str
    step: int
    env: str
    task_name: str
    task_goal: str | None
    seed: int | None
    group_id: str
    steps: tuple[ReplayStep, ...]

    def tasks(self, n: int, seed: int, threshold: int) -> list[Task]:
        """`n` branches of this point, each with its own agent seed."""
        return [Task(self.task_name, self.task_goal, self.group_id, self.seed,
                     Branch(self.episode_id, self.step, self.steps,
                            derive(seed, "branch", self.episode_id, self.step, k), threshold))
                for k in range(n)]


def branch_point(lake: Lake, episode_id: str, at: int | None, *, set_id: str | None = None,
                 max_steps: int | None = None) -> BranchPoint:
    """The parent `episode_id` at step `at` (None: its failing step). Refused, naming the
    episode and the step: an unknown episode, one without a task, on an env that cannot be
    reset to its task (no re-run mapping), steps that cannot be replayed, a branch step the
    step limit leaves no room after."""
    episode = lake.episode(episode_id)
    _check_parent(episode)
    steps = lake.steps(episode_id, columns=_REPLAY_COLUMNS).to_pylist()
    step = failing_step(lake, episode_id, steps, set_id=set_id) if at is None else at
    return _point(lake, episode, steps, step, max_steps)


def _check_parent(episode: dict) -> None:
    episode_id, env = episode["episode_id"], episode.get("env")
    if env not in rerun_envs():
        raise InvalidInput(f"episode {episode_id}: env {env!r} cannot be reset to the episode's task; "
                           f"branches run on {', '.join(rerun_envs())}")
    if not episode.get("task_name"):
        raise InvalidInput(f"episode {episode_id}: no task_name, so there is no task to reset to")


def _point(lake: Lake | None, episode: dict, steps: list[dict], step: int,
           max_steps: int | None = None) -> BranchPoint:
    episode_id = episode["episode_id"]
    replayed = replay_steps(lake, episode_id, steps, step)
    if max_steps is not None and step >= max_steps:
        raise InvalidInput(f"episode {episode_id}: a branch at step {step} needs --max-steps above {step}")
    return BranchPoint(episode_id, step, episode["env"], episode["task_name"], episode.get("task_goal"),
                       parent_seed(episode), episode.get("group_id") or f"{episode_id}.b{step}", replayed)


# -- the job -------------------------------------------------------------------------------------
def new_branch_id() -> str:
    return f"branch-{uuid.uuid4().hex[:12]}"


def run_branches(lake: Lake, spec: BranchSpec, progress: Progress | None = None, *,
                 job: Job | None = None) -> dict:
    """Branch every chosen parent `spec.n` times and return the report (`BranchReport`). The
    job (kind ``branch``; `job` lets a caller that runs it, the API, make it first) reports
    progress per branch and keeps the report's summary as its result."""
    job = job or Job(lake, "branch", job_id=new_branch_id(),
                     params={**asdict(spec), "episode_ids": list(spec.episode_ids),
                             "servers": list(spec.servers)})
    with job.listen(progress).recording():
        report = _branch(lake, spec, job)
        job.result = {k: report[k] for k in ("recorded", "successes")} | {
            "refused": report["refused"][:20], "parents": len({b["parent"] for b in report["branches"]})}
    return report


def _branch(lake: Lake, spec: BranchSpec, job: Job) -> dict:
    from episodelake.lake.export.selection import resolve_set, select_episodes

    report = BranchReport(job.job_id)
    ids = list(spec.episode_ids) or select_episodes(lake, set_name=spec.set, where=spec.where)
    set_id = resolve_set(lake, spec.set)["set_id"] if spec.set is not None else None
    points: list[BranchPoint] = []
    for episode_id in ids:
        try:
            points.append(branch_point(lake, episode_id, spec.step_number(), set_id=set_id,
                                       max_steps=spec.max_steps))
        except (InvalidInput, NotFound) as exc:
            report.refused.append({"parent": episode_id, "step": None, "error": str(exc)})
    envs = sorted({p.env for p in points})
    check_policy(spec.policy, envs, spec.model_url, spec.model)
    total, done = len(points) * spec.n, 0
    job.progress(0, total)
    for env in envs:
        tasks = [task for p in points if p.env == env for task in p.tasks(spec.n, spec.seed, spec.threshold)]

        def finished(summary: EpisodeSummary) -> None:
            nonlocal done
            done += 1
            _account(report, summary)
            job.progress(done, total)

        run_batch(lake, [(device_spec(env, spec), agent_spec(spec))], tasks,
                  settings(job.job_id, env, spec.max_steps, spec.policy), backend="thread",
                  on_episode=finished)
    out = report.to_json()
    if not out["recorded"] and report.refused:
        first = report.refused[0]["error"]
        more = f" (and {len(report.refused) - 1} more refused)" if len(report.refused) > 1 else ""
        raise BranchesRefused(f"nothing was branched: {first}{more}")
    return out


class BranchesRefused(InvalidInput):
    """Every branch of a job was refused (the first refusal is the message)."""


def _account(report: BranchReport, summary: EpisodeSummary) -> None:
    """One branch's outcome into the report (its Task's branch says parent and step)."""
    parent, step = summary.branch_of, summary.branch_step
    if summary.status == "skipped":
        report.refused.append({"parent": parent, "step": step, "error": summary.reason})
        return
    report.branches.append({"parent": parent, "step": step, "episode_id": summary.episode_id,
                            "status": summary.status, "success": summary.success, "steps": summary.steps})


def device_spec(env: str, spec: BranchSpec) -> DeviceSpec:
    """The device of the parents' env, opened as `elake rerun --env` opens it."""
    return rerun_device(env).open(_Target(spec.seed, tuple(spec.servers), spec.serial))


@dataclass(frozen=True)
class _Target:
    seed: int
    servers: tuple[str, ...]
    serial: str | None


def agent_spec(spec: BranchSpec) -> AgentSpec:
    return policy_agent(spec.policy, spec.seed, spec.model_url, spec.model)


def settings(run_id: str, env: str, max_steps: int, policy_version: str | None) -> RunSettings:
    """The branches' run settings: the sim's rule judge scores the steps after K on the sim
    (the replayed ones keep the parent's rewards)."""
    judge = None
    if env == "sim":
        from episodelake.collectors.envs.sim.device import SimJudge

        judge = SimJudge
    return RunSettings(run_id, max_steps=max_steps, tags=(BRANCH_TAG,), policy_version=policy_version,
                       judge=judge)


# -- the trainer's branch mode -------------------------------------------------------------------
@dataclass
class FailingBranches:
    """The branches planned for one iteration's failed episodes, and what could not be."""

    tasks: list[Task] = field(default_factory=list)
    #: Groups with no failed episode to branch (their branch budget goes to fresh rollouts).
    groups_without_failure: list[str] = field(default_factory=list)
    #: Failed episodes that could not be branched, with why.
    unbranched: list[str] = field(default_factory=list)


def failing_branches(lake: Lake, episodes: Sequence[EpisodeSummary], per_group: int, seed: int,
                     *, threshold: int = DEFAULT_THRESHOLD) -> FailingBranches:
    """`per_group` branches for each episode group of `episodes`, from its failed episodes
    (finished, not successful) at their failing steps, dealt round-robin over them in the
    order they were played. A group with no failed episode that can be branched gets none:
    `groups_without_failure` names it, for the caller to spend that budget otherwise."""
    plan = FailingBranches()
    groups: dict[str, list[str]] = {}
    for e in episodes:
        if e.group_id is not None:
            groups.setdefault(e.group_id, [])
            if e.episode_id is not None and e.status == "finished" and e.success is False:
                groups[e.group_id].append(e.episode_id)
    failed = [episode_id for ids in groups.values() for episode_id in ids]
    rows, steps = _parents(lake, failed)
    for group_id, ids in groups.items():
        points = []
        for episode_id in ids:
            try:  # the judge's failing step: a fresh rollout has no curator's
                _check_parent(rows[episode_id])
                at = failing_step(None, episode_id, steps.get(episode_id, []))
                points.append(_point(None, rows[episode_id], steps.get(episode_id, []), at))
            except (InvalidInput, KeyError) as exc:
                plan.unbranched.append(str(exc))
        if not points:
            plan.groups_without_failure.append(group_id)
            continue
        for k in range(per_group):
            point = points[k % len(points)]
            plan.tasks.append(Task(point.task_name, point.task_goal, group_id, point.seed,
                                   Branch(point.episode_id, point.step, point.steps,
                                          derive(seed, "branch", group_id, k), threshold)))
    return plan


def _parents(lake: Lake, ids: list[str]) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """The episodes' rows and their steps' replay columns, in one read of each table."""
    if not ids:
        return {}, {}
    episodes, steps = lake.episode_batch(ids)
    rows = {r["episode_id"]: r for r in episodes.to_pylist()}
    by_episode: dict[str, list[dict]] = {}
    for row in steps.select(["episode_id", *_REPLAY_COLUMNS]).to_pylist():
        by_episode.setdefault(row.pop("episode_id"), []).append(row)
    return rows, by_episode

