"""Loopback Code, the embedded code host (WebArena site name `gitlab`, origin `http://code.test`)."""

from agentgym_envs.webarena.sites import EmbeddedSite

SITE = EmbeddedSite(
    name="gitlab",
    origin="http://code.test",
    title="Loopback Code",
    database="agentgym_envs.webarena.sites.code.db:CodeDB",
    app="agentgym_envs.webarena.sites.code.app:create_app",
    seed="agentgym_envs.webarena.sites.code.db:seed_connection",
    templates="agentgym_envs.webarena.sites.code.tasks",
)
