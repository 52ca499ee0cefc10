"""Rollouts: the multi-turn engine and the generation backends behind one interface (`TurnGenerator`).

- `engine`: `RolloutEngine` plays batches of episodes (token-in, token-out), in lockstep or async.
- `episode`: `Task` and `Episode`, what the engine plays and returns, and `summarize`.
- `asynchronous`: async rollouts, each episode back to the generator as soon as its env call returns.
- `calls`: `run_calls` and `CallRunner`, the env calls with timeouts.
- `templates`: `ChatRenderer`, how each turn is rendered with the model's chat template.
- `stops`: `StopStrings`, where a sampled reply ends, token-exactly.
- `backends`: the `TurnGenerator` protocol, `make_generator` and the backends (the KV-cached sampler,
  transformers' `generate`, vLLM, lockstep generation for sharded training).
"""

from agentgym_train.rollout.backends import Reply, TurnGenerator, make_generator
from agentgym_train.rollout.calls import EnvTimeoutError, run_calls
from agentgym_train.rollout.engine import RolloutEngine
from agentgym_train.rollout.episode import Episode, Task, summarize
from agentgym_train.rollout.templates import ChatRenderer

__all__ = [
    "ChatRenderer",
    "EnvTimeoutError",
    "Episode",
    "Reply",
    "RolloutEngine",
    "Task",
    "TurnGenerator",
    "make_generator",
    "run_calls",
    "summarize",
]
