"""`GrowingLayer`: the same keys and values as transformers' `DynamicLayer`, without a copy per append."""

from __future__ import annotations

import random
from pathlib import Path

import torch
from transformers.cache_utils import DynamicLayer

from agentgym_train.rollout.backends.growing_cache import GrowingLayer, growing_cache


def _columns(batch: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch, 2, n, 4), torch.randn(batch, 2, n, 3)


def test_growing_layer_holds_what_a_dynamic_layer_holds_through_appends_selects_crops_and_repacks() -> None:
    torch.manual_seed(0)
    rng = random.Random(0)
    grown, plain = GrowingLayer(), DynamicLayer()
    batch = 5
    for step in range(300):
        op = rng.random()
        if op < 0.1 and batch > 1 and plain.get_seq_length():
            rows = torch.tensor(sorted(rng.sample(range(batch), rng.randint(1, batch))))
            grown.batch_select_indices(rows)
            plain.batch_select_indices(rows)
            batch = len(rows)
        elif op < 0.15 and plain.get_seq_length() > 2:
            cut = -rng.randint(1, plain.get_seq_length() - 1)
            grown.crop(cut)
            plain.crop(cut)
        elif op < 0.2 and plain.get_seq_length():
            # the sampler's repacking: a gather along the columns replaces the tensors
            index = torch.stack([torch.randperm(plain.get_seq_length()) for _ in range(batch)])[:, None, :, None]
            plain.keys = plain.keys.gather(2, index.expand(-1, 2, -1, 4))
            plain.values = plain.values.gather(2, index.expand(-1, 2, -1, 3))
            if rng.random() < 0.5:
                grown.hold(
                    grown.keys.gather(2, index.expand(-1, 2, -1, 4)), grown.values.gather(2, index.expand(-1, 2, -1, 3))
                )
            else:  # replaced without telling the layer: it adopts them at the next update
                grown.keys = grown.keys.gather(2, index.expand(-1, 2, -1, 4))
                grown.values = grown.values.gather(2, index.expand(-1, 2, -1, 3))
        else:
            keys, values = _columns(batch, rng.choice([1, 1, 1, 7, 40]))
            got = grown.update(keys, values)
            want = plain.update(keys, values)
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), step
        assert grown.get_seq_length() == plain.get_seq_length()
        assert torch.equal(grown.keys, plain.keys) and torch.equal(grown.values, plain.values), step


def test_appending_one_column_at_a_time_reallocates_rarely_and_keeps_little_spare_room() -> None:
    layer = GrowingLayer()
    allocations, last = 0, None
    for _ in range(2000):
        layer.update(*_columns(3, 1))
        if layer._buffers[0].data_ptr() != last:
            allocations, last = allocations + 1, layer._buffers[0].data_ptr()
    # capacities 65, 130, 195, 260, then a quarter more each time: 14 buffers where a DynamicLayer makes 2,000
    assert layer.get_seq_length() == 2000 and allocations == 14
    assert layer._buffers[0].size(-2) <= 1.25 * 2000


def test_selecting_rows_frees_the_buffer_at_once() -> None:
    layer = GrowingLayer()
    layer.update(*_columns(4, 100))
    buffer = layer._buffers[0]
    layer.batch_select_indices(torch.tensor([0, 2]))
    assert layer._buffers is None and layer.keys.size(0) == 2
    assert torch.equal(layer.keys, buffer[[0, 2], :, :100])


def test_a_model_decodes_the_same_logits_with_a_growing_cache(tiny_babyai: Path) -> None:
    from transformers import AutoModelForCausalLM, DynamicCache

    model = AutoModelForCausalLM.from_pretrained(tiny_babyai).eval()
    torch.manual_seed(1)
    ids = torch.randint(3, model.config.vocab_size, (2, 30))
    logits = {}
    for name, cache in (("dynamic", DynamicCache(config=model.config)), ("growing", growing_cache(model.config))):
        assert name == "dynamic" or all(type(layer) is GrowingLayer for layer in cache.layers)
        with torch.no_grad():
            steps = [model(input_ids=ids[:, :20], cache=cache, use_cache=True).logits[:, -1]]
            for k in range(20, 30):
                steps.append(model(input_ids=ids[:, k : k + 1], cache=cache, use_cache=True).logits[:, -1])
        logits[name] = torch.stack(steps)
    torch.testing.assert_close(logits["growing"], logits["dynamic"])
