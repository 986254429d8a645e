"""Curation: named sets of episodes, their members, per-step annotations, and saved views.

A set (kind failure | regression | sft | eval) collects episodes; each member carries the
failure category, the step where the episode went wrong and a note. Annotations label one
step (or a whole episode when `step` is null). Every change is one `Lake.upsert` of its row
on the `sets` / `set_members` / `annotations` tables, durable when the call returns and
visible to the next SQL query; then one `audit` row says who made the change and the row
before and after (`episodelake.lake.ops.audit`). Member and annotation writes take no lock
and read nothing back before writing: the writes of many curators at once share commits, and
the rows before, which their audit rows hold, are read once per commit (`Lake.upsert`'s group
commit and its `audited` entries); a set's
`updated_at` follows its members through the audit log (`_SETS_QUERY`), not by rewriting
the set's row. Nothing is deleted: sets and annotations get a `deleted`
flag and members a `removed` flag, so older lake versions (and tags that pin a set) keep
meaning what they meant, and SQL over curation filters on those flags.

A saved view is a named episode filter (the API's filter fields and their values, kept as
JSON text) that everyone on the lake sees; the API checks the filter before it is stored. A
view is also a curation queue (the web app walks its episodes in order), so it can be
assigned to a person (`assigned_to`), as a set can.

Sets and views have a version (`versions`: how many changes of their own fields the audit
log holds): a change made from an older version than the stored one (`expected_version`) is
refused, naming who saved the newer one and when.
"""

import json
import uuid
from collections.abc import Collection
from datetime import UTC, datetime
from typing import cast

import lance

from episodelake.lake.curation import fields, versions
from episodelake.lake.ops import audit, users
from episodelake.lake.storage import layout, schema
from episodelake.lake.storage.errors import Conflict, InvalidInput, NotFound
from episodelake.lake.storage.lake import Lake, Refers

SET_FIELDS = ("name", "kind", "description", "pinned_tag", "assigned_to")

#: Changes of sets and views read a row, change it and write it back (or check a name is
#: free first); one at a time within this process, under the lock their versions are checked
#: under (`versions.write_lock`). Member and annotation writes go without.
_write_lock = versions.write_lock


def _now() -> datetime:
    return datetime.now(UTC)


def _rows(lake: Lake, query: str, params: list) -> list[dict]:
    return lake.sql(query, params).to_pylist()


# -- sets ------------------------------------------------------------------------------
#: A set's `updated_at` is its own row's, or its members' last change if later: member
#: writes do not rewrite the set's row (which would serialise them behind one lock), and the
#: audit log dates every change of a member, removals included. Its `version` (and who made
#: it, when) counts changes of the set's own fields only (`versions`).
_SETS_QUERY = """
    WITH touched AS (
        SELECT split_part(target_id, '/', 1) AS set_id, max(changed_at) AS changed_at
        FROM audit WHERE target_table = 'set_members' GROUP BY 1)
    SELECT s.* REPLACE (greatest(s.updated_at, t.changed_at) AS updated_at),
           count(m.episode_id) FILTER (WHERE NOT coalesce(m.removed, false)) AS members, {versions}
    FROM sets s LEFT JOIN set_members m ON m.set_id = s.set_id LEFT JOIN touched t ON t.set_id = s.set_id
         LEFT JOIN {versions_of_sets} v ON v.target_id = s.set_id
    WHERE NOT coalesce(s.deleted, false) {extra}
    GROUP BY ALL ORDER BY s.created_at, s.set_id
""".replace("{versions}", versions.columns("v")).replace("{versions_of_sets}", versions.versions_of("sets"))


def list_sets(lake: Lake) -> list[dict]:
    """Live sets, oldest first, each with its live member count."""
    return _rows(lake, _SETS_QUERY.format(extra=""), [])


def get_set(lake: Lake, set_id: str) -> dict:
    layout.check_id(set_id, "set_id")
    rows = _rows(lake, _SETS_QUERY.format(extra="AND s.set_id = ?"), [set_id])
    if not rows:
        raise NotFound(f"set {set_id!r} does not exist (or was deleted)")
    return rows[0]


def _live_set_ids(sets: lance.LanceDataset) -> frozenset[str]:
    rows = sets.to_table(columns=["set_id"], filter="deleted IS NULL OR NOT deleted")
    return frozenset(rows.column("set_id").to_pylist())


def _check_live_set(lake: Lake, set_id: str) -> None:
    """NotFound unless `set_id` is a live set. Every member write asks, and twenty curators
    asking at once made the scan behind it their largest cost: the live ids are read once per
    version of the sets table (`Lake.per_version`)."""
    layout.check_id(set_id, "set_id")
    if set_id not in lake.per_version("sets", _live_set_ids):
        raise NotFound(f"set {set_id!r} does not exist (or was deleted)")


def _check_name_free(lake: Lake, name: str, except_id: str | None = None) -> None:
    clash = [s for s in list_sets(lake) if s["name"] == name and s["set_id"] != except_id]
    if clash:
        raise Conflict(f"name: a set named {name!r} exists ({clash[0]['set_id']}); pick another name")


def _check_tag(lake: Lake, tag: object) -> str | None:
    if tag is None:
        return None
    layout.check_id(tag, "pinned_tag")
    if tag not in lake.tags():
        raise NotFound(f"pinned_tag: no tag {tag!r}; create it with `elake tag {tag}`")
    return tag


def create_set(lake: Lake, name: str, kind: str = "failure", description: str | None = None,
               pinned_tag: str | None = None, *, who: str | None = None) -> dict:
    name = fields.required_text(name, "name", fields.MAX_NAME)
    set_id = f"set-{uuid.uuid4().hex[:12]}"
    row = {
        "set_id": set_id,
        "name": name,
        "kind": fields.choice(kind, "kind", schema.SET_KINDS),
        "description": fields.text(description, "description"),
        "pinned_tag": _check_tag(lake, pinned_tag),
        "created_at": _now(),
        "updated_at": _now(),
        "deleted": False,
        "created_by": fields.text(who, "who", fields.MAX_NAME),
    }
    with _write_lock:
        _check_name_free(lake, name)
        lake.upsert("sets", [row])
        audit.record(lake, who, "set.create", "sets", set_id, None, row)
    return get_set(lake, set_id)


def update_set(lake: Lake, set_id: str, *, who: str | None = None, expected_version: Collection[int] | None = None,
               **changes: object) -> dict:
    """Rename, describe, change the kind, (un)pin or assign a set; `None` clears
    description, pinned_tag and assigned_to. With `expected_version` (the versions the change
    was made from), a set saved since by someone else is refused (`versions.StaleVersion`)."""
    unknown = set(changes) - set(SET_FIELDS)
    if unknown:
        raise InvalidInput(f"cannot change {sorted(unknown)}; a set's editable fields are {SET_FIELDS}")
    with _write_lock:
        current = get_set(lake, set_id)
        versions.check(f"set {current['name']!r}", current, expected_version)
        row = {k: current[k] for k in schema.SETS.names}
        if "name" in changes:
            row["name"] = fields.required_text(changes["name"], "name", fields.MAX_NAME)
            _check_name_free(lake, row["name"], except_id=set_id)
        if "kind" in changes:
            row["kind"] = fields.choice(changes["kind"], "kind", schema.SET_KINDS)
        if "description" in changes:
            row["description"] = fields.text(changes["description"], "description")
        if "pinned_tag" in changes:
            row["pinned_tag"] = _check_tag(lake, changes["pinned_tag"])
        if "assigned_to" in changes:
            row["assigned_to"] = _check_person(lake, changes["assigned_to"])
        row["updated_at"] = _now()
        lake.upsert("sets", [row])
        audit.record(lake, who, "set.update", "sets", set_id, {k: current[k] for k in schema.SETS.names}, row)
    return get_set(lake, set_id)


def _check_person(lake: Lake, name: object) -> str | None:
    """A name to assign work to: on a lake with users, one of those who may curate (a viewer
    could open the queue but not file a single episode of it)."""
    name = fields.text(name, "assigned_to", fields.MAX_NAME)
    people = {u["name"]: u["role"] for u in users.list_users(lake)}
    curators = ", ".join(n for n, role in people.items() if role != "viewer") or "none"
    if name is not None and people and name not in people:
        raise InvalidInput(f"assigned_to: {name!r} is not a user of this lake; those who can curate: {curators}")
    if name is not None and people.get(name) == "viewer":
        raise InvalidInput(f"assigned_to: {name!r} is a viewer and cannot curate (an admin can make them a curator: "
                           f"`elake user remove {name}`, then `elake user add {name} --role curator`); "
                           f"assign one of: {curators}")
    return name


def delete_set(lake: Lake, set_id: str, *, who: str | None = None,
               expected_version: Collection[int] | None = None) -> None:
    with _write_lock:
        current = get_set(lake, set_id)
        versions.check(f"set {current['name']!r}", current, expected_version)
        row = {k: current[k] for k in schema.SETS.names}
        lake.upsert("sets", [{**row, "deleted": True, "updated_at": _now()}])
        audit.record(lake, who, "set.delete", "sets", set_id, row, None)


# -- members ---------------------------------------------------------------------------
#: The episode's fields a member is listed with (`_MEMBERS_QUERY` joins them).
_MEMBER_EPISODE_FIELDS = ("task_name", "success", "episode_length", "policy_version")
_MEMBERS_QUERY = """
    SELECT m.*, e.task_name, e.success, e.episode_length, e.policy_version
    FROM set_members m LEFT JOIN episodes e ON e.episode_id = m.episode_id
    WHERE NOT coalesce(m.removed, false) {extra}
    ORDER BY m.added_at, m.episode_id
"""


def members(lake: Lake, set_id: str) -> list[dict]:
    """A set's live members, each with its episode's task, success and length."""
    get_set(lake, set_id)
    return _rows(lake, _MEMBERS_QUERY.format(extra="AND m.set_id = ?"), [set_id])


def add_member(lake: Lake, set_id: str, episode_id: str, *, failure_category: str | None = None,
               failing_step: int | None = None, note: str | None = None,
               added_by: str | None = None) -> dict:
    """Add an episode to a set, or replace its category, failing step and note; `added_by`
    is who does it (recorded on the member and in the audit log). Takes no lock: writes of
    many curators at once share commits (`Lake.upsert`); of two writes of one member at once,
    the later stands, and the audit row's `before` is the member as read just before the
    commit that holds this write (or as the write before it in that commit left it; another
    process committing the same member in between is not seen)."""
    _check_live_set(lake, set_id)
    layout.check_id(episode_id, "episode_id")
    who = fields.text(added_by, "added_by", fields.MAX_NAME)
    row = {
        "set_id": set_id,
        "episode_id": episode_id,
        "failure_category": None if failure_category is None
        else fields.choice(failure_category, "failure_category", schema.FAILURE_CATEGORIES),
        "failing_step": fields.step(lake, episode_id, failing_step, "failing_step"),
        "note": fields.text(note, "note"),
        "added_by": who,
        "added_at": _now(),
        "removed": False,
    }
    episode = cast(dict, lake.upsert(  # a write that refers to a row gets it back, or NotFound
        "set_members", [row],
        audited=lambda before: [audit.entry(who, "member.put", "set_members", f"{set_id}/{episode_id}",
                                            _live(before[0]), row, episode_id=episode_id)],
        refers=Refers("episodes", episode_id, _MEMBER_EPISODE_FIELDS, f"episode {episode_id!r} is not in the lake")))
    return {**row, **episode}


#: Most episodes one bulk add may file.
MAX_BULK = 10_000


def add_members(lake: Lake, set_id: str, episode_ids: list[str], *, failure_category: str | None = None,
                note: str | None = None, added_by: str | None = None) -> dict:
    """File many episodes into a set at once (a selection, everything a filter matches):
    one commit of member rows and one of audit rows. Episodes already in the set keep their
    curation as it is; unknown ids are refused before anything is written. Returns the
    counts: `added`, `already` (members before)."""
    _check_live_set(lake, set_id)
    ids = list(dict.fromkeys(layout.check_id(e, "episode_ids") for e in episode_ids))
    if not ids:
        raise InvalidInput("episode_ids: name at least one episode (or a filter that matches some)")
    if len(ids) > MAX_BULK:
        raise InvalidInput(f"episode_ids: at most {MAX_BULK:,} episodes at once, not {len(ids):,}; narrow the filter")
    known = {r["episode_id"] for r in _rows(lake, "SELECT episode_id FROM episodes WHERE list_contains(?, episode_id)",
                                            [ids])}
    missing = [e for e in ids if e not in known]
    if missing:
        raise NotFound(f"episode_ids: {len(missing)} episode(s) do not exist, e.g. {missing[:3]}")
    already = {r["episode_id"] for r in _rows(
        lake, "SELECT episode_id FROM set_members WHERE set_id = ? AND NOT coalesce(removed, false) "
        "AND list_contains(?, episode_id)", [set_id, ids])}
    who = fields.text(added_by, "added_by", fields.MAX_NAME)
    shared = {"failure_category": None if failure_category is None
              else fields.choice(failure_category, "failure_category", schema.FAILURE_CATEGORIES),
              "note": fields.text(note, "note"), "added_by": who, "added_at": _now(), "removed": False}
    new = [e for e in ids if e not in already]
    rows = [{"set_id": set_id, "episode_id": e, "failing_step": None, **shared} for e in new]
    if rows:
        lake.upsert("set_members", rows)  # new members: no rows before to read for the audit
        audit.record_many(lake, [audit.entry(who, "member.put", "set_members", f"{set_id}/{e}", None, row,
                                             episode_id=e) for e, row in zip(new, rows, strict=True)])
    return {"set_id": set_id, "added": len(rows), "already": len(already)}


def _live(member_row: dict | None) -> dict | None:
    """A stored member row as the audit's "before": None where it was removed (it was not a
    member then)."""
    return None if member_row is None or member_row["removed"] else member_row


def member(lake: Lake, set_id: str, episode_id: str) -> dict:
    layout.check_id(episode_id, "episode_id")
    rows = _rows(lake, _MEMBERS_QUERY.format(extra="AND m.set_id = ? AND m.episode_id = ?"),
                 [set_id, episode_id])
    if not rows:
        raise NotFound(f"episode {episode_id!r} is not in set {set_id!r}")
    return rows[0]


def remove_member(lake: Lake, set_id: str, episode_id: str, *, who: str | None = None) -> None:
    current = member(lake, layout.check_id(set_id, "set_id"), episode_id)
    row = {k: current[k] for k in schema.SET_MEMBERS.names}
    lake.upsert("set_members", [{**row, "removed": True}], audited=lambda _: [audit.entry(
        who, "member.remove", "set_members", f"{set_id}/{episode_id}", row, None, episode_id=episode_id)])


def memberships(lake: Lake, episode_id: str) -> list[dict]:
    """The live sets an episode belongs to, with the member's category, step and note."""
    layout.check_id(episode_id, "episode_id")
    return _rows(lake, """
        SELECT m.*, s.name AS set_name, s.kind AS set_kind
        FROM set_members m JOIN sets s ON s.set_id = m.set_id
        WHERE m.episode_id = ? AND NOT coalesce(m.removed, false) AND NOT coalesce(s.deleted, false)
        ORDER BY m.added_at
    """, [episode_id])


# -- annotations -----------------------------------------------------------------------
def annotations(lake: Lake, episode_id: str) -> list[dict]:
    """An episode's live annotations, in step order (episode-wide ones first)."""
    layout.check_id(episode_id, "episode_id")
    return _rows(lake, """
        SELECT * FROM annotations WHERE episode_id = ? AND NOT coalesce(deleted, false)
        ORDER BY step NULLS FIRST, created_at
    """, [episode_id])


def annotate(lake: Lake, episode_id: str, step: int | None, *, label: str | None = None,
             note: str | None = None, author: str | None = None) -> dict:
    lake.episode(episode_id)
    label = fields.text(label, "label", fields.MAX_NAME)
    note = fields.text(note, "note")
    if label is None and note is None:
        raise InvalidInput("label or note: an annotation needs at least one of them")
    who = fields.text(author, "author", fields.MAX_NAME)
    annotation_id = f"ann-{uuid.uuid4().hex[:16]}"
    row = {
        "annotation_id": annotation_id,
        "episode_id": episode_id,
        "step": fields.step(lake, episode_id, step, "step"),
        "label": label,
        "note": note,
        "author": who,
        "created_at": _now(),
        "deleted": False,
    }
    lake.upsert("annotations", [row], audited=lambda _: [audit.entry(
        who, "annotation.create", "annotations", annotation_id, None, row, episode_id=episode_id)])
    return row


def delete_annotation(lake: Lake, annotation_id: str, *, who: str | None = None) -> None:
    layout.check_id(annotation_id, "annotation_id")
    with _write_lock:
        rows = _rows(lake, "SELECT * FROM annotations WHERE annotation_id = ? AND NOT coalesce(deleted, false)",
                     [annotation_id])
        if not rows:
            raise NotFound(f"annotation {annotation_id!r} does not exist (or was deleted)")
        lake.upsert("annotations", [{**rows[0], "deleted": True}], audited=lambda _: [audit.entry(
            who, "annotation.delete", "annotations", annotation_id, rows[0], None, episode_id=rows[0]["episode_id"])])


# -- saved views -----------------------------------------------------------------------
def _view_out(row: dict) -> dict:
    return {**row, "filters": json.loads(row["filters"] or "{}")}


def _view_row(view: dict) -> dict:
    """A view as `get_view` gives it, back in its stored form (filters as JSON text, no version)."""
    return {**{k: view[k] for k in schema.SAVED_VIEWS.names}, "filters": json.dumps(view["filters"], sort_keys=True)}


#: Live saved views with their versions (`versions`); `{extra}` narrows them.
_VIEWS_QUERY = f"""
    SELECT w.*, {versions.columns("v")}
    FROM saved_views w LEFT JOIN {versions.versions_of("saved_views")} v ON v.target_id = w.view_id
    WHERE NOT coalesce(w.deleted, false) {{extra}} ORDER BY w.name, w.view_id
"""


def list_views(lake: Lake, *, assigned_to: str | None = None) -> list[dict]:
    """Live saved views, by name; with `assigned_to`, only the queues assigned to that person."""
    mine = "AND w.assigned_to = ?" if assigned_to is not None else ""
    rows = _rows(lake, _VIEWS_QUERY.format(extra=mine), [assigned_to] if assigned_to is not None else [])
    return [_view_out(r) for r in rows]


def get_view(lake: Lake, view_id: str) -> dict:
    layout.check_id(view_id, "view_id")
    rows = _rows(lake, _VIEWS_QUERY.format(extra="AND w.view_id = ?"), [view_id])
    if not rows:
        raise NotFound(f"saved view {view_id!r} does not exist (or was deleted)")
    return _view_out(rows[0])


def create_view(lake: Lake, name: str, filters: dict, *, who: str | None = None) -> dict:
    """Save `filters` (episode filter field -> value, checked by the caller) under `name`,
    which no other live view has."""
    name = fields.required_text(name, "name", fields.MAX_NAME)
    if not isinstance(filters, dict):
        raise InvalidInput(f"filters must be an object of filter fields, not {type(filters).__name__}")
    view_id = f"view-{uuid.uuid4().hex[:12]}"
    row = {"view_id": view_id, "name": name, "filters": json.dumps(filters, sort_keys=True),
           "created_at": _now(), "updated_at": _now(), "deleted": False,
           "created_by": fields.text(who, "who", fields.MAX_NAME)}
    with _write_lock:
        clash = [v for v in list_views(lake) if v["name"] == name]
        if clash:
            raise Conflict(f"name: a saved view named {name!r} exists ({clash[0]['view_id']}); "
                           "pick another name or delete that view")
        lake.upsert("saved_views", [row])
        audit.record(lake, who, "view.create", "saved_views", view_id, None, row)
    return get_view(lake, view_id)


def delete_view(lake: Lake, view_id: str, *, who: str | None = None,
                expected_version: Collection[int] | None = None) -> None:
    with _write_lock:
        current = get_view(lake, view_id)
        versions.check(f"saved view {current['name']!r}", current, expected_version)
        row = _view_row(current)
        lake.upsert("saved_views", [{**row, "deleted": True, "updated_at": _now()}])
        audit.record(lake, who, "view.delete", "saved_views", view_id, row, None)


def update_view(lake: Lake, view_id: str, filters: dict, *, who: str | None = None,
                expected_version: Collection[int] | None = None) -> dict:
    """Replace a saved view's `filters` (checked by the caller, as for `create_view`); its id,
    name and creator stay, and the audit row holds the filters before and after. With
    `expected_version`, a view saved since by someone else is refused (`versions.StaleVersion`)."""
    if not isinstance(filters, dict):
        raise InvalidInput(f"filters must be an object of filter fields, not {type(filters).__name__}")
    with _write_lock:
        current = get_view(lake, view_id)
        versions.check(f"saved view {current['name']!r}", current, expected_version)
        before = _view_row(current)
        row = {**before, "filters": json.dumps(filters, sort_keys=True), "updated_at": _now()}
        lake.upsert("saved_views", [row])
        audit.record(lake, who, "view.update", "saved_views", view_id, before, row)
    return get_view(lake, view_id)


def assign_view(lake: Lake, view_id: str, person: str | None, *, who: str | None = None,
                expected_version: Collection[int] | None = None) -> dict:
    """Assign the view, as a curation queue, to `person` (on a lake with users, one of them:
    a name nobody has is refused, naming the users); `None` unassigns it. The audit row
    (`view.assign` or `view.unassign`) holds the view before and after."""
    with _write_lock:
        current = get_view(lake, view_id)
        versions.check(f"saved view {current['name']!r}", current, expected_version)
        before = _view_row(current)
        row = {**before, "assigned_to": _check_person(lake, person), "updated_at": _now()}
        lake.upsert("saved_views", [row])
        action = "view.assign" if row["assigned_to"] is not None else "view.unassign"
        audit.record(lake, who, action, "saved_views", view_id, before, row)
    return get_view(lake, view_id)
