"""The forum's task templates of state changes: comments and replies."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from agentgym_envs.webarena.sites.forum.tasks.common import (
    TASKS,
    _comment,
    _comment_by,
    _comments_by_others,
    _listing,
    _my_posts,
    _open_forum,
    _open_post,
    _open_user,
    _post,
    _post_url,
    _posts,
    _thread,
    _top_comment_instances,
    _unique_top,
    _user_posts,
    _users_with_posts,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, check, click, program, stop, text_of, type_text


def _write_comment(text: str) -> list[dict[str, Any]]:
    return [type_text("textbox", "Comment", text, enter=False), click("button", "Post comment")]


def _reply(index: int, text: str) -> list[dict[str, Any]]:
    return [
        click("link", "Reply", nth=index),
        type_text("textbox", "Reply", text, enter=False),
        click("button", "Post reply"),
    ]


def _comment_on_post_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": post["title"], "text": _comment("comment", post["title"])} for post in _posts(seed)]


def _comment_on_post(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    plan = [*_open_post(values["title"]), *_write_comment(values["text"]), stop()]
    return TASKS.built(plan, program(check(_post_url(post), text_of("#comments"), must=[values["text"]])))


def _listing_comment_instances(sort: str) -> Callable[[sqlite3.Connection], list[Values]]:
    def instances(seed: sqlite3.Connection) -> list[Values]:
        return [{"forum": v["forum"], "text": _comment(f"listing_{sort}", v["forum"])} for v in _unique_top(seed, sort)]

    return instances


def _listing_comment(sort: str) -> Callable[[sqlite3.Connection, Values], dict[str, Any]]:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        post = _listing(seed, values["forum"], sort)[0]
        plan = _open_forum(values["forum"]) + ([click("link", sort.capitalize())] if sort != "hot" else [])
        plan += [click("link", post["title"]), *_write_comment(values["text"]), stop()]
        return TASKS.built(plan, program(check(_post_url(post), text_of("#comments"), must=[values["text"]])))

    return build


def _latest_of_user_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"user": user, "text": _comment("latest_of_user", user)} for user in _users_with_posts(seed, 2)]


def _comment_latest_of_user(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _user_posts(seed, values["user"])[0]
    plan = [*_open_user(seed, values["user"]), click("link", post["title"]), *_write_comment(values["text"]), stop()]
    return TASKS.built(plan, program(check(_post_url(post), text_of("#comments"), must=[values["text"]])))


def _reply_by_user_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{**v, "text": _comment("reply_user", v["title"])} for v in _comments_by_others(seed, unvoted=False)]


def _reply_check(post: dict[str, Any], comment: dict[str, Any], text: str) -> dict[str, Any]:
    return check(f"{_post_url(post)}/-/comment/{comment['id']}", text_of("#thread"), must=[text])


def _reply_by_user(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post, comment, index = _comment_by(seed, values)
    plan = [*_open_post(values["title"]), *_reply(index, values["text"]), stop()]
    return TASKS.built(plan, program(_reply_check(post, comment, values["text"])))


def _reply_top_comment(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    comment = _thread(seed, post["id"])[0]
    plan = [*_open_post(values["title"]), *_reply(0, values["text"]), stop()]
    return TASKS.built(plan, program(_reply_check(post, comment, values["text"])))


def _newest_on_mine_instances(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for post in _my_posts(seed):
        comments = sorted(_thread(seed, post["id"]), key=lambda c: c["created"], reverse=True)
        if comments and (len(comments) == 1 or comments[0]["created"] != comments[1]["created"]):
            found.append({"title": post["title"], "text": _comment("newest_on_mine", post["title"])})
    return found


def _reply_newest_on_mine(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    comments = _thread(seed, post["id"])
    newest = max(comments, key=lambda c: c["created"])
    plan = [*_open_post(values["title"]), *_reply(comments.index(newest), values["text"]), stop()]
    return TASKS.built(plan, program(_reply_check(post, newest, values["text"])))


def _score_comment_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": post["title"]} for post in _posts(seed)]


def _score_comment(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    text = f"Score: {post['score']}"
    plan = [*_open_post(values["title"]), *_write_comment(text), stop()]
    return TASKS.built(plan, program(check(_post_url(post), text_of("#comments"), must=[text])))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "comment_on_post",
        "state",
        'Comment "{{text}}" on the post titled "{{title}}".',
        _comment_on_post_instances,
        _comment_on_post,
    ),
    TASKS.template(
        "comment_on_top_post",
        "state",
        'Comment "{{text}}" on the top post of all time in the forum {{forum}}.',
        _listing_comment_instances("top"),
        _listing_comment("top"),
    ),
    TASKS.template(
        "comment_on_newest_post",
        "state",
        'Comment "{{text}}" on the newest post in the forum {{forum}}.',
        _listing_comment_instances("new"),
        _listing_comment("new"),
    ),
    TASKS.template(
        "comment_on_hot_post",
        "state",
        'Comment "{{text}}" on the hottest post in the forum {{forum}}.',
        _listing_comment_instances("hot"),
        _listing_comment("hot"),
        held_out=True,
    ),
    TASKS.template(
        "comment_on_latest_of_user",
        "state",
        'Comment "{{text}}" on the most recent post of the user {{user}}.',
        _latest_of_user_instances,
        _comment_latest_of_user,
    ),
    TASKS.template(
        "reply_to_user",
        "state",
        'Reply "{{text}}" to the comment of {{user}} on the post titled "{{title}}".',
        _reply_by_user_instances,
        _reply_by_user,
    ),
    TASKS.template(
        "reply_to_top_comment",
        "state",
        'Reply "{{text}}" to the top comment on the post titled "{{title}}".',
        _top_comment_instances,
        _reply_top_comment,
    ),
    TASKS.template(
        "reply_to_newest_on_mine",
        "state",
        'Reply "{{text}}" to the most recent comment on your post titled "{{title}}".',
        _newest_on_mine_instances,
        _reply_newest_on_mine,
    ),
    TASKS.template(
        "comment_score",
        "state",
        'Comment on the post titled "{{title}}" with its current score, written as "Score: N".',
        _score_comment_instances,
        _score_comment,
    ),
]
