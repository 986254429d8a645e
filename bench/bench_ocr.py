"""OCR accuracy on labelled simulated screens, and enrichment throughput per core.

The simulated phone's UI tree holds the true text of every screen (`text` of its nodes), so
each screenshot of noisy demo rollouts is labelled for free. Per screen the words of the tree
and of the OCR are compared as multisets (reading order differs between the two):
word recall = true words found / true words; CER = edit distance between the two word lists
(sorted, joined by spaces) / characters of the true one. Throughput is steps per second on
one core for each derivation of `elake enrich` (one process, single-threaded models), and
end to end (`enrich` on a lake: reading blobs, computing, committing columns); the ratio
compares each derivation with the perceptual hash the recorder computes at write time.

    python bench/bench_ocr.py [--screens 24]
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter

from common import line, workdir

from episodelake.collectors.agents.oracle import DemoPolicy, NoiseConfig
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.tasks import sample_tasks
from episodelake.collectors.jobs.enrich import derive, enrich
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.vocab.seeds import derive as derive_seed

NOISE = NoiseConfig(grounding=0.12, planning=0.10, premature_terminate=0.0, loop=0.05)
_TEXT = re.compile(r'\btext="([^"]*)"')
_WORD = re.compile(r"\w+")


def screens(n: int, seed: int) -> list[tuple[bytes, str]]:
    """`n` distinct (screenshot, true text) pairs from noisy demo rollouts."""
    out: dict[bytes, str] = {}
    for g, task in enumerate(sample_tasks(n, seed)):
        phone = Phone(derive_seed(seed, "episode", g))
        task.setup(phone)
        policy = DemoPolicy(task, NOISE, derive_seed(seed, "policy", g))
        for _ in range(6):
            text = "\n".join(_TEXT.findall(phone.ui_tree()))
            out.setdefault(phone.screenshot(), text.replace("&amp;", "&").replace("&quot;", '"'))
            if len(out) >= n or phone.step(policy.decide(phone).arguments).done:
                break
        if len(out) >= n:
            break
    return list(out.items())


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def edit_distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--screens", type=int, default=24)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    sample = screens(args.screens, args.seed)
    derive("ocr", sample[0][0])  # load the models outside the timing

    rates = {}
    results = {}
    for name in ("phash", "thumbs", "ocr"):
        start = time.perf_counter()
        results[name] = [derive(name, png) for png, _ in sample]
        rates[name] = len(sample) / (time.perf_counter() - start)

    found = total = errors = chars = 0
    for (_, truth), got in zip(sample, results["ocr"], strict=True):
        want, have = Counter(words(truth)), Counter(words(got["ocr_text"]))
        found += sum((want & have).values())
        total += sum(want.values())
        a, b = " ".join(sorted(want.elements())), " ".join(sorted(have.elements()))
        errors += edit_distance(a, b)
        chars += len(a)
    line("ocr accuracy (sim screens)", screens=len(sample), words=total,
         word_recall=round(found / total, 4), cer=round(errors / chars, 4))
    for name in ("phash", "thumbs", "ocr"):
        line(f"enrich {name} (1 core)", steps_per_s=rates[name],
             vs_phash=f"{rates['phash'] / rates[name]:.1f}x slower" if name != "phash" else "baseline")

    with workdir("ocr") as root:
        lake = Lake(root / "lake")
        with Recorder(lake, anchor=None, image_checks="structure") as rec, \
                rec.start_episode("bench", "read the screens") as ep:
            for png, _ in sample:
                ep.log_step(png, "<thinking>look</thinking>")
        start = time.perf_counter()
        report = enrich(lake, ["ocr"])
        elapsed = time.perf_counter() - start
        line("enrich ocr end to end (1 worker)", steps=report.steps["ocr"],
             steps_per_s=report.steps["ocr"] / elapsed, time_vs_compute_only=f"{rates['ocr'] * elapsed / len(sample):.2f}")


if __name__ == "__main__":
    main()
