"""The map's seed data, generated deterministically: four towns, their streets, a few hundred places
with categories, addresses, coordinates, phone numbers and opening hours, and the road graph (town
streets, footpaths, country roads and motorways between the towns).

Everything comes from one `random.Random(SEED)` and the word lists below, so every build gives the
same rows. Coordinates are rounded to 5 decimals (about a metre) and lengths to whole metres, so the
pages show exactly what the tasks compute.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from dataclasses import dataclass, field

SEED = 18_006
#: Towns: name, postcode area, centre latitude and longitude (fictional, in a made-up county).
TOWNS = (
    ("Ashford", "AF", 51.52000, -1.24000),
    ("Brackenridge", "BK", 51.60000, -1.12000),
    ("Coldwater", "CW", 51.50000, -0.98000),
    ("Dunmore", "DM", 51.42000, -1.16000),
)
ROWS, COLUMNS = 5, 6  # streets run east-west (rows), roads north-south (columns)
LAT_STEP, LON_STEP = 0.004, 0.006  # about 445 m and 415 m
#: Road type -> (label, speed by car in km/h or None where cars may not go, bikes allowed).
ROAD_TYPES = {
    "motorway": ("Motorway", 100, False),
    "country": ("Country road", 70, True),
    "primary": ("Main road", 50, True),
    "residential": ("Residential street", 30, True),
    "path": ("Footpath", None, True),
}
#: Travel mode -> (label, speed in km/h for bikes and walkers; cars use the road's speed).
MODES = {"car": ("Car", None), "bike": ("Bicycle", 16), "foot": ("Foot", 5)}
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
#: Category slug -> (label, plural, places per town).
CATEGORIES = {
    "bakery": ("Bakery", "Bakeries", 4),
    "bank": ("Bank", "Banks", 3),
    "cafe": ("Cafe", "Cafes", 8),
    "cinema": ("Cinema", "Cinemas", 2),
    "fire_station": ("Fire station", "Fire stations", 1),
    "hospital": ("Hospital", "Hospitals", 2),
    "hotel": ("Hotel", "Hotels", 4),
    "library": ("Library", "Libraries", 2),
    "museum": ("Museum", "Museums", 3),
    "park": ("Park", "Parks", 4),
    "pharmacy": ("Pharmacy", "Pharmacies", 4),
    "police": ("Police station", "Police stations", 1),
    "post_office": ("Post office", "Post offices", 2),
    "pub": ("Pub", "Pubs", 5),
    "restaurant": ("Restaurant", "Restaurants", 8),
    "school": ("School", "Schools", 4),
    "station": ("Train station", "Train stations", 2),
    "supermarket": ("Supermarket", "Supermarkets", 4),
    "university": ("University", "Universities", 1),
}
CUISINES = ("Italian", "Indian", "Thai", "French", "Japanese", "Mexican", "Greek", "Chinese", "Turkish", "Spanish")

_STREET_WORDS = (
    "Abbey", "Albert", "Baker", "Bridge", "Castle", "Cedar", "Chapel", "Church", "Elm", "Fisher", "Garden",
    "Hazel", "King", "Linden", "Maple", "Market", "Mill", "Oak", "Orchard", "Queen", "Rowan", "Tanner",
    "Victoria", "Wharf", "Willow", "Beacon", "Copper", "Granary", "Heron", "Juniper",
)  # fmt: skip
_ADJECTIVES = (
    "Blue", "Golden", "Little", "Old", "Green", "Copper", "Silver", "Red", "Sunny", "Quiet", "Rustic", "Wild",
)  # fmt: skip
_NOUNS = ("Fig", "Bean", "Kettle", "Cup", "Sparrow", "Lantern", "Acorn", "Teapot", "Owl", "Pear", "Meadow", "Anchor")
_SURNAMES = (
    "Hartley", "Pemberton", "Okafor", "Lindqvist", "Moreau", "Castellano", "Whitmore", "Nakamura", "Brennan",
    "Fairweather", "Ashworth", "Delacroix", "Kowalski", "Thornbury", "Rahman", "Ellison",
)  # fmt: skip
_SAINTS = ("Luke", "Mary", "Thomas", "Catherine", "Peter", "Margaret", "Andrew", "Anne")
_SUBJECTS = (
    "Natural History", "Science", "Modern Art", "Local History", "Railways", "Textiles", "Maritime History",
    "Toys", "Photography", "Clocks", "Music", "Archaeology",
)  # fmt: skip
_ANIMALS = ("Lion", "Swan", "Fox", "Stag", "Hare", "Bull", "Falcon", "Badger", "Otter", "Raven")
_BRANDS = ("FreshMart", "ValuFoods", "Corner Basket", "GreenGrocer Co")
_BANKS = ("Northgate Bank", "Union Savings", "Meridian Bank", "Shire Building Society")
#: Opening hours by category: (weekday, saturday, sunday) choices; None closed, "24" open all day.
_HOURS = {
    "bakery": ([("06:30", "17:00"), ("07:00", "16:30")], [("07:00", "15:00")], [None, ("08:00", "12:00")]),
    "bank": ([("09:00", "17:00"), ("09:30", "16:30")], [None, ("09:00", "12:30")], [None]),
    "cafe": ([("07:00", "18:00"), ("07:30", "17:30"), ("08:00", "19:00")], [("08:00", "17:00")],
             [None, ("09:00", "15:00")]),
    "cinema": ([("12:00", "23:00")], [("10:00", "23:30")], [("10:00", "22:00")]),
    "hotel": (["24"], ["24"], ["24"]),
    "library": ([("09:00", "19:00"), ("10:00", "18:00")], [("09:00", "13:00")], [None]),
    "museum": ([("10:00", "17:00"), ("09:30", "16:30")], [("10:00", "18:00")], [None, ("11:00", "16:00")]),
    "park": ([("07:00", "21:00"), ("06:00", "22:00")], [("07:00", "21:00")], [("08:00", "20:00")]),
    "pharmacy": ([("08:30", "18:30"), ("09:00", "19:00"), ("08:00", "22:00")], [("09:00", "17:00")],
                 [None, ("10:00", "16:00")]),
    "post_office": ([("09:00", "17:30")], [("09:00", "12:30")], [None]),
    "pub": ([("11:00", "23:00"), ("12:00", "23:30")], [("11:00", "00:00")], [("12:00", "22:30")]),
    "restaurant": ([("12:00", "22:00"), ("17:00", "23:00"), ("11:30", "21:30")], [("12:00", "23:00")],
                   [None, ("12:00", "21:00")]),
    "school": ([("08:00", "16:00"), ("08:30", "15:30")], [None], [None]),
    "station": ([("05:30", "00:30"), ("06:00", "23:30")], [("06:00", "00:00")], [("07:00", "23:00")]),
    "supermarket": ([("07:00", "22:00"), ("08:00", "21:00"), ("06:00", "23:00")], [("07:00", "22:00")],
                    [("10:00", "16:00")]),
    "university": ([("08:00", "20:00")], [("09:00", "17:00")], [None]),
}  # fmt: skip


def metres(lat1: float, lon1: float, lat2: float, lon2: float) -> int:
    """Straight-line distance in whole metres (equirectangular: exact enough over a county)."""
    x = math.radians(lon2 - lon1) * math.cos(math.radians((lat1 + lat2) / 2))
    y = math.radians(lat2 - lat1)
    return round(6_371_000 * math.hypot(x, y))


@dataclass
class Gazetteer:
    """The generated rows, one list per table (tuples in the tables' column order)."""

    towns: list[tuple] = field(default_factory=list)
    streets: list[tuple] = field(default_factory=list)
    places: list[tuple] = field(default_factory=list)
    hours: list[tuple] = field(default_factory=list)
    nodes: list[tuple] = field(default_factory=list)
    edges: list[tuple] = field(default_factory=list)


def slugify(text: str) -> str:
    """`"St Luke's Hospital"` -> `"st-lukes-hospital"`."""
    kept = "".join(c if c.isalnum() else " " for c in text.lower().replace("'", ""))
    return "-".join(kept.split())


class _Builder:
    def __init__(self) -> None:
        self.rng = random.Random(SEED)
        self.data = Gazetteer()
        self.names: set[str] = set()
        self.node_id = 0

    def node(self, lat: float, lon: float, place: int | None = None) -> int:
        self.node_id += 1
        self.data.nodes.append((self.node_id, round(lat, 5), round(lon, 5), place))
        return self.node_id

    def edge(self, a: int, b: int, road: str, road_type: str) -> None:
        (lat1, lon1), (lat2, lon2) = (self.data.nodes[a - 1][1:3], self.data.nodes[b - 1][1:3])
        self.data.edges.append((a, b, road, road_type, max(1, metres(lat1, lon1, lat2, lon2))))

    def unique(self, make, town: str) -> str:
        """A place name from `make()` that no other place has (the town's name added if need be)."""
        for _ in range(30):
            name = make()
            if name not in self.names:
                break
        else:
            name = f"{make()} {town}"
        while name in self.names:
            name += " II"
        self.names.add(name)
        return name

    def place_name(self, category: str, town: str, street_word: str) -> str:
        r = self.rng
        makers = {
            "bakery": lambda: r.choice([f"{r.choice(_SURNAMES)}'s Bakery", f"The {r.choice(_NOUNS)} Bakehouse"]),
            "bank": lambda: f"{r.choice(_BANKS)} {town}" + r.choice(["", f" {street_word}"]),
            "cafe": lambda: r.choice(
                [f"{r.choice(_ADJECTIVES)} {r.choice(_NOUNS)} Cafe", f"The {r.choice(_NOUNS)} Coffee House"]
            ),
            "cinema": lambda: r.choice([f"The {r.choice(_SURNAMES)} Picturehouse", f"{town} Regal Cinema"]),
            "fire_station": lambda: f"{town} Fire Station",
            "hospital": lambda: r.choice([f"{town} General Hospital", f"St {r.choice(_SAINTS)}'s Hospital"]),
            "hotel": lambda: r.choice([f"The {r.choice(_ADJECTIVES)} {r.choice(_NOUNS)} Hotel", f"{town} Grand Hotel"]),
            "library": lambda: r.choice([f"{town} Central Library", f"{r.choice(_SURNAMES)} Library"]),
            "museum": lambda: r.choice(
                [f"{town} Museum of {r.choice(_SUBJECTS)}", f"The {r.choice(_SURNAMES)} Gallery"]
            ),
            "park": lambda: f"{r.choice(_SURNAMES + _STREET_WORDS)} {r.choice(['Park', 'Gardens', 'Common'])}",
            "pharmacy": lambda: r.choice([f"{r.choice(_SURNAMES)} Pharmacy", f"{street_word} Chemist"]),
            "police": lambda: f"{town} Police Station",
            "post_office": lambda: r.choice([f"{town} Post Office", f"{town} {street_word} Post Office"]),
            "pub": lambda: f"The {r.choice(_ADJECTIVES)} {r.choice(_ANIMALS)}",
            "restaurant": lambda: r.choice(
                [f"{r.choice(_ADJECTIVES)} {r.choice(_NOUNS)} Kitchen", f"{r.choice(_SURNAMES)}'s Bistro"]
            ),
            "school": lambda: r.choice([f"{street_word} Primary School", f"{town} {r.choice(_SURNAMES)} Academy"]),
            "station": lambda: r.choice([f"{town} Central Station", f"{town} {street_word} Station"]),
            "supermarket": lambda: f"{r.choice(_BRANDS)} {street_word}",
            "university": lambda: f"University of {town}",
        }
        return self.unique(makers[category], town)

    def hours(self, place: int, category: str) -> None:
        always = category in ("hospital", "police", "fire_station")
        choices = (["24"], ["24"], ["24"]) if always else _HOURS[category]
        weekday, saturday, sunday = (self.rng.choice(options) for options in choices)
        for day in range(7):
            slot = weekday if day < 5 else saturday if day == 5 else sunday
            if slot == "24":
                self.data.hours.append((place, day, "00:00", "24:00"))
            elif slot is not None:
                self.data.hours.append((place, day, slot[0], slot[1]))

    def town(self, index: int, town_name: str, code: str, lat0: float, lon0: float) -> dict[str, list[int]]:
        """One town's grid of streets and its places; returns its edge junctions by side."""
        r = self.rng
        slug = slugify(town_name)
        self.data.towns.append((slug, town_name, lat0, lon0, code))
        words = r.sample(_STREET_WORDS, ROWS + COLUMNS)
        main_row, main_column = r.randrange(ROWS), r.randrange(COLUMNS)
        grid = [
            [
                self.node(lat0 + (row - (ROWS - 1) / 2) * LAT_STEP, lon0 + (col - (COLUMNS - 1) / 2) * LON_STEP)
                for col in range(COLUMNS)
            ]
            for row in range(ROWS)
        ]
        streets = []  # (street id, name, road type, junction nodes in order)
        for row in range(ROWS):
            kind = "primary" if row == main_row else "residential"
            suffix = "High Street" if row == main_row else "Street"
            streets.append((f"{words[row]} {suffix}", kind, grid[row]))
        for col in range(COLUMNS):
            kind = "primary" if col == main_column else "residential"
            suffix = r.choice(["Road", "Lane", "Avenue"]) if col != main_column else "Road"
            streets.append((f"{words[ROWS + col]} {suffix}", kind, [grid[row][col] for row in range(ROWS)]))
        # Every segment of every street, with the places on it (fraction along the segment, place node).
        segments = []
        for street_index, (street_name, kind, junctions) in enumerate(streets):
            street_id = len(self.data.streets) + 1
            sector = f"{street_index % 9 + 1}{'ABDEFGHJ'[street_index % 8]}{'LNPQRSTU'[(street_index * 3) % 8]}"
            postcode = f"{code}{index + 1} {sector}"
            self.data.streets.append((street_id, slug, street_name, slugify(street_name), kind, postcode))
            for position in range(len(junctions) - 1):
                ends = junctions[position], junctions[position + 1]
                segments.append((street_id, street_name, kind, *ends, position, []))
        # Places: each on a random segment, at a free spot along it.
        # Towns differ a little in what they have: one more or one fewer of the common categories.
        counts = {key: count + (r.choice((-1, 0, 1)) if count > 2 else 0) for key, (_, _, count) in CATEGORIES.items()}
        categories = [key for key, count in counts.items() for _ in range(count)]
        r.shuffle(categories)
        used_numbers: set[tuple[int, int]] = set()
        for category in categories:
            segment = r.choice(segments)
            street_id, street_name, _, a, b, position, on_segment = segment
            while True:
                slot = r.randrange(1, 10)  # tenths of the segment: places on a segment never overlap
                number = position * 20 + slot * 2 + r.randrange(2)
                if all(slot != other for other, _ in on_segment) and (street_id, number) not in used_numbers:
                    break
            used_numbers.add((street_id, number))
            place_id = len(self.data.places) + 1
            (lat1, lon1), (lat2, lon2) = self.data.nodes[a - 1][1:3], self.data.nodes[b - 1][1:3]
            lat, lon = round(lat1 + (lat2 - lat1) * slot / 10, 5), round(lon1 + (lon2 - lon1) * slot / 10, 5)
            name = self.place_name(category, town_name, street_name.split()[0])
            phone = None if category == "park" else f"01632 {r.randrange(100000, 999999)}"
            cuisine = r.choice(CUISINES) if category == "restaurant" else None
            stars = r.randrange(1, 6) if category == "hotel" else None
            self.data.places.append(
                (place_id, name, category, slug, street_id, number, lat, lon, phone, cuisine, stars)
            )
            self.hours(place_id, category)
            on_segment.append((slot, self.node(lat, lon, place_id)))
        # Roads: each segment split at its places.
        for _, street_name, kind, a, b, _, on_segment in segments:
            chain = [a] + [node for _, node in sorted(on_segment)] + [b]
            for first, second in itertools.pairwise(chain):
                self.edge(first, second, street_name, kind)
        # Footpaths across a few blocks (walkers and cyclists only), named after the town's parks.
        parks = [p[1] for p in self.data.places if p[2] == "park" and p[3] == slug]
        for park in parks[:3]:
            row, col = r.randrange(ROWS - 1), r.randrange(COLUMNS - 1)
            self.edge(grid[row][col], grid[row + 1][col + 1], f"{park} Path", "path")
        return {
            "north": grid[ROWS - 1],
            "south": grid[0],
            "east": [grid[row][COLUMNS - 1] for row in range(ROWS)],
            "west": [grid[row][0] for row in range(ROWS)],
        }

    def link(self, first: dict, second: dict, number: int, lat0: float, lon0: float, lat1: float, lon1: float) -> None:
        """A motorway and a country road between two towns (sides chosen by where they lie)."""
        dlat, dlon = lat1 - lat0, (lon1 - lon0) * 0.62
        out, back = (
            (("north", "south") if dlat > 0 else ("south", "north"))
            if abs(dlat) > abs(dlon)
            else (("east", "west") if dlon > 0 else ("west", "east"))
        )
        a, b = first[out], second[back]
        self.edge(a[0], b[0], f"M{number}", "motorway")
        # The country road bends through a village crossroads off the straight line, so it is longer.
        start, end = self.data.nodes[a[-1] - 1], self.data.nodes[b[-1] - 1]
        mid_lat = (start[1] + end[1]) / 2 + (end[2] - start[2]) * 0.15
        mid_lon = (start[2] + end[2]) / 2 - (end[1] - start[1]) * 0.15
        bend = self.node(mid_lat, mid_lon)
        road = f"B{4000 + number * 17}"
        self.edge(a[-1], bend, road, "country")
        self.edge(bend, b[-1], road, "country")


@functools.cache
def generate() -> Gazetteer:
    """The seed data (built once per process; callers must not change it)."""
    builder = _Builder()
    sides = [builder.town(i, name, code, lat, lon) for i, (name, code, lat, lon) in enumerate(TOWNS)]
    for number, (i, j) in enumerate(((0, 1), (1, 2), (2, 3), (3, 0), (0, 2)), start=4):
        builder.link(sides[i], sides[j], number, *TOWNS[i][2:4], *TOWNS[j][2:4])
    return builder.data
