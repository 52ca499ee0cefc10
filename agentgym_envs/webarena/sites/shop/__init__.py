"""Loopback Market, the embedded shop (WebArena site name `shopping`, origin `http://shop.test`)."""
