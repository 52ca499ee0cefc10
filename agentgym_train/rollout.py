"""The multi-turn rollout engine: many episodes at once, token-in and token-out.

Each turn, every live episode generates together (one left-padded batched `generate`), then the env
steps run concurrently in a thread pool. An episode's tokens are one append-only sequence:

    prompt_ids      the chat template over [system, first observation] with the generation prompt
    completion_ids  reply 1 (as sampled, with its end-of-turn token) | observation 2 rendered as the
                    next user turn (the template's text between the end-of-turn token and the next
                    generation prompt) | reply 2 | ... | reply n (ends on the model's EOS)
    env_mask        1 on the sampled tokens, 0 on the env's
    logprobs        the sampler's log-probability of each sampled token (0.0 where the env spoke)

Sampled ids are never decoded and re-encoded; only the new observation is tokenized. The
`max_completion_length` budget covers every turn: when the next observation plus a full reply
(`max_turn_tokens`) would not fit, the episode ends at that turn boundary (`budget_truncated`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from agentgym_wrappers import MultiTurnWrapper

#: (contexts, max_new_tokens) -> per context: (new token ids, their sampler logprobs)
GenerateFn = Callable[[list[list[int]], int], list[tuple[list[int], list[float]]]]


@dataclass(frozen=True)
class Task:
    """One episode to run: an env id and the reset arguments that pick its task."""

    env_id: str
    task_id: str | int | None = None
    split: str | None = None
    seed: int | None = None

    def options(self) -> dict[str, Any] | None:
        options = {k: v for k, v in (("task_id", self.task_id), ("split", self.split)) if v is not None}
        return options or None


@dataclass
class Episode:
    """One finished episode: its token sequence and what happened."""

    task: Task
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)
    episode_return: float = 0.0
    turns: int = 0
    success: bool = False
    terminated: bool = False
    truncated: bool = False  # the turn limit (max_turns) or the env's own step budget
    budget_truncated: bool = False  # max_completion_length would have been exceeded
    invalid_replies: int = 0
    category: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated or self.budget_truncated


class ChatRenderer:
    """Renders chats with a tokenizer's chat template, the pieces the rollout needs as token ids.

    The template must be prefix-preserving over user/assistant turns (Qwen's and the tiny model's
    are): rendering one more user turn only appends text.
    """

    _PROBE_REPLY = "PROBE REPLY"

    def __init__(self, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None):
        self.tokenizer = tokenizer
        self.kwargs = dict(chat_template_kwargs or {})
        eos = tokenizer.eos_token
        if eos is None:
            raise ValueError("the tokenizer has no eos_token; the assistant's end-of-turn token must be its EOS")
        self.eos_token_id: int = tokenizer.eos_token_id
        self._eos_text = eos

    def render(self, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt, **self.kwargs
        )

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The first prompt: the chat so far and the generation prompt."""
        return self.encode(self.render(messages, add_generation_prompt=True))

    def observation_ids(self, observation: str, role: str = "user", closed: bool = True) -> list[int]:
        """Tokens from right after the model's end-of-turn token to the next generation prompt.

        `closed=False` (the reply was cut at `max_turn_tokens` without EOS) also emits the
        end-of-turn token itself, which the model then did not sample.
        """
        head = [{"role": "user", "content": "PROBE"}, {"role": "assistant", "content": self._PROBE_REPLY}]
        before = self.render(head, add_generation_prompt=False)
        after = self.render([*head, {"role": role, "content": observation}], add_generation_prompt=True)
        anchor = self._PROBE_REPLY + self._eos_text
        cut = before.rfind(anchor)
        if cut < 0 or not after.startswith(before[: cut + len(anchor)]):
            raise ValueError(
                "the chat template is not prefix-preserving (a new turn rewrites earlier text) or does not end "
                "assistant turns with the tokenizer's eos_token; multi-turn token-in/token-out needs both"
            )
        start = cut + len(self._PROBE_REPLY) + (len(self._eos_text) if closed else 0)
        return self.encode(after[start:])


def hf_generate_fn(
    model: Any,
    pad_token_id: int,
    eos_token_ids: Sequence[int],
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int | None = None,
    batch_size: int | None = None,
    generation_kwargs: dict[str, Any] | None = None,
) -> GenerateFn:
    """A `GenerateFn` over transformers `generate`: left-padded batches, sampled ids and their logprobs.

    Logprobs are taken from the raw logits divided by the temperature (the distribution that TRL's
    loss recomputes), for the token actually sampled.
    """
    import torch
    from transformers import GenerationConfig

    eos = torch.tensor(list(eos_token_ids))

    def generate(contexts: list[list[int]], max_new_tokens: int) -> list[tuple[list[int], list[float]]]:
        config = GenerationConfig(
            **{
                **(generation_kwargs or {}),
                "max_new_tokens": max_new_tokens,
                "do_sample": temperature > 0,
                "temperature": temperature if temperature > 0 else None,
                "top_p": top_p if temperature > 0 else None,
                "top_k": (top_k or None) if temperature > 0 else None,
                "pad_token_id": pad_token_id,
                "eos_token_id": list(eos_token_ids),
                "return_dict_in_generate": True,
                "output_logits": True,
                "disable_compile": True,
            }
        )
        results: list[tuple[list[int], list[float]]] = []
        step = batch_size or len(contexts)
        device = next(model.parameters()).device
        for start in range(0, len(contexts), step):
            chunk = contexts[start : start + step]
            width = max(len(c) for c in chunk)
            input_ids = torch.full((len(chunk), width), pad_token_id, dtype=torch.long)
            attention_mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, ids in enumerate(chunk):
                input_ids[row, width - len(ids) :] = torch.tensor(ids)
                attention_mask[row, width - len(ids) :] = 1
            with torch.no_grad():
                out = model.generate(
                    input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), generation_config=config
                )
            new = out.sequences[:, width:].cpu()
            logits = torch.stack(out.logits, dim=1).float().cpu()
            if temperature > 0:
                logits = logits / temperature
            logps = torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
            is_eos = torch.isin(new, eos)
            for row in range(len(chunk)):
                hits = is_eos[row].nonzero()
                end = int(hits[0]) + 1 if len(hits) else new.size(1)
                results.append((new[row, :end].tolist(), logps[row, :end].tolist()))
        return results

    return generate


class RolloutEngine:
    """Runs batches of episodes of text envs with a language model.

    Args:
        tokenizer: The model's tokenizer (with a chat template; its EOS ends an assistant turn).
        max_turns: Turn limit per episode (None: each env's default). A plain attribute: the
            max-turn scheduler changes it between rollouts.
        max_completion_length: Token budget for everything after the prompt, all turns together.
        max_turn_tokens: Most tokens one reply may have.
        env_kwargs: Keyword arguments for `gym.make` (e.g. `{"show_actions": False}` for BabyAI).
        system_prompt: Overrides the scenario's system prompt.
        num_env_workers: Threads that step envs concurrently.
        eos_token_ids: Tokens that end a reply (default: the tokenizer's EOS).
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        max_turns: int | None = None,
        max_completion_length: int = 1024,
        max_turn_tokens: int = 32,
        env_kwargs: dict[str, Any] | None = None,
        system_prompt: str | None = None,
        num_env_workers: int = 8,
        eos_token_ids: Sequence[int] | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
    ):
        if max_turn_tokens < 1 or max_completion_length < max_turn_tokens:
            raise ValueError(
                f"need 1 <= max_turn_tokens ({max_turn_tokens}) <= max_completion_length ({max_completion_length})"
            )
        self.renderer = ChatRenderer(tokenizer, chat_template_kwargs)
        self.tokenizer = tokenizer
        self.max_turns = max_turns
        self.max_completion_length = max_completion_length
        self.max_turn_tokens = max_turn_tokens
        self.env_kwargs = dict(env_kwargs or {})
        self.system_prompt = system_prompt
        self.eos_token_ids = list(eos_token_ids or [tokenizer.eos_token_id])
        self._pool: dict[str, list[MultiTurnWrapper]] = {}
        self._executor = ThreadPoolExecutor(max_workers=max(1, num_env_workers), thread_name_prefix="agentgym-env")
        #: Seconds spent generating and stepping envs in the last `run`.
        self.timing = {"generation": 0.0, "env": 0.0}

    # ---- envs -------------------------------------------------------------------------------------
    def _envs(self, env_id: str, n: int) -> list[MultiTurnWrapper]:
        pool = self._pool.setdefault(env_id, [])
        while len(pool) < n:
            import agentgym_envs  # noqa: F401  (registers the ids, also in worker processes)

            pool.append(MultiTurnWrapper(gym.make(env_id, **self.env_kwargs), system_prompt=self.system_prompt))
        return pool[:n]

    def close(self) -> None:
        for pool in self._pool.values():
            for env in pool:
                env.close()
        self._pool.clear()
        self._executor.shutdown(wait=True)

    # ---- episodes -----------------------------------------------------------------------------------
    def run(
        self, tasks: Sequence[Task], generate: GenerateFn, progress: Callable[[int], None] | None = None
    ) -> list[Episode]:
        """Play one episode per task; return them in the order of `tasks`.

        Args:
            tasks: What to play (repeat a task G times for a GRPO group).
            generate: The policy (`hf_generate_fn(model, ...)`, or a scripted one in tests).
            progress: Called with the number of episodes that just finished.
        """
        self.timing = {"generation": 0.0, "env": 0.0}
        counts: dict[str, int] = {}
        for task in tasks:
            counts[task.env_id] = counts.get(task.env_id, 0) + 1
        free = {env_id: iter(self._envs(env_id, n)) for env_id, n in counts.items()}
        envs = [next(free[task.env_id]) for task in tasks]

        started = time.perf_counter()
        resets = list(self._executor.map(lambda pair: self._reset(*pair), zip(envs, tasks, strict=True)))
        self.timing["env"] += time.perf_counter() - started
        episodes = [episode for episode, _ in resets]

        live = list(range(len(tasks)))
        while live:
            contexts = [episodes[i].prompt_ids + episodes[i].completion_ids for i in live]
            started = time.perf_counter()
            outputs = generate(contexts, self.max_turn_tokens)
            self.timing["generation"] += time.perf_counter() - started
            replies = []
            for i, (ids, logps) in zip(live, outputs, strict=True):
                episode = episodes[i]
                closed = bool(ids) and ids[-1] in self.eos_token_ids
                episode.completion_ids += ids
                episode.logprobs += logps
                episode.env_mask += [1] * len(ids)
                reply = self.tokenizer.decode(ids[:-1] if closed else ids, skip_special_tokens=False)
                episode.replies.append(reply)
                replies.append((reply, closed))

            started = time.perf_counter()
            steps = list(
                self._executor.map(lambda j: envs[live[j]].step(replies[j][0]), range(len(live)))  # noqa: B023
            )
            self.timing["env"] += time.perf_counter() - started

            still_live = []
            for j, i in enumerate(live):
                episode, env = episodes[i], envs[i]
                observation, reward, terminated, truncated, info = steps[j]
                episode.turns += 1
                episode.episode_return += float(reward)
                episode.invalid_replies += bool(info.get("format_error", False))
                episode.success = bool(info.get("success", False))
                episode.terminated, episode.truncated = bool(terminated), bool(truncated)
                if not episode.done:
                    chunk = self.renderer.observation_ids(observation, closed=replies[j][1])
                    used = len(episode.completion_ids) + len(chunk) + self.max_turn_tokens
                    if used > self.max_completion_length:
                        episode.budget_truncated = True
                    else:
                        episode.completion_ids += chunk
                        episode.logprobs += [0.0] * len(chunk)
                        episode.env_mask += [0] * len(chunk)
                        still_live.append(i)
                        continue
                episode.messages = env.messages
                episode.stats = dict(info.get("episode") or self._stats(episode))
                if progress is not None:
                    progress(1)
            live = still_live
        return episodes

    def _reset(self, env: MultiTurnWrapper, task: Task) -> tuple[Episode, dict[str, Any]]:
        env.max_turns = self.max_turns if self.max_turns is not None else env.unwrapped.default_max_turns
        _, info = env.reset(seed=task.seed, options=task.options())
        episode = Episode(task=task, prompt_ids=self.renderer.prompt_ids(env.messages), category=info.get("category"))
        return episode, info

    @staticmethod
    def _stats(episode: Episode) -> dict[str, Any]:
        """Statistics of an episode the engine ended (the wrapper only reports finished ones)."""
        return {
            "turns": episode.turns,
            "return": episode.episode_return,
            "success": episode.success,
            "invalid_replies": episode.invalid_replies,
            "terminated": False,
            "truncated": True,
            "budget_truncated": True,
        }


def summarize(episodes: Sequence[Episode]) -> dict[str, float]:
    """Mean return, success rate, mean turns, truncation and invalid-reply rates of a batch."""
    n = max(1, len(episodes))
    turns = sum(e.turns for e in episodes)
    return {
        "return": sum(e.episode_return for e in episodes) / n,
        "success": sum(e.success for e in episodes) / n,
        "turns": turns / n,
        "truncated": sum(e.truncated or e.budget_truncated for e in episodes) / n,
        "budget_truncated": sum(e.budget_truncated for e in episodes) / n,
        "invalid_reply_rate": sum(e.invalid_replies for e in episodes) / max(1, turns),
        "model_tokens": sum(sum(e.env_mask) for e in episodes) / n,
        "completion_tokens": sum(len(e.completion_ids) for e in episodes) / n,
    }
