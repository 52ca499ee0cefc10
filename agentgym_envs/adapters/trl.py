"""Every scenario as an environment of TRL's `GRPOTrainer(environment_factory=...)`.

TRL makes one environment object per rollout with the factory, calls `reset(**row)` with the
dataset row (the returned text is appended to the row's last user message), offers the object's
public methods to the model as tools (their names, typed signatures and docstrings become the tool
schema), and scores a finished rollout with `get_reward()`. Here:

- `reset(**row)` starts the task a row names: `task_id` (an id or an index), `split` and `seed`
  (every key optional; other keys such as `prompt` are ignored) and returns the first observation.
- The tools are verbs where a scenario's actions read well as calls: BabyAI `go_to(object)`,
  `pick_up(object)`, `go_through(door)`, `turn_left()`, ...; TextCraft `get(count, item)`,
  `craft(count, item, ingredients)`, `inventory()`; Deep Search `search(query)`, `answer(text)`.
  Other scenarios (SciWorld, WebArena, TextWorld) take their action text with `act(action)`.
  Each tool returns the observation; once the episode ended it says so and changes nothing.
- `get_reward()` is the episode's score so far (its return, in [0, 1]).

`trl` is imported by nothing here: the objects only need to look like what TRL expects.

Example:
    >>> make_env = environment_factory("AgentGym/TextCraft-v0")
    >>> env = make_env()
    >>> observation = env.reset(split="test", task_id=0)
    >>> env.inventory()
    'Inventory: You are not carrying anything.'
    >>> env.get_reward()
    0.0
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from agentgym_envs.core import task_rows

#: How to play through tools, after a scenario's instructions in the system message of `dataset_rows`.
TOOL_NOTE = "Act by calling the tools you are given, one call per turn; each tool answers with what you observe next."


class TextEnvTools:
    """A text env played through tool calls; the base of every scenario's tools (`act(action)`).

    Args:
        env_id: A registered id, e.g. `AgentGym/SciWorld-v0`.
        env_kwargs: Constructor kwargs of the env.
        max_turns: Tool calls allowed per episode (None: the scenario's `default_max_turns`).
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None = None, max_turns: int | None = None):
        import agentgym_envs  # noqa: F401  (registers the ids)

        self._env = gym.make(env_id, **(env_kwargs or {}))
        base = self._env.unwrapped
        self._max_turns = max_turns if max_turns is not None else getattr(base, "default_max_turns", None)
        self._info: dict[str, Any] = {}
        self._turns = 0
        self._done = True

    def reset(self, **row: Any) -> str:
        """Start the task of a dataset row (`task_id`, `split`, `seed`, all optional); return its first observation."""
        options = {key: row[key] for key in ("task_id", "split") if row.get(key) is not None}
        observation, self._info = self._env.reset(seed=row.get("seed"), options=options or None)
        self._turns, self._done = 0, False
        return observation

    def get_reward(self) -> float:
        """The episode's score so far, in [0, 1]."""
        return float(self._info.get("score", 0.0))

    def _act(self, action: str) -> str:
        if self._done:
            return "The episode is over; no further actions are carried out."
        observation, _, terminated, truncated, self._info = self._env.step(action)
        self._turns += 1
        if not (terminated or truncated) and self._max_turns is not None and self._turns >= self._max_turns:
            truncated = True
        if terminated or truncated:
            self._done = True
            outcome = "success" if self._info.get("success") else "no success"
            observation += f"\n[The episode is over: {outcome}, score {self.get_reward():.2f}.]"
        return observation

    #: The scenario in words for the system message (None: the scenario's own system prompt, with its action format).
    instructions: str | None = None

    def _close(self) -> None:
        """Free the env's backend (a JVM, a browser); private, since TRL offers every public method as a tool."""
        self._env.close()


class ActTools(TextEnvTools):
    """Scenarios whose actions are free text (SciWorld, WebArena, TextWorld): one tool, `act`, whose argument
    is the text the scenario's instructions would have the model write after 'Action:'."""

    def act(self, action: str) -> str:
        """Carry out one action in the environment and return what you observe next.

        Args:
            action: The action text, in the form the task's instructions give (e.g. "open door to kitchen").
        """
        return self._act(action)


class BabyAITools(TextEnvTools):
    """BabyAI's actions as verbs."""

    instructions = (
        "You are an agent in a grid world of rooms with keys, balls, boxes and doors. Carry out the mission. "
        "Objects are named as the observation lists them, e.g. 'red ball 1' (the nearest red ball)."
    )

    def go_to(self, object: str) -> str:
        """Walk to an object or door you can see.

        Args:
            object: The object as the observation names it, e.g. "red ball 1".
        """
        return self._act(f"go to {object}")

    def pick_up(self, object: str) -> str:
        """Walk to an object you can see and pick it up.

        Args:
            object: The object as the observation names it, e.g. "yellow key 1".
        """
        return self._act(f"pick up {object}")

    def go_through(self, door: str) -> str:
        """Walk through an open door you can see.

        Args:
            door: The door as the observation names it, e.g. "blue door 1".
        """
        return self._act(f"go through {door}")

    def toggle_and_go_through(self, door: str) -> str:
        """Open a closed door you can see and walk through it.

        Args:
            door: The door as the observation names it, e.g. "blue door 1".
        """
        return self._act(f"toggle and go through {door}")

    def turn_left(self) -> str:
        """Turn left where you stand."""
        return self._act("turn left")

    def turn_right(self) -> str:
        """Turn right where you stand."""
        return self._act("turn right")

    def move_forward(self) -> str:
        """Move one step forward."""
        return self._act("move forward")

    def drop(self) -> str:
        """Drop what you carry in front of you."""
        return self._act("drop")

    def toggle(self) -> str:
        """Open or close the door or box in front of you."""
        return self._act("toggle")

    def check_available_actions(self) -> str:
        """List the actions you can take now."""
        return self._act("check available actions")


class TextCraftTools(TextEnvTools):
    """TextCraft's actions as verbs."""

    instructions = (
        "You are crafting an item in Minecraft, starting with an empty inventory. Get base items (those no "
        "crafting command makes), then craft with exactly the ingredients and counts of a crafting command."
    )

    def get(self, count: int, item: str) -> str:
        """Take base items (items no crafting command makes).

        Args:
            count: How many to take.
            item: The item, e.g. "lapis lazuli".
        """
        return self._act(f"get {count} {item}")

    def craft(self, count: int, item: str, ingredients: str) -> str:
        """Craft an item with exactly the ingredients and counts of one of the crafting commands.

        Args:
            count: How many of the item the command makes, e.g. 1.
            item: The item to craft, e.g. "blue dye".
            ingredients: The command's ingredients with their counts, e.g. "1 lapis lazuli" or "2 stick, 3 iron ingot".
        """
        return self._act(f"craft {count} {item} using {ingredients}")

    def inventory(self) -> str:
        """Show what you hold."""
        return self._act("inventory")


class DeepSearchTools(TextEnvTools):
    """Deep Search's actions as verbs."""

    instructions = (
        "You answer questions by searching an encyclopedia: search as often as you need, one query per call, "
        "then give a short answer (a name, a year, a number), which ends the episode."
    )

    def search(self, query: str) -> str:
        """Search the encyclopedia; return the top passages.

        Args:
            query: What to search for, e.g. "Keldor Press founder".
        """
        return self._act(f"<search> {query} </search>")

    def answer(self, text: str) -> str:
        """Give the final answer to the question; this ends the episode.

        Args:
            text: A short answer: a name, a year, a number.
        """
        return self._act(f"<answer> {text} </answer>")


#: The tools of each scenario's env class (by class name); any other scenario gets `ActTools`.
TOOLS: dict[str, type[TextEnvTools]] = {
    "BabyAIEnv": BabyAITools,
    "TextCraftEnv": TextCraftTools,
    "DeepSearchEnv": DeepSearchTools,
}


def tools_class(env_id: str) -> type[TextEnvTools]:
    """The tools class for `env_id`'s scenario."""
    import agentgym_envs  # noqa: F401

    entry_point = gym.spec(env_id).entry_point
    name = entry_point.rpartition(":")[2] if isinstance(entry_point, str) else getattr(entry_point, "__name__", "")
    return TOOLS.get(name, ActTools)


def environment_factory(
    env_id: str, env_kwargs: dict[str, Any] | None = None, max_turns: int | None = None
) -> Callable[[], TextEnvTools]:
    """What `trl.GRPOTrainer(environment_factory=...)` takes: a callable that makes one env per rollout.

    Args:
        env_id: A registered id, e.g. `AgentGym/BabyAI-v0`.
        env_kwargs: Constructor kwargs of the env.
        max_turns: Tool calls allowed per episode (None: the scenario's `default_max_turns`).
    """
    cls = tools_class(env_id)

    def make() -> TextEnvTools:
        return cls(env_id, env_kwargs, max_turns)

    return make


def dataset_rows(
    env_id: str, split: str = "train", count: int | None = None, env_kwargs: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Rows for TRL's `train_dataset`: a chat prompt (the scenario's instructions, adapted to tools) and
    the `task_id`/`split` that `reset` starts, for the first `count` tasks of `split` (None: all).

    The first observation is not in the prompt: TRL appends what `reset` returns to the user message.
    """
    import agentgym_envs  # noqa: F401

    env = gym.make(env_id, **(env_kwargs or {}))
    try:
        base = env.unwrapped
        rows = task_rows(base, split, count)
        system = f"{tools_class(env_id).instructions or base.system_prompt}\n\n{TOOL_NOTE}"
    finally:
        env.close()
    prompt = [{"role": "system", "content": system}, {"role": "user", "content": ""}]
    return [{"prompt": prompt, "task_id": index, "split": split} for index, _ in rows]
