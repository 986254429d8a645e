"""A randomly initialised, very small Qwen2-VL saved as a local model folder, built offline.

The tokenizer is a byte-level BPE trained here on a few agent-like sentences, with the
special tokens Qwen2-VL's chat format uses; the image processor resizes screenshots to a
few 28x28 patches. Everything is written with `save_pretrained`, so the policy under test
loads it exactly as it would load a downloaded checkpoint.
"""

from __future__ import annotations

import os
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

CORPUS = [
    '<thinking>\nOpen settings and tap the switch.\n</thinking>\n<tool_call>\n{"name": '
    '"mobile_use", "arguments": {"action": "click", "coordinate": [500, 300]}}\n</tool_call>',
    "Task: Turn on Wi-Fi. You control an Android phone to carry out the user's task.",
    "Actions taken before the screenshots below: click (500, 300), swipe up, type 'hello'",
]


def build_tiny_vlm(folder: Path) -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoConfig, AutoModelForImageTextToText, PreTrainedTokenizerFast
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(CORPUS * 10, trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>", chat_template=CHAT_TEMPLATE)
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    config = AutoConfig.for_model(
        "qwen2_vl",
        text_config={"vocab_size": len(tokenizer), "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "max_position_embeddings": 4096, "bos_token_id": ids["<|endoftext|>"],
                     "eos_token_id": ids["<|im_end|>"], "pad_token_id": ids["<|endoftext|>"],
                     "rope_scaling": {"type": "mrope", "mrope_section": [1, 1, 2]}},
        vision_config={"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 4,
                       "mlp_ratio": 2, "patch_size": 14, "spatial_merge_size": 2,
                       "temporal_patch_size": 2, "in_chans": 3},
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    model = AutoModelForImageTextToText.from_config(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    Qwen2VLImageProcessorPil(min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 8).save_pretrained(folder)
    return folder
