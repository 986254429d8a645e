"""The episode loop: every episode in the product, on any device, with any agent, runs here.

Per step: screenshot (and UI tree) -> the agent's reply (`act(Observation) -> Reply`) -> the
response is parsed -> the action is carried out on the device -> an optional step judge
scores the step from state the agent never sees -> the step is logged. Rollouts on the
simulated phone (`elake demo`, `elake rollout`, the trainer), collection from devices
(`elake collect`) and re-runs all call :func:`run_episode`, mostly through
:func:`~episodelake.collectors.jobs.batch.run_batch`; one loop means one meaning for every
stored column, whichever job wrote it.

An episode ends on ``terminate`` or ``answer``, at ``max_steps``, or when the device is
lost; then the device's evaluator (if it has one) scores it. What each stop means for the
stored episode:

- finished: ended by the agent or at max_steps; ``success`` from the evaluator, null without
  one (the agent's own claim is kept in ``extra.agent_status``);
- aborted, steps kept: the device or server was lost, the user pressed Ctrl-C, or a stop was
  requested (parallel workers); ``eval_reason`` says which.

An invalid response is logged as an invalid step and nothing is sent to the device (the
reference turns it into a ``wait``); an action the device rejects is logged with the
rejection in ``info.error`` and the episode goes on.

Agents see only what a deployed agent would (goal, screenshots, their own earlier
responses). An agent that needs privileged state (the simulated phone's oracle) takes it
from the device it was opened on; a judge that needs it reads it through the device too
(:class:`~episodelake.collectors.envs.base.StepJudge`). Neither needs a loop of its own. This
module defines what every agent implements (:class:`Agent`: `Observation` in, `Reply` out);
the agents themselves are in :mod:`episodelake.collectors.agents`, and the jobs that run
batches of episodes in :mod:`episodelake.collectors.jobs`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from episodelake.collectors.envs.base import (
    Device,
    Evaluation,
    StepJudge,
    StepScore,
    Task,
)
from episodelake.collectors.record.recorder import EpisodeHandle, Recorder
from episodelake.lake.core.errors import (
    ActionFailed,
    DeviceError,
    DeviceUnavailable,
    EnvironmentLost,
    InvalidInput,
)
from episodelake.lake.vocab.action_space import action_summary
from episodelake.lake.vocab.families import ParsedAction, parse_response
from episodelake.lake.vocab.prompts import HistoryStep

log = logging.getLogger(__name__)

#: Actions after which the agent is done.
FINAL_ACTIONS = ("terminate", "answer")


# --- what an agent sees and answers ----------------------------------------------------------

@dataclass(frozen=True)
class Observation:
    """What an agent sees before step `step`: the goal, the screen, and the steps so far
    (`history`, oldest first, whose ``image`` is the step number of its screenshot in
    `images`; only the agent's last `history_length` screenshots are kept).

    `seed` is the episode's seed when the task has one: an agent that samples starts the
    episode's random stream from it, so the same task and seed replay the same episode
    whichever worker runs it. `ui_tree` is the screen's accessibility tree (uiautomator XML)
    where the device gives one, for agents that read the screen's text and element positions."""

    goal: str
    step: int
    screenshot: bytes
    history: Sequence[HistoryStep]
    images: Mapping[int, bytes]
    seed: int | None = None
    ui_tree: str | None = None

    @property
    def responses(self) -> list[str]:
        """The earlier responses as text, oldest first (what text-history agents read)."""
        return [h.response or "" for h in self.history]


@dataclass(frozen=True)
class Reply:
    """The agent's raw response, the messages behind it (stored as ``steps.prompt``, with
    every image as ``{"type": "image", "image": {"step": N}}`` instead of its bytes), and
    anything else it wants kept in ``steps.info``."""

    response: str
    prompt: list[dict[str, Any]] | None = None
    info: dict[str, Any] | None = None


class Agent(Protocol):
    """Whatever chooses the actions: a model behind a server, a trained policy, the sim's
    demo policy. One interface, so every job can run every agent."""

    #: The episodes ``model_name`` of what this agent runs.
    name: str
    #: How many past screenshots the agent looks at (the loop keeps that many).
    history_length: int

    def act(self, observation: Observation) -> Reply: ...


# --- the loop ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class EpisodeSummary:
    episode_id: str | None
    task_name: str
    status: str  # finished | aborted | skipped (the task never started)
    steps: int = 0
    success: bool | None = None
    eval_score: float | None = None
    reason: str = ""
    group_id: str | None = None


@dataclass
class _Run:
    """The state of one episode's loop."""

    max_steps: int
    seed: int | None = None
    judge: StepJudge | None = None
    history: list[HistoryStep] = field(default_factory=list)
    images: dict[int, bytes] = field(default_factory=dict)
    stop_reason: str = "max_steps"
    agent_status: str | None = None


class StopRequested(Exception):
    """A stop was asked for from outside (a parallel worker being shut down)."""


def run_episode(device: Device, agent: Agent, recorder: Recorder, task: Task, *,
                max_steps: int = 20, tags: Sequence[str] = (), judge: StepJudge | None = None,
                stop: threading.Event | None = None) -> EpisodeSummary:
    """Run and record one episode. Raises DeviceError when the task cannot start, and
    KeyboardInterrupt after recording the episode as aborted. A set `stop` aborts the
    episode before its next step."""
    if max_steps < 1:
        raise InvalidInput(f"max_steps must be >= 1, got {max_steps}")
    goal = device.start_task(task)
    try:
        ep = recorder.start_episode(task.name, goal, group_id=task.group_id, tags=tags,
                                    extra=device.episode_extra(task) or None,
                                    env=device.env, device=device.name, model_name=agent.name)
        run = _Run(max_steps, task.seed, judge)
        try:
            for step in range(max_steps):
                if stop is not None and stop.is_set():
                    raise StopRequested("stopped: the collection was asked to stop")
                if _step(device, agent, ep, goal, step, run):
                    break
            evaluation, eval_problem = _evaluate(device, task)
        except (DeviceError, StopRequested) as exc:
            return _summary(ep.abort(str(exc)), task)
        except KeyboardInterrupt:
            ep.abort("interrupted (Ctrl-C)")
            raise
        except BaseException as exc:
            ep.abort(f"{type(exc).__name__}: {exc}")
            raise
        extra = {"stop": run.stop_reason, "agent_status": run.agent_status}
        if evaluation is None:
            row = ep.finish(eval_reason=eval_problem, extra=extra)
        else:
            row = ep.finish(eval_score=evaluation.score, eval_reason=evaluation.reason, extra=extra)
        return _summary(row, task)
    finally:
        device.end_task(task)


def _evaluate(device: Device, task: Task) -> tuple[Evaluation | None, str | None]:
    """The device's verdict, or None and why not (no evaluator, or the evaluation failed:
    the episode itself is complete, so it stays finished with success unknown)."""
    try:
        return device.evaluate(task), None
    except DeviceError as exc:
        return None, str(exc)


def _step(device: Device, agent: Agent, ep: EpisodeHandle, goal: str, step: int,
          run: _Run) -> bool:
    """One step; True when the agent is done."""
    shot = device.screenshot()
    tree = device.ui_tree()
    reply = agent.act(Observation(goal, step, shot, list(run.history), dict(run.images),
                                  run.seed, tree))
    parsed = parse_response(reply.response)
    done = parsed.valid and parsed.action_type in FINAL_ACTIONS
    before = run.judge.before(device) if run.judge is not None else None
    info, lost = _carry_out(device, parsed)
    score = StepScore()
    if run.judge is not None and lost is None:
        score = run.judge.score(device, before, parsed, done or step == run.max_steps - 1)
    ep.log_step(shot, reply.response, reward=score.reward, step_reward=score.step_reward,
                step_reward_reason=score.reason, prompt=reply.prompt,
                info={**(reply.info or {}), **info}, ui_tree=tree)
    if lost is not None:
        raise lost
    run.history.append(HistoryStep(response=reply.response, image=step,
                                   summary=action_summary(parsed.action_type, parsed.action)))
    run.images[step] = shot
    for old in [s for s in run.images if s <= step - agent.history_length]:
        del run.images[old]
    if done:
        run.stop_reason = parsed.action_type
        run.agent_status = parsed.action.get("status")
    return done


def _carry_out(device: Device, parsed: ParsedAction) -> tuple[dict[str, Any], EnvironmentLost | None]:
    """Execute a valid action; (the step's info, the loss that ends the episode if any)."""
    if not parsed.valid:
        return {"skipped": f"invalid action, nothing sent to the device: {parsed.error}"}, None
    try:
        return device.execute(parsed).info(), None
    except ActionFailed as exc:
        return {"error": str(exc)}, None
    except EnvironmentLost as exc:
        return {"error": str(exc)}, exc


def _summary(row: dict[str, Any], task: Task) -> EpisodeSummary:
    return EpisodeSummary(row["episode_id"], task.name, row["status"], row["episode_length"] or 0,
                          row["success"], row["eval_score"], row["eval_reason"] or "",
                          task.group_id)


def collect_one(device: Device, agent: Agent, recorder: Recorder, task: Task, *,
                max_steps: int = 20, tags: Sequence[str] = (), judge: StepJudge | None = None,
                stop: threading.Event | None = None) -> EpisodeSummary:
    """`run_episode`, except that a task which cannot start is skipped (and logged) instead
    of raised: one bad task name must not end a batch. DeviceUnavailable (nothing left to
    drive) and Ctrl-C still propagate."""
    try:
        summary = run_episode(device, agent, recorder, task, max_steps=max_steps, tags=tags,
                              judge=judge, stop=stop)
    except DeviceUnavailable:
        raise
    except DeviceError as exc:  # only start_task raises these: mid-episode ones abort it
        log.error("task %s skipped: %s", task.name, exc)
        return EpisodeSummary(None, task.name, "skipped", reason=str(exc), group_id=task.group_id)
    log.info("episode %s (%s): %s after %d step(s)%s", summary.episode_id, task.name,
             summary.status, summary.steps,
             f", score {summary.eval_score}" if summary.eval_score is not None else "")
    return summary
