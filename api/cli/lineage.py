"""`elake lineage CHECKPOINT|EXPORT|DATASET`: what lake data made a checkpoint, export or dataset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from episodelake.api.cli.app import Commands, globals_of

DESCRIPTION = """\
Prints the lineage rows of a training checkpoint (its folder, or its name such as
iter-000040), an export (its id or its folder) or a dataset built with
`sft_dataset(..., lineage=NAME)`: the lake versions or tag read, the selection, the counts
and the episodes. The episodes themselves, as SQL:

\b
  elake sql "SELECT e.* FROM episodes e WHERE e.episode_id IN
             (SELECT unnest(episode_ids) FROM lineage WHERE output LIKE '%iter-000040%')"
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
                                          help="a checkpoint folder or name, an export id or "
                                          "folder, a dataset's lineage name")],
    as_json: Annotated[bool, typer.Option("--json", help="print the rows as JSON, every episode id")] = False,
) -> None:
    from episodelake.lake.core.lake import Lake
    from episodelake.lake.core.lineage import lineage_of

    lake = Lake(globals_of(ctx).lake, create=False)
    rows = lineage_of(lake, _target(lake, target))
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
        return
    for row in rows:
        ids = row["episode_ids"]
        more = f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else ""
        print(f"{row['kind']} {row['output']}  ({row['lineage_id']}, {row['created_at']:%Y-%m-%d %H:%M:%S} UTC)")
        if row["run_id"]:
            print(f"  run:          {row['run_id']}")
        print(f"  lake:         {'tag ' + row['tag'] + ', ' if row['tag'] else ''}versions "
              f"{json.dumps(row['lake_versions'], sort_keys=True)}")
        print(f"  selection:    {json.dumps(row['selection'], sort_keys=True, default=str)}")
        print(f"  counts:       {json.dumps(row['counts'], sort_keys=True)}")
        print(f"  episodes ({len(ids)}): {', '.join(ids[:SHOWN])}{more}")
        print(f"  all of them:  elake sql \"SELECT e.* FROM episodes e WHERE e.episode_id IN (SELECT "
              f"unnest(episode_ids) FROM lineage WHERE lineage_id = '{row['lineage_id']}')\"")
