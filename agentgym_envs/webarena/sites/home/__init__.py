"""The homepage (WebArena site name `homepage`, origin `http://home.test`): a page that lists the sites."""

from agentgym_envs.webarena.sites import EmbeddedSite

SITE = EmbeddedSite(
    name="homepage",
    origin="http://home.test",
    title="Homepage",
    database="agentgym_envs.webarena.sites.home.app:HomeDB",
    app="agentgym_envs.webarena.sites.home.app:create_app",
    seed="agentgym_envs.webarena.sites.home.app:seed_connection",
)
