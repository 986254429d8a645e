"""The `runs` table read back: one row per iteration of a training run (and one per re-run or
rollout), its config and metrics as JSON text as the writer stored them.

These answer what a run is and how it went; reading the JSON (which keys a run has depends
on the trainer's version and options) is the caller's."""

from __future__ import annotations

from episodelake.lake.storage.lake import Lake


def run_summaries(lake: Lake, kind: str | None = None) -> list[dict]:
    """Every run (of `kind`: train, rerun, rollout; every kind when None), most recently
    updated first: its kind, iterations counted from 0 (an SFT warm-up's iteration -1 is
    not one), last iteration, start and update times, and its last iteration's metrics and
    config (JSON text)."""
    where, params = ("WHERE kind = ?", [kind]) if kind is not None else ("", [])
    return lake.sql(f"""
        SELECT run_id, arg_max(kind, iteration) AS kind,
               count(*) FILTER (WHERE iteration >= 0) AS iterations,
               max(iteration) AS last_iteration, min(created_at) AS started_at,
               max(created_at) AS updated_at, arg_max(metrics, iteration) AS metrics,
               arg_max(config, iteration) AS config
        FROM runs {where} GROUP BY run_id ORDER BY updated_at DESC NULLS LAST, run_id
    """, params).to_pylist()


def training_iterations(lake: Lake) -> list[dict]:
    """Every iteration of every training run (run_id, iteration, config, metrics), by run
    and iteration: what comparing runs over their seeds reads."""
    return lake.sql("SELECT run_id, iteration, config, metrics FROM runs WHERE kind = 'train' "
                    "ORDER BY run_id, iteration").to_pylist()


def run_iterations(lake: Lake, run_id: str) -> list[dict]:
    """One run's iterations in order (iteration, kind, config, metrics, created_at); empty for
    a run the lake does not have."""
    return lake.sql("SELECT iteration, kind, config, metrics, created_at FROM runs WHERE run_id = ? "
                    "ORDER BY iteration", [run_id]).to_pylist()
