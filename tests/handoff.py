"""Processes for the hand-off tests (`episodelake.lake.storage.committer`), on a local lake or
one on S3 (the child inherits the test's environment, the store's variables included): a
writer that SIGKILLs itself at a stage of its hand-off, and a process that only commits."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from episodelake.lake import Lake
from tests.factories import child_env

#: A writer process: appends steps of one episode (and the episode's row every 25 steps),
#: printing each acknowledged step; with
#: `stage`, it SIGKILLs itself the `nth` time the hand-off reaches that stage.
WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from tests.factories import screenshot
    from episodelake.lake import LakeWriter, WriterOptions
    from episodelake.lake.storage import committer
    stage, nth, episode, count = {stage!r}, {nth}, {episode!r}, {count}
    seen = []
    def hook(name):
        if name == stage:
            seen.append(name)
            if len(seen) >= nth:
                os.kill(os.getpid(), signal.SIGKILL)
    committer.stage_hook = hook
    w = LakeWriter({lake!r}, WriterOptions(batch_rows=10, max_age_s=0.3))
    for n in range(count):
        if n % 25 == 0:  # the episode's row, updated as it goes: offered with its steps
            w.append("episodes", {{"episode_id": episode, "task_name": f"at-{{n}}", "status": "running"}})
        w.append("steps", {{"episode_id": episode, "step": n, "image": screenshot(n % 5),
                            "action_type": "click"}})
        print(n, flush=True)  # acknowledged
    w.close()
    print("closed", flush=True)
    """
)

#: A process that only commits: it opens a writer (so it becomes the machine's committer)
#: and waits; with `stage`, it SIGKILLs itself the first time a round reaches that stage.
COMMITTER = textwrap.dedent(
    """
    import os, signal, sys, time
    from episodelake.lake import LakeWriter
    from episodelake.lake.storage import committer
    stage = {stage!r}
    def hook(name):
        if name == stage:
            os.kill(os.getpid(), signal.SIGKILL)
    committer.stage_hook = hook
    w = LakeWriter({lake!r})
    while w.node_committer is None:
        time.sleep(0.02)
    print("ready", flush=True)
    sys.stdin.read()  # until the test closes it
    w.close()
    """
)


def spawn(code: str, **stdin) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=child_env(), **stdin)


def start_committer(lake_path: str, stage: str | None = None) -> subprocess.Popen:
    proc = spawn(COMMITTER.format(lake=lake_path, stage=stage), stdin=subprocess.PIPE)
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    return proc


def acknowledged_by(proc: subprocess.Popen) -> int:
    """The last step the writer acknowledged, once it is gone."""
    last = -1
    for line in proc.stdout.read().split():
        if line.isdigit():
            last = int(line)
    proc.wait(timeout=60)
    return last


def stored(lake: Lake, episode: str) -> dict:
    return lake.sql(
        "select count(*) n, count(distinct step) d, coalesce(min(step), 0) lo, coalesce(max(step), -1) hi "
        f"from steps where episode_id = '{episode}'").to_pylist()[0]
