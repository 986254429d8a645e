"""Group commit: concurrent small writes into one table of one lake share a Lance commit.

A Lance commit costs the same for one row as for fifty (a manifest written, the key index
consulted), and commits to one table are serialised anyway (each a conditional write of the
next manifest). So when twenty curators save at once, one commit per save means the last
waits for nineteen. Here the first caller to arrive for a table becomes its *leader*: it
takes every row queued for the table so far (its own included) and commits them as one;
callers arriving meanwhile queue, and when the commit ends the first of them leads the next
round with everything queued by then. Each caller returns when the commit holding its rows
is durable, or raises that commit's error, exactly as if it had committed alone.

Writes of one round reach the commit function in their arrival order, so two writes of one
key in a round end as the later one (`tables.dedupe_last`), as they would have one after the
other. A round holds what arrived while the one before committed: a lone caller commits at
once, without waiting to gather company. What a write is (rows, rows with the audit entries
they need) is the commit function's business: the queue only orders and hands them over.
The commit function may also answer each write on its own (`Outcome`): a value for its
caller, or an error for that caller alone (a write refused by a check made in the round,
whose rows it left out), while the others' rows are stored.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

W = TypeVar("W")

#: What a commit function answers one write: its caller's return value, or an exception
#: raised in that caller only.
Outcome = Any


@dataclass(eq=False)
class _Waiting(Generic[W]):
    write: W
    done: threading.Event = field(default_factory=threading.Event)
    lead: bool = False
    error: BaseException | None = None
    outcome: Outcome = None

    def settle(self) -> Outcome:
        """This write's answer once its round ended: the round's error, its own, or its value."""
        if self.error is not None:
            raise self.error
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


class GroupCommit(Generic[W]):
    """The queues of one lake's tables (see the module docstring); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[Hashable, list[_Waiting[W]]] = {}
        self._busy: set[Hashable] = set()
        #: rounds committed and writes they held, for benchmarks and tests
        self.rounds = 0
        self.writes = 0

    def submit(self, key: Hashable, write: W,
               commit: Callable[[Sequence[W]], Sequence[Outcome] | None]) -> Outcome:
        """Commit `write` with whatever else is queued under `key` (a table and a kind of
        write); `commit` stores a round's writes, in arrival order, as one version, and may
        return one outcome per write (see the module docstring). Returns once durable, with
        this write's outcome (None when `commit` gave none)."""
        me = _Waiting(write)
        with self._lock:
            self._queues.setdefault(key, []).append(me)
            if key not in self._busy:
                self._busy.add(key)
                me.lead = True
        if not me.lead:
            me.done.wait()
            if not me.lead:  # committed in another caller's round
                return me.settle()
        with self._lock:
            batch = self._queues.pop(key)
        error: BaseException | None = None
        try:
            outcomes = commit([w.write for w in batch])
        except BaseException as exc:  # every caller of the round gets it, this one too
            error = exc
        else:
            for waiting, outcome in zip(batch, outcomes or [None] * len(batch), strict=True):
                waiting.outcome = outcome
        with self._lock:
            self.rounds += 1
            self.writes += len(batch)
            following = self._queues.get(key)
            if following:
                following[0].lead = True
                following[0].done.set()
            else:
                self._busy.discard(key)
        for waiting in batch:
            waiting.error = error
            if waiting is not me:
                waiting.done.set()
        return me.settle()
