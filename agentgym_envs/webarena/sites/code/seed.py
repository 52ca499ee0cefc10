"""The code host's seed data: users, groups, projects with files, commits, branches, issues, merge
requests, members and stars, generated deterministically from the word lists below."""

from __future__ import annotations

import hashlib
import random
import sqlite3
from datetime import date, datetime, timedelta

SCHEMA = """
CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT UNIQUE NOT NULL, name TEXT NOT NULL, bio TEXT NOT NULL,
    location TEXT NOT NULL, joined TEXT NOT NULL);
CREATE TABLE groups (id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL);
CREATE TABLE group_members (group_id INTEGER NOT NULL, user_id INTEGER NOT NULL, PRIMARY KEY (group_id, user_id));
CREATE TABLE projects (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, path TEXT NOT NULL, name TEXT NOT NULL,
    description TEXT NOT NULL, visibility TEXT NOT NULL, default_branch TEXT NOT NULL, created TEXT NOT NULL,
    UNIQUE (namespace, path));
CREATE TABLE files (project_id INTEGER NOT NULL, path TEXT NOT NULL, content TEXT NOT NULL,
    PRIMARY KEY (project_id, path));
CREATE TABLE branches (project_id INTEGER NOT NULL, name TEXT NOT NULL, PRIMARY KEY (project_id, name));
CREATE TABLE commits (id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL, sha TEXT UNIQUE NOT NULL,
    branch TEXT NOT NULL, author_id INTEGER NOT NULL, committed TEXT NOT NULL, message TEXT NOT NULL);
CREATE TABLE labels (project_id INTEGER NOT NULL, name TEXT NOT NULL, color TEXT NOT NULL,
    PRIMARY KEY (project_id, name));
CREATE TABLE milestones (id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL, title TEXT NOT NULL, due TEXT NOT NULL);
CREATE TABLE issues (id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL, iid INTEGER NOT NULL, title TEXT NOT NULL,
    body TEXT NOT NULL, author_id INTEGER NOT NULL, assignee_id INTEGER, milestone_id INTEGER, state TEXT NOT NULL,
    created TEXT NOT NULL, UNIQUE (project_id, iid));
CREATE TABLE issue_labels (issue_id INTEGER NOT NULL, label TEXT NOT NULL, PRIMARY KEY (issue_id, label));
CREATE TABLE merge_requests (id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL, iid INTEGER NOT NULL,
    title TEXT NOT NULL, body TEXT NOT NULL, author_id INTEGER NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL,
    state TEXT NOT NULL, created TEXT NOT NULL, UNIQUE (project_id, iid));
CREATE TABLE notes (id INTEGER PRIMARY KEY, target TEXT NOT NULL, target_id INTEGER NOT NULL,
    author_id INTEGER NOT NULL, body TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE members (project_id INTEGER NOT NULL, user_id INTEGER NOT NULL, role TEXT NOT NULL,
    PRIMARY KEY (project_id, user_id));
CREATE TABLE stars (project_id INTEGER NOT NULL, user_id INTEGER NOT NULL, PRIMARY KEY (project_id, user_id));
"""

#: Member roles, least to most powerful.
ROLES = ("Guest", "Reporter", "Developer", "Maintainer", "Owner")
VISIBILITIES = ("Public", "Internal", "Private")
LABELS = {
    "bug": "#d9534f",
    "feature": "#428bca",
    "documentation": "#5cb85c",
    "enhancement": "#5bc0de",
    "question": "#f0ad4e",
    "help wanted": "#8e44ad",
    "good first issue": "#7f8c8d",
    "critical": "#c0392b",
}
#: The signed-in user's username (user id 1).
ME = "devon"

_FIRST = (
    "Devon", "Alice", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kavya",
    "Liam", "Maya", "Nikolai", "Olga", "Pedro", "Quinn", "Rosa", "Samir", "Tamsin", "Uma", "Victor", "Wen",
    "Ximena", "Yusuf", "Zara", "Anders", "Bianca", "Caleb", "Daria", "Emeka", "Fiona", "Gustavo", "Hana", "Ivan",
    "Jasmine", "Kofi", "Lena", "Marco",
)  # fmt: skip
_LAST = (
    "Park", "Moreau", "Santos", "Rossi", "Volkov", "Petrova", "Haddad", "Lindqvist", "Tanaka", "Ferreira", "Weber",
    "Iyer", "Murphy", "Cohen", "Orlov", "Novak", "Alvarez", "Baker", "Delgado", "Khan", "Fletcher", "Rao",
    "Dubois", "Zhang", "Ortiz", "Demir", "Okafor", "Berg", "Conti", "Hughes", "Kuznetsova", "Eze", "Gallagher",
    "Lima", "Sato", "Popescu", "Reyes", "Mensah", "Fischer", "Bellini",
)  # fmt: skip
_CITIES = ("Lisbon", "Osaka", "Toronto", "Nairobi", "Berlin", "Austin", "Melbourne", "Bogota", "Oslo", "Pune")
_INTERESTS = ("compilers", "data pipelines", "web accessibility", "embedded systems", "testing", "databases",
              "developer tooling", "machine learning", "networking", "documentation")  # fmt: skip
GROUPS = (
    ("loopback-labs", "Loopback Labs", "Research tools and experiments."),
    ("data-garden", "Data Garden", "Libraries for tidy data."),
    ("tiny-tools", "Tiny Tools", "Small command-line utilities that do one thing well."),
    ("web-weavers", "Web Weavers", "Web frameworks, sites and browser tooling."),
    ("open-harbor", "Open Harbor", "Infrastructure and deployment."),
    ("pixel-forge", "Pixel Forge", "Graphics, images and games."),
    ("cloud-atlas", "Cloud Atlas", "Maps, geodata and services."),
    ("quiet-quill", "Quiet Quill", "Writing, text and documentation tools."),
)
_PREFIXES = ("aurora", "basalt", "cinder", "delta", "ember", "fjord", "glacier", "harbor", "iris", "juniper",
             "kestrel", "lumen", "marble", "nimbus", "onyx", "prism", "quartz", "raven", "sable", "tundra",
             "umber", "vortex", "willow", "zephyr")  # fmt: skip
_KINDS = {
    "cli": "A command-line tool for {topic}",
    "api": "A REST API service for {topic}",
    "docs": "Documentation site about {topic}",
    "sdk": "A Python SDK for {topic}",
    "dashboard": "A web dashboard for {topic}",
    "parser": "A fast parser for {topic}",
    "bot": "A chat bot that helps with {topic}",
    "sync": "A tool that keeps {topic} in sync",
}
_TOPICS = ("log files", "weather data", "invoices", "music playlists", "recipes", "sensor readings", "bookmarks",
           "release notes", "CSV reports", "map tiles", "calendar events", "build artifacts")  # fmt: skip
_LICENSES = ("MIT License", "Apache License 2.0", "BSD 3-Clause License", "GNU General Public License v3.0")
_EXTRA_BRANCHES = ("develop", "feature/search", "feature/login", "fix/typos", "release/1.0", "docs/update",
                   "refactor/core", "feature/export")  # fmt: skip
_VERBS = ("Fix", "Add", "Improve", "Remove", "Document", "Refactor", "Support", "Update", "Investigate", "Handle")
_OBJECTS = ("login timeout", "cache eviction", "CSV export", "dark mode", "error messages", "retry logic",
            "config parser", "search ranking", "memory leak", "API pagination", "unit tests", "date formatting",
            "file upload", "rate limiting", "plugin loader", "release script")  # fmt: skip
_CONTEXTS = ("on Windows", "in the CLI", "for large files", "after upgrade", "in the dashboard", "on startup",
             "with proxies", "for new users")  # fmt: skip
_COMMIT_VERBS = ("Fix", "Add", "Update", "Refactor", "Remove", "Rename", "Tidy", "Bump", "Speed up", "Test")
_COMMIT_OBJECTS = ("README", "logging setup", "CI config", "version number", "error handling", "type hints",
                   "input validation", "HTTP client", "changelog", "default settings", "docs example", "cache keys",
                   "parser tests", "timeout handling", "dependency pins", "help text")  # fmt: skip
_MILESTONES = ("v1.0", "v1.1", "v2.0", "Spring cleanup", "Beta launch")
_NOTE_BODIES = ("I can reproduce this on the latest version.", "Could you share the full error output?",
                "This should be fixed by the next release.", "Thanks, that workaround helps for now.",
                "I am looking into it this week.", "Same here, it started after the last update.")  # fmt: skip
START = date(2022, 1, 3)


def _day(rng: random.Random, start: date, span: int) -> date:
    return start + timedelta(days=rng.randrange(span))


def populate(connection: sqlite3.Connection) -> None:
    """Create the schema and fill it with the generated seed data."""
    rng = random.Random(20240601)
    connection.executescript(SCHEMA)
    users = []
    for i, (first, last) in enumerate(zip(_FIRST, _LAST, strict=True), start=1):
        username = first.lower() if i == 1 else f"{first.lower()}.{last.lower()}"
        bio = f"Works on {rng.choice(_INTERESTS)}." if i % 5 else ""
        joined = _day(rng, date(2020, 1, 1), 700).isoformat()
        users.append((i, username, f"{first} {last}", bio, rng.choice(_CITIES), joined))
    connection.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?, ?)", users)
    user_ids = [u[0] for u in users]
    usernames = {u[0]: u[1] for u in users}

    for gid, (path, name, description) in enumerate(GROUPS, start=1):
        connection.execute("INSERT INTO groups VALUES (?, ?, ?, ?)", (gid, path, name, description))
        crew = sorted(rng.sample(user_ids[1:], 6) + ([1] if gid % 2 else []))
        connection.executemany("INSERT INTO group_members VALUES (?, ?)", [(gid, u) for u in crew])

    names = [f"{p}-{k}" for p in _PREFIXES for k in _KINDS]
    rng.shuffle(names)
    note_id = 0
    for pid, name in enumerate(sorted(names[:72]), start=1):
        kind = name.split("-")[1]
        topic = rng.choice(_TOPICS)
        description = _KINDS[kind].format(topic=topic) + "."
        if pid % 4 == 0:
            owner = rng.choice(user_ids)
            namespace = usernames[owner]
            members = {owner: "Owner"}
        else:
            gid = rng.randrange(len(GROUPS))
            namespace = GROUPS[gid][0]
            owner = rng.choice(user_ids[1:])
            members = {owner: "Owner"}
        for other in rng.sample(user_ids, rng.randint(2, 7)):
            members.setdefault(other, rng.choice(ROLES[:4]))
        if pid % 3 == 0:
            members.setdefault(1, rng.choice(("Developer", "Maintainer")))
        visibility = VISIBILITIES[0] if rng.random() < 0.75 else rng.choice(VISIBILITIES[1:])
        created = _day(rng, START, 600)
        connection.execute(
            "INSERT INTO projects VALUES (?, ?, ?, ?, ?, ?, 'main', ?)",
            (pid, namespace, name, name, description, visibility, created.isoformat()),
        )
        connection.executemany(
            "INSERT INTO members VALUES (?, ?, ?)", [(pid, u, role) for u, role in sorted(members.items())]
        )
        stars = rng.sample(user_ids, rng.randint(0, 14))
        connection.executemany("INSERT INTO stars VALUES (?, ?)", [(pid, u) for u in sorted(stars)])

        license_name = rng.choice(_LICENSES)
        module = name.replace("-", "_")
        files = {
            "README.md": (
                f"# {name}\n\n{description}\n\n## Installation\n\n    pip install {name}\n\n"
                f"## Usage\n\n    {module} --help\n\n## License\n\n{license_name}. See LICENSE.\n"
            ),
            "LICENSE": f"{license_name}\n\nCopyright (c) {created.year} the {name} authors\n",
            ".gitignore": "__pycache__/\n*.egg-info/\ndist/\n",
            f"src/{module}/__init__.py": f'"""{description}"""\n\n__version__ = "1.{pid % 7}.{pid % 3}"\n',
            f"src/{module}/core.py": f'def run(items):\n    """Process {topic}."""\n    return sorted(items)\n',
            f"tests/test_{module}.py": (
                f"from {module}.core import run\n\n\ndef test_run():\n    assert run([2, 1]) == [1, 2]\n"
            ),
        }
        if pid % 2:
            files["docs/usage.md"] = f"# Using {name}\n\nRun `{module}` with a file of {topic}.\n"
        if pid % 5 == 0:
            files["CONTRIBUTING.md"] = "# Contributing\n\nOpen an issue first, then a merge request.\n"
        connection.executemany("INSERT INTO files VALUES (?, ?, ?)", [(pid, p, c) for p, c in sorted(files.items())])

        branches = ["main", *sorted(rng.sample(_EXTRA_BRANCHES, rng.randint(0, 3)))]
        connection.executemany("INSERT INTO branches VALUES (?, ?)", [(pid, b) for b in branches])
        writers = [u for u, role in members.items() if role in ("Developer", "Maintainer", "Owner")] or [owner]
        moment = datetime(created.year, created.month, created.day, 9, 0)
        for n in range(rng.randint(6, 28)):
            moment += timedelta(days=rng.randint(1, 12), minutes=rng.randint(0, 600))
            branch = "main" if n == 0 or rng.random() < 0.7 else rng.choice(branches)
            message = f"{rng.choice(_COMMIT_VERBS)} {rng.choice(_COMMIT_OBJECTS)}"
            sha = hashlib.sha1(f"{name}/{n}".encode()).hexdigest()
            connection.execute(
                "INSERT INTO commits (project_id, sha, branch, author_id, committed, message) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (pid, sha, branch, rng.choice(writers), moment.strftime("%Y-%m-%d %H:%M"), message),
            )

        labels = sorted(rng.sample(sorted(LABELS), rng.randint(4, 8)))
        connection.executemany("INSERT INTO labels VALUES (?, ?, ?)", [(pid, lb, LABELS[lb]) for lb in labels])
        milestone_ids = []
        for title in rng.sample(_MILESTONES, rng.randint(1, 3)):
            cursor = connection.execute(
                "INSERT INTO milestones (project_id, title, due) VALUES (?, ?, ?)",
                (pid, title, _day(rng, date(2024, 6, 1), 200).isoformat()),
            )
            milestone_ids.append(cursor.lastrowid)
        member_ids = sorted(members)
        titles: set[str] = set()
        for iid in range(1, rng.randint(4, 16) + 1):
            title = ""
            while not title or title in titles:
                title = f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_CONTEXTS)}"
            titles.add(title)
            assignee = rng.choice(member_ids) if rng.random() < 0.7 else None
            milestone = rng.choice(milestone_ids) if rng.random() < 0.5 else None
            state = "opened" if rng.random() < 0.6 else "closed"
            created_on = _day(rng, date(2023, 9, 1), 270).isoformat()
            cursor = connection.execute(
                "INSERT INTO issues (project_id, iid, title, body, author_id, assignee_id, milestone_id, state, "
                "created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (pid, iid, title, f"Steps to reproduce: use {name} with {topic}.", rng.choice(user_ids), assignee,
                 milestone, state, created_on),
            )  # fmt: skip
            issue_id = cursor.lastrowid
            for label in sorted(rng.sample(labels, rng.choice((0, 1, 1, 2, 3)))):
                connection.execute("INSERT INTO issue_labels VALUES (?, ?)", (issue_id, label))
            for _ in range(rng.choice((0, 0, 1, 2, 3))):
                note_id += 1
                connection.execute(
                    "INSERT INTO notes VALUES (?, 'issue', ?, ?, ?, ?)",
                    (note_id, issue_id, rng.choice(user_ids), rng.choice(_NOTE_BODIES), created_on),
                )
        mr_titles: set[str] = set()
        for iid in range(1, (rng.randint(1, 6) if len(branches) > 1 else 0) + 1):
            title = ""
            while not title or title in mr_titles:
                title = f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
            mr_titles.add(title)
            source = rng.choice(branches[1:])
            state = rng.choice(("opened", "opened", "merged", "closed"))
            connection.execute(
                "INSERT INTO merge_requests (project_id, iid, title, body, author_id, source, target, state, created) "
                "VALUES (?, ?, ?, ?, ?, ?, 'main', ?, ?)",
                (pid, iid, title, f"This merge request will {title.lower()}.", rng.choice(writers), source, state,
                 _day(rng, date(2023, 10, 1), 240).isoformat()),
            )  # fmt: skip
