"""Loopback Code, the embedded code host (WebArena site name `gitlab`, origin `http://code.test`)."""
