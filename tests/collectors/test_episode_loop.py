"""The episode loop on the in-process simulated phone: endings, Ctrl-C, invalid responses,
the step-judge hook, seeded episodes, the model policy's requests and stored prompts, task
files, and `elake collect sim`."""

from __future__ import annotations

import json
import threading

import pytest

from episodelake.collectors.agents.model import ModelPolicy
from episodelake.collectors.agents.model_client import ModelClient, ModelOptions
from episodelake.collectors.agents.oracle import OraclePolicy
from episodelake.collectors.agents.random import RandomPolicy
from episodelake.collectors.envs.base import Task
from episodelake.collectors.envs.sim.device import SimDevice, SimJudge
from episodelake.collectors.jobs.tasks import load_tasks
from episodelake.collectors.loop import Reply, run_episode
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.storage.errors import InvalidInput
from tests import factories
from tests.collectors.device_support import elake


@pytest.fixture
def recorder(lake):
    rec = Recorder(lake, anchor=None)
    yield rec
    rec.close()


def test_the_oracle_solves_a_task_and_the_episode_says_how_it_ended(recorder, lake):
    device = SimDevice(0)
    summary = run_episode(device, OraclePolicy(device), recorder, Task("wifi_on", group_id="g1"))
    recorder.flush()
    assert (summary.status, summary.success, summary.eval_score) == ("finished", True, 1.0)
    episode = lake.episode(summary.episode_id)
    assert (episode["env"], episode["device"], episode["model_name"]) == ("sim", "sim-0", "oracle")
    assert episode["group_id"] == "g1"
    assert json.loads(episode["extra"]) == {"stop": "terminate", "agent_status": "success",
                                            "seed": 0, "difficulty": "easy"}
    steps = lake.steps(summary.episode_id).to_pylist()
    assert steps[-1]["action_type"] == "terminate" and all(s["ui_tree_hash"] for s in steps)


def test_max_steps_ends_the_episode_and_it_is_still_evaluated(recorder, lake):
    summary = run_episode(SimDevice(0), RandomPolicy(1, terminate_p=0), recorder, Task("wifi_on"),
                          max_steps=3)
    recorder.flush()
    assert (summary.status, summary.steps, summary.success) == ("finished", 3, False)
    assert json.loads(lake.episode(summary.episode_id)["extra"])["stop"] == "max_steps"


def test_the_sim_judge_hook_scores_every_step_and_rewards_the_final_one(recorder, lake):
    device = SimDevice(0)
    summary = run_episode(device, OraclePolicy(device), recorder, Task("wifi_on"),
                          judge=SimJudge())
    recorder.flush()
    steps = lake.steps(summary.episode_id).to_pylist()
    assert [s["step_reward"] for s in steps] == [1.0] * len(steps)
    assert steps[-1]["step_reward_reason"] == "terminated with the goal reached"
    assert [s["reward"] for s in steps] == [0.0] * (len(steps) - 1) + [1.0]
    assert lake.episode(summary.episode_id)["episode_reward"] == 1.0
    with pytest.raises(InvalidInput, match="only the simulated phone"):
        SimJudge().before(object())


def test_a_seeded_task_replays_byte_for_byte_on_any_device(recorder, lake):
    def play(device_seed: int, task_seed: int | None) -> tuple[list, dict]:
        device = SimDevice(device_seed)
        summary = run_episode(device, RandomPolicy(device_seed, terminate_p=0), recorder,
                              Task("wifi_on", seed=task_seed), max_steps=4)
        recorder.flush()
        rows = lake.steps(summary.episode_id, ["image_sha256", "model_response"]).to_pylist()
        return rows, json.loads(lake.episode(summary.episode_id)["extra"])

    first, extra = play(0, 7)
    assert extra["seed"] == 7
    assert play(3, 7)[0] == first  # the task's seed, not the device's or the agent's own
    assert play(3, 8)[0] != first
    assert play(3, None)[1]["seed"] == 3


class Interrupting:
    name, history_length = "interrupting", 0

    def __init__(self, at: int, stop: threading.Event | None = None):
        self.at, self.stop = at, stop

    def act(self, observation):
        if observation.step == self.at:
            if self.stop is None:
                raise KeyboardInterrupt
            self.stop.set()
        return Reply(factories.response("wait"))


def test_ctrl_c_aborts_the_episode_keeping_its_steps(recorder, lake):
    with pytest.raises(KeyboardInterrupt):
        run_episode(SimDevice(0), Interrupting(2), recorder, Task("wifi_on"))
    recorder.flush()
    [episode] = lake.sql("SELECT episode_id, status, eval_reason FROM episodes").to_pylist()
    assert (episode["status"], episode["eval_reason"]) == ("aborted", "aborted: interrupted (Ctrl-C)")
    assert lake.steps(episode["episode_id"])["step"].to_pylist() == [0, 1]


def test_a_stop_request_aborts_before_the_next_step(recorder):
    stop = threading.Event()
    summary = run_episode(SimDevice(0), Interrupting(1, stop), recorder, Task("wifi_on"), stop=stop)
    assert summary.status == "aborted" and summary.steps == 2 and "asked to stop" in summary.reason


def test_invalid_responses_are_recorded_and_nothing_is_sent(recorder, lake):
    class Babbling:
        name, history_length = "babbling", 0

        def act(self, observation):
            return Reply("I think I should tap somewhere" if observation.step == 0
                         else factories.response("terminate", status="fail"))

    summary = run_episode(SimDevice(0), Babbling(), recorder, Task("wifi_on"))
    recorder.flush()
    first = lake.steps(summary.episode_id).to_pylist()[0]
    assert first["action_valid"] is False and "nothing sent" in first["info"]
    # the phone never stepped, so not even its clock moved between the two screenshots
    assert lake.image(summary.episode_id, 0) == lake.image(summary.episode_id, 1)


def test_the_model_policy_sends_data_urls_and_stores_image_references(recorder, lake, fake_model):
    fake_model.script(factories.response("wait"), factories.response("wait"),
                      factories.response("terminate", status="fail"))
    client = ModelClient(fake_model.url, "agent-1", options=ModelOptions(max_retries=0))
    policy = ModelPolicy(client, history_length=1)
    summary = run_episode(SimDevice(0), policy, recorder, Task("wifi_on"))
    recorder.flush()
    assert summary.steps == 3
    last = fake_model.requests[-1]
    assert last["model"] == "agent-1"
    urls = [p["image_url"]["url"] for m in last["messages"] if isinstance(m["content"], list)
            for p in m["content"] if p.get("type") == "image_url"]
    assert len(urls) == 2 and all(u.startswith("data:image/png;base64,") for u in urls)
    prompt = json.loads(lake.steps(summary.episode_id)["prompt"].to_pylist()[2])
    refs = [p["image"] for m in prompt if isinstance(m["content"], list) for p in m["content"]
            if p.get("type") == "image"]
    assert refs == [{"step": 1}, {"step": 2}]
    assert lake.episode(summary.episode_id)["model_name"] == "agent-1"


def test_task_files(tmp_path):
    f = tmp_path / "tasks.txt"
    f.write_text('# batch\nwifi_on\n\n{"name": "wifi_off", "repeat": 2}\n'
                 '{"goal": "Turn on Bluetooth", "name": "bt"}\n')
    tasks = load_tasks(f, run_id="r1")
    assert [(t.name, t.goal, t.group_id) for t in tasks] == [
        ("wifi_on", None, None), ("wifi_off", None, "r1.g1"), ("wifi_off", None, "r1.g1"),
        ("bt", "Turn on Bluetooth", None)]
    assert {t.group_id for t in load_tasks(f, repeat=3, run_id="r1")} == {"r1.g0", "r1.g1", "r1.g2"}
    f.write_text('{"repeat": 2}\n')
    with pytest.raises(InvalidInput, match="tasks.txt:1: a task needs"):
        load_tasks(f)
    f.write_text('{"name": \n')
    with pytest.raises(InvalidInput, match="tasks.txt:1: not a task line"):
        load_tasks(f)


def test_elake_collect_sim(lake, capsys):
    argv = ["--lake", str(lake.path), "collect", "sim", "--policy", "oracle", "--task", "wifi_on",
            "--repeat", "2", "--run-id", "r9", "--workers", "2"]
    assert elake(argv) == 0
    assert "2 finished; 2 successful" in capsys.readouterr().out
    rows = lake.sql("SELECT group_id, success, run_id FROM episodes").to_pylist()
    assert rows == [{"group_id": "r9.g0", "success": True, "run_id": "r9"}] * 2
    with pytest.raises(SystemExit):
        elake(["collect", "sim", "--policy", "nope"])
    assert elake(["--lake", str(lake.path), "collect", "sim", "--task", "wifi_on"]) == 1
    assert "--model-url URL and --model NAME" in capsys.readouterr().err
