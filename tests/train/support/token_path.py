"""Checks of an episode's token path (tests/train/rollout/test_rollout.py, test_stops.py, test_real_model.py)."""

from __future__ import annotations

from agentgym_train.rollout import ChatRenderer, Episode


def spans(mask: list[int], value: int) -> list[tuple[int, int]]:
    """[start, end) runs of `value` in `mask`."""
    runs, start = [], None
    for i, m in enumerate([*mask, None]):
        if m == value and start is None:
            start = i
        elif m != value and start is not None:
            runs.append((start, i))
            start = None
    return runs


def check_token_path(episode: Episode, tokenizer, renderer: ChatRenderer) -> None:
    """Sampled tokens are mask 1 and decode to the replies; env tokens are mask 0 and are the
    rendered observations; the whole sequence is the chat template over the transcript."""
    ids, mask = episode.completion_ids, episode.env_mask
    assert len(ids) == len(mask) == len(episode.logprobs)
    model_spans, env_spans = spans(mask, 1), spans(mask, 0)
    assert len(model_spans) == episode.turns == len(episode.replies)
    assistant = [m["content"] for m in episode.messages if m["role"] == "assistant"]
    observations = [m["content"] for m in episode.messages if m["role"] == "user"][1:]
    assert assistant == episode.replies
    for (start, end), reply in zip(model_spans, episode.replies, strict=True):
        span = ids[start:end]
        body = span[:-1] if span[-1] == tokenizer.eos_token_id else span
        assert tokenizer.decode(body, skip_special_tokens=False) == reply
    for k, (start, end) in enumerate(env_spans):
        closed = ids[start - 1] == tokenizer.eos_token_id
        assert ids[start:end] == renderer.observation_ids(observations[k], closed=closed)
        assert all(lp == 0.0 for lp in episode.logprobs[start:end])
    if mask and ids[-1] == tokenizer.eos_token_id:  # ended on the model's EOS: the chat, token for token
        transcript = episode.messages[: 2 * episode.turns + 2 - 1]  # without the final observation
        text = tokenizer.decode(episode.prompt_ids + ids, skip_special_tokens=False)
        assert text + "\n" == renderer.render(transcript, add_generation_prompt=False)
