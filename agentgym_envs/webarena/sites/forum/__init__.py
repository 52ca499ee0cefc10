"""Loopback Forum, the embedded Postmill-like forum (WebArena site name `reddit`, origin `http://forum.test`)."""
