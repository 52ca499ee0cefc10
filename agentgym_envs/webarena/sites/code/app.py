"""Loopback Code: a small GitLab-like code host (Starlette + Jinja2 + SQLite): explore and search
projects (search and sort in the URL query), project pages with README, files, commits and branches,
issues (state, label and assignee filters in the URL; comments, close/reopen, labels, assignee,
milestone), merge requests (comment, merge, close), members and roles, stars, project settings, new
projects, user and group pages and a global search. The signed-in user is fixed (`seed.ME`). No
JavaScript: every change is a plain form POST answered by a redirect.

Input is checked as the shop checks it: a malformed value gets a 400 page, a well-formed one the
site cannot accept (an unknown user or label, an over-long field) a 422 page, an unknown project,
issue or file a 404 page; each says what was wrong, and nothing changes. No input gets a 500."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from agentgym_envs.webarena.sites.code.db import ISSUE_STATES, MR_STATES, PAGE_SIZE, SORTS, CodeDB
from agentgym_envs.webarena.sites.code.seed import ROLES, VISIBILITIES
from agentgym_envs.webarena.sites.pages import back_to, page_links, site_templates
from agentgym_envs.webarena.sites.refusals import Refused, check_lengths, parse_page

SITE_NAME = "Loopback Code"
#: The longest value of each text field, in characters, and its name in error messages.
MAX_TEXT = {
    "q": (200, "search query"),
    "title": (255, "title"),
    "body": (5000, "text"),
    "description": (2000, "description"),
    "name": (100, "project name"),
    "username": (100, "username"),
}
_IID = re.compile(r"[1-9][0-9]{0,8}")
_PROJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]*")


def project_path(name: str) -> str:
    """The URL path of a project named `name`: lower case, runs of spaces as one hyphen."""
    return "-".join(name.lower().split())


def create_app(db: CodeDB) -> Starlette:
    """The code host as an ASGI app over `db`."""
    templates = site_templates("agentgym_envs.webarena.sites.code", SITE_NAME)

    def page(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("me", db.me())
        return HTMLResponse(templates.get_template(name).render(**context), status_code=status_code)

    def not_found(what: str) -> HTMLResponse:
        return page("error.html", status_code=404, title="Not found", message=f"There is no such {what} here.")

    def refused_page(refused: Refused) -> HTMLResponse:
        return page("error.html", status_code=refused.status, title="Not accepted", message=refused.message)

    async def form(request: Request) -> dict[str, list[str]]:
        body = (await request.body()).decode("utf-8", "replace")
        return {key: [v.strip() for v in values] for key, values in parse_qs(body, keep_blank_values=True).items()}

    def first(data: dict[str, list[str]], key: str) -> str:
        return data.get(key, [""])[-1]

    def listing(request: Request, rows: list[dict[str, Any]], path: str, params: dict[str, str]) -> dict[str, Any]:
        """The page of `rows` the URL asks for, with its page links (`Refused` for a bad page number)."""
        number = parse_page(request.query_params.get("page", ""))
        return {
            "rows": rows[(number - 1) * PAGE_SIZE : number * PAGE_SIZE],
            "total": len(rows),
            "first": (number - 1) * PAGE_SIZE + 1,
            "page_links": page_links(path, params, number, len(rows), PAGE_SIZE),
        }

    def query_param(request: Request, key: str) -> str:
        value = request.query_params.get(key, "").strip()
        check_lengths(MAX_TEXT, {key: value}, "q" if key == "q" else "username")
        return value

    def the_project(request: Request) -> dict[str, Any] | None:
        found = db.project(request.path_params["namespace"], request.path_params["project"])
        if found is not None:
            found["url"] = f"/{found['namespace']}/{found['path']}"
            kind = "groups" if db.group(found["namespace"]) else "users"
            found["namespace_url"] = f"/{kind}/{found['namespace']}"
        return found

    # ---- lists of projects --------------------------------------------------------------------
    async def dashboard(request: Request) -> Response:
        tab = request.query_params.get("tab", "")
        if tab not in ("", "starred"):
            return refused_page(Refused(400, "The tab must be empty (your projects) or 'starred'."))
        me = db.me()
        rows = db.starred_projects(me["id"]) if tab == "starred" else db.member_projects(me["id"])
        try:
            shown = listing(request, rows, "/", {"tab": tab})
        except Refused as refused:
            return refused_page(refused)
        return page("dashboard.html", tab=tab, **shown)

    async def explore(request: Request) -> Response:
        try:
            query = query_param(request, "q")
            sort = request.query_params.get("sort", "")
            if sort not in SORTS:
                raise Refused(400, f"The sort must be one of {', '.join(repr(s) for s in SORTS if s)} or empty.")
            shown = listing(request, db.projects(query, sort), "/explore", {"q": query, "sort": sort})
        except Refused as refused:
            return refused_page(refused)
        sort_links = [
            (label, "/explore?" + urlencode({k: v for k, v in {"q": query, "sort": key}.items() if v}), key == sort)
            for key, (label, _) in SORTS.items()
        ]
        return page("explore.html", query=query, sort=sort, sort_links=sort_links, **shown)

    async def search(request: Request) -> Response:
        scope = request.query_params.get("scope", "projects")
        try:
            query = query_param(request, "q")
            if scope not in ("projects", "issues", "users"):
                raise Refused(400, "The scope must be 'projects', 'issues' or 'users'.")
            if not query:
                rows: list[dict[str, Any]] = []
            elif scope == "projects":
                rows = db.projects(query)
            elif scope == "issues":
                rows = db.search_issues(query)
            else:
                rows = db.users(query)
            shown = listing(request, rows, "/search", {"q": query, "scope": scope})
        except Refused as refused:
            return refused_page(refused)
        return page("search.html", query=query, scope=scope, **shown)

    async def user_page(request: Request) -> Response:
        found = db.user(request.path_params["username"])
        if found is None:
            return not_found("user")
        return page(
            "user.html",
            user=found,
            personal=db.namespace_projects(found["username"]),
            projects=db.member_projects(found["id"]),
            starred=db.starred_projects(found["id"]),
            groups=db.user_groups(found["id"]),
        )

    async def group_page(request: Request) -> Response:
        found = db.group(request.path_params["group"])
        if found is None:
            return not_found("group")
        projects = db.namespace_projects(found["path"])
        return page("group.html", group=found, projects=projects, members=db.group_members(found["id"]))

    async def new_project_form(request: Request) -> Response:
        return page("project_new.html", visibilities=VISIBILITIES, data={})

    async def create_project(request: Request) -> Response:
        data = {key: first(await form(request), key) for key in ("name", "description", "visibility")}
        try:
            if not data["name"]:
                raise Refused(400, "Please give the project a name.")
            check_lengths(MAX_TEXT, data, "name", "description")
            if not _PROJECT_NAME.fullmatch(data["name"]):
                raise Refused(422, "A project name may hold letters, digits, spaces, '.', '_' and '-', and starts "
                                   "with a letter or digit.")  # fmt: skip
            if data["visibility"] not in VISIBILITIES:
                raise Refused(400, f"The visibility must be one of {', '.join(VISIBILITIES)}.")
            path = project_path(data["name"])
            if db.project(db.me()["username"], path) is not None:
                raise Refused(422, f"You already have a project at {path!r}; choose another name.")
        except Refused as refused:
            return page("project_new.html", status_code=refused.status, visibilities=VISIBILITIES, data=data,
                        error=refused.message)  # fmt: skip
        db.create_project(path, data["name"], data["description"], data["visibility"])
        return back_to(f"/{db.me()['username']}/{path}")

    # ---- a project ----------------------------------------------------------------------------
    async def project_page(request: Request) -> Response:
        found = the_project(request)
        if found is None:
            return not_found("project")
        readme = db.file(found["id"], "README.md")
        return page(
            "project.html",
            project=found,
            files=db.files(found["id"]),
            readme=readme["content"] if readme else "",
            branches=db.branches(found["id"]),
            commits=db.commits(found["id"], found["default_branch"])[:1],
        )

    async def star(request: Request) -> Response:
        found = the_project(request)
        if found is None:
            return not_found("project")
        db.set_star(found["id"], request.url.path.endswith("/-/star"))
        return back_to(found["url"])

    async def blob(request: Request) -> Response:
        found = the_project(request)
        file = db.file(found["id"], request.path_params["path"]) if found else None
        if found is None or file is None:
            return not_found("project" if found is None else "file")
        return page("blob.html", project=found, file=file)

    async def commits(request: Request) -> Response:
        found = the_project(request)
        if found is None:
            return not_found("project")
        try:
            branch, author = query_param(request, "branch"), query_param(request, "author")
            if branch and branch not in {b["name"] for b in db.branches(found["id"])}:
                return not_found("branch")
            rows = db.commits(found["id"], branch, author)
            shown = listing(request, rows, f"{found['url']}/-/commits", {"branch": branch, "author": author})
        except Refused as refused:
            return refused_page(refused)
        return page("commits.html", project=found, branch=branch, author=author, branches=db.branches(found["id"]),
                    members=db.members(found["id"]), **shown)  # fmt: skip

    async def commit(request: Request) -> Response:
        found = the_project(request)
        row = db.commit(found["id"], request.path_params["sha"]) if found else None
        if found is None or row is None:
            return not_found("project" if found is None else "commit")
        return page("commit.html", project=found, commit=row)

    async def branches(request: Request) -> Response:
        found = the_project(request)
        if found is None:
            return not_found("project")
        return page("branches.html", project=found, branches=db.branches(found["id"]))

    # ---- issues -------------------------------------------------------------------------------
    async def issues(request: Request) -> Response:
        found = the_project(request)
        if found is None:
            return not_found("project")
        labels = [row["name"] for row in db.labels(found["id"])]
        members = db.members(found["id"])
        try:
            state = request.query_params.get("state", "opened")
            if state not in ISSUE_STATES:
                raise Refused(400, "The state must be 'opened', 'closed' or 'all'.")
            label, assignee = query_param(request, "label"), query_param(request, "assignee")
            query = query_param(request, "q")
            if label and label not in labels:
                raise Refused(422, f"This project has no label {label!r}.")
            params = {"state": state, "label": label, "assignee": assignee, "q": query}
            rows = db.issues(found["id"], state, label, assignee, query)
            shown = listing(request, rows, f"{found['url']}/-/issues", params)
        except Refused as refused:
            return refused_page(refused)

        def filter_url(**changes: str) -> str:
            return f"{found['url']}/-/issues?" + urlencode({k: v for k, v in {**params, **changes}.items() if v})

        return page("issues.html", project=found, params=params, labels=labels, members=members, states=ISSUE_STATES,
                    filter_url=filter_url, **shown)  # fmt: skip

    def the_issue(request: Request) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        found = the_project(request)
        iid = request.path_params["iid"]
        if found is None or not _IID.fullmatch(iid):
            return found, None
        return found, db.issue(found["id"], int(iid))

    def issue_page(found: dict[str, Any], issue: dict[str, Any], status_code: int = 200, error: str = "") -> Response:
        return page("issue.html", status_code=status_code, project=found, issue=issue, labels=db.labels(found["id"]),
                    members=db.members(found["id"]), milestones=db.milestones(found["id"]), error=error)  # fmt: skip

    async def issue(request: Request) -> Response:
        found, row = the_issue(request)
        if found is None or row is None:
            return not_found("project" if found is None else "issue")
        return issue_page(found, row)

    def choose(found: dict[str, Any], data: dict[str, list[str]]) -> tuple[list[str], int | None, int | None]:
        """The labels, assignee id and milestone id a form chose, or `Refused`."""
        known = {row["name"] for row in db.labels(found["id"])}
        labels = sorted(set(data.get("label", [])))
        unknown = [label for label in labels if label not in known]
        if unknown:
            raise Refused(422, f"This project has no label {unknown[0]!r}; its labels: {', '.join(sorted(known))}.")
        assignee_id = milestone_id = None
        if first(data, "assignee"):
            members = {row["username"]: row["id"] for row in db.members(found["id"])}
            if first(data, "assignee") not in members:
                raise Refused(422, "Only a member of the project can be assigned.")
            assignee_id = members[first(data, "assignee")]
        if first(data, "milestone"):
            milestones = {str(row["id"]): row["id"] for row in db.milestones(found["id"])}
            if first(data, "milestone") not in milestones:
                raise Refused(422, "This project has no such milestone.")
            milestone_id = milestones[first(data, "milestone")]
        return labels, assignee_id, milestone_id

    async def issue_action(request: Request) -> Response:
        found, row = the_issue(request)
        if found is None or row is None:
            return not_found("project" if found is None else "issue")
        action = request.path_params["action"]
        data = await form(request)
        try:
            if action == "comment":
                body = first(data, "body")
                if not body:
                    raise Refused(400, "Please write a comment.")
                check_lengths(MAX_TEXT, {"body": body}, "body")
                db.add_note("issue", row["id"], body)
            elif action in ("close", "reopen"):
                db.set_issue(row["id"], "state", "closed" if action == "close" else "opened")
            elif action in ("labels", "assignee", "milestone"):
                labels, assignee_id, milestone_id = choose(found, data)
                if action == "labels":
                    db.set_issue_labels(row["id"], labels)
                else:
                    chosen = assignee_id if action == "assignee" else milestone_id
                    db.set_issue(row["id"], f"{action}_id", chosen)
            else:
                return not_found("action")
        except Refused as refused:
            return issue_page(found, row, refused.status, refused.message)
        return back_to(f"{found['url']}/-/issues/{row['iid']}")

    def new_issue_page(found: dict[str, Any], status_code: int = 200, error: str = "", **data: Any) -> Response:
        return page("issue_new.html", status_code=status_code, project=found, labels=db.labels(found["id"]),
                    members=db.members(found["id"]), milestones=db.milestones(found["id"]), error=error,
                    data=data)  # fmt: skip

    async def new_issue_form(request: Request) -> Response:
        found = the_project(request)
        return not_found("project") if found is None else new_issue_page(found)

    async def create_issue(request: Request) -> Response:
        found = the_project(request)
        if found is None:
            return not_found("project")
        data = await form(request)
        title, body = first(data, "title"), first(data, "body")
        try:
            if not title:
                raise Refused(400, "Please give the issue a title.")
            check_lengths(MAX_TEXT, {"title": title, "body": body}, "title", "body")
            labels, assignee_id, milestone_id = choose(found, data)
        except Refused as refused:
            return new_issue_page(found, refused.status, refused.message, title=title, body=body)
        iid = db.create_issue(found["id"], title, body, labels, assignee_id, milestone_id)
        return back_to(f"{found['url']}/-/issues/{iid}")

    # ---- merge requests -----------------------------------------------------------------------
    async def merge_requests(request: Request) -> Response:
        found = the_project(request)
        if found is None:
            return not_found("project")
        try:
            state = request.query_params.get("state", "opened")
            if state not in MR_STATES:
                raise Refused(400, "The state must be 'opened', 'merged', 'closed' or 'all'.")
            query = query_param(request, "q")
            rows = db.merge_requests(found["id"], state, query)
            shown = listing(request, rows, f"{found['url']}/-/merge_requests", {"state": state, "q": query})
        except Refused as refused:
            return refused_page(refused)
        return page("merge_requests.html", project=found, state=state, query=query, states=MR_STATES, **shown)

    def the_merge_request(request: Request) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        found = the_project(request)
        iid = request.path_params["iid"]
        if found is None or not _IID.fullmatch(iid):
            return found, None
        return found, db.merge_request(found["id"], int(iid))

    async def merge_request(request: Request) -> Response:
        found, row = the_merge_request(request)
        if found is None or row is None:
            return not_found("project" if found is None else "merge request")
        return page("merge_request.html", project=found, mr=row)

    async def merge_request_action(request: Request) -> Response:
        found, row = the_merge_request(request)
        if found is None or row is None:
            return not_found("project" if found is None else "merge request")
        action = request.path_params["action"]
        data = await form(request)
        try:
            if action == "comment":
                body = first(data, "body")
                if not body:
                    raise Refused(400, "Please write a comment.")
                check_lengths(MAX_TEXT, {"body": body}, "body")
                db.add_note("merge_request", row["id"], body)
            elif action in ("merge", "close"):
                if row["state"] != "opened":
                    raise Refused(422, f"This merge request is {row['state']}; only an open one can be {action}d.")
                db.set_merge_request_state(row["id"], "merged" if action == "merge" else "closed")
            else:
                return not_found("action")
        except Refused as refused:
            return page("merge_request.html", status_code=refused.status, project=found, mr=row, error=refused.message)
        return back_to(f"{found['url']}/-/merge_requests/{row['iid']}")

    # ---- members and settings -----------------------------------------------------------------
    def members_page(found: dict[str, Any], status_code: int = 200, error: str = "") -> Response:
        return page("members.html", status_code=status_code, project=found, members=db.members(found["id"]),
                    roles=ROLES, error=error)  # fmt: skip

    async def members(request: Request) -> Response:
        found = the_project(request)
        return not_found("project") if found is None else members_page(found)

    def parse_role(text: str) -> str:
        if text not in ROLES:
            raise Refused(400, f"The role must be one of {', '.join(ROLES)}.")
        return text

    async def add_member(request: Request) -> Response:
        found = the_project(request)
        if found is None:
            return not_found("project")
        data = await form(request)
        username = first(data, "username").lstrip("@")
        try:
            role = parse_role(first(data, "role"))
            if not username:
                raise Refused(400, "Please give the username of the user to add.")
            check_lengths(MAX_TEXT, {"username": username}, "username")
            user = db.user(username)
            if user is None:
                raise Refused(422, f"There is no user with the username {username!r}.")
            if any(row["id"] == user["id"] for row in db.members(found["id"])):
                raise Refused(422, f"{user['name']} is already a member; change their role in the list instead.")
        except Refused as refused:
            return members_page(found, refused.status, refused.message)
        db.set_member(found["id"], user["id"], role)
        return back_to(f"{found['url']}/-/project_members")

    async def member_action(request: Request) -> Response:
        found = the_project(request)
        if found is None:
            return not_found("project")
        current = db.members(found["id"])
        member = next((row for row in current if row["username"] == request.path_params["username"]), None)
        if member is None:
            return not_found("member")
        action = request.path_params["action"]
        data = await form(request)
        try:
            role = parse_role(first(data, "role")) if action == "role" else None
            if action not in ("role", "remove"):
                return not_found("action")
            owners = [row for row in current if row["role"] == "Owner"]
            if member["role"] == "Owner" and len(owners) == 1 and role != "Owner":
                raise Refused(422, "A project keeps at least one Owner; make another member an Owner first.")
        except Refused as refused:
            return members_page(found, refused.status, refused.message)
        if role is None:
            db.remove_member(found["id"], member["id"])
        else:
            db.set_member(found["id"], member["id"], role)
        return back_to(f"{found['url']}/-/project_members")

    async def settings(request: Request) -> Response:
        found = the_project(request)
        if found is None:
            return not_found("project")
        return page("settings.html", project=found, visibilities=VISIBILITIES, data=found)

    async def save_settings(request: Request) -> Response:
        found = the_project(request)
        if found is None:
            return not_found("project")
        data = {key: first(await form(request), key) for key in ("name", "description", "visibility")}
        try:
            if not data["name"]:
                raise Refused(400, "Please give the project a name.")
            check_lengths(MAX_TEXT, data, "name", "description")
            if not _PROJECT_NAME.fullmatch(data["name"]):
                raise Refused(422, "A project name may hold letters, digits, spaces, '.', '_' and '-', and starts "
                                   "with a letter or digit.")  # fmt: skip
            if data["visibility"] not in VISIBILITIES:
                raise Refused(400, f"The visibility must be one of {', '.join(VISIBILITIES)}.")
        except Refused as refused:
            return page("settings.html", status_code=refused.status, project=found, visibilities=VISIBILITIES,
                        data=data, error=refused.message)  # fmt: skip
        db.update_project(found["id"], data["name"], data["description"], data["visibility"])
        return back_to(found["url"])

    async def missing(request: Request, exc: Exception) -> Response:
        return not_found("page")

    project = "/{namespace}/{project}"
    routes = [
        Route("/", dashboard),
        Route("/explore", explore),
        Route("/search", search),
        Route("/projects/new", new_project_form),
        Route("/projects/new", create_project, methods=["POST"]),
        Route("/users/{username}", user_page),
        Route("/groups/{group}", group_page),
        Route(project, project_page),
        Route(project + "/-/star", star, methods=["POST"]),
        Route(project + "/-/unstar", star, methods=["POST"]),
        Route(project + "/-/blob/{path:path}", blob),
        Route(project + "/-/commits", commits),
        Route(project + "/-/commit/{sha}", commit),
        Route(project + "/-/branches", branches),
        Route(project + "/-/issues", issues),
        Route(project + "/-/issues/new", new_issue_form),
        Route(project + "/-/issues/new", create_issue, methods=["POST"]),
        Route(project + "/-/issues/{iid}", issue),
        Route(project + "/-/issues/{iid}/{action}", issue_action, methods=["POST"]),
        Route(project + "/-/merge_requests", merge_requests),
        Route(project + "/-/merge_requests/{iid}", merge_request),
        Route(project + "/-/merge_requests/{iid}/{action}", merge_request_action, methods=["POST"]),
        Route(project + "/-/project_members", members),
        Route(project + "/-/project_members", add_member, methods=["POST"]),
        Route(project + "/-/project_members/{username}/{action}", member_action, methods=["POST"]),
        Route(project + "/-/settings", settings),
        Route(project + "/-/settings", save_settings, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={404: missing, 405: missing})
