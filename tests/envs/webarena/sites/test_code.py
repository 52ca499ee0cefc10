"""The code host over HTTP (no browser): the seed data, every state-changing flow, the input checks
(400/422/404, never 500), the restore, and the task templates' sanity."""

from __future__ import annotations

import html as html_module
import re
from collections import Counter

import pytest
from starlette.testclient import TestClient

from agentgym_envs.webarena.sites.code.app import create_app
from agentgym_envs.webarena.sites.code.db import CodeDB, seed_connection
from agentgym_envs.webarena.sites.code.tasks import TEMPLATES

P = "/quiet-quill/aurora-api"  # project 1 of the seed


@pytest.fixture(scope="module")
def site() -> tuple[TestClient, CodeDB]:
    db = CodeDB()
    yield TestClient(create_app(db), base_url="http://code.test", follow_redirects=True), db
    db.close()


@pytest.fixture()
def client(site: tuple[TestClient, CodeDB]) -> TestClient:
    site[1].restore()
    return site[0]


def text(html: str) -> str:
    return " ".join(html_module.unescape(re.sub(r"<[^>]+>", " ", html)).split())


def everything(db: CodeDB) -> tuple:
    """Everything an agent can change on the code host."""
    project = db.project("quiet-quill", "aurora-api")
    return (
        db.projects(),
        project,
        db.issues(project["id"], "all"),
        db.issue(project["id"], 2),
        db.merge_requests(project["id"], "all"),
        db.merge_request(project["id"], 1),
        db.members(project["id"]),
        db.namespace_projects("devon"),
    )


def test_the_seed_is_large_and_deterministic() -> None:
    first, second = seed_connection(), seed_connection()
    counts = {t: first.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("users", "projects", "issues")}
    assert counts["users"] >= 30 and 50 <= counts["projects"] <= 100 and counts["issues"] >= 300
    for table in ("commits", "issues", "merge_requests", "members", "stars", "files", "notes"):
        query = f"SELECT * FROM {table} ORDER BY 1, 2"
        assert [tuple(r) for r in first.execute(query)] == [tuple(r) for r in second.execute(query)]
    states = {row[0] for row in first.execute("SELECT state FROM merge_requests")}
    assert states == {"opened", "merged", "closed"}
    first.close()
    second.close()


def test_pages_show_the_seed(client: TestClient) -> None:
    page = text(client.get(P).text)
    assert "aurora-api" in page and "README.md" in page and "pip install aurora-api" in page
    assert "Kavya Iyer" in text(client.get(f"{P}/-/commits", params={"author": "kavya.iyer"}).text)
    assert "GNU General Public License v3.0" in text(client.get(f"{P}/-/blob/LICENSE").text)
    assert "docs/update" in text(client.get(f"{P}/-/branches").text)
    issue = text(client.get(f"{P}/-/issues/1").text)
    assert "Add unit tests for new users" in issue and "Gustavo Lima" in issue and "v2.0" in issue
    assert "Ximena Ortiz" in text(client.get("/users/ximena.ortiz").text)
    assert "Loopback Labs" in text(client.get("/groups/loopback-labs").text)
    assert "aurora-api" in text(client.get("/search", params={"q": "aurora"}).text)
    assert "Alice Moreau" in text(client.get("/search", params={"q": "alice", "scope": "users"}).text)


def test_lists_filter_sort_and_paginate_from_the_url_query(client: TestClient, site: tuple[TestClient, CodeDB]) -> None:
    db = site[1]
    stars = re.findall(r"<td>(\d+)</td></tr>", client.get("/explore", params={"sort": "stars"}).text)
    assert [int(s) for s in stars] == sorted((int(s) for s in stars), reverse=True) and len(stars) == 20
    assert "Page 4" in text(client.get("/explore").text)  # 72 projects, 20 a page
    labelled = text(client.get(f"{P}/-/issues", params={"state": "opened", "label": "critical"}).text)
    project = db.project("quiet-quill", "aurora-api")
    expected = db.issues(project["id"], "opened", "critical")
    assert expected and f"{len(expected)} issue" in labelled and all(row["title"] in labelled for row in expected)
    closed = text(client.get(f"{P}/-/issues", params={"state": "closed"}).text)
    assert "Add unit tests for new users" in closed
    merged = db.merge_requests(project["id"], "merged")
    assert all(row["title"] in text(client.get(f"{P}/-/merge_requests?state=merged").text) for row in merged)


def test_issue_flows_change_the_issue_page(client: TestClient, site: tuple[TestClient, CodeDB]) -> None:
    issue = f"{P}/-/issues/2"
    client.post(f"{issue}/comment", data={"body": "Confirmed here."})
    client.post(f"{issue}/close")
    client.post(f"{issue}/labels", data={"label": ["bug", "question"]})
    client.post(f"{issue}/assignee", data={"assignee": "kavya.iyer"})
    client.post(f"{issue}/milestone", data={"milestone": "1"})
    found = site[1].issue(1, 2)
    assert found["state"] == "closed" and found["labels"] == ["bug", "question"]
    assert found["assignee"] == "Kavya Iyer" and found["milestone"] == "v2.0"
    assert found["notes"][-1]["body"] == "Confirmed here." and found["notes"][-1]["username"] == "devon"
    page = client.post(f"{issue}/reopen")
    assert page.status_code == 200 and 'id="issue-state">Open<' in page.text
    new = client.post(f"{P}/-/issues/new", data={"title": "Brand new", "label": "bug", "assignee": "kavya.iyer"})
    assert new.url.path == f"{P}/-/issues/9" and "Brand new" in new.text and "Kavya Iyer" in new.text


def test_merge_request_member_star_settings_and_project_flows(
    client: TestClient, site: tuple[TestClient, CodeDB]
) -> None:
    db = site[1]
    client.post(f"{P}/-/merge_requests/1/comment", data={"body": "Looks good."})
    assert 'id="mr-state">Merged<' in client.post(f"{P}/-/merge_requests/1/merge").text
    assert client.post(f"{P}/-/merge_requests/1/close").status_code == 422  # merged already
    assert "Looks good." in client.get(f"{P}/-/merge_requests/1").text
    client.post(f"{P}/-/project_members", data={"username": "hiro.tanaka", "role": "Guest"})
    client.post(f"{P}/-/project_members/gustavo.lima/role", data={"role": "Maintainer"})
    client.post(f"{P}/-/project_members/liam.murphy/remove")
    roles = {row["username"]: row["role"] for row in db.members(1)}
    assert roles["hiro.tanaka"] == "Guest" and roles["gustavo.lima"] == "Maintainer" and "liam.murphy" not in roles
    before = db.project("quiet-quill", "aurora-api")["stars"]
    assert 'id="star-button">Unstar<' in client.post(f"{P}/-/star").text
    assert db.project("quiet-quill", "aurora-api")["stars"] == before + 1
    client.post(f"{P}/-/unstar")
    assert db.project("quiet-quill", "aurora-api")["stars"] == before
    saved = client.post(
        f"{P}/-/settings", data={"name": "aurora-api-next", "description": "New.", "visibility": "Private"}
    )
    assert 'id="project-name">aurora-api-next<' in saved.text and 'id="visibility">Private<' in saved.text
    made = client.post("/projects/new", data={"name": "My Notes", "description": "Mine.", "visibility": "Internal"})
    assert made.url.path == "/devon/my-notes" and 'id="description">Mine.<' in made.text
    assert client.get("/devon/my-notes/-/project_members").text.count("Owner") >= 1


def test_bad_input_gets_400_422_or_404_and_changes_nothing(client: TestClient, site: tuple[TestClient, CodeDB]) -> None:
    db = site[1]
    before = everything(db)
    cases = [
        ("get", "/explore?sort=nope", {}, 400),
        ("get", "/explore?page=0", {}, 400),
        ("get", "/explore?q=" + "x" * 300, {}, 422),
        ("get", "/search?scope=groups&q=a", {}, 400),
        ("get", "/nobody/nothing", {}, 404),
        ("get", "/users/nobody", {}, 404),
        ("get", "/groups/nobody", {}, 404),
        ("get", f"{P}/-/blob/missing.txt", {}, 404),
        ("get", f"{P}/-/commit/0000", {}, 404),
        ("get", f"{P}/-/commits?branch=nope", {}, 404),
        ("get", f"{P}/-/issues?state=open", {}, 400),
        ("get", f"{P}/-/issues?label=nope", {}, 422),
        ("get", f"{P}/-/issues/99999999999", {}, 404),
        ("get", f"{P}/-/merge_requests?state=x", {}, 400),
        ("post", f"{P}/-/issues/2/comment", {"body": ""}, 400),
        ("post", f"{P}/-/issues/2/comment", {"body": "x" * 6000}, 422),
        ("post", f"{P}/-/issues/2/labels", {"label": "nope"}, 422),
        ("post", f"{P}/-/issues/2/assignee", {"assignee": "alice.moreau"}, 422),
        ("post", f"{P}/-/issues/2/milestone", {"milestone": "9999"}, 422),
        ("post", f"{P}/-/issues/2/explode", {}, 404),
        ("post", f"{P}/-/issues/new", {"title": ""}, 400),
        ("post", f"{P}/-/merge_requests/4/merge", {}, 404 if db.merge_request(1, 4) is None else 200),
        ("post", f"{P}/-/project_members", {"username": "nobody", "role": "Guest"}, 422),
        ("post", f"{P}/-/project_members", {"username": "gustavo.lima", "role": "Guest"}, 422),
        ("post", f"{P}/-/project_members", {"username": "hiro.tanaka", "role": "King"}, 400),
        ("post", f"{P}/-/project_members/nobody/remove", {}, 404),
        ("post", f"{P}/-/settings", {"name": "", "visibility": "Public"}, 400),
        ("post", f"{P}/-/settings", {"name": "ok", "visibility": "Secret"}, 400),
        ("post", f"{P}/-/settings", {"name": "!bad", "visibility": "Public"}, 422),
        ("post", "/projects/new", {"name": "x" * 101, "visibility": "Public"}, 422),
    ]
    for method, path, data, status in cases:
        if status == 200:
            continue
        response = getattr(client, method)(path, **({"data": data} if method == "post" else {}))
        assert response.status_code == status, (path, data, response.status_code)
    owner = next(row for row in db.members(1) if row["role"] == "Owner")
    assert client.post(f"{P}/-/project_members/{owner['username']}/remove").status_code == 422  # the only Owner
    assert everything(db) == before


def test_restore_undoes_every_change(client: TestClient, site: tuple[TestClient, CodeDB]) -> None:
    db = site[1]
    before = everything(db)
    client.post(f"{P}/-/issues/2/comment", data={"body": "Temporary."})
    client.post(f"{P}/-/issues/2/close")
    client.post(f"{P}/-/issues/new", data={"title": "Temporary"})
    client.post(f"{P}/-/merge_requests/1/close")
    client.post(f"{P}/-/project_members", data={"username": "hiro.tanaka", "role": "Guest"})
    client.post(f"{P}/-/star")
    client.post(f"{P}/-/settings", data={"name": "renamed", "description": "", "visibility": "Private"})
    client.post("/projects/new", data={"name": "scratch", "visibility": "Public"})
    assert everything(db) != before
    db.restore()
    assert everything(db) == before


def test_templates_are_many_unique_filled_and_in_proportion() -> None:
    seed = seed_connection()
    ids = [t.template_id for t in TEMPLATES]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)
    kinds = Counter(t.kind for t in TEMPLATES)
    assert kinds["state"] >= 0.4 * len(ids) and kinds["info"] >= 0.3 * len(ids) and kinds["nav"] >= 0.12 * len(ids)
    assert kinds["na"] >= 1 and 3 <= sum(t.held_out for t in TEMPLATES) <= 6
    for template in TEMPLATES:
        instances = template.instances(seed)
        assert instances, template.template_id
        assert template.instances(seed) == instances  # deterministic
        config = template.config(seed, instances[0], f"{template.template_id}/0")
        assert "{{" not in config["intent"] and config["agentgym_expert"][-1]["do"] == "stop"
        answers = config["eval"]["reference_answers"] or {}
        assert all(answers.values()) and "fuzzy_match" not in answers, template.template_id
    seed.close()
