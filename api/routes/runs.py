"""Runs from the `runs` table (training iterations, re-runs, rollouts): their metrics over time.

The trainer writes one row per iteration with its metrics as JSON (and a run with an SFT
warm-up one more, at iteration -1 with kind `sft_warmup`, its metrics under `sft_warmup`:
the listing does not count it as an iteration); which keys a run has
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

from episodelake.api.deps import IdPath, LakeDep
from episodelake.api.models import RunDetail, RunsOverSeeds, RunSummary
from episodelake.lake.ops import runs as lake_runs
from episodelake.lake.storage.errors import InvalidInput, NotFound
from episodelake.lake.storage.layout import check_id
from episodelake.trainer import learning_stats as stats
from episodelake.trainer.config import RESUMABLE

#: Settings that neither make runs different experiments nor change their results: runs
#: differing only in these are one arm, seen over its seeds.
NOT_AN_ARM = RESUMABLE | {"seed"}

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


#: The settings the runs table shows as columns (the rest: `config`), with their types: a
#: value of another type (foreign data) is shown as missing, never an error.
RUN_COLUMNS: dict[str, type] = {"algo": str, "policy": str, "seed": int}


def _typed(value: object, kind: type) -> object:
    return value if isinstance(value, kind) and not isinstance(value, bool) else None


@router.get("/runs", response_model=list[RunSummary])
def runs(
    lake: LakeDep,
    kind: Annotated[str | None, Query(max_length=50, description="train | rerun | rollout")] = None,
) -> list[dict]:
    """Every run, most recently updated first, with its last iteration's numbers."""
    rows = lake_runs.run_summaries(lake, kind)
    out = []
    for r in rows:
        config = parse_object(r.pop("config")) or {}
        settings = flat_settings(config)  # `algo` is stored under `advantages` since they have their model
        out.append({**r, "last_metrics": numbers(parse_object(r.pop("metrics"))), "config": config,
                    **{key: _typed(settings.get(key), kind) for key, kind in RUN_COLUMNS.items()}})
    return out



@router.get("/runs/over-seeds", response_model=RunsOverSeeds)
def runs_over_seeds(
    lake: LakeDep,
    metric: Annotated[str, Query(max_length=200, description="a metric key, nested keys joined "
                                 "with '.'")] = "eval_success_rate",
) -> dict:
    """Training runs grouped into arms (same settings but the seed), each arm's metric per
    iteration as a mean with its 95% interval over the runs: how an algorithm or a setting
    does beyond one seed's luck (what `bench/bench_learning.py --seeds N` prints)."""
    rows = lake_runs.training_iterations(lake)
    by_run: dict[str, dict[str, Any]] = {}
    for r in rows:
        run = by_run.setdefault(r["run_id"], {"points": {}})
        run["config"] = parse_object(r["config"]) or {}
        run["points"][r["iteration"]] = numbers(parse_object(r["metrics"])).get(metric)
    if rows and not any(v is not None for run in by_run.values() for v in run["points"].values()):
        raise InvalidInput(f"metric: no training run recorded {metric!r}; GET /api/runs/RUN_ID "
                           "lists a run's metrics under `series`")
    arms: dict[str, dict[str, Any]] = {}
    for run_id, run in by_run.items():
        settings = {k: v for k, v in flat_settings(run["config"]).items() if k not in NOT_AN_ARM}
        arm = arms.setdefault(json.dumps(settings, sort_keys=True), {"settings": settings, "runs": []})
        arm["runs"].append((run["config"].get("seed"), run_id, run["points"]))
    differing = _differing(arm["settings"] for arm in arms.values())
    out = [_arm(arm, differing) for arm in arms.values()]
    out.sort(key=lambda a: (-len(a["runs"]), a["label"]))
    return {"metric": metric, "arms": out}


def flat_settings(config: dict) -> dict[str, Any]:
    """A stored config's settings by flag name: the advantage settings (stored under
    `advantages`) beside the others, as `TrainConfig.settings()` names them."""
    advantages = config.get("advantages")
    rest = {k: v for k, v in config.items() if k != "advantages"}
    return {**rest, **advantages} if isinstance(advantages, dict) else rest


def _differing(settings: Any) -> list[str]:
    """The settings whose values are not the same in every arm, `algo` first."""
    all_settings = list(settings)
    keys = sorted({k for s in all_settings for k in s})
    varied = [k for k in keys if len({json.dumps(s.get(k)) for s in all_settings}) > 1]
    return sorted(set(varied) | {"algo"}, key=lambda k: (k != "algo", k))


def _arm(arm: dict[str, Any], differing: list[str]) -> dict[str, Any]:
    runs = sorted(arm["runs"], key=lambda r: (r[0] is None, r[0], r[1]))
    iterations = sorted({i for _, _, points in runs for i in points})
    curves = [[points.get(i) for i in iterations] for _, _, points in runs]
    per_iteration = []
    for column in zip(*curves, strict=True):
        values = [v for v in column if v is not None]
        per_iteration.append(_interval(stats.mean_interval(values)) if values else None)
    finals = [stats.final(values) for values in ([v for v in c if v is not None] for c in curves) if values]
    kept = [(i, p) for i, p in zip(iterations, per_iteration, strict=True) if p is not None]
    label = " ".join(f"{k}={arm['settings'].get(k)}" for k in differing)
    return {"label": label, "settings": arm["settings"], "runs": [r[1] for r in runs],
            "seeds": [r[0] for r in runs], "iterations": [i for i, _ in kept],
            "per_iteration": [p for _, p in kept],
            "curves": [[c[iterations.index(i)] for i, _ in kept] for c in curves],
            "final": _interval(stats.mean_interval(finals)) if finals else None}


def _interval(interval: stats.Interval) -> dict[str, Any]:
    return {"mean": interval.mean, "low": interval.low, "high": interval.high, "n": interval.n}


@router.get("/runs/{run_id}", response_model=RunDetail)
def run(lake: LakeDep, run_id: IdPath) -> dict:
    """A run's iterations in order with their metrics, and each numeric metric as a series."""
    check_id(run_id, "run_id")
    rows = lake_runs.run_iterations(lake, run_id)
    if not rows:
        raise NotFound(f"no run {run_id!r}; GET /api/runs lists them")
    iterations = [{"iteration": r["iteration"], "created_at": r["created_at"],
                   "metrics": parse_object(r["metrics"]) or {}} for r in rows]
    flat = [numbers(it["metrics"]) for it in iterations]
    keys = sorted({k for f in flat for k in f})
    return {"run_id": run_id, "kind": rows[-1]["kind"], "config": parse_object(rows[-1]["config"]),
            "iterations": iterations, "series": {k: [f.get(k) for f in flat] for k in keys}}
