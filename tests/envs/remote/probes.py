"""Test envs of the server tests: a probe whose step can be held until the test lets it go."""

from __future__ import annotations

import threading
from typing import Any

from agentgym_envs.core import TextEnv

HANG = "AgentGymTest/HangProbe-v0"


class HangProbe(TextEnv):
    """Answers `echo <action>`; the action `hang` blocks until the test releases `release`."""

    release = threading.Event()
    action_format = "raw"

    def tasks(self, split: str = "train") -> list[str]:
        return ["only"]

    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        return "start", {"category": "probe", "instruction": "echo", "available_actions": None}

    def _step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if action == "hang":
            HangProbe.release.wait(120)
        return f"echo {action}", 0.0, False, False, {"valid_action": True, "success": False}
