"""One TextWorld game being played: jericho's Z-machine plus textworld's logic state, with fast resets.

What `textworld.start` does on every reset (restart the Z-machine, parse the game's JSON, switch on
action tracing and score reporting, rebuild the logic state) is done once per game and process
here (`games.LoadedGame`: the parsed game, the initial logic state and commands, the intro text and
the Z-machine state after set-up). A reset then restores that Z-machine state (under a millisecond)
and copies the initial logic state. Each step sends one command to the Z-machine, reads the score
and the Inform 7 action events out of its answer, and advances the logic state with them (the
admissible commands are computed from it); the actions applied are logged so that the expert can
replay them with quest tracking (`expert.py`).

The Z-machine is jericho's `FrotzEnv`: a private copy of its C library loaded into this process,
no child process. A session keeps up to `pool_size` of them (one per recently played game, so a
reset to one of those games needs no restart); `close()` shuts them down and unloads them.
"""

from __future__ import annotations

import copy
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

try:
    import jericho
except ImportError as error:  # jericho comes with textworld
    raise ImportError(
        "AgentGym/TextWorld-v0 needs the textworld package (and its jericho): pip install 'agentgym-rl[textworld]'"
    ) from error

from agentgym_envs.textworld.games import LoadedGame

#: The Z-machine's random seed (jericho treats 0 as "from the clock").
FROTZ_SEED = 20180
#: textworld's Inform 7 testing commands: print the actions carried out, and the score after each turn.
_SETUP_COMMANDS = ("tw-trace-actions", "tw-extra-infos score")
_WON = "*** The End ***"
_LOST = "*** You lost! ***"
_BANNER_CHARS = frozenset(" _|\\$/<>\t")
_REPLAY_QUESTION = "Would you like to RESTART"


@dataclass
class Outcome:
    """What one command did: the game's answer (tags removed), the score so far, and how the game stands."""

    feedback: str
    score: int
    won: bool
    lost: bool


def _cut_block(text: str, tag: str) -> tuple[str, str | None]:
    """The text without its first `<tag>...</tag>` block, and the block's content (None when absent)."""
    start = text.find(f"<{tag}>")
    end = text.find(f"</{tag}>", start) if start >= 0 else -1
    if end < 0:
        return text, None
    return text[:start] + text[end + len(tag) + 3 :], text[start + len(tag) + 2 : end]


def _read_score(text: str) -> tuple[str, int | None]:
    """The text without the `<score>` and `<moves>` blocks textworld's games print each turn, and the score."""
    text, number = _cut_block(text, "score")
    text, _ = _cut_block(text, "moves")
    number = (number or "").strip().split("\n")[0]
    return text, int(number) if number.lstrip("-").isdigit() and len(number) < 10 else None


def _read_events(text: str) -> tuple[str, list[str]]:
    """The text without Inform 7's `[event]` trace tags, and the events that succeeded (linear time)."""
    kept, events, i = [], [], 0
    while True:
        start = text.find("[", i)
        end = text.find("]", start + 1) if start >= 0 else -1
        if start < 0 or end < 0:
            kept.append(text[i:])
            break
        kept.append(text[i:start])
        tag = text[start + 1 : end]
        i = end + 1 + (text.startswith("\n", end + 1))
        if tag.endswith(" - succeeded") and "(" not in tag and ")" not in tag:
            events.append(tag[: -len(" - succeeded")])
    return "".join(kept), events


def _fresh_progression(start: Any) -> Any:
    """A copy of the initial `GameProgression` (no quest tracking) to play on.

    textworld's own `copy()` first builds a progression from scratch (computing every applicable
    action of the initial state again, ~10 ms on a cooking game); this copies the one object that
    changes, the state, and shares the rest, as `copy()` does.
    """
    progression = copy.copy(start)
    progression.state = start.state.copy()
    progression.quest_progressions = []
    return progression


def clean_text(text: str) -> str:
    r"""Game text without the ASCII-art banner, the input prompt and status line, the replay question
    at the end, indentation and runs of blank lines.

    >>> clean_text("  __ \$$ |\n\nWelcome!\n\n\n\n-= Kitchen =-\n>     -= Kitchen =-0/1")
    'Welcome!\n\n-= Kitchen =-'
    """
    lines = text.rstrip().split("\n")
    if lines and lines[-1].startswith(">"):  # the prompt, followed by the status line (room, score/moves)
        lines.pop()
    first = 0
    while first < len(lines) and all(ch in _BANNER_CHARS for ch in lines[first]):
        first += 1
    out: list[str] = []
    for line in lines[first:]:
        line = line.strip()
        if line.startswith(_REPLAY_QUESTION):
            continue
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


class GameSession:
    """Plays one game at a time; `reset(loaded)` starts a game, `step(command)` carries out one command."""

    def __init__(self, pool_size: int = 4):
        self.pool_size = max(1, int(pool_size))
        self._pool: OrderedDict[str, jericho.FrotzEnv] = OrderedDict()
        self._frotz: jericho.FrotzEnv | None = None
        self.loaded: LoadedGame | None = None
        self.progression: Any = None
        self.commands: list[str] = []
        #: The logic actions applied since reset, in order (what the expert replays).
        self.applied: list[Any] = []
        self.score = 0

    # ---- the Z-machine pool ---------------------------------------------------------------------
    def _machine(self, loaded: LoadedGame) -> jericho.FrotzEnv:
        key = str(loaded.story)
        frotz = self._pool.get(key)
        if frotz is not None:
            self._pool.move_to_end(key)
        else:
            frotz = self._start(key)
        with loaded.lock:
            if loaded.snapshot is None:  # the first start of this game in this process
                intro, _ = frotz.reset()
                for command in _SETUP_COMMANDS:
                    frotz.step(command)
                loaded.intro = clean_text(intro)
                loaded.snapshot = frotz.get_state()
        frotz.set_state(loaded.snapshot)
        return frotz

    def _start(self, key: str) -> jericho.FrotzEnv:
        """A Z-machine with the story `key` loaded, added to the pool (replacing the least recent one)."""
        # jericho warns that it cannot read the score of games it does not know (ours comes from the game
        # text). Caught here rather than by a process-wide filter, which pytest and the env checker's
        # warning capture replace (the price: a filter that another thread adds during a load is lost).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", jericho.UnsupportedGameWarning)
            if len(self._pool) >= self.pool_size:  # reuse the oldest (a new FrotzEnv loads a library copy: ~80 ms)
                old, frotz = self._pool.popitem(last=False)
                frotz.close()
                frotz._cache.pop(old, None)  # jericho keeps every story it loaded; drop the one replaced
                frotz.load(key, FROTZ_SEED)
            else:
                frotz = jericho.FrotzEnv(key, FROTZ_SEED)
        self._pool[key] = frotz
        return frotz

    # ---- playing --------------------------------------------------------------------------------
    def reset(self, loaded: LoadedGame) -> str:
        """Start `loaded` from its beginning; return its intro text."""
        self._frotz = self._machine(loaded)
        self.loaded = loaded
        self.progression = _fresh_progression(loaded.start)
        self.commands = loaded.start_commands
        self.applied = []
        self.score = 0
        assert loaded.intro is not None
        return loaded.intro

    def step(self, command: str) -> Outcome:
        """Send `command` (one of `self.commands`) to the game."""
        assert self._frotz is not None and self.loaded is not None, "reset() first"
        raw, _, _, _ = self._frotz.step(command)
        text, score = _read_score(raw)
        text, events = _read_events(text)
        inform7 = self.loaded.inform7
        changed = False
        for event in events:
            action = inform7.detect_action(event, self.progression.valid_actions)
            if action is not None:
                self.progression.update(action)
                self.applied.append(action)
                changed = True
        if changed:
            self.commands = sorted(set(inform7.gen_commands_from_actions(self.progression.valid_actions)))
        if score is not None:
            self.score = score
        return Outcome(clean_text(text), self.score, _WON in text, _LOST in text)

    def close(self) -> None:
        """Shut every Z-machine down and unload its library copy (safe to call twice)."""
        for frotz in self._pool.values():
            frotz.close()
        self._pool.clear()  # the last reference: jericho's __del__ unloads the library copy
        self._frotz = None
        self.loaded = None
        self.progression = None

    @property
    def machines(self) -> int:
        """How many Z-machines this session holds."""
        return len(self._pool)
