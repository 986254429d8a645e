"""`elake lineage CHECKPOINT|EXPORT|DATASET`: what lake data made a checkpoint, export or dataset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from episodelake.api.cli.app import Commands, globals_of

DESCRIPTION = """\
Prints the lineage rows of a training checkpoint (its folder, RUN/iter-000040, or its name
iter-000040 when one run has it), an export (its id or its folder), a dataset built with
`sft_dataset(..., lineage=NAME)` or a lineage id: the lake versions or tag read, the
selection, the counts and the episodes, each purged one marked with when and by which purge.
A name that several outputs end in (every run has an iter-000040) is refused, listing them.
The episodes that trained checkpoint 40 of run RUN, as SQL:

\b
  elake sql "SELECT e.* FROM episodes e WHERE e.episode_id IN (SELECT unnest(episode_ids)
             FROM lineage WHERE kind = 'train' AND run_id = 'RUN'
             AND CAST(selection->>'$.iteration' AS INTEGER) = 40)"
"""

commands = Commands()

#: Episode ids printed before "and N more" (--json prints them all).
SHOWN = 10


def _target(lake, target: str) -> str:
    """An export folder becomes its export id; any other existing path its absolute form."""
    path = Path(target)
    if not path.exists():
        return target
    resolved = str(path.resolve())
    rows = lake.sql("SELECT export_id FROM exports WHERE out_dir = ? ORDER BY created_at DESC LIMIT 1",
                    [resolved]).to_pylist()
    return rows[0]["export_id"] if rows else resolved


@commands.command("lineage", summary="which lake versions, selection and episodes made a checkpoint, "
                  "export or dataset", description=DESCRIPTION)
def cmd_lineage(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(metavar="CHECKPOINT|EXPORT", show_default=False,
                                          help="a checkpoint folder, RUN/NAME or name, an export "
                                          "id or folder, a dataset's lineage name, a lineage id")],
    as_json: Annotated[bool, typer.Option("--json", help="print the rows as JSON, every episode id")] = False,
) -> None:
    from episodelake.lake.ops.lineage import lineage_of
    from episodelake.lake.storage.lake import Lake

    lake = Lake(globals_of(ctx).lake, create=False)
    rows = lineage_of(lake, _target(lake, target))
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
        return
    for row in rows:
        print_row(row)


def _mark(eid: str, row: dict) -> str:
    purged = row["purged"].get(eid)
    if purged is not None:
        return f"{eid} [purged {purged['purged_at']:%Y-%m-%d %H:%M:%S} UTC, {purged['job_id']}]"
    return f"{eid} [not in the lake]" if eid in row["missing"] else eid


def print_row(row: dict) -> None:
    ids = row["episode_ids"]
    more = f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else ""
    print(f"{row['kind']} {row['output']}  ({row['lineage_id']}, {row['created_at']:%Y-%m-%d %H:%M:%S} UTC)")
    if row["run_id"]:
        print(f"  run:          {row['run_id']}")
    print(f"  lake:         {'tag ' + row['tag'] + ', ' if row['tag'] else ''}versions "
          f"{json.dumps(row['lake_versions'], sort_keys=True)}")
    print(f"  selection:    {json.dumps(row['selection'], sort_keys=True, default=str)}")
    print(f"  counts:       {json.dumps(row['counts'], sort_keys=True)}  (when recorded)")
    gone = [f"{len(row['purged'])} purged"] if row["purged"] else []
    gone += [f"{len(row['missing'])} not in the lake"] if row["missing"] else []
    state = f", {', '.join(gone)}" if gone else ""
    print(f"  episodes read ({len(ids)}): {row['in_lake']} in the lake{state}")
    # the gone ones first, so a long list never hides them behind "and N more"
    ordered = sorted(ids, key=lambda eid: (eid not in row["purged"] and eid not in row["missing"], eid))
    print(f"                {', '.join(_mark(eid, row) for eid in ordered[:SHOWN])}{more}")
    print(f"  in the lake ({row['in_lake']}): elake sql \"SELECT e.* FROM episodes e WHERE e.episode_id IN "
          f"(SELECT unnest(episode_ids) FROM lineage WHERE lineage_id = '{row['lineage_id']}')\"")
