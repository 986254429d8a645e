"""Episodes set aside because their claim was lost: a caller-given id taken while the store
could not be reached, that another writer turned out to hold when the claim was settled
(`claims`). Their rows wait under this machine's spool root (`spool.CONFLICTS_DIR`), never
committed under that id; `elake recover` lists them and `elake recover --restore-conflicts`
stores each under a new id (the old one kept as `recorded_as` in the episode's `extra`), then deletes the
kept files."""

from __future__ import annotations

import json
import logging
import shutil
import uuid
from dataclasses import dataclass

import pyarrow as pa

from episodelake.lake.storage import claims, layout, spool
from episodelake.lake.storage.store import Location
from episodelake.lake.storage.writer import LakeWriter

log = logging.getLogger(__name__)


@dataclass
class SetAside:
    episode_id: str
    rows: dict[str, int]  # by table
    folder: str


def listed(lake: Location) -> list[SetAside]:
    root = layout.spool_root(lake)
    return [SetAside(episode_id, {t: rows.num_rows for t, rows in found.items()},
                     str(root / spool.CONFLICTS_DIR / episode_id))
            for episode_id, found in spool.set_aside_episodes(root).items()]


def restore(lake: Location) -> list[tuple[str, str, dict[str, int]]]:
    """Store every set-aside episode under a new id (`<old id>-<8 hex>`, its claim minted,
    so nobody else can hold it); returns (old id, new id, rows by table). Each episode's
    files are deleted once its rows are committed; an episode with no episodes row (its
    start was committed under the old id by nobody) gets none made up: its steps keep the
    new id and the list says so."""
    root = layout.spool_root(lake)
    done = []
    for episode_id, found in spool.set_aside_episodes(root).items():
        new_id = f"{episode_id}-{uuid.uuid4().hex[:8]}"
        with LakeWriter(lake) as writer:
            claim = claims.take(lake, new_id, writer._spool.dir.name, minted_into=writer.claims)
            assert claim is not None  # a minted id's claim is never refused
            claim.own(writer._spool.dir.name)
            for table in ("episodes", *sorted(t for t in found if t != "episodes")):
                if table not in found:
                    continue
                rows = _renamed(found[table], new_id)
                if table == "episodes":
                    rows = [{**r, "extra": _with_old_id(r.get("extra"), episode_id)} for r in rows]
                writer.append_rows(table, rows)
            writer.flush()
            claim.release(committed=True)
        shutil.rmtree(root / spool.CONFLICTS_DIR / episode_id)
        log.info("set-aside episode %s stored as %s", episode_id, new_id)
        done.append((episode_id, new_id, {t: r.num_rows for t, r in found.items()}))
    return done


def _renamed(rows: pa.Table, new_id: str) -> list[dict]:
    return [{**r, "episode_id": new_id} for r in rows.to_pylist()]


def _with_old_id(extra: str | None, old: str) -> str:
    data = json.loads(extra) if extra else {}
    return json.dumps({**data, "recorded_as": old})
