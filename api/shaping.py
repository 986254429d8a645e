"""How the API shapes what it answers, shared by every routes module: a stored row as the
API sends it (`episode_out`, `step_out`), the address of a step's screenshot (`image_url`),
and the simulated phone's policies a request may start (`SIM_POLICIES`). The request
parameters several resources take alike (`IdPath`, `StepNo`, `StepsWhere`) are in `api/deps`.

The routes modules are independent of each other (an import contract in pyproject.toml):
what two of them share lives here, never in one of them for the other to borrow.
"""

from __future__ import annotations

import json

from episodelake.lake.vocab import overlay

#: The simulated phone's own policies: the only ones a web request may start (re-runs,
#: branches); a model endpoint's URL is the command line's to give, not a request's.
SIM_POLICIES = ("oracle", "noisy", "random")


def image_url(episode_id: str, step: int) -> str:
    """Where the API serves a step's screenshot."""
    return f"/api/episodes/{episode_id}/steps/{step}/image"


def parse_json(text: str | None, field: str) -> dict | None:
    """A JSON text column as an object; anything else (old or foreign data) is wrapped."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return {"unparsed": text, "field": field}
    return value if isinstance(value, dict) else {"value": value}


def episode_out(row: dict) -> dict:
    """An episodes row as the API sends it: its `extra` JSON text as an object."""
    return {**row, "extra": parse_json(row.get("extra"), "extra")}


def step_out(row: dict) -> dict:
    """A steps row as the API sends it, with the one description of its action that the web
    app's overlay and the annotated screenshot both draw."""
    out = {**row, "action": parse_json(row.get("action"), "action"),
           "image_url": image_url(row["episode_id"], row["step"]) if row.get("image_format") else None}
    out["action_view"] = overlay.describe_step(out)
    return out
