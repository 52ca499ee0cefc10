"""Does the trainer make a real instruct model better on a task of several turns? SmolLM2-135M-Instruct on TextCraft.

    python benchmarks/real_model_textcraft.py [--name NAME] [--depths 1 2] [--expert-turns 3 4] [--max-turns 6]
        [--eval-episodes-per-task 1] [--sft-steps 2] [--rl-steps 8] ...

The stages, intervals and results file of `real_model_learning.py` (see its doc; `--out` is
`results/real_model_textcraft.json` here), on TextCraft goals that take several turns: the project's
`TextCraftEnv` with only the system prompt replaced by a short one (the scenario's own is ~230
tokens) and its tasks restricted to the goals of crafting depth in `--depths` whose expert plan (from
an empty inventory, with the goal's first shallowest recipe variants) takes `--expert-turns` turns:
`get` each base item, then craft. Depth 1 alone is mostly 2 turns (get one item, craft it); depth 2
goals take 3-12. The defaults keep 3-4 turns: 21 held-out test goals (of the 100 of the test split)
and 127 train goals. The env is registered here as `AgentGym/TextCraft-D<depths>-T<lo>-<hi>-Brief-v0`;
observations are the env's own (crafting commands with up to 10 distractors, then the goal).

The scripted player of the SFT data is the env's expert (`make_expert`), which replans from the
inventory each turn; with probability `--sft-noise` a turn takes instead a uniformly random one of the
episode's candidate actions: the listed crafting commands, `get <m> <item>` for each ingredient
of a listed command, and `inventory`. The random reference policy takes such an action every turn.

Measured on the default goals (seed 0): the expert solves all, in 3.6 turns on average (test: 8 goals
in 3 turns, 13 in 4; train: at most 6, on one goal whose listed recipe variant differs from the first);
the random policy solves none of the 21 test goals in 6 turns (3 seeds) and 0-2.4% of the train goals
in 8; the expert with noise 0.5 (the SFT default here: 0.47 on train goals, like the BabyAI run's
demonstrator) solves 0.67 of the test goals in 6 turns. Costs at one torch thread, in CPU seconds: a
zero-shot episode (6 replies of 32 tokens) ~13, an SFT step of 8 episodes ~55, a GRPO step of 8
episodes ~110-170 (estimated from smaller ones): with `--rl-steps 8` a setting takes 27-40 minutes.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import gymnasium as gym
from real_model_learning import make_parser, run

from agentgym_envs.textcraft import tasks as T
from agentgym_envs.textcraft.env import TextCraftEnv
from agentgym_envs.textcraft.expert import plan_actions
from agentgym_train.evaluation.evaluate import Estimate, estimate
from agentgym_wrappers import MultiTurnWrapper

BRIEF_PROMPT = (
    "You are crafting an item in Minecraft from a list of crafting commands. Each turn, reply with one "
    "line 'Action: <action>': 'get <n> <item>' for an item that no command crafts, or a crafting command.\n"
    "Example: Action: get 1 lapis lazuli"
)
DEFAULT_OUT = Path(__file__).parent / "results" / "real_model_textcraft.json"


class BriefTextCraftEnv(TextCraftEnv):
    """The project's TextCraft env with a short system prompt, on the goals whose expert plan takes
    `expert_turns` (lowest, highest) turns."""

    system_prompt = BRIEF_PROMPT

    def __init__(self, depths: tuple[int, ...], expert_turns: tuple[int, int], **kwargs: Any) -> None:
        super().__init__(depths=depths, **kwargs)
        low, high = expert_turns
        self._task_lists = {
            split: [goal for goal in goals if low <= len(plan_actions(self.book, goal, {})) <= high]
            for split, goals in self._task_lists.items()
        }

    def split_of(self, task_id: str) -> str | None:
        split = super().split_of(task_id)
        return split if split is not None and task_id in self._task_lists[split] else None


def register_brief(depths: tuple[int, ...], expert_turns: tuple[int, int]) -> str:
    """Register `AgentGym/TextCraft-D<depths>-T<lo>-<hi>-Brief-v0` (once) and return its id."""
    env_id = f"AgentGym/TextCraft-D{''.join(map(str, depths))}-T{expert_turns[0]}-{expert_turns[1]}-Brief-v0"
    if env_id not in gym.registry:
        kwargs = {"depths": depths, "expert_turns": expert_turns}
        gym.register(id=env_id, entry_point=BriefTextCraftEnv, kwargs=kwargs)
    return env_id


def candidate_actions(observation: str) -> list[str]:
    """The random actions of an episode, from its first observation: each listed crafting command,
    `get <m> <item>` for each ingredient of one, and `inventory`."""
    commands = [line for line in observation.splitlines() if line.startswith("craft ")]
    gets = {f"get {part.strip()}" for line in commands for part in line.split(" using ", 1)[1].split(",")}
    return [*commands, *sorted(gets), "inventory"]


def play_expert(
    env_id: str, split: str, task_ids: list[str], max_turns: int, seed: int, noise: float
) -> list[dict[str, Any]]:
    """Play the env's expert on `task_ids` (each turn, with probability `noise`, a uniformly random
    candidate action instead); return each episode's chat, success, turns and task id."""
    rng = random.Random(seed)
    env = MultiTurnWrapper(gym.make(env_id), max_turns=max_turns)
    out = []
    try:
        for task_id in task_ids:
            observation, info = env.reset(seed=seed, options={"split": split, "task_id": task_id})
            expert = env.unwrapped.make_expert()
            candidates = candidate_actions(observation)
            while True:
                action = rng.choice(candidates) if rng.random() < noise else expert.act(observation, info)
                observation, _, terminated, truncated, info = env.step(f"Action: {action}")
                if terminated or truncated:
                    break
            episode = {"task_id": task_id, "success": bool(info.get("success")), "turns": env.turns}
            out.append({**episode, "chat": env.messages[:-1]})
    finally:
        env.close()
    return out


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0], DEFAULT_OUT)
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 2], choices=T.DEPTHS, help="crafting depths")
    parser.add_argument(
        "--expert-turns", type=int, nargs=2, default=[3, 4], metavar=("LOW", "HIGH"), help="the goals' expert turns"
    )
    # replies of up to 23 tokens (`Action: craft ...`); the 6-turn sequence after the prompt: ~150-300 tokens
    parser.set_defaults(max_turns=6, max_turn_tokens=32, max_completion_length=512, sft_noise=0.5)
    parser.set_defaults(eval_tasks=None, work="/tmp/real_model_textcraft")
    args = parser.parse_args()
    env_id = register_brief(tuple(args.depths), tuple(args.expert_turns))

    def play(split: str, task_ids: list[str], max_turns: int, seed: int, noise: float) -> list[dict[str, Any]]:
        return play_expert(env_id, split, task_ids, max_turns, seed, noise)

    def random_policy(held_out: list[str]) -> Estimate:
        return estimate([float(p["success"]) for p in play("test", held_out, args.max_turns, args.eval_seed, 1.0)])

    run(args, env_id, BRIEF_PROMPT, play, random_policy)


if __name__ == "__main__":
    main()
