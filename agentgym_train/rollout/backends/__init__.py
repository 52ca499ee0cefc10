"""Generation backends behind one interface (`TurnGenerator`), built by one factory (`make_generator`).

- `protocol`: `TurnGenerator` and `Reply`, the next reply of every live episode, and the sharded hooks.
- `factory`: `make_generator`, the backend of a policy (cached, generate or vllm; lockstep when sharded).
- `cached`: `CachedSampler`, the Hugging Face sampler that keeps each episode's KV cache
  (`growing_cache`: the cache's layers grow in place).
- `generate`: `hf_generate_fn`, transformers' `generate` on every turn's whole history.
- `vllm`: `VLLMTurnGenerator`, generation through TRL's vLLM integration.
- `lockstep`: equal forward passes on every process under sharded training.
"""

from agentgym_train.rollout.backends.factory import BACKENDS, make_generator
from agentgym_train.rollout.backends.generate import hf_generate_fn
from agentgym_train.rollout.backends.protocol import Reply, TurnGenerator

__all__ = ["BACKENDS", "Reply", "TurnGenerator", "hf_generate_fn", "make_generator"]
