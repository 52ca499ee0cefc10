"""Constructor kwargs an env lets a remote client choose, and how each one is checked.

An env server (`agentgym serve`) has two parties: the operator, who fixes every env's configuration
when the server starts, and clients, who create sessions. A client may pass only the kwargs the
env class declares in its `client_kwargs` class attribute (name -> checker), and only values the
checker accepts; a program, a path, a URL, a JVM option or a size is never among them. The checkers
here are plain data with a `check` method, so the server can both enforce and describe them.

Examples:
    >>> SubsetOf(("a", "b", "c")).check("levels", ["a", "c"])
    ('a', 'c')
    >>> IntRange(0, 5).check("topk", 9)
    Traceback (most recent call last):
    ...
    ValueError: topk must be an integer from 0 to 5, got 9
"""

from __future__ import annotations

from collections.abc import Collection, Hashable
from numbers import Integral, Real
from typing import Any


class ClientKwarg:
    """A checker for one client-chosen kwarg: `check(name, value)` returns the value to use or raises ValueError."""

    def check(self, name: str, value: Any) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        """What a client may pass, in words (served in `/envs` and listed in the README)."""
        raise NotImplementedError


class Flag(ClientKwarg):
    """True or False."""

    def check(self, name: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r:.80}")
        return value

    def describe(self) -> str:
        return "true or false"


class OneOf(ClientKwarg):
    """One of a few fixed values (compared exactly, so `1` is not `True`)."""

    def __init__(self, values: Collection[Hashable]):
        self.values = tuple(values)

    def check(self, name: str, value: Any) -> Any:
        if not any(value == v and type(value) is type(v) for v in self.values):
            raise ValueError(f"{name} must be one of {list(self.values)}, got {value!r:.80}")
        return value

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


class SubsetOf(ClientKwarg):
    """A non-empty list of distinct values from a fixed set (a single value counts as a list of one)."""

    def __init__(self, values: Collection[Hashable]):
        self.values = tuple(values)
        self._allowed = frozenset(values)
        self._type = type(self.values[0])

    def check(self, name: str, value: Any) -> tuple[Any, ...]:
        items = [value] if isinstance(value, self._type) and not isinstance(value, bool) else value
        if not isinstance(items, (list, tuple)) or not items or len(items) > len(self._allowed):
            raise ValueError(
                f"{name} must be a non-empty list of {self._type.__name__} values from the {len(self.values)} "
                f"allowed ones, got {value!r:.80}"
            )
        bad = [item for item in items if isinstance(item, bool) or not isinstance(item, self._type)]
        unknown = [item for item in items if item not in bad and item not in self._allowed]
        if bad or unknown or len(set(items)) != len(items):
            shown = ", ".join(repr(v) for v in self.values[:12]) + (", ..." if len(self.values) > 12 else "")
            raise ValueError(f"{name} must list distinct values of: {shown}; got {(bad + unknown) or items!r:.200}")
        return tuple(items)

    def describe(self) -> str:
        shown = ", ".join(str(v) for v in self.values[:8]) + (
            f", ... ({len(self.values)} in all)" * (len(self.values) > 8)
        )
        return f"a subset of {shown}"


class IntRange(ClientKwarg):
    """An integer from `low` to `high`, both included."""

    def __init__(self, low: int, high: int):
        self.low, self.high = low, high

    def check(self, name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, Integral) or not self.low <= value <= self.high:
            raise ValueError(f"{name} must be an integer from {self.low} to {self.high}, got {value!r:.80}")
        return int(value)

    def describe(self) -> str:
        return f"an integer from {self.low} to {self.high}"


def check_int(name: str, value: Any, low: int, high: int) -> int:
    """`value` if it is an int in [low, high] (for constructors); ValueError naming `name` otherwise."""
    return IntRange(low, high).check(name, value)


def check_number(name: str, value: Any, low: float, high: float) -> float:
    """`value` as a float if it is a number in [low, high]; ValueError naming `name` otherwise."""
    if isinstance(value, bool) or not isinstance(value, Real) or not low <= value <= high:
        raise ValueError(f"{name} must be a number from {low:g} to {high:g}, got {value!r:.80}")
    return float(value)


#: What every `TextEnv` lets a client choose (a scenario adds its own with `{**TextEnv.client_kwargs, ...}`).
BASE_CLIENT_KWARGS: dict[str, ClientKwarg] = {"render_mode": OneOf((None, "ansi"))}
