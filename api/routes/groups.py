"""Episode groups (GRPO/GiGPO) and their anchor-state groups, for checking the grouping by eye.

For one group_id: its episodes, and its steps gathered by anchor_key (the key GiGPO groups
steps by), each step with its reward and discounted return, and its advantage once the
trainer's `episodelake.trainer.advantages` is installed (without it, plain discounted
environment rewards and no advantages, said so in the response). Anchors shared by more episodes
come first: those are the groups that give GiGPO a step-level baseline.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from typing import Annotated

import duckdb
from fastapi import APIRouter, Query

from episodelake.api.deps import FilterDep, LakeDep, SettingsDep
from episodelake.api.listing import where_clause
from episodelake.api.models import GroupDetail, GroupSummary
from episodelake.api.routes.episodes import episode_out, image_url
from episodelake.lake.errors import NotFound
from episodelake.lake.lake import Lake
from episodelake.lake.layout import check_id

router = APIRouter(tags=["groups"])
ADVANTAGES_MODULE = "episodelake.trainer.advantages"
CONFIG_MODULE = "episodelake.trainer.config"


def discounted_returns(rewards: list[float], gamma: float) -> list[float]:
    """R_t = r_t + gamma * R_{t+1}, from the last step back: the fallback without the trainer."""
    out, acc = [0.0] * len(rewards), 0.0
    for i in range(len(rewards) - 1, -1, -1):
        acc = rewards[i] + gamma * acc
        out[i] = acc
    return out


def trainer_values(lake: Lake, group_id: str, gamma: float) -> tuple[dict[tuple[str, int], dict] | None, str]:
    """(episode_id, step) -> the trainer's row (advantage, discounted_return), or None and why.

    The trainer's GiGPO query is the definition the training loop uses, so the page shows
    exactly the numbers a training step would see for this group (`elake train`'s default
    knobs, with this gamma).
    """
    try:
        module = importlib.import_module(ADVANTAGES_MODULE)
        config = importlib.import_module(CONFIG_MODULE).TrainConfig(gamma=gamma)
    except ModuleNotFoundError as exc:
        if exc.name not in (ADVANTAGES_MODULE, CONFIG_MODULE, "episodelake.trainer"):
            raise
        return None, (f"{ADVANTAGES_MODULE} is not installed: returns are plain discounted "
                      "environment rewards and there are no advantages")
    episodes = lake.sql(f"SELECT {', '.join(module.EPISODE_COLUMNS)} FROM episodes WHERE group_id = ?",
                        [group_id])
    steps = lake.sql(f"SELECT {', '.join('s.' + c for c in module.STEP_COLUMNS)} FROM steps s "
                     "JOIN episodes e USING (episode_id) WHERE e.group_id = ?", [group_id])
    con = duckdb.connect()
    try:
        result = module.compute_advantages(con, steps=steps, episodes=episodes,
                                           **config.advantage_options())
    except ValueError as exc:
        return None, f"the trainer could not compute advantages for this group: {exc}"
    finally:
        con.close()
    rows = {(r["episode_id"], r["step"]): r for r in result.table.to_pylist()}
    return rows, (f"GiGPO advantages and returns from {ADVANTAGES_MODULE} with the trainer's "
                  f"defaults ({config.mode}, gamma={gamma:g})")


@router.get("/groups", response_model=list[GroupSummary])
def groups(lake: LakeDep, settings: SettingsDep, filt: FilterDep,
           limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> list[dict]:
    """Episode groups, newest first, with their size, successes and mean reward."""
    where, params = where_clause(lake, filt, timeout_s=settings.sql_timeout_s)
    return lake.sql(f"""
        SELECT group_id, any_value(task_name) AS task_name, count(*) AS episodes,
               count(*) FILTER (WHERE success) AS successes, avg(episode_reward) AS mean_reward
        FROM episodes e WHERE group_id IS NOT NULL AND {where}
        GROUP BY group_id ORDER BY max(created_at) DESC NULLS LAST, group_id LIMIT {int(limit)}
    """, params).to_pylist()


@router.get("/groups/{group_id}", response_model=GroupDetail)
def group(lake: LakeDep, group_id: str,
          gamma: Annotated[float, Query(ge=0.0, le=1.0, description="discount for the returns")] = 0.95) -> dict:
    check_id(group_id, "group_id")
    episodes = lake.sql("SELECT * FROM episodes WHERE group_id = ? ORDER BY episode_id", [group_id]).to_pylist()
    if not episodes:
        raise NotFound(f"group {group_id!r} has no episodes")
    steps = lake.sql("""
        SELECT s.episode_id, s.step, s.anchor_key, s.action_type, s.reward, s.step_reward
        FROM steps s JOIN episodes e USING (episode_id) WHERE e.group_id = ?
        ORDER BY s.episode_id, s.step
    """, [group_id]).to_pylist()
    trained, note = trainer_values(lake, group_id, gamma)
    if trained is None:
        by_episode: dict[str, list[dict]] = defaultdict(list)
        for s in steps:
            by_episode[s["episode_id"]].append(s)
        for rows in by_episode.values():
            for s, ret in zip(rows, discounted_returns([r["reward"] or 0.0 for r in rows], gamma), strict=True):
                s.update(discounted_return=ret, advantage=None)
    anchors: dict[str, list[dict]] = defaultdict(list)
    unanchored = 0
    for s in steps:
        if trained is not None:
            row = trained.get((s["episode_id"], s["step"]), {})
            s.update(discounted_return=row.get("discounted_return"), advantage=row.get("advantage"))
        s["image_url"] = image_url(s["episode_id"], s["step"])
        if s["anchor_key"] is None:
            unanchored += 1
        else:
            anchors[s["anchor_key"]].append(s)
    rows = [{"anchor_key": key, "episodes": len({s["episode_id"] for s in members}), "steps": members}
            for key, members in anchors.items()]
    rows.sort(key=lambda a: (-a["episodes"], -len(a["steps"]), a["anchor_key"]))
    return {"group_id": group_id, "gamma": gamma, "episodes": [episode_out(e) for e in episodes],
            "anchors": rows, "unanchored_steps": unanchored,
            "advantages_available": trained is not None, "advantages_note": note}
