"""The step-reward judge (a process reward model): did this step move the phone toward the goal?

A VLM on an OpenAI-compatible server sees the goal, the screenshot before the step with the
action marked on it, the screenshot after, the agent's recent responses and the current one,
and answers ``{"reason": "...", "reward": 0 | 1}``.

Unlike the reference judge, which scores 1 when the call or the parsing fails, an answer that
is not exactly that JSON object is an *invalid* verdict (``reward`` None, the problem in
``reason``) after the retries are spent: nothing is ever scored by default. Valid verdicts are
cached by (before-image hash, after-image hash, action, goal, judge model, prompt version),
in memory or in a SQLite file shared by runs.

Stored episodes are judged by the back-fill job (:mod:`episodelake.collectors.jobs.backfill`,
`elake judge`); rewards are stored raw, in {0, 1}: the reference's division by (steps - 1) is
the trainer's business.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from episodelake.collectors.agents.model_client import ModelClient
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.images import sniff_format
from episodelake.lake.vocab.action_space import action_summary
from episodelake.lake.vocab.overlay import describe, draw_action
from episodelake.lake.vocab.prompts import data_url_part

log = logging.getLogger(__name__)

#: Changes whenever the prompt changes, so cached verdicts of another prompt are not reused.
PROMPT_VERSION = "step-judge-2"
HISTORY_RESPONSES = 5

SYSTEM_PROMPT = """\
You judge one step of an agent that operates an Android phone for a user.
You are given the user's goal, the agent's recent responses (newest first), the agent's
current response with the action it chose, the screenshot BEFORE the action with the action
drawn on it, and the screenshot AFTER it. On the BEFORE screenshot a tap is a red ring and dot
(a long press orange rings, a double tap red double rings), a swipe a blue arrow from a green
dot, a drag a purple line from a green start to a red end; other actions are written in a
badge in the top-left corner.

Decide whether this step was useful: reward 1 if the action was sensible for the goal and the
phone moved toward it (or the step correctly finished the task), reward 0 if it did nothing
useful, went the wrong way, or acted on the wrong element.

Answer with only this JSON object and nothing else:
{"reason": "<one or two sentences>", "reward": <0 or 1>}"""

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL)


@dataclass(frozen=True)
class Verdict:
    """The judge's answer. ``reward`` is 0.0 or 1.0, or None when the answer was invalid."""

    reward: float | None
    reason: str
    raw: str = ""

    @property
    def valid(self) -> bool:
        return self.reward is not None


def parse_verdict(text: str) -> Verdict:
    """Read the judge's answer strictly: a JSON object (optionally in a ```json fence, after
    an optional <think> block) with ``reward`` exactly 0 or 1 and a string ``reason``."""
    body = _THINK.sub("", text.strip(), count=1).strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        answer = json.loads(body)
    except json.JSONDecodeError as exc:
        return _invalid(f"not a JSON object ({exc.msg})", text)
    if not isinstance(answer, dict):
        return _invalid(f"expected a JSON object, got {type(answer).__name__}", text)
    reward, reason = answer.get("reward"), answer.get("reason")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or reward not in (0, 1):
        return _invalid(f"'reward' must be 0 or 1, got {reward!r}", text)
    if not isinstance(reason, str) or not reason.strip():
        return _invalid("'reason' must be a non-empty string", text)
    return Verdict(float(reward), reason.strip(), text)


def _invalid(problem: str, text: str) -> Verdict:
    return Verdict(None, f"invalid judge response: {problem}: {text.strip()[:200]!r}", text)


@dataclass(frozen=True)
class StepToJudge:
    """One step as the judge sees it. Points are fractions of the screenshot, as stored."""

    goal: str
    before: bytes
    after: bytes
    response: str
    action_type: str | None
    action: str | None  # JSON text, as in the steps table
    x: float | None = None
    y: float | None = None
    x2: float | None = None
    y2: float | None = None
    history: Sequence[str] = ()  # earlier responses, newest first

    def cache_key(self, model: str) -> str:
        parts = [hashlib.sha256(self.before).hexdigest(), hashlib.sha256(self.after).hexdigest(),
                 self.action_type or "", self.action or "", self.goal, model, PROMPT_VERSION]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def mark_action(image: bytes, step: StepToJudge) -> bytes:
    """The before screenshot with the step's action drawn as a person replaying the episode
    sees it (the API's `?annotated=1`), as PNG; stored images are never touched."""
    with Image.open(io.BytesIO(image)) as header:  # the size only: a swipe's arrow scales by it
        width, height = header.size
    view = describe(step.action_type, _arguments(step.action), step.x, step.y, step.x2, step.y2,
                    width, height)
    return draw_action(image, view)


def _arguments(action: str | None) -> dict[str, Any]:
    """The stored action JSON as an object ({} where there is none)."""
    try:
        parsed = json.loads(action) if action else {}
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def judge_messages(step: StepToJudge) -> list[dict[str, Any]]:
    history = "\n".join(f"- {r}" for r in step.history[:HISTORY_RESPONSES]) or "(none)"
    text = (f"Goal: {step.goal}\n\nRecent responses (newest first):\n{history}\n\n"
            f"Current response:\n{step.response}\n\n"
            f"Action: {action_summary(step.action_type, step.action)}")
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": [
            {"type": "text", "text": text},
            {"type": "text", "text": "Screenshot BEFORE the action:"},
            data_url_part(mark_action(step.before, step), "image/png"),
            {"type": "text", "text": "Screenshot AFTER the action:"},
            data_url_part(step.after, f"image/{sniff_format(step.after)}"),
        ]},
    ]


class JudgeCache:
    """Valid verdicts by cache key: in memory, or in a SQLite file when `path` is given."""

    def __init__(self, path: Path | str | None = None):
        self._memory: dict[str, Verdict] = {}
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        if path is not None:
            self._db = sqlite3.connect(str(path), check_same_thread=False)
            self._db.execute("CREATE TABLE IF NOT EXISTS verdicts "
                             "(key TEXT PRIMARY KEY, reward REAL, reason TEXT)")

    def get(self, key: str) -> Verdict | None:
        with self._lock:
            if key in self._memory or self._db is None:
                return self._memory.get(key)
            row = self._db.execute("SELECT reward, reason FROM verdicts WHERE key = ?",
                                   (key,)).fetchone()
        return Verdict(row[0], row[1]) if row else None

    def put(self, key: str, verdict: Verdict) -> None:
        if not verdict.valid:
            return  # an invalid answer is retried next time, never remembered
        with self._lock:
            self._memory[key] = verdict
            if self._db is not None:
                self._db.execute("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?)",
                                 (key, verdict.reward, verdict.reason))
                self._db.commit()

    def verdicts(self) -> dict[str, Verdict]:
        """Every verdict held, by key: what a back-fill on Ray hands its tasks."""
        with self._lock:
            rows = self._db.execute("SELECT key, reward, reason FROM verdicts").fetchall() if self._db else []
            return {**{key: Verdict(reward, reason) for key, reward, reason in rows}, **self._memory}

    def close(self) -> None:
        if self._db is not None:
            self._db.close()


class StepJudge:
    """Judges steps with one model; invalid answers are asked again up to `attempts` times."""

    def __init__(self, client: ModelClient, *, attempts: int = 3, cache: JudgeCache | None = None,
                 temperature: float = 0.1):
        if attempts < 1:
            raise InvalidInput(f"attempts must be >= 1, got {attempts}")
        self.client = client
        self.attempts = attempts
        self.cache = cache or JudgeCache()
        self.temperature = temperature

    def judge(self, step: StepToJudge) -> Verdict:
        key = step.cache_key(self.client.model)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        messages = judge_messages(step)
        verdict = _invalid("no answer", "")
        for attempt in range(1, self.attempts + 1):
            verdict = parse_verdict(self.client.complete(messages, temperature=self.temperature))
            if verdict.valid:
                break
            log.warning("judge attempt %d/%d: %s", attempt, self.attempts, verdict.reason)
        self.cache.put(key, verdict)
        return verdict
