"""OpenAI-style chat JSONL with the screenshots inlined as data URLs.

Each line: ``{"messages": [{"role": ..., "content": [parts]}]}`` where a part is
``{"type": "text", "text": ...}`` or ``{"type": "image_url", "image_url": {"url":
"data:image/png;base64,..."}}``. Every message's content is a list of parts (system and
assistant too, which chat APIs and OpenAI-compatible fine-tuning services accept), so each
field has one type and the file also loads with `datasets`' JSON builder.

OpenAI's fine-tuning accepts at most 10 images per example, so no sample here has more. An
episode sample (``--granularity episode``) longer than 10 steps is split into consecutive
conversations of at most 10 steps, as even as possible (15 steps: 7 + 8): each one opens
with the task and the earlier steps as text ("actions taken before the screenshots
below"), then its own steps with their screenshots. This trains better than the
alternatives: every step is an assistant turn of exactly one example, so each is trained
once (a sliding window would train early steps up to 10 times, and dropping the oldest
screenshots would train steps whose screenshots the example no longer shows), and each
step sees the context an agent's prompt gives at run time: the history as text, the recent
screenshots. A step sample always fits (``--history-images`` 9 or less, else the export
is refused). ``--max-images`` sets a lower limit.

OpenAI trains every assistant message of an example. In a step sample the earlier
assistant turns are the responses of earlier steps, samples of their own; an episode
sample's turns are its steps, each trained once.
"""

from __future__ import annotations

import base64

from episodelake.lake.export.base import ExportFormat, JsonlWriter, dumps
from episodelake.lake.export.images import media_type
from episodelake.lake.export.samples import Sample

#: Stands in for an image part while the line is encoded. Its JSON text cannot occur inside
#: an encoded string (quotes there are escaped), so splitting on it finds only image slots.
_SLOT = {"type": "\x00"}
_SLOT_JSON = dumps(_SLOT)


class OpenAIWriter(JsonlWriter):
    def record(self, sample: Sample) -> dict:
        messages = []
        for m in sample.messages:
            content = m["content"]
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
            messages.append({"role": m["role"], "content": [
                {"type": "text", "text": p["text"]} if p["type"] == "text" else _SLOT for p in parts]})
        return {"messages": messages}

    def line(self, sample: Sample) -> str:
        # The base64 text needs no JSON escaping; splicing it in skips the JSON encoder's scan
        # of every image byte, which otherwise dominates this format's export time.
        pieces = dumps(self.record(sample)).split(_SLOT_JSON)
        out = [pieces[0]]
        for sha, rest in zip(sample.images, pieces[1:], strict=True):
            data, fmt = self.ctx.images.data(sha)
            url = f"data:{media_type(fmt)};base64,{base64.b64encode(data).decode('ascii')}"
            out += ['{"type": "image_url", "image_url": {"url": "', url, '"}}', rest]
        return "".join(out)


FORMAT = ExportFormat(
    name="openai",
    summary="OpenAI-style chat JSONL, images as base64 data URLs in image_url parts",
    doc=__doc__,
    open=OpenAIWriter,
    max_images=10,
)
