"""The text-environment contract shared by every AgentGym scenario.

`TextEnv` is a `gymnasium.Env[str, str]`: observations and actions are plain Unicode strings, any
string is a legal action (an action the scenario cannot carry out is answered, not raised), and
every scenario reports the same info keys (`INFO_KEYS`) and the same public task API (`tasks`,
`num_tasks`, `task_at`, `split_of`; `task_rows` lists the first tasks of a split). `TextSpace` is the
matching space; it is registered with Gymnasium's vector utilities so that `gym.make_vec` works in sync
and async mode.
"""

from __future__ import annotations

import string
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.error import CustomSpaceError
from gymnasium.spaces import Space, Tuple
from gymnasium.vector.utils import (
    batch_space,
    concatenate,
    create_empty_array,
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

from agentgym_envs.clientargs import BASE_CLIENT_KWARGS, ClientKwarg
from agentgym_envs.tools import ACT_TOOL, ActionTool, ToolCallError, ToolParam  # noqa: F401  (the contract's types)

#: Keys present in the info of every `reset` and `step` (`valid_action` only after `step`).
INFO_KEYS = (
    "task_id",
    "split",
    "category",
    "instruction",
    "score",
    "success",
    "available_actions",
)

#: Keys that describe one step rather than the task; everything else a reset reports stays fixed.
_STEP_KEYS = frozenset({"score", "success", "valid_action", "available_actions"})

#: Character set that `TextSpace.sample` draws from (`contains` accepts any character).
_SAMPLE_CHARS = string.ascii_letters + string.digits + string.punctuation + " "


class TextSpace(Space[str]):
    """Any Unicode string of at most `max_length` characters.

    Gymnasium's `spaces.Text` only accepts characters of a fixed charset (alphanumerics by
    default), which rejects ordinary prose. This space accepts every string; `sample` draws short
    printable strings, which text environments answer as invalid actions.

    Examples:
        >>> space = TextSpace(max_length=32)
        >>> "go to the red ball, then stop!" in space
        True
        >>> 42 in space
        False
        >>> _ = space.seed(0)
        >>> 1 <= len(space.sample()) <= space.sample_length
        True
    """

    def __init__(self, max_length: int = 1 << 17, *, sample_length: int = 32, seed: int | None = None):
        if max_length < 1:
            raise ValueError(f"TextSpace max_length must be positive, got {max_length}")
        self.max_length = int(max_length)
        self.sample_length = min(int(sample_length), self.max_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            raise ValueError("TextSpace.sample does not support masks")
        length = int(self.np_random.integers(1, self.sample_length + 1))
        picks = self.np_random.integers(0, len(_SAMPLE_CHARS), size=length)
        return "".join(_SAMPLE_CHARS[i] for i in picks)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextSpace) and other.max_length == self.max_length


# Vector support: a batch of texts is a tuple of strings. Shared memory (async vector envs) stores
# each string as its length followed by its code points, so any Unicode text round-trips.
@batch_space.register(TextSpace)
def _batch_text_space(space: TextSpace, n: int = 1) -> Tuple:
    return Tuple([TextSpace(space.max_length, sample_length=space.sample_length) for _ in range(n)])


@concatenate.register(TextSpace)
def _concatenate_text(space: TextSpace, items: Sequence[str], out: Any) -> tuple[str, ...]:
    return tuple(items)


@create_empty_array.register(TextSpace)
def _empty_text(space: TextSpace, n: int = 1, fn: Any = np.zeros) -> tuple[str, ...]:
    return ("",) * n


@create_shared_memory.register(TextSpace)
def _text_shared_memory(space: TextSpace, n: int = 1, ctx: Any = None) -> Any:
    import multiprocessing as mp

    return (ctx or mp).Array(np.dtype(np.int32).char, n * (space.max_length + 1))


class SharedTextBatch(Sequence[str]):
    """A live view of the texts in an async vector env's shared memory.

    Gymnasium reads shared memory once, at construction, and relies on the result being a view
    (as NumPy arrays are); this sequence decodes the current texts on every access, and a copy
    (the vector env deep-copies what it returns) is a plain tuple of strings.
    """

    def __init__(self, shared_memory: Any, n: int, max_length: int):
        self._rows = np.frombuffer(shared_memory.get_obj(), dtype=np.int32).reshape(n, max_length + 1)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self)[index]
        row = self._rows[index]
        return row[1 : 1 + row[0]].tobytes().decode("utf-32-le")

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, Sequence) else other)

    def __repr__(self) -> str:
        return f"SharedTextBatch({tuple(self)!r})"


@read_from_shared_memory.register(TextSpace)
def _read_text(space: TextSpace, shared_memory: Any, n: int = 1) -> SharedTextBatch:
    return SharedTextBatch(shared_memory, n, space.max_length)


@write_to_shared_memory.register(TextSpace)
def _write_text(space: TextSpace, index: int, value: str, shared_memory: Any) -> None:
    if not space.contains(value):
        raise CustomSpaceError(f"cannot write {type(value).__name__} of this size to {space}")
    codes = np.frombuffer(value.encode("utf-32-le"), dtype=np.int32)
    size = space.max_length + 1
    row = np.frombuffer(shared_memory.get_obj(), dtype=np.int32)[index * size : (index + 1) * size]
    row[0] = len(codes)
    row[1 : 1 + len(codes)] = codes


def normalise_action(action: str, lower: bool = True) -> str:
    """Single spaces, no surrounding quotes or backticks, no final full stop; lower case unless told not to.

    >>> normalise_action("  `Turn  LEFT.` ")
    'turn left'
    """
    text = " ".join(action.split()).strip("`'\"").rstrip(".!").strip()  # split(): linear, fast on long text
    return text.lower() if lower else text


class EpisodeOverError(RuntimeError):
    """Raised by `TextEnv.step` when the episode has already terminated or been truncated."""


def reset_options(options: Any) -> Mapping[str, Any]:
    """`options` of a `reset` checked for its type: a dict (or None, for none); raises TypeError otherwise."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(
            f"reset options must be a dict such as {{'task_id': 'GoToLocal/5'}} or {{'split': 'test'}} (keys "
            f"'task_id' and/or 'split'), or None; got {type(options).__name__}: {options!r:.80}"
        )
    return options


class TextEnv(gym.Env[str, str]):
    """Base class of every AgentGym text environment.

    Subclasses implement `_reset_task` and `_step_action` and the class attributes below; this
    class handles task selection (split, task_id, seed), the info keys, input checking, the
    episode-over guard, reward normalisation (rewards are score increments) and rendering.

    Class attributes:
        default_max_turns: The turn limit a multi-turn wrapper uses when none is given.
        action_format: Name of the action parser a wrapper should use (see `agentgym_wrappers`).
        system_prompt: How to act in this scenario, with one worked example.
        stop_strings: Where the environment's part of a turn begins (e.g. a new line starting
            `Observation:`); generation ends a reply before the first of them. None: the defaults of
            `action_format` (`agentgym_wrappers.stops`).
        default_max_turn_tokens: The most tokens one reply may have when the user sets none (None:
            the default of `action_format`).
        splits: The split names this scenario has.
        client_kwargs: The constructor kwargs a remote client may choose (name -> checker, see
            `agentgym_envs.clientargs`); an env server refuses every other kwarg from a client.
        ray_resources: What one env needs as a Ray actor (`agentgym_envs.cluster`): `num_cpus` and
            `memory` (bytes) per env, and `envs_per_actor` (light envs share an actor).
        action_tools: The scenario's actions as tools (`agentgym_envs.tools.ActionTool`), for models
            that act through native tool calls (`action_format: tools`); see `tools()`.
        tool_instructions: The scenario in words for a model that acts through tools: the system prompt
            without its reply format (empty: the system prompt is used).
        shared_server_thread: Whether an env server runs every session of this class on one worker
            thread (`agentgym_envs.remote.server.sessions`). True only where a call is short pure-Python
            work bound to no thread (no I/O, no backend process): there more threads add only thread
            switches. False (the default): sessions spread over the server's threads. The env class
            alone chooses it; a client never can (it is no constructor kwarg).
    """

    # render_fps only quiets the env checker: ansi rendering returns text and never sleeps.
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}
    default_max_turns: ClassVar[int] = 20
    action_format: ClassVar[str] = "action_line"
    system_prompt: ClassVar[str] = ""
    stop_strings: ClassVar[tuple[str, ...] | None] = None
    default_max_turn_tokens: ClassVar[int | None] = None
    splits: ClassVar[tuple[str, ...]] = ("train", "test")
    client_kwargs: ClassVar[Mapping[str, ClientKwarg]] = BASE_CLIENT_KWARGS
    ray_resources: ClassVar[Mapping[str, float]] = {"num_cpus": 1 / 32, "memory": 64 * 2**20, "envs_per_actor": 32}
    action_tools: ClassVar[tuple[ActionTool, ...]] = ()
    tool_instructions: ClassVar[str] = ""
    shared_server_thread: ClassVar[bool] = False

    def __init__(self, render_mode: str | None = None, max_observation_length: int = 1 << 17):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.render_mode = render_mode
        self.observation_space = TextSpace(max_observation_length)
        self.action_space = TextSpace(1 << 20)
        self._observation: str | None = None
        self._task: dict[str, Any] | None = None
        self._score = 0.0
        self._success = False
        self._done = False

    # ---- the task API (public: the server, the adapters and the trainer use only these) ----------
    def tasks(self, split: str = "train") -> list[str]:
        """The task ids of `split`, in a fixed order (what a scenario implements)."""
        raise NotImplementedError

    def num_tasks(self, split: str) -> int:
        """How many tasks `split` has; a scenario with large splits counts them without listing them."""
        return len(self.tasks(split))

    def task_at(self, split: str, index: int) -> str:
        """The id of the `index`-th task of `split` (`tasks(split)[index]`, without listing the split)."""
        return self.tasks(split)[index]

    def split_of(self, task_id: str) -> str | None:
        """The split holding `task_id`, or None when the scenario has no such task."""
        for split in self.splits:
            if task_id in self.tasks(split):
                return split
        return None

    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        """Start `task_id`; return the first observation and its info.

        The info must hold `category` and `instruction`, and `available_actions` when listable; other
        task-level keys (e.g. BabyAI's `level`) are repeated in every later info of the episode.
        """
        raise NotImplementedError

    def _step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Carry out `action`; return (observation, score so far, terminated, truncated, info).

        The info must hold `valid_action` and `success`; `available_actions` when listable.
        """
        raise NotImplementedError

    def make_expert(self) -> Any:
        """A scripted solver for the current episode, with `act(observation, info) -> str`."""
        raise NotImplementedError(f"{type(self).__name__} has no expert")

    def state_key(self) -> Hashable | None:
        """A hashable key of the current environment state, for step-level credit (GiGPO's anchor states):
        turns that start from equal keys are compared. None (the default): the observation text is the key.
        A scenario overrides it where different texts can describe one state (or one text several)."""
        return None

    def context_summary(self) -> str | None:
        """The scenario's compact state in words (what an agent would carry forward: objects held, places
        seen), shown by `agentgym_wrappers.SummaryContext` in place of older turns. None (the default): the
        scenario has none, and the summary context only says how many turns it left out."""
        return None

    def tools(self) -> tuple[ActionTool, ...]:
        """The scenario's actions as tools (`action_tools`); an env that lists none has one free-text
        `act(action)` (`ACT_TOOL`). Each tool's `schema()` is what `apply_chat_template(tools=...)` takes
        and its `action(arguments)` the action text of a call."""
        return self.action_tools or (ACT_TOOL,)

    # ---- the Gymnasium API ----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(reset_options(options))
        unknown = set(options) - {"task_id", "split"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; expected 'task_id' and/or 'split'")
        split = options.get("split")
        if split is not None and split not in self.splits:
            raise ValueError(f"unknown split {split!r:.40}; {type(self).__name__} has splits {list(self.splits)}")
        task_id = options.get("task_id")
        if task_id is None:
            split = split or self.splits[0]
            count = self.num_tasks(split)
            if count == 0:
                raise ValueError(f"split {split!r} of {type(self).__name__} has no tasks")
            task_id = self.task_at(split, int(self.np_random.integers(count)))
        elif isinstance(task_id, (int, np.integer)) and not isinstance(task_id, bool):
            split = split or self.splits[0]
            count = self.num_tasks(split)
            if not 0 <= task_id < count:
                raise ValueError(f"task index {task_id} is out of range for split {split!r} ({count} tasks)")
            task_id = self.task_at(split, int(task_id))
        elif isinstance(task_id, str):
            found = self.split_of(task_id)
            if found is None:
                raise ValueError(f"unknown task_id {task_id!r:.100} for {type(self).__name__}; see env.tasks(split)")
            if split is not None and split != found:
                raise ValueError(f"task_id {task_id!r:.100} belongs to split {found!r}, not {split!r:.40}")
            split = found
        else:
            raise TypeError(f"task_id must be a str or int, got {type(task_id).__name__}")

        observation, info = self._reset_task(task_id)
        task_info = {key: value for key, value in info.items() if key not in _STEP_KEYS}
        self._task = {"task_id": task_id, "split": split, **task_info}
        self._score, self._success, self._done = 0.0, False, False
        self._observation = observation
        return observation, self._info({"available_actions": info.get("available_actions")})

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not isinstance(action, str):
            raise TypeError(f"action must be a str (the action text), got {type(action).__name__}: {action!r:.80}")
        if self._task is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._done:
            raise EpisodeOverError("the episode is over (terminated or truncated); call reset() to start a new one")
        observation, score, terminated, truncated, step_info = self._step_action(action)
        if not 0.0 <= score <= 1.0:
            raise AssertionError(f"{type(self).__name__} reported score {score} outside [0, 1]")
        reward = score - self._score
        self._score = score
        self._success = bool(step_info.get("success", self._success))
        self._done = terminated or truncated
        self._observation = observation
        return observation, float(reward), bool(terminated), bool(truncated), self._info(step_info)

    def _info(self, extra: dict[str, Any]) -> dict[str, Any]:
        assert self._task is not None
        info = {**self._task, "score": self._score, "success": self._success, "available_actions": None, **extra}
        if info["available_actions"] is not None:
            info["available_actions"] = list(info["available_actions"])
        return info

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._observation or ""
        return None


def task_rows(env: TextEnv, split: str, limit: int | None = None) -> list[tuple[int, str]]:
    """The first `limit` tasks of `split` (all of them when None) as `(index, task_id)` pairs, in order.

    Goes through `num_tasks` and `task_at`, so a split is not listed whole to take its first rows.

    Examples:
        >>> import gymnasium as gym
        >>> import agentgym_envs
        >>> task_rows(gym.make("AgentGym/BabyAI-GoToLocal-v0").unwrapped, "test", limit=2)
        [(0, 'GoToLocal/0'), (1, 'GoToLocal/1')]
    """
    count = env.num_tasks(split) if limit is None else min(limit, env.num_tasks(split))
    return [(index, env.task_at(split, index)) for index in range(count)]
