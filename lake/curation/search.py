"""Full-text search over what was on the screen, what the agent thought and answered, and the
task's goal.

Each searchable field is a text column with a Lance inverted (BM25) index: `ocr_text` (the
screen's text, filled by `elake enrich --what ocr`), `thinking` and `model_response` of
`steps`, `task_goal` of `episodes`. `refresh_indexes` builds a missing index and folds rows
that arrived since into an existing one (Lance's `optimize_indices`); enrichment calls it
when it has written, and `Lake.optimize` and every compaction fold new rows into all indexes
too (`tables.update_indexes`). Rows the index does not cover yet (steps recorded since, fragments whose
OCR columns were written after the build) are still found: Lance searches them by a flat
scan beside the index, so an index only ever makes a search faster, never shorter.

A query matches rows holding every word of it (stemmed, lower-cased, stop words dropped: the
index's English tokenizer). `where` narrows hits with an SQL condition over the columns of
`episodes e JOIN steps s USING (episode_id)`, run in the lake's SQL sandbox like every
condition a page may send; a goal hit (an episode, no step) is kept when a step of its
episode meets the condition.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass

import lance
from lance.query import FullTextOperator, MatchQuery

from episodelake.lake.storage import schema, tables
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.sql import sql_in

#: Searchable fields: the name a hit reports -> (table, column).
FIELDS: dict[str, tuple[str, str]] = {
    "screen": ("steps", "ocr_text"),
    "thinking": ("steps", "thinking"),
    "response": ("steps", "model_response"),
    "goal": ("episodes", "task_goal"),
}
#: Matches read per field before `where` and ranking: a condition filters the best of these.
MAX_CANDIDATES = 10_000
MAX_LIMIT = 1_000
MAX_QUERY = 500
SNIPPET_CHARS = 80
WHERE_TIMEOUT_S = 10.0
_WORD = re.compile(r"\w+", re.UNICODE)


def index_name(column: str) -> str:
    return f"{column}_fts"


@dataclass
class Hit:
    """One row whose field holds every word of the query; `boxes` are the OCR lines of the
    screenshot that hold one of them (a `screen` hit), to draw on the image, and `terms` the
    words of the field that matched, as written there (lower-cased), to highlight in its text:
    the index matched stems, so "failed" is what to mark for the query "failing"."""

    episode_id: str
    step: int | None
    field: str
    snippet: str
    score: float
    boxes: list[dict] = dataclasses.field(default_factory=list)
    terms: list[str] = dataclasses.field(default_factory=list)


def refresh_indexes(lake: Lake) -> dict[str, str]:
    """Build each field's index where it is missing, or add the rows it does not cover yet;
    returns column -> `built` | `updated` | `empty` (no rows to index yet)."""
    lake.check_writable()
    out = {}
    for table, column in FIELDS.values():
        out[column] = tables.retry_commit(f"index {table}.{column}",
                                          functools.partial(_refresh, lake, table, column))
    lake.invalidate()
    return out


def _refresh(lake: Lake, table: str, column: str) -> str:
    ds = tables.open_table(lake.path, table)
    if ds.count_rows(filter=f"{column} IS NOT NULL") == 0:
        return "empty"
    name = index_name(column)
    if tables.has_index(ds, name):
        ds.optimize.optimize_indices(index_names=[name])
        return "updated"
    ds.create_scalar_index(column, "INVERTED", name=name, with_position=False)
    return "built"


def search(lake: Lake, query: str, *, where: str | None = None, limit: int = 20,
           fields: tuple[str, ...] | None = None, episode_id: str | None = None) -> list[Hit]:
    """The best `limit` hits for `query` over `fields` (default all), best first; `episode_id`
    keeps one episode's, filtered inside the index search (before its candidate cap, which
    `where` comes after), so an episode's hits are all found however common the words are."""
    words = _words(query)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be 1..{MAX_LIMIT}, not {limit}")
    chosen = fields or tuple(FIELDS)
    unknown = [f for f in chosen if f not in FIELDS]
    if unknown:
        raise InvalidInput(f"fields: unknown {unknown}; searchable: {', '.join(FIELDS)}")
    hits: list[Hit] = []
    for name in chosen:
        table, column = FIELDS[name]
        hits += _field_hits(lake.dataset(table), name, table, column, query, words, episode_id)
    if where is not None and where.strip():
        hits = _within(lake, hits, where)
    hits.sort(key=lambda h: (-h.score, h.episode_id, h.step if h.step is not None else -1, h.field))
    return hits[:limit]


def _words(query: str) -> list[str]:
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("q: give the words to search for")
    if len(query) > MAX_QUERY:
        raise InvalidInput(f"q: at most {MAX_QUERY} characters, not {len(query)}")
    words = [w.lower() for w in _WORD.findall(query)]
    if not words:
        raise InvalidInput(f"q: {query!r} holds no word to search for")
    return words


def _field_hits(ds: lance.LanceDataset, name: str, table: str, column: str, query: str,
                words: list[str], episode_id: str | None = None) -> list[Hit]:
    if column not in ds.schema.names:
        return []  # a lake opened read-only before the column existed
    keys = list(schema.KEYS[table])
    extra = ["ocr_boxes"] if column == "ocr_text" else []
    found = ds.to_table(columns=[*keys, column, *extra, "_score"], limit=MAX_CANDIDATES,
                        full_text_query=MatchQuery(query, column, operator=FullTextOperator.AND),
                        filter=None if episode_id is None else sql_in("episode_id", [episode_id]),
                        prefilter=episode_id is not None)
    hits = []
    for row in found.to_pylist():
        text = row[column] or ""
        boxes = [b for b in row.get("ocr_boxes") or [] if _holds(b["text"], words)]
        hits.append(Hit(row["episode_id"], row.get("step"), name, snippet(text, words),
                        float(row["_score"]), boxes, matched_terms(text, words)))
    return hits


def _holds(text: str | None, words: list[str]) -> bool:
    """Whether `text` holds one of `words`, or a word sharing its stem (the index matched
    "failed" for "failing"): a common start of at least four letters counts."""
    for token in _WORD.findall((text or "").lower()):
        for word in words:
            stem = min(len(word), max(4, len(word) - 3))
            if token == word or (len(token) >= 4 and token[:stem] == word[:stem]):
                return True
    return False


def matched_terms(text: str, words: list[str]) -> list[str]:
    """The distinct words of `text` that match the query's `words` (see `_holds`), lower-cased."""
    return sorted({t for t in _WORD.findall(text.lower()) if _holds(t, words)})


def snippet(text: str, words: list[str], width: int = SNIPPET_CHARS) -> str:
    """The part of `text` around its first matching word, on one line."""
    flat = " ".join(text.split())
    at = 0
    for match in _WORD.finditer(flat):
        if _holds(match.group(0), words):
            at = match.start()
            break
    start = max(0, at - width // 3)
    end = min(len(flat), start + width)
    return ("..." if start else "") + flat[start:end] + ("..." if end < len(flat) else "")


def matching_steps(lake: Lake, where: str, episode_ids: list[str], *,
                   timeout_s: float = WHERE_TIMEOUT_S) -> set[tuple[str, int]]:
    """(episode_id, step) of the steps of `episode_ids` meeting a caller's SQL condition over
    `episodes e JOIN steps s USING (episode_id)`, checked and run in the sandbox
    (`Lake.matching`)."""
    table = lake.matching("SELECT episode_id, step FROM episodes e JOIN steps s USING (episode_id)", where,
                          flag="where", also=sql_in("episode_id", episode_ids), timeout_s=timeout_s)
    return set(zip(table["episode_id"].to_pylist(), table["step"].to_pylist(), strict=True))


def _within(lake: Lake, hits: list[Hit], where: str) -> list[Hit]:
    # run even when nothing matched, so a bad condition is an error whatever the words
    steps = matching_steps(lake, where, sorted({h.episode_id for h in hits}))
    episodes = {e for e, _ in steps}
    return [h for h in hits if (h.episode_id, h.step) in steps
            or (h.step is None and h.episode_id in episodes)]
