"""One DeepSpeed ZeRO-2 update of a VLMPolicy on CPU; run by test_deepspeed.py in its own
process (DeepSpeed initialises torch.distributed for the life of the process).

    python deepspeed_step.py MODEL_DIR OUT_DIR    -> prints one JSON line of findings
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from episodelake.collectors.envs.sim.phone import Phone
from episodelake.trainer.config import DEFAULT_DEEPSPEED_CONFIG
from episodelake.trainer.engine import build_engine
from episodelake.trainer.policies.base import Sample
from episodelake.trainer.policies.vlm import VLMPolicy
from episodelake.trainer.ppo import ppo_loss


def main(model: Path, out: Path) -> None:
    policy = VLMPolicy(model, history_length=0, generation="transformers")
    engine = build_engine("deepspeed", policy.module, lr=1e-3, max_grad_norm=1.0,
                          deepspeed_config=DEFAULT_DEEPSPEED_CONFIG)
    response = '<tool_call>{"name": "mobile_use", "arguments": {"action": "wait"}}</tool_call>'
    samples = [Sample("e", 0, "Turn on Wi-Fi.", Phone(0).screenshot(), (), (), response, 1.0)]
    prepared = policy.prepare(samples)
    before = {name: p.detach().clone() for name, p in policy.module.named_parameters()}
    policy.module.train()
    for half in (prepared, prepared):  # two micro-batches, one optimizer step
        scored = policy.score(half)
        loss, _ = ppo_loss(scored, scored.logp.detach(), torch.tensor([1.0]), clip_eps=0.2)
        engine.backward(loss * 0.5)
    engine.step()
    changed = sum(not torch.equal(before[n], p.detach())
                  for n, p in policy.module.named_parameters())
    engine.save(out)
    engine.load(out)
    print(json.dumps({
        "engine": engine.name,
        "zero_stage": int(engine.engine.zero_optimization_stage()),
        "global_steps": int(engine.engine.global_steps),
        "changed_parameters": changed,
        "parameters": len(before),
        "saved": sorted(p.name for p in (out / "deepspeed").iterdir()),
    }))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
