"""`agentgym plan`: model sizes from configs, DeepSpeed's accounting, sharding, and measured CPU peaks."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentgym_train.cli import main
from agentgym_train.plan import (
    DEFAULTS,
    GIB,
    KNOWN_MODELS,
    activation_bytes,
    model_config,
    model_shape,
    plan,
    sharding_of,
)

SEVEN_B = "Qwen/Qwen2.5-7B-Instruct"
POLICY_ONLY = {"model": SEVEN_B, "beta": 0.0, "use_vllm": True, "vllm_mode": "server", "bf16": True}


def _qwen2_parameters(h: int, i: int, layers: int, heads: int, kv_heads: int, vocab: int, tied: bool) -> int:
    """Qwen2 by hand: q/k/v with biases, o, the SwiGLU MLP, two RMSNorms per layer, a final norm, embeddings."""
    kv = kv_heads * (h // heads)
    per_layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * i + 2 * h
    return layers * per_layer + h + vocab * h * (1 if tied else 2)


@pytest.mark.parametrize(
    ("hub_id", "published"),
    [("Qwen/Qwen2.5-0.5B-Instruct", 0.49e9), ("Qwen/Qwen2.5-3B-Instruct", 3.09e9), (SEVEN_B, 7.61e9)],
)
def test_known_qwen_sizes_match_the_architecture_by_hand_and_the_published_counts(
    hub_id: str, published: float
) -> None:
    numbers = KNOWN_MODELS[hub_id]
    shape = model_shape(model_config(hub_id), hub_id)
    expected = _qwen2_parameters(
        numbers["hidden_size"],
        numbers["intermediate_size"],
        numbers["num_hidden_layers"],
        numbers["num_attention_heads"],
        numbers["num_key_value_heads"],
        numbers["vocab_size"],
        numbers["tie_word_embeddings"],
    )
    assert shape.parameters == expected
    assert abs(shape.parameters - published) < 0.01e9  # Qwen's model cards: 0.49B, 3.09B, 7.61B
    assert shape.largest_module_parameters == numbers["vocab_size"] * numbers["hidden_size"]  # the embeddings
    assert shape.root_parameters + shape.num_hidden_layers * shape.layer_parameters == shape.parameters


def test_local_model_sizes_equal_the_loaded_models(tiny_babyai: Path, smollm2: Path) -> None:
    from agentgym_train.tiny import count_parameters, load_model

    for path in (tiny_babyai, smollm2):
        shape = model_shape(model_config(str(path)))
        assert shape.parameters == count_parameters(load_model(path)[0])


def test_an_unknown_model_without_a_local_config_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no config for model 'someone/unknown-13B'.*Qwen/Qwen2\.5-7B-Instruct"):
        model_config("someone/unknown-13B")


def test_defaults_are_the_trainers_and_pipelines() -> None:
    from agentgym_train.pipeline import PipelineConfig
    from agentgym_train.trainers.ppo import MultiTurnPPOConfig

    fields = {f.name: f for cls in (MultiTurnPPOConfig, PipelineConfig) for f in dataclasses.fields(cls)}
    for key, value in DEFAULTS.items():
        assert fields[key].default == value, key


def test_accelerate_configs_name_their_sharding(tmp_path: Path) -> None:
    assert [sharding_of(name) for name in ("ddp", "zero2", "zero3", "fsdp", None)] == [
        "ddp",
        "zero2",
        "zero3",
        "fsdp",
        "ddp",
    ]
    offload = tmp_path / "offload.yaml"
    offload.write_text(
        "distributed_type: DEEPSPEED\ndeepspeed_config: {zero_stage: 3, offload_optimizer_device: cpu}\n"
    )
    with pytest.raises(ValueError, match="offload_optimizer_device=cpu"):
        sharding_of(offload)


def _deepspeed_gpu_bytes(stage: int, total: int, largest: int, gpus: int) -> int:
    """DeepSpeed's estimators without offload: its own functions when it is installed, else their documented
    formulas (deepspeed 0.19: ZeRO-2 2P + 18P/N; ZeRO-3 4L + 18P/N)."""
    try:
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
        from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs
    except ImportError:
        return 2 * total + int(18 * total / gpus) if stage == 2 else 4 * largest + int(18 * total / gpus)
    if stage == 2:
        return estimate_zero2_model_states_mem_needs(total, num_gpus_per_node=gpus, cpu_offload=False)[1]
    return estimate_zero3_model_states_mem_needs(
        total, largest, num_gpus_per_node=gpus, cpu_offload=False, cpu_offload_params=False
    )[1]


@pytest.mark.parametrize("stage", [2, 3])
@pytest.mark.parametrize("gpus", [1, 8, 64])
def test_zero_model_states_agree_with_deepspeeds_estimator(stage: int, gpus: int) -> None:
    result = plan(POLICY_ONLY, gpus, 80, f"zero{stage}", overhead_gib=0)
    policy = sum(b for part, b, _ in result.states if part.startswith("policy"))
    shape = result.model
    expected = _deepspeed_gpu_bytes(stage, shape.parameters, shape.largest_module_parameters, gpus)
    assert abs(policy - expected) <= 8  # integer division per part


def test_ddp_states_by_hand() -> None:
    """fp32 (no bf16): 4 B weights + 4 gradients + 8 AdamW; bf16: half; more than one GPU adds DDP's buckets."""
    phi = plan(POLICY_ONLY, 1, 80).model.parameters
    for bf16, gpus, per_parameter in ((False, 1, 16), (True, 1, 8), (True, 2, 10), (False, 4, 20)):
        result = plan({**POLICY_ONLY, "bf16": bf16}, gpus, 80, overhead_gib=0)
        assert sum(b for _, b, _ in result.states) == per_parameter * phi


def test_fsdp_shards_the_trained_states_and_the_reference() -> None:
    one, eight = (plan({**POLICY_ONLY, "beta": 0.04}, n, 80, "fsdp", overhead_gib=0) for n in (1, 8))
    parts = {p: b for p, b, _ in eight.states}
    phi = eight.model.parameters
    assert parts["policy weights"] == 4 * phi // 8 and parts["policy optimizer"] == 8 * phi // 8
    assert parts["reference model"] == 2 * phi // 8
    sharded = sum(b for p, b, _ in one.states if p != "policy gathered units")
    assert sum(b for p, b, _ in eight.states if p != "policy gathered units") * 8 == pytest.approx(sharded, rel=1e-6)


def test_reference_critic_lora_and_vllm_parts() -> None:
    base = {**POLICY_ONLY, "use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.5}
    parts = {p for p, _, _ in plan(base, 8, 80, "zero3").states}
    assert "reference model" not in parts and not any(p.startswith("critic") for p in parts)
    with pytest.raises(ValueError, match="full critic does not run under DeepSpeed"):  # as the trainer refuses it
        plan({**base, "algorithm": "ppo"}, 8, 80, "zero3")
    result = plan({**base, "beta": 0.001, "algorithm": "ppo"}, 8, 80, "fsdp")
    parts = {p: b for p, b, _ in result.states}
    phi, shape = result.model.parameters, result.model
    assert parts["reference model"] == 2 * phi // 8
    critic_params = phi - shape.lm_head_parameters + shape.hidden_size + 1  # the LM head becomes a value head
    assert parts["critic weights"] == pytest.approx(parts["policy weights"] * critic_params / phi, rel=1e-6)
    vllm = [b for p, b, _ in result.train if p == "vLLM reservation"]
    assert vllm == [int(0.5 * 80 * GIB)]
    asleep = plan({**base, "vllm_enable_sleep_mode": True}, 8, 80, "zero3")
    assert not any(p == "vLLM reservation" for p, _, _ in asleep.train)
    assert [b for p, b, _ in asleep.rollout] == vllm
    lora = plan({**base, "lora_r": 16, "beta": 0.001}, 1, 80)
    trainable = lora.model.lora_parameters(16)
    h, i, layers = shape.hidden_size, shape.intermediate_size, shape.num_hidden_layers
    # each linear layer's A (in x r) and B (r x out): q, k and v (512 = 4 KV heads x 128), o, gate and up, down
    assert trainable == 16 * layers * ((h + h) + 2 * (h + 512) + (h + h) + 2 * (h + i) + (i + h))
    assert "reference model" not in {p for p, _, _ in lora.states}  # the adapter, disabled, is the reference
    shared = {p for p, _, _ in plan({**base, "lora_r": 16, "algorithm": "ppo", "critic": "lora"}, 1, 80).states}
    assert "critic adapter" in shared and "critic base" not in shared  # on the policy's own frozen base


def test_activation_checkpointing_keeps_one_input_per_layer() -> None:
    shape = model_shape(model_config(SEVEN_B))
    full = activation_bytes(shape, 1, 4096, 2048, checkpointing=False, dtype_bytes=2)
    saved = activation_bytes(shape, 1, 4096, 2048, checkpointing=True, dtype_bytes=2)
    per_layer = full["layers"] // shape.num_hidden_layers
    assert saved["layers"] == 4096 * shape.num_hidden_layers * 2 * shape.hidden_size + per_layer
    assert saved["logits"] == full["logits"] == 6 * 2 * 2048 * shape.vocab_size


def test_paper_config_under_zero3_on_80_gib() -> None:
    """The paper's babyai run (7B, beta 0.001, vLLM colocated at 0.7): the training step holds vLLM's 56 GiB."""
    result = plan("paper/babyai", 8, 80, "zero3")
    assert result.model.name == SEVEN_B and result.dtype == "bfloat16"
    assert result.total("train") > 80 * GIB and not result.fits  # awake vLLM at 0.7 leaves 24 GiB
    assert plan("paper/babyai", 8, 141, "zero3").fits


def test_cli_prints_a_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "paper/babyai", "--gpus", "8", "--gpu-memory", "141", "--accelerate", "zero3"]) == 0
    table = capsys.readouterr().out
    assert "Qwen/Qwen2.5-7B-Instruct" in table and "reference model" in table and "fits" in table
    assert main(["plan", "paper/babyai", "--gpus", "8", "--gpu-memory", "80", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is False and data["sharding"] == "ddp" and data["peak_gib"] > 80
    assert main(["plan", "paper/babyai", "--gpus", "8", "--gpu-memory", "80", "--accelerate", "nope"]) == 2


# ---- measured on the CPU: SmolLM2-135M, float32, one training step -------------------------------------------
_MEASURE = """
import json, resource, sys
import torch
from transformers import AutoModelForCausalLM
from trl.trainer.utils import selective_log_softmax

torch.set_num_threads(1)
path, batch, prompt, completion, checkpointing = sys.argv[1], *map(int, sys.argv[2:6])

def rss():  # resident bytes now
    return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()

def peak():  # the highest resident bytes since the last reset
    return 1024 * int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")))

model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
model.train()
if checkpointing:
    model.gradient_checkpointing_enable()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
ids = torch.randint(0, model.config.vocab_size, (batch, prompt + completion))
with torch.no_grad():
    for p in model.parameters():
        p.mul_(1.0)  # weights may be mapped from the file lazily: make them resident before measuring
before_states = rss()
for p in model.parameters():
    p.grad = torch.zeros_like(p)
optimizer.step()  # gradients and both moments exist from here on
states = rss() - before_states
open("/proc/self/clear_refs", "w").write("5")  # the peak restarts from the resident size now
baseline = rss()
# as TRL's GRPO loss takes the completion's logprobs
logits = model(ids, logits_to_keep=completion + 1).logits[:, :-1] / 0.7
logps = selective_log_softmax(logits, ids[:, -completion:])
(-logps.mean()).backward()
print(json.dumps({"states": states, "step_peak_growth": peak() - baseline}))
"""


def _measure(path: Path, batch: int, prompt: int, completion: int, checkpointing: bool) -> dict:
    # every block of 128 KiB or more its own mapping, returned when freed: resident memory follows what is alive
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "0"}
    cmd = [sys.executable, "-c", textwrap.dedent(_MEASURE), str(path), *map(str, (batch, prompt, completion))]
    done = subprocess.run([*cmd, str(int(checkpointing))], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak from /proc (Linux)")
@pytest.mark.parametrize("checkpointing", [False, True])
def test_plan_matches_a_measured_cpu_training_step(smollm2: Path, checkpointing: bool) -> None:
    """A float32 single-process plan of SmolLM2 against its measured memory: gradients + AdamW within 10%,
    the step's activations and logits within a factor 1.3 either way (checkpointing off: mostly the layers'
    activations; on: mostly the loss's logits)."""
    batch, prompt, completion = 2, 128, 128
    settings = {
        "model": str(smollm2),
        "bf16": False,
        "beta": 0.0,
        "use_vllm": True,
        "vllm_mode": "server",
        "per_device_train_batch_size": batch,
        "max_completion_length": completion,
        "activation_checkpointing": checkpointing,
    }
    result = plan(settings, 1, 24, prompt_tokens=prompt, overhead_gib=0)
    parts = {p: b for p, b, _ in [*result.states, *result.train]}
    measured = _measure(smollm2, batch, prompt, completion, checkpointing)
    assert measured["states"] == pytest.approx(parts["policy gradients"] + parts["policy optimizer"], rel=0.1)
    predicted = parts["activations"] + parts["loss logits"]
    assert predicted / 1.3 < measured["step_peak_growth"] < predicted * 1.3, (measured, predicted)
