"""Episode groups (GRPO/GiGPO) and their anchor-state groups, for checking the grouping by eye.

For one group_id: its episodes, and its steps gathered by anchor_key (the key GiGPO groups
steps by), each step with its reward and the discounted return and advantage the trainer
computes for it. Anchors shared by more episodes come first: those are the groups that give
GiGPO a step-level baseline.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Annotated, Any

import duckdb
from fastapi import APIRouter, Query

from episodelake.api.deps import FilterDep, IdPath, LakeDep, SettingsDep
from episodelake.api.listing import where_clause
from episodelake.api.models import GroupDetail, GroupSummary
from episodelake.api.shaping import episode_out, image_url
from episodelake.lake.ops import episode_groups
from episodelake.lake.storage.errors import InvalidInput, NotFound
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.layout import check_id
from episodelake.trainer import advantages

router = APIRouter(tags=["groups"])


def trainer_values(lake: Lake, group_id: str, gamma: float) -> tuple[dict[tuple[str, int], dict], str]:
    """(episode_id, step) -> the trainer's row (advantage, discounted_return), and what they are.

    The trainer's GiGPO query is the definition the training loop uses, so the page shows
    exactly the numbers a training step would see for this group (`elake train`'s default
    knobs, with this gamma). A gamma the trainer refuses for these episodes is refused here
    too, rather than answered with numbers no training step would compute.
    """
    config = advantages.TUNED_ADVANTAGES.replace(gamma=gamma)
    episodes, steps = episode_groups.advantage_inputs(lake, group_id, advantages.EPISODE_COLUMNS,
                                                      advantages.STEP_COLUMNS)
    con = duckdb.connect()
    try:
        result = advantages.compute_advantages(con, config, steps=steps, episodes=episodes)
    except InvalidInput:
        raise  # the trainer's own refusal, kept with its class
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    finally:
        con.close()
    rows = {(r["episode_id"], r["step"]): r for r in result.table.to_pylist()}
    return rows, f"GiGPO advantages and returns with the trainer's defaults ({config.mode}, gamma={gamma:g})"


@router.get("/groups", response_model=list[GroupSummary])
def groups(lake: LakeDep, settings: SettingsDep, filt: FilterDep,
           limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> list[dict]:
    """Episode groups, newest first, with their size, successes and mean reward."""
    where, params = where_clause(lake, filt, timeout_s=settings.sql_timeout_s)
    return episode_groups.group_summaries(lake, where, params, limit)


@router.get("/groups/{group_id}", response_model=GroupDetail)
def group(lake: LakeDep, group_id: IdPath,
          gamma: Annotated[float, Query(ge=0.0, le=1.0, description="discount for the returns")] = 0.95) -> dict:
    check_id(group_id, "group_id")
    episodes = episode_groups.group_episodes(lake, group_id)
    if not episodes:
        raise NotFound(f"group {group_id!r} has no episodes")
    steps = episode_groups.group_steps(lake, group_id)
    trained, note = trainer_values(lake, group_id, gamma)
    anchors: dict[str, list[dict]] = defaultdict(list)
    unanchored = 0
    for s in steps:
        row = trained.get((s["episode_id"], s["step"]), {})
        s.update(discounted_return=row.get("discounted_return"), advantage=row.get("advantage"),
                 image_url=image_url(s["episode_id"], s["step"]))
        if s["anchor_key"] is None:
            unanchored += 1
        else:
            anchors[s["anchor_key"]].append(s)
    rows: list[dict[str, Any]] = [{"anchor_key": key, "episodes": len({s["episode_id"] for s in members}), "steps": members}
            for key, members in anchors.items()]
    rows.sort(key=lambda a: (-a["episodes"], -len(a["steps"]), a["anchor_key"]))
    return {"group_id": group_id, "gamma": gamma, "episodes": [episode_out(e) for e in episodes],
            "anchors": rows, "unanchored_steps": unanchored, "advantages_note": note}
