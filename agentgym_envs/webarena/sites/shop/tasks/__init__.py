"""The shop's task templates (WebArena site `shopping`): 46 intents in WebArena's shop proportions
(16 information seeking, 10 navigation, 15 state changes, 5 unachievable; 5 held out of train).

Every instance's answer and the expert's plan come from the seed data (`ShopDB`'s seed), and the plan
uses the site as a user does: the search box, the category, sort, page and status links, the filter
form, buttons and form fields by their accessible names.
"""

from __future__ import annotations

from agentgym_envs.webarena.sites.shop.tasks import info, na, nav, state
from agentgym_envs.webarena.tasks.templates import TaskTemplate

#: Every template of the site, by kind.
TEMPLATES: list[TaskTemplate] = [*info.TEMPLATES, *nav.TEMPLATES, *state.TEMPLATES, *na.TEMPLATES]
