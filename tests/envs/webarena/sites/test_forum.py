"""The forum over HTTP (no browser): the seed, listings and their sorting, every state change (votes,
comments, replies, posts, edits, deletions, subscriptions, biography, new forums), input checks
(400/403/404/422, never 500), restore, and the sanity of the task templates."""

from __future__ import annotations

import html as html_module
import re
from collections import Counter

import pytest
from starlette.testclient import TestClient

from agentgym_envs.webarena.sites.forum.app import create_app
from agentgym_envs.webarena.sites.forum.db import DELETED, ME_ID, PAGE_SIZE, ForumDB, seed_connection, thread
from agentgym_envs.webarena.sites.forum.seed import ME
from agentgym_envs.webarena.tasks.templates import KINDS


@pytest.fixture(scope="module")
def forum() -> tuple[TestClient, ForumDB]:
    db = ForumDB()
    yield TestClient(create_app(db), base_url="http://forum.test"), db
    db.close()


@pytest.fixture()
def client(forum: tuple[TestClient, ForumDB]) -> TestClient:
    """The forum's client, restored to the seed state before and after each test."""
    client, db = forum
    db.restore()
    yield client
    db.restore()


@pytest.fixture(scope="module")
def seed():
    connection = seed_connection()
    yield connection
    connection.close()


def text(html: str) -> str:
    html = re.sub(r"(?s)<style>.*?</style>|<header>.*?</header>", " ", html)
    return " ".join(html_module.unescape(re.sub(r"<[^>]+>", " ", html)).split())


def shown(html: str, element_id: str) -> str:
    """The text of the element with this id (its first tag's content, tags removed)."""
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</(?:span|h1|div|p|a|form)>', html, re.S)
    assert found, f"no element #{element_id}"
    return text(found.group(1))


def post_of(seed, where: str, *args) -> dict:
    row = seed.execute(
        f"SELECT s.*, f.name AS forum FROM submissions s JOIN forums f ON f.id = s.forum_id WHERE {where} "
        "ORDER BY s.id LIMIT 1",
        args,
    ).fetchone()
    return dict(row)


def test_seed_is_deterministic_and_big_enough(seed) -> None:
    tables = ("users", "forums", "submissions", "comments", "subscriptions", "submission_votes", "comment_votes")
    counts = {table: seed.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in tables}
    assert counts["forums"] >= 30 and counts["users"] >= 300 and counts["submissions"] >= 500
    assert counts["comments"] >= 1500 and counts["subscriptions"] and counts["submission_votes"]
    assert seed.execute("SELECT COUNT(*) FROM comments WHERE parent_id IS NOT NULL").fetchone()[0] > 300
    assert seed.execute("SELECT COUNT(*) FROM submissions WHERE url != ''").fetchone()[0] > 100
    assert seed.execute("SELECT COUNT(*) FROM submissions WHERE user_id = ?", (ME_ID,)).fetchone()[0] >= 20
    other = seed_connection()
    dump = list(seed.iterdump())
    assert dump == list(other.iterdump())
    other.close()


def test_listings_sort_and_paginate(client: TestClient, seed) -> None:
    name, total = seed.execute(
        "SELECT f.name, COUNT(*) AS n FROM submissions s JOIN forums f ON f.id = s.forum_id GROUP BY f.id "
        "ORDER BY n DESC LIMIT 1"
    ).fetchone()
    assert PAGE_SIZE < total < 2 * PAGE_SIZE
    top = client.get(f"/f/{name}?sort=top")
    scores = [int(s) for s in re.findall(r'<span class="score">(-?\d+)</span>', top.text)]
    assert scores == sorted(scores, reverse=True) and len(scores) == PAGE_SIZE
    new = client.get(f"/f/{name}?sort=new").text
    dates = re.findall(r"on (\d{4}-\d\d-\d\d \d\d:\d\d) in", new)
    assert dates == sorted(dates, reverse=True) and len(dates) == PAGE_SIZE
    second = client.get(f"/f/{name}?sort=top&page=2").text
    assert len(re.findall(r'class="submission"', second)) == total - PAGE_SIZE
    assert "Previous page" in second and f'href="/f/{name}?sort=top&amp;page=1"' in second
    assert client.get(f"/f/{name}").text.count('class="submission"') == PAGE_SIZE  # hot, the default
    assert client.get(f"/f/{name}?sort=bogus").status_code == 200
    forums = client.get("/forums").text
    assert forums.count('<tr id="forum-') == seed.execute("SELECT COUNT(*) FROM forums").fetchone()[0]
    assert client.get("/").status_code == 200 and "Your subscriptions" in client.get("/").text


def test_submission_page_shows_nested_comments_in_thread_order(client: TestClient, seed) -> None:
    post = post_of(seed, "(SELECT COUNT(*) FROM comments c WHERE c.submission_id = s.id AND c.parent_id) >= 3")
    page = client.get(f"/f/{post['forum']}/{post['id']}").text
    assert shown(page, "submission-title") == post["title"] and shown(page, "submission-score") == str(post["score"])
    ids = [int(i) for i in re.findall(r'class="comment" id="comment-(\d+)"', page)]
    assert ids == [c["id"] for c in thread(seed, post["id"])] and len(ids) >= 4
    depths = [c["depth"] for c in thread(seed, post["id"])]
    assert max(depths) >= 1 and depths[0] == 0
    # Postmill's URLs: a slug (or WebArena's trailing slash) after the id; the forum must be the post's.
    assert client.get(f"/f/{post['forum']}/{post['id']}/").status_code == 200
    assert client.get(f"/f/{post['forum']}/{post['id']}/some-slug").status_code == 200
    assert client.get(f"/f/{post['forum'].upper()}/{post['id']}").status_code == 200
    other = "books" if post["forum"] != "books" else "movies"
    assert client.get(f"/f/{other}/{post['id']}").status_code == 404


def test_votes_on_posts_toggle_and_move_the_score(client: TestClient, seed) -> None:
    post = post_of(seed, "s.id NOT IN (SELECT submission_id FROM submission_votes)")
    url = f"/f/{post['forum']}/{post['id']}"
    response = client.post(f"{url}/vote", data={"direction": "up"}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == url
    page = client.get(url).text
    assert shown(page, "submission-score") == str(post["score"] + 1) and "You upvoted this" in page
    client.post(f"{url}/vote", data={"direction": "down"})
    assert shown(client.get(url).text, "submission-score") == str(post["score"] - 1)
    client.post(f"{url}/vote", data={"direction": "down"})  # the same vote again takes it back
    assert shown(client.get(url).text, "submission-score") == str(post["score"])
    # From a listing, the vote goes back to the listing (a local path only).
    back = client.post(f"{url}/vote", data={"direction": "up", "next": "/f/books?sort=top"}, follow_redirects=False)
    assert back.headers["location"] == "/f/books?sort=top"
    away = client.post(f"{url}/vote", data={"direction": "up", "next": "//evil.test/"}, follow_redirects=False)
    assert away.headers["location"] == url
    assert client.post(f"{url}/vote", data={"direction": "sideways"}).status_code == 400


def test_votes_on_comments(client: TestClient, seed) -> None:
    comment = dict(seed.execute("SELECT * FROM comments WHERE id NOT IN (SELECT comment_id FROM comment_votes) "
                                "ORDER BY id LIMIT 1").fetchone())  # fmt: skip
    post = post_of(seed, "s.id = ?", comment["submission_id"])
    url = f"/f/{post['forum']}/{post['id']}/-/comment/{comment['id']}"
    client.post(f"{url}/vote", data={"direction": "up"})
    page = client.get(url).text
    assert f'<span class="comment__score">{comment["score"] + 1}</span>' in page
    assert (
        client.post(f"/f/{post['forum']}/{post['id']}/-/comment/999999/vote", data={"direction": "up"}).status_code
        == 404
    )


def test_comment_reply_edit_and_delete(client: TestClient, seed) -> None:
    post = post_of(seed, "s.id IN (SELECT submission_id FROM comments WHERE user_id != ?)", ME_ID)
    url = f"/f/{post['forum']}/{post['id']}"
    made = client.post(f"{url}/comment", data={"comment": "A brand new comment"}, follow_redirects=False)
    assert made.status_code == 303 and "#comment-" in made.headers["location"]
    mine = int(made.headers["location"].rsplit("-", 1)[1])
    page = client.get(url).text
    assert select(page, f"#comment-{mine} .comment__body") == "A brand new comment"
    reply = client.post(f"{url}/-/comment/{mine}", data={"comment": "Replying to myself"}, follow_redirects=False)
    assert reply.status_code == 303
    thread_page = client.get(f"{url}/-/comment/{mine}").text
    assert "Replying to myself" in text(thread_page) and "A brand new comment" in text(thread_page)
    client.post(f"{url}/-/comment/{mine}/edit", data={"comment": "Edited words"})
    assert "Edited words" in text(client.get(url).text) and "(edited)" in client.get(url).text
    client.post(f"{url}/-/comment/{mine}/delete")
    page = client.get(f"{url}/-/comment/{mine}").text
    assert DELETED in text(page) and "Replying to myself" in text(page)  # the reply stays
    assert client.post(f"{url}/-/comment/{mine}/edit", data={"comment": "again"}).status_code == 404
    others = seed.execute("SELECT id FROM comments WHERE submission_id = ? AND user_id != ?", (post["id"], ME_ID))
    other = others.fetchone()["id"]
    assert client.get(f"{url}/-/comment/{other}/edit").status_code == 403
    assert client.post(f"{url}/-/comment/{other}/delete").status_code == 403
    assert client.post(f"{url}/comment", data={"comment": ""}).status_code == 400
    assert client.post(f"{url}/comment", data={"comment": "x" * 10001}).status_code == 422
    assert client.post(f"{url}/-/comment/{other}", data={"comment": ""}).status_code == 400


def test_create_edit_and_delete_posts(client: TestClient, seed) -> None:
    made = client.post("/submit/books", data={"title": "A fresh post", "body": "Some words."}, follow_redirects=False)
    assert made.status_code == 303
    url = made.headers["location"]
    page = client.get(url).text
    assert shown(page, "submission-title") == "A fresh post" and shown(page, "submission-body") == "Some words."
    assert "A fresh post" in client.get("/f/books?sort=new").text.split('class="submission"')[1]
    link = client.post(
        "/submit/movies", data={"title": "A link", "url": "https://news.example/a"}, follow_redirects=False
    )
    assert shown(client.get(link.headers["location"]).text, "submission-link") == "https://news.example/a"
    client.post(f"{url}/-/edit", data={"title": "A renamed post", "body": "Other words."})
    page = client.get(url).text
    assert shown(page, "submission-title") == "A renamed post" and shown(page, "submission-body") == "Other words."
    client.post(f"{url}/-/delete")
    assert client.get(url).status_code == 404
    assert client.post("/submit/books", data={"title": ""}).status_code == 400
    assert client.post("/submit/books", data={"title": "x", "url": "not a url"}).status_code == 422
    assert client.post("/submit/books", data={"title": "x" * 301}).status_code == 422
    assert client.post("/submit/nowhere", data={"title": "x"}).status_code == 404
    other = post_of(seed, "s.user_id != ?", ME_ID)
    other_url = f"/f/{other['forum']}/{other['id']}"
    assert client.get(f"{other_url}/-/edit").status_code == 403
    assert client.post(f"{other_url}/-/delete").status_code == 403
    mine = post_of(seed, "s.user_id = ?", ME_ID)
    mine_url = f"/f/{mine['forum']}/{mine['id']}"
    assert client.post(f"{mine_url}/-/edit", data={"title": ""}).status_code == 400
    assert shown(client.get(mine_url).text, "submission-title") == mine["title"]


def test_subscribe_and_unsubscribe(client: TestClient, seed) -> None:
    row = seed.execute("SELECT name, subscribers FROM forums WHERE id NOT IN (SELECT forum_id FROM subscriptions) "
                       "ORDER BY id LIMIT 1").fetchone()  # fmt: skip
    url = f"/f/{row['name']}"
    assert shown(client.get(url).text, "subscription") == "Subscribe"
    client.post(f"{url}/subscribe")
    page = client.get(url).text
    assert shown(page, "subscription") == "Unsubscribe" and shown(page, "subscribers") == str(row["subscribers"] + 1)
    assert f"f/{row['name']}" in text(client.get("/").text.split("Your subscriptions")[1])
    client.post(f"{url}/subscribe")  # twice is once
    assert shown(client.get(url).text, "subscribers") == str(row["subscribers"] + 1)
    client.post(f"{url}/unsubscribe")
    page = client.get(url).text
    assert shown(page, "subscription") == "Subscribe" and shown(page, "subscribers") == str(row["subscribers"])
    assert client.post("/f/nowhere/subscribe").status_code == 404


def test_profiles_and_biography(client: TestClient, seed) -> None:
    me = client.get(f"/user/{ME}").text
    count = seed.execute("SELECT COUNT(*) FROM submissions WHERE user_id = ?", (ME_ID,)).fetchone()[0]
    assert shown(me, "submission-count") == f"{count} submissions" and "Edit biography" in me
    client.post(f"/user/{ME}/edit_biography", data={"bio": "A new biography."})
    assert shown(client.get(f"/user/{ME}").text, "bio") == "A new biography."
    assert client.post(f"/user/{ME}/edit_biography", data={"bio": "x" * 501}).status_code == 422
    other = seed.execute("SELECT username FROM users WHERE id = 2").fetchone()[0]
    assert "Edit biography" not in client.get(f"/user/{other}").text
    assert client.post(f"/user/{other}/edit_biography", data={"bio": "hacked"}).status_code == 403
    assert client.get(f"/user/{ME}/comments").status_code == 200
    assert client.get("/user/nobody_at_all").status_code == 404
    assert client.get(f"/user/{ME}?page=0").status_code == 400


def test_create_forum(client: TestClient) -> None:
    made = client.post("/create_forum", data={"name": "tinkering", "forum_title": "Tinkering",
                                              "description": "Small builds."}, follow_redirects=False)  # fmt: skip
    assert made.status_code == 303 and made.headers["location"] == "/f/tinkering"
    page = client.get("/f/tinkering").text
    assert shown(page, "forum-title") == "Tinkering" and shown(page, "forum-description") == "Small builds."
    assert shown(page, "subscription") == "Unsubscribe" and "no posts" in page
    again = {"name": "Tinkering", "forum_title": "T", "description": "D"}
    assert client.post("/create_forum", data=again).status_code == 422  # names are case-insensitive
    assert client.post("/create_forum", data={**again, "name": "no spaces"}).status_code == 422
    assert client.post("/create_forum", data={**again, "name": "ok_name", "description": ""}).status_code == 400


def test_search_and_bad_input_never_500(client: TestClient, seed) -> None:
    title = seed.execute("SELECT title FROM submissions ORDER BY id LIMIT 1").fetchone()[0]
    assert f">{html_module.escape(title)}</a>" in client.get("/search", params={"q": title}).text
    assert "No posts match" in client.get("/search?q=zzzqqq").text
    assert client.get("/search?q=%25").status_code == 200
    assert client.get("/search", params={"q": "x" * 201}).status_code == 422
    for url in ("/f/books?page=0", "/f/books?page=abc", "/?page=99999"):
        assert client.get(url).status_code == 400, url
    for url in ("/f/books/0", "/f/books/99999999999999999999", "/f/books/abc", "/nowhere", "/f/books/1/-/comment/x"):
        assert client.get(url).status_code == 404, url
    assert client.get("/f/books/1/vote").status_code == 404  # GET on a POST-only route
    assert client.post("/", data={}).status_code == 404


def test_restore_undoes_every_change(forum: tuple[TestClient, ForumDB], seed) -> None:
    client, db = forum
    db.restore()
    before = list(seed.iterdump())
    post = post_of(seed, "s.user_id = ?", ME_ID)
    url = f"/f/{post['forum']}/{post['id']}"
    client.post(f"{url}/vote", data={"direction": "up"})
    client.post(f"{url}/comment", data={"comment": "undo me"})
    client.post("/submit/books", data={"title": "undo me"})
    client.post("/f/books/subscribe")
    client.post("/f/movies/unsubscribe")
    client.post(f"/user/{ME}/edit_biography", data={"bio": "undo me"})
    client.post("/create_forum", data={"name": "undo_me", "forum_title": "U", "description": "D"})
    client.post(f"{url}/-/delete")
    db.restore()
    with db._lock:
        after = list(db._live.iterdump())
    assert after == before


# ---- the task templates -------------------------------------------------------------------------
def test_templates_are_many_unique_and_in_webarenas_forum_proportions(seed) -> None:
    from agentgym_envs.webarena.sites.forum.tasks import TEMPLATES

    assert len(TEMPLATES) >= 40
    assert len({t.template_id for t in TEMPLATES}) == len(TEMPLATES)
    kinds = Counter(t.kind for t in TEMPLATES)
    assert set(kinds) <= set(KINDS) and kinds["nav"] == 0
    assert 0.05 <= kinds["info"] / len(TEMPLATES) <= 0.13 and 0.84 <= kinds["state"] / len(TEMPLATES) <= 0.93
    assert kinds["na"] >= 1
    held_out = [t for t in TEMPLATES if t.held_out]
    assert 3 <= len(held_out) <= 7 and len({t.kind for t in held_out}) >= 2
    for template in TEMPLATES:
        instances = template.instances(seed)
        assert instances, f"{template.template_id} has no instance"
        assert len({tuple(sorted(v.items())) for v in instances}) == len(instances), template.template_id
        config = template.config(seed, instances[0], f"{template.template_id}/0")
        assert "{{" not in config["intent"] and config["sites"] == ["reddit"]
        assert config["agentgym_expert"][-1]["do"] == "stop"
        answers = config["eval"]["reference_answers"] or {}
        if template.kind == "state":
            assert config["eval"]["eval_types"] == ["program_html"] and config["eval"]["program_html"]
        else:
            assert any(answers.values()), template.template_id
        if template.kind == "na":
            assert answers == {"exact_match": "N/A"}


def select(html: str, selector: str) -> str:
    """The text the forum's task locators (`document.querySelector(selector).outerText`) read, found
    here without a browser ('' when the page has no such element)."""
    parts = selector.split()
    if parts[0] == "h1":
        found = re.search(r"<h1[^>]*>(.*?)</h1>", html, re.S)
    elif parts[0] in ("#comments", "#thread"):
        found = re.search(rf'<section id="{parts[0][1:]}".*?>(.*?)</section>', html, re.S)
    elif parts[0] == ".submissions":
        found = re.search(r'<ol class="submissions">(.*?)</ol>', html, re.S)
    elif len(parts) == 2:  # "#comment-N .comment__score": that comment's score or body
        article = re.search(rf'<article class="comment" id="{parts[0][1:]}".*?</article>', html, re.S)
        inner = article and re.search(rf'class="{parts[1][1:]}[^"]*"[^>]*>(.*?)</', article.group(0), re.S)
        return text(inner.group(1)) if inner else ""
    else:
        return shown(html, parts[0][1:]) if f'id="{parts[0][1:]}"' in html else ""
    return text(found.group(1)) if found else ""


def test_state_targets_differ_from_the_seed(seed) -> None:
    """What a state task's page checks require is not on the seed site already (so doing nothing fails),
    and what they read exists there (so the checks read the right element)."""
    from agentgym_envs.webarena.sites.forum.tasks import TEMPLATES

    db = ForumDB()
    client = TestClient(create_app(db), base_url="http://forum.test")
    for template in TEMPLATES:
        if template.kind != "state":
            continue
        for index, values in enumerate(template.instances(seed)[:3]):
            config = template.config(seed, values, f"{template.template_id}/{index}")
            unmet = 0
            for target in config["eval"]["program_html"]:
                required = target["required_contents"]
                if target["url"].startswith("func:"):
                    unmet += 1  # the page of a post the task makes: it does not exist yet
                    continue
                page = client.get(target["url"].replace("__REDDIT__", ""))
                selector = re.fullmatch(r"document\.querySelector\('([^']+)'\)\.outerText", target["locator"]).group(1)
                body = select(page.text, selector)
                if "exact_match" in required:
                    unmet += body.lower() != required["exact_match"].lower()
                else:
                    unmet += not all(item.lower() in body.lower() for item in required["must_include"])
            assert unmet, f"{template.template_id}/{index}: the seed state already passes {config['eval']}"
    db.close()


def test_every_seeded_title_is_on_the_first_page_of_its_search(forum: tuple[TestClient, ForumDB], seed) -> None:
    """The experts find posts by typing their title in the search box and clicking it on the first page."""
    _, db = forum
    db.restore()
    for (title,) in seed.execute("SELECT title FROM submissions"):
        assert title in [post["title"] for post in db.search(title, "hot")[:PAGE_SIZE]], title
