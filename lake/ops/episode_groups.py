"""Episode groups (GRPO/GiGPO: the episodes of one task played together, `group_id`) as the
lake stores them: the groups a filter selects with their outcomes, one group's episodes and
steps, and the rows the trainer's advantage query reads for a group.

A `where` here is a condition over `episodes e` that the caller built with `?` for each of
its `params` (`api.listing.where_clause`), never a person's text."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from episodelake.lake.storage import schema
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.lake import Lake


def group_summaries(lake: Lake, where: str, params: list, limit: int) -> list[dict]:
    """Groups of the episodes meeting `where`, newest first, with their task, size, successes
    and mean reward: the list a person picks a group from to check its grouping by eye."""
    return lake.sql(f"""
        SELECT group_id, any_value(task_name) AS task_name, count(*) AS episodes,
               count(*) FILTER (WHERE success) AS successes, avg(episode_reward) AS mean_reward
        FROM episodes e WHERE group_id IS NOT NULL AND {where}
        GROUP BY group_id ORDER BY max(created_at) DESC NULLS LAST, group_id LIMIT {int(limit)}
    """, params).to_pylist()


def group_episodes(lake: Lake, group_id: str) -> list[dict]:
    """Every episode of a group, by id (empty for a group the lake does not have)."""
    return lake.sql("SELECT * FROM episodes WHERE group_id = ? ORDER BY episode_id", [group_id]).to_pylist()


def group_steps(lake: Lake, group_id: str) -> list[dict]:
    """The steps of a group's episodes with what GiGPO groups and rewards them by (anchor key,
    action type, rewards), in episode and step order."""
    return lake.sql("""
        SELECT s.episode_id, s.step, s.anchor_key, s.action_type, s.reward, s.step_reward
        FROM steps s JOIN episodes e USING (episode_id) WHERE e.group_id = ?
        ORDER BY s.episode_id, s.step
    """, [group_id]).to_pylist()


def advantage_inputs(lake: Lake, group_id: str, episode_columns: Sequence[str],
                     step_columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
    """(episodes, steps) of a group with just the columns the trainer's advantage query reads
    (`trainer.advantages.EPISODE_COLUMNS`, `STEP_COLUMNS`), so a page can show the numbers a
    training step would compute for the group. A column the table lacks is refused."""
    for table, columns in (("episodes", episode_columns), ("steps", step_columns)):
        unknown = sorted(set(columns) - set(schema.columns(table)))
        if unknown:
            raise InvalidInput(f"{table} has no column {', '.join(unknown)}")
    episodes = lake.sql(f"SELECT {', '.join(episode_columns)} FROM episodes WHERE group_id = ?",
                        [group_id])
    steps = lake.sql(f"SELECT {', '.join('s.' + c for c in step_columns)} FROM steps s "
                     "JOIN episodes e USING (episode_id) WHERE e.group_id = ?", [group_id])
    return episodes, steps
