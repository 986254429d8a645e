"""Anchor-key quality on labelled simulated steps.

Rolls out noisy demo episodes in groups (one task per group, several rollouts with different
seeds, so the status-bar clock differs), labels every step with the phone's ground-truth
``screen_id``, and scores each keying by its pairs of steps within a group:
precision = pairs with the same key that really are the same screen / pairs with the same key,
recall = pairs of the same screen that got the same key / pairs of the same screen.

Targets: precision >= 0.99 and recall >= 0.95 for a key made from the screenshot alone
(devices with no UI tree): the perceptual hash, or the screen embedding clustered by distance
(`lake.derive.embedding.embedding_anchor_keys`). "pixels below the status bar" (exact
equality of the decoded pixels) bounds every screenshot key: the sim has states that differ
only behind a dialog, which no screenshot shows. The "jpeg" column is the share of steps
whose screenshot, re-encoded as JPEG (quality 85), keeps its key (for the embedding: stays
within the threshold): what a threshold buys on lossy sources. "embedding + phash" links two
steps only when both agree (embedding within the distance and perceptual hash within 0 bits):
it buys back some precision at the distances that tolerate JPEG, not the ceiling. The last
line counts the screens behind the ceiling: pixel-identical steps labelled different screens
(a state the screenshot does not show, such as the value under a dialog).

    python bench/bench_anchor.py [--groups 16] [--rollouts 5]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from episodelake.collectors.agents.oracle import DemoPolicy, NoiseConfig
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.tasks import sample_tasks
from episodelake.lake.derive.anchor import (
    DEFAULT_THRESHOLD,
    STATUS_BAR_FRACTION,
    AnchorKeyer,
    connected_keys,
    group_anchor_keys,
    hamming,
    phash64,
    ui_tree_hash,
)
from episodelake.lake.derive.embedding import embedding_anchor_keys, screen_embedding
from episodelake.lake.vocab.seeds import derive

THRESHOLDS = (0, 2, 4, 8)
EMBEDDING_THRESHOLDS = (0.0, 0.005, 0.01, 0.02, 0.04)
#: Embedding distances at which the perceptual hash is added as a second condition.
COMBINED_THRESHOLDS = (0.02, 0.04)
#: More mistakes than the demo mix, so groups visit many screens several times.
NOISE = NoiseConfig(grounding=0.12, planning=0.10, premature_terminate=0.0, loop=0.05)
MAX_STEPS = 20


@dataclass(frozen=True)
class Step:
    group: str
    screen_id: str
    sha256: str
    phash: int
    tree: str
    jpeg_phash: int
    pixels: str
    embedding: np.ndarray
    jpeg_embedding: np.ndarray


def collect(groups: int, rollouts: int, seed: int) -> list[Step]:
    steps = []
    for g, task in enumerate(sample_tasks(groups, seed)):
        for r in range(rollouts):
            episode_seed = derive(seed, "episode", g, r)
            phone = Phone(episode_seed)
            task.setup(phone)
            policy = DemoPolicy(task, NOISE, episode_seed)
            for _ in range(MAX_STEPS):
                image, jpeg = phone.image(), _jpeg(phone)
                below = image.crop((0, round(image.height * STATUS_BAR_FRACTION), image.width, image.height))
                steps.append(Step(task.id, phone.screen_id(), hashlib.sha256(phone.screenshot()).hexdigest(),
                                  phash64(image), ui_tree_hash(phone.ui_tree()), phash64(jpeg),
                                  hashlib.sha256(below.tobytes()).hexdigest(), screen_embedding(image),
                                  screen_embedding(jpeg)))
                if phone.step(policy.decide(phone).arguments).done:
                    break
    return steps


def _jpeg(phone: Phone) -> bytes:
    buffer = io.BytesIO()
    phone.image().save(buffer, format="JPEG", quality=85)
    return buffer.getvalue()


def score(steps: Sequence[Step], keys: Sequence[str]) -> tuple[float, float, int]:
    """Pairwise precision and recall of "same key" against "same screen", within groups."""
    by_group: dict[str, list[int]] = defaultdict(list)
    for i, step in enumerate(steps):
        by_group[step.group].append(i)
    tp = fp = fn = 0
    for members in by_group.values():
        for a, i in enumerate(members):
            for j in members[a + 1:]:
                same_screen = steps[i].screen_id == steps[j].screen_id
                same_key = keys[i] == keys[j]
                tp += same_screen and same_key
                fp += same_key and not same_screen
                fn += same_screen and not same_key
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, tp + fn


def online_keys(steps: Sequence[Step], threshold: int) -> list[str]:
    keyer = AnchorKeyer(threshold, mode="phash")
    return [keyer.key(s.group, phash=s.phash) for s in steps]


def per_group(steps: Sequence[Step], keyer: Callable[[list[Step]], list[str]]) -> list[str]:
    """Keys made group by group (a batch keying sees one group's steps at a time)."""
    by_group: dict[str, list[int]] = defaultdict(list)
    for i, step in enumerate(steps):
        by_group[step.group].append(i)
    keys = [""] * len(steps)
    for members in by_group.values():
        for i, key in zip(members, keyer([steps[i] for i in members]), strict=True):
            keys[i] = key
    return keys


def batch_keys(steps: Sequence[Step], threshold: int) -> list[str]:
    return per_group(steps, lambda group: group_anchor_keys([s.phash for s in group], threshold))


def embedding_keys(steps: Sequence[Step], threshold: float) -> list[str]:
    return per_group(steps, lambda group: embedding_anchor_keys([s.embedding for s in group], threshold))


def combined_keys(steps: Sequence[Step], threshold: float, bits: int) -> list[str]:
    """Steps linked when their embeddings are within `threshold` and their perceptual hashes
    within `bits`; each connected set one key."""
    def keyer(group: list[Step]) -> list[str]:
        vectors = np.stack([s.embedding for s in group])
        near = np.linalg.norm(vectors[:, None] - vectors[None], axis=2) <= threshold
        links = [(i, j) for i, j in zip(*np.nonzero(np.tril(near, -1)), strict=True)
                 if hamming(group[i].phash, group[j].phash) <= bits]
        return connected_keys([s.embedding.tobytes() for s in group], links, lambda raw: raw.hex()[:16])

    return per_group(steps, keyer)


def within(steps: Sequence[Step], limit: float, bits: int | None = None) -> float:
    """The share of steps whose JPEG copy stays within `limit` (and `bits`) of the original."""
    kept = [float(np.linalg.norm(s.embedding - s.jpeg_embedding)) <= limit
            and (bits is None or hamming(s.phash, s.jpeg_phash) <= bits) for s in steps]
    return sum(kept) / len(steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--rollouts", type=int, default=5)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()

    start = time.perf_counter()
    steps = collect(args.groups, args.rollouts, args.seed)
    elapsed = time.perf_counter() - start
    screens = len({(s.group, s.screen_id) for s in steps})
    print(f"{len(steps)} steps in {args.groups} groups x {args.rollouts} rollouts, {screens} distinct "
          f"(group, screen) labels, collected in {elapsed:.1f}s")

    rows: list[tuple[str, Callable[[], list[str]], str]] = [
        ("exact sha256 of the PNG", lambda: [s.sha256 for s in steps], "-"),
        ("ui-tree hash", lambda: [s.tree for s in steps], "-"),
        ("pixels below the status bar", lambda: [s.pixels for s in steps], "-"),
    ]
    for threshold in THRESHOLDS:
        mark = " (default)" if threshold == DEFAULT_THRESHOLD else ""
        kept = sum(hamming(s.phash, s.jpeg_phash) <= threshold for s in steps) / len(steps)
        rows.append((f"phash keyer, <= {threshold} bits{mark}", lambda t=threshold: online_keys(steps, t),
                     f"{kept:.4f}"))
    for threshold in THRESHOLDS:
        rows.append((f"phash batch, <= {threshold} bits", lambda t=threshold: batch_keys(steps, t), "-"))

    for limit in EMBEDDING_THRESHOLDS:
        rows.append((f"embedding batch, <= {limit}", lambda t=limit: embedding_keys(steps, t),
                     f"{within(steps, limit):.4f}"))
    for limit in COMBINED_THRESHOLDS:
        rows.append((f"embedding + phash, <= {limit}, 0 bits", lambda t=limit: combined_keys(steps, t, 0),
                     f"{within(steps, limit, 0):.4f}"))

    print(f"{'key':36s} {'precision':>9s} {'recall':>7s} {'jpeg':>7s}")
    positives = 0
    for name, make, jpeg in rows:
        precision, recall, positives = score(steps, make())
        print(f"{name:36s} {precision:9.4f} {recall:7.4f} {jpeg:>7s}")
    print(f"(over {positives} same-screen pairs; targets: precision >= 0.99, recall >= 0.95)")
    labels: dict[tuple[str, str], set[str]] = defaultdict(set)
    for s in steps:
        labels[(s.group, s.pixels)].add(s.screen_id)
    hidden = [ids for ids in labels.values() if len(ids) > 1]
    print(f"below the ceiling: {len(hidden)} pixel-identical screenshots shown by {sum(map(len, hidden))} "
          "different screens (state the screenshot does not show)")


if __name__ == "__main__":
    main()
