"""The training configs that ship with the package: the CPU demo's (`agentgym train` without arguments) and
the names `agentgym train NAME` accepts. Light to import (no torch), so the command line can read them."""

from __future__ import annotations

from pathlib import Path

#: The CPU demo's config, what `agentgym train` runs without arguments.
DEFAULT_CONFIG = Path(__file__).parent / "configs" / "babyai_demo.yaml"


def packaged_configs() -> list[str]:
    """Names of the configs that ship with the package (`agentgym train NAME`)."""
    return sorted(p.stem for p in DEFAULT_CONFIG.parent.glob("*.yaml"))
