"""AgentGym's env clients against `agentgym serve`: every served scenario, spoken to as AgentGym speaks.

`AgentGymClient` makes the HTTP calls of `agentenv.controller.BaseEnvClient` subclasses (WooooDyy/AgentGym,
`agentenv/agentenv/envs/{babyai,textcraft,sciworld,searchqa,webarena}.py`): the id field each one adds,
the bodies, `assert res.status_code == 200` on every reply and the fields each client reads. Each test
plays the sequence AgentGym-RL's rollout runs (create, reset by index, observe, step until done, close)
and checks the replies against what AgentGym's server for that scenario answers, and the task each
index picks against AgentGym's rule restated here from its servers' code.
"""

from __future__ import annotations

import json
import time
from importlib import resources
from typing import Any

import gymnasium as gym
import httpx
import pytest

import agentgym_envs  # noqa: F401
from agentgym_envs.babyai.levels import AGENTGYM_LEVELS
from agentgym_envs.core import TextEnv
from agentgym_envs.remote.dialects import agentgym as compat
from agentgym_envs.remote.server import create_app
from agentgym_envs.remote.server.local import ServerThread
from agentgym_envs.sciworld.tasks import TASK_TYPES
from agentgym_envs.textcraft.tasks import split_tasks

BABYAI = "AgentGym/BabyAI-v0"
TEXTCRAFT = "AgentGym/TextCraft-v0"
SCIWORLD = "AgentGym/SciWorld-v0"
DEEPSEARCH = "AgentGym/DeepSearch-v0"
WEBARENA = "AgentGym/WebArena-v0"
GENERIC = "AgentGymTest/CompatProbe-v0"


class AgentGymClient:
    """The HTTP calls of an agentenv env client: `_post` adds the id and asserts 200, as theirs do."""

    def __init__(self, http: httpx.Client, id_field: str, create_body: Any = None):
        self.http, self.id_field = http, id_field
        reply = http.post("/create", json=create_body) if create_body is not None else http.post("/create")
        assert reply.status_code == 200, reply.text
        self.created = reply.json()
        self.env_id = self.created if isinstance(self.created, int) else self.created[id_field]

    def post(self, path: str, data: dict[str, Any]) -> Any:
        reply = self.http.post(f"/{path}", json={**data, self.id_field: self.env_id})
        assert reply.status_code == 200, reply.text
        return reply.json()

    def get(self, path: str) -> Any:
        reply = self.http.get(f"/{path}", params={self.id_field: self.env_id})
        assert reply.status_code == 200, reply.text
        return reply.json()


@pytest.fixture()
def serve():
    servers = []

    def start(env_id: str, **options: Any) -> httpx.Client:
        server = ServerThread(create_app([env_id], ttl=None, **options)).start()
        servers.append(server)
        return httpx.Client(base_url=server.base_url, timeout=120)

    yield start
    for server in servers:
        server.stop()


def _reset(twin: gym.Env, task_id: str) -> tuple[str, dict[str, Any]]:
    """The twin's reset to `task_id`, seeded as the AgentGym routes seed theirs."""
    return twin.reset(seed=compat.RESET_SEED, options={"task_id": task_id})


def _expert_episode(twin: gym.Env, task_id: str) -> list[tuple[str, str, float]]:
    """The expert's (action, observation, score) turns for `task_id`, played on a local twin of the served env."""
    observation, info = _reset(twin, task_id)
    expert, turns, done = twin.unwrapped.make_expert(), [], False
    while not done:
        action = expert.act(observation, info)
        observation, _, terminated, truncated, info = twin.step(action)
        turns.append((action, observation, info["score"]))
        done = terminated or truncated
    return turns


# ---- BabyAI: indexes spread over AgentGym's 40 levels --------------------------------------------
def agentgym_babyai_task(data_idx: int) -> str:
    """agentenv-babyai: `BabyAI(game_name=all_levels[data_idx % 40 + 1], seed=data_idx // 40)` (1-based table)."""
    all_levels = {number: f"BabyAI-{level}-v0" for number, level in enumerate(AGENTGYM_LEVELS, 1)}
    name = all_levels[data_idx % 40 + 1].removeprefix("BabyAI-").removesuffix("-v0")
    return f"{name}/{data_idx // 40}"


def test_babyai_client(serve) -> None:
    http = serve(BABYAI)
    client = AgentGymClient(http, "id")  # BabyAIEnvClient posts /create with no body and reads ok["id"]
    assert client.created == {"id": client.env_id}
    twin = gym.make(BABYAI)
    for data_idx in (41, 4_123, 123_456_789):  # a seed past our listed ones is still AgentGym's task
        reply = client.post("reset", {"data_idx": data_idx})
        task = agentgym_babyai_task(data_idx)
        assert reply["observation"] == _reset(twin, task)[0], task
        assert reply["info"]["task_id"] == task and (reply["reward"], reply["score"], reply["done"]) == (0, 0, False)

    task = agentgym_babyai_task(0)
    reply = client.post("reset", {"data_idx": 0})
    assert reply["info"]["task_id"] == task == "GoToRedBallGrey/0"
    for action, observation, score in _expert_episode(twin, task):
        step = client.post("step", {"action": action})  # the client reads observation, reward, score, done
        assert {"observation", "reward", "score", "done"} <= set(step) and step["observation"] == observation
        assert step["score"] == step["reward"] == score  # BabyAIEnvClient takes `score` as the reward
    assert step["done"] is True and score > 0
    after = client.post("step", {"action": "turn left"})  # AgentGym's server: the task has finished
    assert after == {"error": f"The task with environment {client.env_id} has finished."}
    assert client.get("observation")["done"] is True
    assert client.post("close", {}) is True
    assert "is not valid" in client.post("step", {"action": "turn left"})["error"]
    other = AgentGymClient(http, "id")
    assert "must be >= 0" in other.post("reset", {"data_idx": -1})["error"]
    assert "unknown task_id" in other.post("reset", {"data_idx": 10**20})["error"]  # a seed past 12 digits
    too_big = http.post("/reset", json={"id": other.env_id, "data_idx": 10**40})
    assert too_big.status_code == 422 and "larger than 2**100" in too_big.json()["detail"]


# ---- TextCraft: goals by depth, wrapping around; a custom task from /create ----------------------
def agentgym_textcraft_goals() -> list[str]:
    """agentenv-textcraft's order: every goal, sorted by crafting depth (ties: by name here)."""
    by_depth = {}
    for split in split_tasks().values():
        for depth, goals in split.items():
            by_depth.setdefault(depth, []).extend(goals)
    return [goal for depth in sorted(by_depth) for goal in sorted(by_depth[depth])]


TEXTCRAFT_CREATE = {"minecraft_dir": "agentenv_textcraft/", "commands": None, "goal": None}  # the client's body


def test_textcraft_client(serve) -> None:
    http = serve(TEXTCRAFT)
    goals = agentgym_textcraft_goals()
    twin = gym.make(TEXTCRAFT)
    first, second = AgentGymClient(http, "id", TEXTCRAFT_CREATE), AgentGymClient(http, "id", TEXTCRAFT_CREATE)
    for client in (first, second):  # AgentGym's /create resets to data_idx = the new id
        assert set(client.created) == {"id", "observation", "done", "reward"}
        assert client.created["observation"] == _reset(twin, goals[client.env_id])[0]
    client = second
    reply = client.post("reset", {"data_idx": len(goals) + 5})  # past the end: wraps, as AgentGym's does
    assert reply == {"id": client.env_id, "observation": _reset(twin, goals[5])[0],
                     "done": False, "reward": 0}  # fmt: skip
    for action, observation, _ in _expert_episode(twin, goals[5]):
        step = client.post("step", {"action": action})
        assert set(step) == {"observation", "reward", "done"} and step["observation"] == observation
    assert step["done"] is True and step["reward"] == 1.0
    assert client.get("observation") == step["observation"]
    after = client.post("step", {"action": "inventory"})  # AgentGym's TextCraft server steps on
    assert after["done"] is True and after["reward"] == 0 and "over" in after["observation"]
    assert client.post("close", {}) is True and first.post("close", {}) is True
    assert "is not valid" in client.post("step", {"action": "inventory"})["error"]


def test_textcraft_custom_task_from_create(serve) -> None:
    http = serve(TEXTCRAFT)
    commands = "craft 4 oak planks using 1 oak log\ncraft 4 stick using 2 oak planks\ncraft 1 bowl using 3 oak planks"
    client = AgentGymClient(http, "id", {"minecraft_dir": "x", "commands": commands, "goal": "minecraft:stick"})
    assert client.created["observation"] == f"Crafting commands:\n{commands}\n\nGoal: craft stick."
    assert client.get("observation") == client.created["observation"]
    for action in ("get 1 oak log", "craft 4 oak planks using 1 oak log", "craft 4 stick using 2 oak planks"):
        step = client.post("step", {"action": action})
    assert step["done"] is True and step["reward"] == 1.0
    client.post("close", {})

    bad = {
        "only a goal": {"goal": "stick"},
        "not a command": {"commands": "rm -rf /", "goal": "stick"},
        "unknown item": {"commands": "craft 1 unobtainium using 2 stick", "goal": "stick"},
        "too many ingredients": {"commands": "craft 1 stick using " + ", ".join(["1 oak log"] * 10), "goal": "stick"},
        "too many lines": {"commands": "craft 4 stick using 2 oak planks\n" * 65, "goal": "stick"},
        "too large": {"commands": "craft 4 stick using 2 oak planks " * 40_000, "goal": "stick"},
        "a base item goal": {"commands": "craft 4 stick using 2 oak planks", "goal": "oak log"},
        "a count that is no number": {"commands": "craft ٣ stick using 2 oak planks", "goal": "stick"},
    }
    for why, body in bad.items():
        reply = http.post("/create", json=body)
        assert reply.status_code == 200 and set(reply.json()) == {"error", "error_type"}, (why, reply.text[:300])
    assert http.get("/health").json()["sessions"] == 0  # a refused task leaves no session behind


# ---- SciWorld: games[data_idx] over AgentGym's task list ----------------------------------------
def agentgym_sciworld_games() -> list[str]:
    """agentenv-sciworld: for each ScienceWorld task (its tasks.json order) but seven, every variation."""
    exceptions = {"5-1", "5-2", "9-1", "9-2", "9-3", "10-1", "10-2"}
    tasks = json.loads(resources.files("scienceworld").joinpath("tasks.json").read_text())
    return [
        f"{task['task_name']}/{variation}"
        for task in tasks
        if task["task_id"] not in exceptions
        for variation in range(TASK_TYPES[task["task_name"]][1])
    ]


def test_sciworld_index_is_agentgyms_game_list() -> None:
    games = compat.sciworld_games()
    assert games == agentgym_sciworld_games() and len(games) == 4_639
    assert games[0] == "boil/0" and games[30] == "melt/0" and games[-1] == "identify-life-stages-2/9"


def test_sciworld_client(serve) -> None:
    http = serve(SCIWORLD)
    client = AgentGymClient(http, "id")
    assert client.created == {"id": client.env_id}  # AgentGym's SciWorld /create loads no task
    reply = client.post("reset", {"data_idx": 0})
    assert (reply["task_name"], reply["var_num"], reply["score"], reply["done"]) == ("boil", 0, 0, False)
    assert reply["task_description"].startswith("Your task is to boil water")
    assert reply["observation"].startswith("This room is called")  # the client joins description + "\n" + this
    for action in ("look around", "focus on door to kitchen"):  # focusing on a wrong object ends the task
        step = client.post("step", {"action": action})
        assert set(step) == {"observation", "reward", "score", "done"}
    assert step["done"] is True and step["score"] == 0
    after = client.post("step", {"action": "look around"})
    assert after == {"error": f"The task with environment {client.env_id} has finished."}
    assert client.post("reset", {"data_idx": 4_639}) == {"error": "list index out of range"}  # no wrap, as AgentGym
    last = client.post("reset", {"data_idx": -1})  # Python indexing, as AgentGym's games[data_idx]
    assert (last["task_name"], last["var_num"]) == ("identify-life-stages-2", 9)
    assert client.get("observation").endswith(last["observation"])
    assert client.post("close", {}) is True


# ---- SearchQA (Deep Search): env_idx ids, item ids over test then train --------------------------
def test_searchqa_client(serve) -> None:
    http = serve(DEEPSEARCH, env_kwargs={DEEPSEARCH: {"num_docs": 2_000}})
    twin = gym.make(DEEPSEARCH, num_docs=2_000)
    test_size = len(twin.unwrapped.tasks("test"))
    client = AgentGymClient(http, "env_idx", {"id": 0})  # SearchQAEnvClient: create {"id": 0} -> a bare int
    assert isinstance(client.created, int)
    observation = client.post("reset", {"id": test_size + 2})  # past the test items: train
    assert observation == twin.reset(options={"split": "train", "task_id": 2})[0]
    assert client.post("reset", {"id": 3}) == client.get("observation") == _reset(twin, "test/00003")[0]

    step = client.post("step", {"action": "<think>look it up</think><search> capital </search>"})
    assert set(step) == {"observation", "reward", "done", "info"} and step["info"] is None
    assert step["observation"].startswith("<information>Doc 1(Title: ") and step["done"] is False
    wrong = client.post("step", {"action": "<answer> certainly not this </answer>"})
    assert wrong == {"observation": "Sorry, your answer is incorrect. Please try again.", "reward": 0.0,
                     "done": False, "info": None}  # fmt: skip
    gold = twin.unwrapped.question.golden_answers[0]
    right = client.post("step", {"action": f"<answer> {gold} </answer>"})
    assert right["done"] is True and right["reward"] == 1.0
    assert client.post("step", {"action": "<answer> again </answer>"})["done"] is True
    too_far = http.post("/reset", json={"env_idx": client.env_id, "id": 10**6})
    assert too_far.status_code == 500 and too_far.json()["detail"] == "Item id 1000000 is out of range."
    assert client.post("close", {}) is True


# ---- WebArena: env_idx ids, task ids, actions in ``` fences ---------------------------------------
def test_webarena_client(serve) -> None:
    http = serve(WEBARENA)
    client = AgentGymClient(http, "env_idx")
    assert client.created == {"env_idx": client.env_id}
    assert client.post("reset", {"seed": 0, "idx": 99_999}) == {"observation": "TimeoutError", "sites": "Error",
                                                                "object": "Error"}  # fmt: skip
    reply = client.post("reset", {"seed": 0, "idx": 1})  # WebarenaEnvClient.reset(idx): config_files/1.json
    assert reply["sites"] == ["shopping"] and reply["object"].startswith("What is the SKU")
    assert client.get("observation") == reply["observation"]
    session = http.get("/sessions").json()["sessions"][0]["session_id"]
    assert http.post(f"/sessions/{session}/expert").status_code == 200
    observation, done, info = reply["observation"], False, {}
    while not done:
        action = http.post(f"/sessions/{session}/expert/act", json={"observation": observation, "info": info})
        reply = client.post("step", {"action": f"Let's think step-by-step. ... ```{action.json()['action']}```"})
        assert set(reply) == {"observation", "reward", "terminated", "truncated", "info"}
        observation, done, info = reply["observation"], reply["terminated"], reply["info"]
    assert reply["reward"] == 1.0  # the client reads the reward when terminated
    after = client.post("step", {"action": "```stop [again]```"})
    assert after["terminated"] is True and after["reward"] == 0
    unparsed = client.post("step", {"action": "no fence here"})
    assert unparsed["observation"].startswith("Cannot parse action") and unparsed["terminated"] is False
    assert client.post("close", {}) == {"closed": "closed"}


# ---- any other env: every split's tasks in order, wrapping around --------------------------------
class CompatProbe(TextEnv):
    """Three tasks per split; `end` ends the episode."""

    def tasks(self, split: str = "train") -> list[str]:
        return [f"{split}-{i}" for i in range(3)]

    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        return f"task {task_id}", {"category": "probe", "instruction": "say end"}

    def _step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return "ok", float(action == "end"), action == "end", False, {"valid_action": True, "success": action == "end"}


if GENERIC not in gym.registry:
    gym.register(GENERIC, entry_point=CompatProbe)


def test_other_envs_index_every_split_and_wrap(serve) -> None:
    http = serve(GENERIC)
    client = AgentGymClient(http, "id")
    assert client.created["observation"] == "task train-0"
    assert client.post("reset", {"data_idx": 4})["observation"] == "task test-1"
    assert client.post("reset", {"data_idx": 6 * 10**20 + 2})["observation"] == "task train-2"
    assert client.post("step", {"action": "end"})["done"] is True
    assert "has finished" in client.post("step", {"action": "end"})["error"]
    malformed = http.post("/reset", json={"id": client.env_id, "data_idx": "3; drop"})
    assert malformed.status_code == 422 and "data_idx must be an integer" in malformed.json()["detail"]


# ---- idle sessions: at least AgentGym-RL's client timeout; a reaped id says so ------------------
def test_agentgym_sessions_outlive_the_client_timeout_and_a_reaped_id_says_so() -> None:
    app = create_app([GENERIC])  # the default TTLs
    assert compat.COMPAT_TTL >= compat.AGENTGYM_CLIENT_TIMEOUT
    with ServerThread(app) as server, httpx.Client(base_url=server.base_url) as http:
        AgentGymClient(http, "id")
        (session,) = app.state.manager.sessions.values()
        assert session.ttl == compat.COMPAT_TTL and app.state.manager.ttl < compat.AGENTGYM_CLIENT_TIMEOUT

    # The two reaps are polled from snapshots of /sessions, so no check can race the reaper; the wide
    # gap between the TTLs leaves many polls in which only the compat session is still open.
    app = create_app([GENERIC], ttl=0.2, compat_ttl=2.0)
    with ServerThread(app) as server, httpx.Client(base_url=server.base_url) as http:
        client = AgentGymClient(http, "id")
        own = http.post("/sessions", json={}).json()["session_id"]
        seen_alone, deadline = False, time.monotonic() + 30
        while time.monotonic() < deadline:
            open_now = http.get("/sessions").json()["sessions"]
            if not open_now:
                break
            seen_alone |= [s["compat_id"] for s in open_now] == [client.env_id]
            time.sleep(0.05)
        assert seen_alone and http.get("/health").json()["reaped"] == 2
        gone = client.post("step", {"action": "end"})["error"]
        assert gone == f"The id {client.env_id} is not valid: it was closed after 2 s idle (reaped); create a new env."
        reply = http.post(f"/sessions/{own}/step", json={"action": "end"})
        assert reply.status_code == 404 and "was reaped after 0.2 s idle (the server's --ttl)" in reply.json()["detail"]


def test_compat_ttl_is_the_operators_even_below_ttl_and_the_429_tells_both() -> None:
    app = create_app([GENERIC], ttl=600, compat_ttl=0.3, max_sessions=2)
    with ServerThread(app) as server, httpx.Client(base_url=server.base_url) as http:
        client = AgentGymClient(http, "id")
        own = http.post("/sessions", json={}).json()["session_id"]
        full = http.post("/sessions", json={})
        assert full.status_code == 429, full.text
        detail = full.json()["detail"]
        assert "idle sessions are closed after 600 s idle (--ttl)" in detail, detail
        assert "those made on AgentGym's /create after 0.3 s idle (--compat-ttl)" in detail, detail
        assert "the next is due in 0 s" in detail, detail  # the compat session, 0.3 s from now at most
        deadline = time.monotonic() + 30
        while len(app.state.manager.sessions) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(app.state.manager.sessions) == [own]  # the compat one went after 0.3 s; ours stays
        gone = client.post("step", {"action": "end"})["error"]
        assert "closed after 0.3 s idle (reaped)" in gone
        assert http.get(f"/sessions/{own}").status_code == 200

    never = create_app([GENERIC], ttl=0.5, compat_ttl=0, max_sessions=1)
    with ServerThread(never) as server, httpx.Client(base_url=server.base_url) as http:
        AgentGymClient(http, "id")
        time.sleep(1.5)  # three reaper rounds of the 0.5 s TTL
        (session,) = never.state.manager.sessions.values()
        assert session.ttl is None
        detail = http.post("/sessions", json={}).json()["detail"]
        assert "those made on AgentGym's /create never (--compat-ttl 0)" in detail, detail
        assert "none of the open ones will be closed for idleness" in detail, detail


def test_serve_takes_compat_ttl_and_shows_its_default(monkeypatch, capsys) -> None:
    import agentgym_envs.remote.server as server_module
    from agentgym_train.cli import main as cli

    with pytest.raises(SystemExit):
        cli(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--compat-ttl" in help_text and f"default: {compat.COMPAT_TTL:g}" in help_text, help_text
    given: dict[str, Any] = {}
    monkeypatch.setattr(server_module, "serve", lambda env_ids, host, port, **options: given.update(options))
    assert cli(["serve", GENERIC, "--compat-ttl", "90"]) == 0
    assert given["compat_ttl"] == 90.0 and given["ttl"] == 600.0
    assert cli(["serve", GENERIC]) == 0 and given["compat_ttl"] == compat.COMPAT_TTL
