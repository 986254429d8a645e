"""Which episodes and steps an export reads: a set, a SQL condition, the success filter;
and, chosen the same way, the episodes of the jobs that work on stored episodes (the judge's
back-fill, re-keying anchors): `select_episodes`.

Two lake views are involved. Curation (the set and its members) is read at the spec's tag,
or at the latest versions; episodes and steps are read at the spec's tag, else at the set's
pinned tag, else at the latest versions. That way a set curated today over a tagged lake
exports the episodes as they were at the tag, and the manifest names every version read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from episodelake.lake.export.errors import EmptySelection, SetEpisodesMissing
from episodelake.lake.export.spec import ExportSpec
from episodelake.lake.storage import schema
from episodelake.lake.storage.errors import InvalidInput, NotFound
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.sql import sql_in

#: Step columns that samples are built from (images are read separately, as blobs).
STEP_COLUMNS = schema.pick("steps", ["episode_id", "step", "model_response", "action_type", "action",
                                     "action_valid", "image_sha256", "image_format", "step_reward", "ocr_version"])
_IDS_PER_SCAN = 1000
_SELECTION_TIMEOUT_S = 120.0


@dataclass
class EpisodeSteps:
    """One selected episode: its row, all its steps in order, and which steps are targets."""

    episode_id: str
    task_name: str
    task_goal: str
    steps: list[dict]
    rowids: list[int]
    targets: set[int]


@dataclass
class Selection:
    source: Lake
    tag: str | None
    set_info: dict | None
    episodes: list[EpisodeSteps]
    versions: dict[str, int] = field(default_factory=dict)

    def recorded(self) -> dict:
        return {"tag": self.tag, "lake_versions": self.versions,
                "set": None if self.set_info is None else
                {k: self.set_info[k] for k in ("set_id", "name", "kind", "pinned_tag")}}


def resolve_set(curation: Lake, name_or_id: str) -> dict:
    rows = curation.sql(
        "SELECT * FROM sets WHERE (set_id = ? OR name = ?) AND NOT coalesce(deleted, false) "
        "ORDER BY set_id = ? DESC LIMIT 1", [name_or_id, name_or_id, name_or_id]).to_pylist()
    if not rows:
        raise NotFound(f"set: no set named {name_or_id!r} (or with that id); `elake sql \"select set_id, name from sets\"` lists them")
    return rows[0]


def set_episode_ids(curation: Lake, set_row: dict) -> list[str]:
    rows = curation.sql(
        "SELECT episode_id FROM set_members WHERE set_id = ? AND NOT coalesce(removed, false) "
        "ORDER BY episode_id", [set_row["set_id"]]).to_pylist()
    if not rows:
        raise EmptySelection(f"set {set_row['name']!r} has no members; add episodes to it first")
    return [r["episode_id"] for r in rows]


def check_members_present(source: Lake, set_row: dict, ids: list[str], tag: str | None) -> None:
    """Every member must still be in the lake view read, else the export would silently shrink."""
    found = {r["episode_id"] for r in source.sql(
        "SELECT episode_id FROM episodes WHERE list_contains(?, episode_id)", [ids]).to_pylist()}
    missing = [i for i in ids if i not in found]
    if missing:
        where = f"at tag {tag!r}" if tag else "in the lake"
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise SetEpisodesMissing(
            f"set {set_row['name']!r}: {len(missing)} of {len(ids)} member episode(s) are not {where} "
            f"({shown}); remove them from the set, or pin the set to a tag that still holds them")


def _conditions(spec: ExportSpec) -> list[str]:
    conditions = []
    if not spec.include_failed:
        conditions.append("success = true")
    if spec.good_steps_only:
        conditions.append("step_reward = 1")
    return conditions


def _targets(source: Lake, conditions: list[str], ids: list[str] | None,
             where: str | None) -> dict[str, set[int]]:
    """Steps per episode meeting `conditions` and a caller's `where` (SQL over `episodes e
    JOIN steps s USING (episode_id)`), among `ids` when given. Runs in the SQL sandbox: the
    condition may come from a page."""
    conditions = [*conditions, *([] if ids is None else [sql_in("episode_id", ids)])]
    table = source.matching("SELECT episode_id, step FROM episodes e JOIN steps s USING (episode_id)",
                            where or "true", flag="where", also=" AND ".join(conditions) or "true",
                            timeout_s=_SELECTION_TIMEOUT_S)
    out: dict[str, set[int]] = {}
    for eid, step in zip(table["episode_id"].to_pylist(), table["step"].to_pylist(), strict=True):
        out.setdefault(eid, set()).add(step)
    return out


def _steps_of(source: Lake, ids: list[str]) -> Iterator[pa.Table]:
    ds = source.dataset("steps")
    for start in range(0, len(ids), _IDS_PER_SCAN):
        chunk = ids[start:start + _IDS_PER_SCAN]
        yield ds.to_table(columns=STEP_COLUMNS, with_row_id=True,
                          filter=sql_in("episode_id", chunk))


def select(lake: Lake, spec: ExportSpec) -> Selection:
    """Resolve the spec against the lake; raises when nothing (or something missing) is selected."""
    curation = lake.at(spec.tag) if spec.tag else lake
    set_row = resolve_set(curation, spec.set) if spec.set else None
    tag = spec.tag or (set_row or {}).get("pinned_tag")
    source = lake.at(tag) if tag else lake
    ids = None
    if set_row is not None:
        ids = set_episode_ids(curation, set_row)
        check_members_present(source, set_row, ids, tag)
    targets = _targets(source, _conditions(spec), ids, spec.where)
    if not targets:
        raise EmptySelection(_empty_message(spec, set_row))
    chosen = sorted(targets)
    episodes = {r["episode_id"]: r for r in source.sql(
        "SELECT episode_id, task_name, task_goal, created_at FROM episodes WHERE list_contains(?, episode_id)",
        [chosen]).to_pylist()}
    steps: dict[str, list[tuple[int, dict]]] = {}
    for table in _steps_of(source, chosen):
        for row in table.to_pylist():
            steps.setdefault(row["episode_id"], []).append((row.pop("_rowid"), row))
    selected = []
    for eid in chosen:
        ep = episodes[eid]
        ordered = sorted(steps.get(eid, []), key=lambda pair: pair[1]["step"])
        selected.append(EpisodeSteps(eid, ep["task_name"] or "", ep["task_goal"] or "",
                                     [row for _, row in ordered], [rid for rid, _ in ordered],
                                     targets[eid]))
    selected.sort(key=lambda e: (e.task_name, episodes[e.episode_id]["created_at"] is None,
                                 episodes[e.episode_id]["created_at"] or 0, e.episode_id))
    versions = {t: source.dataset(t).version for t in ("episodes", "steps")}
    if set_row is not None:
        versions.update({t: curation.dataset(t).version for t in ("sets", "set_members")})
    return Selection(source, tag, set_row, selected, versions)


def select_episodes(lake: Lake, *, set_name: str | None = None, where: str | None = None) -> list[str]:
    """The episodes of a curation set (by name or id), those with a step meeting `where` (SQL
    over `episodes e JOIN steps s`, as an export's condition), or the set's members meeting
    it, sorted by id: what the jobs that change stored episodes work on (the judge's
    back-fill, re-keying anchors). They change the latest version, so a set's pinned tag
    does not apply; an unknown set, a set without members and a refused condition fail as
    they do for an export."""
    if set_name is None and where is None:
        raise InvalidInput("choose the episodes: give a set (--set NAME), a condition (--where SQL) or both")
    ids = set_episode_ids(lake, resolve_set(lake, set_name)) if set_name is not None else None
    if where is None:
        return sorted(ids or [])
    return sorted(_targets(lake, [], ids, where))


def _empty_message(spec: ExportSpec, set_row: dict | None) -> str:
    parts = []
    if set_row is not None:
        parts.append(f"set {set_row['name']!r}")
    if spec.where:
        parts.append(f"where {spec.where!r}")
    if not spec.include_failed:
        parts.append("success = true")
    if spec.good_steps_only:
        parts.append("step_reward = 1")
    hint = " (add --include-failed to keep failed episodes)" if not spec.include_failed else ""
    return "selection: no step matches " + " and ".join(parts or ["the lake (it is empty)"]) + hint

