"""Loopback Forum, the embedded Postmill-like forum (WebArena site name `reddit`, origin `http://forum.test`):
forums with hot/new/top listings, link and text posts with nested comments, votes, subscriptions, user
profiles with biographies, forum creation and search, over a seeded database of its own."""

from agentgym_envs.webarena.sites import EmbeddedSite

SITE = EmbeddedSite(
    name="reddit",
    origin="http://forum.test",
    title="Loopback Forum",
    database="agentgym_envs.webarena.sites.forum.db:ForumDB",
    app="agentgym_envs.webarena.sites.forum.app:create_app",
    seed="agentgym_envs.webarena.sites.forum.db:seed_connection",
    templates="agentgym_envs.webarena.sites.forum.tasks",
)
