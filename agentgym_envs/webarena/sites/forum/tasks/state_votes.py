"""The forum's task templates of state changes: votes."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from agentgym_envs.webarena.sites.forum.tasks.common import (
    TASKS,
    _all_posts,
    _comment_by,
    _comments_by_others,
    _listing,
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
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, check, click, program, stop, text_of


def _score_check(post: dict[str, Any], delta: int) -> dict[str, Any]:
    return check(_post_url(post), text_of("#submission-score"), exact_match=str(post["score"] + delta))


def _comment_score_check(post: dict[str, Any], comment: dict[str, Any], delta: int) -> dict[str, Any]:
    page = f"{_post_url(post)}/-/comment/{comment['id']}"
    return check(page, text_of(f"#comment-{comment['id']} .comment__score"), exact_match=str(comment["score"] + delta))


def _unvoted_posts(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": post["title"]} for post in _posts(seed) if post["my_vote"] == 0]


def _vote_post(direction: str) -> Callable[[sqlite3.Connection, Values], dict[str, Any]]:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        post = _post(seed, values["title"])
        button = "Upvote" if direction == "up" else "Downvote"
        plan = [*_open_post(values["title"]), click("button", button), stop()]
        return TASKS.built(plan, program(_score_check(post, 1 if direction == "up" else -1)))

    return build


def _vote_listing(sort: str, direction: str) -> Callable[[sqlite3.Connection, Values], dict[str, Any]]:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        post = _listing(seed, values["forum"], sort)[0]
        plan = _open_forum(values["forum"]) + ([click("link", sort.capitalize())] if sort != "hot" else [])
        plan += [click("button", "Upvote" if direction == "up" else "Downvote"), stop()]
        return TASKS.built(plan, program(_score_check(post, 1 if direction == "up" else -1)))

    return build


def _latest_unvoted_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"user": user} for user in _users_with_posts(seed, 2) if not _user_posts(seed, user)[0]["my_vote"]]


def _upvote_latest_of_user(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _user_posts(seed, values["user"])[0]
    plan = [*_open_user(seed, values["user"]), click("button", "Upvote"), stop()]
    return TASKS.built(plan, program(_score_check(post, 1)))


def _all_of_user_instances(seed: sqlite3.Connection) -> list[Values]:
    users = _users_with_posts(seed, 2, 4)
    return [{"user": user} for user in users if not any(p["my_vote"] for p in _user_posts(seed, user))]


def _upvote_all_of_user(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    posts = _user_posts(seed, values["user"])
    plan = [*_open_user(seed, values["user"]), *[click("button", "Upvote", nth=i) for i in range(len(posts))], stop()]
    return TASKS.built(plan, program(*[_score_check(post, 1) for post in posts]))


def _vote_comment(direction: str) -> Callable[[sqlite3.Connection, Values], dict[str, Any]]:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        post, comment, index = _comment_by(seed, values)
        delta = 1 if direction == "up" else -1
        plan = [*_open_post(values["title"]), click("button", "Upvote" if delta > 0 else "Downvote", nth=index + 1)]
        return TASKS.built([*plan, stop()], program(_comment_score_check(post, comment, delta)))

    return build


def _top_comment_vote_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": v["title"]} for v in _top_comment_instances(seed)]


def _upvote_top_comment(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    comment = _thread(seed, post["id"])[0]
    plan = [*_open_post(values["title"]), click("button", "Upvote", nth=1), stop()]
    return TASKS.built(plan, program(_comment_score_check(post, comment, 1)))


def _my_upvoted_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": post["title"]} for post in reversed(_all_posts(seed)) if post["my_vote"] == 1]


def _retract(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    plan = [*_open_post(values["title"]), click("button", "Upvote"), stop()]
    return TASKS.built(plan, program(_score_check(post, -1)))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template("upvote_post", "state", 'Upvote the post titled "{{title}}".', _unvoted_posts, _vote_post("up")),
    TASKS.template(
        "downvote_post", "state", 'Downvote the post titled "{{title}}".', _unvoted_posts, _vote_post("down")
    ),
    TASKS.template(
        "upvote_top_post",
        "state",
        "Upvote the top post of all time in the forum {{forum}}.",
        lambda seed: [{"forum": v["forum"]} for v in _unique_top(seed, "top")],
        _vote_listing("top", "up"),
    ),
    TASKS.template(
        "upvote_newest_post",
        "state",
        "Upvote the newest post in the forum {{forum}}.",
        lambda seed: [{"forum": v["forum"]} for v in _unique_top(seed, "new")],
        _vote_listing("new", "up"),
    ),
    TASKS.template(
        "downvote_hot_post",
        "state",
        "Downvote the hottest post in the forum {{forum}}.",
        lambda seed: [{"forum": v["forum"]} for v in _unique_top(seed, "hot")],
        _vote_listing("hot", "down"),
    ),
    TASKS.template(
        "upvote_latest_of_user",
        "state",
        "Upvote the most recent post of the user {{user}}.",
        _latest_unvoted_instances,
        _upvote_latest_of_user,
    ),
    TASKS.template(
        "upvote_all_of_user",
        "state",
        "Upvote every post of the user {{user}}.",
        _all_of_user_instances,
        _upvote_all_of_user,
        held_out=True,
    ),
    TASKS.template(
        "upvote_comment",
        "state",
        'Upvote the comment of {{user}} on the post titled "{{title}}".',
        _comments_by_others,
        _vote_comment("up"),
    ),
    TASKS.template(
        "downvote_comment",
        "state",
        'Downvote the comment of {{user}} on the post titled "{{title}}".',
        _comments_by_others,
        _vote_comment("down"),
    ),
    TASKS.template(
        "upvote_top_comment",
        "state",
        'Upvote the top comment on the post titled "{{title}}".',
        _top_comment_vote_instances,
        _upvote_top_comment,
    ),
    TASKS.template(
        "retract_upvote",
        "state",
        'Take back your upvote of the post titled "{{title}}".',
        _my_upvoted_instances,
        _retract,
    ),
]
