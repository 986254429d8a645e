"""SFT and evaluation datasets out of the lake.

```python
from episodelake.lake.export import ExportSpec, run_export
result = run_export(lake, ExportSpec(format="llamafactory", out="sft-v1", set="good-runs", tag="v1"))
result.manifest["counts"]
```
Modules: `spec` (the options), `selection` (which episodes and steps), `samples` (messages
built with the collectors' prompt builder), `images` (content-addressed image files),
`split` (split by task, dedup), one module per format with `formats` as their registry,
`manifest` (the folder's contract), `job` (the whole run, recorded in `exports`).
"""

from episodelake.lake.export.base import ExportFormat
from episodelake.lake.export.errors import (
    EmptySelection,
    ExportFolderNotOurs,
    SetEpisodesMissing,
    UnknownFormat,
)
from episodelake.lake.export.formats import FORMATS, get_format, register
from episodelake.lake.export.job import (
    ExportResult,
    get_export,
    list_exports,
    new_export_id,
    run_export,
)
from episodelake.lake.export.spec import ExportSpec

__all__ = ["FORMATS", "EmptySelection", "ExportFolderNotOurs", "ExportFormat", "ExportResult", "ExportSpec",
           "SetEpisodesMissing", "UnknownFormat", "get_export", "get_format", "list_exports", "new_export_id",
           "register", "run_export"]
