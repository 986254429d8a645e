"""Group commit: concurrent small writes into one table of one lake share a Lance commit.

A Lance commit costs the same for one row as for fifty (a manifest written, the key index
consulted), and commits to one table are serialised anyway (each a conditional write of the
next manifest). So when twenty curators save at once, one commit per save means the last
waits for nineteen. Here the first caller to arrive for a table becomes its *leader*: it
takes every row queued for the table so far (its own included) and commits them as one;
callers arriving meanwhile queue, and when the commit ends the first of them leads the next
round with everything queued by then. Each caller returns when the commit holding its rows
is durable, or raises that commit's error, exactly as if it had committed alone.

Rows of one round keep their arrival order, so two writes of one key in a round end as the
later one (`tables.dedupe_last`), as they would have one after the other. A round holds what
arrived while the one before committed: a lone caller commits at once, without waiting to
gather company.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import pyarrow as pa


@dataclass(eq=False)
class _Waiting:
    rows: pa.Table
    done: threading.Event = field(default_factory=threading.Event)
    lead: bool = False
    error: BaseException | None = None


class GroupCommit:
    """The queues of one lake's tables (see the module docstring); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[Hashable, list[_Waiting]] = {}
        self._busy: set[Hashable] = set()
        #: rounds committed and rows they held, for benchmarks and tests
        self.rounds = 0
        self.rows = 0

    def submit(self, key: Hashable, rows: pa.Table, commit: Callable[[pa.Table], None]) -> None:
        """Commit `rows` with whatever else is queued under `key` (a table and a kind of
        write); `commit` writes one Arrow table as one version. Returns once durable."""
        me = _Waiting(rows)
        with self._lock:
            self._queues.setdefault(key, []).append(me)
            if key not in self._busy:
                self._busy.add(key)
                me.lead = True
        if not me.lead:
            me.done.wait()
            if not me.lead:  # committed in another caller's round
                if me.error is not None:
                    raise me.error
                return
        with self._lock:
            batch = self._queues.pop(key)
        error: BaseException | None = None
        try:
            commit(batch[0].rows if len(batch) == 1 else pa.concat_tables([w.rows for w in batch]))
        except BaseException as exc:  # every caller of the round gets it, this one too
            error = exc
        with self._lock:
            self.rounds += 1
            self.rows += sum(w.rows.num_rows for w in batch)
            following = self._queues.get(key)
            if following:
                following[0].lead = True
                following[0].done.set()
            else:
                self._busy.discard(key)
        for waiting in batch:
            if waiting is not me:
                waiting.error = error
                waiting.done.set()
        if error is not None:
            raise error
