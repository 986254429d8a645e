"""Recorder: the one call per step that a rollout loop makes to put an episode in the lake.

```python
rec = Recorder("elake-data", run_id="run-7", policy_version="ckpt-40", env="sim")
with rec.start_episode("wifi_on", "Turn on Wi-Fi", group_id="g-12") as ep:
    ep.log_step(png_bytes, response_text, reward=0.0)
    ...
    ep.finish(success=True, eval_score=1.0)
rec.close()
```
A step is acknowledged when `log_step` returns: it is in the writer's spool by then, so a
crash loses nothing acknowledged. An exception inside the `with` block marks the episode
aborted and keeps its steps. What a step row needs that is cheap (the image's structure
checks and sha256, the parsed action, a UI tree's anchor key) is computed here, on the write
path. What costs a decode (the perceptual hash and the anchor key made from it) is derived
after the commit by a background worker (`lake.derive.derivations.BackgroundEnricher`), so
`log_step` never waits for one; `image_checks="decode"` computes them here instead.

Episode ids are keys across processes. `start_episode` refuses an id the lake already holds;
`resume=True` continues a stored, unfinished episode after its last stored step. While a
recorder holds an episode no other recorder, in any process, can start or resume it (see
`episodelake.lake.storage.claims`), so only one writer ever numbers an episode's steps, and the episode's rows still
go to Lance in the writer's batches (no commit per episode, none per step).

Every value is checked against the column it goes to (`field_value`) before anything is
written: a bad value is an `InvalidInput` naming the field, never an Arrow, PIL or
OverflowError escaping from deep inside, and never a row stored half right.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from episodelake.lake import Lake, WriterOptions
from episodelake.lake.derive.derivations import BackgroundEnricher
from episodelake.lake.derive.images import prepare_image
from episodelake.lake.storage import claims, layout, schema
from episodelake.lake.storage.errors import Conflict, InvalidInput, NotFound
from episodelake.lake.storage.layout import check_id
from episodelake.lake.storage.store import location
from episodelake.lake.storage.writer import check_spool, replay_orphans
from episodelake.lake.vocab.families import parse_response

log = logging.getLogger(__name__)

#: Finished episodes whose rows may still wait in the writer: past this many, the recorder
#: asks the writer's thread to commit at once (it never waits for it), so the claims they
#: hold (file descriptors on a local lake) stay bounded.
SETTLE_AFTER = 64
#: How long a resume waits for a dead recorder's spool to be replayed by another process.
REPLAY_WAIT_S = 30.0


class AnchorKeyer(Protocol):
    """Turns a step's screen into its anchor key (the GiGPO anchor state)."""

    def key(self, group_id: str, *, phash: int | None = None, ui_tree: str | None = None) -> str: ...


def now() -> datetime:
    return datetime.now(UTC)


def _show(value: object) -> str:
    """A short, always printable description of a caller's value for an error message."""
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__, or an int too long to print
        text = "<unprintable>"
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def _text(value: object, name: str) -> str | None:
    """Text fields must be valid UTF-8 strings (bytes are decoded strictly)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{name}: not valid UTF-8 ({exc})") from None
    if not isinstance(value, str):
        raise InvalidInput(f"{name}: expected text, not {_show(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{name}: not valid UTF-8 ({exc})") from None
    return str(value)


def _id(value: object, name: str) -> str:
    """An id (see `check_id`); anything but text is refused here, before its repr is needed."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name}: expected an id (text), not {_show(value)}")
    return check_id(value, name)


def field_value(table: str, name: str, value: object, *, minimum: int | None = None) -> Any:
    """`value` as it will be stored in column `name` of `table`, or `InvalidInput` naming it.

    The one place that holds caller values to the Arrow schema: text is valid UTF-8, integers
    fit the column's width (int32 for steps and lengths), floats are finite and fit float64,
    timestamps are datetimes (timezone-aware, or naive meaning UTC), booleans are booleans.
    Arrow itself would raise ArrowInvalid/ArrowTypeError/OverflowError without naming the
    column, or, worse, store NaN or a truthy string as if it were data.
    """
    column = schema.TABLES[table].field(name)
    if value is None:
        if not column.nullable:
            raise InvalidInput(f"{name}: required")
        return None
    kind = column.type
    if pa.types.is_string(kind):
        return _text(value, name)
    if pa.types.is_boolean(kind):
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        raise InvalidInput(f"{name}: expected true or false, not {_show(value)}")
    if pa.types.is_integer(kind):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise InvalidInput(f"{name}: expected an integer, not {_show(value)}")
        value = int(value)
        low = -(2 ** (kind.bit_width - 1)) if pa.types.is_signed_integer(kind) else 0
        high = 2 ** (kind.bit_width - (1 if pa.types.is_signed_integer(kind) else 0)) - 1
        low = max(low, minimum) if minimum is not None else low
        if not low <= value <= high:
            raise InvalidInput(f"{name}: must be an integer from {low} to {high} (a {kind} column), not {_show(value)}")
        return value
    if pa.types.is_floating(kind):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InvalidInput(f"{name}: expected a number, not {_show(value)}")
        try:
            number = float(value)
        except (OverflowError, ValueError, TypeError):
            raise InvalidInput(f"{name}: {_show(value)} does not fit a 64-bit float") from None
        if not math.isfinite(number):
            raise InvalidInput(f"{name}: must be a finite number, not {_show(value)}")
        return number
    if pa.types.is_timestamp(kind):
        if not isinstance(value, datetime):
            raise InvalidInput(
                f"{name}: expected a datetime (timezone-aware, or naive meaning UTC), not {_show(value)}")
        return value
    if pa.types.is_list(kind):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise InvalidInput(f"{name}: expected a list of text, not {_show(value)}")
        return [_text(v, name) for v in value]
    if pa.types.is_large_binary(kind) or pa.types.is_binary(kind):
        if not isinstance(value, bytes):
            raise InvalidInput(f"{name}: expected bytes, not {_show(value)}")
        return value
    raise AssertionError(f"field_value: no check for column {table}.{name} of type {kind}")


def _json(value: object, name: str) -> str | None:
    """JSON text for the JSON columns; text is taken as already being JSON (or plain text)."""
    if value is None:
        return None
    if isinstance(value, str):
        return _text(value, name)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"{name}: not JSON-serialisable ({type(exc).__name__}: {exc})") from None
    except Exception as exc:  # a value whose own __str__ fails (default=str calls it)
        raise InvalidInput(f"{name}: not JSON-serialisable ({type(exc).__name__}: {exc})") from None
    return _text(text, name)


def _json_object(value: object, name: str) -> dict | None:
    """Fields merged key by key later (`extra`, `info` carrying flags) must be JSON objects."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidInput(f"{name}: expected a JSON object (a dict), not {_show(value)}")
    _json(value, name)
    return value


def build_step_row(
    episode_id: str,
    step: int,
    image: object,
    model_response: object,
    *,
    timestamp: datetime | None = None,
    reward: float | None = None,
    step_reward: float | None = None,
    step_reward_reason: str | None = None,
    prompt: object = None,
    info: object = None,
    ui_tree: str | None = None,
    group_id: str | None = None,
    anchor: AnchorKeyer | None = None,
    decode_images: bool = True,
    image_missing: str | None = None,
) -> dict:
    """A validated `steps` row. Shared by the recorder and the importers.

    A step without a screenshot (`image=None`) must say why: `image_missing="why"` (or an
    `info` object that already carries `image_missing`, as the importers build it). The
    reason is stored in `info`, never a stand-in image, so a lost screenshot is always
    explicit in the lake and a forgotten one is an error.
    """
    step = field_value("steps", "step", step, minimum=0)
    missing = _text(image_missing, "image_missing")
    if image is None:
        if not missing and not (isinstance(info, dict) and info.get("image_missing")):
            raise InvalidInput("image: no screenshot given; a step whose screenshot is lost must say "
                               "why with image_missing='...' (stored in info)")
    elif missing is not None:
        raise InvalidInput("image_missing: given together with an image; pass one or the other")
    if missing:
        info = {**(_json_object(info, "info") or {}), "image_missing": missing}
    response = _text(model_response, "model_response") or ""
    row = {
        "episode_id": field_value("steps", "episode_id", episode_id),
        "step": step,
        "timestamp": field_value("steps", "timestamp", timestamp) or now(),
        "model_response": response,
        "reward": field_value("steps", "reward", reward),
        "step_reward": field_value("steps", "step_reward", step_reward),
        "step_reward_reason": field_value("steps", "step_reward_reason", step_reward_reason),
        "prompt": _json(prompt, "prompt"),
        "info": _json(info, "info"),
    }
    tree = _text(ui_tree, "ui_tree")
    if image is not None:
        img = prepare_image(image, decode=decode_images)
        row.update(image=img.data, image_format=img.format, image_sha256=img.sha256,
                   image_phash=img.phash, width=img.width, height=img.height)
    row.update(parse_response(response).to_row())
    if tree is not None:
        from xml.etree.ElementTree import ParseError

        from episodelake.lake.derive.anchor import ui_tree_hash

        try:
            row["ui_tree_hash"] = ui_tree_hash(tree)
        except (ParseError, RecursionError, ValueError) as exc:
            raise InvalidInput(f"ui_tree: not a UI tree (uiautomator XML) ({type(exc).__name__}: {exc})") from None
    if anchor is not None and (tree is not None or row.get("image_phash") is not None):
        row["anchor_key"] = anchor.key(group_id or "", phash=row.get("image_phash"), ui_tree=tree)
    return row


@dataclass
class StepRecord:
    """What `log_step` hands back: the stored step's identity and hashes."""

    episode_id: str
    step: int
    image_sha256: str | None
    anchor_key: str | None
    action_type: str
    action_valid: bool


@dataclass
class EpisodeHandle:
    recorder: Recorder
    row: dict
    claim: claims.Claim | None = None
    steps: set[int] = field(default_factory=set)
    rewards: list[float] = field(default_factory=list)
    finished: bool = False

    @property
    def episode_id(self) -> str:
        return self.row["episode_id"]

    def log_step(self, image: object, model_response: object = "", *, step: int | None = None,
                 reward: float | None = None, step_reward: float | None = None,
                 step_reward_reason: str | None = None, prompt: object = None, info: object = None,
                 ui_tree: str | None = None, timestamp: datetime | None = None,
                 image_missing: str | None = None) -> StepRecord:
        """Record one step: the screen the agent saw and its response. Returns once durable.

        `image=None` only with `image_missing="why"` (stored in `info`): a lost screenshot is
        recorded as lost, never silently.
        """
        if self.finished:
            raise Conflict(f"episode {self.episode_id} is {self.row['status']}: log_step after finish")
        self._check_claim()
        if step is None:
            step = max(self.steps) + 1 if self.steps else 0
        row = build_step_row(
            self.episode_id, step, image, model_response, timestamp=timestamp, reward=reward,
            step_reward=step_reward, step_reward_reason=step_reward_reason, prompt=prompt,
            info=info, ui_tree=ui_tree, group_id=self.row.get("group_id"),
            anchor=self.recorder.anchor, decode_images=self.recorder.image_checks == "decode",
            image_missing=image_missing,
        )
        if row["step"] in self.steps:
            raise Conflict(f"episode {self.episode_id} already has step {row['step']}")
        self.recorder.writer.append("steps", row)
        self.steps.add(row["step"])
        if row["reward"] is not None:
            self.rewards.append(row["reward"])
        return StepRecord(self.episode_id, row["step"], row.get("image_sha256"), row.get("anchor_key"),
                          row["action_type"], row["action_valid"])

    def _check_claim(self) -> None:
        """A claim taken while the store was down and lost when settled: nothing more of this
        episode is recorded (its rows are set aside, see `episodelake.lake.storage.claims`)."""
        why = self.claim.lost if self.claim is not None else None
        if why:
            self.finished = True
            self.recorder._forget(self)
            raise Conflict(f"episode {self.episode_id}: the id was claimed while the store could not be "
                           f"reached, and lost when the claim was settled: {why}. None of its rows are "
                           "stored under this id; those recorded are set aside (`elake recover` lists them, "
                           "`--restore-conflicts` stores them under a new id): record the episode under a new id")

    def finish(self, success: bool | None = None, eval_score: float | None = None,
               eval_reason: str | None = None, *, episode_reward: float | None = None,
               episode_length: int | None = None, status: str = "finished",
               extra: dict | None = None) -> dict:
        """Close the episode with its result (the reference's final backfill)."""
        if self.finished:
            raise Conflict(f"episode {self.episode_id} is already {self.row['status']}")
        self._check_claim()
        if status not in ("finished", "aborted"):
            raise InvalidInput(f"status: must be 'finished' or 'aborted', not {_show(status)}")
        eval_score = field_value("episodes", "eval_score", eval_score)
        success = field_value("episodes", "success", success)
        if success is None and eval_score is not None:
            success = eval_score > 0
        if episode_reward is None:
            episode_reward = math.fsum(self.rewards) if self.rewards else eval_score
        if episode_length is None:
            episode_length = len(self.steps)
        merged_extra = {**_stored_extra(self.row.get("extra")), **(_json_object(extra, "extra") or {})}
        row = {
            **self.row,
            "status": status,
            "success": success,
            "eval_score": eval_score,
            "eval_reason": _text(eval_reason, "eval_reason") or "",
            "episode_reward": field_value("episodes", "episode_reward", episode_reward),
            "episode_length": field_value("episodes", "episode_length", episode_length, minimum=0),
            "finished_at": now(),
            "extra": _json(merged_extra, "extra") if merged_extra else None,
        }
        self.recorder.writer.append("episodes", dict(row))
        self.row = row
        self.finished = True
        self.recorder._settle(self)
        return dict(self.row)

    def abort(self, reason: str) -> dict:
        return self.finish(status="aborted", eval_reason=f"aborted: {reason}")

    def __enter__(self) -> EpisodeHandle:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.finished:
            return
        if exc_type is not None:
            self.abort(f"{exc_type.__name__}: {exc}")
        else:
            self.finish(status="finished")


def _stored_extra(text: str | None) -> dict:
    """A stored `extra` as an object (rows written before `extra` had to be one may hold other
    JSON; that is kept under its own key instead of being lost in the merge)."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"extra": text}
    return value if isinstance(value, dict) else {"extra": value}


class Recorder:
    """Opens one lake writer and hands out episode handles. Thread-safe per episode."""

    def __init__(self, lake: Lake | Path | str | None = None, *, options: WriterOptions | None = None,
                 anchor: AnchorKeyer | None | str = "default", image_checks: str = "structure",
                 background_enrich: bool = True, run_id: str | None = None,
                 policy_version: str | None = None, env: str | None = None,
                 device: str | None = None, model_name: str | None = None):
        if image_checks not in ("decode", "structure"):
            raise InvalidInput(f"image_checks: 'decode' or 'structure', not {_show(image_checks)}")
        if not isinstance(background_enrich, bool):
            raise InvalidInput(f"background_enrich: expected true or false, not {_show(background_enrich)}")
        #: "structure" checks chunks/markers only (about 40x cheaper than a decode); the
        #: perceptual hash and its anchor key come after the commit (background worker).
        #: "decode" proves every image whole and hashes it as it writes.
        self.image_checks = image_checks
        self.defaults = {k: _text(v, k) for k, v in {
            "run_id": run_id, "policy_version": policy_version, "env": env, "device": device,
            "model_name": model_name}.items()}
        default_keys = anchor == "default"
        if isinstance(anchor, str):
            if anchor != "default":
                raise InvalidInput(f"anchor: an AnchorKeyer, None or 'default', not {_show(anchor)}")
            from episodelake.lake.derive.anchor import AnchorKeyer as DefaultKeyer

            anchor = DefaultKeyer()
        self.anchor = anchor
        # a lake on an object store that this machine has opened before is opened from what
        # it noted then (its tables): the recorder asks the store nothing, so it opens during
        # an outage and on a busy store; the first commit, on the writer's thread, meets it
        if not isinstance(lake, Lake):
            check_spool(lake if lake is not None else location(None))  # a clear error before any other
            lake = Lake(lake, recall=True)
        self.lake = lake
        self.writer = self.lake.writer(options)
        #: fills the perceptual hash and anchor key of this recorder's steps after they are
        #: committed: only for the default keyer, whose keys the worker gives exactly (a keyer
        #: of the caller's own keys screenshots at write time, with image_checks="decode")
        self.enricher: BackgroundEnricher | None = None
        if background_enrich and default_keys and image_checks == "structure":
            self.enricher = BackgroundEnricher(self.lake, episodes=True).start()
        self._open: dict[str, EpisodeHandle] = {}
        #: when the last episode started (`time.monotonic`), for `_episode_boundary`
        self._last_start: float | None = None
        #: finished episodes whose claims wait for their rows to be committed
        self._settling: dict[str, claims.Claim] = {}
        self._lock = threading.Lock()

    def _episode_row(self, task_name: object, task_goal: object, episode_id: object, group_id: object,
                     tags: object, extra: object, created_at: object, fields: dict) -> dict:
        unknown = set(fields) - set(self.defaults)
        if unknown:
            raise InvalidInput(f"start_episode: unknown field(s) {sorted(unknown)}")
        if isinstance(tags, (str, bytes)) or not isinstance(tags, Iterable):
            raise InvalidInput(f"tags: expected a list of tags, not {_show(tags)}")
        return {
            "episode_id": _id(str(uuid.uuid4()) if episode_id is None else episode_id, "episode_id"),
            "task_name": _text(task_name, "task_name"),
            "task_goal": _text(task_goal, "task_goal"),
            "group_id": None if group_id is None else _id(group_id, "group_id"),
            "created_at": field_value("episodes", "created_at", created_at) or now(),
            "status": "running",
            "tags": [_id(t, "tag") for t in tags],
            "extra": _json(_json_object(extra, "extra"), "extra"),
            **{k: _text(fields.get(k, v), k) for k, v in self.defaults.items()},
        }

    def start_episode(self, task_name: str, task_goal: str = "", *, episode_id: str | None = None,
                      group_id: str | None = None, tags: Iterable[str] = (), extra: dict | None = None,
                      created_at: datetime | None = None, resume: bool = False,
                      **fields: str | None) -> EpisodeHandle:
        """Begin an episode; `fields` override the recorder's run_id, policy_version, env,
        device and model_name for this episode.

        The id is taken lake-wide while this recorder holds the episode (see `episodelake.lake.storage.claims`): an
        id the lake already holds is a `Conflict`, as is one another recorder (in any
        process) is recording right now. `resume=True` continues a stored episode instead:
        steps are numbered after its last stored step, its stored row is kept (only an
        `aborted` status goes back to `running`), and the other arguments are ignored except
        `task_name`, which must match. A finished episode is never resumed (its result would
        no longer describe its steps): record under a new id. With `resume=True` an id the
        lake does not hold starts a new episode, so a restarted process can call it blindly.
        """
        if not isinstance(resume, bool):
            raise InvalidInput(f"resume: expected true or false, not {_show(resume)}")
        if resume and episode_id is None:
            raise InvalidInput("resume: give the episode_id of the episode to continue")
        row = self._episode_row(task_name, task_goal, episode_id, group_id, tags, extra, created_at, fields)
        episode_id_given, episode_id = episode_id, row["episode_id"]
        with self._lock:
            if episode_id in self._open:
                raise Conflict(f"episode {episode_id} is already being recorded by this recorder")
            settling = self._settling.get(episode_id)
        if settling is not None:
            if not resume:  # it ended here: the lake holds it (or will) whatever it was
                raise Conflict(f"episode {episode_id} was recorded and ended by this recorder; record under a "
                               "new episode_id, or pass resume=True to continue an aborted one")
            self.flush()  # resuming reads the stored episode: our own rows must be in Lance first
        claim = self._claim(episode_id, minted=episode_id_given is None, resume=resume)
        if claim is None:
            raise Conflict(f"episode {episode_id} is being recorded by another recorder right now "
                           "(in this process or another); use another episode_id, or resume it once "
                           "that recorder has finished or closed")
        try:
            if claim.previous_holder:
                self._await_replay(episode_id, claim.previous_holder)
            claim.own(self._holder)
            # a minted id is nobody's, and a provisional claim is checked against the lake when
            # it is settled: neither is looked up now
            look_up = episode_id_given is not None and not isinstance(claim, claims.ProvisionalClaim)
            handle = self._begin(row, claim, resume, look_up=look_up)
        except BaseException:
            claim.release(committed=True)  # nothing of ours is waiting; a dead holder's name stays
            raise
        with self._lock:
            self._open[episode_id] = handle
        self._episode_boundary()
        if self.enricher is not None:
            self.enricher.watch(episode_id)
        return handle

    def _episode_boundary(self) -> None:
        """A collector at its own pace (the episode before took at least `max_age_s`, or this
        is its first): the writer commits at once what the episode before left pending with
        this one's claim and row, and none of this one's steps (`LakeWriter.episode_boundary`),
        instead of both episodes' batches carrying rows and waiting for their age (the
        slowest 1% of steps at 8 paced writers); the committer then appends the offer's steps
        beside the new row. Episodes recorded faster than that batch as before."""
        now = time.monotonic()
        with self._lock:
            paced = self._last_start is None or now - self._last_start >= self.writer.options.max_age_s
            self._last_start = now
        if paced:
            self.writer.episode_boundary()

    def _claim(self, episode_id: str, *, minted: bool, resume: bool) -> claims.Claim | None:
        """The episode's claim (see `episodelake.lake.storage.claims`), taken without asking the
        store on an object store: an id minted here (a fresh uuid4) is nobody else's, and its
        claim row is written by the writer before the episode's first rows; an id the caller
        gives is claimed provisionally (a note in the writer's spool) and settled by the
        writer's thread before any of its rows is committed (a lost claim is a `Conflict` at
        the episode's next `log_step`/`finish`). A local lake's claim is a file lock. Resuming
        reads the stored episode, so it needs the store, and takes its claim at once."""
        loc = self.lake.location
        if minted:
            return claims.take(loc, episode_id, self._holder, minted_into=self.writer.claims)
        if loc.is_local or resume:
            return claims.take(loc, episode_id, self._holder)
        return self.writer.claims.take_provisional(episode_id, self._holder, self.writer._spool.dir,
                                                   fsync=self.writer.options.durability == "machine",
                                                   token=uuid.uuid4().hex)

    @property
    def _holder(self) -> str:
        """This writer's spool folder: where its acknowledged, uncommitted rows wait."""
        return self.writer._spool.dir.name

    def _await_replay(self, episode_id: str, holder: str) -> None:
        """The last holder of this episode died with rows in its spool: have them replayed
        (or wait while another process replays them) before the stored state is read."""
        folder = layout.spool_root(self.lake.location) / holder
        deadline = time.monotonic() + REPLAY_WAIT_S
        while folder.exists():
            replay_orphans(self.lake.location)
            if not folder.exists():
                break
            if time.monotonic() > deadline:
                raise Conflict(
                    f"episode {episode_id}: the spool of its last recorder ({folder}) is still held "
                    f"after {REPLAY_WAIT_S:.0f} s; close that recorder, or run `elake recover`, then try again")
            time.sleep(0.05)
        log.info("episode %s: rows of its crashed recorder %s are replayed", episode_id, holder)

    def _begin(self, row: dict, claim: claims.Claim, resume: bool, *, look_up: bool) -> EpisodeHandle:
        """Under the claim, the lake holds every row earlier holders wrote (see `episodelake.lake.storage.claims`), so
        reading it answers whether the id is taken; no commit is needed to take it. Without
        `look_up` (an id this recorder minted, which cannot be taken, or a claim settled later)
        the lake is not read: the lookup scans the episodes table, a cost that grows with the
        lake (0.7 s per episode at 5,000 episodes in 480 fragments, most of a training iteration)."""
        episode_id = row["episode_id"]
        if not look_up:
            self.writer.append("episodes", dict(row))
            return EpisodeHandle(self, row, claim)
        if self.lake.refresh_s:
            self.lake.invalidate()
        try:
            stored = self.lake.episode(episode_id)
        except NotFound:
            self.writer.append("episodes", dict(row))
            return EpisodeHandle(self, row, claim)
        status = stored["status"]
        if status == "finished":
            raise Conflict(
                f"episode {episode_id} is already in the lake, finished (success={stored['success']}, "
                f"eval_score={stored['eval_score']}); its result and steps are kept and never reset: "
                "record under a new episode_id")
        if not resume:
            raise Conflict(f"episode {episode_id} is already in the lake ({status}); pass resume=True "
                           "to continue it after its last stored step, or use a new episode_id")
        if stored["task_name"] != row["task_name"]:
            raise Conflict(f"task_name: episode {episode_id} is stored for task {stored['task_name']!r}, "
                           f"not {row['task_name']!r}")
        done = self.lake.steps(episode_id, columns=["step", "reward"])
        handle = EpisodeHandle(self, {**stored, "status": "running", "finished_at": None}, claim,
                               steps=set(done["step"].to_pylist()),
                               rewards=[r for r in done["reward"].to_pylist() if r is not None])
        if status != "running":
            self.writer.append("episodes", dict(handle.row))
        log.info("resuming episode %s (%s) after %d stored step(s)", episode_id, status, len(handle.steps))
        return handle

    def episode(self, episode_id: str) -> EpisodeHandle | None:
        """The open handle of an episode recorded by this recorder, if any."""
        with self._lock:
            return self._open.get(episode_id)

    def _forget(self, handle: EpisodeHandle) -> None:
        """Let go of an episode whose claim was lost: it holds nothing to release."""
        with self._lock:
            if self._open.get(handle.episode_id) is handle:
                del self._open[handle.episode_id]

    def _settle(self, handle: EpisodeHandle) -> None:
        """A finished episode keeps its claim until its rows are committed (see
        `episodelake.lake.storage.claims`): the writer's thread lets go of it then. Nothing here
        waits for that; past `SETTLE_AFTER` finished episodes waiting, the writer is asked to
        commit at once."""
        episode_id, claim = handle.episode_id, handle.claim
        with self._lock:
            self._open.pop(episode_id, None)
            if claim is None:
                return
            self._settling[episode_id] = claim
            due = len(self._settling) >= SETTLE_AFTER
        self.writer.when_committed(lambda: self._settled(episode_id, claim))
        if due:
            self.writer.commit_soon()

    def _settled(self, episode_id: str, claim: claims.Claim) -> None:
        """The rows of a finished episode are committed: let go of its claim (on the writer's thread)."""
        with self._lock:
            if self._settling.get(episode_id) is not claim:
                return  # let go already (the recorder closed)
            del self._settling[episode_id]
        claim.release(committed=True)
        if self.enricher is not None:
            self.enricher.settled([episode_id])

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything recorded so far is committed, and let go of finished
        episodes: the one call besides `close` that waits for the store. Without `timeout`,
        `CommitFailed` at the first commit that fails meanwhile; with it, waits through
        failures up to `timeout` seconds. Either way the error says how many rows (and bytes)
        still wait in the spool: they are kept and retried, nothing is lost."""
        self.writer.flush(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Commit what is pending (waiting up to `timeout` seconds, or until a commit fails:
        see `flush`). Episodes still open stay `running` in the lake, and any recorder may
        resume them once this one is closed. Rows the store did not take stay in this
        writer's spool for the next writer of the lake on this machine (or `elake recover`),
        and the `CommitFailed` says how many."""
        with self._lock:
            still_open = list(self._open.values())
            claims = [h.claim for h in still_open if h.claim is not None] + list(self._settling.values())
            self._open.clear()
            self._settling.clear()
        if still_open:
            log.warning("closing the recorder with %d episode(s) still running", len(still_open))
        if self.enricher is not None:  # what it has not reached stays pending for the next enrichment
            self.enricher.stop()
        committed = False
        try:
            self.writer.close(timeout)
            committed = True
        finally:
            with self.writer.claims.together():  # the written ones: one delete for all of them
                for claim in claims:
                    claim.release(committed=committed)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
