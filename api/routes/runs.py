"""Runs from the `runs` table (training iterations, re-runs, rollouts): their metrics over time.

The trainer writes one row per iteration with its metrics as JSON; which keys a run has
depends on the trainer's version and options, so nothing here assumes any: every number in
a row's metrics becomes a series (nested keys joined with '.', e.g. `update.loss`), and a
key an iteration lacks is null there. Non-finite numbers (a NaN loss) are null too, since
JSON has no NaN.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

from fastapi import APIRouter, Query

from episodelake.api.deps import LakeDep
from episodelake.api.models import RunDetail, RunSummary
from episodelake.lake.errors import NotFound
from episodelake.lake.layout import check_id

router = APIRouter(tags=["runs"])


def finite(value: Any) -> Any:
    """`value` with every non-finite float inside it replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def parse_object(text: str | None) -> dict | None:
    """A JSON object column; anything else (null, foreign data) is wrapped, never an error."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return {"unparsed": text}
    return finite(value) if isinstance(value, dict) else {"value": finite(value)}


def numbers(metrics: dict | None, prefix: str = "") -> dict[str, float | None]:
    """Every number in `metrics`, nested keys joined with '.'; lists and text are left out."""
    out: dict[str, float | None] = {}
    for key, value in (metrics or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(numbers(value, f"{name}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
        elif value is None:
            out[name] = None
    return out


@router.get("/runs", response_model=list[RunSummary])
def runs(
    lake: LakeDep,
    kind: Annotated[str | None, Query(max_length=50, description="train | rerun | rollout")] = None,
) -> list[dict]:
    """Every run, most recently updated first, with its last iteration's numbers."""
    where, params = ("WHERE kind = ?", [kind]) if kind is not None else ("", [])
    rows = lake.sql(f"""
        SELECT run_id, arg_max(kind, iteration) AS kind, count(*) AS iterations,
               max(iteration) AS last_iteration, min(created_at) AS started_at,
               max(created_at) AS updated_at, arg_max(metrics, iteration) AS metrics
        FROM runs {where} GROUP BY run_id ORDER BY updated_at DESC NULLS LAST, run_id
    """, params).to_pylist()
    return [{**r, "last_metrics": numbers(parse_object(r.pop("metrics")))} for r in rows]


@router.get("/runs/{run_id}", response_model=RunDetail)
def run(lake: LakeDep, run_id: str) -> dict:
    """A run's iterations in order with their metrics, and each numeric metric as a series."""
    check_id(run_id, "run_id")
    rows = lake.sql("SELECT iteration, kind, config, metrics, created_at FROM runs WHERE run_id = ? "
                    "ORDER BY iteration", [run_id]).to_pylist()
    if not rows:
        raise NotFound(f"no run {run_id!r}; GET /api/runs lists them")
    iterations = [{"iteration": r["iteration"], "created_at": r["created_at"],
                   "metrics": parse_object(r["metrics"]) or {}} for r in rows]
    flat = [numbers(it["metrics"]) for it in iterations]
    keys = sorted({k for f in flat for k in f})
    return {"run_id": run_id, "kind": rows[-1]["kind"], "config": parse_object(rows[-1]["config"]),
            "iterations": iterations, "series": {k: [f.get(k) for f in flat] for k in keys}}
