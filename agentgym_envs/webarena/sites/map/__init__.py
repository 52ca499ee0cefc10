"""Loopback Maps, the embedded map (WebArena site name `map`, origin `http://map.test`)."""
