"""Web app latency on a 300,000-step lake, against the reference viewer's approach.

Measured in one run, in one headless Chromium (Debian's), against two real servers running
as separate processes:
- ours: `elake serve` over a synthetic lake (episodes of 20 steps built from a few distinct
  PNGs, written with the LakeWriter, then `optimize()` so the episode_id BTREE index exists);
- the reference approach: episode folders (episode.json + PNGs) served the way the
  reference viewer does it: every image request re-reads episode.json, decodes the PNG,
  draws the action, scales it to at most 1200 px high and re-encodes a JPEG (quality 85);
  the task list scans the folders.

Printed: step switch in the app (key press until the next screenshot and its overlay are on
screen, one press every PAUSE_MS once the episode view has loaded; the app prefetches
neighbours and its filmstrip loads the episode's screenshots), a jump to the last step, one
screenshot fetched uncached from each server, the reference's step switch (setting the image
source, as its page does: one re-encoded JPEG per step), the episode list's first page, and
ratios; first, the built web app's size (gzip level 9): what its index.html loads before the
first view shows, and every chunk together (the chart pages load theirs when opened). The lake is cached in bench/out between runs (the first run builds it: 6.5 GB,
about 6 minutes on two cores).

    .venv/bin/python bench/bench_web.py [--steps 300000] [--samples 40]

`--samples 16` is a quicker run (about a minute once the lake is built), `--bundle-only`
prints the sizes alone.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
STEPS_PER_EPISODE = 20
SCREEN = (540, 1200)  # half a 1080x2400 phone screen
TASKS = [f"task_{i:02d}" for i in range(25)]
TARGET_STEP_MS = 50
TARGET_LIST_MS = 100


# -- data ----------------------------------------------------------------------------------
def screens(n: int = 8) -> list[bytes]:
    """A few distinct phone-like screenshots (rows of list items), as PNG."""
    out = []
    for k in range(n):
        img = Image.new("RGB", SCREEN, (30 + 25 * k, 110, 200 - 20 * k))
        d = ImageDraw.Draw(img)
        for row in range(12):
            top = 90 + row * 90
            d.rectangle((20, top, SCREEN[0] - 20, top + 70), fill=(250, 250, 250))
            d.text((36, top + 24), f"Settings item {row} of screen {k}", fill=(20, 20, 20))
        buf = io.BytesIO()
        img.save(buf, "PNG")
        out.append(buf.getvalue())
    return out


def actions() -> list[dict]:
    """Pre-parsed action columns for a few responses (parsing 300,000 is not what we measure)."""
    from episodelake.lake.vocab.families import format_tool_call, parse_response

    calls = [
        {"action": "click", "coordinate": [500, 300]},
        {"action": "swipe", "direction": "up", "coordinate": [500, 700]},
        {"action": "type", "text": "hello world"},
        {"action": "long_press", "coordinate": [200, 640]},
        {"action": "drag", "start_coordinate": [100, 200], "end_coordinate": [800, 700]},
        {"action": "system_button", "button": "back"},
    ]
    rows = []
    for call in calls:
        text = format_tool_call(call, "I should do this next.")
        rows.append({"model_response": text, **parse_response(text).to_row(), "call": call})
    return rows


def build_lake(path: Path, total_steps: int) -> None:
    from episodelake.lake import Lake, WriterOptions
    from episodelake.lake.storage.images import sniff_format
    from episodelake.lake.storage.writer import Backpressure

    images = screens()
    acts = actions()
    lake = Lake(path)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    episodes = total_steps // STEPS_PER_EPISODE
    opts = WriterOptions(batch_rows=25_000, batch_bytes=1 << 30, max_age_s=3600)
    t0 = time.perf_counter()
    with lake.writer(opts) as writer:

        def append(table: str, rows: list[dict]) -> None:
            """On a busy machine the commits of 25,000-row batches fall behind the appends and
            the writer refuses rows past its backlog bound: wait for the lake, then append."""
            try:
                writer.append_rows(table, rows)
            except Backpressure:
                writer.flush()
                writer.append_rows(table, rows)

        for e in range(episodes):
            eid = f"ep-{e:06d}"
            task = TASKS[e % len(TASKS)]
            success = e % 3 != 0
            append("episodes", [{
                "episode_id": eid, "run_id": f"run-{e // 5000}", "task_name": task,
                "task_goal": f"Do {task}", "env": "sim", "policy_version": str(10 * (e // 1500)),
                "group_id": f"g-{e // 8}", "created_at": start + timedelta(seconds=e), "status": "finished",
                "success": success, "eval_score": float(success), "episode_reward": float(success),
                "episode_length": STEPS_PER_EPISODE, "tags": [],
            }])
            rows = []
            for s in range(STEPS_PER_EPISODE):
                img = images[(e + s) % len(images)]
                act = {k: v for k, v in acts[s % len(acts)].items() if k != "call"}
                rows.append({
                    "episode_id": eid, "step": s, "timestamp": start + timedelta(seconds=e, milliseconds=s),
                    "image": img, "image_format": sniff_format(img), "width": SCREEN[0], "height": SCREEN[1],
                    "reward": float(success and s == STEPS_PER_EPISODE - 1), "step_reward": float(s % 7 != 3),
                    "anchor_key": f"a{(e + s) % len(images)}", **act,
                })
            append("steps", rows)
    t1 = time.perf_counter()
    lake.optimize(prune_older_than=timedelta(0))
    print(f"built {episodes} episodes / {episodes * STEPS_PER_EPISODE} steps in {t1 - t0:.0f} s, "
          f"optimized in {time.perf_counter() - t1:.0f} s", flush=True)


def ensure_lake(total_steps: int) -> Path:
    path = OUT / f"lake-{total_steps}"
    marker = path / "_bench_complete"
    if not marker.exists():
        if path.exists():
            import shutil

            shutil.rmtree(path)
        build_lake(path, total_steps)
        marker.write_text("ok")
    return path


def ensure_reference(total_steps: int, sample_episodes: list[str]) -> Path:
    """Reference-format folders: episode.json for every episode (the task list scans them),
    PNGs for the episodes the step-switch benchmark opens."""
    root = OUT / f"reference-{total_steps}"
    marker = root / "_bench_complete"
    if marker.exists():
        return root
    images = screens()
    acts = actions()
    episodes = total_steps // STEPS_PER_EPISODE
    for e in range(episodes):
        eid = f"ep-{e:06d}"
        folder = root / TASKS[e % len(TASKS)] / eid
        (folder / "images").mkdir(parents=True, exist_ok=True)
        steps = []
        for s in range(STEPS_PER_EPISODE):
            image_path = folder / "images" / f"step_{s:04d}.png"
            if eid in sample_episodes:
                image_path.write_bytes(images[(e + s) % len(images)])
            steps.append({"step": s, "image_path": str(image_path), "timestamp": "2026-01-01T00:00:00",
                          "model_response": acts[s % len(acts)]["model_response"]})
        meta = {"task_name": TASKS[e % len(TASKS)], "task_goal": "Do it", "episode_id": eid}
        (folder / "episode.json").write_text(json.dumps({"meta_data": meta, "episode": steps}))
    marker.write_text("ok")
    return root


# -- the reference approach, as a server ---------------------------------------------------
def reference_app(root: Path):
    """The reference viewer's request handling: no index, no cache, re-encode per image."""
    import re

    from fastapi import FastAPI, Response

    app = FastAPI()
    tool_call = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

    @app.get("/api/tasks")
    def tasks():
        out = []
        for task in sorted(p for p in root.iterdir() if p.is_dir()):
            eps = sorted(p.name for p in task.iterdir() if (p / "episode.json").exists())
            out.append({"task_name": task.name, "episodes": eps})
        return out

    @app.get("/api/episode/{task}/{ep}")
    def episode(task: str, ep: str):
        return json.loads((root / task / ep / "episode.json").read_text())

    @app.get("/api/image/{task}/{ep}/{step}")
    def image(task: str, ep: str, step: int):
        data = json.loads((root / task / ep / "episode.json").read_text())
        record = data["episode"][step]
        img = Image.open(record["image_path"]).convert("RGB")
        args = json.loads(tool_call.search(record["model_response"]).group(1))["arguments"]
        d = ImageDraw.Draw(img)
        if "coordinate" in args:
            x, y = args["coordinate"][0] / 1000 * img.width, args["coordinate"][1] / 1000 * img.height
            d.ellipse((x - 18, y - 18, x + 18, y + 18), outline=(255, 0, 0), width=4)
            d.ellipse((x - 9, y - 9, x + 9, y + 9), fill=(255, 0, 0))
        if img.height > 1200:
            img = img.resize((round(img.width * 1200 / img.height), 1200), Image.LANCZOS)
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=85)
        return Response(buf.getvalue(), media_type="image/jpeg")

    return app


# -- measuring -----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "ELAKE_TOKEN"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start: {' '.join(cmd)}\n{proc.stderr.read()}") from None
            time.sleep(0.2)


FETCH_MS = """async (url) => { const t0 = performance.now(); const r = await fetch(url, {cache: 'no-store'});
  await r.json(); return performance.now() - t0; }"""

IMAGE_MS = """async (url) => { const img = new Image(); const t0 = performance.now();
  await new Promise((ok, bad) => { img.onload = ok; img.onerror = bad; img.src = url; });
  await img.decode(); await new Promise(r => requestAnimationFrame(() => r()));
  return performance.now() - t0; }"""

#: Between key presses: a person stepping through an episode, not a held-down key.
PAUSE_MS = 100
LOADED = "() => [...document.querySelectorAll('[data-testid=filmstrip] img')].every(i => i.complete)"

# Key press -> the screen element says the new step's image has loaded (seen by a
# MutationObserver, so no polling granularity) -> the next frame (it is painted).
KEY_MS = """async ([key, step]) => {
  const sel = `[data-testid=screen][data-loaded-step="${step}"]`;
  const t0 = performance.now();
  const shown = new Promise(resolve => {
    const obs = new MutationObserver(() => { if (document.querySelector(sel)) { obs.disconnect(); resolve(); } });
    obs.observe(document.body, {subtree: true, childList: true, attributes: true});
  });
  window.dispatchEvent(new KeyboardEvent('keydown', {key, bubbles: true}));
  await shown;
  await new Promise(r => requestAnimationFrame(() => r()));
  return performance.now() - t0; }"""


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def bundle_sizes(static: Path = ROOT / "api" / "static") -> None:
    """Gzipped bytes of the built app: what index.html loads up front, and every chunk."""
    if not (static / "index.html").exists():
        raise SystemExit(f"{static} has no built web app: run `just web` first")
    gz = {f: len(gzip.compress(f.read_bytes(), 9)) for f in (static / "assets").iterdir() if f.suffix in (".js", ".css")}
    loaded = {static / ref.lstrip("/") for ref in re.findall(r'(?:src|href)="(/assets/[^"]+)"', (static / "index.html").read_text())}
    first = {f.suffix: sum(n for g, n in gz.items() if g in loaded and g.suffix == f.suffix) for f in loaded}
    print(f"bundle (gzip -9): first view {sum(first.values()) / 1000:.1f} kB (JS {first.get('.js', 0) / 1000:.1f} kB, "
          f"CSS {first.get('.css', 0) / 1000:.1f} kB); all {len(gz)} chunks {sum(gz.values()) / 1000:.1f} kB", flush=True)


def report(name: str, values: list[float], target: float | None = None) -> float:
    p50 = statistics.median(values)
    goal = f"  (target <= {target:g} ms: {'ok' if p50 <= target else 'MISSED'})" if target else ""
    print(f"{name:<58} p50 {p50:7.1f} ms  p95 {pct(values, 95):7.1f} ms  n={len(values)}{goal}", flush=True)
    return p50


def run(total_steps: int, samples: int) -> None:
    from playwright.sync_api import sync_playwright

    lake = ensure_lake(total_steps)
    episodes = total_steps // STEPS_PER_EPISODE
    rng = random.Random(7)
    sample = [f"ep-{rng.randrange(episodes):06d}" for _ in range(max(4, samples // 8))]
    reference = ensure_reference(total_steps, sample)
    ours_port, ref_port = free_port(), free_port()
    ours = start([sys.executable, "-m", "episodelake.api.cli", "--lake", str(lake), "serve",
                  "--port", str(ours_port)], ours_port)
    ref = start([sys.executable, __file__, "--serve-reference", str(reference), "--port", str(ref_port)], ref_port)
    base, ref_base = f"http://127.0.0.1:{ours_port}", f"http://127.0.0.1:{ref_port}"
    try:
        with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
            browser = p.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1400, "height": 900})
            page = browser.new_page()
            print(f"lake: {episodes} episodes, {total_steps} steps, {SCREEN[0]}x{SCREEN[1]} PNG screenshots", flush=True)

            # episode list: first page, as the app's task tree asks for it
            page.goto(base + "/api/health")
            list_urls = [f"{base}/api/episodes?limit=50", f"{base}/api/episodes?limit=50&task={TASKS[3]}",
                         f"{base}/api/episodes?limit=50&success=false&sort=episode_length"]
            for url in list_urls:
                page.evaluate(FETCH_MS, url)  # warm
            ours_list = [page.evaluate(FETCH_MS, list_urls[i % 3]) for i in range(samples)]
            page.goto(ref_base + "/openapi.json")  # any page of that origin
            ref_list = [page.evaluate(FETCH_MS, f"{ref_base}/api/tasks") for _ in range(max(3, samples // 8))]

            # step switch in the app
            keyed, jumped = [], []
            for eid in sample:
                page.goto(f"{base}/episodes/{eid}/steps/0")
                page.wait_for_selector('[data-testid=screen][data-loaded-step="0"]')
                page.wait_for_function(LOADED)  # stepping starts once the episode view is there
                for s in range(1, min(STEPS_PER_EPISODE, 1 + samples // len(sample))):
                    keyed.append(page.evaluate(KEY_MS, ["d", s]))
                    page.wait_for_timeout(PAUSE_MS)
                jumped.append(page.evaluate(KEY_MS, ["End", STEPS_PER_EPISODE - 1]))

            # the same image fetched cold from both servers, and the reference's step switch
            page.goto(ref_base + "/openapi.json")
            ref_switch = []
            for eid in sample:
                task = TASKS[int(eid[3:]) % len(TASKS)]
                for s in range(min(STEPS_PER_EPISODE, 1 + samples // len(sample))):
                    ref_switch.append(page.evaluate(IMAGE_MS, f"{ref_base}/api/image/{task}/{eid}/{s}?n={rng.random()}"))
            page.goto(base + "/api/health")
            ours_cold = []
            for eid in sample:
                for s in range(min(STEPS_PER_EPISODE, 1 + samples // len(sample))):
                    ours_cold.append(page.evaluate(IMAGE_MS, f"{base}/api/episodes/{eid}/steps/{s}/image?n={rng.random()}"))
            browser.close()
    finally:
        for proc in (ours, ref):
            proc.terminate()
            proc.wait(timeout=20)

    print()
    app = report("app: step switch, A/D key (image + overlay on screen)", keyed, TARGET_STEP_MS)
    jump = report("app: jump to the last step (End key)", jumped, TARGET_STEP_MS)
    cold = report("ours: one screenshot, uncached (fetch + decode)", ours_cold)
    refs = report("reference: step switch (episode.json + re-encode per image)", ref_switch)
    lst = report("ours: episodes list, first page of 50 (filters/sort)", ours_list, TARGET_LIST_MS)
    rlst = report(f"reference: task list (scans {episodes} episode folders)", ref_list)
    print()
    print(f"ratio step switch   reference / app      = {refs / app:6.1f}x")
    print(f"ratio step switch   reference / app jump = {refs / jump:6.1f}x")
    print(f"ratio image fetch   reference / ours     = {refs / cold:6.1f}x")
    print(f"ratio episode list  reference / ours     = {rlst / lst:6.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--samples", type=int, default=40, help="measurements per metric (about)")
    parser.add_argument("--bundle-only", action="store_true", help="print the built app's sizes and stop")
    parser.add_argument("--serve-reference", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_reference:
        import uvicorn

        uvicorn.run(reference_app(args.serve_reference), host="127.0.0.1", port=args.port, log_level="warning")
        return
    bundle_sizes()
    if args.bundle_only:
        return
    OUT.mkdir(parents=True, exist_ok=True)
    run(args.steps, args.samples)


if __name__ == "__main__":
    main()
