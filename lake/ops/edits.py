"""Edits: repairing what collection got wrong, without re-collecting.

`retask` fixes an episode's task name and goal, `delete` removes episodes, `split` cuts an
episode that ran two tasks in two, `merge` joins one that was cut in two, `delete_steps`
removes frames. Each is a few Lance commits (children before parents for removals, the
episode row before its new steps for additions, as the writer does) and a job in the `jobs`
table (kind `edit`: the operation, the episode ids and step numbers, never text), whose
result names the table versions read before the edit.

**Undo.** Nothing is rewritten in place: every older version still holds the state before
an edit, until a purge (`episodelake.lake.ops.purge`) or `optimize`'s pruning of old
versions removes it. `undo(job_id)` puts the rows of the episodes an edit touched back as
they were in the versions its job recorded before its first commit (a new version, itself
undoable), so an edit stopped midway (its job `failed` or `interrupted`) is undone the same way.

**Keys.** An episode's steps are numbered 0..n-1 in replay order, and edits keep them so:
`delete_steps` renumbers the later steps down; `split --at K` keeps steps 0..K-1 and moves
K..n-1 into a new episode (`<id>.<K>` unless named) as 0..n-K-1; `merge A B` appends B's
steps to A's as n_A.. and removes B. Annotations follow their step (an annotation of a
deleted step is marked deleted); a set membership's `failing_step` follows its step (null
if that step was deleted), and a membership moves with the part holding its failing step.

**Groups and anchor keys.** A group (GRPO/GiGPO) holds episodes of one task: `retask` to
another task takes the episode out of its group (`group_id` null, so the trainer leaves it
out) unless a group is given. Anchor keys compare screens within a group: split and merge
keep the group, so the keys stay valid; an episode moved into another group is keyed again
with `elake rekey --where "e.episode_id = '...'"`.

**Split and merge undo each other.** Splitting clears the first part's outcome (status
`finished`, success, score, reason and reward null: it was not judged on its own) and gives
the new part a copy of the episode's row, outcome included (the outcome is the end's);
merging keeps the first episode's row and takes the outcome, `finished_at` and status from
the second. So `merge A A.K` after `split A --at K` gives back the episode as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime

import lance
import pyarrow as pa
import pyarrow.compute as pc

from episodelake.lake.ops import audit, jobs
from episodelake.lake.storage import layout, schema, tables
from episodelake.lake.storage.errors import Conflict, InvalidInput, NotFound
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.sql import sql_in, sql_string
from episodelake.lake.storage.store import store_errors

#: The job kind every edit is recorded as (`params.op` says which).
KIND = "edit"
#: Tables whose rows belong to an episode, children first (removals go in this order).
EPISODE_TABLES: tuple[str, ...] = tuple(t for t in tables.SNAPSHOT_ORDER
                                        if "episode_id" in schema.TABLES[t].names)
#: Outcome columns: the end of an episode decides them (merge takes them from the second part).
OUTCOME = ("status", "success", "eval_score", "eval_reason", "episode_reward", "finished_at")


# -- reading -------------------------------------------------------------------------------
def _episode(lake: Lake, episode_id: str) -> dict:
    return lake.episode(layout.check_id(episode_id, "episode_id"))


def _step_rows(ds: lance.LanceDataset, where: str) -> pa.Table:
    """Every column of the steps matching `where`, screenshot and thumbnail bytes included,
    in (episode, step) order."""
    names = [n for n in schema.TABLES["steps"].names if n in ds.schema.names]
    rows = ds.to_table(columns=names, filter=where, blob_handling="all_binary")
    return rows.sort_by([("episode_id", "ascending"), ("step", "ascending")])


def _rows(lake: Lake, table: str, where: str) -> list[dict]:
    return lake.dataset(table).to_table(filter=where).to_pylist()


# -- writing -------------------------------------------------------------------------------
def _replace_steps(lake: Lake, rows: pa.Table, remove: str | None) -> None:
    """One commit on `steps`: `rows` replace the steps with their keys or are added, and the
    steps matching `remove` that `rows` do not hold are deleted."""
    rows = rows.select(schema.TABLES["steps"].names).cast(schema.TABLES["steps"])

    def merge() -> None:
        builder = tables.open_table(lake.location, "steps").merge_insert(["episode_id", "step"])
        builder = builder.when_matched_update_all().when_not_matched_insert_all()
        if remove is not None:
            builder = builder.when_not_matched_by_source_delete(remove)
        builder.execute(rows)

    with store_errors(lake.location):
        tables.retry_commit("edit steps", merge)
    lake.invalidate("steps")


def _delete(lake: Lake, table: str, where: str) -> None:
    with store_errors(lake.location):
        tables.retry_commit(f"edit {table}", lambda: tables.open_table(lake.location, table).delete(where))
    lake.invalidate(table)


def _upsert(lake: Lake, table: str, rows: list[dict]) -> None:
    if rows:
        lake.upsert(table, rows)


def _run(lake: Lake, op: str, params: dict, work: Callable[[], dict], who: str | None) -> dict:
    """Run an edit as a job; its result is `work`'s summary and the versions before it."""
    job = jobs.Job(lake, KIND, params={"op": op, **params}, who=who, progress_interval_s=0.0)
    with job.recording():
        before = lake.current_versions()
        # recorded before the first commit: an edit stopped midway can be undone too
        job.result = {"op": op, "versions_before": {t: before[t] for t in EPISODE_TABLES}}
        job.progress(0, 1)
        job.result = {**job.result, **work()}
        job.progress(1, 1)
    lake.invalidate()
    # the rows before are in the versions the job names; the log says who did what to which
    audit.record_many(lake, [audit.entry(who, f"edit.{op}", "episodes", episode_id, None,
                                         {"job_id": job.job_id, "op": op, **params}, episode_id=episode_id)
                             for episode_id in params.get("episode_ids") or []])
    return {"job_id": job.job_id, **(job.result or {})}


# -- retask --------------------------------------------------------------------------------
def retask(lake: Lake, episode_id: str, *, task: str | None = None, goal: str | None = None,
           group: str | None = None, who: str | None = None) -> dict:
    """Give an episode another task name and/or goal (see the module docstring for groups)."""
    lake.check_writable()
    row = _episode(lake, episode_id)
    if task is None and goal is None:
        raise InvalidInput("retask: give --task and/or --goal")
    if task is not None and not task.strip():
        raise InvalidInput("--task: the task name cannot be empty")
    if group is not None:
        layout.check_id(group, "group")
    changed: dict[str, str | None] = {}
    if task is not None and task != row["task_name"]:
        changed["task_name"] = task
    if goal is not None and goal != row["task_goal"]:
        changed["task_goal"] = goal
    if group is not None:
        changed["group_id"] = group
    elif "task_name" in changed and row["group_id"] is not None:
        changed["group_id"] = None  # a group holds one task's episodes
    if not changed:
        raise InvalidInput(f"episode {episode_id!r} already has that task and goal")

    def work() -> dict:
        _upsert(lake, "episodes", [{**row, **changed}])
        return {"episode_ids": [episode_id], "fields": sorted(changed),
                "group_left": row["group_id"] if "group_id" in changed else None}

    return _run(lake, "retask", {"episode_ids": [episode_id], "fields": sorted(changed),
                                 "task": changed.get("task_name")}, work, who)


# -- delete --------------------------------------------------------------------------------
def current_ids(lake: Lake, *, episode_ids: Iterable[str] = (), where: str | None = None) -> list[str]:
    """Episodes of the current version chosen by ids or a SQL condition over `episodes`."""
    ids = sorted({layout.check_id(i, "episode_id") for i in episode_ids})
    if (where is None) == (not ids):
        raise InvalidInput("give episode ids or --where SQL (one of the two)")
    if where is not None:
        found = lake.matching("SELECT DISTINCT episode_id FROM episodes", where)["episode_id"].to_pylist()
        if not found:
            raise InvalidInput(f"--where matches no episode: {where}")
        return sorted(found)
    stored = set(lake.dataset("episodes").to_table(columns=["episode_id"], filter=sql_in("episode_id", ids))
                 ["episode_id"].to_pylist())
    missing = [i for i in ids if i not in stored]
    if missing:
        raise NotFound(f"unknown episode id(s): {', '.join(missing)}")
    return ids


def delete(lake: Lake, episode_ids: Iterable[str] = (), *, where: str | None = None,
           who: str | None = None) -> dict:
    """Remove episodes (steps, row, set memberships, annotations) from the current version;
    older versions keep them (`undo`), `purge` removes them for good."""
    lake.check_writable()
    ids = current_ids(lake, episode_ids=episode_ids, where=where)

    def work() -> dict:
        removed = {}
        for table in EPISODE_TABLES:
            removed[table] = lake.dataset(table).count_rows(filter=sql_in("episode_id", ids))
            if removed[table]:
                _delete(lake, table, sql_in("episode_id", ids))
        return {"episode_ids": ids, "rows_removed": removed}

    return _run(lake, "delete", {"episode_ids": ids}, work, who)


# -- split ---------------------------------------------------------------------------------
def split(lake: Lake, episode_id: str, at: int, *, new_id: str | None = None, who: str | None = None) -> dict:
    """Cut `episode_id` before step `at`: it keeps steps 0..at-1, a new episode gets the rest."""
    lake.check_writable()
    row = _episode(lake, episode_id)
    where = f"episode_id = {sql_string(episode_id)}"
    steps = _step_rows(lake.dataset("steps"), where)
    numbers = steps["step"].to_pylist()
    if not isinstance(at, int) or isinstance(at, bool) or not (numbers and numbers[0] < at <= numbers[-1]):
        inside = f"steps {numbers[0] + 1}..{numbers[-1]}" if len(numbers) > 1 else "none: it has one step"
        raise InvalidInput(f"split at step {at} is outside episode {episode_id!r} ({len(numbers)} steps; "
                           f"a split can be at {inside})")
    new_id = layout.check_id(new_id or f"{episode_id}.{at}", "new episode id")
    if lake.dataset("episodes").count_rows(filter=f"episode_id = {sql_string(new_id)}"):
        raise Conflict(f"episode {new_id!r} exists: name the new part with --new-id")
    head = steps.filter(pc.less(steps["step"], at))
    tail = steps.filter(pc.greater_equal(steps["step"], at))
    tail = _renumbered(tail, new_id, -at)
    extra = json.loads(row["extra"]) if row["extra"] else {}
    first = {**row, **dict.fromkeys(OUTCOME[1:]), "status": "finished", "episode_length": head.num_rows,
             "finished_at": _last_time(head) or row["finished_at"]}
    second = {**row, "episode_id": new_id, "episode_length": tail.num_rows,
              "created_at": _first_time(tail) or row["created_at"],
              "extra": json.dumps({**extra, "split_from": {"episode_id": episode_id, "at": at}}, sort_keys=True)}

    def work() -> dict:
        _upsert(lake, "episodes", [first, second])
        _replace_steps(lake, tail, f"{where} AND step >= {int(at)}")
        _move_annotations(lake, episode_id, new_id, lambda s: s is not None and s >= at, -at)
        _move_members(lake, episode_id, new_id, lambda s: s is not None and s >= at, -at)
        return {"episode_ids": [episode_id, new_id], "steps": [head.num_rows, tail.num_rows]}

    return _run(lake, "split", {"episode_ids": [episode_id, new_id], "at": at}, work, who)


def _renumbered(steps: pa.Table, episode_id: str, shift: int) -> pa.Table:
    steps = steps.set_column(steps.schema.get_field_index("episode_id"), "episode_id",
                             pa.array([episode_id] * steps.num_rows, pa.string()))
    return steps.set_column(steps.schema.get_field_index("step"), "step",
                            pc.add(steps["step"], pa.scalar(shift, pa.int32())).cast(pa.int32()))


def _first_time(steps: pa.Table) -> datetime | None:
    return steps["timestamp"][0].as_py() if steps.num_rows else None


def _last_time(steps: pa.Table) -> datetime | None:
    return steps["timestamp"][-1].as_py() if steps.num_rows else None


def _shifted(step: int | None, shift: int) -> int | None:
    return None if step is None else step + shift


def _move_annotations(lake: Lake, source: str, target: str, moves: Callable[[int | None], bool],
                      shift: int) -> None:
    rows = _rows(lake, "annotations", f"episode_id = {sql_string(source)}")
    moved = [{**r, "episode_id": target, "step": _shifted(r["step"], shift)} for r in rows if moves(r["step"])]
    _upsert(lake, "annotations", moved)


def _move_members(lake: Lake, source: str, target: str, moves: Callable[[int | None], bool],
                  shift: int) -> None:
    """Memberships of `source` whose failing step `moves` go to `target` (one commit adding
    them, one removing the old rows); a set already holding `target` keeps its own."""
    rows = _rows(lake, "set_members", f"episode_id = {sql_string(source)}")
    taken = {r["set_id"] for r in _rows(lake, "set_members", f"episode_id = {sql_string(target)}")}
    moving = [r for r in rows if moves(r["failing_step"])]
    _upsert(lake, "set_members", [{**r, "episode_id": target, "failing_step": _shifted(r["failing_step"], shift)}
                                  for r in moving if r["set_id"] not in taken])
    if moving:
        _delete(lake, "set_members", f"episode_id = {sql_string(source)} AND "
                f"{sql_in('set_id', sorted({r['set_id'] for r in moving}))}")


# -- merge ---------------------------------------------------------------------------------
def merge(lake: Lake, first_id: str, second_id: str, *, force: bool = False, who: str | None = None) -> dict:
    """Append `second_id`'s steps to `first_id` and remove `second_id`."""
    lake.check_writable()
    if first_id == second_id:
        raise InvalidInput(f"merge: give two different episodes, not {first_id!r} twice")
    first, second = _episode(lake, first_id), _episode(lake, second_id)
    for field, what in (("run_id", "runs"), ("task_name", "tasks")):
        if first[field] != second[field] and not force:
            raise Conflict(f"episodes {first_id!r} and {second_id!r} are of different {what} "
                           f"({first[field]!r}, {second[field]!r}): add --force to merge them anyway")
    ds = lake.dataset("steps")
    head = ds.to_table(columns=["step"], filter=f"episode_id = {sql_string(first_id)}")["step"].to_pylist()
    offset = max(head) + 1 if head else 0
    where = f"episode_id = {sql_string(second_id)}"
    tail = _renumbered(_step_rows(ds, where), first_id, offset)
    merged = {**first, **{k: second[k] for k in OUTCOME}, "episode_length": len(head) + tail.num_rows}

    def work() -> dict:
        _replace_steps(lake, tail, where)
        _upsert(lake, "episodes", [merged])
        _move_annotations(lake, second_id, first_id, lambda s: True, offset)
        _move_members(lake, second_id, first_id, lambda s: True, offset)
        for table in ("set_members", "episodes"):  # memberships of sets that held both, and the row
            if lake.dataset(table).count_rows(filter=where):
                _delete(lake, table, where)
        return {"episode_ids": [first_id, second_id], "steps": len(head) + tail.num_rows}

    return _run(lake, "merge", {"episode_ids": [first_id, second_id], "force": force}, work, who)


# -- deleting steps ------------------------------------------------------------------------
def delete_steps(lake: Lake, episode_id: str, steps: Iterable[int], *, who: str | None = None) -> dict:
    """Remove these steps of an episode and renumber the later ones down (0..n-1 again)."""
    lake.check_writable()
    row = _episode(lake, episode_id)
    gone = sorted(set(steps))
    if not gone:
        raise InvalidInput("--steps: give the step numbers to delete, e.g. 3,4")
    where = f"episode_id = {sql_string(episode_id)}"
    stored = _step_rows(lake.dataset("steps"), where)
    numbers = stored["step"].to_pylist()
    unknown = [s for s in gone if s not in numbers]
    if unknown:
        raise NotFound(f"episode {episode_id!r} has no step(s) {', '.join(map(str, unknown))} "
                       f"(it has {numbers[0]}..{numbers[-1]})" if numbers else f"episode {episode_id!r} has no steps")
    if len(gone) == len(numbers):
        raise InvalidInput(f"that is every step of {episode_id!r}: delete the episode instead "
                           f"(`elake episode delete {episode_id}`)")
    new_number = {old: new for new, old in enumerate(s for s in numbers if s not in gone)}
    kept = stored.filter(pc.invert(pc.is_in(stored["step"], pa.array(gone, pa.int32()))))
    changed = kept.filter(pc.greater(kept["step"], gone[0]))
    renumbered = changed.set_column(changed.schema.get_field_index("step"), "step",
                                    pa.array([new_number[s] for s in changed["step"].to_pylist()], pa.int32()))
    last = len(new_number)

    def work() -> dict:
        _replace_steps(lake, renumbered, f"{where} AND step >= {last}")
        _upsert(lake, "episodes", [{**row, "episode_length": last}])
        notes = _rows(lake, "annotations", where)
        _upsert(lake, "annotations", [
            {**r, "deleted": True} if r["step"] in gone else {**r, "step": new_number[r["step"]]}
            for r in notes if r["step"] is not None and (r["step"] in gone or new_number.get(r["step"]) != r["step"])])
        members = _rows(lake, "set_members", where)
        _upsert(lake, "set_members", [{**r, "failing_step": new_number.get(r["failing_step"])} for r in members
                                      if r["failing_step"] is not None and new_number.get(r["failing_step"]) != r["failing_step"]])
        return {"episode_ids": [episode_id], "steps_deleted": gone, "steps": last}

    return _run(lake, "delete_steps", {"episode_ids": [episode_id], "steps": gone}, work, who)


# -- undo ----------------------------------------------------------------------------------
def undo(lake: Lake, job_id: str, *, who: str | None = None) -> dict:
    """Put the episodes an edit touched back as they were before it (from the versions its
    job recorded): their rows in every episode table are replaced by the old ones."""
    lake.check_writable()
    record = jobs.get_job(lake, layout.check_id(job_id, "job_id"))
    if record is None or record["kind"] != KIND:
        raise NotFound(f"no edit {job_id!r}; `elake sql \"select job_id, params from jobs where kind = 'edit'\"` "
                       "lists them")
    if record["status"] in jobs.ACTIVE:
        raise Conflict(f"edit {job_id} is still {record['status']}: undo it once it ended")
    ids = record["params"]["episode_ids"]
    versions = (record["result"] or {}).get("versions_before")
    if not versions:
        raise NotFound(f"edit {job_id} recorded no versions to go back to")
    where = sql_in("episode_id", ids)
    try:
        old = {t: tables.open_table(lake.location, t, version=int(v)) for t, v in versions.items()}
    except Exception as exc:  # pruned or purged since
        raise NotFound(f"the state before edit {job_id} is gone (pruned or purged): {str(exc).splitlines()[0]}") from None

    def work() -> dict:
        episodes = old["episodes"].to_table(filter=where).to_pylist()
        _upsert(lake, "episodes", episodes)
        _replace_steps(lake, _step_rows(old["steps"], where), where)
        for table in ("annotations", "set_members"):
            rows = old[table].to_table(filter=where).to_pylist()
            if lake.dataset(table).count_rows(filter=where):
                _delete(lake, table, where)
            _upsert(lake, table, rows)
        gone = set(ids) - {r["episode_id"] for r in episodes}
        if gone:  # episodes the edit made (a split's second part)
            _delete(lake, "episodes", sql_in("episode_id", sorted(gone)))
        return {"episode_ids": ids, "undid": job_id}

    return _run(lake, "undo", {"episode_ids": ids, "undid": job_id}, work, who)
