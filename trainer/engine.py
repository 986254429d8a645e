"""Optimizer engines: DeepSpeed ZeRO for the VLM, plain torch where DeepSpeed cannot run.

Both take any number of ``backward(loss)`` calls (one per micro-batch; the caller weights
each micro-batch's loss by its share of the minibatch) and then one ``step()``, which clips
the accumulated gradients and updates the weights. With DeepSpeed this is its caller-owned
accumulation mode (``managed_gradient_accumulation: false``): gradients accumulate locally
and are reduced once, in ``step()``. Their state (optimizer moments, step counters) is saved
and restored with the checkpoint, in each engine's own format.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from pathlib import Path
from typing import Protocol

import torch

from episodelake.lake.storage.errors import InvalidInput

log = logging.getLogger(__name__)

#: Where DeepSpeed compiles its C++ ops unless TORCH_EXTENSIONS_DIR says otherwise (the first
#: compile takes minutes on a small CPU; later runs reuse it).
EXTENSIONS_CACHE = Path(".cache") / "torch_extensions"


class Engine(Protocol):
    """What the update phase needs from an optimizer engine."""

    name: str

    def backward(self, loss: torch.Tensor) -> None: ...

    def step(self) -> None: ...

    def set_lr(self, lr: float) -> None: ...

    def save(self, folder: Path) -> None: ...

    def load(self, folder: Path) -> None: ...


def build_engine(kind: str, module: torch.nn.Module, *, lr: float, max_grad_norm: float,
                 deepspeed_config: str | Path) -> Engine:
    """`kind` is "deepspeed" or "torch" (the loop resolves "auto" with `deepspeed_usable`)."""
    if kind == "deepspeed":
        return DeepSpeedEngine(module, lr=lr, max_grad_norm=max_grad_norm,
                               config_path=Path(deepspeed_config))
    if kind == "torch":
        return TorchEngine(module, lr=lr, max_grad_norm=max_grad_norm)
    raise InvalidInput(f"engine: {kind!r} is not deepspeed or torch")


def deepspeed_usable() -> bool:
    """Whether DeepSpeed imports here (the `train` extra); the reason is logged when not."""
    try:
        import deepspeed  # noqa: F401
    except Exception as exc:  # deepspeed raises more than ImportError when its ops are broken
        log.warning("DeepSpeed cannot run here (%s: %s); updating with plain torch",
                    type(exc).__name__, exc)
        return False
    return True


def _trainable(module: torch.nn.Module) -> list[torch.nn.Parameter]:
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise InvalidInput("the policy has no trainable parameters")
    return params


class TorchEngine:
    """AdamW with gradient clipping."""

    name = "torch"

    def __init__(self, module: torch.nn.Module, *, lr: float, max_grad_norm: float):
        self.module = module
        self.params = _trainable(module)
        self.optimizer = torch.optim.AdamW(self.params, lr=lr, weight_decay=0.0)
        self.max_grad_norm = max_grad_norm

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def step(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def save(self, folder: Path) -> None:
        torch.save(self.optimizer.state_dict(), folder / "optimizer.pt")

    def load(self, folder: Path) -> None:
        path = folder / "optimizer.pt"
        if not path.exists():
            log.warning("%s has no optimizer state; AdamW starts from zero moments", folder)
            return
        self.optimizer.load_state_dict(torch.load(path, weights_only=True))


class DeepSpeedEngine:
    """`deepspeed.initialize` over the module with a torch AdamW, configured from a JSON file.

    The file (``trainer/configs/zero2.json`` by default) sets the ZeRO stage and its buckets;
    batch sizes, the accumulation mode, gradient clipping and bf16 are filled in here so that
    the file and the trainer's config never disagree. A single process without a launcher gets the environment a
    launcher would give (rank 0 of 1, a free local port) and the gloo backend on CPU.
    """

    name = "deepspeed"

    def __init__(self, module: torch.nn.Module, *, lr: float, max_grad_norm: float,
                 config_path: Path):
        _single_process_environment()
        import deepspeed

        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInput(f"deepspeed_config: cannot read {config_path}: {exc}") from None
        config.update(
            train_micro_batch_size_per_gpu=1,
            gradient_accumulation_steps=1,
            managed_gradient_accumulation=False,
            gradient_clipping=max_grad_norm,
        )
        config.pop("train_batch_size", None)
        dtype = next(module.parameters()).dtype
        config["bf16"] = {"enabled": dtype == torch.bfloat16}
        config["fp16"] = {"enabled": dtype == torch.float16}
        if not torch.distributed.is_initialized():
            deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
        optimizer = torch.optim.AdamW(_trainable(module), lr=lr, weight_decay=0.0)
        self.engine, _, _, _ = deepspeed.initialize(model=module, optimizer=optimizer,
                                                    config=config)
        self.module = self.engine.module
        log.info("DeepSpeed engine: ZeRO stage %s, %s", self.engine.zero_optimization_stage(),
                 "bf16" if config["bf16"]["enabled"] else str(dtype))

    def backward(self, loss: torch.Tensor) -> None:
        self.engine.backward(loss)

    def step(self) -> None:
        self.engine.step()

    def set_lr(self, lr: float) -> None:
        for group in self.engine.optimizer.param_groups:
            group["lr"] = lr

    def save(self, folder: Path) -> None:
        self.engine.save_checkpoint(str(folder / "deepspeed"), tag="last",
                                    save_latest=False)

    def load(self, folder: Path) -> None:
        path = folder / "deepspeed"
        if not path.exists():
            log.warning("%s has no DeepSpeed state; the optimizer starts fresh", folder)
            return
        self.engine.load_checkpoint(str(path), tag="last", load_module_strict=True,
                                    load_optimizer_states=True, load_lr_scheduler_states=False)


def _single_process_environment() -> None:
    """The variables a DeepSpeed/torchrun launcher sets, for a run started without one."""
    if "TORCH_EXTENSIONS_DIR" not in os.environ:
        os.environ["TORCH_EXTENSIONS_DIR"] = str(EXTENSIONS_CACHE.resolve())
    if "RANK" in os.environ:
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
