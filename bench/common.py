"""Shared helpers for benchmarks: timing, percentiles and one line per result.

Absolute times on shared machines are noisy, so every benchmark measures its baseline in the
same run and prints the ratio; results lines start with the benchmark name so the
benchmark table (docs/benchmarks.md) can be copied from the output.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def latencies_ms(fn: Callable[[], object], n: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def p50(values: list[float]) -> float:
    return statistics.median(values)


def line(name: str, **fields) -> None:
    parts = [f"{name:<34}"]
    for key, value in fields.items():
        if isinstance(value, float):
            value = f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"
        parts.append(f"{key} {value}")
    print("  ".join(parts), flush=True)


@contextmanager
def workdir(prefix: str):
    """A scratch folder on the same disk as the lake would be, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"elake-{prefix}-") as d:
        yield Path(d)
