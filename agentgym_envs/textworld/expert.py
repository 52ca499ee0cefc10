"""The TextWorld expert: textworld's winning policy, re-planned from the current state at every turn.

textworld tracks each quest as a tree of the actions that lead to it; when the player moves away
from the goal (walks into another room, closes a door again), the tree grows by the actions that
undo it, so the policy always starts from the current state. The env itself plays without quest
tracking (it costs up to 4x a step in large games); the expert keeps its own quest-tracking
progression and brings it up to date by replaying the logic actions the env applied since it
last looked (`GameSession.applied`), so it can be created at any point of an episode.
"""

from __future__ import annotations

from typing import Any

from agentgym_envs.textworld.engine import GameSession


class TextWorldExpert:
    """Scripted solver for the current TextWorld episode; `act` gives textworld's next policy command."""

    #: What the expert says when textworld has no policy (the game is over or can no longer be won).
    FALLBACK = "look"

    def __init__(self, session: GameSession):
        from textworld.generator.game import GameProgression

        if session.loaded is None:
            raise RuntimeError("the session has no game; reset the env first")
        self._session = session
        self._loaded = session.loaded
        self._progression = GameProgression(self._loaded.game, track_quests=True)
        self._replayed = 0
        self._actions = session.applied

    def _sync(self) -> None:
        session = self._session
        if session.loaded is not self._loaded or session.applied is not self._actions:
            raise RuntimeError("the env started another episode; make a new expert with env.unwrapped.make_expert()")
        for action in session.applied[self._replayed :]:
            self._progression.update(action)
        self._replayed = len(session.applied)

    def plan(self) -> list[str]:
        """The commands that win the game from the current state (empty when there are none)."""
        self._sync()
        policy = self._progression.winning_policy
        if not policy:
            return []
        return self._loaded.inform7.gen_commands_from_actions(policy)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The next command of the winning policy from the current state."""
        plan = self.plan()
        if plan and plan[0] in self._session.commands:
            return plan[0]
        return self.FALLBACK
