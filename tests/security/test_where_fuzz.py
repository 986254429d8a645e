"""Every caller's condition goes through one check before a byte changes.

`hostile_where.jsonl` is the corpus: second statements (COPY, ATTACH, INSTALL, LOAD, DROP,
...), functions and strings that read files, pragmas and introspection, comments that hide a
statement, unbalanced quotes and parentheses that escape the enclosing one. Each is sent
through every entry point that takes a condition: the command line (`purge`, `episode
delete`, `export sft`, `export clawgui`, `enrich`), the Python API (`sft_dataset`,
`select_episodes`, `search`) and the server's fields (the episode list, filing into a set,
an export, search). Every one is refused with one line naming the flag; nothing is written
(the lake's table versions and every file under the test folder are as before) and no file
the corpus names appears.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import httpx
import pytest

from episodelake.api import cli
from episodelake.api.settings import Settings
from episodelake.lake import Lake
from episodelake.lake.curation.search import search
from episodelake.lake.export.selection import select_episodes
from episodelake.lake.storage.errors import EpisodeLakeError, SqlRefused
from episodelake.lake.storage.sql import condition
from episodelake.trainer.data import sft_dataset
from tests.api.webapp_support import ServerThread, build_lake, error_of

CORPUS = Path(__file__).with_name("hostile_where.jsonl")


def corpus(out: Path) -> list[str]:
    rows = [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]
    return [r["where"].replace("{tmp}", str(out)) for r in rows]


def files_under(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A recorded lake inside a folder whose every file is watched, the folder the corpus's
    file names point into, and a server on loopback over the lake."""
    root = tmp_path_factory.mktemp("fuzz")
    lake = build_lake(root / "lake")
    out = root / "out"
    out.mkdir()
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as server:
        set_id = httpx.post(f"{server.url}/api/sets", json={"name": "fuzz", "kind": "failure"}).json()["set_id"]
        server.fuzz_set = set_id
        yield root, lake, out, server


@pytest.fixture
def unchanged(world, monkeypatch):
    """Run the test in an empty folder of the watched tree; afterwards nothing under it
    changed and the lake's versions are the same."""
    root, lake, out, _ = world
    cwd = root / "cwd"
    cwd.mkdir(exist_ok=True)
    monkeypatch.chdir(cwd)
    versions = Lake(lake.path, create=False).current_versions()
    before = files_under(root)
    yield
    assert files_under(root) == before, "a file under the test folder was created or changed"
    assert Lake(lake.path, create=False).current_versions() == versions
    assert not list(out.iterdir())


def test_the_corpus_is_large_and_covers_every_kind():
    rows = [json.loads(line) for line in CORPUS.read_text().splitlines()]
    assert len(rows) >= 200
    kinds = {r["why"] for r in rows}
    assert kinds >= {"second statement", "reads files or the server", "string as a table",
                     "not one expression", "pragma or introspection", "comments hiding a statement"}
    text = "\n".join(r["where"] for r in rows).upper()
    for word in ("COPY", "ATTACH", "INSTALL", "LOAD", "PRAGMA", "READ_TEXT", "/*", "--", "DROP"):
        assert word in text


def test_the_one_check_refuses_each_in_one_line_naming_the_flag(world, unchanged):
    _, lake, out, _ = world
    for where in corpus(out):
        with pytest.raises(SqlRefused) as caught:
            lake.matching("SELECT episode_id FROM episodes", where, flag="--where")
        message = str(caught.value)
        assert message.startswith("--where") and "\n" not in message, (where, message)


def test_ordinary_conditions_still_select(world):
    _, lake, _, _ = world
    assert condition("run_id = 'run-1'") == "(\nrun_id = 'run-1'\n)"
    found = lake.matching("SELECT episode_id FROM episodes", "success = false AND run_id = 'run-1' -- the failures")
    assert sorted(found["episode_id"].to_pylist()) and all(i.endswith("-1") for i in found["episode_id"].to_pylist())
    steps = lake.matching("SELECT episode_id, step FROM episodes e JOIN steps s USING (episode_id)",
                          "s.step_reward = 0 AND e.episode_id IN (SELECT episode_id FROM steps WHERE step >= 4)")
    assert steps.num_rows >= 1
    with pytest.raises(SqlRefused, match=r"^--where 'no_such = 1': .*no_such"):
        lake.matching("SELECT episode_id FROM episodes", "no_such = 1")


@pytest.mark.parametrize("command,every", [
    (["purge", "--where", "{w}", "--yes"], 1),
    (["episode", "delete", "--where", "{w}"], 1),
    # the same check runs for the rest (`Lake.matching`): every third input keeps them quick
    (["export", "sft", "--format", "llamafactory", "--where", "{w}", "--out", "{out}/sft"], 3),
    (["export", "clawgui", "{out}/folders", "--where", "{w}"], 3),
    (["enrich", "--what", "phash", "--where", "{w}"], 3),
], ids=["purge", "delete", "export", "clawgui-export", "enrich"])
def test_the_command_line_refuses_every_hostile_where(world, unchanged, capsys, command, every):
    _, lake, out, _ = world
    for where in corpus(out)[::every]:
        argv = [a.replace("{w}", where).replace("{out}", str(out)) for a in command]
        assert cli.main(["--lake", str(lake.path), *argv]) == 1, where
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "where" in err, (where, err)


def test_the_python_api_refuses_every_hostile_where(world, unchanged):
    _, lake, out, _ = world
    for where in corpus(out):
        for call in (partial(sft_dataset, lake, where=where), partial(select_episodes, lake, where=where),
                     partial(search, lake, "step", where=where)):
            with pytest.raises(EpisodeLakeError) as caught:
                call()
            assert "where" in str(caught.value) and "\n" not in str(caught.value), (where, caught.value)


def test_the_server_refuses_every_hostile_condition_field(world, unchanged):
    _, _, out, server = world
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for where in corpus(out):
            answers = [
                client.get("/api/episodes", params={"where": where}),
                client.post(f"/api/sets/{server.fuzz_set}/members", json={"filter": {"where": where}}),
                client.post("/api/exports", json={"format": "llamafactory", "where": where}),
                client.get("/api/search", params={"q": "step", "where": where}),
            ]
            for r in answers:
                assert r.status_code in (400, 422), (where, r.request.url, r.text)
                message = error_of(r)["message"]
                assert "where" in message and "\n" not in message, (where, message)
