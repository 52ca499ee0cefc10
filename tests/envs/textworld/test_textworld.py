"""TextWorld (`AgentGym/TextWorld-v0`): task ids and splits, the compile cache, commands, scoring, the expert.

Only the four easy games of test seed 0 (one per challenge; `test_registered.py` plays the first
three too) and one coin-collector game in a temporary cache are built here: about 2.5 s of CPU each.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import agentgym_envs
from agentgym_envs.textworld import games as G
from agentgym_envs.textworld import tasks as T
from agentgym_envs.textworld.env import TextWorldEnv
from agentgym_envs.textworld.prepare import split_tasks

EASY = [
    "cooking/recipe1+take1/0",
    "coin_collector/level5/0",
    "treasure_hunter/level5/0",
    "simple/dense+detailed/0",
]


@pytest.fixture(scope="module")
def env():
    env = TextWorldEnv()
    G.ensure(EASY, env.cache_root, workers=1)
    yield env
    env.close()


def _ram(env: TextWorldEnv) -> bytes:
    """The Z-machine's memory now (equal memory: the game has not moved)."""
    return env.session._frotz.get_state()[0].tobytes()


def _child_pids() -> list[int]:
    """Processes whose parent is this one (Linux /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                pids.append(int(entry))
    return pids


# ---- tasks ---------------------------------------------------------------------------------------
def test_task_ids_name_challenge_settings_and_seed() -> None:
    assert T.parse_task_id("cooking/recipe2+take2+open+go6/17") == ("cooking", "recipe2+take2+open+go6", 17)
    bad_ids = ["cooking/recipe9/1", "cooking/recipe1+take1/-1", "cooking/recipe1+take1/٣", "simple/dense+detailed", "x"]
    for bad in bad_ids:
        assert T.parse_task_id(bad) is None, bad
    assert T.parse_task_id("coin_collector/level5/" + "9" * 5000) is None
    assert T.category("treasure_hunter", "level21") == "treasure_hunter/hard"


def test_splits_are_fixed_disjoint_and_cover_every_challenge_and_difficulty() -> None:
    env = TextWorldEnv()
    test = env.tasks("test")
    assert len(test) == 300 and len(set(test)) == 300
    assert test[:4] == EASY  # round-robin over the challenges, easy first
    assert {T.category(*T.parse_task_id(t)[:2]) for t in test} == {f"{c}/{d}" for c in T.CHALLENGES for d in T.LEVELS}
    assert env.num_tasks("train") == 120_000 and env.task_at("train", 0) == "cooking/recipe1+take1/1000"
    assert not set(test) & set(env.tasks("train"))
    assert split_tasks("test", T.CHALLENGES, T.LEVELS, None) == test
    narrow = TextWorldEnv(challenges=["coin_collector"], difficulties="hard")
    assert narrow.tasks("test") == [f"coin_collector/level215/{seed}" for seed in range(25)]
    with pytest.raises(ValueError, match="unknown task_id"):
        narrow.reset(options={"task_id": "cooking/recipe1+take1/0"})
    with pytest.raises(ValueError, match="unknown TextWorld challenges"):
        TextWorldEnv(challenges=["zork"])


def test_generator_settings_follow_the_split() -> None:
    assert T.generator_settings("cooking", "recipe1+take1", "train")[1]["split"] == "train"
    assert T.generator_settings("cooking", "recipe3+take3+cook+cut+open+go9", "test") == (
        "tw-cooking",
        {"recipe": 3, "take": 3, "cook": True, "cut": True, "open": True, "go": 9, "split": "test", "recipe_seed": 0},
    )
    assert T.generator_settings("treasure_hunter", "level15", "test") == ("tw-treasure_hunter", {"level": 15})


# ---- the cache -----------------------------------------------------------------------------------
def test_concurrent_builders_build_a_game_once_and_reproduce_it(env: TextWorldEnv, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    task = "coin_collector/level5/0"
    results: list[list[dict]] = []
    builders = [threading.Thread(target=lambda: results.append(G.ensure([task], root))) for _ in range(2)]
    for builder in builders:
        builder.start()
    for builder in builders:
        builder.join()
    assert sorted(len(r) for r in results) == [0, 1]  # one process built it, the other waited and found it
    record = next(r for r in results if r)[0]
    assert record["generate_s"] > 0 and record["compile_s"] > 0
    entry = G.entry_path(root, task)
    assert sorted(p.name for p in entry.iterdir()) == ["game.json", "game.z8", "meta.json"]
    assert not [p for p in entry.parent.iterdir() if ".tmp-" in p.name]
    # the same task id gives the same game on every build (textworld's generator runs with a fixed hash seed),
    # whichever install built it: the knowledge base names the grammar folder of the textworld that generated
    # the game (an absolute path, read only while generating), so the shared cache may name another venv's
    shared = G.entry_path(env.cache_root, task)
    fresh, cached = (json.loads((folder / "game.json").read_text()) for folder in (entry, shared))
    assert fresh["KB"].pop("text_grammars_path").endswith("textworld_data/text_grammars")
    cached["KB"].pop("text_grammars_path")
    assert fresh == cached
    assert json.loads((entry / "meta.json").read_text())["walkthrough"][-1] == "take coin"
    assert G.ensure([task], root) == []  # built: nothing to do
    assert _child_pids() == []


# ---- playing -------------------------------------------------------------------------------------
def test_reset_shows_the_objective_and_lists_admissible_commands(env: TextWorldEnv) -> None:
    observation, info = env.reset(options={"task_id": "coin_collector/level5/0"})
    assert info["category"] == "coin_collector/easy" and info["split"] == "test" and info["max_score"] == 1
    assert info["instruction"] in observation and "-= " in observation  # the objective, then the first room
    assert "$$" not in observation and ">" not in observation  # no banner, no prompt or status line
    assert info["available_actions"] == sorted(info["available_actions"]) and "look" in info["available_actions"]
    again, _ = env.reset(options={"task_id": "coin_collector/level5/0"})
    assert again == observation


def test_check_available_actions_costs_no_move(env: TextWorldEnv) -> None:
    _, info = env.reset(options={"task_id": "cooking/recipe1+take1/0"})
    before = _ram(env)
    observation, reward, terminated, _, after = env.step("Check available actions")
    assert after["valid_action"] and reward == 0 and not terminated
    assert observation == "Available actions: " + ", ".join(info["available_actions"]) + "."
    assert _ram(env) == before


@pytest.mark.parametrize("action", ["quit", "restart", "undo", "save", "restore", "take", "go to kitchen", "xyzzy"])
def test_other_text_is_invalid_and_never_reaches_the_game(env: TextWorldEnv, action: str) -> None:
    env.reset(options={"task_id": "cooking/recipe1+take1/0"})
    before = _ram(env)
    observation, reward, terminated, truncated, info = env.step(action)
    assert not info["valid_action"] and reward == 0 and not (terminated or truncated)
    assert "check available actions" in observation
    assert _ram(env) == before


def test_commands_move_the_game_and_score_is_normalised(env: TextWorldEnv) -> None:
    observation, info = env.reset(options={"task_id": "simple/dense+detailed/0"})
    assert info["max_score"] == 7
    observation, reward, terminated, _, info = env.step("OPEN CHEST DRAWER.")  # any case, a final full stop
    assert info["valid_action"] and reward == pytest.approx(1 / 7) and not terminated
    assert "old key" in observation and "take old key from chest drawer" in info["available_actions"]


def test_a_lost_game_ends_the_episode_with_its_score(env: TextWorldEnv) -> None:
    env.reset(options={"task_id": "simple/dense+detailed/0"})
    expert = env.make_expert()
    observation, info, total = "", {}, 0.0
    while "put carrot on stove" not in info.get("available_actions", []):
        observation, reward, _, _, info = env.step(expert.act(observation, info))
        total += reward
    observation, reward, terminated, truncated, info = env.step("eat carrot")  # the food to cook
    assert terminated and not truncated and not info["success"]
    assert "You lost" in observation
    assert total + reward == pytest.approx(info["score"]) == pytest.approx(6 / 7)


@pytest.mark.parametrize("task_id", EASY)
def test_expert_wins_with_admissible_commands_and_return_equal_to_score(env: TextWorldEnv, task_id: str) -> None:
    observation, info = env.reset(options={"task_id": task_id})
    expert, total = env.make_expert(), 0.0
    for _ in range(100):
        action = expert.act(observation, info)
        assert action in info["available_actions"]
        observation, reward, terminated, truncated, info = env.step(action)
        total += reward
        if terminated or truncated:
            break
    assert info["success"] and terminated and not truncated
    assert total == pytest.approx(info["score"]) == pytest.approx(1.0)


@pytest.mark.parametrize("task_id", ["coin_collector/level5/0", "simple/dense+detailed/0", "treasure_hunter/level5/0"])
def test_expert_made_mid_episode_recovers_from_detours(env: TextWorldEnv, task_id: str) -> None:
    observation, info = env.reset(options={"task_id": task_id})
    rng = np.random.default_rng(0)
    for _ in range(6):  # wander: random admissible commands that do not end the game
        safe = [a for a in info["available_actions"] if not a.startswith(("eat", "take", "put"))]
        observation, _, terminated, _, info = env.step(str(rng.choice(safe)))
        assert not terminated
    expert = env.make_expert()
    for _ in range(60):
        observation, _, terminated, _, info = env.step(expert.act(observation, info))
        if terminated:
            break
    assert info["success"]


def test_show_actions_and_gym_make(env: TextWorldEnv) -> None:
    made = gym.make("AgentGym/TextWorld-v0", show_actions=True, challenges=["treasure_hunter"], difficulties=["easy"])
    observation, info = made.reset(options={"task_id": "treasure_hunter/level5/0"})
    assert observation.endswith("Available actions: " + ", ".join(info["available_actions"]) + ".")
    made.close()


def test_close_frees_the_z_machines_and_a_new_reset_starts_one() -> None:
    env = TextWorldEnv(pool_size=2)
    for task in EASY[:3]:
        env.reset(options={"task_id": task})
    assert env.session.machines == 2  # a bounded pool of Z-machines, one per recent game
    env.close()
    assert env.session.machines == 0
    env.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        env.step("look")
    observation, _ = env.reset(options={"task_id": EASY[0]})
    assert observation and env.session.machines == 1
    env.close()
    assert _child_pids() == []


def test_demo_config_has_the_babyai_demos_keys_and_its_env_serves_a_bounded_train_split() -> None:
    yaml = pytest.importorskip("yaml")
    configs = Path(agentgym_envs.__file__).parents[1] / "agentgym_train" / "configs"
    config = yaml.safe_load((configs / "textworld_demo.yaml").read_text())
    assert set(config) <= set(yaml.safe_load((configs / "babyai_demo.yaml").read_text()))  # keys the loader knows
    assert config["env_id"] == "AgentGym/TextWorld-v0"
    env = gym.make(config["env_id"], **config["env_kwargs"]).unwrapped
    assert len(env.tasks("train")) == 64 and len(env.tasks("test")) == 25
    assert env.split_of("coin_collector/level5/1063") == "train"
    assert env.split_of("coin_collector/level5/1064") is None
    with pytest.raises(ValueError, match="train_seeds must be an integer"):
        TextWorldEnv(train_seeds=0)


def test_reset_after_the_parsed_game_left_the_process_cache(env: TextWorldEnv) -> None:
    first, _ = env.reset(options={"task_id": EASY[1]})
    G._LOADED.clear()  # as when more than MAX_LOADED_GAMES games were played; the env still holds the Z-machine
    again, info = env.reset(options={"task_id": EASY[1]})
    assert again == first and env.step(info["available_actions"][0])[4]["valid_action"]


def test_games_parsed_in_parallel_threads_load_without_error(env: TextWorldEnv) -> None:
    # textworld's logic parser is not thread-safe; the rollout engine resets its envs in threads
    G._LOADED.clear()
    errors: list[BaseException] = []
    start = threading.Barrier(len(EASY))

    def load(task_id: str) -> None:
        start.wait()
        try:
            G.load(task_id, env.cache_root)
        except Exception as error:  # collected: an exception in a thread would not fail the test
            errors.append(error)

    threads = [threading.Thread(target=load, args=(task_id,)) for task_id in EASY]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and all(G.entry_path(env.cache_root, t).as_posix() in G._LOADED for t in EASY)
