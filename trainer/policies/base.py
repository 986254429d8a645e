"""What the trainer asks of a policy, and the recorded step it learns from.

A policy acts like any agent of the episode loop (``act(Observation) -> Reply``, see
:mod:`episodelake.collectors.loop`), so its rollouts are recorded exactly as any other
agent's, and additionally scores recorded responses: ``prepare`` turns steps read back from
the lake into model inputs once per iteration, ``score`` gives the per-token
log-probabilities of the recorded responses under the current weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from safetensors.torch import load_file, save_file

from episodelake.collectors.jobs.batch import AgentSpec
from episodelake.collectors.loop import Agent
from episodelake.lake.storage.errors import NotFound
from episodelake.trainer.ppo import TokenLogProbs


@dataclass(frozen=True)
class Sample:
    """One recorded step: what the policy saw, what it answered, and the step's advantage.

    `history` holds the responses of the episode's earlier steps, oldest first;
    `history_images` the screenshots of the last ``history_length`` of them (empty for
    policies that look at the current screen only). `info` is the step's recorded ``info``
    (where a policy keeps what it read of the screen, e.g. the screen policy's elements) and
    `ocr_boxes` the step's OCR lines (``steps.ocr_boxes``, empty until `elake enrich` ran).
    """

    episode_id: str
    step: int
    goal: str
    screenshot: bytes
    history: tuple[str, ...]
    history_images: tuple[bytes, ...]
    response: str
    advantage: float
    info: dict[str, Any] | None = None
    ocr_boxes: tuple[dict[str, Any], ...] = ()


class TrainablePolicy(Agent, Protocol):
    #: Recorded as ``episodes.model_name``.
    name: str
    #: Earlier screenshots the policy looks at (``Sample.history_images``).
    history_length: int

    @property
    def module(self) -> torch.nn.Module:
        """The weights the optimizer engine updates (read-only here, so a policy may hold a
        subclass such as TinyNet)."""
        ...

    def prepare(self, samples: Sequence[Sample]) -> list[Any]:
        """What `score` takes for each sample, computed once per iteration and reused by
        every epoch (encoded inputs where they are small, the samples themselves where not)."""
        ...

    def score(self, prepared: Sequence[Any]) -> TokenLogProbs:
        """Per-token log-probabilities of the recorded responses, left-aligned (row i's
        tokens first, then padding with mask 0); differentiable unless under no_grad."""
        ...

    def stats(self) -> dict[str, float]:
        """Counters of the policy's own work since the last call (e.g. generated tokens),
        reset on read; reported with the iteration's metrics."""
        ...

    def agent(self) -> AgentSpec:
        """How a rollout worker gets an acting copy of the current weights: a spec opened
        where the worker runs (picklable where the policy may act in other processes).
        Acting copies sample from the episode's seed (``Observation.seed``)."""
        ...

    def save(self, folder: Path) -> None:
        """Write the weights (safetensors) and whatever rebuilds the policy from `folder`."""
        ...

    def reference(self) -> TrainablePolicy:
        """The initial policy, frozen: the reference of the KL term."""
        ...


#: The weights file of a small policy's checkpoint folder (its config file is the policy's).
WEIGHTS_FILE = "model.safetensors"


def save_checkpoint(folder: Path, module: torch.nn.Module, config_json: str, config_file: str) -> None:
    """Write a small policy's checkpoint: its weights and its config (JSON) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in module.state_dict().items()}, str(folder / WEIGHTS_FILE))
    (folder / config_file).write_text(config_json, encoding="utf-8")


def read_checkpoint(folder: Path | str, config_file: str, what: str) -> tuple[str, dict[str, torch.Tensor]]:
    """(config JSON, weights) of a folder `save_checkpoint` wrote; `what` names the policy
    in the error when the folder holds none."""
    folder = Path(folder)
    config_path = folder / config_file
    if not config_path.exists():
        raise NotFound(f"{folder} holds no {what} ({config_file} is missing)")
    return config_path.read_text(encoding="utf-8"), load_file(str(folder / WEIGHTS_FILE))
