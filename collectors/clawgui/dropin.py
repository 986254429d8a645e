"""The ClawGUI-RL drop-in: the reference's recording functions, writing to the lake.

Replace the reference's import with

    from episodelake.collectors.clawgui import save_episode_to_json, update_episode_result

and every call records into the lake instead of rewriting `episode.json`. Same names,
arguments and meaning; the lake is `$ELAKE_LAKE`, else the `save_dir` passed, else
`./elake-data`. Two deliberate differences: bad input raises `InvalidInput` instead of being
printed and swallowed, and images are stored as received instead of decoded and re-encoded.

Like every recorder, the drop-in's keys its own screenshots on a background thread after
they are committed; `ELAKE_RECORDER_ENRICH=0` turns that thread off (a rollout machine short
of CPU), leaving the keys to a server's worker, the trainer or `elake enrich`.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from datetime import datetime

from episodelake.collectors.clawgui.importer import (
    DEFAULT_GROUP_WINDOW_MIN,
    GROUP_WINDOW_ENV,
    GroupDeriver,
)
from episodelake.collectors.record.recorder import Recorder, field_value, now
from episodelake.lake.storage.errors import Conflict, InvalidInput, NotFound
from episodelake.lake.storage.store import LAKE_ENV, location

log = logging.getLogger(__name__)

REFERENCE_SAVE_DIR = "./clawgui-rl/episode"
#: "0", "off", "false" or "no": the drop-in's recorders run no background enrichment thread
RECORDER_ENRICH_ENV = "ELAKE_RECORDER_ENRICH"
_OFF = ("0", "off", "false", "no")
_ON = ("1", "on", "true", "yes")

_recorders: dict[str, Recorder] = {}
_recorders_lock = threading.Lock()


def _recorder(save_dir: str | None) -> Recorder:
    path = os.environ.get(LAKE_ENV) or (save_dir if save_dir and save_dir != REFERENCE_SAVE_DIR else None) or "./elake-data"
    key = str(location(path).resolve())  # a folder or an object store's URI
    with _recorders_lock:
        rec = _recorders.get(key)
        if rec is None:
            rec = _recorders[key] = Recorder(key, env="clawgui", background_enrich=_enrich_in_background())
        return rec


def _enrich_in_background() -> bool:
    text = os.environ.get(RECORDER_ENRICH_ENV, "1").strip().lower()
    if text not in _OFF + _ON:
        raise InvalidInput(f"${RECORDER_ENRICH_ENV}: {text!r} is neither of {'/'.join(_ON)} nor "
                           f"{'/'.join(_OFF)}")
    return text in _ON


_drop_in_groups: GroupDeriver | None = None


def _drop_in_group(task_name: str | None, started: datetime) -> str | None:
    """The episode group of a drop-in episode: the reference keeps its group uid to itself,
    so rollouts of one task started within the window share a group, as an import would
    place them (window: `$ELAKE_CLAWGUI_WINDOW_MIN`, else 10 minutes)."""
    global _drop_in_groups
    with _recorders_lock:
        if _drop_in_groups is None:
            text = os.environ.get(GROUP_WINDOW_ENV) or str(DEFAULT_GROUP_WINDOW_MIN)
            try:
                window = float(text)
            except ValueError:
                raise InvalidInput(f"${GROUP_WINDOW_ENV}: {text!r} is not a number of minutes") from None
            _drop_in_groups = GroupDeriver("task-window", window)
        deriver = _drop_in_groups
    return deriver.assign(task_name or "", started)[0]


@atexit.register
def close_recorders() -> None:
    """Commit everything the drop-in functions recorded (also runs at interpreter exit)."""
    with _recorders_lock:
        for rec in _recorders.values():
            rec.close()
        _recorders.clear()


def save_episode_to_json(obs_images, text_actions, task_name, task_goal, episode_id,
                         save_dir: str = REFERENCE_SAVE_DIR, step_number: int = 0,
                         step_reward: float | None = None, step_reward_reason: str | None = None) -> str:
    """Record step `step_number` of an episode (one base64 PNG and one response per call).

    Returns the lake folder the step went to (the reference returned its JSON path).
    """
    images = list(obs_images) if isinstance(obs_images, (list, tuple)) else [obs_images]
    actions = list(text_actions) if isinstance(text_actions, (list, tuple)) else [text_actions]
    if len(images) != 1 or len(actions) != 1:
        raise InvalidInput(
            f"obs_images/text_actions: expected one image and one response per call, got {len(images)} and {len(actions)}"
        )
    rec = _recorder(save_dir)
    handle = rec.episode(episode_id)
    if handle is None:  # the first call, or the first after a restart: continue what is stored
        started = now()
        handle = rec.start_episode(task_name or "", task_goal or "No goal specified", episode_id=episode_id,
                                   group_id=_drop_in_group(task_name, started), created_at=started,
                                   resume=True)
    handle.log_step(images[0], actions[0], step=step_number, step_reward=step_reward,
                    step_reward_reason=step_reward_reason)
    return str(rec.lake.path)


def update_episode_result(task_name, episode_id, eval_score, eval_reason, episode_reward,
                          episode_length, save_dir: str = REFERENCE_SAVE_DIR) -> bool:
    """Fill an episode's final result. Returns False (with a warning) for an unknown episode.

    An episode recorded before a restart is resumed to take its result. A result is given
    once: the same result again is accepted (a retried call), a different one for a finished
    episode is a `Conflict`, never a silent overwrite of what was judged.
    """
    rec = _recorder(save_dir)
    score = 0.0 if eval_score is None else field_value("episodes", "eval_score", eval_score)
    result = dict(success=score > 0, eval_score=score, eval_reason=eval_reason or "",
                  episode_reward=episode_reward, episode_length=episode_length)
    handle = rec.episode(episode_id)
    if handle is None:
        rec.flush()  # an episode this recorder finished may still wait in its writer
        try:
            stored = rec.lake.episode(episode_id)
        except NotFound:
            log.warning("update_episode_result: episode %s of task %r is not in the lake %s",
                        episode_id, task_name, rec.lake.path)
            return False
        try:
            handle = rec.start_episode(stored["task_name"], episode_id=episode_id, resume=True)
        except Conflict:
            stored = rec.lake.episode(episode_id)
            if stored["status"] == "finished" and all(
                    value is None or stored[name] == value for name, value in result.items()):
                return True
            raise
    handle.finish(**result)
    return True
