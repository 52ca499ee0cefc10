"""The forum's task templates (WebArena site `reddit`), in WebArena's forum proportions: about 9%
information seeking, no navigation, 89% state changes (checked by `program_html` on the page that
shows the record), 2% unachievable.

Answers and targets come from the seed data through the same queries the pages use (`db.submissions`,
`db.thread`); texts to type are drawn per instance from the word lists below by a generator seeded
with the template and the instance, so every build is the same. Expert plans go as a user goes: the
forum list, a forum and its sort links, the search box, a post, its buttons and forms.
"""

from __future__ import annotations

from agentgym_envs.webarena.sites.forum.tasks import (
    info,
    na,
    state_account,
    state_comments,
    state_own,
    state_posts,
    state_votes,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate

#: Every template of the site, by kind.
TEMPLATES: list[TaskTemplate] = [
    *info.TEMPLATES,
    *na.TEMPLATES,
    *state_posts.TEMPLATES,
    *state_comments.TEMPLATES,
    *state_votes.TEMPLATES,
    *state_account.TEMPLATES,
    *state_own.TEMPLATES,
]
