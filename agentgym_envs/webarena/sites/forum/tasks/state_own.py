"""The forum's task templates of state changes: the signed-in user's own posts and comments, edited or deleted."""

from __future__ import annotations

import sqlite3
from typing import Any

from agentgym_envs.webarena.sites.forum.db import DELETED, ME_ID
from agentgym_envs.webarena.sites.forum.tasks.common import (
    TASKS,
    _comment,
    _my_posts,
    _new_post,
    _open_post,
    _post,
    _post_checks,
    _post_url,
    _things,
    _thread,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, check, click, program, stop, text_of, type_text


def _my_single_comments(seed: sqlite3.Connection) -> list[Values]:
    """Posts where the signed-in user has exactly one (live) comment."""
    rows = seed.execute(
        "SELECT s.title FROM comments c JOIN submissions s ON s.id = c.submission_id WHERE c.user_id = ? "
        "AND NOT c.deleted GROUP BY s.id HAVING COUNT(*) = 1 ORDER BY s.id",
        (ME_ID,),
    )
    return [{"title": row["title"]} for row in rows]


def _my_comment(seed: sqlite3.Connection, title: str) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The post, the signed-in user's only comment on it, and the comment's index among the "Edit comment"
    links of the post's page (0: the user has one comment there)."""
    post = _post(seed, title)
    mine = [c for c in _thread(seed, post["id"]) if c["user_id"] == ME_ID and not c["deleted"]]
    return post, mine[0], 0


def _my_text_post_instances(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for post in _my_posts(seed, text_only=True):
        _, body = _new_post("edit_body", post["title"], _things(post["forum"]))
        found.append({"title": post["title"], "body": f"{body} (updated)"})
    return found


def _edit_body(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    plan = [
        *_open_post(values["title"]),
        click("link", "Edit post"),
        type_text("textbox", "Body", values["body"], enter=False),
    ]
    plan += [click("button", "Save changes"), stop()]
    return TASKS.built(plan, program(*_post_checks(values["title"], values["body"], page=_post_url(post))))


def _retitle_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"old": post["title"], "new": f"{post['title']} [update]"} for post in _my_posts(seed)]


def _retitle(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["old"])
    plan = [
        *_open_post(values["old"]),
        click("link", "Edit post"),
        type_text("textbox", "Title", values["new"], enter=False),
    ]
    plan += [click("button", "Save changes"), stop()]
    return TASKS.built(plan, program(*_post_checks(values["new"], page=_post_url(post))))


def _my_post_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": post["title"]} for post in _my_posts(seed)]


def _delete_post(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    plan = [*_open_post(values["title"]), click("button", "Delete post"), stop()]
    return TASKS.built(plan, program(check(_post_url(post), text_of("h1"), exact_match="Page not found")))


def _edit_comment_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{**v, "text": _comment("edit_comment", v["title"])} for v in _my_single_comments(seed)]


def _comment_body_check(post: dict[str, Any], comment: dict[str, Any], text: str) -> dict[str, Any]:
    page = f"{_post_url(post)}/-/comment/{comment['id']}"
    return check(page, text_of(f"#comment-{comment['id']} .comment__body"), exact_match=text)


def _edit_comment(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post, comment, index = _my_comment(seed, values["title"])
    plan = [*_open_post(values["title"]), click("link", "Edit comment", nth=index)]
    plan += [type_text("textbox", "Comment", values["text"], enter=False), click("button", "Save comment"), stop()]
    return TASKS.built(plan, program(_comment_body_check(post, comment, values["text"])))


def _delete_comment(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post, comment, index = _my_comment(seed, values["title"])
    plan = [*_open_post(values["title"]), click("button", "Delete comment", nth=index), stop()]
    return TASKS.built(plan, program(_comment_body_check(post, comment, DELETED)))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "edit_post_body",
        "state",
        'Change the text of your post titled "{{title}}" to "{{body}}".',
        _my_text_post_instances,
        _edit_body,
    ),
    TASKS.template(
        "retitle_post", "state", 'Rename your post titled "{{old}}" to "{{new}}".', _retitle_instances, _retitle
    ),
    TASKS.template("delete_post", "state", 'Delete your post titled "{{title}}".', _my_post_instances, _delete_post),
    TASKS.template(
        "edit_comment",
        "state",
        'Change your comment on the post titled "{{title}}" to "{{text}}".',
        _edit_comment_instances,
        _edit_comment,
    ),
    TASKS.template(
        "delete_comment",
        "state",
        'Delete your comment on the post titled "{{title}}".',
        _my_single_comments,
        _delete_comment,
    ),
]
