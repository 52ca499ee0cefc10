"""WebArena on a real Chromium through Playwright: `AgentGym/WebArena-v0` (see `env.WebArenaEnv`).

Importing this package imports no browser code; Playwright and the embedded sites' server start at
the first reset.
"""
