"""Shared helpers for benchmarks: timing, percentiles and one line per result.

Absolute times on shared machines are noisy, so every benchmark measures its baseline in the
same run and prints the ratio; results lines start with the benchmark name so the
benchmark table (docs/benchmarks.md) can be copied from the output.
"""

from __future__ import annotations

import os
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


class CpuUse:
    """CPU use over a stretch of a benchmark, read from /proc (Linux): the share of all the
    machine's cores that were busy, and the CPU seconds one process (a store's server) took
    per wall second. A ratio that will not grow with writers on a saturated machine says so
    here rather than being read as the product's limit."""

    def __init__(self, pid: int | None = None):
        self.pid = pid
        self._start = (time.perf_counter(), *_machine_jiffies(), _process_cpu_s(pid))

    def read(self) -> dict[str, float]:
        wall, busy, total, proc = time.perf_counter(), *_machine_jiffies(), _process_cpu_s(self.pid)
        wall0, busy0, total0, proc0 = self._start
        out = {"machine_busy": (busy - busy0) / max(total - total0, 1)}
        if self.pid is not None:
            out["store_cpu_s"] = proc - proc0
            out["store_cpu_s_per_s"] = (proc - proc0) / max(wall - wall0, 1e-9)
        return out


def _machine_jiffies() -> tuple[int, int]:
    """(busy, total) clock ticks of all cores since boot (/proc/stat's first line)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _process_cpu_s(pid: int | None) -> float:
    if pid is None:
        return 0.0
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
