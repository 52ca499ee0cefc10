"""The forum's task templates of state changes: subscriptions, the biography and new forums."""

from __future__ import annotations

import sqlite3
from typing import Any

from agentgym_envs.webarena.sites.forum.db import ME_ID
from agentgym_envs.webarena.sites.forum.seed import ADJECTIVES, ME, NOUNS
from agentgym_envs.webarena.sites.forum.tasks.common import (
    LIMIT,
    ROOT,
    TASKS,
    _forum,
    _forum_values,
    _forums,
    _open_forum,
    _open_post,
    _post,
    _posts,
    _rng,
    _things,
    _write_post,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, check, click, program, stop, text_of, type_text

NEW_BIOS = [
    "Weekend {thing} enthusiast and coffee drinker",
    "Here for the {thing} threads",
    "I mostly lurk in the {thing} discussions",
    "Learning something new about {thing}s every day",
]


def _subscription_check(forum: str, subscribed: bool) -> dict[str, Any]:
    return check(
        f"{ROOT}/f/{forum}", text_of("#subscription"), exact_match="Unsubscribe" if subscribed else "Subscribe"
    )


def _subscribe(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_open_forum(values["forum"]), click("button", "Subscribe"), stop()]
    return TASKS.built(plan, program(_subscription_check(values["forum"], True)))


def _unsubscribe(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_open_forum(values["forum"]), click("button", "Unsubscribe"), stop()]
    return TASKS.built(plan, program(_subscription_check(values["forum"], False)))


def _by_title_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"title": forum["title"]} for forum in _forums(seed, "s.forum_id IS NULL")]


def _subscribe_by_title(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    name = seed.execute("SELECT name FROM forums WHERE title = ?", (values["title"],)).fetchone()["name"]
    plan = [*_open_forum(name), click("button", "Subscribe"), stop()]
    return TASKS.built(plan, program(_subscription_check(name, True)))


def _forum_of_post_instances(seed: sqlite3.Connection) -> list[Values]:
    unsubscribed = {forum["name"] for forum in _forums(seed, "s.forum_id IS NULL")}
    return [{"title": post["title"]} for post in _posts(seed) if post["forum"] in unsubscribed]


def _subscribe_forum_of_post(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    forum = _post(seed, values["title"])["forum"]
    plan = [*_open_post(values["title"]), click("link", f"f/{forum}"), click("button", "Subscribe"), stop()]
    return TASKS.built(plan, program(_subscription_check(forum, True)))


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
    return TASKS.built(plan, program(*checks))


def _switch(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_open_forum(values["first"]), click("button", "Unsubscribe")]
    plan += [*_open_forum(values["second"]), click("button", "Subscribe"), stop()]
    checks = [_subscription_check(values["first"], False), _subscription_check(values["second"], True)]
    return TASKS.built(plan, program(*checks))


def _bio_check(text: str | None = None, must: tuple[str, ...] = ()) -> dict[str, Any]:
    page = f"{ROOT}/user/{ME}"
    return (
        check(page, text_of("#bio"), exact_match=text) if text is not None else check(page, text_of("#bio"), must=must)
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
    return TASKS.built([*_bio_plan(values["bio"]), stop()], program(_bio_check(values["bio"])))


def _append_bio_instances(seed: sqlite3.Connection) -> list[Values]:
    return [{"text": f"Say hi in f/{forum['name']}."} for forum in _forums(seed)]


def _append_bio(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    old = seed.execute("SELECT bio FROM users WHERE id = ?", (ME_ID,)).fetchone()["bio"]
    plan = [*_bio_plan(f"{old} {values['text']}"), stop()]
    return TASKS.built(plan, program(_bio_check(must=(old, values["text"]))))


def _bio_description(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    description = _forum(seed, values["forum"])["description"]
    plan = [*_open_forum(values["forum"]), *_bio_plan(description), stop()]
    return TASKS.built(plan, program(_bio_check(description)))


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
        check(page, text_of("#forum-title"), exact_match=values["title"]),
        check(page, text_of("#forum-description"), exact_match=values["description"]),
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
    return TASKS.built([*_forum_plan(values), stop()], program(*_forum_checks(values)))


def _create_forum_and_post(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_forum_plan(values), *_write_post(values["post"]), stop()]
    listing = check(f"{ROOT}/f/{values['name']}", text_of(".submissions"), must=[values["post"]])
    return TASKS.built(plan, program(*_forum_checks(values), listing))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "subscribe",
        "state",
        "Subscribe to the forum {{forum}}.",
        lambda seed: _forum_values(seed, "s.forum_id IS NULL"),
        _subscribe,
    ),
    TASKS.template(
        "unsubscribe",
        "state",
        "Unsubscribe from the forum {{forum}}.",
        lambda seed: _forum_values(seed, "s.forum_id IS NOT NULL"),
        _unsubscribe,
    ),
    TASKS.template(
        "subscribe_by_title",
        "state",
        'Subscribe to the forum titled "{{title}}".',
        _by_title_instances,
        _subscribe_by_title,
    ),
    TASKS.template(
        "subscribe_forum_of_post",
        "state",
        'Subscribe to the forum of the post titled "{{title}}".',
        _forum_of_post_instances,
        _subscribe_forum_of_post,
    ),
    TASKS.template(
        "subscribe_two",
        "state",
        "Subscribe to the forums {{first}} and {{second}}.",
        lambda seed: _pairs(seed, "s.forum_id IS NULL", "s.forum_id IS NULL"),
        _subscribe_two,
    ),
    TASKS.template(
        "switch_subscription",
        "state",
        "Unsubscribe from the forum {{first}} and subscribe to {{second}} instead.",
        lambda seed: _pairs(seed, "s.forum_id IS NOT NULL", "s.forum_id IS NULL"),
        _switch,
        held_out=True,
    ),
    TASKS.template("set_bio", "state", 'Change your biography to "{{bio}}".', _bio_instances, _set_bio),
    TASKS.template(
        "append_bio",
        "state",
        'Add the sentence "{{text}}" at the end of your biography, keeping the rest.',
        _append_bio_instances,
        _append_bio,
    ),
    TASKS.template(
        "bio_forum_description",
        "state",
        "Set your biography to the description of the forum {{forum}}.",
        _forum_values,
        _bio_description,
        held_out=True,
    ),
    TASKS.template(
        "create_forum",
        "state",
        'Create a forum named {{name}} titled "{{title}}" with the description "{{description}}".',
        _new_forum_instances,
        _create_forum,
    ),
    TASKS.template(
        "create_forum_and_post",
        "state",
        'Create a forum named {{name}} titled "{{title}}" with the description "{{description}}", '
        'then post "{{post}}" in it.',
        _new_forum_instances,
        _create_forum_and_post,
    ),
]
