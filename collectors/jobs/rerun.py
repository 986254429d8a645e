"""Regression re-runs: play every task of a set again with a new policy and compare.

A set (typically of failures) is a benchmark: its member episodes say which tasks to run and
how they went before (read at the set's pinned tag when it has one, so the "before" of a set
re-run months later is what it was when the set was curated). `run_rerun` runs each task `n`
times on a device with the new policy, records the new episodes in the lake (``run_id`` = the
re-run's id, tag ``rerun``), and reports per task before/after success, what got fixed and
what broke, and the overall change in success rate with a confidence interval. The report is
stored in the ``runs`` table (kind ``rerun``; ``metrics`` holds the set and, once finished,
the report) so the web app can list re-runs later. Where it stands (status, progress, error,
who) is its job's record (`episodelake.lake.ops.jobs`, same id), as for every long job; re-runs
recorded before jobs were kept their status and error in ``metrics``, which is read for them.

Reading the numbers: a task *passes* when at least half of its judged episodes succeeded;
*fixed* = failed before, passes now; *broke* = passed before, fails now. The overall delta is
after minus before success rate over judged episodes, with Newcombe's hybrid score interval
(built from two Wilson intervals), which stays sensible at 0% and 100%. It treats episodes
as independent; episodes of one task are not, so read a narrow interval over few tasks with
care. For a failure set, "before" is 0% by construction (the episodes were picked because
they failed): the delta says how many of them the new policy fixes, not how it compares with
the old policy on fresh tasks.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from statistics import NormalDist

from episodelake.collectors.envs.base import DeviceSpec, Task
from episodelake.collectors.envs.devices import envs_with_policy, rerun_device, rerun_envs
from episodelake.collectors.jobs.batch import (
    AgentSpec,
    ModelSpec,
    OracleSpec,
    RandomSpec,
    RunSettings,
    run_batch,
)
from episodelake.collectors.loop import EpisodeSummary
from episodelake.lake.export.selection import check_members_present, resolve_set, set_episode_ids
from episodelake.lake.ops.jobs import Job, get_job, list_jobs
from episodelake.lake.storage.errors import InvalidInput, NotFound
from episodelake.lake.storage.lake import Lake

#: The envs a set can be re-run on: one per device with a re-run mapping (`envs.devices`).
ENVS = tuple(rerun_envs())
#: Policies by name; `noisy:P` is the sim's demo policy making a mistake (wrong tap, wrong
#: app, early stop, loop) with probability P per step (default 0.3).
POLICIES = ("oracle", "noisy", "random", "model")
RERUN_TAG = "rerun"
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class RerunSpec:
    #: The set's name or id.
    set: str
    #: oracle | noisy[:P] | random | model (with `model_url` and `model`).
    policy: str
    env: str = "sim"
    #: Episodes per task.
    n: int = 3
    max_steps: int = 20
    #: Seeds the sim phone and the demo policies' randomness.
    seed: int = 0
    confidence: float = 0.95
    model_url: str | None = None
    model: str | None = None
    #: Environment server URLs (env mobileworld).
    servers: tuple[str, ...] = ()
    #: The adb device (env adb; default: the only one attached).
    serial: str | None = None

    def __post_init__(self) -> None:
        device = rerun_device(self.env)
        check_policy(self.policy, (self.env,), self.model_url, self.model)
        if device.check is not None:
            device.check(self)
        for name in ("n", "max_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 1000:
                raise InvalidInput(f"{name} must be an integer from 1 to 1000, not {value!r}")
        if not 0 < self.confidence < 1:
            raise InvalidInput(f"confidence must be in (0, 1), not {self.confidence!r}")

    @property
    def noise(self) -> float:
        return policy_noise(self.policy)


def policy_noise(policy: str) -> float:
    """The share of mistakes of `noisy:P` (0.3 for a bare `noisy`)."""
    _, _, share = policy.partition(":")
    try:
        return float(share) if share else 0.3
    except ValueError:
        raise InvalidInput(f"policy: {policy!r} is not noisy:P with a number P") from None


def check_policy(policy: str, envs: Sequence[str], model_url: str | None, model: str | None) -> None:
    """Refuse a policy (`POLICIES`) that cannot run on every env of `envs` or lacks its model."""
    kind = policy.split(":", 1)[0]
    if kind not in POLICIES:
        raise InvalidInput(f"policy must be one of {', '.join(POLICIES)} (noisy:P for a share P of "
                           f"mistakes per step), not {policy!r}")
    if kind in ("oracle", "noisy") and any(env not in envs_with_policy("oracle") for env in envs):
        raise InvalidInput(f"policy {kind!r} plays the simulated phone's oracle: use it with env "
                           f"{' or '.join(envs_with_policy('oracle'))}")
    if kind == "noisy" and not 0 <= policy_noise(policy) <= 1:
        raise InvalidInput(f"policy: the noise share of {policy!r} must be in [0, 1]")
    if kind == "model" and not (model_url and model):
        raise InvalidInput("policy model needs model_url (--model-url http://host:8000/v1) and model (--model NAME)")


# -- statistics ----------------------------------------------------------------------------------
def wilson(successes: int, n: int, z: float) -> tuple[float, float]:
    """Wilson score interval of a proportion; (0, 1) when there is no observation."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(after: tuple[int, int], before: tuple[int, int], confidence: float) -> tuple[float, float]:
    """Newcombe's hybrid score interval for (after rate - before rate), independent samples.

    `after` and `before` are (successes, episodes).
    """
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    (k1, n1), (k2, n2) = after, before
    p1 = k1 / n1 if n1 else 0.0
    p2 = k2 / n2 if n2 else 0.0
    l1, u1 = wilson(k1, n1, z)
    l2, u2 = wilson(k2, n2, z)
    d = p1 - p2
    return (d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2),
            d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))


# -- the report ----------------------------------------------------------------------------------
@dataclass
class Outcome:
    """Success counts of a group of episodes; `unjudged` ones (no verdict) are left out of the rate."""

    episodes: int = 0
    successes: int = 0
    unjudged: int = 0

    def add(self, success: bool | None) -> None:
        self.episodes += 1
        if success is None:
            self.unjudged += 1
        elif success:
            self.successes += 1

    @property
    def judged(self) -> int:
        return self.episodes - self.unjudged

    @property
    def rate(self) -> float | None:
        return self.successes / self.judged if self.judged else None

    @property
    def passes(self) -> bool | None:
        return None if self.rate is None else self.rate >= 0.5

    def to_json(self) -> dict:
        return {**asdict(self), "rate": self.rate}


@dataclass
class TaskResult:
    task: str
    goal: str
    before: Outcome = field(default_factory=Outcome)
    after: Outcome = field(default_factory=Outcome)
    episode_ids: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        """fixed | broke | still passing | still failing | unknown (no judged episode)."""
        before, after = self.before.passes, self.after.passes
        if before is None or after is None:
            return "unknown"
        if before == after:
            return "still passing" if after else "still failing"
        return "fixed" if after else "broke"

    def to_json(self) -> dict:
        return {"task": self.task, "goal": self.goal, "status": self.status,
                "before": self.before.to_json(), "after": self.after.to_json(),
                "episode_ids": self.episode_ids}


@dataclass
class RerunReport:
    rerun_id: str
    set: dict
    spec: dict
    tasks: list[TaskResult]

    def totals(self, which: str) -> Outcome:
        out = Outcome()
        for t in self.tasks:
            part = getattr(t, which)
            out.episodes += part.episodes
            out.successes += part.successes
            out.unjudged += part.unjudged
        return out

    def to_json(self) -> dict:
        before, after = self.totals("before"), self.totals("after")
        delta = None if before.rate is None or after.rate is None else after.rate - before.rate
        low, high = newcombe((after.successes, after.judged), (before.successes, before.judged),
                             self.spec["confidence"])
        return {
            "rerun_id": self.rerun_id,
            "set": self.set,
            "spec": self.spec,
            "tasks": [t.to_json() for t in self.tasks],
            "before": before.to_json(),
            "after": after.to_json(),
            "delta": delta,
            "interval": None if delta is None else [low, high],
            "confidence": self.spec["confidence"],
            "interval_method": "newcombe-wilson",
            "fixed": [t.task for t in self.tasks if t.status == "fixed"],
            "broke": [t.task for t in self.tasks if t.status == "broke"],
        }


def render(report: dict) -> str:
    """The report as a plain-text table for terminals."""
    def frac(o: dict) -> str:
        extra = f" (+{o['unjudged']} unjudged)" if o["unjudged"] else ""
        return f"{o['successes']}/{o['episodes'] - o['unjudged']}{extra}"

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.0f}%"

    spec = report["spec"]
    rows = [("task", "before", "after", "status")]
    rows += [(t["task"], frac(t["before"]), frac(t["after"]), t["status"]) for t in report["tasks"]]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"re-run {report['rerun_id']} of set {report['set']['name']!r}: {len(report['tasks'])} task(s) "
             f"x {spec['n']}, policy {spec['policy']}, env {spec['env']}", ""]
    for i, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    b, a = report["before"], report["after"]
    lines.append("")
    lines.append(f"success before {frac(b)} ({pct(b['rate'])}), after {frac(a)} ({pct(a['rate'])})")
    if report["delta"] is not None:
        lo, hi = report["interval"]
        lines.append(f"delta {100 * report['delta']:+.1f} points, {100 * report['confidence']:.0f}% interval "
                     f"[{100 * lo:+.1f}, {100 * hi:+.1f}] ({report['interval_method']})")
    lines.append(f"fixed {len(report['fixed'])}, broke {len(report['broke'])}")
    return "\n".join(lines)


# -- devices and agents --------------------------------------------------------------------------
def device_spec(spec: RerunSpec) -> DeviceSpec:
    """The device the spec's env names, as the batch runner opens it."""
    return rerun_device(spec.env).open(spec)


def agent_spec(spec: RerunSpec) -> AgentSpec:
    """The agent the spec's `policy` names, as the batch runner opens it."""
    return policy_agent(spec.policy, spec.seed, spec.model_url, spec.model)


def policy_agent(policy: str, seed: int, model_url: str | None, model: str | None) -> AgentSpec:
    """The agent a checked `policy` names (`check_policy`), as the batch runner opens it."""
    kind = policy.split(":", 1)[0]
    if kind == "oracle":
        return OracleSpec(seed=seed)
    if kind == "noisy":
        from episodelake.collectors.agents.oracle import NoiseConfig

        return OracleSpec(NoiseConfig.demo().scaled(policy_noise(policy)), seed)
    if kind == "random":
        return RandomSpec(seed)
    return ModelSpec(model_url or "", model or "")


# -- the job -------------------------------------------------------------------------------------
def _before(lake: Lake, spec: RerunSpec) -> tuple[dict, list[TaskResult]]:
    """The set and, per task, how its member episodes went (at the set's pinned tag)."""
    set_row = resolve_set(lake, spec.set)
    ids = set_episode_ids(lake, set_row)
    tag = set_row["pinned_tag"]
    source = lake.at(tag) if tag else lake
    check_members_present(source, set_row, ids, tag)
    rows = source.sql("SELECT episode_id, task_name, task_goal, success FROM episodes "
                      "WHERE list_contains(?, episode_id) ORDER BY task_name, episode_id", [ids]).to_pylist()
    nameless = [r["episode_id"] for r in rows if not r["task_name"]]
    if nameless:
        raise InvalidInput(f"set {set_row['name']!r}: episode(s) {', '.join(nameless[:5])} have no task_name, "
                           "so there is no task to run again; remove them from the set")
    tasks: dict[str, TaskResult] = {}
    for r in rows:
        result = tasks.setdefault(r["task_name"], TaskResult(r["task_name"], r["task_goal"] or ""))
        result.before.add(r["success"])
    info = {k: set_row[k] for k in ("set_id", "name", "kind", "pinned_tag")}
    return info, list(tasks.values())


def _record_run(lake: Lake, rerun_id: str, started: datetime, spec: dict, metrics: dict) -> None:
    lake.upsert("runs", [{"run_id": rerun_id, "iteration": 0, "kind": "rerun",
                          "config": json.dumps(spec, sort_keys=True),
                          "metrics": json.dumps(metrics, sort_keys=True), "created_at": started}])


def new_rerun_id() -> str:
    return f"rerun-{uuid.uuid4().hex[:12]}"


def run_rerun(lake: Lake, spec: RerunSpec, progress: Progress | None = None, *,
              job: Job | None = None) -> dict:
    """Re-run the set's tasks and return the report (also stored in ``runs``).

    `progress(done, total)` is called once with done = 0 when the set's tasks are resolved
    and the re-run is recorded as running, then after each episode. The re-run is a job
    whose id is the re-run's: `job` lets a caller that runs it (the API) make it first; by
    default a new one is made.
    """
    job = job or Job(lake, "rerun", job_id=new_rerun_id(),
                     params={**asdict(spec), "servers": list(spec.servers)})
    with job.listen(progress).recording():
        report = _rerun(lake, spec, job)
        job.result = {k: report[k] for k in ("delta", "interval")} | {
            "before": report["before"]["rate"], "after": report["after"]["rate"],
            "fixed": len(report["fixed"]), "broke": len(report["broke"])}
    return report


def _rerun(lake: Lake, spec: RerunSpec, job: Job) -> dict:
    set_info, tasks = _before(lake, spec)
    _check_tasks(spec.env, set_info, tasks)
    rerun_id = job.job_id
    started = datetime.now(UTC)
    recorded = {**asdict(spec), "servers": list(spec.servers), "set_id": set_info["set_id"]}
    _record_run(lake, rerun_id, started, recorded, {"set": set_info})
    by_task = {result.task: result for result in tasks}
    episodes = [Task(result.task, result.goal or None, f"{rerun_id}.g{index}" if spec.n > 1 else None)
                for index, result in enumerate(tasks) for _ in range(spec.n)]
    total, done = len(episodes), 0
    job.progress(0, total)

    def finished(summary: EpisodeSummary) -> None:
        nonlocal done
        result = by_task[summary.task_name]
        # a task that could not start (skipped) or an aborted episode counts as unjudged
        result.after.add(summary.success if summary.status == "finished" else None)
        if summary.episode_id:
            result.episode_ids.append(summary.episode_id)
        done += 1
        job.progress(done, total)

    settings = RunSettings(rerun_id, max_steps=spec.max_steps, tags=(RERUN_TAG,),
                           policy_version=spec.policy)
    run_batch(lake, [(device_spec(spec), agent_spec(spec))], episodes, settings,
              backend="thread", on_episode=finished)
    report = RerunReport(rerun_id, set_info, recorded, tasks).to_json()
    _record_run(lake, rerun_id, started, recorded, report)
    return report


def _check_tasks(env: str, set_info: dict, tasks: list[TaskResult]) -> None:
    """Refuse a set whose tasks the env's device does not know (where it has a registry)."""
    unknown_tasks = rerun_device(env).unknown_tasks
    unknown = unknown_tasks([t.task for t in tasks]) if unknown_tasks is not None else []
    if unknown:
        raise InvalidInput(f"set {set_info['name']!r}: task(s) {', '.join(unknown[:5])} are not tasks of the "
                           f"{env} env; re-run the set on the env its episodes came from (--env)")


# -- reading re-runs back ------------------------------------------------------------------------
def rerun_state(metrics: dict, job: dict | None) -> dict:
    """A re-run's status, progress and error: from its job (`done` reads `finished`, the
    re-run's word), else, for a re-run recorded before jobs were, from its ``metrics``."""
    if job is not None:
        status = "finished" if job["status"] == "done" else job["status"]
        return {"status": status, "progress": job["progress"], "error": job["error"]}
    error = metrics.get("error")  # recorded as "Type: message"
    if isinstance(error, str):
        kind, _, message = error.partition(": ")
        error = {"type": kind, "message": message or kind}
    return {"status": metrics.get("status"), "progress": None, "error": error}


def list_reruns(lake: Lake, jobs: dict[str, dict] | None = None) -> list[dict]:
    """Every re-run, newest first: id, set, policy, status and the headline numbers (success
    rates before and after, their delta and its interval, how many tasks got fixed or broke).

    `jobs` (job id -> job, as `lake.jobs` shows them) lets a caller with fresher jobs (the
    server's live progress) pass them; by default they are read from the lake."""
    if jobs is None:
        jobs = {j["job_id"]: j for j in list_jobs(lake, kind="rerun", limit=None)}
    out = []
    for row in lake.sql("SELECT run_id, config, metrics, created_at FROM runs WHERE kind = 'rerun' "
                        "ORDER BY created_at DESC, run_id").to_pylist():
        config, metrics = json.loads(row["config"] or "{}"), json.loads(row["metrics"] or "{}")
        out.append({"rerun_id": row["run_id"], "created_at": row["created_at"],
                    **rerun_state(metrics, jobs.get(row["run_id"])),
                    "set": metrics.get("set"), "policy": config.get("policy"), "env": config.get("env"),
                    "n": config.get("n"), "before": (metrics.get("before") or {}).get("rate"),
                    "after": (metrics.get("after") or {}).get("rate"), "delta": metrics.get("delta"),
                    "interval": metrics.get("interval"),
                    "fixed": len(metrics.get("fixed", [])), "broke": len(metrics.get("broke", []))})
    return out


def get_rerun(lake: Lake, rerun_id: str, job: dict | None = None) -> dict:
    """One re-run's stored report with its status, progress and error (`rerun_state`; by
    default its job is read from the lake). A running or failed re-run has no numbers yet."""
    rows = lake.sql("SELECT metrics FROM runs WHERE kind = 'rerun' AND run_id = ?", [rerun_id]).to_pylist()
    if not rows:
        raise NotFound(f"no re-run {rerun_id!r}; `elake rerun --list` shows them")
    metrics = json.loads(rows[0]["metrics"] or "{}")
    job = job if job is not None else get_job(lake, rerun_id)
    return {**metrics, **rerun_state(metrics, job)}
