"""An agent model behind an OpenAI-compatible server (vLLM, SGLang, a hosted API), prompted as
MAI-UI or GUI-Owl with the lake's prompts: what `elake collect --model` and re-runs with
``--policy model`` run."""

from __future__ import annotations

from typing import Any

from episodelake.collectors.agents.model_client import ModelClient
from episodelake.collectors.loop import Observation, Reply
from episodelake.lake.storage.images import sniff_format
from episodelake.lake.vocab.prompts import build_messages, data_url_part


class ModelPolicy:
    """An agent model behind an OpenAI-compatible server, prompted as MAI-UI or GUI-Owl."""

    def __init__(self, client: ModelClient, *, style: str = "mai-ui", history_length: int = 3):
        self.client = client
        self.style = style
        self.history_length = history_length
        self.name = client.model

    def act(self, observation: Observation) -> Reply:
        images = {**observation.images, observation.step: observation.screenshot}

        def inline(step: int) -> dict[str, Any]:
            data = images[step]
            return data_url_part(data, f"image/{sniff_format(data)}")

        def reference(step: int) -> dict[str, Any]:
            return {"type": "image", "image": {"step": step}}

        def messages(image_part: Any) -> list[dict[str, Any]]:
            return build_messages(observation.goal, observation.history,
                                  screenshot=observation.step, style=self.style,
                                  history_length=self.history_length, image_part=image_part)

        return Reply(self.client.complete(messages(inline)), messages(reference))
