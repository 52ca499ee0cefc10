"""AgentGym's TextCraft server (agentenv-textcraft) on AgentGym's routes, with its custom tasks.

`/create` may name a task of its own: `commands` (the crafting commands shown) and `goal`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentgym_envs.remote.dialects.agentgym.base import OVER, RESET_SEED, Dialect
from agentgym_envs.remote.wire import ApiError, bounded

if TYPE_CHECKING:
    from agentgym_envs.remote.server.session import Session


class TextCraftDialect(Dialect):
    """agentenv-textcraft: goals by depth, `i % n` (wraps); `/create` may name a custom task."""

    name = "TextCraft"
    create_fields = frozenset({"commands", "goal"})
    ignored_fields = frozenset({"minecraft_dir"})
    create_reset = "id"

    def options(self, session: Session, index: int) -> dict[str, Any]:
        from agentgym_envs.textcraft.tasks import split_tasks

        depths = session.env.unwrapped.depths
        by_depth = [sorted(goal for split in split_tasks().values() for goal in split[d]) for d in sorted(depths)]
        goals = [goal for goals in by_depth for goal in goals]
        return {"task_id": goals[index % len(goals)]}

    def created(self, session: Session) -> Any:
        return {"id": session.compat_id, "observation": session.observation, "done": False, "reward": 0}

    def reset(self, session: Session) -> Any:
        return self.created(session)

    def step(self, session: Session, step: dict[str, Any]) -> Any:
        done = step["terminated"] or step["truncated"]
        return {"observation": step["observation"], "reward": step["reward"], "done": done}

    def over(self, session: Session) -> Any:
        return {"observation": OVER, "reward": 0.0, "done": True}

    def custom_task(self, body: dict[str, Any]) -> tuple[str, str] | None:
        return textcraft_task(body)

    def reset_custom(self, session: Session, *task: Any) -> None:
        reset_custom_task(session, *task)


MAX_COMMANDS_CHARS = 8_000
MAX_COMMAND_LINES = 64
MAX_COMMAND_LINE_CHARS = 300
MAX_INGREDIENTS = 9


def textcraft_task(fields: dict[str, Any]) -> tuple[str, str] | None:
    """The goal item and the checked command lines of TextCraft's `/create` body; None when it names none.

    Raises ApiError 422 for a body that names half a task or holds anything but bounded crafting commands
    (`craft <n> <item> using <n> <item>, ...`, items of the recipe book) and a goal item. Linear in the input.
    """
    commands, goal = fields.get("commands"), fields.get("goal")
    if commands is None and goal is None:
        return None
    if not isinstance(commands, str) or not isinstance(goal, str):
        raise ApiError(422, "a custom TextCraft task needs both 'commands' and 'goal' as strings", "ValueError")
    if len(commands) > MAX_COMMANDS_CHARS or len(goal) > 100:
        raise ApiError(
            422,
            f"custom TextCraft task too large: commands may hold {MAX_COMMANDS_CHARS:,} characters "
            f"(got {len(commands):,}), the goal 100 (got {len(goal):,})",
            "ValueError",
        )
    from agentgym_envs.textcraft.names import ItemNameError
    from agentgym_envs.textcraft.recipes import load_recipe_book

    book = load_recipe_book()

    def item(text: str, where: str) -> str:
        try:
            return book.names.resolve(text.strip())
        except ItemNameError as error:
            raise ApiError(422, f"{where}: {bounded(text.strip(), 60)!r} is {error}", "ValueError") from error

    lines = [line.strip() for line in commands.splitlines() if line.strip()]
    if not lines or len(lines) > MAX_COMMAND_LINES:
        raise ApiError(422, f"commands must hold 1 to {MAX_COMMAND_LINES} crafting commands, got {len(lines)}")
    for number, line in enumerate(lines, 1):
        where = f"crafting command {number}"
        output, using, ingredients = line.removeprefix("craft ").partition(" using ")
        parts = ingredients.split(",")
        if len(line) > MAX_COMMAND_LINE_CHARS or not line.startswith("craft ") or not using:
            raise ApiError(
                422,
                f"{where} must read 'craft <n> <item> using <n> <item>, ...' in at most {MAX_COMMAND_LINE_CHARS} "
                f"characters, got {bounded(line, 80)!r}",
                "ValueError",
            )
        if len(parts) > MAX_INGREDIENTS:
            raise ApiError(422, f"{where} lists {len(parts)} ingredients; a recipe takes at most {MAX_INGREDIENTS}")
        for part in [output, *parts]:
            count, _, name = part.strip().partition(" ")
            if not (count.isascii() and count.isdigit() and len(count) <= 3 and name):
                raise ApiError(422, f"{where}: write each item as '<count> <item>', got {bounded(part, 60)!r}")
            item(name, where)
    goal_item = item(goal.strip().removeprefix("minecraft:").replace("_", " "), "goal")
    return goal_item, "\n".join(lines)


def reset_custom_task(session: Session, goal: str, commands: str) -> None:
    """Start the task of goal `goal` and show `commands` as its crafting commands (on the session's thread)."""
    from agentgym_envs.textcraft.names import display_name

    env = session.env.unwrapped
    if env.split_of(goal) is None:
        raise ApiError(
            422, f"goal {display_name(goal)!r} is not a TextCraft task of this server (depths {list(env.depths)})"
        )
    session.do_reset(RESET_SEED, {"task_id": goal})
    # Crafting checks the recipe book, not the list shown (as in AgentGym's TextCraft): only the text changes.
    session.observation = f"Crafting commands:\n{commands}\n\nGoal: craft {display_name(goal)}."
