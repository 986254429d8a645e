"""Storage: the Arrow schema, Lance tables, the crash-safe writer, reads, SQL, versions."""

from episodelake.lake.errors import Conflict, InvalidInput, LakeError, NotFound, SqlRefused
from episodelake.lake.lake import Lake
from episodelake.lake.writer import LakeWriter, WriterOptions

__all__ = ["Conflict", "InvalidInput", "Lake", "LakeError", "LakeWriter", "NotFound", "SqlRefused",
           "WriterOptions"]
