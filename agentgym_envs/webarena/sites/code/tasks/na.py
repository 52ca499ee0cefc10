"""The code host's task templates of unachievable tasks."""

from __future__ import annotations

from agentgym_envs.webarena.sites.code.tasks.common import (
    _PROJECTS,
    TASKS,
    _open_project,
    _open_user,
    _rows,
    _users,
    _values,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate, not_achievable, stop

TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "na_phone",
        "na",
        "What is the phone number of {{user}}?",
        _users,
        lambda seed, v: TASKS.built([*_open_user(v["user"]), stop("N/A")], not_achievable()),
    ),
    TASKS.template(
        "na_release_downloads",
        "na",
        "How many times was the latest release of the project {{project}} downloaded?",
        lambda seed: _values(_rows(seed, _PROJECTS)),
        lambda seed, v: TASKS.built([*_open_project(v), stop("N/A")], not_achievable()),
        held_out=True,
    ),
]
