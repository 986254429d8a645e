"""Storage: the Arrow schema, Lance tables, the crash-safe writer, reads, SQL, versions."""

from episodelake.lake.core.errors import (
    Conflict,
    EpisodeLakeError,
    InvalidInput,
    LakeError,
    NotFound,
    SqlRefused,
)
from episodelake.lake.core.lake import Lake
from episodelake.lake.core.writer import LakeWriter, WriterOptions

__all__ = ["Conflict", "EpisodeLakeError", "InvalidInput", "Lake", "LakeError", "LakeWriter", "NotFound",
           "SqlRefused", "WriterOptions"]
