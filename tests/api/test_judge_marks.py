"""The step judge sees the action drawn exactly as a person replaying the episode does: the
"before" screenshot in the judge's request is the API's `?annotated=1` image, byte for byte,
for every kind of action."""

from __future__ import annotations

import base64

from episodelake.collectors.agents.judge import StepToJudge, judge_messages, mark_action


def _before_image_sent(step: StepToJudge) -> bytes:
    parts = judge_messages(step)[1]["content"]
    url = next(p for p in parts if p["type"] == "image_url")["image_url"]["url"]
    return base64.b64decode(url.split(",", 1)[1])


def test_the_judge_sees_the_annotated_screenshot(client, lake):
    kinds = set()
    for episode_id in ("wifi_on-2", "set_alarm-2", "send_message-1"):
        detail = client.get(f"/api/episodes/{episode_id}").json()
        rows = lake.steps(episode_id).to_pylist()
        images = dict(lake.images(episode_id))
        for row, shown in zip(rows[:-1], detail["steps"][:-1], strict=True):
            if row["step"] not in images or row["step"] + 1 not in images:
                continue
            step = StepToJudge(detail["episode"]["task_goal"], images[row["step"]], images[row["step"] + 1],
                               row["model_response"], row["action_type"], row["action"],
                               row["x"], row["y"], row["x2"], row["y2"])
            annotated = client.get(shown["image_url"], params={"annotated": 1}).content
            assert mark_action(step.before, step) == annotated, (episode_id, row["step"])
            assert _before_image_sent(step) == annotated
            kinds.add(shown["action_view"]["marker"]["kind"])
    assert {"click", "long_press", "swipe", "drag", "none"} <= kinds
