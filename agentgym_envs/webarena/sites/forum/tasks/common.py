"""What the forum's task templates share: the site's `TASKS` vocabulary, reading the seed data and
the expert's ways through the site."""

from __future__ import annotations

import functools
import random
import sqlite3
import zlib
from typing import Any

from agentgym_envs.webarena.sites.forum.db import ME_ID, order, submissions, thread
from agentgym_envs.webarena.sites.forum.seed import FORUMS
from agentgym_envs.webarena.tasks.templates import SiteTasks, Values, check, click, text_of, type_text

SITE = "reddit"
ROOT = "__REDDIT__"
#: The page of the post the episode ends on (WebArena's way of finding a post made during the task).
LAST_POST = "func:reddit_get_post_url('__last_url__')"
#: Most instances a template lists (the splits take at most 60 for train).
LIMIT = 80
#: The vocabulary of the site's templates.
TASKS = SiteTasks(SITE, ROOT, limit=LIMIT)

NEW_TITLES = [
    "Just wanted to share my {thing}",
    "Question about {thing}s for beginners",
    "Finally tried a {thing} today",
    "Does anyone else collect {thing}s?",
    "My {thing} journey so far",
    "Tips for a first {thing}?",
]
NEW_BODIES = [
    "It went better than I expected.",
    "Happy to answer questions about it.",
    "I would love to hear your suggestions.",
    "Thanks to this forum for the encouragement.",
    "Pictures coming once the light is better.",
]
NEW_COMMENTS = [
    "Thanks, this is exactly what I needed",
    "I will try this next weekend",
    "Great point, I had not thought of that",
    "Could not agree more",
    "This deserves more attention",
    "Interesting, do you have a source for that",
    "Congratulations, it looks wonderful",
    "I learned something new today",
]


def _rng(template: str, key: str) -> random.Random:
    """A generator of its own for each template and instance (CRC-32 seeding: cheap and the same everywhere)."""
    return random.Random(zlib.crc32(f"{template}:{key}".encode()))


def _things(forum: str) -> list[str]:
    """The things the posts of a seeded forum talk about."""
    return next(entry[3] for entry in FORUMS if entry[0] == forum)


def _digits(template: str, key: str) -> int:
    """A number of many digits fixed by the template and instance: each pick below uses a few of them."""
    return zlib.crc32(f"{template}:{key}".encode()) * 7919


def _new_post(template: str, key: str, things: list[str]) -> tuple[str, str]:
    n = _digits(template, key)
    title = NEW_TITLES[n % len(NEW_TITLES)].format(thing=things[n // 7 % len(things)])
    return f"{title} ({n // 53 % 98 + 2})", NEW_BODIES[n // 4001 % len(NEW_BODIES)]


def _comment(template: str, key: str) -> str:
    n = _digits(template, key)
    return f"{NEW_COMMENTS[n % len(NEW_COMMENTS)]} ({n // 11 % 98 + 2})"


# ---- seed queries ------------------------------------------------------------------------------
def _forums(seed: sqlite3.Connection, where: str = "1", args: tuple = ()) -> list[sqlite3.Row]:
    """Forums (with `subscribed`) in id order; `where` is SQL over `f` and the subscription `s`."""
    return seed.execute(
        "SELECT f.*, s.forum_id IS NOT NULL AS subscribed FROM forums f LEFT JOIN subscriptions s ON s.forum_id = f.id "
        f"WHERE {where} ORDER BY f.id",
        args,
    ).fetchall()


def _forum(seed: sqlite3.Connection, name: str) -> sqlite3.Row:
    return _forums(seed, "f.name = ?", (name,))[0]


@functools.lru_cache(maxsize=8)
def _all_posts(seed: sqlite3.Connection) -> tuple[dict[str, Any], ...]:
    """Every post, newest first (the seed data never changes, so it is read once per connection)."""
    return tuple(submissions(seed, "1", (), "new"))


@functools.lru_cache(maxsize=8)
def _by_title(seed: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    return {post["title"]: post for post in _all_posts(seed)}


@functools.lru_cache(maxsize=4096)
def _thread(seed: sqlite3.Connection, submission_id: int) -> tuple[dict[str, Any], ...]:
    return tuple(thread(seed, submission_id))


@functools.lru_cache(maxsize=8)
def _grouped(seed: sqlite3.Connection, key: str) -> dict[str, list[dict[str, Any]]]:
    """Posts by the value of `key` (forum, author), newest first."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for post in _all_posts(seed):
        groups.setdefault(post[key], []).append(post)
    return groups


def _listing(seed: sqlite3.Connection, forum: str, sort: str) -> list[dict[str, Any]]:
    return order(_grouped(seed, "forum").get(forum, []), sort)


def _post(seed: sqlite3.Connection, title: str) -> dict[str, Any]:
    return _by_title(seed)[title]


def _posts(seed: sqlite3.Connection) -> list[dict[str, Any]]:
    """Posts in id order, one in three (and all of the signed-in user's) so instances spread over the site."""
    return [post for post in reversed(_all_posts(seed)) if post["id"] % 3 == 0 or post["user_id"] == ME_ID]


def _post_url(post: dict[str, Any]) -> str:
    return f"{ROOT}/f/{post['forum']}/{post['id']}"


def _user_posts(seed: sqlite3.Connection, user: str) -> list[dict[str, Any]]:
    return list(_grouped(seed, "author").get(user, []))


# ---- plan pieces -------------------------------------------------------------------------------
def _open_forum(name: str) -> list[dict[str, Any]]:
    return [click("link", "Forums"), click("link", name)]


def _open_post(title: str) -> list[dict[str, Any]]:
    return [type_text("searchbox", "Search", title), click("link", title)]


def _open_user(seed: sqlite3.Connection, user: str) -> list[dict[str, Any]]:
    """To a user's profile: search the user's oldest post and follow its author link."""
    return [*_open_post(_user_posts(seed, user)[-1]["title"]), click("link", user)]


def _write_post(title: str, body: str = "", link: str = "") -> list[dict[str, Any]]:
    steps = [click("link", "Submit a new post"), type_text("textbox", "Title", title, enter=False)]
    if link:
        steps.append(type_text("textbox", "URL", link, enter=False))
    if body:
        steps.append(type_text("textbox", "Body", body, enter=False))
    return [*steps, click("button", "Create submission")]


def _post_checks(title: str, body: str = "", link: str = "", page: str = LAST_POST) -> list[dict[str, Any]]:
    checks = [check(page, text_of("#submission-title"), exact_match=title)]
    if body:
        checks.append(check(page, text_of("#submission-body"), exact_match=body))
    if link:
        checks.append(check(page, text_of("#submission-link"), exact_match=link))
    return checks


# ---- instances shared by several templates ----------------------------------------------------
def _unique_top(seed: sqlite3.Connection, sort: str) -> list[Values]:
    """Forums whose first post under `sort` is unambiguous (the signed-in user has not voted on it)."""
    found = []
    for forum in _forums(seed):
        listed = _listing(seed, forum["name"], sort)
        key = {"top": "score", "new": "created"}.get(sort)
        if len(listed) >= 2 and listed[0]["my_vote"] == 0 and (key is None or listed[0][key] != listed[1][key]):
            found.append({"forum": forum["name"], "title": listed[0]["title"]})
    return found


def _comments_by_others(seed: sqlite3.Connection, unvoted: bool = True) -> list[Values]:
    """(post, user): a user with exactly one comment on a post (so "the comment by user" is one)."""
    found = []
    for post in _posts(seed):
        comments = _thread(seed, post["id"])
        for comment in comments:
            authored = [c for c in comments if c["user_id"] == comment["user_id"]]
            if comment["user_id"] != ME_ID and len(authored) == 1 and not (unvoted and comment["my_vote"]):
                found.append({"title": post["title"], "user": comment["author"]})
                break
    return found


def _comment_by(seed: sqlite3.Connection, values: Values) -> tuple[dict[str, Any], dict[str, Any], int]:
    post = _post(seed, values["title"])
    comments = _thread(seed, post["id"])
    index = next(i for i, c in enumerate(comments) if c["author"] == values["user"])
    return post, comments[index], index


def _forum_values(seed: sqlite3.Connection, where: str = "1") -> list[Values]:
    return [{"forum": forum["name"]} for forum in _forums(seed, where)]


def _users_with_posts(seed: sqlite3.Connection, least: int, most: int = 99) -> list[str]:
    return [
        row["username"]
        for row in seed.execute(
            "SELECT u.username, COUNT(*) AS n FROM users u JOIN submissions s ON s.user_id = u.id "
            "WHERE u.id != ? GROUP BY u.id HAVING n BETWEEN ? AND ? ORDER BY u.id",
            (ME_ID, least, most),
        )
    ]


def _my_posts(seed: sqlite3.Connection, text_only: bool = False) -> list[dict[str, Any]]:
    return [p for p in reversed(_all_posts(seed)) if p["user_id"] == ME_ID and not (text_only and p["url"])]


def _top_comment_instances(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for post in _posts(seed):
        top = [c for c in _thread(seed, post["id"]) if c["depth"] == 0]
        if len(top) >= 2 and top[0]["score"] > top[1]["score"] and not top[0]["my_vote"]:
            found.append({"title": post["title"], "text": _comment("top_comment", post["title"])})
    return found
