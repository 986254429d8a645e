"""One exception family for the whole product.

Every user-facing failure is a :class:`LakeError` carrying an HTTP status, so the CLI prints
one line and the API answers one JSON shape (``{"error": {"type", "message"}}``) for all of
them. Messages name what was wrong and, where there is one, the next thing to do.
"""

from __future__ import annotations


class LakeError(Exception):
    """Base of every error the product raises on purpose."""

    status: int = 400

    @property
    def kind(self) -> str:
        return type(self).__name__

    def to_json(self) -> dict:
        return {"error": {"type": self.kind, "message": str(self)}}


class InvalidInput(LakeError):
    """Bad data from a caller: an image that is not one, a NaN reward, a bad id."""

    status = 422


class NotFound(LakeError):
    status = 404


class Conflict(LakeError):
    """The request contradicts what is stored (a duplicate step, a finished episode)."""

    status = 409


class SqlRefused(LakeError):
    """The SQL sandbox refused a statement (writes, file access, settings, limits)."""

    status = 400


class LakeCorrupt(LakeError):
    """Stored data could not be read back; `elake recover` is the next step."""

    status = 500
