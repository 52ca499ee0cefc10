"""The map's task templates (WebArena site `map`): 45 intents in about WebArena's map proportions
(28 information seeking, 12 navigation, 5 unachievable; the map has no state to change; 5 held out of
train).

Every answer comes from the seed data (`seed_connection`) and, for routes, from the same routing code
the directions page runs (`routing.Graph`), formatted as the pages format it. The expert's plans use
the site as a user does: the search box, the town, street, category and "nearby" links, the
directions form (From, To, Travel mode, Get directions) and the "What's here?" form.
"""

from __future__ import annotations

from agentgym_envs.webarena.sites.map.tasks import info, na, nav
from agentgym_envs.webarena.tasks.templates import TaskTemplate

#: Every template of the site, by kind.
TEMPLATES: list[TaskTemplate] = [*info.TEMPLATES, *nav.TEMPLATES, *na.TEMPLATES]
