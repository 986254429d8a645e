"""Step verdicts (process reward): every step with the judge's verdict and reason, success and failure alike.

Each line: ``{"prompt": [...], "completion": [{"role": "assistant", "content": [...]}],
"label": true | false | null, "images": [path, ...], "step_reward", "reason", "task",
"episode_id", "step", "episode_success"}``: the step's prompt (as its SFT sample shows it)
and its response, in TRL's conversational unpaired-preference format (`prompt`,
`completion`, boolean `label`: what `KTOTrainer` reads, and a per-step reward model's
training data), content as lists of text and image parts, images as paths in the order of
their parts. `label` is the judge's verdict: true when `step_reward` > 0, false when it is 0
or less. `reason` is the judge's `step_reward_reason`.

A step the judge never scored (`step_reward` null) is written, with ``"label": null`` and
``"step_reward": null`` (and ``"reason": null`` unless the judge left a reason): unknown,
never false, so it is not read as a negative. `datasets` loads the column as booleans with
None; TRL's `KTOTrainer` needs a boolean on every row, so export only judged steps for it,
with ``--where "step_reward IS NOT NULL"`` (the counts then count only those).

Export failed episodes too with ``--include-failed`` and steps whose action did not parse
with ``--include-invalid`` (their verdicts are the negatives a reward model learns from).
Only step samples (``--granularity step``). With ``--redact`` the judge's reason is masked
like the rest of the text, and the screenshots like every other format's.
"""

from __future__ import annotations

from episodelake.lake.export.base import ExportFormat, JsonlWriter, WriteContext
from episodelake.lake.export.dpo import EpisodeFacts, conversation
from episodelake.lake.export.samples import Sample


class PrmWriter(JsonlWriter):
    def __init__(self, ctx: WriteContext):
        super().__init__(ctx)
        self.facts = EpisodeFacts(ctx)
        self.redactor = ctx.spec.redactor()

    def record(self, sample: Sample) -> dict:
        episode, step = self.facts.of(sample)
        reward = step["step_reward"]
        reason = step["step_reward_reason"]
        if reason and self.redactor is not None:
            reason, _ = self.redactor.mask_text(reason)
        return {"prompt": conversation(sample.messages[:-1]),
                "completion": conversation(sample.messages[-1:]),
                "label": None if reward is None else reward > 0,
                "images": [self.ctx.image_path(sha) for sha in sample.images],
                "step_reward": reward, "reason": reason, "task": sample.task,
                "episode_id": sample.episode_id, "step": sample.step,
                "episode_success": episode["success"]}


FORMAT = ExportFormat(
    name="prm",
    summary="step verdicts JSONL: every step's prompt, response, judge label and reason (TRL prompt/completion/label, images)",
    doc=__doc__,
    open=PrmWriter,
    image_paths=True,
)
