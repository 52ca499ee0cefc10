"""The forum's task templates (WebArena site `reddit`), in WebArena's forum proportions: about 9%
information seeking, no navigation, 89% state changes (checked by `program_html` on the page that
shows the record), 2% unachievable.

Answers and targets come from the seed data through the same queries the pages use (`db.submissions`,
`db.thread`); texts to type are drawn per instance from the word lists below by a generator seeded
with the template and the instance, so every build is the same. Expert plans go as a user goes: the
forum list, a forum and its sort links, the search box, a post, its buttons and forms.
"""

from __future__ import annotations

import functools
import random
import sqlite3
import zlib
from collections.abc import Callable
from typing import Any

from agentgym_envs.webarena.sites.forum.db import DELETED, ME_ID, order, submissions, thread
from agentgym_envs.webarena.sites.forum.seed import ADJECTIVES, FORUMS, ME, NOUNS
from agentgym_envs.webarena.tasks.templates import (
    TaskTemplate,
    Values,
    check,
    click,
    exact,
    not_achievable,
    program,
    stop,
    type_text,
)

SITE = "reddit"
ROOT = "__REDDIT__"
#: The page of the post the episode ends on (WebArena's way of finding a post made during the task).
LAST_POST = "func:reddit_get_post_url('__last_url__')"
#: Most instances a template lists (the splits take at most 60 for train).
LIMIT = 80

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
NEW_BIOS = [
    "Weekend {thing} enthusiast and coffee drinker",
    "Here for the {thing} threads",
    "I mostly lurk in the {thing} discussions",
    "Learning something new about {thing}s every day",
]
LINK_HOSTS = ["news.example", "blog.example", "video.example"]


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


def _write_comment(text: str) -> list[dict[str, Any]]:
    return [type_text("textbox", "Comment", text, enter=False), click("button", "Post comment")]


def _reply(index: int, text: str) -> list[dict[str, Any]]:
    return [
        click("link", "Reply", nth=index),
        type_text("textbox", "Reply", text, enter=False),
        click("button", "Post reply"),
    ]


# ---- checks ------------------------------------------------------------------------------------
def _text_of(selector: str) -> str:
    return f"document.querySelector('{selector}').outerText"


def _post_checks(title: str, body: str = "", link: str = "", page: str = LAST_POST) -> list[dict[str, Any]]:
    checks = [check(page, _text_of("#submission-title"), exact_match=title)]
    if body:
        checks.append(check(page, _text_of("#submission-body"), exact_match=body))
    if link:
        checks.append(check(page, _text_of("#submission-link"), exact_match=link))
    return checks


def _score_check(post: dict[str, Any], delta: int) -> dict[str, Any]:
    return check(_post_url(post), _text_of("#submission-score"), exact_match=str(post["score"] + delta))


def _comment_score_check(post: dict[str, Any], comment: dict[str, Any], delta: int) -> dict[str, Any]:
    page = f"{_post_url(post)}/-/comment/{comment['id']}"
    return check(page, _text_of(f"#comment-{comment['id']} .comment__score"), exact_match=str(comment["score"] + delta))


def _subscription_check(forum: str, subscribed: bool) -> dict[str, Any]:
    return check(
        f"{ROOT}/f/{forum}", _text_of("#subscription"), exact_match="Unsubscribe" if subscribed else "Subscribe"
    )


def _built(plan: list[dict[str, Any]], evaluation: dict[str, Any], start: str = ROOT) -> dict[str, Any]:
    return {"start_url": start, "eval": evaluation, "agentgym_expert": plan}


def _template(
    slug: str,
    kind: str,
    intent: str,
    instances: Callable[[sqlite3.Connection], list[Values]],
    build: Callable[[sqlite3.Connection, Values], dict[str, Any]],
    held_out: bool = False,
) -> TaskTemplate:
    return TaskTemplate(f"{SITE}.{slug}", SITE, kind, intent, lambda seed: instances(seed)[:LIMIT], build, held_out)


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


def _unvoted_posts(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": post["title"]} for post in _posts(seed) if post["my_vote"] == 0]


def _posts_with_comments(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": post["title"]} for post in _posts(seed) if post["comment_count"]]


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


# ---- information seeking -----------------------------------------------------------------------
def _top_title(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    title = _listing(seed, values["forum"], "top")[0]["title"]
    return _built([*_open_forum(values["forum"]), click("link", "Top"), stop(title)], exact(title))


def _top_instances(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for forum in _forums(seed):
        listed = _listing(seed, forum["name"], "top")
        if len(listed) >= 2 and listed[0]["score"] != listed[1]["score"]:
            found.append({"forum": forum["name"]})
    return found


def _post_count(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    count = str(len(_user_posts(seed, values["user"])))
    return _built([*_open_user(seed, values["user"]), stop(count)], exact(count))


def _subscribers(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    count = str(_forum(seed, values["forum"])["subscribers"])
    return _built([*_open_forum(values["forum"]), stop(count)], exact(count))


def _comment_count(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    count = str(_post(seed, values["title"])["comment_count"])
    return _built([*_open_post(values["title"]), stop(count)], exact(count))


def _email(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _built([*_open_user(seed, values["user"]), stop("N/A")], not_achievable())


# ---- posts -------------------------------------------------------------------------------------
def _post_text_instances(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for forum in _forums(seed):
        title, body = _new_post("post_text", forum["name"], _things(forum["name"]))
        found.append({"forum": forum["name"], "title": title, "body": body})
    return found


def _post_text(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_open_forum(values["forum"]), *_write_post(values["title"], values["body"]), stop()]
    return _built(plan, program(*_post_checks(values["title"], values["body"])))


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
    return _built(plan, program(*_post_checks(values["title"], link=values["url"])))


def _same_forum_instances(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for post in _posts(seed):
        title, body = _new_post("post_same_forum", str(post["id"]), _things(post["forum"]))
        found.append({"other": post["title"], "title": title, "body": body})
    return found


def _same_forum(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    forum = _post(seed, values["other"])["forum"]
    plan = [*_open_post(values["other"]), click("link", f"f/{forum}"), *_write_post(values["title"], values["body"])]
    return _built([*plan, stop()], program(*_post_checks(values["title"], values["body"])))


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
    return _built([*plan, stop()], program(*_post_checks(post["title"], post["body"], post["url"])))


# ---- comments ----------------------------------------------------------------------------------
def _comment_on_post_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": post["title"], "text": _comment("comment", post["title"])} for post in _posts(seed)]


def _comment_on_post(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    plan = [*_open_post(values["title"]), *_write_comment(values["text"]), stop()]
    return _built(plan, program(check(_post_url(post), _text_of("#comments"), must=[values["text"]])))


def _listing_comment_instances(sort: str) -> Callable[[sqlite3.Connection], list[Values]]:
    def instances(seed: sqlite3.Connection) -> list[Values]:
        return [{"forum": v["forum"], "text": _comment(f"listing_{sort}", v["forum"])} for v in _unique_top(seed, sort)]

    return instances


def _listing_comment(sort: str) -> Callable[[sqlite3.Connection, Values], dict[str, Any]]:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        post = _listing(seed, values["forum"], sort)[0]
        plan = _open_forum(values["forum"]) + ([click("link", sort.capitalize())] if sort != "hot" else [])
        plan += [click("link", post["title"]), *_write_comment(values["text"]), stop()]
        return _built(plan, program(check(_post_url(post), _text_of("#comments"), must=[values["text"]])))

    return build


def _latest_of_user_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"user": user, "text": _comment("latest_of_user", user)} for user in _users_with_posts(seed, 2)]


def _comment_latest_of_user(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _user_posts(seed, values["user"])[0]
    plan = [*_open_user(seed, values["user"]), click("link", post["title"]), *_write_comment(values["text"]), stop()]
    return _built(plan, program(check(_post_url(post), _text_of("#comments"), must=[values["text"]])))


def _reply_by_user_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{**v, "text": _comment("reply_user", v["title"])} for v in _comments_by_others(seed, unvoted=False)]


def _reply_check(post: dict[str, Any], comment: dict[str, Any], text: str) -> dict[str, Any]:
    return check(f"{_post_url(post)}/-/comment/{comment['id']}", _text_of("#thread"), must=[text])


def _reply_by_user(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post, comment, index = _comment_by(seed, values)
    plan = [*_open_post(values["title"]), *_reply(index, values["text"]), stop()]
    return _built(plan, program(_reply_check(post, comment, values["text"])))


def _top_comment_instances(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for post in _posts(seed):
        top = [c for c in _thread(seed, post["id"]) if c["depth"] == 0]
        if len(top) >= 2 and top[0]["score"] > top[1]["score"] and not top[0]["my_vote"]:
            found.append({"title": post["title"], "text": _comment("top_comment", post["title"])})
    return found


def _reply_top_comment(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    comment = _thread(seed, post["id"])[0]
    plan = [*_open_post(values["title"]), *_reply(0, values["text"]), stop()]
    return _built(plan, program(_reply_check(post, comment, values["text"])))


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
    return _built(plan, program(_reply_check(post, newest, values["text"])))


def _score_comment_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": post["title"]} for post in _posts(seed)]


def _score_comment(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    text = f"Score: {post['score']}"
    plan = [*_open_post(values["title"]), *_write_comment(text), stop()]
    return _built(plan, program(check(_post_url(post), _text_of("#comments"), must=[text])))


# ---- votes -------------------------------------------------------------------------------------
def _vote_post(direction: str) -> Callable[[sqlite3.Connection, Values], dict[str, Any]]:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        post = _post(seed, values["title"])
        button = "Upvote" if direction == "up" else "Downvote"
        plan = [*_open_post(values["title"]), click("button", button), stop()]
        return _built(plan, program(_score_check(post, 1 if direction == "up" else -1)))

    return build


def _vote_listing(sort: str, direction: str) -> Callable[[sqlite3.Connection, Values], dict[str, Any]]:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        post = _listing(seed, values["forum"], sort)[0]
        plan = _open_forum(values["forum"]) + ([click("link", sort.capitalize())] if sort != "hot" else [])
        plan += [click("button", "Upvote" if direction == "up" else "Downvote"), stop()]
        return _built(plan, program(_score_check(post, 1 if direction == "up" else -1)))

    return build


def _latest_unvoted_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"user": user} for user in _users_with_posts(seed, 2) if not _user_posts(seed, user)[0]["my_vote"]]


def _upvote_latest_of_user(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _user_posts(seed, values["user"])[0]
    plan = [*_open_user(seed, values["user"]), click("button", "Upvote"), stop()]
    return _built(plan, program(_score_check(post, 1)))


def _all_of_user_instances(seed: sqlite3.Connection) -> list[Values]:
    users = _users_with_posts(seed, 2, 4)
    return [{"user": user} for user in users if not any(p["my_vote"] for p in _user_posts(seed, user))]


def _upvote_all_of_user(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    posts = _user_posts(seed, values["user"])
    plan = [*_open_user(seed, values["user"]), *[click("button", "Upvote", nth=i) for i in range(len(posts))], stop()]
    return _built(plan, program(*[_score_check(post, 1) for post in posts]))


def _vote_comment(direction: str) -> Callable[[sqlite3.Connection, Values], dict[str, Any]]:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        post, comment, index = _comment_by(seed, values)
        delta = 1 if direction == "up" else -1
        plan = [*_open_post(values["title"]), click("button", "Upvote" if delta > 0 else "Downvote", nth=index + 1)]
        return _built([*plan, stop()], program(_comment_score_check(post, comment, delta)))

    return build


def _top_comment_vote_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": v["title"]} for v in _top_comment_instances(seed)]


def _upvote_top_comment(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    comment = _thread(seed, post["id"])[0]
    plan = [*_open_post(values["title"]), click("button", "Upvote", nth=1), stop()]
    return _built(plan, program(_comment_score_check(post, comment, 1)))


def _my_upvoted_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": post["title"]} for post in reversed(_all_posts(seed)) if post["my_vote"] == 1]


def _retract(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    plan = [*_open_post(values["title"]), click("button", "Upvote"), stop()]
    return _built(plan, program(_score_check(post, -1)))


# ---- subscriptions -----------------------------------------------------------------------------
def _subscribe(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_open_forum(values["forum"]), click("button", "Subscribe"), stop()]
    return _built(plan, program(_subscription_check(values["forum"], True)))


def _unsubscribe(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_open_forum(values["forum"]), click("button", "Unsubscribe"), stop()]
    return _built(plan, program(_subscription_check(values["forum"], False)))


def _by_title_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": forum["title"]} for forum in _forums(seed, "s.forum_id IS NULL")]


def _subscribe_by_title(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    name = seed.execute("SELECT name FROM forums WHERE title = ?", (values["title"],)).fetchone()["name"]
    plan = [*_open_forum(name), click("button", "Subscribe"), stop()]
    return _built(plan, program(_subscription_check(name, True)))


def _forum_of_post_instances(seed: sqlite3.Connection) -> list[Values]:
    unsubscribed = {forum["name"] for forum in _forums(seed, "s.forum_id IS NULL")}
    return [{"title": post["title"]} for post in _posts(seed) if post["forum"] in unsubscribed]


def _subscribe_forum_of_post(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    forum = _post(seed, values["title"])["forum"]
    plan = [*_open_post(values["title"]), click("link", f"f/{forum}"), click("button", "Subscribe"), stop()]
    return _built(plan, program(_subscription_check(forum, True)))


def _pairs(seed: sqlite3.Connection, first: str, second: str) -> list[Values]:
    a = [forum["name"] for forum in _forums(seed, first)]
    b = [forum["name"] for forum in _forums(seed, second)]
    pairs = [(x, y) for x in a for y in b if x != y]
    _rng("pairs", first + second).shuffle(pairs)
    return [{"first": x, "second": y} for x, y in pairs]


def _subscribe_two(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_open_forum(values["first"]), click("button", "Subscribe")]
    plan += [*_open_forum(values["second"]), click("button", "Subscribe"), stop()]
    checks = [_subscription_check(values["first"], True), _subscription_check(values["second"], True)]
    return _built(plan, program(*checks))


def _switch(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_open_forum(values["first"]), click("button", "Unsubscribe")]
    plan += [*_open_forum(values["second"]), click("button", "Subscribe"), stop()]
    checks = [_subscription_check(values["first"], False), _subscription_check(values["second"], True)]
    return _built(plan, program(*checks))


# ---- biography ---------------------------------------------------------------------------------
def _bio_check(text: str | None = None, must: tuple[str, ...] = ()) -> dict[str, Any]:
    page = f"{ROOT}/user/{ME}"
    return (
        check(page, _text_of("#bio"), exact_match=text)
        if text is not None
        else check(page, _text_of("#bio"), must=must)
    )


def _bio_plan(text: str) -> list[dict[str, Any]]:
    return [
        click("link", "My profile"),
        click("link", "Edit biography"),
        type_text("textbox", "Biography", text, enter=False),
        click("button", "Save biography"),
    ]


def _bio_instances(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for forum in _forums(seed):
        rng = _rng("bio", forum["name"])
        found.append({"bio": rng.choice(NEW_BIOS).format(thing=rng.choice(_things(forum["name"])))})
    return list({v["bio"]: v for v in found}.values())


def _set_bio(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _built([*_bio_plan(values["bio"]), stop()], program(_bio_check(values["bio"])))


def _append_bio_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"text": f"Say hi in f/{forum['name']}."} for forum in _forums(seed)]


def _append_bio(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    old = seed.execute("SELECT bio FROM users WHERE id = ?", (ME_ID,)).fetchone()["bio"]
    plan = [*_bio_plan(f"{old} {values['text']}"), stop()]
    return _built(plan, program(_bio_check(must=(old, values["text"]))))


def _bio_description(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    description = _forum(seed, values["forum"])["description"]
    plan = [*_open_forum(values["forum"]), *_bio_plan(description), stop()]
    return _built(plan, program(_bio_check(description)))


# ---- forum creation ----------------------------------------------------------------------------
def _new_forum_instances(seed: sqlite3.Connection) -> list[Values]:
    taken = {forum["name"].lower() for forum in _forums(seed)}
    found = []
    for index in range(LIMIT):
        rng = _rng("new_forum", str(index))
        adjective, noun = rng.choice(ADJECTIVES), rng.choice(NOUNS)
        name = f"{adjective}_{noun}s"
        if name in taken:
            continue
        taken.add(name)
        found.append(
            {
                "name": name,
                "title": f"{adjective.capitalize()} {noun.capitalize()}s",
                "description": f"Everything about {adjective} {noun}s, from photos to stories.",
                "post": f"Welcome to f/{name}",
            }
        )
    return found


def _forum_checks(values: Values) -> list[dict[str, Any]]:
    page = f"{ROOT}/f/{values['name']}"
    return [
        check(page, _text_of("#forum-title"), exact_match=values["title"]),
        check(page, _text_of("#forum-description"), exact_match=values["description"]),
    ]


def _forum_plan(values: Values) -> list[dict[str, Any]]:
    return [
        click("link", "Create forum"),
        type_text("textbox", "Name", values["name"], enter=False),
        type_text("textbox", "Title", values["title"], enter=False),
        type_text("textbox", "Description", values["description"], enter=False),
        click("button", "Create forum"),
    ]


def _create_forum(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _built([*_forum_plan(values), stop()], program(*_forum_checks(values)))


def _create_forum_and_post(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_forum_plan(values), *_write_post(values["post"]), stop()]
    listing = check(f"{ROOT}/f/{values['name']}", _text_of(".submissions"), must=[values["post"]])
    return _built(plan, program(*_forum_checks(values), listing))


# ---- the signed-in user's posts and comments ---------------------------------------------------
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
    return _built(plan, program(*_post_checks(values["title"], values["body"], page=_post_url(post))))


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
    return _built(plan, program(*_post_checks(values["new"], page=_post_url(post))))


def _my_post_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": post["title"]} for post in _my_posts(seed)]


def _delete_post(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post = _post(seed, values["title"])
    plan = [*_open_post(values["title"]), click("button", "Delete post"), stop()]
    return _built(plan, program(check(_post_url(post), _text_of("h1"), exact_match="Page not found")))


def _edit_comment_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{**v, "text": _comment("edit_comment", v["title"])} for v in _my_single_comments(seed)]


def _comment_body_check(post: dict[str, Any], comment: dict[str, Any], text: str) -> dict[str, Any]:
    page = f"{_post_url(post)}/-/comment/{comment['id']}"
    return check(page, _text_of(f"#comment-{comment['id']} .comment__body"), exact_match=text)


def _edit_comment(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post, comment, index = _my_comment(seed, values["title"])
    plan = [*_open_post(values["title"]), click("link", "Edit comment", nth=index)]
    plan += [type_text("textbox", "Comment", values["text"], enter=False), click("button", "Save comment"), stop()]
    return _built(plan, program(_comment_body_check(post, comment, values["text"])))


def _delete_comment(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    post, comment, index = _my_comment(seed, values["title"])
    plan = [*_open_post(values["title"]), click("button", "Delete comment", nth=index), stop()]
    return _built(plan, program(_comment_body_check(post, comment, DELETED)))


TEMPLATES: list[TaskTemplate] = [
    # information seeking (4 of 46)
    _template("top_post_title", "info", "What is the title of the top post of all time in the forum {{forum}}?",
              _top_instances, _top_title),
    _template("user_post_count", "info", "How many posts has the user {{user}} submitted?",
              lambda seed: [{"user": user} for user in _users_with_posts(seed, 1)], _post_count),
    _template("forum_subscribers", "info", "How many subscribers does the forum {{forum}} have?", _forum_values,
              _subscribers),
    _template("post_comment_count", "info", 'How many comments does the post titled "{{title}}" have?',
              lambda seed: [{"title": post["title"]} for post in _posts(seed)], _comment_count, held_out=True),
    # unachievable (1 of 46): the forum shows no email addresses
    _template("user_email", "na", "What is the email address of the user {{user}}?",
              lambda seed: [{"user": user} for user in _users_with_posts(seed, 1)], _email),
    # posting
    _template("post_text", "state", 'Create a post in the forum {{forum}} titled "{{title}}" with the text "{{body}}".',
              _post_text_instances, _post_text),
    _template("post_link", "state", 'Share the link {{url}} in the forum {{forum}} with the title "{{title}}".',
              _post_link_instances, _post_link),
    _template("post_same_forum", "state",
              'Post "{{title}}" with the text "{{body}}" in the same forum as the post titled "{{other}}".',
              _same_forum_instances, _same_forum),
    _template("repost_text", "state",
              'Repost the post titled "{{title}}" from f/{{source}} to f/{{target}}, with the same title and text.',
              lambda seed: _repost_instances(seed, links=False), _repost),
    _template("repost_link", "state",
              'Share the link of the post titled "{{title}}" from f/{{source}} in f/{{target}}, with the same title.',
              lambda seed: _repost_instances(seed, links=True), _repost),
    # comments
    _template("comment_on_post", "state", 'Comment "{{text}}" on the post titled "{{title}}".',
              _comment_on_post_instances, _comment_on_post),
    _template("comment_on_top_post", "state", 'Comment "{{text}}" on the top post of all time in the forum {{forum}}.',
              _listing_comment_instances("top"), _listing_comment("top")),
    _template("comment_on_newest_post", "state", 'Comment "{{text}}" on the newest post in the forum {{forum}}.',
              _listing_comment_instances("new"), _listing_comment("new")),
    _template("comment_on_hot_post", "state", 'Comment "{{text}}" on the hottest post in the forum {{forum}}.',
              _listing_comment_instances("hot"), _listing_comment("hot"), held_out=True),
    _template("comment_on_latest_of_user", "state", 'Comment "{{text}}" on the most recent post of the user {{user}}.',
              _latest_of_user_instances, _comment_latest_of_user),
    _template("reply_to_user", "state", 'Reply "{{text}}" to the comment of {{user}} on the post titled "{{title}}".',
              _reply_by_user_instances, _reply_by_user),
    _template("reply_to_top_comment", "state", 'Reply "{{text}}" to the top comment on the post titled "{{title}}".',
              _top_comment_instances, _reply_top_comment),
    _template("reply_to_newest_on_mine", "state",
              'Reply "{{text}}" to the most recent comment on your post titled "{{title}}".',
              _newest_on_mine_instances, _reply_newest_on_mine),
    _template("comment_score", "state",
              'Comment on the post titled "{{title}}" with its current score, written as "Score: N".',
              _score_comment_instances, _score_comment),
    # votes
    _template("upvote_post", "state", 'Upvote the post titled "{{title}}".', _unvoted_posts, _vote_post("up")),
    _template("downvote_post", "state", 'Downvote the post titled "{{title}}".', _unvoted_posts, _vote_post("down")),
    _template("upvote_top_post", "state", "Upvote the top post of all time in the forum {{forum}}.",
              lambda seed: [{"forum": v["forum"]} for v in _unique_top(seed, "top")], _vote_listing("top", "up")),
    _template("upvote_newest_post", "state", "Upvote the newest post in the forum {{forum}}.",
              lambda seed: [{"forum": v["forum"]} for v in _unique_top(seed, "new")], _vote_listing("new", "up")),
    _template("downvote_hot_post", "state", "Downvote the hottest post in the forum {{forum}}.",
              lambda seed: [{"forum": v["forum"]} for v in _unique_top(seed, "hot")], _vote_listing("hot", "down")),
    _template("upvote_latest_of_user", "state", "Upvote the most recent post of the user {{user}}.",
              _latest_unvoted_instances, _upvote_latest_of_user),
    _template("upvote_all_of_user", "state", "Upvote every post of the user {{user}}.",
              _all_of_user_instances, _upvote_all_of_user, held_out=True),
    _template("upvote_comment", "state", 'Upvote the comment of {{user}} on the post titled "{{title}}".',
              _comments_by_others, _vote_comment("up")),
    _template("downvote_comment", "state", 'Downvote the comment of {{user}} on the post titled "{{title}}".',
              _comments_by_others, _vote_comment("down")),
    _template("upvote_top_comment", "state", 'Upvote the top comment on the post titled "{{title}}".',
              _top_comment_vote_instances, _upvote_top_comment),
    _template("retract_upvote", "state", 'Take back your upvote of the post titled "{{title}}".',
              _my_upvoted_instances, _retract),
    # subscriptions
    _template("subscribe", "state", "Subscribe to the forum {{forum}}.",
              lambda seed: _forum_values(seed, "s.forum_id IS NULL"), _subscribe),
    _template("unsubscribe", "state", "Unsubscribe from the forum {{forum}}.",
              lambda seed: _forum_values(seed, "s.forum_id IS NOT NULL"), _unsubscribe),
    _template("subscribe_by_title", "state", 'Subscribe to the forum titled "{{title}}".',
              _by_title_instances, _subscribe_by_title),
    _template("subscribe_forum_of_post", "state", 'Subscribe to the forum of the post titled "{{title}}".',
              _forum_of_post_instances, _subscribe_forum_of_post),
    _template("subscribe_two", "state", "Subscribe to the forums {{first}} and {{second}}.",
              lambda seed: _pairs(seed, "s.forum_id IS NULL", "s.forum_id IS NULL"), _subscribe_two),
    _template("switch_subscription", "state",
              "Unsubscribe from the forum {{first}} and subscribe to {{second}} instead.",
              lambda seed: _pairs(seed, "s.forum_id IS NOT NULL", "s.forum_id IS NULL"), _switch, held_out=True),
    # biography
    _template("set_bio", "state", 'Change your biography to "{{bio}}".', _bio_instances, _set_bio),
    _template("append_bio", "state", 'Add the sentence "{{text}}" at the end of your biography, keeping the rest.',
              _append_bio_instances, _append_bio),
    _template("bio_forum_description", "state", "Set your biography to the description of the forum {{forum}}.",
              _forum_values, _bio_description, held_out=True),
    # forums
    _template("create_forum", "state",
              'Create a forum named {{name}} titled "{{title}}" with the description "{{description}}".',
              _new_forum_instances, _create_forum),
    _template("create_forum_and_post", "state",
              'Create a forum named {{name}} titled "{{title}}" with the description "{{description}}", '
              'then post "{{post}}" in it.',
              _new_forum_instances, _create_forum_and_post),
    # the signed-in user's posts and comments
    _template("edit_post_body", "state", 'Change the text of your post titled "{{title}}" to "{{body}}".',
              _my_text_post_instances, _edit_body),
    _template("retitle_post", "state", 'Rename your post titled "{{old}}" to "{{new}}".', _retitle_instances, _retitle),
    _template("delete_post", "state", 'Delete your post titled "{{title}}".', _my_post_instances, _delete_post),
    _template("edit_comment", "state", 'Change your comment on the post titled "{{title}}" to "{{text}}".',
              _edit_comment_instances, _edit_comment),
    _template("delete_comment", "state", 'Delete your comment on the post titled "{{title}}".',
              _my_single_comments, _delete_comment),
]  # fmt: skip
