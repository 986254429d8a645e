"""VLMPolicy on CPU with a tiny random Qwen2-VL built in the test (no hub access): prompts,
generation, scoring the recorded response, the PPO loss's gradients, checkpoints."""

from __future__ import annotations

import pytest
import torch

from episodelake.collectors.envs.sim.device import SimDevice
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.loop import Observation
from episodelake.lake.storage.errors import NotFound
from episodelake.lake.vocab.prompts import HistoryStep
from episodelake.trainer.policies.base import Sample
from episodelake.trainer.policies.vlm import IMAGE_TOKEN, VLMPolicy
from episodelake.trainer.ppo import ppo_loss

pytestmark = pytest.mark.slow

GOAL = "Turn on Wi-Fi."


@pytest.fixture(scope="module")
def policy(tiny_vlm) -> VLMPolicy:
    return VLMPolicy(tiny_vlm, history_length=1, max_new_tokens=12, generation="transformers")


@pytest.fixture(scope="module")
def screens() -> list[bytes]:
    phone = Phone(0)
    first = phone.screenshot()
    phone.step({"action": "open", "text": "Settings"})
    return [first, phone.screenshot()]


def test_prompt_shows_goal_history_and_the_right_number_of_image_tokens(policy, screens):
    history = ['<tool_call>{"name": "mobile_use", "arguments": {"action": "open", '
               '"text": "Settings"}}</tool_call>']
    messages = policy.messages(GOAL, history, shown=1)
    assert messages[0]["role"] == "system" and "Task: Turn on Wi-Fi." in str(messages[1])
    assert [m["role"] for m in messages[1:]] == ["user", "assistant", "user"]
    inputs = policy.encode(GOAL, history, screens)
    merge = policy.image_processor.merge_size ** 2
    expected = sum(int(grid.prod()) // merge for grid in inputs.image_grid_thw)
    ids = inputs.input_ids.tolist()
    assert ids.count(policy.tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)) == expected
    assert len(inputs.image_grid_thw) == 2 and inputs.prompt_length == len(ids)


def test_act_generates_text_from_the_screens_the_loop_kept(policy, screens):
    agent = policy.agent().open(SimDevice(0))
    assert agent is policy  # the model stays in this process
    first = agent.act(Observation(GOAL, 0, screens[0], [], {}, 11)).response
    second = agent.act(Observation(GOAL, 1, screens[1], [HistoryStep(first, image=0)],
                                   {0: screens[0]}, 11)).response
    assert isinstance(first, str) and isinstance(second, str)
    again = policy.act(Observation(GOAL, 0, screens[0], [], {}, 11)).response
    assert again == first  # the episode's seed fixes the sample


def test_score_and_ppo_loss_backward(policy, screens):
    response = ('<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", '
                '"coordinate": [500, 300]}}\n</tool_call>')
    samples = [Sample("e", 0, GOAL, screens[0], (), (), response, 1.0),
               Sample("e", 1, GOAL, screens[1], (response,), (screens[0],), "short", -1.0)]
    prepared = policy.prepare(samples)
    policy.module.train()
    scored = policy.score(prepared)
    lengths = [len(policy.tokenizer(s.response, add_special_tokens=False)["input_ids"]) + 1
               for s in samples]
    assert scored.mask.sum(dim=1).tolist() == lengths  # the response and the end-of-turn token
    assert bool((scored.logp[scored.mask > 0] < 0).all())
    loss, stats = ppo_loss(scored, scored.logp.detach(), torch.tensor([1.0, -1.0]),
                           clip_eps=0.2, ref_logp=scored.logp.detach() - 0.1, kl_coef=0.1)
    loss.backward()
    grads = [p.grad for p in policy.module.parameters() if p.grad is not None]
    assert len(grads) > 10 and all(bool(torch.isfinite(g).all()) for g in grads)
    assert stats["kl_ref"] > 0
    policy.module.zero_grad(set_to_none=True)
    policy.module.eval()


def test_checkpoint_folder_reloads_with_the_same_weights(policy, tmp_path):
    policy.save(tmp_path / "policy")
    loaded = VLMPolicy(policy.model_path, weights=tmp_path / "policy",
                       generation="transformers")
    for (name, a), b in zip(policy.module.state_dict().items(),
                            loaded.module.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_a_missing_model_folder_says_how_to_get_one(tmp_path):
    with pytest.raises(NotFound, match="huggingface-cli download"):
        VLMPolicy(tmp_path / "nothing-here")
