"""Loopback Market Admin, the shop's back office (WebArena site name `shopping_admin`, origin
`http://admin.shop.test`): dashboard, reports, orders, products, reviews, customers, price rules and
CMS pages over a seeded database of its own."""

from agentgym_envs.webarena.sites import EmbeddedSite

SITE = EmbeddedSite(
    name="shopping_admin",
    origin="http://admin.shop.test",
    title="Loopback Market Admin",
    database="agentgym_envs.webarena.sites.admin.db:AdminDB",
    app="agentgym_envs.webarena.sites.admin.app:create_app",
    seed="agentgym_envs.webarena.sites.admin.db:seed_connection",
    templates="agentgym_envs.webarena.sites.admin.tasks",
)
