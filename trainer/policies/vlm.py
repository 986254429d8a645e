"""VLMPolicy: a Hugging Face image-text model (Qwen2-VL / Qwen2.5-VL family) as a trainable
phone agent.

Prompts come from :func:`episodelake.lake.vocab.prompts.build_messages` (MAI-UI style): the
goal, the earlier actions as text, the last `history_length` screenshots, the current one.
Acting and learning build the same prompt: acting gets the episode's earlier screenshots from
the episode loop's observation, learning reads them back from the lake.

Inputs are built from the tokenizer's chat template and the image processor directly (each
``<|image_pad|>`` expanded to the image's patch count), not through the model's combined
processor class, which needs torchvision; so the same code runs on a CPU-only install and on
a GPU. Generation goes through vLLM when the ``gpu`` extra is installed and a GPU is present
(imported only then), else through ``generate``. vLLM reads its weights from a folder: the
model path at first, then each checkpoint the loop saves (the engine is rebuilt after every
save, which costs a model load per iteration but works with any vLLM version).

Learning scores the recorded response re-tokenised (plus the end-of-turn token): the lake
stores text, so a response whose generated tokens were not the canonical tokenisation is
scored under the canonical one. The SFT warm-up (`episodelake.trainer.warmup`) scores the
samples of `episodelake.trainer.data.sft_dataset` the same way (`encode_item`, `sft_loss`):
their chat messages go through the same chat template and image expansion, so there is one
way to build the model's inputs, not one per data source.
"""

from __future__ import annotations

import gc
import io
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from PIL import Image

from episodelake.collectors.jobs.batch import InProcessAgent
from episodelake.collectors.loop import Observation, Reply
from episodelake.lake.storage.errors import InvalidInput, NotFound
from episodelake.lake.vocab.families import history_step
from episodelake.lake.vocab.prompts import build_messages
from episodelake.lake.vocab.seeds import derive
from episodelake.trainer.policies.base import Sample
from episodelake.trainer.ppo import TokenLogProbs

IMAGE_TOKEN = "<|image_pad|>"
_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def _one_text(value: object) -> str:
    """The text of a tokenizer call made for one text (transformers types the result of
    `decode` and `apply_chat_template` as text or lists of it, or token ids)."""
    if not isinstance(value, str):
        raise TypeError(f"the tokenizer returned {type(value).__name__}, expected one text")
    return value


def _placeholder(_ref: Any) -> dict[str, str]:
    return {"type": "image"}


def vllm_available() -> bool:
    """Whether vLLM generation can run here: the `gpu` extra is installed and a GPU is seen."""
    if not torch.cuda.is_available():
        return False
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class Inputs:
    """One prompt (+ response when learning) as model inputs."""

    input_ids: torch.Tensor  # [length]: prompt, then response tokens
    prompt_length: int
    pixel_values: torch.Tensor  # [patches, dim], all images of the prompt
    image_grid_thw: torch.Tensor  # [images, 3]
    images: list[Image.Image]


class VLMPolicy:
    """See the module docstring. `model_path` must be a local folder (no hub downloads);
    `weights`, a folder written by `save` (a checkpoint), replaces its weights."""

    history_length: int

    def __init__(self, model_path: str | Path, *, weights: Path | None = None,
                 history_length: int = 2,
                 max_new_tokens: int = 256, temperature: float = 1.0,
                 max_pixels: int = 1024 * 28 * 28, dtype: str = "auto",
                 generation: str = "auto", vllm_gpu_memory: float = 0.3):
        from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer

        self.model_path = Path(model_path)
        if not (self.model_path / "config.json").is_file():
            raise NotFound(
                f"model_path: {self.model_path} is not a Hugging Face model folder (no "
                "config.json); download one first, e.g. `huggingface-cli download "
                f"Qwen/Qwen2-VL-2B-Instruct --local-dir {self.model_path}`")
        self.name = self.model_path.name
        self.history_length = history_length
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.max_pixels = max_pixels
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype_name = dtype
        if dtype == "auto":
            dtype = "bfloat16" if self.device.type == "cuda" else "float32"
        self.dtype = _DTYPES[dtype]
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path, local_files_only=True)
        if self.tokenizer.chat_template is None:
            raise InvalidInput(f"{self.model_path}: the tokenizer has no chat template")
        self.image_processor = AutoImageProcessor.from_pretrained(
            self.model_path, local_files_only=True, max_pixels=max_pixels)
        self.module = AutoModelForImageTextToText.from_pretrained(
            weights or self.model_path, dtype=self.dtype, local_files_only=True).to(
            self.device)  # type: ignore[arg-type]  # transformers wraps PreTrainedModel.to in functools.wraps, which mypy does not bind as a method
        self.image_token_id = self.module.config.image_token_id
        self.eos_token_id = self.tokenizer.eos_token_id
        if self.eos_token_id is None:
            raise InvalidInput(f"{self.model_path}: the tokenizer has no eos token")
        self.pad_token_id = self.tokenizer.pad_token_id
        if self.pad_token_id is None:
            self.pad_token_id = self.eos_token_id
        if generation == "auto":
            generation = "vllm" if vllm_available() else "transformers"
        elif generation == "vllm" and not vllm_available():
            raise InvalidInput("generation: vllm needs a GPU and the `gpu` extra (`just "
                               "gpu-setup` makes .venv-gpu); or pass --generation transformers")
        self.generation = generation
        self.vllm_gpu_memory = vllm_gpu_memory
        self._vllm: Any = None  # a vllm.LLM (untyped), built on first use
        self._vllm_weights = weights or self.model_path
        self._generated_tokens = 0
        self._generation_seconds = 0.0

    # --- prompts -----------------------------------------------------------------------------

    def messages(self, goal: str, history: Sequence[str], shown: int) -> list[dict[str, Any]]:
        """Chat messages for the next step; `shown` earlier screenshots appear as images."""
        steps = [history_step(response) for response in history]
        return build_messages(goal, steps, screenshot=None, history_length=shown,
                              image_part=_placeholder)

    def _prompt(self, goal: str, history: Sequence[str], shown: int) -> str:
        """The chat template applied to `messages`, ending where the model's reply begins."""
        return _one_text(self.tokenizer.apply_chat_template(
            self.messages(goal, history, shown), add_generation_prompt=True, tokenize=False))

    def encode(self, goal: str, history: Sequence[str], images: Sequence[bytes],
               response: str | None = None) -> Inputs:
        """Model inputs: `images` are the shown earlier screenshots then the current one."""
        pictures = [Image.open(io.BytesIO(data)).convert("RGB") for data in images]
        return self._inputs(self._prompt(goal, history, len(images) - 1), pictures, response)

    def encode_item(self, item: Mapping[str, Any]) -> Inputs:
        """A dataset item as model inputs: an `sft_dataset` sample (chat `messages` whose
        last assistant turn is the step's response, PIL `images` in the order of the image
        parts). The prompt is every message before that turn, through the same chat template
        and image expansion as acting; the target is the turn's text plus the end-of-turn
        token, as `score` scores a recorded response."""
        messages = list(item["messages"])
        turns = [i for i, message in enumerate(messages) if message["role"] == "assistant"]
        if not turns:
            raise InvalidInput("the item has no assistant turn to learn (messages: "
                               f"{[m['role'] for m in messages]})")
        last = turns[-1]
        content = messages[last]["content"]
        response = content if isinstance(content, str) else "".join(
            part.get("text", "") for part in content if part["type"] == "text")
        text = _one_text(self.tokenizer.apply_chat_template(
            messages[:last], add_generation_prompt=True, tokenize=False))
        return self._inputs(text, [image.convert("RGB") for image in item["images"]], response)

    def _inputs(self, text: str, pictures: list[Image.Image], response: str | None) -> Inputs:
        """Inputs of a prompt already through the chat template (one image slot per picture),
        then `response` and the end-of-turn token when given."""
        vision = self.image_processor(images=pictures, return_tensors="pt")
        merge = self.image_processor.merge_size ** 2
        pieces = text.split(IMAGE_TOKEN)
        if len(pieces) != len(pictures) + 1:
            raise InvalidInput(f"the chat template produced {len(pieces) - 1} image slots for "
                               f"{len(pictures)} images")
        expanded = pieces[0]
        for grid, piece in zip(vision["image_grid_thw"], pieces[1:], strict=True):
            expanded += IMAGE_TOKEN * (int(grid.prod()) // merge) + piece
        prompt = self.tokenizer(expanded, add_special_tokens=False)["input_ids"]
        answer = [] if response is None else (
            self.tokenizer(response, add_special_tokens=False)["input_ids"] + [self.eos_token_id])
        return Inputs(torch.tensor(prompt + answer), len(prompt), vision["pixel_values"],
                        vision["image_grid_thw"], pictures)

    def shown(self, screenshot: bytes, earlier: Sequence[bytes]) -> list[bytes]:
        """The screenshots a prompt shows: the last `history_length` earlier ones, then the
        current one."""
        return [*earlier[len(earlier) - min(self.history_length, len(earlier)):], screenshot]

    # --- acting ------------------------------------------------------------------------------

    def act(self, observation: Observation) -> Reply:
        """Generate the response for the screen, with the earlier screenshots the loop kept
        (`history_length` of them); the sample is fixed by the episode's seed and step."""
        history = observation.responses
        earlier = [observation.images[step] for step in sorted(observation.images)]
        prepared = self.encode(observation.goal, history,
                               self.shown(observation.screenshot, earlier))
        seed = derive(observation.seed or 0, "step", observation.step)
        return Reply(self.generate(prepared, observation.goal, history, seed))

    def generate(self, prepared: Inputs, goal: str, history: Sequence[str], seed: int) -> str:
        started = time.perf_counter()
        if self.generation == "vllm":
            text, tokens = self._generate_vllm(prepared, goal, history, seed)
        else:
            text, tokens = self._generate_transformers(prepared, seed)
        self._generated_tokens += tokens
        self._generation_seconds += time.perf_counter() - started
        return text

    def stats(self) -> dict[str, float]:
        """Generation counters since the last call (then reset)."""
        stats = {"generated_tokens": self._generated_tokens,
                 "generation_seconds": round(self._generation_seconds, 3)}
        self._generated_tokens, self._generation_seconds = 0, 0.0
        return stats

    def _generate_transformers(self, prepared: Inputs, seed: int) -> tuple[str, int]:
        from transformers import GenerationConfig

        config = GenerationConfig(
            do_sample=self.temperature > 0, temperature=self.temperature or None, top_p=1.0,
            top_k=0, max_new_tokens=self.max_new_tokens, eos_token_id=self.eos_token_id,
            pad_token_id=self.pad_token_id)
        inputs = self._batch([prepared], with_response=False)
        was_training = self.module.training
        self.module.eval()
        try:
            with torch.no_grad(), torch.random.fork_rng(
                    devices=[self.device] if self.device.type == "cuda" else []):
                torch.manual_seed(seed)
                output = self.module.generate(**inputs, generation_config=config)
        finally:
            self.module.train(was_training)
        new = output[0, inputs["input_ids"].shape[1]:]
        return _one_text(self.tokenizer.decode(new, skip_special_tokens=True)), len(new)

    def _generate_vllm(self, prepared: Inputs, goal: str, history: Sequence[str],
                       seed: int) -> tuple[str, int]:
        from vllm import LLM, SamplingParams

        if self._vllm is None:
            self._vllm = LLM(
                model=str(self._vllm_weights), tokenizer=str(self.model_path),
                dtype=self.dtype_name if self.dtype_name != "auto" else "auto",
                gpu_memory_utilization=self.vllm_gpu_memory, seed=seed,
                limit_mm_per_prompt={"image": self.history_length + 1},
                mm_processor_kwargs={"max_pixels": self.max_pixels})
        text = self._prompt(goal, history, len(prepared.images) - 1)
        params = SamplingParams(temperature=self.temperature, top_p=1.0,
                                max_tokens=self.max_new_tokens, seed=seed)
        outputs = self._vllm.generate(
            {"prompt": text, "multi_modal_data": {"image": prepared.images}}, params,
            use_tqdm=False)
        completion = outputs[0].outputs[0]
        return completion.text, len(completion.token_ids)

    def agent(self) -> InProcessAgent:
        """This policy itself: the model stays where it is (one worker, in this process)."""
        return InProcessAgent(self)

    # --- learning ----------------------------------------------------------------------------

    def prepare(self, samples: Sequence[Sample]) -> list[Sample]:
        """The samples themselves: `score` encodes each micro-batch when it needs it, since
        the pixel values of a whole batch would not fit in memory."""
        return list(samples)

    def _encode_sample(self, sample: Sample) -> Inputs:
        return self.encode(sample.goal, sample.history,
                           self.shown(sample.screenshot, sample.history_images), sample.response)

    def _batch(self, items: Sequence[Inputs], *, with_response: bool) -> dict[str, torch.Tensor]:
        ids = [item.input_ids if with_response else item.input_ids[:item.prompt_length]
               for item in items]
        longest = max(len(i) for i in ids)
        input_ids = torch.full((len(items), longest), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(items), longest), dtype=torch.long)
        for row, sequence in enumerate(ids):
            input_ids[row, :len(sequence)] = sequence
            attention[row, :len(sequence)] = 1
        return {
            "input_ids": input_ids.to(self.device),
            "attention_mask": attention.to(self.device),
            "mm_token_type_ids": (input_ids == self.image_token_id).long().to(self.device),
            "pixel_values": torch.cat([i.pixel_values for i in items]).to(self.device, self.dtype),
            "image_grid_thw": torch.cat([i.image_grid_thw for i in items]).to(self.device),
        }

    def score(self, samples: Sequence[Sample]) -> TokenLogProbs:
        """Per-token log-probs of each recorded response, left-aligned: row i's tokens are
        0 .. response_length_i - 1 (the response, then the end-of-turn token)."""
        return self._token_logprobs([self._encode_sample(sample) for sample in samples])

    def score_items(self, items: Sequence[Mapping[str, Any]]) -> TokenLogProbs:
        """`score` for dataset items (`encode_item`): per-token log-probs of each item's
        target, the last assistant turn and the end-of-turn token."""
        return self._token_logprobs([self.encode_item(item) for item in items])

    def sft_loss(self, items: Sequence[Mapping[str, Any]]) -> tuple[torch.Tensor, int]:
        """(mean negative log-likelihood of the items' target tokens, how many there are):
        the supervised loss of the SFT warm-up (`episodelake.trainer.warmup`)."""
        scored = self.score_items(items)
        tokens = int(scored.mask.sum())
        return -scored.logp.sum() / max(tokens, 1), tokens

    def _token_logprobs(self, prepared: list[Inputs]) -> TokenLogProbs:
        inputs = self._batch(prepared, with_response=True)
        logits = self.module(**inputs).logits
        width = max(len(p.input_ids) - p.prompt_length for p in prepared)
        rows, targets, mask = [], [], torch.zeros(len(prepared), width, device=self.device)
        for row, item in enumerate(prepared):
            start, length = item.prompt_length, len(item.input_ids) - item.prompt_length
            # the logits at position t predict the token at t + 1
            picked = logits[row, start - 1:start - 1 + length]
            rows.append(F.pad(picked, (0, 0, 0, width - length)))
            targets.append(F.pad(item.input_ids[start:], (0, width - length)))
            mask[row, :length] = 1.0
        logp_all = F.log_softmax(torch.stack(rows).float(), dim=-1)
        target = torch.stack(targets).to(self.device)
        logp = logp_all.gather(-1, target[..., None])[..., 0] * mask
        entropy = -(logp_all.exp() * logp_all).sum(-1) * mask
        return TokenLogProbs(logp, mask, entropy)

    # --- copies and files --------------------------------------------------------------------

    def reference(self) -> VLMPolicy:
        """The initial model, frozen: the KL reference."""
        copy = VLMPolicy(self.model_path, history_length=self.history_length,
                         max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                         max_pixels=self.max_pixels, dtype=self.dtype_name,
                         generation="transformers")
        copy.module.requires_grad_(False)
        copy.module.eval()
        return copy

    def save(self, folder: Path) -> None:
        """A Hugging Face model folder (safetensors) that `--model-path` and vLLM can load."""
        folder.mkdir(parents=True, exist_ok=True)
        self.module.save_pretrained(folder, safe_serialization=True)
        self.tokenizer.save_pretrained(folder)
        self.image_processor.save_pretrained(folder)
        # generation reads the newest weights from here on (vLLM is rebuilt on its next use)
        self._vllm_weights = folder
        if self._vllm is not None:
            self._vllm = None
            gc.collect()
            torch.cuda.empty_cache()

