"""The shop admin's seed data: a catalogue, customers, orders, reviews, price rules and CMS pages,
generated deterministically in Python (a fixed `random.Random`, the word lists below), and the SQLite
schema that holds them.

Order statuses follow the shop's workflow: a Pending order can be invoiced, shipped or canceled; an
order both invoiced and shipped is Complete, one with only one of the two is Processing; Canceled and
Complete orders change no more. "Sales" are the grand totals (items + shipping) of orders that are not
canceled.
"""

from __future__ import annotations

import datetime
import functools
import random
import sqlite3

#: The admin's "today": comments and rules written during an episode carry this date.
TODAY = "2024-06-01"
#: The first and last day with orders.
FIRST_DAY, LAST_DAY = "2024-01-01", "2024-05-31"
STATUSES = ("Pending", "Processing", "Complete", "Canceled")

SCHEMA = """
CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, category TEXT NOT NULL,
    price INTEGER NOT NULL, stock INTEGER NOT NULL, status TEXT NOT NULL, description TEXT NOT NULL);
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, email TEXT NOT NULL,
    city TEXT NOT NULL, joined TEXT NOT NULL);
CREATE TABLE orders (number INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
    placed TEXT NOT NULL, status TEXT NOT NULL, invoiced INTEGER NOT NULL, shipped INTEGER NOT NULL,
    shipping INTEGER NOT NULL);
CREATE TABLE order_items (order_number INTEGER NOT NULL REFERENCES orders(number), sku TEXT NOT NULL,
    name TEXT NOT NULL, price INTEGER NOT NULL, qty INTEGER NOT NULL);
CREATE TABLE order_comments (id INTEGER PRIMARY KEY, order_number INTEGER NOT NULL, posted TEXT NOT NULL,
    body TEXT NOT NULL);
CREATE TABLE reviews (id INTEGER PRIMARY KEY, sku TEXT NOT NULL, author TEXT NOT NULL, rating INTEGER NOT NULL,
    title TEXT NOT NULL, body TEXT NOT NULL, posted TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE price_rules (id INTEGER PRIMARY KEY, name TEXT NOT NULL, code TEXT NOT NULL, discount INTEGER NOT NULL,
    starts TEXT NOT NULL, ends TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE cms_pages (id INTEGER PRIMARY KEY, url_key TEXT NOT NULL UNIQUE, title TEXT NOT NULL,
    content TEXT NOT NULL, status TEXT NOT NULL);
CREATE INDEX items_by_order ON order_items(order_number);
CREATE INDEX orders_by_customer ON orders(customer_id);
"""

CATEGORIES = {
    "Home Office": (
        "HO",
        [
            ("Desk Lamp", 35),
            ("Monitor Stand", 45),
            ("Office Chair", 180),
            ("Desk Organizer", 20),
            ("Whiteboard", 60),
            ("Bookshelf", 120),
        ],
    ),
    "Kitchen": (
        "KI",
        [
            ("Cutting Board", 25),
            ("Frying Pan", 40),
            ("Kettle", 30),
            ("Mixing Bowl", 18),
            ("Coffee Grinder", 55),
            ("Spatula Set", 12),
        ],
    ),
    "Outdoors": (
        "OU",
        [
            ("Tent", 150),
            ("Sleeping Bag", 80),
            ("Backpack", 70),
            ("Camp Stove", 65),
            ("Water Bottle", 15),
            ("Headlamp", 25),
        ],
    ),
    "Electronics": (
        "EL",
        [("Headphones", 90), ("Speaker", 60), ("Charger", 20), ("Keyboard", 50), ("Mouse", 25), ("Webcam", 45)],
    ),
    "Fitness": (
        "FI",
        [
            ("Yoga Mat", 30),
            ("Dumbbell Set", 85),
            ("Jump Rope", 12),
            ("Foam Roller", 22),
            ("Resistance Band", 15),
            ("Gym Bag", 40),
        ],
    ),
    "Garden": (
        "GA",
        [
            ("Watering Can", 20),
            ("Garden Hose", 35),
            ("Pruning Shears", 18),
            ("Planter", 28),
            ("Bird Feeder", 24),
            ("Rake", 22),
        ],
    ),
}
BRANDS = (
    "Aurora",
    "Summit",
    "Harbor",
    "Cedar",
    "Nimbus",
    "Atlas",
    "Ember",
    "Willow",
    "Falcon",
    "Meridian",
    "Pioneer",
    "Sierra",
    "Cobalt",
    "Juniper",
    "Orion",
    "Tundra",
    "Zephyr",
    "Maple",
    "Granite",
    "Vista",
)
QUALITIES = ("sturdy", "compact", "lightweight", "durable", "elegant", "practical", "versatile", "classic")
USES = ("everyday use", "small spaces", "busy mornings", "weekend trips", "long hours", "gifting", "beginners")
FIRST_NAMES = (
    "Ava",
    "Liam",
    "Mia",
    "Noah",
    "Emma",
    "Ethan",
    "Olivia",
    "Lucas",
    "Sophia",
    "Mason",
    "Isabella",
    "Logan",
    "Amelia",
    "Elijah",
    "Harper",
    "James",
    "Evelyn",
    "Aiden",
    "Abigail",
    "Carter",
    "Emily",
    "Jacob",
    "Ella",
    "Daniel",
    "Grace",
    "Henry",
    "Chloe",
    "Owen",
    "Zoe",
    "Samuel",
)
LAST_NAMES = (
    "Smith",
    "Johnson",
    "Lee",
    "Brown",
    "Garcia",
    "Miller",
    "Davis",
    "Wilson",
    "Moore",
    "Taylor",
    "Anderson",
    "Thomas",
    "Jackson",
    "White",
    "Harris",
    "Martin",
    "Thompson",
    "Young",
    "King",
    "Wright",
    "Lopez",
    "Hill",
    "Scott",
    "Green",
    "Adams",
    "Baker",
    "Nelson",
    "Carter",
    "Mitchell",
    "Perez",
)
CITIES = (
    "Boston",
    "Chicago",
    "Denver",
    "Austin",
    "Seattle",
    "Portland",
    "Atlanta",
    "Phoenix",
    "Miami",
    "Detroit",
    "Dallas",
    "Houston",
    "Oakland",
    "Tampa",
    "Omaha",
)
REVIEW_TITLES = {
    1: ("Broke quickly", "Disappointed", "Not as described"),
    2: ("Could be better", "Meh", "Flimsy"),
    3: ("It is okay", "Average", "Does the job"),
    4: ("Very good", "Happy with it", "Solid buy"),
    5: ("Love it", "Excellent", "Perfect"),
}
REVIEW_BODIES = (
    "Arrived on time.",
    "Works as expected.",
    "Would buy again.",
    "Packaging was damaged.",
    "Good value for the money.",
    "Smaller than I thought.",
    "My family uses it every day.",
)
RULES = (
    ("Spring Sale", "SPRING"),
    ("Summer Kickoff", "SUMMER"),
    ("New Customer Welcome", "WELCOME"),
    ("Loyalty Reward", "LOYAL"),
    ("Flash Friday", "FLASH"),
    ("Garden Days", "GARDEN"),
    ("Back to Work", "OFFICE"),
    ("Fitness Month", "FIT"),
    ("Outdoor Week", "TRAIL"),
    ("Kitchen Fest", "COOK"),
    ("Tech Tuesday", "TECH"),
    ("Holiday Preview", "HOLIDAY"),
    ("Weekend Deal", "WEEKEND"),
    ("Clearance Event", "CLEAR"),
    ("Birthday Treat", "BDAY"),
    ("Student Discount", "STUDENT"),
)
CMS_PAGES = (
    ("about-us", "About Us"),
    ("customer-service", "Customer Service"),
    ("privacy-policy", "Privacy Policy"),
    ("shipping-policy", "Shipping Policy"),
    ("returns", "Returns and Exchanges"),
    ("faq", "Frequently Asked Questions"),
    ("careers", "Careers"),
    ("contact", "Contact Us"),
    ("terms", "Terms of Use"),
    ("home", "Home Page"),
    ("no-route", "Page Not Found"),
    ("enable-cookies", "Enable Cookies"),
    ("gift-cards", "Gift Cards"),
    ("store-locator", "Store Locator"),
    ("size-guide", "Size Guide"),
    ("warranty", "Warranty Information"),
    ("sustainability", "Our Sustainability Promise"),
    ("press", "Press Room"),
)
SEED_COMMENTS = (
    "Customer asked for gift wrapping.",
    "Called the customer to confirm the address.",
    "Payment verified by phone.",
    "Customer asked about delivery times.",
)


def money(cents: int) -> str:
    """`123456` -> `'$1,234.56'`."""
    return f"${cents // 100:,}.{cents % 100:02d}"


def _day(offset: int, start: str = FIRST_DAY) -> str:
    return (datetime.date.fromisoformat(start) + datetime.timedelta(days=offset)).isoformat()


@functools.cache
def seed_rows() -> dict[str, list[tuple]]:
    """Every table's seed rows, generated once per process from a fixed random seed."""
    rng = random.Random(18)
    products = []
    for category, (code, nouns) in CATEGORIES.items():
        combos = [(brand, noun, base) for brand in BRANDS for noun, base in nouns]
        for n, (brand, noun, base) in enumerate(sorted(rng.sample(combos, 40)), start=1):
            name = f"{brand} {noun}"
            price = max(5, round(base * rng.uniform(0.6, 1.6))) * 100 - 1
            stock = rng.randint(0, 9) if rng.random() < 0.15 else rng.randint(10, 200)
            status = "Disabled" if rng.random() < 0.1 else "Enabled"
            quality = rng.choice(QUALITIES)
            article = "an" if quality[0] in "aeiou" else "a"
            description = f"The {name} is {article} {quality} {noun.lower()} for {rng.choice(USES)}."
            products.append((f"{code}-{1000 + n}", name, category, price, stock, status, description))
    names = [f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES]
    customers = []
    for cid, name in enumerate(rng.sample(names, 150), start=1):
        email = f"{name.lower().replace(' ', '.')}@example.com"
        customers.append((cid, name, email, rng.choice(CITIES), _day(rng.randint(0, 364), "2023-01-01")))
    weights = [rng.choice((1, 1, 2, 3, 5)) for _ in customers]
    days = sorted(rng.randint(0, 151) for _ in range(520))
    orders, items, comments = [], [], []
    for number, offset in enumerate(days, start=1001):
        placed = _day(offset)
        roll = rng.random()
        if placed < "2024-04-15":
            status = "Canceled" if roll < 0.12 else "Complete"
        else:
            status = (
                "Pending" if roll < 0.35 else "Processing" if roll < 0.6 else "Complete" if roll < 0.9 else "Canceled"
            )
        invoiced = int(status in ("Processing", "Complete"))
        shipped = int(status == "Complete")
        chosen = rng.sample(products, rng.choice((1, 1, 1, 2, 2, 3)))
        subtotal = 0
        for sku, name, _, price, *_ in chosen:
            qty = rng.choice((1, 1, 1, 2, 2, 3))
            items.append((number, sku, name, price, qty))
            subtotal += price * qty
        customer = rng.choices(customers, weights)[0][0]
        orders.append((number, customer, placed, status, invoiced, shipped, 0 if subtotal >= 10000 else 500))
        if rng.random() < 0.05:
            comments.append((len(comments) + 1, number, placed, rng.choice(SEED_COMMENTS)))
    reviews, seen = [], set()
    while len(reviews) < 300:
        product, customer = rng.choice(products), rng.choice(customers)
        if (product[0], customer[1]) in seen:
            continue
        seen.add((product[0], customer[1]))
        rating = rng.choice((1, 2, 3, 3, 4, 4, 4, 5, 5, 5))
        status = "Pending" if rng.random() < 0.25 else "Approved"
        reviews.append(
            (
                len(reviews) + 1,
                product[0],
                customer[1],
                rating,
                rng.choice(REVIEW_TITLES[rating]),
                rng.choice(REVIEW_BODIES),
                _day(rng.randint(0, 151)),
                status,
            )
        )
    rules = []
    for rid, (name, code) in enumerate(RULES, start=1):
        start = rng.randint(0, 150)
        rules.append(
            (
                rid,
                name,
                f"{code}{rng.choice((5, 10, 15, 20, 25))}",
                rng.choice((5, 10, 15, 20, 25, 30)),
                _day(start),
                _day(start + rng.choice((7, 14, 30, 60))),
                "Disabled" if rng.random() < 0.3 else "Enabled",
            )
        )
    pages = [
        (
            pid,
            key,
            title,
            f"{title}: {rng.choice(('Learn', 'Read', 'Find out'))} more about Loopback Market.",
            "Disabled" if rng.random() < 0.25 else "Enabled",
        )
        for pid, (key, title) in enumerate(CMS_PAGES, start=1)
    ]
    return {
        "products": products,
        "customers": customers,
        "orders": orders,
        "order_items": items,
        "order_comments": comments,
        "reviews": reviews,
        "price_rules": rules,
        "cms_pages": pages,
    }


def seed_connection() -> sqlite3.Connection:
    """A new connection on the seed data (rows as `sqlite3.Row`), for task templates to read."""
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.executescript(SCHEMA)
    for table, rows in seed_rows().items():
        connection.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    connection.commit()
    connection.row_factory = sqlite3.Row
    return connection
