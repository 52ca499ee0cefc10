"""Guards against replies that stop ending: truncated replies and episodes out of the loss, DAPO's overlong penalty.

A reply is truncated when the reply budget (`max_turn_tokens`) cut it: no end token, no stop string
(`Episode.stopped_by == "budget"`). An episode is budget-truncated when the next observation and a full
reply would not have fitted into `max_completion_length` (`Episode.budget_truncated`): it ended unfinished
at a turn boundary, with no reply cut. Training on either pushes up whatever the episode did whenever it
scored well, which is how a long run collapses into replies that never end.

- `truncated_replies`: `"train"` (as any other reply), `"mask_reply"` (that reply's tokens leave the loss,
  turn-level, as TRL's `mask_truncated_completions` does for a single-turn completion), `"mask_episode"`
  (every model token of an episode with a truncated reply leaves the loss).
- `budget_truncated_episodes`: `"train"` or `"mask_episode"`.
- DAPO's soft overlong punishment (Yu et al., 2025, Eq. 13) with `L_max` the budget and `L_cache` the
  buffer: 0 up to `L_max - L_cache` tokens, then linear down to -1 at `L_max` (-1 beyond). `"reply"`
  length: each reply's tokens in the completion against its episode's `max_turn_tokens`, the episode's
  penalty being the mean over its replies (a one-reply episode gets DAPO's value; an episode whose every
  reply ran to the budget gets -1). `"episode"` length: the whole completion (replies and observations,
  as `max_completion_length` counts them) against `max_completion_length`, which reaches budget-truncated
  episodes: one counts as run to `L_max` (-1), since it ended because its next turn would not have fitted,
  as DAPO's response cut at `L_max` (without this, an episode the budget ended before `L_max - L_cache`
  tokens, when the buffer is shorter than an observation and a reply, would go unpunished). The trainer
  adds it to the episode's reward as one more reward function (`overlong_penalty`, weight
  `overlong_penalty_factor`), so every estimator sees it.

Masked tokens keep their place in the attention; the episode's reward still counts in its group's
statistics (as with TRL's `mask_truncated_completions`).

    >>> dapo_penalty(90, max_length=100, buffer=20)
    -0.5
"""

from __future__ import annotations

from typing import Any, NamedTuple

from agentgym_train.rollout import Episode

#: What to do with a reply the reply budget cut.
TRUNCATED_REPLIES = ("train", "mask_reply", "mask_episode")
#: What to do with an episode the episode budget ended.
BUDGET_TRUNCATED = ("train", "mask_episode")
#: What the overlong penalty measures.
OVERLONG_LENGTHS = ("reply", "episode")


class Guarded(NamedTuple):
    """An episode's env mask after the guards, and what they left out."""

    env_mask: list[int]
    masked_replies: int  # truncated replies left out on their own (`mask_reply`)
    masked_for: str | None  # why the whole episode left the loss: "truncated_reply", "budget" or None


def guard(episode: Episode, truncated_replies: str = "train", budget_truncated: str = "train") -> Guarded:
    """The episode's `env_mask` with the guards applied (0 on the tokens that leave the loss)."""
    if truncated_replies not in TRUNCATED_REPLIES:
        raise ValueError(f"truncated_replies must be one of {TRUNCATED_REPLIES}, got {truncated_replies!r}")
    if budget_truncated not in BUDGET_TRUNCATED:
        raise ValueError(f"budget_truncated_episodes must be one of {BUDGET_TRUNCATED}, got {budget_truncated!r}")
    cut = [span for span, how in zip(episode.reply_spans, episode.stopped_by, strict=False) if how == "budget"]
    if cut and truncated_replies == "mask_episode":
        return Guarded([0] * len(episode.env_mask), 0, "truncated_reply")
    if episode.budget_truncated and budget_truncated == "mask_episode":
        return Guarded([0] * len(episode.env_mask), 0, "budget")
    if not cut or truncated_replies == "train":
        return Guarded(list(episode.env_mask), 0, None)
    mask = list(episode.env_mask)
    for start, end in cut:
        mask[start:end] = [0] * (end - start)
    return Guarded(mask, len(cut), None)


def dapo_penalty(length: int, max_length: int, buffer: int) -> float:
    """DAPO's soft overlong punishment of a response of `length` tokens (`buffer` = `L_cache`, 0: none)."""
    if buffer <= 0:
        return 0.0
    if buffer > max_length:
        raise ValueError(f"overlong_buffer_len ({buffer}) must be at most the length budget ({max_length})")
    expected = max_length - buffer
    if length <= expected:
        return 0.0
    if length <= max_length:
        return (expected - length) / buffer
    return -1.0


def episode_penalty(episode: Episode, buffer: int, length: str = "reply", max_completion_length: int = 0) -> float:
    """The episode's overlong penalty in [-1, 0] (see the module docstring for what `length` measures)."""
    if length not in OVERLONG_LENGTHS:
        raise ValueError(f"overlong_length must be one of {OVERLONG_LENGTHS}, got {length!r}")
    if buffer <= 0:
        return 0.0
    if length == "episode":
        if episode.budget_truncated:  # ended because the next turn would pass the budget: as if cut at L_max
            return dapo_penalty(max_completion_length, max_completion_length, buffer)
        return dapo_penalty(len(episode.completion_ids), max_completion_length, buffer)
    if not episode.reply_spans:
        return 0.0
    penalties = [dapo_penalty(end - start, episode.max_turn_tokens, buffer) for start, end in episode.reply_spans]
    return sum(penalties) / len(penalties)


def overlong_penalty(completions: list[object], overlong_penalty: list[float], **kwargs: object) -> list[float]:
    """The reward function the trainer adds with an overlong buffer: the rollout's `overlong_penalty` field
    (`episode_penalty` of each episode)."""
    return [float(p) for p in overlong_penalty]


def check_settings(args: Any) -> None:
    """Raises on guard settings of a `MultiTurnGRPOConfig` that are not among the choices or out of range."""
    for name, allowed in (
        ("truncated_replies", TRUNCATED_REPLIES),
        ("budget_truncated_episodes", BUDGET_TRUNCATED),
        ("overlong_length", OVERLONG_LENGTHS),
    ):
        if getattr(args, name) not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {getattr(args, name)!r}")
    budget = args.max_turn_tokens if args.overlong_length == "reply" else args.max_completion_length
    if args.overlong_buffer_len < 0 or (budget is not None and args.overlong_buffer_len > budget):
        raise ValueError(
            f"overlong_buffer_len must be in [0, {budget}] (the {args.overlong_length}'s budget), "
            f"got {args.overlong_buffer_len}"
        )


def guard_rollout(episodes: list[Episode], args: Any) -> tuple[list[Guarded], list[float]]:
    """Each episode's guarded env mask and overlong penalty under a `MultiTurnGRPOConfig`'s settings."""
    guarded = [guard(e, args.truncated_replies, args.budget_truncated_episodes) for e in episodes]
    penalty = [
        episode_penalty(e, args.overlong_buffer_len, args.overlong_length, args.max_completion_length or 0)
        for e in episodes
    ]
    return guarded, penalty


def counts(episodes: list[Episode], guarded: list[Guarded], penalty: list[float]) -> list[float]:
    """This process's counts for `shares` (summed over processes by the trainer)."""
    return [
        sum(len(e.stopped_by) for e in episodes),
        sum(e.replies_cut for e in episodes),
        sum(g.masked_replies for g in guarded),
        sum(g.masked_for == "truncated_reply" for g in guarded),
        sum(g.masked_for == "budget" for g in guarded),
        sum(penalty),
        len(episodes),
    ]


def shares(totals: list[float], penalised: bool) -> dict[str, float]:
    """The logged metrics from `counts` summed over processes: the shares of replies the reply budget cut
    and of those left out on their own (over all replies), of episodes left out for a cut reply or for the
    episode budget (over all episodes), and the mean overlong penalty (when it is on)."""
    replies, cut, masked, masked_cut, masked_budget, penalties, n = totals
    out = {
        "episode/truncated_replies": cut / max(replies, 1),
        "episode/masked_truncated_replies": masked / max(replies, 1),
        "episode/masked_truncated_episodes": masked_cut / max(n, 1),
        "episode/masked_budget_truncated": masked_budget / max(n, 1),
    }
    if penalised:
        out["episode/overlong_penalty"] = penalties / max(n, 1)
    return out
