"""Loopback Forum: a small Postmill-like forum (Starlette + Jinja2 + SQLite): forums with hot/new/top
listings (sort and page in the URL query), submissions (link or text posts) with nested comments,
votes on both, replies, posting, editing and deleting one's own posts and comments, subscriptions,
user profiles with an editable biography, forum creation and search. The signed-in user is fixed
(`seed.ME`). No JavaScript: every change is a plain form POST answered by a redirect.

Input is checked as the shop checks it: a malformed value gets a 400 page, a well-formed one out of
bounds (an over-long field, a taken forum name) a 422 page, an unknown id a 404 page, someone else's
post or comment to edit a 403 page; each says what was wrong, and nothing changes. No input gets a 500."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from agentgym_envs.webarena.sites.forum.db import DELETED, ME_ID, PAGE_SIZE, SORTS, ForumDB, search_clause
from agentgym_envs.webarena.sites.pages import back_to, page_links, read_form, site_templates
from agentgym_envs.webarena.sites.refusals import Refused, check_lengths, parse_page

SITE_NAME = "Loopback Forum"
#: The longest value of each text field, in characters, and its name in error messages.
MAX_TEXT = {
    "q": (200, "search query"),
    "title": (300, "title"),
    "url": (1000, "URL"),
    "body": (10000, "body"),
    "comment": (10000, "comment"),
    "bio": (500, "biography"),
    "name": (25, "forum name"),
    "forum_title": (100, "forum title"),
    "description": (1500, "description"),
}
_ID = re.compile(r"[1-9][0-9]{0,8}")
_FORUM_NAME = re.compile(r"[A-Za-z0-9_]{3,25}")
_URL = re.compile(r"https?://[^\s/]+\S*")
_DIRECTIONS = {"up": 1, "down": -1}


def parse_id(text: str) -> int | None:
    """A row id from a URL, or None when `text` cannot be one."""
    return int(text) if _ID.fullmatch(text) else None


def post_fields(data: dict[str, str]) -> tuple[str, str, str]:
    """Title, URL and body of a submission form, or `Refused`."""
    title, link, body = data.get("title", ""), data.get("url", ""), data.get("body", "")
    if not title:
        raise Refused(400, "Please give the post a title.")
    check_lengths(MAX_TEXT, data, "title", "url", "body")
    if link and not _URL.fullmatch(link):
        raise Refused(
            422, "The URL must start with http:// or https:// and name a host, e.g. https://example.com/page."
        )
    return title, link, body


def local_path(text: str, default: str) -> str:
    """`text` when it is a path on this site (where to go back after a vote), else `default`."""
    return text if text.startswith("/") and not text.startswith("//") and "\\" not in text else default


def create_app(db: ForumDB) -> Starlette:
    """The forum as an ASGI app over `db`."""
    templates = site_templates("agentgym_envs.webarena.sites.forum", SITE_NAME)
    templates.globals.update(DELETED=DELETED, me_id=ME_ID)

    def page(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("me", db.me())
        return HTMLResponse(templates.get_template(name).render(**context), status_code=status_code)

    def not_found(what: str) -> HTMLResponse:
        return page("not_found.html", status_code=404, what=what)

    def forbidden(what: str) -> HTMLResponse:
        return page("message.html", status_code=403, title="Forbidden", message=f"You can only change your own {what}.")

    def listing(request: Request, template: str, path: str, where: str, args: tuple, **context: Any) -> Response:
        """A sorted, paginated list of submissions (sort and page from the URL query)."""
        sort = request.query_params.get("sort", "")
        sort = sort if sort in SORTS else "hot"
        try:
            number = parse_page(request.query_params.get("page", ""))
        except Refused as refused:
            return page(template, status_code=refused.status, error=refused.message, submissions=[], sort=sort,
                        sort_links=[], page_links=[], total=0, here=path, **context)  # fmt: skip
        found = db.submissions(where, args, sort)
        base = {key: context[key] for key in ("q",) if context.get(key)}
        sort_links = [(key.capitalize(), f"{path}?{urlencode({**base, 'sort': key})}", key == sort) for key in SORTS]
        return page(
            template,
            submissions=found[(number - 1) * PAGE_SIZE : number * PAGE_SIZE],
            total=len(found),
            sort=sort,
            sort_links=sort_links,
            page_links=page_links(path, {**base, "sort": sort}, number, len(found), PAGE_SIZE),
            here=str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""),
            **context,
        )

    async def front(request: Request) -> Response:
        return listing(request, "front.html", "/", "1", (), subscribed=db.subscribed())

    async def forums(request: Request) -> Response:
        return page("forums.html", forums=db.forums())

    async def forum(request: Request) -> Response:
        found = db.forum(request.path_params["forum"])
        if found is None:
            return not_found("forum")
        return listing(request, "forum.html", f"/f/{found['name']}", "s.forum_id = ?", (found["id"],), forum=found)

    async def subscribe(request: Request) -> Response:
        found = db.forum(request.path_params["forum"])
        if found is None:
            return not_found("forum")
        db.set_subscribed(found["id"], request.url.path.endswith("/subscribe"))
        return back_to(f"/f/{found['name']}")

    async def search(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        if len(query) > MAX_TEXT["q"][0]:
            message = f"Search queries can be at most {MAX_TEXT['q'][0]} characters long."
            return page("search.html", status_code=422, q=query[:200], submissions=[], total=0, sort_links=[],
                        page_links=[], error=message)  # fmt: skip
        where, args = search_clause(query)
        return listing(request, "search.html", "/search", where, args, q=query)

    def submission_of(request: Request) -> dict[str, Any] | None:
        """The submission a URL names, if it is in the forum the URL names."""
        number = parse_id(request.path_params["id"])
        found = db.submission(number) if number is not None else None
        return found if found and found["forum"].lower() == request.path_params["forum"].lower() else None

    def comment_of(request: Request, submission: dict[str, Any]) -> dict[str, Any] | None:
        number = parse_id(request.path_params["cid"])
        found = db.comment(number) if number is not None else None
        return found if found and found["submission_id"] == submission["id"] else None

    def post_url(submission: dict[str, Any]) -> str:
        return f"/f/{submission['forum']}/{submission['id']}"

    def show_submission(found: dict[str, Any], status_code: int = 200, **context: Any) -> HTMLResponse:
        return page("submission.html", status_code=status_code, s=found, comments=db.thread(found["id"]), **context)

    async def submission(request: Request) -> Response:
        found = submission_of(request)
        return show_submission(found) if found else not_found("submission")

    async def vote_submission(request: Request) -> Response:
        found = submission_of(request)
        if found is None:
            return not_found("submission")
        data = await read_form(request)
        if data.get("direction") not in _DIRECTIONS:
            return show_submission(found, status_code=400, error="A vote must be up or down.")
        db.vote_submission(found["id"], _DIRECTIONS[data["direction"]])
        return back_to(local_path(data.get("next", ""), post_url(found)))

    async def add_comment(request: Request) -> Response:
        found = submission_of(request)
        if found is None:
            return not_found("submission")
        data = await read_form(request)
        try:
            if not data.get("comment"):
                raise Refused(400, "Please write a comment.")
            check_lengths(MAX_TEXT, data, "comment")
        except Refused as refused:
            return show_submission(found, status_code=refused.status, error=refused.message)
        comment_id = db.add_comment(found["id"], None, data["comment"])
        return back_to(f"{post_url(found)}#comment-{comment_id}")

    async def comment_page(request: Request) -> Response:
        found = submission_of(request)
        comment = comment_of(request, found) if found else None
        if comment is None:
            return not_found("comment")
        return page("comment.html", s=found, comments=db.thread(found["id"], comment["id"]))

    async def reply(request: Request) -> Response:
        found = submission_of(request)
        comment = comment_of(request, found) if found else None
        if comment is None:
            return not_found("comment")
        data = await read_form(request)
        try:
            if not data.get("comment"):
                raise Refused(400, "Please write a reply.")
            check_lengths(MAX_TEXT, data, "comment")
        except Refused as refused:
            return page("comment.html", status_code=refused.status, s=found,
                        comments=db.thread(found["id"], comment["id"]), error=refused.message)  # fmt: skip
        comment_id = db.add_comment(found["id"], comment["id"], data["comment"])
        return back_to(f"{post_url(found)}/-/comment/{comment['id']}#comment-{comment_id}")

    async def vote_comment(request: Request) -> Response:
        found = submission_of(request)
        comment = comment_of(request, found) if found else None
        if comment is None:
            return not_found("comment")
        data = await read_form(request)
        if data.get("direction") not in _DIRECTIONS:
            return show_submission(found, status_code=400, error="A vote must be up or down.")
        db.vote_comment(comment["id"], _DIRECTIONS[data["direction"]])
        return back_to(local_path(data.get("next", ""), f"{post_url(found)}#comment-{comment['id']}"))

    async def edit_comment(request: Request) -> Response:
        found = submission_of(request)
        comment = comment_of(request, found) if found else None
        if comment is None or comment["deleted"]:
            return not_found("comment")
        if comment["user_id"] != ME_ID:
            return forbidden("comments")
        if request.method == "GET":
            return page("comment_edit.html", s=found, comment=comment)
        data = await read_form(request)
        try:
            if not data.get("comment"):
                raise Refused(400, "A comment cannot be empty; delete it instead.")
            check_lengths(MAX_TEXT, data, "comment")
        except Refused as refused:
            return page("comment_edit.html", status_code=refused.status, s=found, comment=comment,
                        error=refused.message)  # fmt: skip
        db.edit_comment(comment["id"], data["comment"])
        return back_to(f"{post_url(found)}#comment-{comment['id']}")

    async def delete_comment(request: Request) -> Response:
        found = submission_of(request)
        comment = comment_of(request, found) if found else None
        if comment is None or comment["deleted"]:
            return not_found("comment")
        if comment["user_id"] != ME_ID:
            return forbidden("comments")
        db.delete_comment(comment["id"])
        return back_to(post_url(found))

    async def submit(request: Request) -> Response:
        found = db.forum(request.path_params["forum"])
        if found is None:
            return not_found("forum")
        if request.method == "GET":
            return page("submit.html", forum=found, post=None)
        data = await read_form(request)
        try:
            fields = post_fields(data)
        except Refused as refused:
            return page("submit.html", status_code=refused.status, forum=found, post=data, error=refused.message)
        number = db.add_submission(found["id"], *fields)
        return back_to(f"/f/{found['name']}/{number}")

    async def edit_submission(request: Request) -> Response:
        found = submission_of(request)
        if found is None:
            return not_found("submission")
        if found["user_id"] != ME_ID:
            return forbidden("posts")
        forum = db.forum(found["forum"])
        if request.method == "GET":
            return page("submit.html", forum=forum, post=found, editing=True)
        data = await read_form(request)
        try:
            fields = post_fields(data)
        except Refused as refused:
            return page("submit.html", status_code=refused.status, forum=forum, post={**found, **data}, editing=True,
                        error=refused.message)  # fmt: skip
        db.edit_submission(found["id"], *fields)
        return back_to(post_url(found))

    async def delete_submission(request: Request) -> Response:
        found = submission_of(request)
        if found is None:
            return not_found("submission")
        if found["user_id"] != ME_ID:
            return forbidden("posts")
        db.delete_submission(found["id"])
        return back_to(f"/f/{found['forum']}")

    async def user(request: Request) -> Response:
        found = db.user(request.path_params["name"])
        if found is None:
            return not_found("user")
        try:
            number = parse_page(request.query_params.get("page", ""))
        except Refused as refused:
            return page("message.html", status_code=refused.status, title="Bad page", message=refused.message)
        posts = db.submissions("s.user_id = ?", (found["id"],), "new")
        return page(
            "user.html",
            user=found,
            submissions=posts[(number - 1) * PAGE_SIZE : number * PAGE_SIZE],
            page_links=page_links(f"/user/{found['username']}", {}, number, len(posts), PAGE_SIZE),
            here=f"/user/{found['username']}" + (f"?page={number}" if number > 1 else ""),
        )

    async def user_comments(request: Request) -> Response:
        found = db.user(request.path_params["name"])
        if found is None:
            return not_found("user")
        try:
            number = parse_page(request.query_params.get("page", ""))
        except Refused as refused:
            return page("message.html", status_code=refused.status, title="Bad page", message=refused.message)
        comments = db.user_comments(found["id"])
        path = f"/user/{found['username']}/comments"
        return page(
            "user_comments.html",
            user=found,
            comments=comments[(number - 1) * PAGE_SIZE : number * PAGE_SIZE],
            page_links=page_links(path, {}, number, len(comments), PAGE_SIZE),
        )

    async def edit_bio(request: Request) -> Response:
        found = db.user(request.path_params["name"])
        if found is None:
            return not_found("user")
        if found["id"] != ME_ID:
            return forbidden("biography")
        if request.method == "GET":
            return page("bio.html", user=found)
        data = await read_form(request)
        try:
            check_lengths(MAX_TEXT, data, "bio")
        except Refused as refused:
            return page(
                "bio.html", status_code=refused.status, user={**found, "bio": data["bio"]}, error=refused.message
            )
        db.set_bio(data.get("bio", ""))
        return back_to(f"/user/{found['username']}")

    async def create_forum(request: Request) -> Response:
        if request.method == "GET":
            return page("create_forum.html", values={})
        data = await read_form(request)
        name = data.get("name", "")
        try:
            if not (name and data.get("forum_title") and data.get("description")):
                raise Refused(400, "Please give the forum a name, a title and a description.")
            check_lengths(MAX_TEXT, data, "name", "forum_title", "description")
            if not _FORUM_NAME.fullmatch(name):
                raise Refused(422, "A forum name has 3 to 25 letters, digits or underscores, e.g. home_brewing.")
            if db.forum(name) is not None:
                raise Refused(422, f"There is already a forum named {name}.")
        except Refused as refused:
            return page("create_forum.html", status_code=refused.status, values=data, error=refused.message)
        db.create_forum(name, data["forum_title"], data["description"])
        return back_to(f"/f/{name}")

    async def missing(request: Request, exc: Exception) -> Response:
        return not_found("page")

    post = "/f/{forum}/{id}"
    comment = post + "/-/comment/{cid}"
    routes = [
        Route("/", front),
        Route("/forums", forums),
        Route("/search", search),
        Route("/create_forum", create_forum, methods=["GET", "POST"]),
        Route("/submit/{forum}", submit, methods=["GET", "POST"]),
        Route("/user/{name}", user),
        Route("/user/{name}/comments", user_comments),
        Route("/user/{name}/edit_biography", edit_bio, methods=["GET", "POST"]),
        Route("/f/{forum}", forum),
        Route("/f/{forum}/subscribe", subscribe, methods=["POST"]),
        Route("/f/{forum}/unsubscribe", subscribe, methods=["POST"]),
        Route(post + "/vote", vote_submission, methods=["POST"]),
        Route(post + "/comment", add_comment, methods=["POST"]),
        Route(post + "/-/edit", edit_submission, methods=["GET", "POST"]),
        Route(post + "/-/delete", delete_submission, methods=["POST"]),
        Route(comment, comment_page),
        Route(comment, reply, methods=["POST"]),
        Route(comment + "/vote", vote_comment, methods=["POST"]),
        Route(comment + "/edit", edit_comment, methods=["GET", "POST"]),
        Route(comment + "/delete", delete_comment, methods=["POST"]),
        Route(post, submission),
        # Postmill's post URLs carry a slug of the title after the id (and WebArena's helpers a slash).
        Route(post + "/{slug:path}", submission),
    ]
    return Starlette(routes=routes, exception_handlers={404: missing, 405: missing})
