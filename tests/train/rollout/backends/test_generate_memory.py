"""`hf_generate_fn` keeps each sampled token's logprob as it is drawn: the same numbers as from every
step's raw logits (`output_logits`), without holding batch x tokens x vocabulary floats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from agentgym_train.rollout.backends import hf_generate_fn

#: glibc's malloc with a fixed threshold: every block of 128 KiB or more is its own mapping, returned when freed,
#: so resident memory follows what is alive (not what freed memory the heap kept from earlier).
MEASURING_ENV = {
    **os.environ,
    "OMP_NUM_THREADS": "1",
    "MALLOC_MMAP_THRESHOLD_": "131072",
    "MALLOC_TRIM_THRESHOLD_": "0",
}
#: A model whose logits dominate memory: a 65,536-token vocabulary over a 32-wide single layer.
VOCAB, BATCH, TOKENS = 65536, 8, 128

_MODEL = """
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

def wide_vocab_model(vocab):
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, bos_token_id=None,
                         eos_token_id=0, pad_token_id=1)
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(50)  # logits of a few units, so that a repetition penalty moves them
    return model
"""


def _wide_vocab_model(vocab: int) -> torch.nn.Module:
    scope: dict = {}
    exec(_MODEL, scope)
    return scope["wide_vocab_model"](vocab)


@pytest.mark.parametrize("temperature", [0.7, 0.0])
def test_logprobs_equal_those_of_every_steps_raw_logits(temperature: float) -> None:
    """With a repetition penalty and min_p (logits processors and warpers that change the scores), the
    logprobs are still those of the raw logits / temperature: gathered from `output_logits` by hand."""
    model = _wide_vocab_model(512)
    kwargs = {"repetition_penalty": 1.3, "min_p": 0.05, "min_new_tokens": 12}
    contexts = [[5, 6, 7, 8], [9, 10], [11, 12, 13, 14, 15, 16]]
    torch.manual_seed(3)
    replies = hf_generate_fn(model, 1, [0], temperature=temperature, generation_kwargs=kwargs)(contexts, 12)

    from transformers import GenerationConfig

    width = max(map(len, contexts))
    ids = torch.tensor([[1] * (width - len(c)) + c for c in contexts])
    mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts])
    config = GenerationConfig(
        **kwargs,
        max_new_tokens=12,
        do_sample=temperature > 0,
        temperature=temperature or None,
        top_p=None,
        top_k=None,
        pad_token_id=1,
        eos_token_id=[0],
        return_dict_in_generate=True,
        output_logits=True,
        disable_compile=True,
    )
    torch.manual_seed(3)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    sampled = out.sequences[:, width:]
    scale = temperature or 1.0
    moved = 0.0
    for row, (tokens, logprobs) in enumerate(replies):
        assert tokens == sampled[row, : len(tokens)].tolist() and len(tokens) == 12
        expected = [
            float(torch.log_softmax(out.logits[t][row] / scale, dim=-1)[token]) for t, token in enumerate(tokens)
        ]
        assert logprobs == expected  # exactly: the same float32 arithmetic on the same raw logits
        with torch.no_grad():
            processed = _processed(model, ids, mask, row, tokens, scale)
        moved = max(moved, *(abs(a - b) for a, b in zip(logprobs, processed, strict=True)))
    # and not the processed scores' logprobs: the repetition penalty moves some of those
    assert moved > 0.01


def _processed(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, row: int, tokens: list, scale: float):
    """The logprobs of `tokens` after a 1.3 repetition penalty (what a processor placed last would see)."""
    from transformers import RepetitionPenaltyLogitsProcessor

    penalty = RepetitionPenaltyLogitsProcessor(1.3)
    sequence = torch.cat([ids[row], torch.tensor(tokens)])[None]
    full_mask = torch.cat([mask[row], torch.ones(len(tokens), dtype=torch.long)])[None]
    logits = model(sequence, attention_mask=full_mask).logits[0, ids.size(1) - 1 : -1]
    return [
        float(torch.log_softmax(penalty(sequence[:, : ids.size(1) + t], logits[t : t + 1]) / scale, -1)[0, token])
        for t, token in enumerate(tokens)
    ]


def test_generate_is_not_asked_for_every_steps_logits() -> None:
    model = _wide_vocab_model(256)
    seen = []
    original = model.generate

    def spy(*args, **kwargs):
        seen.append(kwargs["generation_config"])
        return original(*args, **kwargs)

    model.generate = spy
    hf_generate_fn(model, 1, [0], generation_kwargs={"repetition_penalty": 1.2})([[5, 6]], 4)
    assert len(seen) == 1 and not seen[0].output_logits and not seen[0].output_scores


_MEASURE = (
    _MODEL
    + """
import json, sys
from agentgym_train.rollout.backends import hf_generate_fn
from transformers import GenerationConfig

torch.set_num_threads(1)
mode, vocab, batch, tokens = sys.argv[1], *map(int, sys.argv[2:5])
model = wide_vocab_model(vocab)
contexts = [[5 + row, 6, 7] for row in range(batch)]
kwargs = {"repetition_penalty": 1.1, "min_new_tokens": tokens}

def run(n):
    if mode == "ours":
        return hf_generate_fn(model, 1, [0], temperature=1.0, generation_kwargs=kwargs)(contexts, n)
    config = GenerationConfig(**kwargs, max_new_tokens=n, do_sample=True, pad_token_id=1, eos_token_id=[0],
                              return_dict_in_generate=True, output_logits=True, disable_compile=True)
    with torch.no_grad():
        return model.generate(input_ids=torch.tensor(contexts), generation_config=config)

def resident(key):  # kB -> bytes, from /proc/self/status
    return 1024 * int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith(key)))

kwargs["min_new_tokens"] = 2
run(2)  # warm up: one step's temporaries have been made before the baseline
open("/proc/self/clear_refs", "w").write("5")  # the peak (VmHWM) restarts from the resident size now
before = resident("VmRSS:")
kwargs["min_new_tokens"] = tokens
out = run(tokens)
generated = len(out[0][0]) if mode == "ours" else out.sequences.size(1) - 3
print(json.dumps({"grew_bytes": resident("VmHWM:") - before, "generated": generated}))
"""
)


def _peak_growth(mode: str) -> dict:
    cmd = [sys.executable, "-c", textwrap.dedent(_MEASURE), mode, str(VOCAB), str(BATCH), str(TOKENS)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=MEASURING_ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak from /proc (Linux)")
def test_peak_memory_grows_with_batch_times_vocabulary_not_with_tokens() -> None:
    """Each mode runs in a fresh process; its peak resident memory over a 128-token generation (VmHWM, reset
    just before) is
    compared with every step's float32 logits (8 x 128 x 65,536 x 4 bytes = 256 MiB)."""
    every_step = BATCH * TOKENS * VOCAB * 4
    one_step = BATCH * VOCAB * 4  # 2 MiB
    control = _peak_growth("output_logits")
    ours = _peak_growth("ours")
    assert control["generated"] == ours["generated"] == TOKENS
    # the measurement sees the logits when they are kept (it can fail) ...
    assert control["grew_bytes"] > 0.8 * every_step, control
    # ... and they are not: a few steps' rows and the model's buffers, far below every step's
    assert ours["grew_bytes"] < 16 * one_step, ours
