"""The browser side of WebArena: one Chromium per process (`chromium`), an episode's page (`session`),
the page as text (`observation`), the action language (`actions`) and where the browser may go
(`safety`)."""
