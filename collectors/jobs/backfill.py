"""Back-filling step rewards of stored episodes with the VLM step judge (`elake judge`).

`backfill` judges, with a :class:`~episodelake.collectors.agents.judge.StepJudge`, every step
of stored episodes that has a next step (the after screenshot) and no step reward yet,
writing ``step_reward`` and ``step_reward_reason`` back with
:func:`~episodelake.lake.updates.update_columns`, one commit per episode, so an interrupted
run resumes where it stopped. Rewards are stored raw, in {0, 1}: the reference's
division by (steps - 1) is the trainer's business. Last steps are not judged (no after
screenshot); invalid verdicts leave the reward null with the reason, so the next run retries.
A back-fill is a job (kind ``judge``, `episodelake.lake.jobs`): its progress in episodes, its
outcome and the report's counts are recorded whoever started it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

from episodelake.collectors.agents.judge import StepJudge, StepToJudge
from episodelake.lake.errors import InvalidInput, NotFound
from episodelake.lake.jobs import Job
from episodelake.lake.lake import Lake
from episodelake.lake.updates import update_columns


@dataclass
class BackfillReport:
    episodes: int = 0
    judged: int = 0
    invalid: int = 0

    def summary(self) -> str:
        return (f"judged {self.judged} step(s) in {self.episodes} episode(s): "
                f"{self.invalid} invalid answer(s) (left without a reward, retried next run)")


def select_episodes(lake: Lake, *, set_name: str | None = None, where: str | None = None) -> list[str]:
    """Episode ids of a curation set (by name) or of an SQL condition over `episodes`."""
    if (set_name is None) == (where is None):
        raise InvalidInput("choose the episodes with exactly one of --set NAME or --where SQL")
    if set_name is not None:
        found = lake.sql("SELECT set_id FROM sets WHERE name = ? AND NOT coalesce(deleted, false)",
                         [set_name])
        if found.num_rows == 0:
            raise NotFound(f"no set named {set_name!r}; `elake sets` lists them")
        query = ("SELECT DISTINCT episode_id FROM set_members WHERE set_id = ? "
                 "AND NOT coalesce(removed, false) ORDER BY episode_id")
        return lake.sql(query, [found["set_id"][0].as_py()])["episode_id"].to_pylist()
    try:
        rows = lake.sql(f"SELECT episode_id FROM episodes WHERE {where} ORDER BY created_at, episode_id")
    except Exception as exc:  # DuckDB raises many error types for bad SQL
        raise InvalidInput(f"--where: {exc}") from None
    return rows["episode_id"].to_pylist()


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


def backfill(lake: Lake, judge: StepJudge, episode_ids: Sequence[str], *, redo: bool = False,
             progress: bool = True, job: Job | None = None) -> BackfillReport:
    """Judge the steps of `episode_ids` that have no step reward yet (all with `redo`).

    Recorded as `job` (by default a new job of kind ``judge``)."""
    job = job or Job(lake, "judge", params={"episodes": len(episode_ids), "redo": redo,
                                            "model": judge.client.model})
    with job.recording():
        report = _backfill(lake, judge, episode_ids, redo, progress, job)
        job.result = asdict(report)
    return report


def _backfill(lake: Lake, judge: StepJudge, episode_ids: Sequence[str], redo: bool, progress: bool,
              job: Job) -> BackfillReport:
    from tqdm import tqdm

    report = BackfillReport()
    goals = {r["episode_id"]: r["task_goal"] or ""
             for r in lake.sql("SELECT episode_id, task_goal FROM episodes").to_pylist()}
    job.progress(0, len(episode_ids))
    bar = tqdm(episode_ids, unit="episode", desc="judging", disable=not progress)
    for done, episode_id in enumerate(bar, 1):
        goal = goals.get(episode_id)
        if goal is None:
            raise NotFound(f"episode {episode_id!r} is not in the lake")
        updates = []
        for step, item in _steps_to_judge(lake, episode_id, goal, redo):
            verdict = judge.judge(item)
            report.judged += 1
            report.invalid += not verdict.valid
            updates.append({"episode_id": episode_id, "step": step,
                            "step_reward": verdict.reward, "step_reward_reason": verdict.reason})
            bar.set_postfix(steps=report.judged, invalid=report.invalid)
        if updates:
            update_columns(lake, "steps", updates)
            report.episodes += 1
        job.progress(done, len(episode_ids))
    return report
