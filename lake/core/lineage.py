"""Lineage: which lake data made which export, dataset and checkpoint.

One row per thing produced (`schema.LINEAGE`): its kind (`export`, `dataset`, `train`), what
it produced (`output`: an export id, a dataset's name, a checkpoint folder), the lake
versions or tag it read, the selection (set, SQL condition, options), counts, and every
episode it read (`episode_ids`). A row is written once, in one commit, after the work
succeeded: a failed export or run leaves no row, never half of one.

"Which episodes trained ckpt-40" is one query (`EPISODES_OF`, also in docs/training-data.md):

```sql
SELECT e.* FROM episodes e
WHERE e.episode_id IN (SELECT unnest(episode_ids) FROM lineage WHERE output LIKE '%ckpt-40%')
```
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal, get_args

from episodelake.lake.core.errors import InvalidInput, NotFound

LineageKind = Literal["export", "dataset", "train"]
LINEAGE_KINDS: tuple[LineageKind, ...] = get_args(LineageKind)

#: The episodes behind an output (a checkpoint, an export id, a dataset name), as one SQL
#: query over the lake's views; `?` is a LIKE pattern of the output (`%ckpt-40%`).
EPISODES_OF = ("SELECT e.* FROM episodes e WHERE e.episode_id IN "
               "(SELECT unnest(episode_ids) FROM lineage WHERE output LIKE ?) "
               "ORDER BY e.episode_id")


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
    `lake` is a writable `Lake` (typed loosely: `lake.core.lake` imports nothing from here)."""
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
    """The lineage rows of `output`: an exact output, a lineage id, or an output ending in
    it (`ckpt-40` finds `.../checkpoints/ckpt-40`), newest first, JSON fields parsed."""
    if not isinstance(output, str) or not output.strip():
        raise InvalidInput("output: give a checkpoint, an export id or a dataset name")
    rows = lake.sql(
        "SELECT * FROM lineage WHERE output = ? OR lineage_id = ? OR output LIKE ? "
        "OR output LIKE ? ORDER BY created_at DESC, lineage_id",
        [output, output, f"%/{output}", f"%/{output}/"]).to_pylist()
    if not rows:
        raise NotFound(f"no lineage for {output!r}; `elake sql \"select kind, output, created_at "
                       "from lineage\"` lists what was recorded")
    return [_parsed(row) for row in rows]
