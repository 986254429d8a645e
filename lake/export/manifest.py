"""The export folder's contract: `manifest.json` says what was exported, from what, and how.

The manifest holds what decides the bytes (format, spec, lake tag and table versions, the
set) and what came out (counts, tasks per split, each sample file's size and sha256; for a
redacting export, each masked region's rule and box, never the text that matched). It
holds no time and no output path, so two exports of the same tag and spec have identical
manifests; when and where an export ran is in the lake's `exports` table.

A folder is ours when it holds a manifest with our `producer`. Ours are replaced whole on
the next export into them; any other non-empty folder is refused untouched.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

from episodelake.lake.export.errors import ExportFolderNotOurs

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
PRODUCER = "episodelake"
MANIFEST_VERSION = 1


def read_manifest(out: Path) -> dict | None:
    """The folder's manifest if we wrote it, else None."""
    try:
        doc = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) and doc.get("producer") == PRODUCER else None


def prepare_folder(out: Path) -> None:
    """Make `out` an empty folder that we own, or refuse (touching nothing) if it is not ours."""
    if out.exists() and not out.is_dir():
        raise ExportFolderNotOurs(f"out: {out} is a file, not a folder; choose a folder path")
    if not out.exists():
        out.mkdir(parents=True)
    elif any(out.iterdir()):
        if read_manifest(out) is None:
            raise ExportFolderNotOurs(
                f"out: {out} exists, is not empty and has no {MANIFEST} from an earlier export; "
                "nothing was changed: choose a new or empty folder")
        log.info("replacing the earlier export in %s", out)
        for entry in out.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    write_manifest(out, {"status": "writing"})


def write_manifest(out: Path, body: dict) -> dict:
    doc = {"producer": PRODUCER, "manifest_version": MANIFEST_VERSION, **body}
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(out / MANIFEST)
    return doc


def file_entry(path: Path) -> dict:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}
