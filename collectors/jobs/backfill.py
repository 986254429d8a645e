"""Back-filling step rewards of stored episodes with the VLM step judge (`elake judge`).

`backfill` judges, with a :class:`~episodelake.collectors.agents.judge.StepJudge`, every step
of stored episodes that has a next step (the after screenshot) and no step reward yet,
writing ``step_reward`` and ``step_reward_reason`` back with
:func:`~episodelake.lake.ops.updates.update_columns`, one commit per episode, so an interrupted
run resumes where it stopped. Rewards are stored raw, in {0, 1}: the reference's
division by (steps - 1) is the trainer's business. Last steps are not judged (no after
screenshot); invalid verdicts leave the reward null with the reason, so the next run retries.
A back-fill is a job (kind ``judge``, `episodelake.lake.ops.jobs`): its progress in episodes, its
outcome and the report's counts are recorded whoever started it.

With `RayOptions` the judging (reading screenshots, asking the model) runs as Ray tasks, a
chunk of episodes each (`bulk.run_parts`), and this process writes each episode's rewards
in order through `update_columns`, so both paths share every line of the work and store the
same rows. A task rebuilds the judge from a `JudgeSpec`: the model's URL, name, options and
attempts, and the *name* of the variable holding the API key, read inside the task (so the
key never travels; a worker node needs the variable set). The verdict cache stays with this
process: the verdicts it holds when the job starts travel once to the tasks, and the tasks'
new verdicts come back with their rewards and are added here, so a SQLite cache file need
not be shared by the nodes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from episodelake.collectors.agents.judge import JudgeCache, StepJudge, StepToJudge, Verdict
from episodelake.collectors.agents.model_client import ModelClient, ModelOptions
from episodelake.collectors.jobs.bulk import RayOptions, chunks, run_parts
from episodelake.lake.ops.jobs import Job
from episodelake.lake.ops.updates import update_columns
from episodelake.lake.storage.errors import NotFound
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.store import Location

#: Episodes per Ray task: enough to amortise opening the lake and the client in the task.
EPISODES_PER_TASK = 4


@dataclass
class BackfillReport:
    episodes: int = 0
    judged: int = 0
    invalid: int = 0

    def summary(self) -> str:
        return (f"judged {self.judged} step(s) in {self.episodes} episode(s): "
                f"{self.invalid} invalid answer(s) (left without a reward, retried next run)")


def _steps_to_judge(lake: Lake, episode_id: str, goal: str, redo: bool) -> Iterator[tuple[int, StepToJudge]]:
    rows = lake.steps(episode_id, ["step", "model_response", "action_type", "action", "x", "y",
                                   "x2", "y2", "step_reward"]).to_pylist()
    wanted = {r["step"] for r in rows[:-1] if redo or r["step_reward"] is None}
    if not wanted:
        return
    images = dict(lake.images(episode_id))
    for index, row in enumerate(rows[:-1]):
        step = row["step"]
        if step not in wanted or step + 1 not in images or step not in images:
            continue
        history = [r["model_response"] or "" for r in reversed(rows[:index])]
        yield step, StepToJudge(
            goal, images[step], images[step + 1], row["model_response"] or "", row["action_type"],
            row["action"], row["x"], row["y"], row["x2"], row["y2"], history)


@dataclass(frozen=True)
class JudgeSpec:
    """A step judge as a Ray task rebuilds it: everything but the API key (read from the
    variable `api_key_env` where the task runs) and the open cache (`verdicts`: the valid
    verdicts known when the job started)."""

    model_url: str
    model: str
    api_key_env: str | None = "OPENAI_API_KEY"
    attempts: int = 3
    temperature: float = 0.1
    options: ModelOptions = field(default_factory=ModelOptions)
    verdicts: Mapping[str, Verdict] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, judge: StepJudge, api_key_env: str | None) -> JudgeSpec:
        return cls(judge.client.url, judge.client.model, api_key_env, judge.attempts,
                   judge.temperature, judge.client.options, judge.cache.verdicts())

    def open(self) -> StepJudge:
        api_key = os.environ.get(self.api_key_env) if self.api_key_env else None
        cache = JudgeCache()
        for key, verdict in self.verdicts.items():
            cache.put(key, verdict)
        return StepJudge(ModelClient(self.model_url, self.model, api_key=api_key, options=self.options),
                         attempts=self.attempts, cache=cache, temperature=self.temperature)


@dataclass
class JudgedEpisode:
    """One episode's new rewards (rows for `update_columns`) and the verdicts behind them."""

    episode_id: str
    updates: list[dict]
    verdicts: dict[str, Verdict]
    invalid: int


def judge_episodes(episodes: Sequence[tuple[str, str]], source: Lake | Location, judge: StepJudge | JudgeSpec,
                   redo: bool) -> list[JudgedEpisode]:
    """Judge the steps of (episode id, goal) pairs: the work of one part, here or in a Ray
    task (which opens the lake from its location and the judge from its spec)."""
    lake = source if isinstance(source, Lake) else Lake(source, create=False)
    step_judge = judge if isinstance(judge, StepJudge) else judge.open()
    out = []
    try:
        for episode_id, goal in episodes:
            done = JudgedEpisode(episode_id, [], {}, 0)
            for step, item in _steps_to_judge(lake, episode_id, goal, redo):
                verdict = step_judge.judge(item)
                done.invalid += not verdict.valid
                if verdict.valid:
                    done.verdicts[item.cache_key(step_judge.client.model)] = verdict
                done.updates.append({"episode_id": episode_id, "step": step,
                                     "step_reward": verdict.reward, "step_reward_reason": verdict.reason})
            out.append(done)
    finally:
        if step_judge is not judge:
            step_judge.client.close()
    return out


def backfill(lake: Lake, judge: StepJudge, episode_ids: Sequence[str], *, redo: bool = False,
             progress: bool = True, job: Job | None = None, ray: RayOptions | None = None,
             api_key_env: str | None = "OPENAI_API_KEY") -> BackfillReport:
    """Judge the steps of `episode_ids` that have no step reward yet (all with `redo`), in
    this process or (`ray`) as Ray tasks whose judge reads its key from `api_key_env`.

    Recorded as `job` (by default a new job of kind ``judge``)."""
    job = job or Job(lake, "judge", params={"episodes": len(episode_ids), "redo": redo,
                                            "model": judge.client.model})
    with job.recording():
        report = _backfill(lake, judge, episode_ids, redo, progress, job, ray, api_key_env)
        job.result = asdict(report)
    return report


def _backfill(lake: Lake, judge: StepJudge, episode_ids: Sequence[str], redo: bool, progress: bool,
              job: Job, ray: RayOptions | None, api_key_env: str | None) -> BackfillReport:
    from tqdm import tqdm

    goals = {r["episode_id"]: r["task_goal"] or ""
             for r in lake.sql("SELECT episode_id, task_goal FROM episodes").to_pylist()}
    missing = [e for e in episode_ids if e not in goals]
    if missing:
        raise NotFound(f"episode {missing[0]!r} is not in the lake")
    pairs = [(episode_id, goals[episode_id]) for episode_id in episode_ids]
    on_ray = ray is not None and ray.enabled
    # here: one episode a part, the lake and judge as they are; on Ray: what can travel
    parts = chunks(pairs, EPISODES_PER_TASK if on_ray else 1)
    shared = (lake.location, JudgeSpec.of(judge, api_key_env)) if on_ray else (lake, judge)
    report = BackfillReport()
    job.progress(0, len(episode_ids))
    bar = tqdm(total=len(episode_ids), unit="episode", desc="judging", disable=not progress)
    done = 0
    try:
        for part in run_parts(judge_episodes, parts, *shared, redo, ray=ray):
            for episode in part:
                done += 1
                if on_ray:
                    for key, verdict in episode.verdicts.items():
                        judge.cache.put(key, verdict)
                if episode.updates:
                    update_columns(lake, "steps", episode.updates)
                    report.episodes += 1
                report.judged += len(episode.updates)
                report.invalid += episode.invalid
                bar.update(1)
                bar.set_postfix(steps=report.judged, invalid=report.invalid)
                job.progress(done, len(episode_ids))
    finally:
        bar.close()
    return report
