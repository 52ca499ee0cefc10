"""A multi-turn sampler that keeps the KV cache between turns.

`hf_generate_fn` (`generate`) re-reads every episode's whole history at each turn (a fresh `generate` call).
`CachedSampler` remembers what each episode's sequence already fed through the model: at the next
turn only the new tokens (the last sampled token and the rendered observation) are run, appended
to the cache. Episodes of one batch grow by different amounts, so the cache gets masked holes; the
attention mask hides them and explicit position ids count only real tokens, so every token sees
exactly the context and positions it would in one unpadded forward pass (what the trainer
recomputes; `tests/train/rollout/test_rollout.py` checks the logprobs agree).

Holes are repacked between turns: when more than a quarter of the cache's columns are holes, each
row's real columns are moved together (right-aligned, order kept), so a cache is as wide as its
longest episode, not as the sum of every turn's longest observation and reply. Positions are baked
into the cached keys, so moving columns changes nothing the model computes.

Sampling runs on the model's device and in the model's dtype (weights and cache as loaded, e.g.
bfloat16): per decode step only that step's scores become float32 (rows x vocabulary, for the
sampled token's logprob), and only the batch's sampled ids and their logprobs move to the host.

Stop strings (`stop`, per context): a reply stops once its newest tokens hold one of its stop
strings. The engine then keeps only the ids before the stop (`agentgym_train.rollout.stops`), so the
next context extends only part of what was fed: the cache rolls that row back to the common prefix
(the dropped columns become holes), and only the rest is fed.

The cache's full-attention layers grow in place (`agentgym_train.rollout.backends.growing_cache`): a decode
step writes one column instead of copying the whole cache.

Use it as the engine's `TurnGenerator` for one `RolloutEngine.run` (or a sequence of runs): a call
whose contexts do not all share a prefix with the previous call's sequences starts over with a fresh
cache.

Async rollouts (`agentgym_train.rollout.asynchronous`) call it with whichever episodes are ready, so rows
join and leave between calls: with `keep_unmatched` set, the rows of episodes that sit out a call are
parked (copied aside, then put back with holes for the columns the call added) instead of dropped, an
episode seen for the first time gets a new row, and each context is matched to the row its episode owns
(the row whose last call's context it extends); the engine `retire`s an episode's row when it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from transformers.cache_utils import DynamicLayer

from agentgym_train.rollout.backends.growing_cache import GrowingLayer, growing_cache
from agentgym_train.rollout.backends.protocol import Reply
from agentgym_train.rollout.stops import StopStrings


class CachedSampler:
    """Sample replies for a batch of growing contexts, reusing the KV cache across turns.

    Args:
        model: A causal LM (transformers; `cache=` / `position_ids=` forward arguments).
        pad_token_id: Fills holes (never attended to).
        eos_token_ids: Tokens that end a reply.
        temperature: Sampling temperature (0: greedy). Logprobs are those of the tempered distribution.
        top_k, top_p: Optional truncation of the sampling distribution (logprobs stay untruncated, as TRL's).
    """

    def __init__(
        self,
        model: Any,
        pad_token_id: int,
        eos_token_ids: Sequence[int],
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float = 1.0,
    ):
        self.model = model
        self.pad_token_id = pad_token_id
        self.eos = torch.tensor(list(eos_token_ids))
        self.temperature = temperature
        self.top_k = top_k or None
        self.top_p = top_p
        #: Given whether this process still decodes a reply, whether any process does. Sharded training
        #: sets it to an all-reduce (`agentgym_train.rollout.backends.lockstep`) so every process makes the same decode
        #: steps; it is called before each decode step's forward pass, never on the last step.
        self.any_live: Callable[[bool], bool] | None = None
        #: Park the rows of episodes that sit out a call instead of dropping them (async rollouts set it).
        self.keep_unmatched = False
        #: Let async rollouts decode continuously (`StreamingGenerator`: rows join and leave between decode
        #: steps); False: they call the sampler per batch of ready episodes, as lockstep does.
        self.continuous = True
        self._reset()
        self.open_stream()

    def _reset(self) -> None:
        self.cache: Any = None
        self.mask: torch.Tensor | None = None  # (rows, cached columns) 1 = real token
        self.fed: list[list[int]] = []  # per row, the real tokens in the cache, in order
        self.asked: list[int] = []  # per row, the length of its context at its last call
        self.retired: set[int] = set()  # rows to drop at the next call (their episodes ended)

    # ---- the TurnGenerator interface -------------------------------------------------------------------
    def __call__(
        self, contexts: list[list[int]], max_new_tokens: int, stop: Sequence[StopStrings | None] | None = None
    ) -> list[Reply]:
        device = next(self.model.parameters()).device
        parked = None
        if self.keep_unmatched and self.cache is not None and self._parkable():
            parked = self._park(contexts)  # rows of episodes not in this call wait aside
        else:
            matched = self._match(contexts)
            self.retired = set()
            if matched is None:
                self._reset()
                self.fed = [[] for _ in contexts]
            else:
                rows, keep = matched
                self.cache.batch_select_indices(torch.tensor(rows, device=device))
                self.mask = self.mask[rows]
                self.fed = [self.fed[r] for r in rows]
                self._roll_back(keep)
                self._compact()
        pending = [list(c[len(self.fed[i]) :]) for i, c in enumerate(contexts)]
        self.asked = [len(c) for c in contexts]
        with torch.no_grad():
            logits = self._feed(pending, device)
            replies = self._decode(logits, max_new_tokens, device, list(stop) if stop else [None] * len(contexts))
        if parked is not None:
            self._unpark(*parked)
        return replies

    # ---- rows that join and leave between calls (async rollouts) -----------------------------------------
    def retire(self, sequence: list[int]) -> None:
        """Drop, at the next call, the row of the episode whose final token ids are `sequence`."""
        owner = self._owners([sequence])[0]
        if owner >= 0:
            self.retired.add(owner)

    def _parkable(self) -> bool:
        layers = getattr(self.cache, "layers", None)
        return bool(layers) and all(type(x) in (DynamicLayer, GrowingLayer) and x.keys is not None for x in layers)

    def _owners(self, contexts: list[list[int]]) -> list[int]:
        """Per context, the row its episode owns (the row whose last context it extends, and of those the one
        sharing the most tokens with it), or -1 for an episode with no row yet."""
        owners, taken = [], set(self.retired)
        for context in contexts:
            best, shared = -1, -1
            for row, fed in enumerate(self.fed):
                n = self.asked[row]
                if row in taken or not 0 < n < len(context) or context[n - 1] != fed[n - 1] or context[:n] != fed[:n]:
                    continue
                common = _common_prefix(context, fed)
                if common > shared:
                    best, shared = row, common
            if best >= 0:
                taken.add(best)
            owners.append(best)
        return owners

    def _park(
        self, contexts: list[list[int]]
    ) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor, list, list]:
        """Make the cache hold the contexts' rows, in order (a new, empty row where an episode has none);
        return the other rows that are not retired (their layers' keys and values, mask, fed, asked)."""
        owners = self._owners(contexts)
        rows = len(self.fed)
        kept = [r for r in range(rows) if r not in set(owners) and r not in self.retired]
        self.retired = set()
        aside = torch.tensor(kept, dtype=torch.long, device=self.mask.device)
        index = torch.tensor([r if r >= 0 else rows for r in owners], dtype=torch.long, device=self.mask.device)
        fresh = min(owners) < 0  # an episode's first call: an empty row (all holes) joins
        parked_layers = []
        for layer in self.cache.layers:
            parked_layers.append((layer.keys[aside.to(layer.keys.device)], layer.values[aside.to(layer.keys.device)]))
            keys, values = layer.keys, layer.values
            if fresh:
                keys, values = torch.cat([keys, keys[:1] * 0]), torch.cat([values, values[:1] * 0])
            _hold(layer, keys[index.to(keys.device)], values[index.to(keys.device)])
        parked = (parked_layers, self.mask[aside], [self.fed[r] for r in kept], [self.asked[r] for r in kept])
        mask = torch.cat([self.mask, self.mask[:1] * 0]) if fresh else self.mask
        self.mask = mask[index]
        self.fed = [self.fed[r] if r >= 0 else [] for r in owners]
        self._roll_back([min(_common_prefix(c, f), len(c) - 1) for c, f in zip(contexts, self.fed, strict=True)])
        self._compact()
        return parked

    def _unpark(
        self, layers: list[tuple[torch.Tensor, torch.Tensor]], mask: torch.Tensor, fed: list, asked: list
    ) -> None:
        """Put parked rows back after the call's rows (holes pad the narrower side on the left)."""
        if not fed:
            return
        width = max(self.mask.size(1), mask.size(1))
        for layer, (keys, values) in zip(self.cache.layers, layers, strict=True):
            _hold(
                layer,
                torch.cat([_pad_left(layer.keys, width), _pad_left(keys, width)]),
                torch.cat([_pad_left(layer.values, width), _pad_left(values, width)]),
            )
        self.mask = torch.cat(
            [F.pad(self.mask, (width - self.mask.size(1), 0)), F.pad(mask, (width - mask.size(1), 0))]
        )
        self.fed += fed
        self.asked += asked

    def _match(self, contexts: list[list[int]]) -> tuple[list[int], list[int]] | None:
        """Per context, in order, a cache row and how many of its fed tokens the context shares (at least
        one token of each context is left to feed); None when some context shares no prefix with any row.

        A row that the context extends is taken at once; otherwise (the engine cut the row's last reply
        at a stop string or the budget) the remaining row with the longest common prefix.
        """
        if self.cache is None:
            return None
        rows, keep, start = [], [], 0
        for context in contexts:
            best, shared = -1, 0
            for r in range(start, len(self.fed)):
                fed = self.fed[r]
                if len(context) > len(fed) and context[: len(fed)] == fed:
                    best, shared = r, len(fed)
                    break
                common = min(_common_prefix(context, fed), len(context) - 1)
                if common > shared:
                    best, shared = r, common
            if best < 0:
                return None
            rows.append(best)
            keep.append(shared)
            start = best + 1
        return rows, keep

    def _roll_back(self, keep: list[int]) -> None:
        """Keep each row's first `keep[row]` fed tokens: the cache columns of the others become holes."""
        for row, n in enumerate(keep):
            if n < len(self.fed[row]):
                columns = self.mask[row].nonzero()[:, 0]  # the row's real columns, in the order fed
                self.mask[row, columns[n:]] = 0
                self.fed[row] = self.fed[row][:n]

    def _compact(self, max_hole_share: float = 0.25) -> None:
        """Repack each row's real cache columns to the right when holes exceed `max_hole_share`."""
        mask = self.mask
        width = int(mask.sum(dim=1).max())
        layers = getattr(self.cache, "layers", None)
        if mask.size(1) - width <= max_hole_share * mask.size(1) or not layers:
            return
        if any(type(layer) not in (DynamicLayer, GrowingLayer) or layer.keys is None for layer in layers):
            return  # sliding-window or other layer kinds keep their own layout
        # a stable sort puts each row's holes first and its real columns after, in their order
        index = torch.sort(mask, dim=1, stable=True).indices[:, -width:]
        for layer in layers:
            gather = index.to(layer.keys.device)[:, None, :, None]
            keys = layer.keys.gather(2, gather.expand(-1, layer.keys.size(1), -1, layer.keys.size(3)))
            values = layer.values.gather(2, gather.expand(-1, layer.values.size(1), -1, layer.values.size(3)))
            if isinstance(layer, GrowingLayer):
                layer.hold(keys, values)  # frees its buffer now
            else:  # transformers' DynamicCache (e.g. the benchmark's copying arm)
                layer.keys, layer.values = keys, values
        self.mask = mask.gather(1, index)

    # ---- continuous batching: rows join and leave between decode steps (`StreamingGenerator`) -----------
    def streaming(self) -> bool:
        """Whether async rollouts may decode continuously with this sampler (`continuous` set, no
        `any_live` collective, and full-attention layers only, whose rows can be moved)."""
        if not self.continuous or self.any_live is not None:
            return False
        return all(type(layer) is GrowingLayer for layer in growing_cache(self.model.config).layers)

    def open_stream(self) -> None:
        self.close_stream()
        #: This stream's joins (and of those, joins while other rows were decoding), decode steps, prefills.
        self.stream_stats = {"joins": 0, "joins_mid_decode": 0, "steps": 0, "prefills": 0}

    def close_stream(self) -> None:
        self._reset()
        self._rows: list[_Row] = []  # per cache row (all decoding), in order
        self._joining: list[tuple[Hashable, _Row, list[int]]] = []  # joined, prefilled at the next step
        self._parked: dict[Hashable, _Parked] = {}  # per episode whose reply came back: its row, dense

    def decoding(self) -> int:
        return len(self._rows) + len(self._joining)

    def join(self, key: Hashable, context: list[int], max_new_tokens: int, stop: StopStrings | None) -> None:
        self.stream_stats["joins"] += 1
        self.stream_stats["joins_mid_decode"] += bool(self._rows)
        self._joining.append((key, _Row(key, max(1, max_new_tokens), stop), list(context)))

    def leave(self, key: Hashable) -> None:
        self._parked.pop(key, None)

    def step(self) -> list[tuple[Hashable, Reply]]:
        """One decode step: the running rows feed their last token, the joiners their prompts (a prefill
        forward of their own), every row samples one token, and the rows whose reply ended leave."""
        device = next(self.model.parameters()).device
        self.stream_stats["steps"] += 1
        parts = []
        with torch.no_grad():
            if self._rows:
                for row, state in enumerate(self._rows):
                    self.fed[row].append(state.tokens[-1])
                feed = torch.tensor([[state.tokens[-1]] for state in self._rows])
                parts.append(self._forward(feed, torch.ones_like(feed), device))
            if self._joining:
                parts.append(self._prefill(device))
            token, logp = self._sample(torch.cat(parts))
        ended = torch.isin(token, self.eos.to(token.device)).tolist()
        token_host, logp_host = token.tolist(), logp.tolist()
        out, stay = [], []
        for row, state in enumerate(self._rows):
            state.tokens.append(token_host[row])
            state.logprobs.append(logp_host[row])
            if (
                ended[row]
                or len(state.tokens) >= state.budget
                or (state.stop is not None and state.stop.completed(state.tokens))
            ):
                out.append((state.key, Reply(state.tokens, state.logprobs)))
                self._parked[state.key] = self._park_row(row)
            else:
                stay.append(row)
        if len(stay) < len(self._rows):
            self._keep_rows(stay)
        return out

    def _prefill(self, device: torch.device) -> torch.Tensor:
        """Feed the joiners' contexts in a batch of their own (their parked rows where they have one), then
        append their rows to the running ones; returns the joiners' last logits."""
        joining, self._joining = self._joining, []
        self.stream_stats["prefills"] += 1
        running = (self.cache, self.mask, self.fed)
        parked = [self._parked.pop(key, None) for key, _, _ in joining]
        width = max([p.mask.size(1) for p in parked if p is not None] + [0])
        self.cache, self.mask = None, None
        if width:
            some = next(p for p in parked if p is not None)
            self.cache = growing_cache(self.model.config)
            for index, layer in enumerate(self.cache.layers):
                keys, values = some.layers[index]
                empty = (keys[:, :, :0], values[:, :, :0])
                rows = [p.layers[index] if p is not None else empty for p in parked]
                keys = torch.cat([_pad_left(k, width) for k, _ in rows])
                values = torch.cat([_pad_left(v, width) for _, v in rows])
                layer.lazy_initialization(keys, values)
                _hold(layer, keys, values)
            masks = [p.mask if p is not None else some.mask[:, :0] for p in parked]
            self.mask = torch.cat([F.pad(m, (width - m.size(1), 0)) for m in masks])
        self.fed = [list(p.fed) if p is not None else [] for p in parked]
        contexts = [context for _, _, context in joining]
        if width:
            self._roll_back([min(_common_prefix(c, f), len(c) - 1) for c, f in zip(contexts, self.fed, strict=True)])
        logits = self._feed([c[len(f) :] for c, f in zip(contexts, self.fed, strict=True)], device)
        joined = (self.cache, self.mask, self.fed)
        self.cache, self.mask, self.fed = running
        if self.cache is None:
            self.cache, self.mask, self.fed = joined
        else:  # the joiners' rows after the running ones (holes pad the narrower side on the left)
            width = max(self.mask.size(1), joined[1].size(1))
            for layer, other in zip(self.cache.layers, joined[0].layers, strict=True):
                _hold(
                    layer,
                    torch.cat([_pad_left(layer.keys, width), _pad_left(other.keys, width)]),
                    torch.cat([_pad_left(layer.values, width), _pad_left(other.values, width)]),
                )
            self.mask = torch.cat([F.pad(m, (width - m.size(1), 0)) for m in (self.mask, joined[1])])
            self.fed = self.fed + joined[2]
            self._compact()
        self._rows += [state for _, state, _ in joining]
        return logits

    def _park_row(self, row: int) -> _Parked:
        """A copy of one row's real cache columns (no holes: positions are baked into the keys)."""
        columns = self.mask[row].nonzero()[:, 0]
        layers = []
        for layer in self.cache.layers:
            at = columns.to(layer.keys.device)
            layers.append((layer.keys[row : row + 1, :, at], layer.values[row : row + 1, :, at]))
        return _Parked(layers, self.mask[row : row + 1, columns], list(self.fed[row]))

    def _keep_rows(self, rows: list[int]) -> None:
        """Keep only these cache rows (the others' replies ended)."""
        self._rows = [self._rows[r] for r in rows]
        if not rows:
            self.cache, self.mask, self.fed = None, None, []
            return
        self.cache.batch_select_indices(torch.tensor(rows, device=self.mask.device))
        self.mask = self.mask[rows]
        self.fed = [self.fed[r] for r in rows]
        self._compact()

    # ---- model calls ----------------------------------------------------------------------------------
    def _forward(self, ids: torch.Tensor, new_mask: torch.Tensor, device: torch.device) -> torch.Tensor:
        """Run new columns `ids` (with their 0/1 mask) after the cache; return the last column's logits."""
        new_mask = new_mask.to(device)  # the mask stays on the model's device
        full = new_mask if self.mask is None else torch.cat([self.mask, new_mask], dim=1)
        # positions count real tokens only, so holes do not stretch distances
        positions = (full.cumsum(dim=1) - 1).clamp(min=0)[:, -ids.size(1) :]
        if self.cache is None:
            self.cache = growing_cache(self.model.config)
        out = self.model(
            input_ids=ids.to(device),
            attention_mask=full,
            position_ids=positions,
            cache=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        self.mask = full
        return out.logits[:, -1]  # in the model's dtype; `_sample` takes one float32 row per step

    def _feed(self, pending: list[list[int]], device: torch.device) -> torch.Tensor:
        width = max(len(p) for p in pending)
        ids = torch.full((len(pending), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(pending), width), dtype=torch.long)
        for row, tokens in enumerate(pending):
            if tokens:
                ids[row, width - len(tokens) :] = torch.tensor(tokens)
                mask[row, width - len(tokens) :] = 1
            self.fed[row] += tokens
        return self._forward(ids, mask, device)

    def _sample(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw one token per row from (rows, vocabulary) logits in the model's dtype; return it and its
        float32 logprob under the tempered, untruncated distribution.

        The only float32 tensors are this step's scores (rows x vocabulary) and, with top-k / top-p,
        their truncated copy: the model, its cache and earlier steps stay as they are.
        """
        scores = logits.float()
        if self.temperature > 0:
            scores /= self.temperature
        log_z = torch.logsumexp(scores, dim=-1)
        if self.temperature <= 0:
            token = scores.argmax(dim=-1)
        else:
            weights = scores
            if self.top_k:
                kth = torch.topk(weights, min(self.top_k, weights.size(-1)), dim=-1).values[:, -1:]
                weights = weights.masked_fill(weights < kth, -torch.inf)
            if self.top_p < 1.0:
                ordered, order = weights.sort(dim=-1, descending=True)
                drop = ordered.softmax(-1).cumsum(-1) - ordered.softmax(-1) > self.top_p
                weights = weights.scatter(-1, order, ordered.masked_fill(drop, -torch.inf))
            token = torch.multinomial(weights.softmax(dim=-1), 1)[:, 0]
        return token, scores.gather(-1, token[:, None])[:, 0] - log_z

    def _decode(
        self, logits: torch.Tensor, max_new_tokens: int, device: torch.device, stops: list[StopStrings | None]
    ) -> list[Reply]:
        n = logits.size(0)
        tokens: list[list[int]] = [[] for _ in range(n)]
        logprobs: list[list[float]] = [[] for _ in range(n)]
        eos = self.eos.to(logits.device)
        live = torch.ones(n, dtype=torch.bool)
        for step in range(max_new_tokens):
            token, logp = self._sample(logits)
            ended = torch.isin(token, eos).cpu()
            token_host, logp_host = token.tolist(), logp.tolist()  # B numbers to the host, once a step
            rows = live.nonzero()[:, 0].tolist()
            for row in rows:
                tokens[row].append(token_host[row])
                logprobs[row].append(logp_host[row])
                if stops[row] and stops[row].completed(tokens[row]):
                    ended[row] = True
            live &= ~ended
            local = bool(live.any())
            if step == max_new_tokens - 1 or not (self.any_live(local) if self.any_live else local):
                break
            # feed the sampled tokens of live rows (finished rows get a masked hole)
            feed = torch.where(live.to(token.device), token, torch.full_like(token, self.pad_token_id))[:, None]
            for row in live.nonzero()[:, 0].tolist():
                self.fed[row].append(token_host[row])
            logits = self._forward(feed, live.long()[:, None], device)
        return [Reply(ids, logps) for ids, logps in zip(tokens, logprobs, strict=True)]


@dataclass
class _Row:
    """A reply being decoded continuously: its episode, budget, stop strings, and what it sampled so far."""

    key: Hashable
    budget: int
    stop: StopStrings | None
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)


@dataclass
class _Parked:
    """An episode's cache row between its replies: per layer (keys, values) of its real columns, their mask
    (all ones) and the tokens they hold."""

    layers: list[tuple[torch.Tensor, torch.Tensor]]
    mask: torch.Tensor
    fed: list[int]


def _hold(layer: Any, keys: torch.Tensor, values: torch.Tensor) -> None:
    if isinstance(layer, GrowingLayer):
        layer.hold(keys, values)
    else:
        layer.keys, layer.values = keys, values


def _pad_left(states: torch.Tensor, width: int) -> torch.Tensor:
    """(rows, heads, columns, dim) states with hole columns before them, to `width` columns."""
    return F.pad(states, (0, 0, width - states.size(-2), 0)) if states.size(-2) < width else states


def _common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of `a` and `b` (binary search over slice comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low
