"""The forum's task templates of state changes: new posts and reposts."""

from __future__ import annotations

import sqlite3
from typing import Any

from agentgym_envs.webarena.sites.forum.tasks.common import (
    TASKS,
    _forums,
    _new_post,
    _open_forum,
    _open_post,
    _post,
    _post_checks,
    _posts,
    _rng,
    _things,
    _write_post,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, click, program, stop

LINK_HOSTS = ["news.example", "blog.example", "video.example"]


def _post_text_instances(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for forum in _forums(seed):
        title, body = _new_post("post_text", forum["name"], _things(forum["name"]))
        found.append({"forum": forum["name"], "title": title, "body": body})
    return found


def _post_text(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_open_forum(values["forum"]), *_write_post(values["title"], values["body"]), stop()]
    return TASKS.built(plan, program(*_post_checks(values["title"], values["body"])))


def _post_link_instances(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for forum in _forums(seed):
        rng = _rng("post_link", forum["name"])
        title, _ = _new_post("post_link", forum["name"], _things(forum["name"]))
        link = f"https://{rng.choice(LINK_HOSTS)}/{forum['name']}/{rng.randint(100, 999)}"
        found.append({"forum": forum["name"], "title": title, "url": link})
    return found


def _post_link(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_open_forum(values["forum"]), *_write_post(values["title"], link=values["url"]), stop()]
    return TASKS.built(plan, program(*_post_checks(values["title"], link=values["url"])))


def _same_forum_instances(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for post in _posts(seed):
        title, body = _new_post("post_same_forum", str(post["id"]), _things(post["forum"]))
        found.append({"other": post["title"], "title": title, "body": body})
    return found


def _same_forum(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    forum = _post(seed, values["other"])["forum"]
    plan = [*_open_post(values["other"]), click("link", f"f/{forum}"), *_write_post(values["title"], values["body"])]
    return TASKS.built([*plan, stop()], program(*_post_checks(values["title"], values["body"])))


def _repost_instances(seed: sqlite3.Connection, links: bool) -> list[Values]:
    found = []
    names = [forum["name"] for forum in _forums(seed)]
    for post in _posts(seed):
        if bool(post["url"]) == links and (links or post["body"]):
            others = [name for name in names if name != post["forum"]]
            found.append(
                {
                    "title": post["title"],
                    "source": post["forum"],
                    "target": _rng("repost", post["title"]).choice(others),
                }
            )
    return found


def _repost(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    plan = [*_open_post(values["title"]), *_open_forum(values["target"])]
    plan += _write_post(post["title"], post["body"], post["url"])
    return TASKS.built([*plan, stop()], program(*_post_checks(post["title"], post["body"], post["url"])))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "post_text",
        "state",
        'Create a post in the forum {{forum}} titled "{{title}}" with the text "{{body}}".',
        _post_text_instances,
        _post_text,
    ),
    TASKS.template(
        "post_link",
        "state",
        'Share the link {{url}} in the forum {{forum}} with the title "{{title}}".',
        _post_link_instances,
        _post_link,
    ),
    TASKS.template(
        "post_same_forum",
        "state",
        'Post "{{title}}" with the text "{{body}}" in the same forum as the post titled "{{other}}".',
        _same_forum_instances,
        _same_forum,
    ),
    TASKS.template(
        "repost_text",
        "state",
        'Repost the post titled "{{title}}" from f/{{source}} to f/{{target}}, with the same title and text.',
        lambda seed: _repost_instances(seed, links=False),
        _repost,
    ),
    TASKS.template(
        "repost_link",
        "state",
        'Share the link of the post titled "{{title}}" from f/{{source}} in f/{{target}}, with the same title.',
        lambda seed: _repost_instances(seed, links=True),
        _repost,
    ),
]
