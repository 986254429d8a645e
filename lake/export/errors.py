"""The ways an export (or a re-run of a set) can be refused, each naming what to do next.

All are product errors (`EpisodeLakeError`), so the CLI prints one line and the API answers
its usual JSON shape.
"""

from __future__ import annotations

from episodelake.lake.storage.errors import Conflict, InvalidInput, NotFound


class UnknownFormat(InvalidInput):
    """`format` is not a registered export format."""


class EmptySelection(NotFound):
    """The selection matched no episode or no step worth a sample."""


class SetEpisodesMissing(NotFound):
    """A set lists episodes that the lake (at the version read) no longer holds."""


class ExportFolderNotOurs(Conflict):
    """The output folder exists, is not empty and was not written by an export."""
