"""Seeds derived from a run's seed, the same in every process and Python version.

A batch, an episode or a training step gets its seed from its parent's and the names of
where it sits (`derive(run_seed, "rollout", group, k)`), so a run replays exactly from its
one configured seed whichever worker runs each part. Arithmetic on seeds (`seed * P + i`)
lets two different places collide (seed 1, part 0 is seed 0, part P) and Python's `hash()`
of a string changes per process; a SHA-256 of the parts does neither.
"""

from __future__ import annotations

import hashlib

#: Derived seeds stay below 2**53: they are stored in `episodes.extra` (JSON), and a web
#: page reads JSON integers exactly only up to that.
SEED_BITS = 53


def _digest(seed: int, parts: tuple[object, ...]) -> int:
    text = "\0".join(str(p) for p in (seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def derive(seed: int, *parts: str | int) -> int:
    """The seed of the child named `parts` under `seed`, in 0..2**53-1; distinct parts give
    independent seeds. Parts are named by their text (0 and "0" are one part)."""
    return _digest(seed, parts) >> (64 - SEED_BITS)


def fraction(seed: int, *parts: str | int) -> float:
    """A number in [0, 1) fixed by `seed` and `parts`: a seeded coin for one decision (which
    split a task falls in) that no other decision's draws can shift."""
    return _digest(seed, parts) / 2**64
