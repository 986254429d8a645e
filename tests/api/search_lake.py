"""A small lake whose screens carry text, enriched with OCR and embeddings, for the search,
similar-screens and redaction tests of the API and the web app.

Two episodes of the `checkout` task (policy versions v1 and v2, runs run-a and run-b) show
the same screens step for step, so each screen has a twin at distance 0 in the other run;
step 1 shows "Payment failed" and a phone number. `raw-1` is left unenriched: no OCR text,
no embedding (its thinking and responses are searchable like every step's). OCR reads four distinct screens (about a second each on one core).
"""

from __future__ import annotations

from pathlib import Path

from episodelake.collectors.jobs.enrich import enrich
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from tests.factories import response, text_screen

SCREENS = [("Cart", "Checkout"), ("Payment failed", "Call 555-0102"), ("Order placed",)]
THINKING = ["open the cart", "the card was declined, pay again", "the order is done"]
GOAL = "Buy the red shoes"
#: The step whose screen holds the phone number (and the words "Payment failed").
PAYMENT_STEP = 1
#: Steps of `raw-1`: with the six of `checkout`, ten responses say "click", more than the
#: search box lists at first.
RAW_STEPS = 4


def build_search_lake(path: Path) -> Lake:
    lake = Lake(path)
    with Recorder(lake, anchor=None, image_checks="structure") as rec:
        for i, (version, run) in enumerate((("v1", "run-a"), ("v2", "run-b")), start=1):
            with rec.start_episode("checkout", GOAL, episode_id=f"checkout-{i}", policy_version=version,
                                   run_id=run) as ep:
                for lines, thinking in zip(SCREENS, THINKING, strict=True):
                    ep.log_step(text_screen(*lines), response(thinking=thinking))
                ep.finish(success=i == 2)
        with rec.start_episode("notes", "Write a note", episode_id="raw-1") as ep:
            for _ in range(RAW_STEPS):
                ep.log_step(text_screen("New note"), response(thinking="write it"))
            ep.finish(success=True)
    enrich(lake, ["ocr", "embed"], where="e.episode_id <> 'raw-1'")
    return lake
