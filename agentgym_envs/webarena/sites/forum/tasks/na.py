"""The forum's task templates of unachievable tasks."""

from __future__ import annotations

import sqlite3
from typing import Any

from agentgym_envs.webarena.sites.forum.tasks.common import TASKS, _open_user, _users_with_posts
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, not_achievable, stop


def _email(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return TASKS.built([*_open_user(seed, values["user"]), stop("N/A")], not_achievable())


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "user_email",
        "na",
        "What is the email address of the user {{user}}?",
        lambda seed: [{"user": user} for user in _users_with_posts(seed, 1)],
        _email,
    ),
]
