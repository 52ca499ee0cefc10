"""Task templates of the code host (WebArena site `gitlab`): about 35% information seeking, 15%
navigation, 45% state changes (checked by `program_html` on the page that shows the record) and 5%
unachievable, as in WebArena's GitLab tasks. Every answer and check is read off the seed data; every
expert plan starts from the explore page (or the dashboard) and goes where a user would click."""

from __future__ import annotations

from agentgym_envs.webarena.sites.code.tasks import info, na, nav, state
from agentgym_envs.webarena.tasks.templates import TaskTemplate

#: Every template of the site, by kind.
TEMPLATES: list[TaskTemplate] = [*info.TEMPLATES, *nav.TEMPLATES, *state.TEMPLATES, *na.TEMPLATES]
