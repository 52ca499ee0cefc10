"""The shop admin's data: a catalogue, customers, orders, reviews, price rules and CMS pages, generated
deterministically in Python (a fixed `random.Random`, word lists below) into an in-memory SQLite
database that restores in a millisecond.

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
import threading
from typing import Any

#: The admin's "today": comments and rules written during an episode carry this date.
TODAY = "2024-06-01"
#: The first and last day with orders.
FIRST_DAY, LAST_DAY = "2024-01-01", "2024-05-31"
STATUSES = ("Pending", "Processing", "Complete", "Canceled")
PAGE_SIZE = 20

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


# ---- reports (shared by the pages and the task templates) --------------------------------------
_SALE = "o.status != 'Canceled'"
_TOTAL = "(o.shipping + (SELECT SUM(i.price * i.qty) FROM order_items i WHERE i.order_number = o.number))"


def sales_report(connection: sqlite3.Connection, start: str, end: str) -> dict[str, Any]:
    """Orders placed from `start` to `end` (ISO dates, inclusive): counts, items and sales by month."""
    months = [
        dict(row)
        for row in connection.execute(
            f"SELECT substr(o.placed, 1, 7) AS month, COUNT(*) AS orders, SUM(o.status = 'Canceled') AS canceled, "
            f"SUM(CASE WHEN {_SALE} THEN (SELECT SUM(qty) FROM order_items i WHERE i.order_number = o.number) "
            f"ELSE 0 END) AS units, SUM(CASE WHEN {_SALE} THEN {_TOTAL} ELSE 0 END) AS sales "
            "FROM orders o WHERE o.placed BETWEEN ? AND ? GROUP BY month ORDER BY month",
            (start, end),
        )
    ]
    total = {key: sum(month[key] for month in months) for key in ("orders", "canceled", "units", "sales")}
    return {"months": months, "total": total}


def bestsellers(connection: sqlite3.Connection, start: str, end: str, limit: int = 10) -> list[dict[str, Any]]:
    """Products by units sold in orders (not canceled) placed from `start` to `end`, most first."""
    return [
        dict(row)
        for row in connection.execute(
            "SELECT i.sku, p.name, SUM(i.qty) AS units, SUM(i.qty * i.price) AS revenue FROM order_items i "
            f"JOIN orders o ON o.number = i.order_number JOIN products p ON p.sku = i.sku WHERE {_SALE} "
            "AND o.placed BETWEEN ? AND ? GROUP BY i.sku ORDER BY units DESC, p.name LIMIT ?",
            (start, end, limit),
        )
    ]


def top_customers(connection: sqlite3.Connection, start: str, end: str, limit: int = 10) -> list[dict[str, Any]]:
    """Customers by number of orders (canceled ones included) placed from `start` to `end`, most first."""
    return [
        dict(row)
        for row in connection.execute(
            f"SELECT c.id, c.name, COUNT(*) AS orders, SUM(CASE WHEN {_SALE} THEN {_TOTAL} ELSE 0 END) AS sales "
            "FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.placed BETWEEN ? AND ? "
            "GROUP BY c.id ORDER BY orders DESC, sales DESC, c.name LIMIT ?",
            (start, end, limit),
        )
    ]


def low_stock(connection: sqlite3.Connection, threshold: int) -> list[dict[str, Any]]:
    """Products with at most `threshold` units in stock, fewest first."""
    return [
        dict(row)
        for row in connection.execute(
            "SELECT sku, name, stock, status FROM products WHERE stock <= ? ORDER BY stock, name", (threshold,)
        )
    ]


def customer_summary(connection: sqlite3.Connection, customer_id: int) -> dict[str, Any] | None:
    """A customer with their number of orders and lifetime sales (orders that are not canceled)."""
    row = connection.execute(
        f"SELECT c.*, (SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id) AS order_count, "
        f"(SELECT COALESCE(SUM({_TOTAL}), 0) FROM orders o WHERE o.customer_id = c.id AND {_SALE}) AS lifetime "
        "FROM customers c WHERE c.id = ?",
        (customer_id,),
    ).fetchone()
    return dict(row) if row else None


def order_total(connection: sqlite3.Connection, number: int) -> int:
    """The grand total of an order, in cents."""
    row = connection.execute(f"SELECT {_TOTAL} FROM orders o WHERE o.number = ?", (number,)).fetchone()
    return int(row[0])


class Refused(Exception):
    """A change the records do not allow (e.g. shipping a canceled order): why, for a 422 page."""


class AdminDB:
    """The live database of one admin instance, plus a pristine copy to restore it from.

    All access goes through one lock: the web server's thread reads and writes while the env's
    thread restores the seed state at reset.
    """

    def __init__(self) -> None:
        self._pristine = seed_connection()
        self._live = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._live.row_factory = sqlite3.Row
        self._lock = threading.Lock()
        self.restore()

    def restore(self) -> None:
        """Put every table back to the seed state."""
        with self._lock:
            self._pristine.backup(self._live)

    def close(self) -> None:
        self._live.close()
        self._pristine.close()

    # ---- reads ----------------------------------------------------------------------------------
    def _rows(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(row) for row in self._live.execute(sql, args)]

    def _row(self, sql: str, *args: Any) -> dict[str, Any] | None:
        rows = self._rows(sql, *args)
        return rows[0] if rows else None

    def report(self, function: Any, *args: Any) -> Any:
        """One of the report functions above, on the live data."""
        with self._lock:
            return function(self._live, *args)

    def dashboard(self) -> dict[str, Any]:
        with self._lock:
            totals = dict(
                self._live.execute(
                    f"SELECT (SELECT COALESCE(SUM({_TOTAL}), 0) FROM orders o WHERE {_SALE}) AS sales, "
                    "(SELECT COUNT(*) FROM orders) AS orders, (SELECT COUNT(*) FROM customers) AS customers, "
                    "(SELECT COUNT(*) FROM products) AS products, "
                    "(SELECT COUNT(*) FROM orders WHERE status = 'Pending') AS pending_orders, "
                    "(SELECT COUNT(*) FROM reviews WHERE status = 'Pending') AS pending_reviews"
                ).fetchone()
            )
        totals["latest"] = self.orders("", "", "number_desc")[0][:5]
        return totals

    def _page(self, sql: str, args: tuple, page: int) -> tuple[list[dict[str, Any]], int]:
        """One page of a query's rows and the number of rows in all."""
        with self._lock:
            count = self._live.execute(f"SELECT COUNT(*) FROM ({sql})", args).fetchone()[0]
            rows = self._live.execute(f"{sql} LIMIT ? OFFSET ?", (*args, PAGE_SIZE, (page - 1) * PAGE_SIZE))
            return [dict(row) for row in rows], count

    def orders(self, query: str, status: str, sort: str, page: int = 1) -> tuple[list[dict[str, Any]], int]:
        """Orders whose number is `query` or whose customer's name holds it, with `status` (any when '')."""
        where, args = ["1"], []
        if query:
            where.append("(CAST(o.number AS TEXT) = ? OR instr(LOWER(c.name), ?) > 0)")
            args += [query, query.lower()]
        if status:
            where.append("o.status = ?")
            args.append(status)
        return self._page(
            f"SELECT o.*, c.name AS customer, {_TOTAL} AS total FROM orders o JOIN customers c ON c.id = o.customer_id "
            f"WHERE {' AND '.join(where)} ORDER BY {ORDER_SORTS[sort][1]}",
            tuple(args),
            page,
        )

    def order(self, number: int) -> dict[str, Any] | None:
        order = self._row(
            f"SELECT o.*, c.name AS customer, c.email, {_TOTAL} AS total FROM orders o "
            "JOIN customers c ON c.id = o.customer_id WHERE o.number = ?",
            number,
        )
        if order is not None:
            order["items"] = self._rows(
                "SELECT *, price * qty AS subtotal FROM order_items WHERE order_number = ? ORDER BY rowid", number
            )
            order["subtotal"] = sum(item["subtotal"] for item in order["items"])
            order["comments"] = self._rows(
                "SELECT * FROM order_comments WHERE order_number = ? ORDER BY id DESC", number
            )
        return order

    def products(self, query: str, status: str, sort: str, page: int = 1) -> tuple[list[dict[str, Any]], int]:
        """Products whose name or SKU holds `query` (case-insensitive), with `status` (any when '')."""
        where, args = ["1"], []
        if query:
            where.append("(instr(LOWER(name), ?) > 0 OR instr(LOWER(sku), ?) > 0 OR LOWER(category) = ?)")
            args += [query.lower()] * 3
        if status:
            where.append("status = ?")
            args.append(status)
        return self._page(
            f"SELECT * FROM products WHERE {' AND '.join(where)} ORDER BY {PRODUCT_SORTS[sort][1]}", tuple(args), page
        )

    def product(self, sku: str) -> dict[str, Any] | None:
        product = self._row("SELECT * FROM products WHERE sku = ?", sku)
        if product is not None:
            counts = self._row(
                "SELECT COUNT(*) AS reviews, COALESCE(SUM(status = 'Pending'), 0) AS pending "
                "FROM reviews WHERE sku = ?",
                sku,
            )
            product.update(counts or {})
        return product

    def reviews(self, query: str, status: str, page: int = 1) -> tuple[list[dict[str, Any]], int]:
        """Reviews whose author or product name holds `query`, with `status` (any when ''), newest first."""
        where, args = ["1"], []
        if query:
            where.append("(instr(LOWER(r.author), ?) > 0 OR instr(LOWER(p.name), ?) > 0)")
            args += [query.lower()] * 2
        if status:
            where.append("r.status = ?")
            args.append(status)
        return self._page(
            "SELECT r.*, p.name AS product FROM reviews r JOIN products p ON p.sku = r.sku "
            f"WHERE {' AND '.join(where)} ORDER BY r.posted DESC, r.id DESC",
            tuple(args),
            page,
        )

    def review(self, review_id: int) -> dict[str, Any] | None:
        return self._row(
            "SELECT r.*, p.name AS product FROM reviews r JOIN products p ON p.sku = r.sku WHERE r.id = ?", review_id
        )

    def customers(self, query: str, sort: str, page: int = 1) -> tuple[list[dict[str, Any]], int]:
        """Customers whose name, email or city holds `query`."""
        where, args = "1", ()
        if query:
            where = "(instr(LOWER(c.name), ?) > 0 OR instr(LOWER(c.email), ?) > 0 OR LOWER(c.city) = ?)"
            args = (query.lower(),) * 3
        return self._page(
            "SELECT c.*, (SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id) AS order_count FROM customers c "
            f"WHERE {where} ORDER BY {CUSTOMER_SORTS[sort][1]}",
            args,
            page,
        )

    def customer(self, customer_id: int) -> dict[str, Any] | None:
        with self._lock:
            customer = customer_summary(self._live, customer_id)
        if customer is not None:
            customer["orders"] = self._rows(
                f"SELECT o.*, {_TOTAL} AS total FROM orders o WHERE o.customer_id = ? ORDER BY o.number DESC",
                customer_id,
            )
        return customer

    def rules(self, query: str = "") -> list[dict[str, Any]]:
        """Price rules whose name or coupon code holds `query`."""
        return self._rows(
            "SELECT * FROM price_rules WHERE instr(LOWER(name), ?) > 0 OR instr(LOWER(code), ?) > 0 ORDER BY id",
            query.lower(),
            query.lower(),
        )

    def rule(self, rule_id: int) -> dict[str, Any] | None:
        return self._row("SELECT * FROM price_rules WHERE id = ?", rule_id)

    def pages(self) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM cms_pages ORDER BY title")

    def cms_page(self, page_id: int) -> dict[str, Any] | None:
        return self._row("SELECT * FROM cms_pages WHERE id = ?", page_id)

    # ---- writes ---------------------------------------------------------------------------------
    def _write(self, sql: str, *args: Any) -> int:
        """Run one change; the number of rows it changed."""
        with self._lock:
            return self._live.execute(sql, args).rowcount

    def order_action(self, number: int, action: str) -> str:
        """Invoice, ship or cancel an order; the new status, or `Refused` when the order's status does
        not allow it (nothing changes then)."""
        with self._lock:
            row = self._live.execute("SELECT * FROM orders WHERE number = ?", (number,)).fetchone()
            status, invoiced, shipped = row["status"], row["invoiced"], row["shipped"]
            if status in ("Canceled", "Complete"):
                raise Refused(f"Order #{number} is {status}; it cannot be changed any more.")
            if action == "cancel":
                if invoiced or shipped:
                    raise Refused(
                        f"Order #{number} is already {'invoiced' if invoiced else 'shipped'}; "
                        "only pending orders can be canceled."
                    )
                status = "Canceled"
            else:
                if invoiced if action == "invoice" else shipped:
                    raise Refused(
                        f"Order #{number} is already {action}d."
                        if action == "invoice"
                        else f"Order #{number} is already shipped."
                    )
                invoiced, shipped = invoiced or action == "invoice", shipped or action == "ship"
                status = "Complete" if invoiced and shipped else "Processing"
            self._live.execute(
                "UPDATE orders SET status = ?, invoiced = ?, shipped = ? WHERE number = ?",
                (status, int(invoiced), int(shipped), number),
            )
            return status

    def add_comment(self, number: int, body: str) -> None:
        self._write("INSERT INTO order_comments (order_number, posted, body) VALUES (?, ?, ?)", number, TODAY, body)

    def update_product(self, sku: str, price: int, stock: int, status: str, description: str) -> None:
        self._write(
            "UPDATE products SET price = ?, stock = ?, status = ?, description = ? WHERE sku = ?",
            price,
            stock,
            status,
            description,
            sku,
        )

    def approve_review(self, review_id: int) -> None:
        self._write("UPDATE reviews SET status = 'Approved' WHERE id = ?", review_id)

    def delete_review(self, review_id: int) -> None:
        self._write("DELETE FROM reviews WHERE id = ?", review_id)

    def update_customer(self, customer_id: int, email: str, city: str) -> None:
        self._write("UPDATE customers SET email = ?, city = ? WHERE id = ?", email, city, customer_id)

    def save_rule(self, rule_id: int | None, fields: tuple[str, str, int, str, str, str]) -> int:
        """Create (`rule_id` None) or update a price rule of (name, code, discount, starts, ends, status); its id."""
        with self._lock:
            if rule_id is None:
                return int(
                    self._live.execute(
                        "INSERT INTO price_rules (name, code, discount, starts, ends, status) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        fields,
                    ).lastrowid
                )
            self._live.execute(
                "UPDATE price_rules SET name = ?, code = ?, discount = ?, starts = ?, ends = ?, status = ? "
                "WHERE id = ?",
                (*fields, rule_id),
            )
            return rule_id

    def update_page(self, page_id: int, title: str, content: str, status: str) -> None:
        self._write(
            "UPDATE cms_pages SET title = ?, content = ?, status = ? WHERE id = ?", title, content, status, page_id
        )


ORDER_SORTS = {
    "number_desc": ("Newest first", "o.number DESC"),
    "number_asc": ("Oldest first", "o.number"),
    "total_desc": ("Total: high to low", f"{_TOTAL} DESC, o.number DESC"),
    "total_asc": ("Total: low to high", f"{_TOTAL}, o.number DESC"),
}
PRODUCT_SORTS = {
    "name": ("Name", "name"),
    "price_asc": ("Price: low to high", "price, name"),
    "price_desc": ("Price: high to low", "price DESC, name"),
    "stock_asc": ("Stock: low to high", "stock, name"),
}
CUSTOMER_SORTS = {
    "name": ("Name", "c.name"),
    "orders_desc": ("Most orders", "order_count DESC, c.name"),
    "joined_desc": ("Newest", "c.joined DESC, c.name"),
}
