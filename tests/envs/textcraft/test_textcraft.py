"""TextCraft: recipe data and depths, each crafting rule, lenient names, splits, distractors, expert."""

from __future__ import annotations

import hashlib
import re

import gymnasium as gym
import pytest
from helpers import expert_rollout

from agentgym_envs.textcraft import tasks as T
from agentgym_envs.textcraft.env import TextCraftEnv
from agentgym_envs.textcraft.expert import plan_actions
from agentgym_envs.textcraft.names import ItemNameError, _number_forms, normalise
from agentgym_envs.textcraft.recipes import load_recipe_book
from agentgym_wrappers import MultiTurnWrapper

BOOK = load_recipe_book()


def make(env_id: str = "AgentGym/TextCraft-v0", **kwargs) -> TextCraftEnv:
    return gym.make(env_id, **kwargs).unwrapped


def started(goal: str = "wooden_pickaxe", seed: int = 0) -> TextCraftEnv:
    env = make()
    env.reset(seed=seed, options={"task_id": goal})
    return env


def step(env: TextCraftEnv, action: str) -> tuple[str, float, bool, dict]:
    observation, reward, terminated, truncated, info = env.step(action)
    assert not truncated
    return observation, reward, terminated, info


# ---- data ---------------------------------------------------------------------------------------
def test_recipe_book_is_minecraft_1_16_5_loaded_once_per_process() -> None:
    assert load_recipe_book() is BOOK
    assert make().book is make("AgentGym/TextCraft-Depth2-v0").book is BOOK
    # 562 items and 1,198 variants in minecraft-data; 15 unpacking/cycle variants are left out.
    assert len(BOOK.recipes) + len(BOOK.excluded) == 1198
    assert len({r.output for r in BOOK.recipes} | {r.output for r in BOOK.excluded}) == 562
    assert (len(BOOK.recipes), len(BOOK.by_output), len(BOOK.base_items)) == (1183, 551, 114)
    assert {"lapis_lazuli", "iron_ingot", "gold_ingot", "diamond", "oak_log", "honey_bottle"} <= BOOK.base_items
    assert BOOK.is_craftable("iron_nugget") and BOOK.is_craftable("iron_block")


def test_depth_is_the_longest_chain_along_the_shortest_recipe() -> None:
    assert BOOK.depth["lapis_lazuli"] == 0
    assert BOOK.depth["stick"] == 1  # 2 bamboo; from planks it would be 2
    assert BOOK.depth["oak_planks"] == 1
    assert BOOK.depth["blue_dye"] == 1
    assert BOOK.depth["wooden_pickaxe"] == 2
    assert BOOK.depth["polished_granite_slab"] == 4  # diorite -> granite -> polished granite -> slab
    for item, variants in BOOK.by_output.items():
        assert BOOK.depth[item] == min(1 + max(BOOK.depth[i] for i, _ in r.ingredients) for r in variants)


# ---- rules --------------------------------------------------------------------------------------
def test_get_adds_base_items_and_inventory_lists_them() -> None:
    env = started()
    assert step(env, "inventory")[0] == "Inventory: You are not carrying anything."
    observation, reward, terminated, info = step(env, "get 2 lapis lazuli")
    assert (observation, reward, terminated, info["valid_action"]) == ("Got 2 lapis lazuli", 0.0, False, True)
    step(env, "get 1 oak log")
    assert step(env, "inventory")[0] == "Inventory: [lapis lazuli] (2) [oak log] (1)"
    assert env.inventory == {"lapis_lazuli": 2, "oak_log": 1}


def test_get_of_a_craftable_or_unknown_item_is_refused() -> None:
    env = started()
    for action, reason in [
        ("get 1 stick", "not a base item"),
        ("get 4 oak planks", "not a base item"),
        ("get 1 bedrock", "no recipe uses it"),
        ("get 1 planks", "not a Minecraft item (similar items: acacia planks"),
        ("get 0 oak log", "between 1 and 1000"),
        ("get 1001 oak log", "between 1 and 1000"),
    ]:
        observation, reward, terminated, info = step(env, action)
        assert reason in observation and not info["valid_action"] and reward == 0 and not terminated
    assert env.inventory == {}


def test_craft_yields_the_recipe_output_count_and_consumes_ingredients() -> None:
    env = started()
    step(env, "get 2 oak log")
    observation, _, _, info = step(env, "craft 4 oak planks using 1 oak log")
    assert observation == "Crafted 4 minecraft:oak_planks" and info["valid_action"]
    # the number before the item is not checked: one craft makes one batch
    assert step(env, "craft 1 oak planks using 1 oak log")[0] == "Crafted 4 minecraft:oak_planks"
    assert step(env, "craft 4 stick using 2 oak planks")[0] == "Crafted 4 minecraft:stick"
    assert env.inventory == {"oak_planks": 6, "stick": 4}


def test_cake_hands_back_its_buckets() -> None:
    env = started("cake")
    gets = ["get 3 milk bucket", "get 1 egg", "get 3 wheat", "get 2 sugar cane"]
    for action in [*gets, "craft 1 sugar using 1 sugar cane", "craft 1 sugar using 1 sugar cane"]:
        assert step(env, action)[3]["valid_action"]
    observation, reward, terminated, info = step(env, "craft 1 cake using 3 milk bucket, 2 sugar, 1 egg, 3 wheat")
    assert observation == "Crafted 1 minecraft:cake and got back 3 bucket"
    assert env.inventory == {"cake": 1, "bucket": 3} and reward == 1 and terminated and info["success"]


def test_wrong_ingredient_count_is_refused() -> None:
    env = started()
    step(env, "get 1 oak log")
    step(env, "craft 4 oak planks using 1 oak log")
    observation, reward, _, info = step(env, "craft 4 stick using 3 oak planks")
    assert "wrong ingredient counts; the recipe takes 2 oak planks, not 3 oak planks" in observation
    assert not info["valid_action"] and reward == 0
    observation, _, _, info = step(env, "craft 4 stick using 1 oak planks, 1 oak planks")  # adds up to 2
    assert observation == "Crafted 4 minecraft:stick" and info["valid_action"]
    assert env.inventory == {"oak_planks": 2, "stick": 4}


def test_wrong_or_missing_ingredients_are_refused_with_the_reason() -> None:
    env = started()
    step(env, "get 1 oak log")
    for action, reason in [
        ("craft 4 stick using 2 oak planks", "missing 2 oak planks (you have 0)"),
        ("craft 4 stick using 2 oak log", "no recipe for stick uses exactly these ingredients"),
        ("craft 4 stick using 2 oak planks, 1 oak log", "no recipe for stick uses exactly these ingredients"),
        ("craft 4 stick using oak planks", "write each ingredient as '<count> <item>'"),
        ("craft 4 stick using 2 planks", "ingredient 'planks' is not a Minecraft item"),
        ("craft 1 wooden sword using 2 oak planks, 1 stick", "missing 2 oak planks (you have 0), 1 stick (you have 0)"),
    ]:
        observation, reward, _, info = step(env, action)
        assert reason in observation, (action, observation)
        assert not info["valid_action"] and reward == 0
    assert env.inventory == {"oak_log": 1}


def test_a_base_item_cannot_be_crafted() -> None:
    env = started()
    step(env, "get 1 oak log")
    for action in ["craft 9 lapis lazuli using 1 lapis block", "craft 4 oak log using 1 oak log"]:
        observation, _, _, info = step(env, action)
        assert "it is a base item; use 'get 1" in observation and not info["valid_action"]
    # the unpacking recipe is not in the book even when the block is held
    step(env, "get 9 lapis lazuli")
    assert step(env, "craft 1 lapis block using 9 lapis lazuli")[0] == "Crafted 1 minecraft:lapis_block"
    assert "base item" in step(env, "craft 9 lapis lazuli using 1 lapis block")[0]
    assert step(env, "craft 1 bedrock using 1 stone")[0] == "Could not craft bedrock: no crafting recipe makes it."


def test_any_recipe_variant_crafts_not_only_the_listed_one() -> None:
    env = started("wooden_pickaxe")
    listed = env.needed_recipes["wooden_pickaxe"]
    other = next(r for r in BOOK.by_output["wooden_pickaxe"] if r != listed)
    planks = other.ingredients[0][0]
    for action in [f"get 1 {planks.replace('_planks', '_log')}", "get 4 bamboo"] + ["craft 1 stick using 2 bamboo"] * 2:
        step(env, action)
    assert step(env, f"craft 4 {planks} using 1 {planks.replace('_planks', '_log')}")[3]["valid_action"]
    observation, reward, terminated, info = step(env, other.command)
    assert observation == "Crafted 1 minecraft:wooden_pickaxe" and reward == 1 and terminated and info["success"]


def test_goal_reward_once_and_return_equals_score() -> None:
    env = make()
    rollout = expert_rollout(env, options={"task_id": "blue_dye"})
    assert rollout["actions"] in (
        ["get 1 lapis lazuli", "craft 1 blue dye using 1 lapis lazuli"],
        ["get 1 cornflower", "craft 1 blue dye using 1 cornflower"],
    )
    assert rollout["observations"][-1] == "Crafted 1 minecraft:blue_dye"
    assert rollout["rewards"] == [0.0, 1.0] and rollout["terminated"] and rollout["info"]["score"] == 1.0


def test_paper_style_replies_through_the_multi_turn_wrapper() -> None:
    env = MultiTurnWrapper(gym.make("AgentGym/TextCraft-v0"))
    env.reset(seed=0, options={"task_id": "blue_dye"})
    assert env.max_turns == 30 and "Action: get 1 lapis lazuli" in env.messages[0]["content"]
    assert env.step("Lapis lazuli is a base item.\nAction: get 1 lapis lazuli")[0] == "Got 1 lapis lazuli"
    observation, reward, terminated, _, info = env.step("Action: craft 1 blue dye using 1 lapis lazuli")
    assert observation == "Crafted 1 minecraft:blue_dye" and reward == 1 and terminated
    assert info["episode"]["turns"] == 2 and info["episode"]["success"]


def test_unknown_commands_explain_the_actions() -> None:
    env = started()
    for action in ["look around", "craft", "get", "", "\x1b[31mget"]:
        observation, reward, terminated, info = step(env, action)
        assert observation.startswith("Could not execute") and "'get <n> <item>'" in observation
        assert not info["valid_action"] and reward == 0 and not terminated
    assert "\x1b" not in step(env, "\x1b[31m get 1 x")[0]


# ---- names --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "item"),
    [
        ("Lapis Lazuli", "lapis_lazuli"),
        ("minecraft:lapis_lazuli", "lapis_lazuli"),
        ("MINECRAFT:Blue_Dye", "blue_dye"),
        ("  oak   planks ", "oak_planks"),
        ("oak plank", "oak_planks"),
        ("sticks", "stick"),
        ("torches", "torch"),
        ("iron bar", "iron_bars"),
        ("bricks", "bricks"),  # an exact name wins over the plural of "brick"
        ("brick", "brick"),
        ("nether bricks", "nether_bricks"),
        ("block of iron", "iron_block"),  # the in-game display name
        ("redstone dust", "redstone"),
    ],
)
def test_lenient_names(text: str, item: str) -> None:
    assert BOOK.names.resolve(text) == item


def test_lenient_names_in_commands() -> None:
    env = started("blue_dye")
    assert step(env, "Get 1 Minecraft:Lapis_Lazuli.")[0] == "Got 1 lapis lazuli"
    observation, reward, terminated, _ = step(env, "craft 1 minecraft:blue_dye using 1 lapis lazulis")
    assert observation == "Crafted 1 minecraft:blue_dye" and reward == 1 and terminated


def test_lenient_names_are_never_wrong() -> None:
    """Every item's name in every accepted spelling resolves to that item, or to another item whose exact
    name that spelling is (`brick`/`bricks`), or is refused; never to a third item."""
    exact = {normalise(item): item for item in BOOK.names.items}
    for item in BOOK.names.items:
        key = normalise(item)
        spellings = [item, f"minecraft:{item}", key.upper(), key.title(), *_number_forms(key)]
        for text in spellings:
            try:
                found = BOOK.names.resolve(text)
            except ItemNameError:
                continue
            assert found == item or found == exact.get(normalise(text)), (text, found)
    for text in ["planks", "wood", "ingot", "", "minecraft:"]:
        with pytest.raises(ItemNameError):
            BOOK.names.resolve(text)


# ---- tasks, observation, distractors --------------------------------------------------------------
def test_test_split_is_fixed_and_stratified_by_depth() -> None:
    env = make()
    test, train = env.tasks("test"), env.tasks("train")
    assert len(test) == 100 and len(train) == 451 and not set(test) & set(train)
    assert set(test) | set(train) == set(BOOK.by_output)  # every craftable item is a goal of depth 1-4
    for depth, quota in T.TEST_PER_DEPTH.items():
        assert sum(BOOK.depth[g] == depth for g in test) == quota
    assert hashlib.sha256(" ".join(test).encode()).hexdigest()[:16] == "ef8065ef5004a68b"
    depth3 = make("AgentGym/TextCraft-Depth3-v0")
    assert depth3.tasks("test") == [g for g in test if BOOK.depth[g] == 3]
    with pytest.raises(ValueError, match="unknown task_id 'stick'"):  # depth 1
        depth3.reset(options={"task_id": "stick"})
    with pytest.raises(ValueError, match="belongs to split 'train'"):
        env.reset(options={"task_id": train[0], "split": "test"})


def test_reset_observation_lists_needed_recipes_and_goal() -> None:
    env = make()
    observation, info = env.reset(seed=3, options={"task_id": "lectern"})
    head, goal = observation.split("\n\n")
    assert goal == "Goal: craft lectern." and head.startswith("Crafting commands:\n")
    lines = head.splitlines()[1:]
    plan = env.needed_recipes
    assert {r.command for r in plan.values()} <= set(lines)
    assert len(lines) - len(plan) <= 10 and len(lines) == len(set(lines))
    assert all(re.fullmatch(r"craft \d+ [a-z' ]+ using \d+ [a-z' ]+(, \d+ [a-z' ]+)*", line) for line in lines)
    assert (info["category"], info["instruction"], info["depth"], info["goal"]) == (
        "depth-4",
        "craft lectern",
        4,
        "lectern",
    )
    # the listed recipes form a tree of the goal's depth, down to base items
    for item, recipe in plan.items():
        assert BOOK.recipe_depth(recipe) == BOOK.depth[item]
        assert all(i in plan or BOOK.is_base(i) for i, _ in recipe.ingredients)


def test_distractors_are_seeded_and_unneeded() -> None:
    env = make()
    first = env.reset(seed=11, options={"task_id": "wooden_pickaxe"})[0]
    assert env.reset(seed=11, options={"task_id": "wooden_pickaxe"})[0] == first
    lists = {env.reset(seed=s, options={"task_id": "wooden_pickaxe"})[0] for s in range(20)}
    assert len(lists) > 10
    for seed in range(20):
        observation, _ = env.reset(seed=seed, options={"task_id": "piston"})
        plan = env.needed_recipes
        distractors = [
            line for line in observation.splitlines()[1:-2] if line not in {r.command for r in plan.values()}
        ]
        assert len(distractors) == 10
        used = set(plan) | {i for r in plan.values() for i, _ in r.ingredients}
        by_command = {r.command: r for r in BOOK.recipes}
        for line in distractors:
            recipe = by_command[line]
            assert recipe.output not in plan and any(i in used for i, _ in recipe.ingredients)
    assert make(max_distractors=0).reset(seed=0, options={"task_id": "blue_dye"})[0].count("\ncraft") == 1


# ---- expert -------------------------------------------------------------------------------------
def _solves(env: TextCraftEnv, goal: str, seed: int) -> bool:
    rollout = expert_rollout(env, seed=seed, options={"task_id": goal}, max_turns=60)
    return rollout["info"]["success"] and rollout["terminated"] and sum(rollout["rewards"]) == 1.0


def test_expert_solves_the_whole_test_split() -> None:
    env = make()
    failed = [goal for i, goal in enumerate(env.tasks("test")) if not _solves(env, goal, seed=i)]
    assert failed == []


def test_expert_solves_the_whole_train_split() -> None:
    env = make()
    failed = [goal for i, goal in enumerate(env.tasks("train")) if not _solves(env, goal, seed=i)]
    assert failed == []


def test_expert_plans_within_the_paper_horizon() -> None:
    lengths = [len(plan_actions(BOOK, goal, {})) for goal in BOOK.by_output]
    assert max(lengths) <= 30


def test_expert_finishes_an_episode_an_agent_started() -> None:
    env = started("wooden_pickaxe", seed=5)
    for action in ["get 3 oak log", "craft 4 oak planks using 1 oak log", "get 1 bamboo", "get 1 lapis lazuli"]:
        step(env, action)
    expert = env.make_expert()
    info: dict = {}
    for _ in range(20):
        observation, reward, terminated, info = step(env, expert.act("", info))
        assert info["valid_action"], observation
        if terminated:
            break
    assert info["success"] and reward == 1.0
