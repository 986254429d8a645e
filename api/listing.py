"""Episode filters, sorting and cursor pagination, as parameterised SQL over `episodes`.

The same `EpisodeFilter` narrows the episodes list, the task tree and the stats, so the
left panel, the list and the charts always agree. Values travel as query parameters,
never spliced into SQL; the one exception is `where`, a caller's SQL fragment, which runs
alone through the lake's sandbox first (one SELECT, no file access, time limit) and comes
back as a list of episode ids.

Pagination is keyset-based: the cursor encodes the last row's sort value and episode_id,
so a page costs the same at any depth and rows added meanwhile do not shift pages.
NULL sort values come last in either direction.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime

from pydantic import ConfigDict, Field, field_validator

from episodelake.lake.storage.errors import InvalidInput, NotFound
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.layout import check_id
from episodelake.lake.vocab.spec_model import SpecModel

#: Sortable columns and the SQL type their cursor value is cast back to.
SORTS = {
    "created_at": "TIMESTAMPTZ",
    "finished_at": "TIMESTAMPTZ",
    "episode_length": "INTEGER",
    "episode_reward": "DOUBLE",
    "eval_score": "DOUBLE",
    "task_name": "VARCHAR",
    "policy_version": "VARCHAR",
    "episode_id": "VARCHAR",
}
#: The sandbox caps rows; a WHERE fragment may match every episode, so its cap is high.
WHERE_MAX_EPISODES = 10_000_000


class EpisodeFilter(SpecModel):
    """Which episodes a view shows. The API takes it as query parameters (its OpenAPI
    document lists these fields); every field set narrows the selection (AND). Other query
    parameters (a route's own, such as `sort`) are not the filter's: it ignores them."""

    model_config = ConfigDict(frozen=True)

    task: str | None = Field(None, max_length=500, description="task_name")
    success: bool | None = Field(None, description="judged outcome")
    unjudged: bool = Field(False, description="only episodes not judged yet")
    run_id: str | None = Field(None, max_length=200, description="the run that recorded it")
    policy_version: str | None = Field(None, max_length=200, description="the checkpoint that acted")
    group_id: str | None = Field(None, max_length=200, description="its GRPO/GiGPO episode group")
    env: str | None = Field(None, max_length=200, description="where it ran: sim, adb, ...")
    tag: str | None = Field(None, max_length=200, description="one of the episode's tags")
    set_id: str | None = Field(None, max_length=200, description="member of this set")
    zero_step_reward: bool = Field(False, description="some step has step_reward = 0")
    min_length: int | None = Field(None, ge=0, le=1_000_000, description="at least this many steps")
    max_length: int | None = Field(None, ge=0, le=1_000_000, description="at most this many steps")
    where: str | None = Field(None, max_length=4000, description="SQL condition over episodes "
                              "columns, run in the sandbox")
    search: str | None = Field(None, max_length=200, description="episode_id starts with it, or "
                               "task_name or task_goal contains it (case-insensitive)")

    @field_validator("search")
    @classmethod
    def _search(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @field_validator("set_id")
    @classmethod
    def _set_id(cls, value: str | None) -> str | None:
        return value if value is None else check_id(value, "set_id")


def _equals(column: str):
    return lambda v: (f"e.{column} = ?", [v])


def _like_text(text: str) -> str:
    """`text` as a literal inside an ILIKE pattern (its % and _ match only themselves)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _search(text: str) -> tuple[str, list]:
    prefix, within = f"{_like_text(text)}%", f"%{_like_text(text)}%"
    return ("(e.episode_id ILIKE ? ESCAPE '\\' OR e.task_name ILIKE ? ESCAPE '\\' "
            "OR e.task_goal ILIKE ? ESCAPE '\\')", [prefix, within, within])


_CLAUSES = {
    "task": _equals("task_name"),
    "success": _equals("success"),
    "unjudged": lambda v: ("e.success IS NULL", []) if v else None,
    "run_id": _equals("run_id"),
    "policy_version": _equals("policy_version"),
    "group_id": _equals("group_id"),
    "env": _equals("env"),
    "tag": lambda v: ("list_contains(e.tags, ?)", [v]),
    "set_id": lambda v: ("e.episode_id IN (SELECT episode_id FROM set_members "
                         "WHERE set_id = ? AND NOT coalesce(removed, false))", [v]),
    "zero_step_reward": lambda v: ("e.episode_id IN (SELECT episode_id FROM steps "
                                   "WHERE step_reward = 0)", []) if v else None,
    "min_length": lambda v: ("e.episode_length >= ?", [v]),
    "max_length": lambda v: ("e.episode_length <= ?", [v]),
    "search": _search,
}


def where_clause(lake: Lake, filt: EpisodeFilter, *, timeout_s: float) -> tuple[str, list]:
    """SQL text (`TRUE` when nothing filters) and its parameters, for `episodes e`."""
    parts, params = [], []
    for name in type(filt).model_fields:
        value = getattr(filt, name)
        if value is None or name == "where":
            continue
        clause = _CLAUSES[name](value)
        if clause:
            parts.append(clause[0])
            params += clause[1]
    if filt.where is not None and filt.where.strip():
        ids = matching_ids(lake, filt.where, timeout_s=timeout_s)
        parts.append("e.episode_id IN (SELECT unnest(?::VARCHAR[]))")
        params.append(ids)
    return (" AND ".join(parts) or "TRUE"), params


def matching_ids(lake: Lake, fragment: str, *, timeout_s: float) -> list[str]:
    """Episode ids matching a caller's condition (`where`), checked and run in the sandbox
    (`Lake.matching`)."""
    table = lake.matching("SELECT episode_id FROM episodes", fragment, flag="where", timeout_s=timeout_s)
    if table.num_rows > WHERE_MAX_EPISODES:
        raise InvalidInput(f"where: matches {table.num_rows:,} episodes, more than a list filters "
                           f"({WHERE_MAX_EPISODES:,}); narrow the condition")
    return table.column(0).to_pylist()


def encode_cursor(value: object, episode_id: str) -> str:
    if isinstance(value, datetime):
        value = value.isoformat()
    raw = json.dumps([value, episode_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[object, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value, episode_id = json.loads(raw)
    except (ValueError, TypeError) as exc:
        raise InvalidInput(f"cursor is not one this server issued ({exc})") from None
    if not isinstance(episode_id, str) or isinstance(value, dict | list):
        raise InvalidInput("cursor is not one this server issued")
    return value, episode_id


def _keyset(sort: str, descending: bool, cursor: str, *, after: bool) -> tuple[str, list]:
    """The keyset condition 'comes after (or before) the cursor' for ORDER BY sort NULLS LAST,
    episode_id: the list's next page, or an episode's position in it."""
    value, last_id = decode_cursor(cursor)
    cmp = "<" if descending == after else ">"
    if value is None:  # the cursor is among the NULLs, which come last
        nulls = f"e.{sort} IS NULL AND" if after else f"e.{sort} IS NOT NULL OR"
        return f"({nulls} e.episode_id {cmp} ?)", [last_id]
    cast = f"CAST(? AS {SORTS[sort]})"
    nulls = f"e.{sort} IS NULL OR " if after else ""
    return (f"({nulls}e.{sort} {cmp} {cast} OR (e.{sort} = {cast} AND e.episode_id {cmp} ?))",
            [value, value, last_id])


def list_episodes(lake: Lake, filt: EpisodeFilter, *, sort: str, descending: bool, limit: int,
                  cursor: str | None, timeout_s: float) -> tuple[list[dict], str | None, int | None]:
    """One page of episodes: (rows, next cursor or None, total on the first page)."""
    if sort not in SORTS:
        raise InvalidInput(f"sort must be one of {', '.join(SORTS)}, not {sort!r}")
    where, params = where_clause(lake, filt, timeout_s=timeout_s)
    total = None
    if cursor is None:
        total = lake.sql(f"SELECT count(*) FROM episodes e WHERE {where}", params).column(0)[0].as_py()
    else:
        after, extra = _keyset(sort, descending, cursor, after=True)
        where, params = f"{where} AND {after}", params + extra
    direction = "DESC" if descending else "ASC"
    rows = lake.sql(
        f"SELECT * FROM episodes e WHERE {where} "
        f"ORDER BY e.{sort} {direction} NULLS LAST, e.episode_id {direction} LIMIT {int(limit) + 1}",
        params,
    ).to_pylist()
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = encode_cursor(rows[-1][sort], rows[-1]["episode_id"])
    return rows, next_cursor, total


def queue_position(lake: Lake, filt: EpisodeFilter, episode_id: str, *, sort: str, descending: bool,
                   timeout_s: float) -> dict:
    """Where `episode_id` stands in the list `filt` selects, in the list's order: its
    1-based position (None when the filter leaves it out), the total, and the episodes
    before and after it. Costs a few indexed queries at any depth, like a page."""
    if sort not in SORTS:
        raise InvalidInput(f"sort must be one of {', '.join(SORTS)}, not {sort!r}")
    where, params = where_clause(lake, filt, timeout_s=timeout_s)
    total = lake.sql(f"SELECT count(*) FROM episodes e WHERE {where}", params).column(0)[0].as_py()
    own = lake.sql(f"SELECT e.{sort} AS v, ({where}) AS included FROM episodes e WHERE e.episode_id = ?",
                   [*params, episode_id]).to_pylist()
    if not own:
        raise NotFound(f"episode {episode_id!r} does not exist")
    cursor = encode_cursor(own[0]["v"], episode_id)

    def neighbour(backwards: bool) -> str | None:
        after, extra = _keyset(sort, descending, cursor, after=not backwards)
        direction = "DESC" if descending != backwards else "ASC"
        nulls = "NULLS FIRST" if backwards else "NULLS LAST"
        rows = lake.sql(f"SELECT e.episode_id FROM episodes e WHERE {where} AND {after} "
                        f"ORDER BY e.{sort} {direction} {nulls}, e.episode_id {direction} LIMIT 1",
                        params + extra).column(0).to_pylist()
        return rows[0] if rows else None

    position = None
    if own[0]["included"]:
        before, extra = _keyset(sort, descending, cursor, after=False)
        position = lake.sql(f"SELECT count(*) FROM episodes e WHERE {where} AND {before}",
                            params + extra).column(0)[0].as_py() + 1
    return {"position": position, "total": total, "previous": neighbour(True), "next": neighbour(False)}
