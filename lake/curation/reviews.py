"""Reviews: two people label the same set member, and the set says where they agree.

A set can be assigned to a person (`sets.assigned_to`); each reviewer of a member records
their own failure category, failing step and note (`reviews` table, one row per set, episode
and reviewer, a later review of theirs replacing the earlier one). A member's review state:

- `to review`: fewer than two people have reviewed it;
- `agreed`: two or more have, all with the same category and failing step;
- `disputed`: two or more have, and they differ (each label is listed, so the set's page
  shows them side by side).

The member's own fields (what `add_member` wrote) stay as they are: a review is a second
opinion, not an edit. Each review is also an audit row.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, get_args

from episodelake.lake.curation import curation, fields
from episodelake.lake.ops import audit
from episodelake.lake.storage import layout, schema
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.lake import Lake

ReviewState = Literal["to review", "agreed", "disputed"]
REVIEW_STATES: tuple[ReviewState, ...] = get_args(ReviewState)
#: Reviews needed before a member is agreed or disputed.
QUORUM = 2


def review(lake: Lake, set_id: str, episode_id: str, reviewer: str | None, *, failure_category: str | None = None,
           failing_step: int | None = None, note: str | None = None) -> dict:
    """Record `reviewer`'s review of a member (replacing their earlier one)."""
    if not reviewer:
        raise InvalidInput("reviewer: a review needs a name (sign in, or name the reviewer)")
    curation.member(lake, layout.check_id(set_id, "set_id"), episode_id)  # a live member, or NotFound
    name = reviewer[:fields.MAX_NAME]
    row = {"set_id": set_id, "episode_id": episode_id, "reviewer": name,
           "failure_category": None if failure_category is None
           else fields.choice(failure_category, "failure_category", schema.FAILURE_CATEGORIES),
           "failing_step": fields.step(lake, episode_id, failing_step, "failing_step"),
           "note": fields.text(note, "note"), "reviewed_at": datetime.now(UTC)}
    lake.upsert("reviews", [row], audited=lambda before: [audit.entry(
        name, "review.put", "reviews", f"{set_id}/{episode_id}/{name}", before[0], row, episode_id=episode_id)])
    return row


def of_member(lake: Lake, set_id: str, episode_id: str) -> list[dict]:
    return lake.sql("SELECT * FROM reviews WHERE set_id = ? AND episode_id = ? ORDER BY reviewed_at",
                    [set_id, episode_id]).to_pylist()


def state(reviews: list[dict]) -> ReviewState:
    """A member's review state from its reviews (see the module docstring)."""
    if len(reviews) < QUORUM:
        return "to review"
    labels = {(r["failure_category"], r["failing_step"]) for r in reviews}
    return "agreed" if len(labels) == 1 else "disputed"


def members(lake: Lake, set_id: str) -> list[dict]:
    """A set's live members (as `curation.members`), each with its reviews and review state."""
    rows = curation.members(lake, set_id)
    by_member: dict[str, list[dict]] = {}
    for r in lake.sql("SELECT * FROM reviews WHERE set_id = ? ORDER BY reviewed_at", [set_id]).to_pylist():
        by_member.setdefault(r["episode_id"], []).append(r)
    return [{**m, "reviews": by_member.get(m["episode_id"], []),
             "review_state": state(by_member.get(m["episode_id"], []))} for m in rows]
