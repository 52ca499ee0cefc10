"""The WebArena expert: follows the scripted plan of a bundled task, finding each element by role and name.

The expert reads its env through `WebArenaState` (what `WebArenaEnv` shows of an episode); the env
makes it in `make_expert`, so the import runs one way: env -> expert.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentgym_envs.webarena.tasks.catalog import Task


class WebArenaState(Protocol):
    """What the expert reads of a WebArena episode (`WebArenaEnv` has it)."""

    @property
    def current_task(self) -> Task | None: ...

    def find_element(self, role: str, name: str, nth: int = 0) -> int | None: ...


class ExpertStuckError(RuntimeError):
    """The plan names an element the current page does not have, or the plan is used up."""


class WebArenaExpert:
    """Scripted solver for the current episode (create it right after `reset`).

    Bundled task configs carry a plan under `agentgym_expert`: steps such as
    `{"do": "click", "role": "link", "name": "My Orders"}`, `{"do": "type", "role": "searchbox",
    "name": "Search products", "text": "lamp", "enter": true}`, `{"do": "goto", "url": ...}` and
    `{"do": "stop", "answer": "$34.99"}`. Each step becomes one action, with the element id read
    from the page the agent sees at that moment. A user's WebArena configs have no plans.
    """

    def __init__(self, env: WebArenaState):
        task = env.current_task
        if task is None or not task.expert_plan:
            raise NotImplementedError(
                f"task {task.task_id if task else '?'} has no scripted plan (only the bundled tasks have one)"
            )
        self._env = env
        self._plan = list(task.expert_plan)
        self._next = 0

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The next action text of the plan."""
        if self._next >= len(self._plan):
            raise ExpertStuckError("the plan is finished but the episode goes on")
        step = self._plan[self._next]
        self._next += 1
        kind = step["do"]
        if kind in ("click", "hover", "type"):
            element = self._env.find_element(step["role"], step["name"], step.get("nth", 0))
            if element is None:
                raise ExpertStuckError(f"no {step['role']} named {step['name']!r} on {info.get('url', 'the page')}")
            if kind == "type":
                return f"type [{element}] [{step['text']}] [{int(bool(step.get('enter', False)))}]"
            return f"{kind} [{element}]"
        if kind == "stop":
            return f"stop [{step.get('answer', '')}]"
        if kind == "goto":
            return f"goto [{step['url']}]"
        if kind == "press":
            return f"press [{step['key']}]"
        if kind == "scroll":
            return f"scroll [{step.get('direction', 'down')}]"
        if kind in ("go_back", "go_forward", "new_tab", "close_tab"):
            return kind
        if kind == "tab_focus":
            return f"tab_focus [{step['index']}]"
        raise ExpertStuckError(f"unknown plan step {step!r}")
