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

A branch (a `Task` with a :class:`~episodelake.collectors.envs.base.Branch`, `elake branch`)
starts from a recorded episode's state at its step K: after the reset to the parent's task
and seed, the loop carries out the parent's recorded actions 0..K-1 again through the same
`Device` interface, checking before each one and at K that the screen is the parent's (UI-tree
hash, else perceptual hash within the clustering threshold). A screen that differs raises
`BranchDiverged` naming the step before anything is recorded; otherwise the episode is
recorded whole (``branch_of``, ``branch_step``; the replayed steps with the parent's
responses and rewards, marked ``replayed`` in ``steps.info``) and the agent acts from step K,
with the replayed steps as its history.

Agents see only what a deployed agent would (goal, screenshots, their own earlier
responses). An agent that needs privileged state (the simulated phone's oracle) takes it
from the device it was opened on; a judge that needs it reads it through the device too
(:class:`~episodelake.collectors.envs.base.StepJudge`). Neither needs a loop of its own. This
module defines what every agent implements (:class:`Agent`: `Observation` in, `Reply` out);
the agents themselves are in :mod:`episodelake.collectors.agents`, and the jobs that run
batches of episodes in :mod:`episodelake.collectors.jobs`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from episodelake.collectors.envs.base import (
    Branch,
    Device,
    Evaluation,
    ReplayStep,
    StepJudge,
    StepScore,
    Task,
)
from episodelake.collectors.record.recorder import EpisodeHandle, Recorder
from episodelake.lake.derive.anchor import hamming, phash64, ui_tree_hash
from episodelake.lake.storage.errors import (
    ActionFailed,
    BranchDiverged,
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
    where the device gives one, for agents that read the screen's text and element positions.

    `start` is the first step the agent acts in: 0, or a branch's step K (the steps before it
    were replayed from the parent and are in `history`). An agent that samples starts its
    stream from `seed` at `step == start`."""

    goal: str
    step: int
    screenshot: bytes
    history: Sequence[HistoryStep]
    images: Mapping[int, bytes]
    seed: int | None = None
    ui_tree: str | None = None
    start: int = 0

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
    #: A branch's parent and step (`Task.branch`), whether it was recorded or refused.
    branch_of: str | None = None
    branch_step: int | None = None


@dataclass
class _Run:
    """The state of one episode's loop."""

    max_steps: int
    seed: int | None = None
    judge: StepJudge | None = None
    start: int = 0  # the first step the agent acts in (a branch's K)
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
    branch = task.branch
    if branch is not None and branch.step >= max_steps:
        raise InvalidInput(f"episode {branch.parent}: a branch at step {branch.step} needs max_steps "
                           f"above {branch.step}, got {max_steps}")
    goal = device.start_task(task)
    try:
        # a branch reaches its parent's state before anything is recorded (BranchDiverged)
        replayed = replay(device, branch) if branch is not None else []
        ep = recorder.start_episode(task.name, goal, group_id=task.group_id, tags=tags,
                                    extra=device.episode_extra(task) or None,
                                    env=device.env, device=device.name, model_name=agent.name)
        run = _Run(max_steps, task.seed, judge) if branch is None else \
            _Run(max_steps, branch.agent_seed, judge, start=branch.step)
        if branch is not None:
            # the recorder takes no branch fields: the episode's row carries them from here on
            ep.row.update(branch_of=branch.parent, branch_step=branch.step)
            recorder.writer.append("episodes", dict(ep.row))
        try:
            for shot, tree, recorded in replayed:
                _log_replayed(ep, agent, task.branch, shot, tree, recorded, run)
            for step in range(run.start, max_steps):
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
                                  run.seed, tree, run.start))
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
    _remember(run, agent, step, shot, reply.response, parsed)
    if done:
        run.stop_reason = parsed.action_type
        run.agent_status = parsed.action.get("status")
    return done


def _remember(run: _Run, agent: Agent, step: int, shot: bytes, response: str,
              parsed: ParsedAction) -> None:
    """The step as the agent's history: its response, and its screenshot while it is recent."""
    run.history.append(HistoryStep(response=response, image=step,
                                   summary=action_summary(parsed.action_type, parsed.action)))
    run.images[step] = shot
    for old in [s for s in run.images if s <= step - agent.history_length]:
        del run.images[old]


# --- branches: replaying a parent's first steps ------------------------------------------------

def screen_differs(expected: ReplayStep, shot: bytes, tree: str | None, threshold: int) -> str | None:
    """Why the screen (`shot`, `tree`) is not the one `expected` was recorded on, or None when
    it is: the UI trees' hashes (status bar left out) when both have one, else the screenshots'
    perceptual hashes within `threshold` bits (the anchor clustering threshold)."""
    if expected.ui_tree_hash is not None and tree is not None:
        got = ui_tree_hash(tree)
        if got == expected.ui_tree_hash:
            return None
        return f"its UI tree hashes to {got}, the parent's to {expected.ui_tree_hash}"
    if expected.image_phash is not None:
        distance = hamming(phash64(shot), expected.image_phash)
        if distance <= threshold:
            return None
        return (f"its screenshot's perceptual hash is {distance} bits from the parent's "
                f"(at most {threshold} allowed: --threshold)")
    return "the parent's step has neither a UI-tree hash nor a screenshot to compare the screen with"


def replay(device: Device, branch: Branch) -> list[tuple[bytes, str | None, ReplayStep]]:
    """Carry out the parent's actions 0..K-1, checking the screen before each and at K; the
    screens passed through, for the branch's replayed rows. Raises BranchDiverged."""
    passed: list[tuple[bytes, str | None, ReplayStep]] = []
    for recorded in branch.steps:
        shot, tree = device.screenshot(), device.ui_tree()
        problem = screen_differs(recorded, shot, tree, branch.threshold)
        if problem is not None:
            raise BranchDiverged(
                f"episode {branch.parent}: the replay diverged at step {recorded.step} of the branch at "
                f"step {branch.step}: the screen is not the parent's ({problem}); nothing of this "
                "branch was recorded")
        if recorded.step == branch.step:
            break
        parsed = parse_response(recorded.response)
        if parsed.valid and parsed.action_type not in FINAL_ACTIONS:
            try:
                device.execute(parsed)
            except ActionFailed:  # the parent's was refused alike, or the next check says so
                pass
        passed.append((shot, tree, recorded))
    return passed


def _log_replayed(ep: EpisodeHandle, agent: Agent, branch: Branch | None, shot: bytes,
                  tree: str | None, recorded: ReplayStep, run: _Run) -> None:
    """One replayed step, recorded as the parent recorded it (response, rewards, prompt), on
    the screen the replay passed through, marked ``replayed`` in its info."""
    info = _json_object(recorded.info)
    info["replayed"] = {"from": branch.parent if branch is not None else None, "step": recorded.step}
    ep.log_step(shot, recorded.response, step=recorded.step, reward=recorded.reward,
                step_reward=recorded.step_reward, step_reward_reason=recorded.step_reward_reason,
                prompt=json.loads(recorded.prompt) if recorded.prompt else None, info=info,
                ui_tree=tree)
    _remember(run, agent, recorded.step, shot, recorded.response, parse_response(recorded.response))


def _json_object(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {"parent_info": value}


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
                          task.group_id, *_branch_fields(task))


def _branch_fields(task: Task) -> tuple[str | None, int | None]:
    return (task.branch.parent, task.branch.step) if task.branch is not None else (None, None)


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
        return EpisodeSummary(None, task.name, "skipped", reason=str(exc), group_id=task.group_id,
                              branch_of=_branch_fields(task)[0], branch_step=_branch_fields(task)[1])
    log.info("episode %s (%s): %s after %d step(s)%s", summary.episode_id, task.name,
             summary.status, summary.steps,
             f", score {summary.eval_score}" if summary.eval_score is not None else "")
    return summary
