"""What the small CPU policies (:mod:`.tiny`, :mod:`.screen`) share: the structured action
and everything done with it apart from reading an observation.

The action is a *verb* (`VERBS`) and, for some verbs, an *argument*: a place to tap
(click, long press), a goal span to type, an app to open. It is written as MAI-UI tool-call
text (`format_tool_call`), so it travels through the same parser, recorder and lake as a
VLM's response, and a recorded response is parsed back to its (verb, argument) to learn.

`SmallPolicy` does the rest alike for every small policy: sampling a verb then its argument
from the episode's seed, scoring the two "tokens" of a recorded step (`structured_logprobs`),
the picklable acting copy a rollout worker opens (`SmallAgent`), the frozen KL reference and
the checkpoint folder. A subclass says what differs: its network and config classes, how it
reads an observation (`_read`) or a recorded step (`_encode_sample`), how it batches the
encoded inputs (`_collate`) and what a tap's argument is (a grid cell, an element: `_point`,
`_point_argument`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast

import torch
import torch.nn.functional as F
from torch import nn

from episodelake.collectors.envs.base import Device
from episodelake.collectors.loop import Observation, Reply
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.families import ParsedAction, format_tool_call, parse_response
from episodelake.trainer.policies.base import Sample, read_checkpoint, save_checkpoint
from episodelake.trainer.ppo import TokenLogProbs

VERBS = ("click", "long_press", "swipe_up", "swipe_down", "swipe_left", "swipe_right", "type",
         "open", "back", "home", "enter", "wait", "terminate")
POINT_VERBS = ("click", "long_press")

_VERB_INDEX = {verb: i for i, verb in enumerate(VERBS)}


@functools.lru_cache(maxsize=4096)
def read_response(response: str) -> ParsedAction:
    """`parse_response` of an episode's earlier response, remembered: the small policies read
    the whole history again at every step (verbs, taps, typed texts), and parsing it was 8% of
    a long-suite run. The result is shared: read it, never change it."""
    return parse_response(response)


@dataclass(frozen=True)
class Span:
    """A piece of the goal that could be typed, with the context it is scored by."""

    text: str
    features: tuple[str, ...]


def verb_of(parsed: ParsedAction) -> int:
    """The index in VERBS of a parsed action; -1 for actions outside the small vocabulary."""
    if not parsed.valid:
        return -1
    kind, action = parsed.action_type, parsed.action
    if kind == "swipe":
        kind = "swipe_" + action["direction"]
    elif kind == "system_button":
        kind = action["button"]
    elif kind == "terminate" and action["status"] != "success":
        return -1
    return _VERB_INDEX.get(kind, -1)


def structured_logprobs(verb_logits: torch.Tensor, verbs: torch.Tensor, arguments: torch.Tensor,
                        argument_logits: Callable[[str], torch.Tensor | None]) -> TokenLogProbs:
    """log p(verb) and log p(argument | verb) of recorded choices as two tokens per step (the
    argument's masked out for verbs without one, both for choices that cannot be scored:
    verb -1), with their entropies; `argument_logits(verb)` gives a verb's argument logits."""
    verb_logp = F.log_softmax(verb_logits, dim=1)
    logp = verb_logp.gather(1, verbs.clamp(min=0)[:, None])[:, 0]
    entropy = -(verb_logp.exp() * verb_logp).sum(dim=1)
    arg_logp = torch.zeros_like(logp)
    arg_entropy = torch.zeros_like(logp)
    has_argument = torch.zeros_like(verbs, dtype=torch.bool)
    for index, verb in enumerate(VERBS):
        logits = argument_logits(verb)
        if logits is None:
            continue
        chosen = (verbs == index) & (arguments >= 0)
        if not bool(chosen.any()):
            continue
        log_probs = F.log_softmax(logits, dim=1)
        picked = log_probs.gather(1, arguments.clamp(0, logits.shape[1] - 1)[:, None])[:, 0]
        spread = -(log_probs.exp() * log_probs.nan_to_num(neginf=0.0)).sum(dim=1)
        arg_logp = torch.where(chosen, picked, arg_logp)
        arg_entropy = torch.where(chosen, spread, arg_entropy)
        has_argument |= chosen
    scored = verbs >= 0
    mask = torch.stack([scored, scored & has_argument], dim=1).float()
    logp = torch.stack([logp, arg_logp], dim=1).masked_fill(mask == 0, 0.0)
    return TokenLogProbs(logp, mask, torch.stack([entropy, arg_entropy], dim=1))


def offsets(parts: Sequence[torch.Tensor]) -> torch.Tensor:
    """The start of each part in their concatenation (an EmbeddingBag's offsets)."""
    lengths = torch.tensor([len(p) for p in parts], dtype=torch.long)
    return torch.cumsum(lengths, 0) - lengths


class SmallConfig(Protocol):
    """What `SmallPolicy` reads of a policy's config (a frozen dataclass saved as JSON)."""

    @property
    def apps(self) -> tuple[str, ...]: ...

    @property
    def seed(self) -> int: ...


class SmallEncoded(Protocol):
    """What `SmallPolicy` reads of an encoded observation: the goal's spans (what `type` can
    write) and, when learning, the recorded (verb, argument)."""

    spans: list[Span]
    verb: int
    argument: int


ConfigT = TypeVar("ConfigT", bound=SmallConfig)
EncodedT = TypeVar("EncodedT", bound=SmallEncoded)
PolicyT = TypeVar("PolicyT", bound="SmallPolicy[Any, Any]")


class SmallPolicy(Generic[ConfigT, EncodedT]):
    """A trainable small policy (`base.TrainablePolicy`); see the module docstring for what a
    subclass provides."""

    name: str
    history_length = 0
    #: The config file of its checkpoint folder, beside the weights.
    config_file: ClassVar[str]
    #: The network's output holding the tap logits, [batch, len(POINT_VERBS), places].
    point_output: ClassVar[str]
    #: The config class (called with no arguments it is the default; `from_json` reads a
    #: saved one) and the network class, built from a config.
    config_type: ClassVar[Any]
    net_type: ClassVar[type[nn.Module]]

    def __init__(self, config: ConfigT | None = None, *, seed: int | None = None,
                 module: nn.Module | None = None):
        """`seed` seeds the sampling stream (default: the config's seed); `module` shares
        existing weights instead of initialising new ones from the config's seed."""
        self.config: ConfigT = config if config is not None else self.default_config()
        if module is None:
            with torch.random.fork_rng():
                torch.manual_seed(self.config.seed)
                module = self.build_net(self.config)
        self.module = module
        self.generator = torch.Generator().manual_seed(self.config.seed if seed is None else seed)

    # --- what a subclass provides ------------------------------------------------------------

    @classmethod
    def default_config(cls) -> ConfigT:
        return cast(ConfigT, cls.config_type())

    @classmethod
    def config_from_json(cls, text: str) -> ConfigT:
        return cast(ConfigT, cls.config_type.from_json(text))

    @classmethod
    def build_net(cls, config: ConfigT) -> nn.Module:
        return cls.net_type(config)

    def _read(self, observation: Observation) -> tuple[EncodedT, str, dict[str, Any] | None]:
        """The observation encoded, a suffix for the response's thinking and the step's info."""
        raise NotImplementedError

    def _encode_sample(self, sample: Sample) -> EncodedT:
        raise NotImplementedError

    def _collate(self, items: Sequence[EncodedT]) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def _point(self, argument: int, encoded: EncodedT) -> list[int]:
        """Where a tap on place `argument` lands (0-999 coordinates)."""
        raise NotImplementedError

    def _point_argument(self, coordinate: Sequence[float], encoded: EncodedT) -> int:
        """The place a recorded tap's point chose (-1: none, the verb alone is scored)."""
        raise NotImplementedError

    def _note(self, verb: str, argument: int, encoded: EncodedT) -> str:
        """What the response's thinking adds about the chosen argument (nothing by default)."""
        return ""

    # --- acting ------------------------------------------------------------------------------

    def act(self, observation: Observation) -> Reply:
        """Sample an action for the screen; an episode with a seed samples from it, so the
        same task and seed give the same episode in any worker."""
        if observation.step == observation.start and observation.seed is not None:
            self.generator.manual_seed(observation.seed)
        encoded, where, info = self._read(observation)
        with torch.no_grad():
            out = self.module(self._collate([encoded]))
        verb_p = F.softmax(out["verb"][0], dim=0)
        verb = int(torch.multinomial(verb_p, 1, generator=self.generator))
        name = VERBS[verb]
        prob = float(verb_p[verb])
        argument = -1
        logits = self._argument_logits(out, name)
        if logits is not None:
            arg_p = F.softmax(logits[0], dim=0)
            argument = int(torch.multinomial(arg_p, 1, generator=self.generator))
            prob *= float(arg_p[argument])
        action = self._action(name, argument, encoded)
        label = self.name.replace("-", " ")
        note = self._note(name, argument, encoded)
        return Reply(format_tool_call(action, f"{label}: {name} (p={prob:.3f}){where}{note}"), info=info)

    def _argument_logits(self, out: dict[str, torch.Tensor], verb: str) -> torch.Tensor | None:
        if verb in POINT_VERBS:
            return out[self.point_output][:, POINT_VERBS.index(verb)]
        if verb == "type":
            return out["spans"]
        if verb == "open":
            return out["apps"]
        return None

    def _action(self, verb: str, argument: int, encoded: EncodedT) -> dict[str, Any]:
        if verb in POINT_VERBS:
            return {"action": verb, "coordinate": self._point(argument, encoded)}
        if verb.startswith("swipe_"):
            return {"action": "swipe", "direction": verb.removeprefix("swipe_")}
        if verb == "type":
            return {"action": "type", "text": encoded.spans[argument].text}
        if verb == "open":
            return {"action": "open", "text": self.config.apps[argument]}
        if verb in ("back", "home", "enter"):
            return {"action": "system_button", "button": verb}
        if verb == "terminate":
            return {"action": "terminate", "status": "success"}
        return {"action": verb}

    def choice(self, response: str, encoded: EncodedT) -> tuple[int, int]:
        """(verb, argument) of a recorded response; (-1, -1) when this policy could not
        have written it (another action, a text that is not a span of the goal)."""
        parsed = read_response(response)
        verb = verb_of(parsed)
        if verb < 0 or VERBS[verb] not in (*POINT_VERBS, "type", "open"):
            return verb, -1
        if VERBS[verb] in POINT_VERBS:
            return verb, self._point_argument(parsed.action["coordinate"], encoded)
        if VERBS[verb] == "type":
            texts = [span.text for span in encoded.spans]
            text = parsed.action["text"]
            return (verb, texts.index(text)) if text in texts else (-1, -1)
        apps = [app.lower() for app in self.config.apps]
        wanted = parsed.action["text"].lower()
        return (verb, apps.index(wanted)) if wanted in apps else (-1, -1)

    def prepare(self, samples: Sequence[Sample]) -> list[EncodedT]:
        prepared = []
        for sample in samples:
            encoded = self._encode_sample(sample)
            encoded.verb, encoded.argument = self.choice(sample.response, encoded)
            prepared.append(encoded)
        return prepared

    # --- learning ----------------------------------------------------------------------------

    def score(self, prepared: Sequence[EncodedT]) -> TokenLogProbs:
        """Two tokens per step, as a VLM's response has one per decision: the verb, then its
        argument (a place, a span, an app; masked out for verbs without one). Each gets its
        own PPO ratio and clip, so a rare good argument (one row of a list) can gain
        probability at the same pace as its verb instead of sharing one clipped ratio."""
        batch = self._collate(prepared)
        out = self.module(batch)
        return structured_logprobs(out["verb"], batch["verb"], batch["argument"],
                                   lambda verb: self._argument_logits(out, verb))

    def stats(self) -> dict[str, float]:
        return {}

    # --- copies and files --------------------------------------------------------------------

    def agent(self) -> SmallAgent:
        state = {name: value.detach().clone() for name, value in self.module.state_dict().items()}
        return SmallAgent(type(self), self.config, state)

    def reference(self: PolicyT) -> PolicyT:
        """The initial weights (the config's seed), frozen: the KL reference."""
        initial = type(self)(self.config)
        initial.module.requires_grad_(False)
        return initial

    def save(self, folder: Path) -> None:
        save_checkpoint(folder, self.module, json.dumps(asdict(self.config)),  # type: ignore[call-overload]  # configs are dataclasses; a Protocol cannot say so
                        self.config_file)

    @classmethod
    def load(cls: type[PolicyT], folder: Path | str, *, seed: int | None = None) -> PolicyT:
        """A policy saved by `save` (e.g. a training checkpoint), ready to act."""
        config, weights = read_checkpoint(folder, cls.config_file, cls.__name__)
        policy = cls(cls.config_from_json(config), seed=seed)
        expected = policy.module.state_dict()
        misfits = [f"{name} {list(w.shape)} (this release: {list(expected[name].shape)})"
                   for name, w in weights.items() if name in expected and w.shape != expected[name].shape]
        missing = [f"{n} missing" for n in sorted(set(expected) - set(weights))]
        unknown = [f"{n} not in this release" for n in sorted(set(weights) - set(expected))]
        if misfits or missing or unknown:
            # the network's inputs changed since the checkpoint was saved (a feature added or
            # dropped): loading it partly would act with untrained weights where they enter
            raise InvalidInput(f"{folder} holds a {cls.__name__} saved by an earlier release whose "
                               f"network differs: {'; '.join(misfits + missing + unknown)}. "
                               "It cannot be loaded into this release; train it again (elake train) or "
                               "load it with the release that saved it")
        policy.module.load_state_dict(weights)
        return policy


class SmallAgent:
    """A snapshot of a small policy's weights that opens as an acting copy in a rollout worker
    (an agent spec). Picklable: a worker process builds the network once and shares it among
    the copies it opens, each sampling from its episodes' seeds."""

    def __init__(self, policy: type[SmallPolicy[Any, Any]], config: Any, state: dict[str, torch.Tensor]):
        self.policy = policy
        self.config = config
        self.state = state
        self._module: nn.Module | None = None

    def open(self, device: Device) -> SmallPolicy[Any, Any]:
        if self._module is None:
            self._module = self.policy.build_net(self.config)
            self._module.load_state_dict(self.state)
            self._module.requires_grad_(False)
        return self.policy(self.config, module=self._module)

    def __getstate__(self) -> dict[str, Any]:
        return {"policy": self.policy, "config": self.config, "state": self.state, "_module": None}
