"""Failure categories as curators filed them: which categories the live members of the live
sets carry most, for the landing page."""

from __future__ import annotations

from episodelake.lake.storage.lake import Lake


def failure_categories(lake: Lake, limit: int) -> list[dict]:
    """The `limit` failure categories with the most members, with how many sets they are
    filed in; members removed from a set and deleted sets do not count (a set's members
    are its live ones, `curation.members`). Members without a category count as one row."""
    return lake.sql("""
        SELECT m.failure_category, count(*) AS members, count(DISTINCT m.set_id) AS sets
        FROM set_members m JOIN sets s USING (set_id)
        WHERE NOT coalesce(m.removed, false) AND NOT coalesce(s.deleted, false)
        GROUP BY m.failure_category ORDER BY members DESC, m.failure_category NULLS LAST LIMIT ?
    """, [limit]).to_pylist()
