"""The forum's seed data, generated deterministically: forums, users with bios, submissions (link and
text posts) with scores and dates, nested comments, the signed-in user's votes and subscriptions.

Everything comes from the word lists below and one `random.Random(SEED)`, so every build is the same.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import datetime, timedelta

SEED = 18
#: The signed-in user (id 1): WebArena's forum tasks run as one seeded account.
ME = "harbor_lights"

SCHEMA = """
CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT NOT NULL UNIQUE COLLATE NOCASE, bio TEXT NOT NULL,
                    joined TEXT NOT NULL);
CREATE TABLE forums (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE COLLATE NOCASE, title TEXT NOT NULL,
                     description TEXT NOT NULL, created TEXT NOT NULL, creator INTEGER NOT NULL REFERENCES users(id),
                     subscribers INTEGER NOT NULL);
CREATE TABLE subscriptions (forum_id INTEGER PRIMARY KEY REFERENCES forums(id));
CREATE TABLE submissions (id INTEGER PRIMARY KEY, forum_id INTEGER NOT NULL REFERENCES forums(id),
                          user_id INTEGER NOT NULL REFERENCES users(id), title TEXT NOT NULL, url TEXT NOT NULL,
                          body TEXT NOT NULL, created TEXT NOT NULL, score INTEGER NOT NULL,
                          edited INTEGER NOT NULL DEFAULT 0);
CREATE TABLE comments (id INTEGER PRIMARY KEY, submission_id INTEGER NOT NULL REFERENCES submissions(id),
                       parent_id INTEGER REFERENCES comments(id), user_id INTEGER NOT NULL REFERENCES users(id),
                       body TEXT NOT NULL, created TEXT NOT NULL, score INTEGER NOT NULL,
                       deleted INTEGER NOT NULL DEFAULT 0, edited INTEGER NOT NULL DEFAULT 0);
CREATE TABLE submission_votes (submission_id INTEGER PRIMARY KEY REFERENCES submissions(id),
                               direction INTEGER NOT NULL CHECK (direction IN (-1, 1)));
CREATE TABLE comment_votes (comment_id INTEGER PRIMARY KEY REFERENCES comments(id),
                            direction INTEGER NOT NULL CHECK (direction IN (-1, 1)));
CREATE INDEX comments_by_submission ON comments(submission_id);
CREATE INDEX submissions_by_forum ON submissions(forum_id);
CREATE INDEX submissions_by_user ON submissions(user_id);
"""

#: name, title, what it is about, things its posts talk about.
FORUMS = [
    ("books", "Books", "novels, memoirs and the people who write them", ["novel", "memoir", "paperback", "audiobook"]),
    ("movies", "Movies", "films old and new, reviews and recommendations", ["film", "sequel", "soundtrack", "trailer"]),
    ("gaming", "Gaming", "video games on every platform", ["console", "controller", "speedrun", "indie game"]),
    (
        "science",
        "Science",
        "research news and questions about how things work",
        ["experiment", "paper", "telescope", "fossil"],
    ),
    (
        "cooking",
        "Home Cooking",
        "recipes, techniques and kitchen disasters",
        ["recipe", "cast iron pan", "sourdough", "curry"],
    ),
    (
        "gardening",
        "Gardening",
        "vegetables, flowers and everything that grows",
        ["tomato plant", "raised bed", "compost", "seedling"],
    ),
    ("cycling", "Cycling", "road, gravel and commuter bikes", ["road bike", "helmet", "bike lane", "gravel route"]),
    (
        "photography",
        "Photography",
        "cameras, lenses and the pictures they take",
        ["lens", "tripod", "film camera", "portrait"],
    ),
    ("music", "Music", "albums, concerts and instruments", ["album", "concert", "vinyl record", "guitar"]),
    ("history", "History", "the past and the people who lived it", ["castle", "old map", "museum", "battle"]),
    (
        "space",
        "Space",
        "rockets, planets and the night sky",
        ["rocket launch", "planet", "meteor shower", "space probe"],
    ),
    (
        "fitness",
        "Fitness",
        "training, running and staying healthy",
        ["workout", "running shoe", "kettlebell", "marathon"],
    ),
    ("travel", "Travel", "trips, tips and places to go", ["train journey", "backpack", "hostel", "road trip"]),
    (
        "programming",
        "Programming",
        "code, tools and software careers",
        ["compiler", "text editor", "side project", "code review"],
    ),
    (
        "linux",
        "Linux",
        "distributions, desktops and the command line",
        ["distro", "terminal", "window manager", "kernel update"],
    ),
    (
        "diy",
        "Do It Yourself",
        "repairs and projects around the house",
        ["workbench", "power drill", "shelf", "paint job"],
    ),
    (
        "woodworking",
        "Woodworking",
        "furniture, joinery and hand tools",
        ["dovetail joint", "chisel", "oak table", "lathe"],
    ),
    (
        "boardgames",
        "Board Games",
        "tabletop games and game nights",
        ["board game", "card game", "game night", "expansion"],
    ),
    ("coffee", "Coffee", "beans, brewing and espresso", ["espresso machine", "grinder", "pour over", "roast"]),
    ("tea", "Tea", "leaves, teapots and brewing", ["green tea", "teapot", "oolong", "tea tin"]),
    ("pets", "Pets", "cats, dogs and other companions", ["kitten", "puppy", "aquarium", "parrot"]),
    ("birding", "Birdwatching", "spotting and identifying birds", ["binoculars", "bird feeder", "owl", "heron"]),
    ("hiking", "Hiking", "trails, gear and mountains", ["trail", "hiking boot", "summit", "tent"]),
    ("running", "Running", "training plans and races", ["5k", "half marathon", "running watch", "track session"]),
    ("art", "Art", "drawing, painting and sculpture", ["sketchbook", "watercolor", "oil painting", "sculpture"]),
    (
        "writing",
        "Writing",
        "fiction, poetry and the craft of writing",
        ["short story", "poem", "first draft", "writing prompt"],
    ),
    (
        "languages",
        "Language Learning",
        "learning and teaching languages",
        ["vocabulary", "grammar book", "flashcard", "accent"],
    ),
    ("math", "Mathematics", "puzzles, proofs and problems", ["proof", "puzzle", "equation", "prime number"]),
    ("chess", "Chess", "openings, endgames and tournaments", ["opening", "endgame", "chess clock", "tournament"]),
    ("knitting", "Knitting", "yarn, needles and patterns", ["sweater", "yarn", "scarf", "pattern"]),
    ("baking", "Baking", "bread, cakes and pastry", ["cake", "croissant", "bread loaf", "pie crust"]),
    ("cars", "Cars", "driving, repairs and classic cars", ["engine", "classic car", "tire", "road test"]),
    ("aviation", "Aviation", "planes, pilots and airports", ["airliner", "glider", "flight simulator", "runway"]),
    (
        "weather",
        "Weather",
        "forecasts, storms and climate",
        ["thunderstorm", "forecast", "snowfall", "weather station"],
    ),
    (
        "architecture",
        "Architecture",
        "buildings and the cities they make",
        ["skyscraper", "bridge", "floor plan", "old church"],
    ),
    (
        "personalfinance",
        "Personal Finance",
        "budgets, saving and spending",
        ["budget", "savings account", "credit card", "pay raise"],
    ),
    ("anime", "Anime", "series, films and manga", ["anime series", "manga", "opening song", "studio"]),
    ("podcasts", "Podcasts", "shows worth listening to", ["podcast", "episode", "microphone", "interview"]),
    (
        "camping",
        "Camping",
        "tents, campfires and the outdoors",
        ["campfire", "sleeping bag", "camp stove", "lake site"],
    ),
    (
        "urbanism",
        "Urbanism",
        "streets, transit and city life",
        ["tram line", "bus route", "public square", "crosswalk"],
    ),
]

ADJECTIVES = [
    "quiet",
    "bright",
    "rusty",
    "swift",
    "gentle",
    "lucky",
    "brave",
    "calm",
    "dusty",
    "eager",
    "fuzzy",
    "golden",
    "happy",
    "icy",
    "jolly",
    "keen",
    "lazy",
    "mellow",
    "noble",
    "odd",
    "proud",
    "rapid",
    "silver",
    "tiny",
    "velvet",
    "witty",
    "young",
    "zesty",
    "amber",
    "bold",
    "cosmic",
    "daring",
    "early",
    "frosty",
    "grumpy",
    "hidden",
]
NOUNS = [
    "otter",
    "falcon",
    "maple",
    "harbor",
    "comet",
    "badger",
    "willow",
    "lantern",
    "pebble",
    "raven",
    "cedar",
    "meadow",
    "tiger",
    "ember",
    "river",
    "walrus",
    "pixel",
    "canyon",
    "sparrow",
    "marble",
    "fox",
    "cactus",
    "puffin",
    "thistle",
    "anchor",
    "biscuit",
    "nebula",
    "quokka",
    "gecko",
    "tulip",
]
BIO_LIKES = [
    "long walks",
    "strong coffee",
    "old maps",
    "bad puns",
    "rainy days",
    "spicy food",
    "jazz records",
    "crossword puzzles",
    "night trains",
    "vintage cameras",
    "homemade bread",
    "sci-fi novels",
    "board games",
    "mountain trails",
    "houseplants",
    "chess problems",
    "late-night radio",
    "bird songs",
    "typewriters",
    "film photography",
]
BIO_JOBS = [
    "teacher",
    "nurse",
    "software developer",
    "librarian",
    "carpenter",
    "student",
    "chef",
    "bus driver",
    "designer",
    "retired engineer",
    "farmer",
    "translator",
    "pharmacist",
    "musician",
    "accountant",
    "mechanic",
]
BIO_CITIES = ["Lisbon", "Oslo", "Denver", "Osaka", "Leeds", "Quebec", "Perth", "Austin", "Ghent", "Porto", "Tucson"]
TITLE_PATTERNS = [
    "What {thing} changed your mind about {topic}?",
    "My first {thing} after ten years away",
    "Is a {adj} {thing} worth the money?",
    "Looking for {thing} recommendations",
    "I finally finished my {thing}",
    "Unpopular opinion: {adj} {thing}s are overrated",
    "Best {thing} you found in {year}?",
    "Help: my {thing} is acting strange",
    "Show us your {adj} {thing}",
    "The {adj} {thing} I found at a flea market",
    "Weekly {thing} discussion #{number}",
    "How do you keep your {thing} in good shape?",
    "Beginner question about my {thing}",
    "A {adj} {thing} story from last weekend",
    "Why does nobody talk about the {adj} {thing}?",
    "Rate my {thing} setup",
    "Ten years of {topic} in one {thing}",
    "Where do you buy a good {thing}?",
]
SENTENCES = [
    "I have been thinking about this for a while and wanted to hear what you all think.",
    "It took me about {number} hours, which was more than I expected.",
    "My friend says I am wrong, so I am asking here.",
    "Any advice is welcome, even the obvious stuff.",
    "I tried the usual tricks and nothing worked so far.",
    "Pictures would not do it justice, but it looks great in person.",
    "The price went up by {number} dollars since last year.",
    "I read every thread on this forum about it before posting.",
    "Honestly it was the best decision I made this year.",
    "Curious whether anyone else has had the same experience.",
    "Edit: thanks for all the kind replies!",
    "I will post an update in a few weeks.",
]
COMMENTS = [
    "Totally agree with this.",
    "I had the same problem last year.",
    "Thanks for sharing, this was really helpful.",
    "Not sure I agree, but it is an interesting take.",
    "Could you post more details?",
    "This made my day.",
    "Have you tried asking the local club?",
    "Great write-up, saving this for later.",
    "I would go with the cheaper option honestly.",
    "That looks amazing, well done.",
    "Same here, it took me {number} tries.",
    "Source? I would like to read more.",
    "This is the kind of post I come here for.",
    "Welcome to the hobby!",
    "I disagree, mine lasted {number} years.",
    "Underrated comment right here.",
]
LINK_SITES = ["news.example", "blog.example", "video.example", "photos.example", "wiki.example"]

START = datetime(2022, 6, 1)
#: The forum's "now": posts and comments made during an episode carry it, so pages are deterministic.
NOW = datetime(2024, 5, 1, 12, 0)
TIME_FORMAT = "%Y-%m-%d %H:%M"


def _stamp(moment: datetime) -> str:
    return moment.strftime(TIME_FORMAT)


def _fill(rng: random.Random, pattern: str, **values: str) -> str:
    return pattern.format(number=rng.randint(2, 40), year=rng.choice(("2022", "2023")), **values)


def populate(connection: sqlite3.Connection) -> None:
    """Create the schema and insert the seed rows."""
    rng = random.Random(SEED)
    connection.executescript(SCHEMA)
    span = int((NOW - START).total_seconds() // 60)

    names = [ME]
    taken = {ME}
    while len(names) < 320:
        name = f"{rng.choice(ADJECTIVES)}_{rng.choice(NOUNS)}{rng.choice(('', str(rng.randint(1, 99))))}"
        if name not in taken:
            taken.add(name)
            names.append(name)
    users = []
    for index, name in enumerate(names, start=1):
        bio = (
            f"{rng.choice(BIO_JOBS).capitalize()} from {rng.choice(BIO_CITIES)}. "
            f"I like {rng.choice(BIO_LIKES)} and {rng.choice(BIO_LIKES)}."
        )
        if index > 1 and rng.random() < 0.15:
            bio = ""
        joined = _stamp(START - timedelta(days=rng.randint(30, 900)))
        users.append((index, name, bio, joined[:10]))
    connection.executemany("INSERT INTO users VALUES (?, ?, ?, ?)", users)

    forums = []
    for index, (name, title, about, _) in enumerate(FORUMS, start=1):
        description = f"The place to talk about {about}. Be kind and stay on topic."
        created = _stamp(START - timedelta(days=rng.randint(1, 400)))
        forums.append((index, name, title, description, created, rng.randint(2, len(users)), rng.randint(40, 9000)))
    connection.executemany("INSERT INTO forums VALUES (?, ?, ?, ?, ?, ?, ?)", forums)
    subscribed = sorted(rng.sample(range(1, len(forums) + 1), 12))
    connection.executemany("INSERT INTO subscriptions VALUES (?)", [(forum,) for forum in subscribed])

    titles: set[str] = set()
    submissions = []
    while len(submissions) < 640:
        forum = rng.randint(1, len(forums))
        things = FORUMS[forum - 1][3]
        title = _fill(rng, rng.choice(TITLE_PATTERNS), thing=rng.choice(things), adj=rng.choice(ADJECTIVES),
                      topic=forums[forum - 1][2].lower())  # fmt: skip
        if title in titles:
            continue
        titles.add(title)
        author = 1 if rng.random() < 0.05 else rng.randint(2, len(users))
        created = START + timedelta(minutes=rng.randint(0, span - 60 * 24))
        if rng.random() < 0.3:
            slug = "-".join(title.lower().split()[:4]).strip("?:#!")
            link, body = f"http://{rng.choice(LINK_SITES)}/{created:%Y/%m}/{slug}", ""
        else:
            link = ""
            body = " ".join(_fill(rng, sentence) for sentence in rng.sample(SENTENCES, rng.randint(1, 3)))
        score = int(rng.paretovariate(1.3) * 4) - 4 - (rng.randint(0, 6) if rng.random() < 0.2 else 0)
        submissions.append([len(submissions) + 1, forum, author, title, link, body, created, score])

    comments = []
    for submission in submissions:
        count = min(int(rng.expovariate(1 / 4)), 18)
        own: list[tuple[int, datetime]] = []
        for _ in range(count):
            parent = rng.choice(own) if own and rng.random() < 0.45 else None
            after = parent[1] if parent else submission[6]
            created = min(after + timedelta(minutes=rng.randint(5, 60 * 24 * 3)), NOW - timedelta(hours=1))
            author = 1 if rng.random() < 0.04 else rng.randint(2, len(users))
            body = _fill(rng, rng.choice(COMMENTS))
            comment_id = len(comments) + 1
            comments.append((comment_id, submission[0], parent[0] if parent else None, author, body, _stamp(created),
                             int(rng.paretovariate(1.5) * 2) - 2))  # fmt: skip
            own.append((comment_id, created))
    connection.executemany(
        "INSERT INTO submissions (id, forum_id, user_id, title, url, body, created, score) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(*row[:6], _stamp(row[6]), row[7]) for row in submissions],
    )
    connection.executemany(
        "INSERT INTO comments (id, submission_id, parent_id, user_id, body, created, score) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        comments,
    )
    # The signed-in user's own votes (already counted in the scores).
    voted = rng.sample([row[0] for row in submissions if row[2] != 1], 40)
    connection.executemany(
        "INSERT INTO submission_votes VALUES (?, ?)", [(sid, 1 if rng.random() < 0.8 else -1) for sid in sorted(voted)]
    )
    voted = rng.sample([row[0] for row in comments if row[3] != 1], 60)
    connection.executemany(
        "INSERT INTO comment_votes VALUES (?, ?)", [(cid, 1 if rng.random() < 0.8 else -1) for cid in sorted(voted)]
    )
    connection.commit()
