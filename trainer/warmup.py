"""The SFT warm-up of `elake train --policy vlm`: supervised steps on lake data before RL.

With ``--sft-warmup-steps N`` (and ``--sft-warmup-set`` or ``--sft-warmup-where``), the loop
runs N optimizer steps of supervised fine-tuning before its first RL iteration. The samples
are read with `episodelake.trainer.data.sft_dataset`, the dataset a training loop of one's
own reads: the same selection, prompts, history window and images as the SFT exports, one
path and not two. Each step takes ``--minibatch-size`` samples (forward and backward in
``--micro-batch-size`` chunks, as the RL update does) and the policy's own supervised loss
(`VLMPolicy.sft_loss`: the mean negative log-likelihood of the response and end-of-turn
tokens, with inputs built exactly as acting and the RL update build them), at
``--sft-warmup-lr`` (default ``--lr``). A pass over the selection that ends before N steps
starts another, shuffled anew.

What it leaves in the lake:
- a ``runs`` row of the run at iteration `ITERATION` (-1: before RL iteration 0) with kind
  `KIND`, its metrics under ``sft_warmup`` (the last step's loss, the first one's, each
  step's, samples, tokens, seconds), so the Training page shows it apart from the RL
  iterations and `GET /api/runs?kind=train` leaves it out;
- a ``lineage`` row (kind ``train``, output ``<run_id>/sft-warmup``, the run's id) with the
  lake versions read, the selection and every episode the warm-up's dataset holds, written
  once the steps are done (a failed warm-up writes none). Each checkpoint's lineage row
  then counts these episodes among the ones that trained it.

A bad selection fails before the model is loaded: `prepare` resolves it first.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tqdm import tqdm

from episodelake.lake import Lake
from episodelake.lake.export.errors import EmptySelection
from episodelake.lake.ops import lineage
from episodelake.lake.storage.errors import EpisodeLakeError
from episodelake.trainer.config import TrainConfig
from episodelake.trainer.data import LakeSftDataset, Plan, record_lineage, sft_dataset
from episodelake.trainer.engine import Engine

log = logging.getLogger(__name__)

#: The warm-up's `runs` row: before RL iteration 0, and a kind of its own.
ITERATION = -1
KIND = "sft_warmup"


@dataclass
class Warmup:
    """A resolved warm-up: its dataset (this process's samples) and the plan it reads."""

    dataset: LakeSftDataset
    plan: Plan
    options: dict[str, Any]


@dataclass
class WarmupResult:
    steps: int
    losses: list[float] = field(default_factory=list)
    samples: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def metrics(self, lr: float, passes: int) -> dict[str, Any]:
        return {"sft_warmup": {
            "steps": self.steps, "loss": self.losses[-1] if self.losses else None,
            "loss_at_start": self.losses[0] if self.losses else None, "losses": self.losses,
            "samples": self.samples, "tokens": self.tokens, "passes": passes, "lr": lr,
            "seconds": round(self.seconds, 3)}}


def prepare(lake: Lake, config: TrainConfig) -> Warmup | None:
    """The warm-up's dataset, or None without ``--sft-warmup-steps``. A selection that holds
    nothing to learn, bad SQL or a missing set is one error naming the option."""
    if not config.sft_warmup_steps:
        return None
    options: dict[str, Any] = {"where": config.sft_warmup_where, "set": config.sft_warmup_set,
                               "history_images": config.history_length, "seed": config.seed}
    plans: list[Plan] = []
    which = " and ".join(f"--sft-warmup-{name} {value!r}" for name, value in
                         (("set", config.sft_warmup_set), ("where", config.sft_warmup_where))
                         if value is not None)
    try:
        dataset = sft_dataset(lake, **options, on_plan=plans.append)
    except EmptySelection:
        where = f" AND ({config.sft_warmup_where})" if config.sft_warmup_where else ""
        raise EmptySelection(
            f"sft_warmup: {which} selects no step of a successful episode to learn from; "
            "count them with `elake sql \"SELECT count(*) FROM episodes e JOIN steps s USING "
            f"(episode_id) WHERE e.success{where}\"` and widen the selection") from None
    except EpisodeLakeError as exc:  # bad SQL, a missing set or tag: the option, then the cause
        raise type(exc)(f"sft_warmup: {which}: {exc}") from None
    return Warmup(dataset, plans[0], options)


def run(warmup: Warmup, lake: Lake, policy: Any, engine: Engine, config: TrainConfig, *,
        run_id: str, progress: bool) -> WarmupResult:
    """`config.sft_warmup_steps` supervised steps of `policy` (a `VLMPolicy`) on the warm-up's
    samples; then its `runs` row and its lineage row (module docstring)."""
    lr = config.sft_warmup_lr or config.lr
    assert lr is not None, "TrainConfig's validator fills lr"
    steps, batch_size = config.sft_warmup_steps, config.minibatch_size
    result = WarmupResult(steps)
    engine.set_lr(lr)
    policy.module.train()
    items = _forever(warmup.dataset)
    started = time.perf_counter()
    bar = tqdm(total=steps, desc="sft warm-up", unit="step", disable=not progress)
    for step in range(steps):
        batch = [next(items) for _ in range(batch_size)]
        loss_sum, tokens = 0.0, 0
        for start in range(0, batch_size, config.micro_batch_size):
            micro = batch[start:start + config.micro_batch_size]
            loss, n = policy.sft_loss(micro)
            engine.backward(loss * (len(micro) / batch_size))
            loss_sum += float(loss.detach()) * n
            tokens += n
        engine.step()
        result.losses.append(round(loss_sum / max(tokens, 1), 6))
        result.samples += batch_size
        result.tokens += tokens
        line = (f"sft warm-up step {step + 1}/{steps}: loss {result.losses[-1]:.4f} "
                f"({batch_size} samples, {tokens} target tokens, "
                f"{time.perf_counter() - started:.1f} s)")
        if progress:
            bar.update()
            bar.write(line)
        else:
            log.info(line)
    bar.close()
    policy.module.eval()
    result.seconds = time.perf_counter() - started
    passes = warmup.dataset.epoch + 1
    record_metrics(lake, run_id, config, result.metrics(lr, passes))
    record_lineage(lake, warmup.plan, lineage.warmup_output(run_id), run_id=run_id, kind="train",
                   options={**warmup.options, "steps": steps, "batch_size": batch_size, "lr": lr})
    return result


def _forever(dataset: LakeSftDataset) -> Iterator[dict[str, Any]]:
    """The dataset's samples, pass after pass (each shuffled by its epoch)."""
    while True:
        yielded = False
        for item in dataset:
            yielded = True
            yield item
        if not yielded:  # prepare() refuses an empty selection; this rank may still hold none
            raise EmptySelection("sft_warmup: the warm-up's dataset yielded no sample")
        dataset.set_epoch(dataset.epoch + 1)


def record_metrics(lake: Lake, run_id: str, config: TrainConfig, metrics: dict[str, Any]) -> None:
    lake.upsert("runs", [{"run_id": run_id, "iteration": ITERATION, "kind": KIND,
                          "config": config.to_json(), "metrics": json.dumps(metrics),
                          "created_at": datetime.now(UTC)}])
