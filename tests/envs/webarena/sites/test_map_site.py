"""The embedded map (no browser): the seeded gazetteer, routing on the road graph, every page and its
answers to bad input."""

from __future__ import annotations

import html as html_module
import re
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from starlette.testclient import TestClient

from agentgym_envs.webarena.sites.map import gazetteer
from agentgym_envs.webarena.sites.map.app import MAX_QUERY, create_app
from agentgym_envs.webarena.sites.map.db import MapDB, address, seed_connection
from agentgym_envs.webarena.sites.map.routing import Graph, format_distance, format_duration


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[TestClient, MapDB]]:
    db = MapDB()
    yield TestClient(create_app(db), base_url="http://map.test"), db
    db.close()


def text(html: str) -> str:
    return " ".join(html_module.unescape(re.sub(r"<[^>]+>", " ", html)).split()).replace(" ,", ",")


def test_the_gazetteer_is_deterministic_and_large_enough() -> None:
    first, second = gazetteer.generate.__wrapped__(), gazetteer.generate.__wrapped__()
    assert first == second
    assert len(first.places) >= 200 and len(first.towns) == 4
    assert len({place[1] for place in first.places}) == len(first.places)  # names are unique
    assert len({(place[6], place[7]) for place in first.places}) == len(first.places)  # so are coordinates
    assert {place[2] for place in first.places} == set(gazetteer.CATEGORIES)
    assert {edge[3] for edge in first.edges} == set(gazetteer.ROAD_TYPES)


def test_every_place_is_reachable_from_every_other_by_every_mode() -> None:
    connection = seed_connection()
    graph = Graph.from_connection(connection)
    nodes = [row[0] for row in connection.execute("SELECT id FROM nodes WHERE place IS NOT NULL")]
    connection.close()
    for mode in gazetteer.MODES:
        seen, frontier = {nodes[0]}, [nodes[0]]
        while frontier:
            node = frontier.pop()
            for neighbour, _, road_type, _ in graph.adjacent[node]:
                allowed = gazetteer.ROAD_TYPES[road_type][1] is not None if mode == "car" else road_type != "motorway"
                if allowed and neighbour not in seen:
                    seen.add(neighbour)
                    frontier.append(neighbour)
        assert set(nodes) <= seen, mode


def test_routing_finds_the_hand_computed_fastest_path_by_mode() -> None:
    # 1 -a- 2 -b- 3, a motorway 1-3 (cars only), a footpath 1-4-3 (no cars), an island 5-6.
    graph = Graph(
        [
            (1, 2, "A Street", "residential", 600),  # car 72 s, bike 135 s, foot 432 s
            (2, 3, "B Road", "primary", 900),  # car 64.8 s, bike 202.5 s, foot 648 s
            (1, 3, "M1", "motorway", 2500),  # car 90 s
            (1, 4, "Park Path", "path", 500),
            (4, 3, "Park Path", "path", 700),  # bike 270 s, foot 864 s: shorter than 600 + 900
            (5, 6, "Lonely Lane", "residential", 100),
        ]
    )
    car = graph.route(1, 3, "car")
    assert [(s.road, s.metres) for s in car.steps] == [("M1", 2500)] and car.seconds == pytest.approx(90)
    bike = graph.route(1, 3, "bike")
    assert [(s.road, s.metres) for s in bike.steps] == [("Park Path", 1200)]  # two legs on one road: one step
    assert bike.seconds == pytest.approx(270) and format_duration(bike.seconds) == "4 min"
    foot = graph.route(3, 1, "foot")
    assert foot.metres == 1200 and foot.seconds == pytest.approx(864) and format_duration(foot.seconds) == "14 min"
    assert graph.route(1, 5, "foot") is None
    with pytest.raises(ValueError, match="unknown travel mode"):
        graph.route(1, 3, "bus")
    assert [format_distance(m) for m in (4, 994, 995, 2449, 12_051)] == ["0 m", "990 m", "1.0 km", "2.4 km", "12.1 km"]
    assert format_duration(4000) == "1 h 7 min"


def test_search_finds_places_by_words_category_town_and_nearness(site: tuple[TestClient, MapDB]) -> None:
    client, db = site
    cafes = db.places("category = 'cafe' AND town = 'ashford'")
    page = text(client.get("/search", params={"q": "Cafes in ASHFORD"}).text)
    assert f"Cafes in Ashford {len(cafes)} places" in page and all(cafe["name"] in page for cafe in cafes)
    station = db.places("category = 'station'")[0]
    near = text(client.get("/search", params={"q": f"hospitals near {station['name'].lower()}"}).text)
    nearest = db.nearest(station["lat"], station["lon"], "hospital")
    assert near.index(nearest[0]["name"]) < near.index(nearest[1]["name"])
    assert f"{format_distance(nearest[0]['metres'])} away" in near
    museum = db.places("category = 'museum'")[0]
    words = text(client.get("/search", params={"q": f"museum {museum['street_name']}"}).text)
    assert museum["name"] in words and address(museum) in words
    assert "No places match" in client.get("/search?q=zeppelin+hangar").text
    everything = text(client.get("/search?q=street").text)
    assert "page 1 of" in everything and "Page 2" in everything
    assert client.get("/search?q=street&page=2").status_code == 200


def test_place_page_shows_its_facts_hours_and_nearby_places(site: tuple[TestClient, MapDB]) -> None:
    client, db = site
    hotel = db.places("category = 'hotel'")[0]
    page = text(client.get(f"/place/{hotel['id']}").text)
    assert f"Category Hotel Address {address(hotel)}" in page
    assert f"Coordinates {hotel['lat']:.5f}, {hotel['lon']:.5f}" in page and f"Stars {hotel['stars']}" in page
    assert "Monday Open 24 hours" in page
    closest = db.nearest(hotel["lat"], hotel["lon"], exclude=hotel["id"])[0]
    assert f"Nearby places {closest['name']}" in page
    school = db.places("category = 'school'")[0]
    assert "Sunday Closed" in text(client.get(f"/place/{school['id']}").text)
    pharmacies = text(client.get(f"/nearby?place={hotel['id']}&category=pharmacy").text)
    assert db.nearest(hotel["lat"], hotel["lon"], "pharmacy")[0]["name"] in pharmacies


def test_directions_follow_the_road_graph_and_have_one_canonical_url(site: tuple[TestClient, MapDB]) -> None:
    client, db = site
    start, end = db.places("town = 'ashford'")[0], db.places("town = 'coldwater'")[0]
    typed = client.get(
        "/directions", params={"from": start["name"].upper(), "to": f"  {end['name']} ", "mode": "bike"},
        follow_redirects=False,
    )  # fmt: skip
    assert typed.status_code == 303
    assert parse_qs(urlsplit(typed.headers["location"]).query) == {
        "from": [start["name"]],
        "to": [end["name"]],
        "mode": ["bike"],
    }
    page = text(client.get(typed.headers["location"]).text)
    for mode in gazetteer.MODES:
        route = db.graph.route(start["node"], end["node"], mode)
        shown = text(client.get("/directions", params={"from": start["name"], "to": end["name"], "mode": mode}).text)
        assert f"Distance: {format_distance(route.metres)}. Time: {format_duration(route.seconds)}." in shown
        assert f"Take {route.steps[0].road} for {format_distance(route.steps[0].metres)}" in shown
    car, foot = (db.graph.route(start["node"], end["node"], mode) for mode in ("car", "foot"))
    assert car.seconds < foot.seconds and any(step.road_type == "motorway" for step in car.steps)
    assert "Car directions" in page and "Foot directions" in page and "Reverse route" in page
    prefilled = client.get("/directions", params={"to": start["name"]})
    assert prefilled.status_code == 200 and f'value="{html_module.escape(start["name"])}"' in prefilled.text


def test_whats_here_lists_the_places_at_a_point(site: tuple[TestClient, MapDB]) -> None:
    client, db = site
    place = db.places("category = 'library'")[0]
    page = text(client.get(f"/whats-here?lat={place['lat']:.5f}&lon={place['lon']:.5f}").text)
    assert f"Places within 300 m of {place['lat']:.5f}, {place['lon']:.5f} {place['name']}, Library" in page
    assert f"{place['name']}, Library, {address(place)}, 0 m away" in page
    assert "Nothing on this map within 300 m" in client.get("/whats-here?lat=10&lon=10").text


def test_browsing_by_category_town_and_street(site: tuple[TestClient, MapDB]) -> None:
    client, db = site
    assert all(town["name"] in client.get("/").text for town in db.towns())
    banks = text(client.get("/category/bank?town=dunmore").text)
    assert all(bank["name"] in banks for bank in db.places("category = 'bank' AND town = 'dunmore'"))
    assert not any(bank["name"] in banks for bank in db.places("category = 'bank' AND town != 'dunmore'"))
    town = text(client.get("/town/brackenridge").text)
    street = db.streets("brackenridge")[0]
    assert f"{street['name']} ({street['places']} place" in town
    listed = text(client.get(f"/town/brackenridge/street/{street['slug']}").text)
    assert all(place["name"] in listed for place in db.places("street = ?", street["id"]))


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/search?q=" + "x" * (MAX_QUERY + 1), 422),
        ("/search?q=cafe&page=0", 422),
        ("/search?q=cafe&page=99", 422),
        ("/search?q=cafe&page=two", 400),
        ("/place/0", 404),
        ("/place/abc", 404),
        ("/place/99999999999999999999", 404),
        ("/nearby?place=1&category=zoo", 404),
        ("/nearby?place=one&category=cafe", 400),
        ("/nearby?place=99999&category=cafe", 404),
        ("/directions?from=Nowhere+Inn&to=Somewhere", 404),
        ("/directions?from=a&to=b&mode=bus", 400),
        ("/directions?from=" + "x" * (MAX_QUERY + 1) + "&to=b", 422),
        ("/whats-here?lat=95&lon=0", 422),
        ("/whats-here?lat=1e5&lon=0", 400),
        ("/whats-here?lat=51.5&lon=", 400),
        ("/category/zoo", 404),
        ("/category/cafe?town=atlantis", 404),
        ("/town/atlantis", 404),
        ("/town/ashford/street/nowhere-street", 404),
        ("/no/such/page", 404),
    ],
)
def test_bad_input_gets_a_clear_error_page_never_a_500(site: tuple[TestClient, MapDB], url: str, status: int) -> None:
    client, _ = site
    response = client.get(url)
    assert response.status_code == status and 'role="alert"' in response.text


def test_same_place_twice_is_refused_and_posting_is_not_allowed(site: tuple[TestClient, MapDB]) -> None:
    client, db = site
    name = db.places()[0]["name"]
    assert client.get("/directions", params={"from": name, "to": name, "mode": "foot"}).status_code == 422
    assert client.post("/directions").status_code == 404


def test_restore_puts_the_seed_data_back() -> None:
    db = MapDB()
    try:
        db._live.execute("DELETE FROM places")  # the site itself changes nothing; a stand-in for damage
        assert db.places() == []
        db.restore()
        assert len(db.places()) == len(gazetteer.generate().places)
    finally:
        db.close()


def test_searching_a_places_name_lists_it_first(site: tuple[TestClient, MapDB]) -> None:
    _, db = site
    for place in db.places():
        assert db.search(place["name"])[0]["name"] == place["name"]  # the expert's way to any place
