"""The generated part of the shop's seed data: hundreds of products with reviews, past orders with
every status, an address book and a wish list, made deterministically from word lists.

The hand-written core of `seed.sql` stays as it is (the first 29 products, their reviews, orders
#1001-#1007, the cart); generated rows never change an answer about it: generated Kitchen products
cost more than its three cheapest, generated Office products less than its dearest, and no generated
name or description holds a word the core's tasks search for (see `RESERVED_WORDS`).
"""

from __future__ import annotations

import random
import sqlite3
from datetime import date, timedelta

#: Category slug -> (SKU prefix, brands, nouns, price range in cents).
CATEGORIES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[int, int]]] = {
    "electronics": (
        "EL",
        ("Zenith", "Orbit", "Quasar"),
        ("Earbuds", "Power Bank", "HDMI Cable", "Webcam", "Smart Plug", "Wi-Fi Router", "Tablet Sleeve",
         "Memory Card 128 GB", "Fitness Tracker", "Desk Fan"),
        (900, 18000),
    ),
    "kitchen": (
        "KI",
        ("Copperleaf", "Hearth", "Saffron"),
        ("Frying Pan", "Saucepan", "Blender", "Toaster", "Mixing Bowl Set", "Knife Block", "Salad Spinner",
         "Dutch Oven", "Coffee Grinder", "Cutlery Set"),
        (2500, 16000),
    ),
    "outdoor": (
        "OU",
        ("Ridgeline", "Canyon", "Pinecrest"),
        ("Camping Stove", "Trekking Poles", "Hammock", "Cooler Box", "Rain Jacket", "Lantern", "Compass",
         "Picnic Blanket", "Tarp", "Dry Bag"),
        (1200, 20000),
    ),
    "office": (
        "OF",
        ("Ledger", "Quill", "Paperlane"),
        ("Stapler", "Desk Organizer", "Whiteboard", "File Box", "Paper Shredder", "Label Maker", "Bookends",
         "Letter Tray", "Weekly Planner", "Highlighter Set"),
        (500, 20000),
    ),
    "home": (
        "HO",
        ("Willow", "Harbor", "Maple & Co"),
        ("Throw Pillow", "Picture Frame", "Bath Mat", "Curtain Set", "Storage Basket", "Doormat", "Flower Vase",
         "Duvet Cover", "Wall Mirror", "Coaster Set"),
        (900, 15000),
    ),
    "garden": (
        "GA",
        ("Greenthumb", "Meadow", "Fernbrook"),
        ("Pruning Shears", "Garden Hose 15 m", "Watering Can", "Hand Trowel", "Seed Starter Kit", "Raised Bed",
         "Bird Feeder", "Gardening Gloves", "Planter Box", "Compost Bin"),
        (700, 19000),
    ),
    "sports": (
        "SP",
        ("Velocity", "Apex", "Stride"),
        ("Yoga Mat", "Dumbbell Pair", "Jump Rope", "Resistance Bands", "Tennis Racket", "Football", "Basketball",
         "Cycling Helmet", "Foam Roller", "Gym Bag"),
        (800, 17000),
    ),
    "toys": (
        "TO",
        ("Brightbox", "Tumble", "Puzzlewood"),
        ("Jigsaw Puzzle 1000", "Building Blocks", "Board Game", "Plush Bear", "Kite", "Wooden Train Set",
         "Card Game", "Model Car", "Craft Kit", "Marble Run"),
        (600, 9000),
    ),
    "beauty": (
        "BE",
        ("Lumen", "Petal", "Silkstone"),
        ("Face Cream", "Shampoo", "Hair Dryer", "Lip Balm Set", "Hand Soap", "Body Lotion", "Nail Kit",
         "Sunscreen SPF 50", "Beard Oil", "Makeup Brushes"),
        (500, 12000),
    ),
}  # fmt: skip
#: Words the hand-written tasks search for: no generated product may hold them.
RESERVED_WORDS = ("speaker", "tent", "bottle", "mouse", "lamp", "monitor", "smartwatch", "quantum")
ADJECTIVES = ("Lightweight", "Durable", "Compact", "Handsome", "Practical", "Sturdy", "Elegant", "Reliable")
FEATURES = (
    "with a two-year guarantee",
    "made from recycled materials",
    "that packs flat for storage",
    "in a gift box",
    "with a soft-touch finish",
    "that is easy to clean",
    "built for everyday use",
    "in three colours",
)
FIRST_NAMES = ("Maya", "Liam", "Chloe", "Ethan", "Zoe", "Lucas", "Aisha", "Owen", "Ines", "Ravi", "Nora", "Felix",
               "Yuki", "Omar", "Lena", "Caleb", "Sofia", "Mateo", "Hana", "Isaac")  # fmt: skip
LAST_NAMES = ("Patel", "Garcia", "Novak", "Fischer", "Okoye", "Silva", "Tanaka", "Dubois", "Kowalski", "Haddad",
              "Larsen", "Moreau", "Rossi", "Quinn", "Brennan", "Sato")  # fmt: skip
#: Rating -> review titles.
REVIEW_TITLES = {
    1: ("Broke in a week", "Very disappointed", "Not as described"),
    2: ("Could be better", "Meh", "Cheaply made"),
    3: ("It is fine", "Average", "Does what it says"),
    4: ("Very good", "Happy with it", "Nice quality"),
    5: ("Excellent", "Love it", "Best purchase this year"),
}
REVIEW_BODIES = {
    1: "Stopped working soon after it arrived.",
    2: "Works, but the finish feels flimsy.",
    3: "Nothing special, nothing wrong either.",
    4: "Well made and arrived quickly.",
    5: "Exceeded my expectations in every way.",
}
#: The address book beside the default address (id 1, in `seed.sql`): (name, street, city, ZIP).
ADDRESSES = (
    ("Alex Morgan", "9 Harbor Road", "Bayview", "40125"),
    ("Jamie Morgan", "17 Maple Avenue", "Riverton", "30418"),
    ("Alex Morgan", "250 Market Square", "Lakeside", "51207"),
    ("Sam Ortiz", "3 Orchard Lane", "Hillcrest", "62033"),
)
#: Status of generated orders, with their weights.
STATUSES = (("Complete", 62), ("Canceled", 14), ("Shipped", 9), ("Processing", 8), ("Pending", 7))
FIRST_ORDER = 901
ORDER_COUNT = 100


def _products(rng: random.Random) -> list[tuple]:
    rows = []
    for slug, (prefix, brands, nouns, (low, high)) in CATEGORIES.items():
        number = 1101
        for noun in nouns:
            for brand in brands:
                price = rng.randrange(low, high) // 5 * 5 - rng.choice((0, 1, 5))
                description = f"{rng.choice(ADJECTIVES)} {noun.lower()} {rng.choice(FEATURES)}."
                rows.append((f"{prefix}-{number}", f"{brand} {noun}", slug, price, rng.randrange(0, 90), description))
                number += 1
    return rows


def _reviews(rng: random.Random, skus: list[str]) -> list[tuple]:
    rows = []
    start = date(2022, 6, 1)
    for sku in skus:
        mood = rng.choice((2, 3, 4, 4, 5))
        for _ in range(rng.choice((0, 0, 1, 2, 3, 4, 6))):
            rating = min(5, max(1, mood + rng.choice((-2, -1, 0, 0, 1))))
            author = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
            posted = (start + timedelta(days=rng.randrange(0, 690))).isoformat()
            rows.append((sku, author, rating, rng.choice(REVIEW_TITLES[rating]), REVIEW_BODIES[rating], posted))
    return rows


def _orders(rng: random.Random, products: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    orders, items = [], []
    addresses = [("Alex Morgan", "42 Elm Street", "Riverton", "30412")] * 3 + list(ADDRESSES)
    day = date(2022, 3, 1)
    statuses, weights = zip(*STATUSES, strict=True)
    for number in range(FIRST_ORDER, FIRST_ORDER + ORDER_COUNT):
        day += timedelta(days=rng.randrange(2, 7))
        method = rng.choice(("Standard", "Standard", "Express"))
        status = rng.choices(statuses, weights)[0]
        orders.append((number, day.isoformat(), status, method, 500 if method == "Standard" else 1500,
                       *rng.choice(addresses)))  # fmt: skip
        for sku, name, _, price, _, _ in rng.sample(products, rng.randint(1, 4)):
            items.append((number, sku, name, price, rng.randint(1, 3)))
    return orders, items


def populate(connection: sqlite3.Connection) -> None:
    """Add the generated rows to a database made from `seed.sql`."""
    rng = random.Random(1804)
    products = _products(rng)
    connection.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?, ?)", products)
    connection.executemany(
        "INSERT INTO reviews (sku, author, rating, title, body, posted) VALUES (?, ?, ?, ?, ?, ?)",
        _reviews(rng, [row[0] for row in products]),
    )
    orders, items = _orders(rng, products)
    connection.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", orders)
    connection.executemany("INSERT INTO order_items VALUES (?, ?, ?, ?, ?)", items)
    connection.executemany("INSERT INTO addresses (name, street, city, zip) VALUES (?, ?, ?, ?)", ADDRESSES)
    wished = ["OU-3003", "EL-1007", *(row[0] for row in rng.sample(products, 3))]
    connection.executemany(
        "INSERT INTO wishlist VALUES (?, ?, ?)",
        [(sku, f"2024-0{position % 4 + 1}-1{position}", position) for position, sku in enumerate(wished, 1)],
    )
    connection.commit()
