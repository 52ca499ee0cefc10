"""The old name of `agentgym_train.smollm2` (the SmolLM2 converter), kept while code still imports it."""

from __future__ import annotations

from agentgym_train.smollm2 import CHECKPOINT_MARKER, SMOLLM2_NAME, smollm2_checkpoint

__all__ = ["CHECKPOINT_MARKER", "SMOLLM2_NAME", "smollm2_checkpoint"]
