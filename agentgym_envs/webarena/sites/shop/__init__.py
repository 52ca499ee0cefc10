"""Loopback Market, the embedded shop (WebArena site name `shopping`, origin `http://shop.test`)."""

from agentgym_envs.webarena.sites import EmbeddedSite

SITE = EmbeddedSite(
    name="shopping",
    origin="http://shop.test",
    title="Loopback Market",
    database="agentgym_envs.webarena.sites.shop.db:ShopDB",
    app="agentgym_envs.webarena.sites.shop.app:create_app",
    seed="agentgym_envs.webarena.sites.shop.db:seed_connection",
    templates="agentgym_envs.webarena.sites.shop.tasks",
)
