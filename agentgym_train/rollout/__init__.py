"""Rollouts: the multi-turn engine and the generation backends behind one interface (`GenerateFn`).

- `engine`: `RolloutEngine` plays batches of episodes (token-in, token-out, env calls with timeouts).
- `templates`: `ChatRenderer`, how each turn is rendered with the model's chat template.
- `sampler`: `CachedSampler`, the Hugging Face sampler that keeps each episode's KV cache.
- `vllm_backend`: `VLLMTurnGenerator`, generation through TRL's vLLM integration.
- `lockstep`: equal forward passes on every process under sharded training.
"""

from agentgym_train.rollout.engine import (
    EnvTimeoutError,
    Episode,
    GenerateFn,
    RolloutEngine,
    Task,
    hf_generate_fn,
    run_calls,
    summarize,
)
from agentgym_train.rollout.templates import ChatRenderer

__all__ = [
    "ChatRenderer",
    "EnvTimeoutError",
    "Episode",
    "GenerateFn",
    "RolloutEngine",
    "Task",
    "hf_generate_fn",
    "run_calls",
    "summarize",
]
