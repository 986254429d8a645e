"""Reads of stored episodes and steps that the API's pages ask for: one step's full row, where
the episodes of a list of steps come from, an episode's branches, the ids a filter selects.

Each is one query over the lake's tables (`Lake.sql`, trusted SQL: the values are always
parameters; a `where` is a condition the caller built from its own clauses, never a
person's text, which goes through `Lake.matching`'s sandbox first)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from episodelake.lake.storage.errors import NotFound
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.layout import check_id
from episodelake.lake.storage.sql import sql_in

#: The columns that name an episode's branches: its parent (`branch_of`) or the branch job
#: that recorded it (`run_id`, the job id).
BranchColumn = Literal["branch_of", "run_id"]


def step_row(lake: Lake, episode_id: str, step: int) -> dict:
    """Step `step` of an episode, every column but the image bytes (the SQL views leave them
    out; prompt, OCR text and boxes are in), for the step page, its annotated screenshot and
    its redaction preview. A missing episode is a NotFound naming the episode, a missing
    step one naming the step."""
    check_id(episode_id, "episode_id")
    rows = lake.sql("SELECT * FROM steps WHERE episode_id = ? AND step = ?", [episode_id, step]).to_pylist()
    if not rows:
        lake.episode(episode_id)  # a missing episode says so, rather than "no step"
        raise NotFound(f"episode {episode_id!r} has no step {step}")
    return rows[0]


def episode_context(lake: Lake, episode_ids: Iterable[str]) -> dict[str, dict]:
    """Task, run and policy version of each episode, for results that list steps of many
    episodes (search hits, similar screens) so a reader sees where each one comes from."""
    ids = sorted(set(episode_ids))
    table = lake.sql("SELECT episode_id, task_name, run_id, policy_version FROM episodes WHERE "
                     + sql_in("episode_id", ids))
    return {row.pop("episode_id"): row for row in table.to_pylist()}


def branches_of(lake: Lake, column: BranchColumn, value: str) -> list[dict]:
    """Episodes whose `column` (branch_of: an episode's branches; run_id: those a branch job
    recorded) is `value`, by branch step, oldest first: the replay page lists them under the
    parent, a branch job's page under the job."""
    return lake.sql(f"SELECT * FROM episodes WHERE {column} = ? AND branch_of IS NOT NULL "
                    "ORDER BY branch_step, created_at, episode_id", [value]).to_pylist()


def episode_ids_where(lake: Lake, where: str, params: list) -> list[str]:
    """The ids of the episodes (`episodes e`) meeting `where`, in id order: what a filter
    files into a set at once. `where` is a condition the caller built with `?` for each of
    `params` (`api.listing.where_clause`), never a person's text."""
    return [r["episode_id"] for r in lake.sql(f"SELECT e.episode_id FROM episodes e WHERE {where} "
                                              "ORDER BY e.episode_id", params).to_pylist()]
