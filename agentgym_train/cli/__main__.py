"""`python -m agentgym_train.cli ...`: the `agentgym` command (as `accelerate launch -m agentgym_train.cli` runs it)."""

from __future__ import annotations

import sys

from agentgym_train.cli import main

sys.exit(main())
