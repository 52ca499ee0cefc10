"""Loopback Maps, the embedded map (WebArena site name `map`, origin `http://map.test`)."""

from agentgym_envs.webarena.sites import EmbeddedSite

SITE = EmbeddedSite(
    name="map",
    origin="http://map.test",
    title="Loopback Maps",
    database="agentgym_envs.webarena.sites.map.db:MapDB",
    app="agentgym_envs.webarena.sites.map.app:create_app",
    seed="agentgym_envs.webarena.sites.map.db:seed_connection",
    templates="agentgym_envs.webarena.sites.map.tasks",
)
