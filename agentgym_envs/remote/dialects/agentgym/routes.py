"""AgentGym's own env-server routes (`/create`, `/reset`, `/step`, `/observation`, `/close`), per scenario.

AgentGym's clients (`agentenv.envs.*EnvClient`, and AgentGym-RL's training, which drives them) talk to
one env server per scenario, and each of AgentGym's servers has its own dialect: the id field (`id`
or `env_idx`), how a reset names its task, what each reply holds, and how errors are answered
(most with HTTP 200 and `{"error": ...}`; the clients assert 200 and read the fields). The server
serves its first id on these routes in the dialect of that id's scenario:

- BabyAI (`id`): `/create` answers `{"id"}` without a reset. Index `i` is level `L[i % n]` with
  seed `i // n`, `L` the env's levels (AgentGym's 40, in its order, for `AgentGym/BabyAI-v0`): every
  index is a task, there is no end.
- TextCraft (`id`): `/create` resets to index `id`, or to the task its `commands` and `goal` name.
  Index `i` is goal `G[i % n]` (wraps), `G` the goals of the env's depths by depth, then name.
- SciWorld (`id`): `/create` answers `{"id"}` without a reset. Index `i` is `games[i]` (Python
  indexing): every variation of each task type in ScienceWorld's order, without 5-1, 5-2, 9-1, 9-2,
  9-3, 10-1 and 10-2. Past the end: `{"error": "list index out of range"}`.
- Deep Search, as SearchQA (`env_idx`): `/create {"id": i}` answers the bare id, reset to `i`.
  Index `i` runs over the test split, then train (Search-R1's files give AgentGym's 0..51,712 test,
  51,713.. train). Past the end: HTTP 500, "Item id i is out of range.".
- WebArena (`env_idx`): `/create` answers `{"env_idx"}`; `/reset {"idx": i}` starts WebArena task
  id `i` (`config_files/{i}.json`). An unknown id: `{"observation": "TimeoutError", ...}`. A step
  sends the model's whole reply; its first ```...``` block is the action, as AgentGym parses it.
- Any other env (`id`): `/create` resets to index 0; index `i` runs over every split's tasks in
  order and wraps.

A step after the episode ended answers 200 with what AgentGym's server sends then: BabyAI and
SciWorld `{"error": "The task with environment N has finished."}`; TextCraft, SearchQA and WebArena
step on (their servers do not check), so they get their usual fields with `done`/`terminated` true,
reward 0 and an observation that says the episode is over. An unknown or reaped id gets the
scenario's error reply with a message that says which (AgentGym's `"The id N is not valid."`).
Sessions made here stay idle up to `COMPAT_TTL` seconds (above AgentGym-RL's 2,400 s client
timeout) unless the server's own TTL is longer.

Every reset here is seeded with `RESET_SEED`, so an index always gives the same observation (the
distractor recipes TextCraft lists, for one), as AgentGym's TextCraft server, which seeds 42, does.

Scores: BabyAI's `reward` and `score` are the score so far (AgentGym's BabyAI client reads `score`
as the reward); SciWorld's are on ScienceWorld's 0-100 scale (a failed task scores 0, not -100);
TextCraft's, SearchQA's and WebArena's `reward` is the step's reward. Observations are this
project's texts, not AgentGym's.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from agentgym_envs.remote.sessions import ApiError, Session, bounded

if TYPE_CHECKING:
    from agentgym_envs.remote.sessions import SessionManager

#: AgentGym-RL's env clients wait this long for a reply (`timeout=2400` in verl/utils/agentgym/client.py).
AGENTGYM_CLIENT_TIMEOUT = 2400.0
#: Idle TTL of sessions made on AgentGym's routes: above the client timeout, with room for the turn after it.
COMPAT_TTL = 3600.0

#: The seed of every reset on these routes, so that an index always gives the same observation.
RESET_SEED = 0

_MAX_ID_BITS = 100


class AgentGymReply(Exception):
    """A reply AgentGym's server would send for a failed call: `payload` with HTTP `status` (mostly 200)."""

    def __init__(self, payload: Any, status: int = 200):
        super().__init__(str(payload)[:200])
        self.payload, self.status = payload, status


def _int_field(body: dict[str, Any], name: str, default: int | None = None) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(422, f"malformed request: body.{name} must be an integer, got {value!r:.40}", "ValueError")
    if value.bit_length() > _MAX_ID_BITS:
        raise ApiError(422, f"malformed request: body.{name} is larger than 2**{_MAX_ID_BITS}", "ValueError")
    return value


class Dialect:
    """How one of AgentGym's servers speaks; this base class is BabyAI's server, also used for unknown envs."""

    name = "generic"
    id_field = "id"
    index_field = "data_idx"
    #: Body fields of `/create` that AgentGym's server takes; others are kwargs a client asks for.
    create_fields: frozenset[str] = frozenset()
    #: Body fields AgentGym's clients send and its server ignores (never kwargs: e.g. a path).
    ignored_fields: frozenset[str] = frozenset()
    #: The data index `/create` resets to: "zero", "id" (the new id) or None (no reset).
    create_reset: str | None = "zero"

    # ---- tasks ----------------------------------------------------------------------------------
    def options(self, session: Session, index: int) -> dict[str, Any]:
        """Reset options for AgentGym's index `index`: every split's tasks in order, wrapping around."""
        splits = session.description["splits"]
        total = sum(splits.values())
        if total == 0:
            raise self.error(f"{session.env_id} has no tasks")
        index %= total
        for split, count in splits.items():
            if index < count:
                return {"split": split, "task_id": index}
            index -= count
        raise AssertionError("unreachable")

    def create_kwargs(self, client: dict[str, Any], allowed: Collection[str]) -> dict[str, Any]:
        """The kwargs of a session made on `/create`: the client's, and the dialect's defaults among `allowed`
        (the kwargs a client may set: declared by the env, not fixed by the operator)."""
        return client

    # ---- replies --------------------------------------------------------------------------------
    def error(self, message: str) -> AgentGymReply:
        return AgentGymReply({"error": message})

    def unknown_id(self, compat_id: int, reaped_after: float | None) -> AgentGymReply:
        why = (
            f"it was closed after {reaped_after:g} s idle (reaped); create a new env"
            if reaped_after is not None
            else "never made here, or closed"
        )
        return self.error(f"The id {compat_id} is not valid: {why}.")

    def reset_failed(self, message: str) -> AgentGymReply:
        """The reply to a reset the env refused (a task it cannot make), as AgentGym's server answers one."""
        return self.error(message)

    def not_reset(self, compat_id: int) -> AgentGymReply:
        return self.error(f"The env {compat_id} has not been reset yet: POST /reset first.")

    def created(self, session: Session) -> Any:
        return {"id": session.compat_id, **self._state(session, 0.0)}

    def reset(self, session: Session) -> Any:
        info = session.info or {}
        return {
            "id": session.compat_id,
            **self._state(session, 0.0),
            "deleted": False,
            "task_description": str(info.get("instruction", "")),
            "info": info,
        }

    def _state(self, session: Session, reward: float) -> dict[str, Any]:
        score = float((session.info or {}).get("score", 0.0))
        return {"observation": session.observation, "reward": reward, "score": score, "done": session.episode_over}

    def action(self, text: str) -> str:
        """The action the env gets for the text a client sent (its server's own parsing, if any)."""
        return text

    def step(self, session: Session, step: dict[str, Any]) -> Any:
        return {
            "observation": step["observation"],
            "reward": step["reward"],
            "score": float(step["info"].get("score", 0.0)),
            "done": step["terminated"] or step["truncated"],
            "info": step["info"],
        }

    def over(self, session: Session) -> Any:
        return self.error(f"The task with environment {session.compat_id} has finished.").payload

    def observation(self, session: Session) -> Any:
        return session.observation

    def closed(self, compat_id: int) -> Any:
        return True


_OVER = "The episode is over; reset to start another task."


class BabyAIDialect(Dialect):
    """agentenv-babyai: indexes spread over the levels (`level = levels[i % n]`, `seed = i // n`)."""

    name = "BabyAI"
    create_reset = None

    def options(self, session: Session, index: int) -> dict[str, Any]:
        levels = session.env.unwrapped.levels
        if index < 0:
            raise self.error(f"data_idx must be >= 0 (it picks level data_idx % {len(levels)} and seed data_idx // "
                             f"{len(levels)}), got {index}")  # fmt: skip
        return {"task_id": f"{levels[index % len(levels)]}/{index // len(levels)}"}

    def created(self, session: Session) -> Any:
        return {"id": session.compat_id}

    def step(self, session: Session, step: dict[str, Any]) -> Any:
        score = float(step["info"].get("score", 0.0))
        done = step["terminated"] or step["truncated"]
        return {"observation": step["observation"], "reward": score, "score": score, "done": done, "info": step["info"]}

    def observation(self, session: Session) -> Any:
        return {**self._state(session, float((session.info or {}).get("score", 0.0))), "deleted": False}


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
        return {"observation": _OVER, "reward": 0.0, "done": True}


#: ScienceWorld task numbers AgentGym's SciWorld server leaves out of its index.
SCIWORLD_EXCLUDED = frozenset({"5-1", "5-2", "9-1", "9-2", "9-3", "10-1", "10-2"})


def sciworld_games() -> list[str]:
    """AgentGym's SciWorld index: every variation of each kept task type, in ScienceWorld's task order."""
    from agentgym_envs.sciworld.tasks import TASK_TYPES

    return [
        f"{name}/{variation}"
        for name, (number, variations) in TASK_TYPES.items()
        if number not in SCIWORLD_EXCLUDED
        for variation in range(variations)
    ]


class SciWorldDialect(Dialect):
    """agentenv-sciworld: `games[i]` (Python indexing, no wrap); scores on ScienceWorld's 0-100 scale."""

    name = "SciWorld"
    create_reset = None
    _games: list[str] | None = None

    def options(self, session: Session, index: int) -> dict[str, Any]:
        if SciWorldDialect._games is None:
            SciWorldDialect._games = sciworld_games()
        games = SciWorldDialect._games
        if not -len(games) <= index < len(games):
            raise self.error("list index out of range")
        task = games[index]
        if task.partition("/")[0] not in session.env.unwrapped.task_names:
            raise self.error(f"data_idx {index} is {task}, a task type this server's env does not serve")
        return {"task_id": task}

    def created(self, session: Session) -> Any:
        return {"id": session.compat_id}

    def reset(self, session: Session) -> Any:
        info = session.info or {}
        description = str(info.get("instruction", ""))
        observation = session.observation or ""
        if observation.startswith(description):  # the client shows task_description + "\n" + observation
            observation = observation[len(description) :].lstrip("\n")
        name, _, variation = str(info.get("task_id", "")).partition("/")
        return {
            "task_name": name,
            "var_num": int(variation) if variation.isdigit() else None,
            "task_description": description,
            "observation": observation,
            "reward": 0,
            "score": 0,
            "deleted": False,
            "done": False,
        }

    def step(self, session: Session, step: dict[str, Any]) -> Any:
        return {
            "observation": step["observation"],
            "reward": round(100 * step["reward"]),
            "score": round(100 * float(step["info"].get("score", 0.0))),
            "done": step["terminated"] or step["truncated"],
        }


class SearchQADialect(Dialect):
    """agentenv-searchqa: `env_idx` ids, item ids over test then train, wrong answers may be retried."""

    name = "SearchQA"
    id_field = "env_idx"
    index_field = "id"
    create_fields = frozenset({"id"})
    create_reset = "body"

    def options(self, session: Session, index: int) -> dict[str, Any]:
        splits = session.description["splits"]
        order = [s for s in ("test", "train") if s in splits] + [s for s in splits if s not in ("test", "train")]
        start = 0
        for split in order:
            if start <= index < start + splits[split]:
                return {"split": split, "task_id": index - start}
            start += splits[split]
        raise AgentGymReply({"detail": f"Item id {index} is out of range.", "error_type": "ValueError"}, 500)

    def create_kwargs(self, client: dict[str, Any], allowed: Collection[str]) -> dict[str, Any]:
        # As AgentGym's SearchQA server: a wrong answer is answered "try again", passages as Search-R1 shows them.
        wanted = {"wrong_answer": "retry", "passage_format": "search-r1"}
        return {**{k: v for k, v in wanted.items() if k in allowed}, **client}

    def error(self, message: str) -> AgentGymReply:
        return AgentGymReply({"detail": message, "error_type": "ValueError"}, 500)

    def created(self, session: Session) -> Any:
        return session.compat_id

    def reset(self, session: Session) -> Any:
        return session.observation

    def step(self, session: Session, step: dict[str, Any]) -> Any:
        done = step["terminated"] or step["truncated"]
        return {"observation": step["observation"], "reward": step["reward"], "done": done, "info": None}

    def over(self, session: Session) -> Any:
        return {"observation": _OVER, "reward": 0.0, "done": True, "info": None}


class WebArenaDialect(Dialect):
    """agentenv-webarena: `env_idx` ids; `/reset {"idx"}` names WebArena's task id; actions in ``` fences."""

    name = "WebArena"
    id_field = "env_idx"
    index_field = "idx"
    create_reset = None

    def options(self, session: Session, index: int) -> dict[str, Any]:
        if str(index) not in session.env.unwrapped.catalog.by_id:
            raise self._failed_reset()
        return {"task_id": str(index)}

    def reset_failed(self, message: str) -> AgentGymReply:
        return self._failed_reset()

    @staticmethod
    def _failed_reset() -> AgentGymReply:
        # What AgentGym's WebArena server answers when a reset fails; its client raises TimeoutError on it.
        return AgentGymReply({"observation": "TimeoutError", "sites": "Error", "object": "Error"})

    def error(self, message: str) -> AgentGymReply:
        reply = {"observation": message, "reward": 0, "terminated": False, "truncated": False, "info": None}
        return AgentGymReply(reply)

    def created(self, session: Session) -> Any:
        return {"env_idx": session.compat_id}

    def action(self, text: str) -> str:
        # AgentGym's WebArena server gets the model's whole reply and acts on its first ```...``` block.
        start = text.find("```")
        end = text.find("```", start + 3) if start >= 0 else -1
        if end < 0:
            raise self.error(f"Cannot parse action from response {bounded(text, 200)}")
        return text[start + 3 : end].strip()

    def reset(self, session: Session) -> Any:
        task = session.env.unwrapped.catalog.by_id[(session.info or {}).get("task_id")]
        return {"observation": session.observation, "sites": task.sites, "object": task.intent}

    def step(self, session: Session, step: dict[str, Any]) -> Any:
        return {key: step[key] for key in ("observation", "reward", "terminated", "truncated", "info")}

    def over(self, session: Session) -> Any:
        return {"observation": _OVER, "reward": 0.0, "terminated": True, "truncated": False, "info": None}

    def closed(self, compat_id: int) -> Any:
        return {"closed": "closed"}


_DIALECTS: dict[str, type[Dialect]] = {
    "agentgym_envs.babyai.": BabyAIDialect,
    "agentgym_envs.textcraft.": TextCraftDialect,
    "agentgym_envs.sciworld.": SciWorldDialect,
    "agentgym_envs.deepsearch.": SearchQADialect,
    "agentgym_envs.webarena.": WebArenaDialect,
}


def dialect_for(class_name: str) -> Dialect:
    """The dialect of the env class `class_name` (module and class, as in an env description)."""
    for prefix, dialect in _DIALECTS.items():
        if class_name.startswith(prefix):
            return dialect()
    return Dialect()


class AgentGymRoutes:
    """The work behind AgentGym's routes for the first id a `SessionManager` serves."""

    def __init__(self, manager: SessionManager):
        self.manager = manager
        self._dialect: Dialect | None = None

    async def dialect(self) -> Dialect:
        if self._dialect is None:
            description = await self.manager.description(self.manager.default_env_id())
            self._dialect = dialect_for(description["class_name"])
        return self._dialect

    def _session(self, dialect: Dialect, compat_id: int) -> Session:
        session_id = self.manager.compat.get(compat_id)
        session = self.manager.sessions.get(session_id) if session_id is not None else None
        if session is None:
            raise dialect.unknown_id(compat_id, self.manager.reaped_after(compat_id))
        return session

    async def _reset(self, dialect: Dialect, session: Session, index: int) -> None:
        # Seeded: an index always shows the same text (AgentGym's TextCraft seeds 42 on every reset).
        try:
            await self.manager.call(session, session.do_reset, RESET_SEED, dialect.options(session, index))
        except ApiError as error:
            if error.status != 422:  # a backend failure stays a 500
                raise
            raise dialect.reset_failed(error.detail) from error

    async def create(self, body: dict[str, Any]) -> Any:
        """A session of the first served id, reset as the dialect's server does at create.

        Body fields that are not the dialect's own (TextCraft's `commands` and `goal`, SearchQA's `id`)
        nor ignored by AgentGym's server are kwargs the client asks for, under the rule of `POST
        /sessions`; a refusal is answered as AgentGym's servers answer errors, `{"error": ...}`.
        """
        dialect = await self.dialect()
        manager = self.manager
        env_id = manager.default_env_id()
        wanted = {
            key: value
            for key, value in body.items()
            if value is not None and key not in dialect.create_fields and key not in dialect.ignored_fields
        }
        try:
            custom = textcraft_task(body) if isinstance(dialect, TextCraftDialect) else None
            kwargs = dialect.create_kwargs(wanted, manager.policy.describe(env_id))
            session = await manager.create(env_id, kwargs, ttl=COMPAT_TTL)
        except ApiError as error:
            if error.status not in (403, 422):
                raise
            return {"error": error.detail, "error_type": error.error_type}
        compat_id = manager.new_compat_id(session)
        try:
            if dialect.create_reset == "zero":
                await self._reset(dialect, session, 0)
            elif dialect.create_reset == "id":
                await self._reset(dialect, session, compat_id)
            elif dialect.create_reset == "body":
                await self._reset(dialect, session, _int_field(body, dialect.index_field, 0))
            if custom is not None:
                await manager.call(session, _reset_custom_textcraft, session, *custom)
        except ApiError as error:
            await manager.close(session)
            if error.status != 422:
                raise
            return {"error": error.detail, "error_type": error.error_type}
        except BaseException:
            await manager.close(session)
            raise
        return dialect.created(session)

    async def reset(self, body: dict[str, Any]) -> Any:
        dialect = await self.dialect()
        session = self._session(dialect, _int_field(body, dialect.id_field))
        await self._reset(dialect, session, _int_field(body, dialect.index_field, 0))
        return dialect.reset(session)

    async def step(self, body: dict[str, Any]) -> Any:
        dialect = await self.dialect()
        session = self._session(dialect, _int_field(body, dialect.id_field))
        action = body.get("action")
        if not isinstance(action, str):
            raise ApiError(422, f"malformed request: body.action must be a string, got {action!r:.40}", "ValueError")
        action = dialect.action(action)
        try:
            reply = await self.manager.call(session, session.do_step, action)
        except ApiError as error:
            if error.error_type == "EpisodeOverError":
                return dialect.over(session)
            if error.error_type == "ResetNeeded":
                raise dialect.not_reset(session.compat_id or 0) from error
            raise
        return dialect.step(session, json.loads(reply))

    async def observation(self, compat_id: int | None, env_idx: int | None) -> Any:
        dialect = await self.dialect()
        given = compat_id if dialect.id_field == "id" else env_idx
        if given is None:
            raise ApiError(422, f"malformed request: the query needs ?{dialect.id_field}=<the id /create answered>")
        session = self._session(dialect, given)
        if session.observation is None:
            raise dialect.not_reset(given)
        return dialect.observation(session)

    async def close(self, body: dict[str, Any]) -> Any:
        dialect = await self.dialect()
        compat_id = _int_field(body, dialect.id_field)
        await self.manager.close(self._session(dialect, compat_id))
        return dialect.closed(compat_id)


# ---- TextCraft's custom task ----------------------------------------------------------------------
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


def _reset_custom_textcraft(session: Session, goal: str, commands: str) -> None:
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
