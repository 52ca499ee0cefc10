"""The forum's task templates of information seeking."""

from __future__ import annotations

import sqlite3
from typing import Any

from agentgym_envs.webarena.sites.forum.tasks.common import (
    TASKS,
    _forum,
    _forum_values,
    _forums,
    _listing,
    _open_forum,
    _open_post,
    _open_user,
    _post,
    _posts,
    _user_posts,
    _users_with_posts,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, click, exact, stop


def _top_title(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    title = _listing(seed, values["forum"], "top")[0]["title"]
    return TASKS.built([*_open_forum(values["forum"]), click("link", "Top"), stop(title)], exact(title))


def _top_instances(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for forum in _forums(seed):
        listed = _listing(seed, forum["name"], "top")
        if len(listed) >= 2 and listed[0]["score"] != listed[1]["score"]:
            found.append({"forum": forum["name"]})
    return found


def _post_count(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    count = str(len(_user_posts(seed, values["user"])))
    return TASKS.built([*_open_user(seed, values["user"]), stop(count)], exact(count))


def _subscribers(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    count = str(_forum(seed, values["forum"])["subscribers"])
    return TASKS.built([*_open_forum(values["forum"]), stop(count)], exact(count))


def _comment_count(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    count = str(_post(seed, values["title"])["comment_count"])
    return TASKS.built([*_open_post(values["title"]), stop(count)], exact(count))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "top_post_title",
        "info",
        "What is the title of the top post of all time in the forum {{forum}}?",
        _top_instances,
        _top_title,
    ),
    TASKS.template(
        "user_post_count",
        "info",
        "How many posts has the user {{user}} submitted?",
        lambda seed: [{"user": user} for user in _users_with_posts(seed, 1)],
        _post_count,
    ),
    TASKS.template(
        "forum_subscribers", "info", "How many subscribers does the forum {{forum}} have?", _forum_values, _subscribers
    ),
    TASKS.template(
        "post_comment_count",
        "info",
        'How many comments does the post titled "{{title}}" have?',
        lambda seed: [{"title": post["title"]} for post in _posts(seed)],
        _comment_count,
        held_out=True,
    ),
]
