"""Task templates of the shop admin (WebArena site `shopping_admin`), in WebArena's proportions for
the admin (about 45% information seeking, 2% navigation, 50% state changes, 3% unachievable).

Answers come from the seed data by SQL (the report queries are the ones the pages show); state
changes are checked by `program_html` on the page that shows the record. Every expert plan starts on
the dashboard and goes through the admin's menu, search boxes, links, forms and buttons.
"""

from __future__ import annotations

from agentgym_envs.webarena.sites.admin.tasks import info, na, nav, state
from agentgym_envs.webarena.tasks.templates import TaskTemplate

#: Every template of the site, by kind.
TEMPLATES: list[TaskTemplate] = [*info.TEMPLATES, *nav.TEMPLATES, *state.TEMPLATES, *na.TEMPLATES]
