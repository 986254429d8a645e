"""Storage: the Arrow schema, Lance tables, the crash-safe writer, reads, SQL, versions."""

from episodelake.lake.storage.errors import (
    Conflict,
    EpisodeLakeError,
    InvalidInput,
    LakeError,
    NotFound,
    SqlRefused,
)
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.writer import LakeWriter, WriterOptions

__all__ = ["Conflict", "EpisodeLakeError", "InvalidInput", "Lake", "LakeError", "LakeWriter", "NotFound",
           "SqlRefused", "WriterOptions"]
