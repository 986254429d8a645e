"""Lineage: which lake data made which export, dataset and checkpoint.

One row per thing produced (`schema.LINEAGE`): its kind (`export`, `dataset`, `train`), what
it produced (`output`: an export id, a dataset's name, a checkpoint folder), the lake
versions or tag it read, the selection (set, SQL condition, options), counts, and every
episode it read (`episode_ids`). A row is written once, in one commit, after the work
succeeded: a failed export or run leaves no row, never half of one.

"Which episodes trained checkpoint 40 of run r1" is one query (`CHECKPOINT_EPISODES`, also
in docs/training-data.md); a row's own episodes by its lineage id are `EPISODES_OF`:

```sql
SELECT e.* FROM episodes e WHERE e.episode_id IN (
  SELECT unnest(episode_ids) FROM lineage
  WHERE kind = 'train' AND run_id = 'r1' AND CAST(selection->>'$.iteration' AS INTEGER) = 40)
```

A checkpoint's name alone (`iter-000040`) is not a key: every run has one. `lineage_of`
refuses a name that several outputs end in, listing them. Purged episodes stay in the rows
that read them (the row says what was read); `lineage_of` marks each one with the purge job
that removed it and when (`purged`), so a row's `in_lake` count is what the SQL returns.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal, get_args

from episodelake.lake.storage.errors import InvalidInput, NotFound

LineageKind = Literal["export", "dataset", "train"]
LINEAGE_KINDS: tuple[LineageKind, ...] = get_args(LineageKind)

#: The episodes of one lineage row still in the lake, as one SQL query; `?` is its lineage id.
EPISODES_OF = ("SELECT e.* FROM episodes e WHERE e.episode_id IN "
               "(SELECT unnest(episode_ids) FROM lineage WHERE lineage_id = ?) "
               "ORDER BY e.episode_id")
#: The episodes that trained checkpoint N of a run, still in the lake; `?`s: run id, N.
CHECKPOINT_EPISODES = ("SELECT e.* FROM episodes e WHERE e.episode_id IN "
                       "(SELECT unnest(episode_ids) FROM lineage WHERE kind = 'train' AND run_id = ? "
                       "AND CAST(selection->>'$.iteration' AS INTEGER) = ?) ORDER BY e.episode_id")
#: The job kind of a purge (`episodelake.lake.ops.purge.KIND`; not imported: purge imports the lake).
PURGE_KIND = "purge"


def new_lineage_id() -> str:
    return f"lin-{uuid.uuid4().hex[:12]}"


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def lineage_row(kind: str, output: str, *, episode_ids: Iterable[str], lake_versions: dict[str, int],
                selection: dict, counts: dict, tag: str | None = None, run_id: str | None = None,
                lineage_id: str | None = None) -> dict:
    """A checked `lineage` row (not yet written)."""
    if kind not in LINEAGE_KINDS:
        raise InvalidInput(f"kind: lineage kind must be one of {', '.join(LINEAGE_KINDS)}, not {kind!r}")
    if not isinstance(output, str) or not output.strip():
        raise InvalidInput("output: name what was produced (an export id, a checkpoint, a dataset name)")
    return {"lineage_id": lineage_id or new_lineage_id(), "kind": kind, "output": output,
            "run_id": run_id, "tag": tag, "lake_versions": _json(lake_versions),
            "selection": _json(selection), "counts": _json(counts),
            "episode_ids": sorted(set(episode_ids)), "created_at": datetime.now(UTC)}


def record(lake, kind: str, output: str, **fields) -> dict:
    """Write one lineage row (one commit) and return it; `fields` as `lineage_row` takes them.
    `lake` is a writable `Lake` (typed loosely: `lake.storage.lake` imports nothing from here)."""
    row = lineage_row(kind, output, **fields)
    lake.upsert("lineage", [row])
    return row


#: The episodes behind checkpoint N of a training run: its own rollouts of iterations 0..N
#: (recorded with policy_version = the iteration; held-out evaluations have their own run id).
TRAINED_ON = ("run_id = ? AND TRY_CAST(policy_version AS INTEGER) IS NOT NULL "
              "AND TRY_CAST(policy_version AS INTEGER) <= ?")


def warmup_output(run_id: str) -> str:
    """The `output` of a training run's SFT warm-up (`episodelake.trainer.warmup`)."""
    return f"{run_id}/sft-warmup"


def record_training(lake, run_id: str, iteration: int, output: str, *, config: dict | None = None) -> dict:
    """The lineage row of checkpoint `output`, made by iteration `iteration` of run `run_id`:
    every rollout episode of the run up to that iteration trained it, and the episodes of the
    run's SFT warm-up when it had one (its own row, `warmup_output(run_id)`)."""
    rollouts = [r["episode_id"] for r in lake.sql(
        f"SELECT episode_id FROM episodes WHERE {TRAINED_ON} ORDER BY episode_id", [run_id, iteration]).to_pylist()]
    warmup = sorted({eid for r in lake.sql(
        "SELECT episode_ids FROM lineage WHERE run_id = ? AND kind = 'train' AND output = ?",
        [run_id, warmup_output(run_id)]).to_pylist() for eid in r["episode_ids"] or []})
    ids = sorted(set(rollouts) | set(warmup))
    steps = lake.sql("SELECT count(*) AS n FROM steps WHERE list_contains(?::VARCHAR[], episode_id)",
                     [ids]).to_pylist()[0]["n"]
    selection = {"run_id": run_id, "iteration": iteration, "where": f"episodes: {TRAINED_ON}",
                 "config": config}
    counts = {"episodes": len(ids), "steps": steps}
    if warmup:
        selection["sft_warmup"] = warmup_output(run_id)
        counts["sft_warmup_episodes"] = len(warmup)
    return record(lake, "train", output, run_id=run_id, lake_versions=lake.current_versions(),
                  selection=selection, counts=counts, episode_ids=ids)


def _parsed(row: dict) -> dict:
    for key in ("lake_versions", "selection", "counts"):
        row[key] = json.loads(row[key]) if row[key] else None
    return row


def lineage_of(lake, output: str) -> list[dict]:
    """The lineage rows of `output`, newest first, JSON fields parsed, each episode's state
    marked (`mark_episodes`). `output` is an exact output, a lineage id, `RUN/NAME` (the
    output ending in NAME that run RUN recorded: `r1/iter-000040`), or the end of one output
    (`iter-000040` finds `.../checkpoints/iter-000040`). A name that ends several outputs is
    refused, listing them: which checkpoint 40 is meant is not ours to guess."""
    if not isinstance(output, str) or not output.strip():
        raise InvalidInput("output: give a checkpoint, an export id or a dataset name")
    rows = lake.sql(
        "SELECT * FROM lineage WHERE output = ? OR lineage_id = ? OR output LIKE ? "
        "OR output LIKE ? ORDER BY created_at DESC, lineage_id",
        [output, output, f"%/{output}", f"%/{output}/"]).to_pylist()
    exact = [r for r in rows if output in (r["output"], r["lineage_id"])]
    if exact:
        rows = exact
    elif not rows and "/" in output:  # RUN/NAME: that run's output ending in NAME
        run, name = output.split("/", 1)
        rows = [r for r in lake.sql(
            "SELECT * FROM lineage WHERE run_id = ? AND (output = ? OR output LIKE ? OR output LIKE ?) "
            "ORDER BY created_at DESC, lineage_id", [run, name, f"%/{name}", f"%/{name}/"]).to_pylist()]
    if not rows:
        raise NotFound(f"no lineage for {output!r}; `elake sql \"select kind, output, run_id, lineage_id "
                       "from lineage\"` lists what was recorded")
    outputs = sorted({(r["output"], r["run_id"]) for r in rows}, key=lambda o: (o[1] or "", o[0]))
    if len(outputs) > 1:
        shown = "; ".join(_candidate(r) for r in sorted(rows, key=lambda r: (r["run_id"] or "", r["output"])))
        raise InvalidInput(f"output: {output!r} is ambiguous, {len(outputs)} outputs end in it; name "
                           f"one: {shown}")
    return mark_episodes(lake, [_parsed(row) for row in rows])


def _candidate(row: dict) -> str:
    name = row["output"].rstrip("/").rsplit("/", 1)[-1]
    run = f"{row['run_id']}/{name} or " if row["run_id"] else ""
    return f"{run}{row['lineage_id']} ({row['kind']} {row['output']})"


def purged_episodes(lake, episode_ids: Iterable[str]) -> dict[str, dict]:
    """Of `episode_ids`, those a finished purge removed: id -> {"purged_at", "job_id"} from
    the purge job's record (the earliest, if purged twice)."""
    wanted = set(episode_ids)
    if not wanted:
        return {}
    rows = lake.sql("SELECT job_id, params, finished_at FROM jobs WHERE kind = ? AND status = 'done' "
                    "ORDER BY finished_at, job_id", [PURGE_KIND]).to_pylist()
    out: dict[str, dict] = {}
    for row in rows:
        for eid in (json.loads(row["params"]) if row["params"] else {}).get("episode_ids") or []:
            if eid in wanted and eid not in out:
                out[eid] = {"purged_at": row["finished_at"], "job_id": row["job_id"]}
    return out


def mark_episodes(lake, rows: list[dict]) -> list[dict]:
    """Add to each row what became of its episodes: `in_lake` (how many are in the lake now,
    what `EPISODES_OF` returns), `purged` (id -> when and by which purge job) and `missing`
    (ids neither in the lake nor purged: removed another way, or read at a tag)."""
    ids = sorted({eid for row in rows for eid in row["episode_ids"] or []})
    present = {r["episode_id"] for r in lake.sql(
        "SELECT episode_id FROM episodes WHERE list_contains(?::VARCHAR[], episode_id)", [ids]).to_pylist()}
    purged = purged_episodes(lake, [i for i in ids if i not in present])
    for row in rows:
        episodes = row["episode_ids"] or []
        row["in_lake"] = sum(eid in present for eid in episodes)
        row["purged"] = {eid: purged[eid] for eid in episodes if eid in purged}
        row["missing"] = [eid for eid in episodes if eid not in present and eid not in purged]
    return rows
