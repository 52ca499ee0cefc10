"""`agentgym plan`: model sizes from configs, DeepSpeed's accounting, sharding, vLLM's need and the paper
configs' verdict, and measured CPU peaks."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
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
    PHASES,
    activation_bytes,
    compare_shardings,
    model_config,
    model_shape,
    plan,
    predict_memory,
    sharding_of,
    vllm_need,
)

SEVEN_B = "Qwen/Qwen2.5-7B-Instruct"
PAPER_DIR = Path(__file__).resolve().parents[2] / "agentgym_train" / "configs" / "paper"
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
    from agentgym_train.models.tiny import count_parameters, load_model

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
    policy = sum(b for part, b, *_ in result.states if part.startswith("policy"))
    shape = result.model
    expected = _deepspeed_gpu_bytes(stage, shape.parameters, shape.largest_module_parameters, gpus)
    assert abs(policy - expected) <= 8  # integer division per part


def test_ddp_states_by_hand() -> None:
    """fp32: 4 B weights + 4 gradients + 8 AdamW; bfloat16 weights: half; more than one GPU adds DDP's buckets."""
    phi = plan(POLICY_ONLY, 1, 80).model.parameters
    for bf16, gpus in ((False, 1), (True, 1), (True, 2), (False, 4)):
        result = plan({**POLICY_ONLY, "bf16": bf16}, gpus, 80, overhead_gib=0)
        a = {"float32": 4, "bfloat16": 2}[result.dtype]  # bf16 under plain DDP: see tiny.training_dtype
        per_parameter = 4 * a + (a if gpus > 1 else 0)  # weights, gradients, two moments (+ buckets)
        assert sum(part.size for part in result.states) == per_parameter * phi


def test_fsdp_shards_the_trained_states_and_the_reference() -> None:
    one, eight = (plan({**POLICY_ONLY, "beta": 0.04}, n, 80, "fsdp", overhead_gib=0) for n in (1, 8))
    parts = {p: b for p, b, *_ in eight.states}
    phi = eight.model.parameters
    assert parts["policy weights"] == 4 * phi // 8 and parts["policy optimizer"] == 8 * phi // 8
    assert parts["reference model"] == 2 * phi // 8
    sharded = sum(b for p, b, *_ in one.states if p != "policy gathered units")
    assert sum(b for p, b, *_ in eight.states if p != "policy gathered units") * 8 == pytest.approx(sharded, rel=1e-6)


def test_reference_critic_lora_and_vllm_parts() -> None:
    base = {**POLICY_ONLY, "use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.5}
    parts = {p for p, *_ in plan(base, 8, 80, "zero3").states}
    assert "reference model" not in parts and not any(p.startswith("critic") for p in parts)
    with pytest.raises(ValueError, match="full critic does not run under DeepSpeed"):  # as the trainer refuses it
        plan({**base, "algorithm": "ppo"}, 8, 80, "zero3")
    result = plan({**base, "beta": 0.001, "algorithm": "ppo"}, 8, 80, "fsdp")
    parts = {p: b for p, b, *_ in result.states}
    phi, shape = result.model.parameters, result.model
    assert parts["reference model"] == 2 * phi // 8
    critic_params = phi - shape.lm_head_parameters + shape.hidden_size + 1  # the LM head becomes a value head
    assert parts["critic weights"] == pytest.approx(parts["policy weights"] * critic_params / phi, rel=1e-6)
    vllm = [b for p, b, *_ in result.train if p.startswith("vLLM")]
    assert vllm == [int(0.5 * 80 * GIB)]  # awake through training: sleep mode off
    asleep = plan({**base, "vllm_enable_sleep_mode": True}, 8, 80, "zero3")
    assert not any(p.startswith("vLLM") for p, *_ in [*asleep.train, *asleep.scoring])
    assert [b for p, b, *_ in asleep.rollout] == vllm
    lora = plan({**base, "lora_r": 16, "beta": 0.001}, 1, 80)
    trainable = lora.model.lora_parameters(16)
    h, i, layers = shape.hidden_size, shape.intermediate_size, shape.num_hidden_layers
    # each linear layer's A (in x r) and B (r x out): q, k and v (512 = 4 KV heads x 128), o, gate and up, down
    assert trainable == 16 * layers * ((h + h) + 2 * (h + 512) + (h + h) + 2 * (h + i) + (i + h))
    assert "reference model" not in {p for p, *_ in lora.states}  # the adapter, disabled, is the reference
    shared = {p for p, *_ in plan({**base, "lora_r": 16, "algorithm": "ppo", "critic": "lora"}, 1, 80).states}
    assert "critic adapter" in shared and "critic base" not in shared  # on the policy's own frozen base


def test_activation_checkpointing_keeps_one_input_per_layer() -> None:
    shape = model_shape(model_config(SEVEN_B))
    full = activation_bytes(shape, 1, 4096, 2048, checkpointing=False, dtype_bytes=2)
    saved = activation_bytes(shape, 1, 4096, 2048, checkpointing=True, dtype_bytes=2)
    per_layer = full["layers"] // shape.num_hidden_layers
    assert saved["layers"] == 4096 * shape.num_hidden_layers * 2 * shape.hidden_size + per_layer
    # TRL's fused head: the 2048 scored hidden states (bf16), a 2048 x 32768 logits tile in forward and one in
    # backward, float32 gradients of the hidden states and of the head's weight; never 2048 x vocabulary logits
    h, vocab = shape.hidden_size, shape.vocab_size
    head = 2 * 2048 * h + 2 * (2 * 2048 * 32768) + 4 * 2048 * h + 4 * vocab * h
    assert saved["logits"] == full["logits"] == head
    frozen = activation_bytes(shape, 1, 4096, 2048, checkpointing=True, dtype_bytes=2, head_trains=False)
    assert frozen["logits"] == head - 4 * vocab * h  # LoRA: the head's weight has no gradient


def test_vllm_kv_cache_and_weights_by_hand() -> None:
    """Qwen2.5-7B: K and V of 28 layers x 4 KV heads x 128 dims in bf16 = 57,344 B a token; TRL's max_num_seqs
    is per_device_train_batch_size x tensor parallel x steps_per_generation; contexts of prompt + completion
    tokens, in blocks of 16."""
    settings = {**DEFAULTS, "per_device_train_batch_size": 1, "steps_per_generation": 16}
    settings |= {"max_completion_length": 8192, "vllm_max_model_length": 32768}
    shape = model_shape(model_config(SEVEN_B))
    need = vllm_need(shape, settings, prompt_tokens=1024)
    assert need.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2 == 57_344
    assert (need.max_num_seqs, need.sequence_tokens) == (16, 9216)
    assert need.kv_cache == 16 * 9216 * 57_344 == 8_455_716_864  # 7.88 GiB
    assert need.weights == 2 * shape.parameters
    h, i = 3584, 18944
    assert need.activations == 4096 * 2 * (3 * h + 2 * 512 + 3 * i) + 16 * 152_064 * 16  # profile run + sampler
    odd = vllm_need(shape, {**settings, "max_completion_length": 8190}, prompt_tokens=1)  # 8191 -> 512 blocks
    assert odd.kv_cache == 16 * 8192 * 57_344
    two = vllm_need(shape, {**settings, "vllm_tensor_parallel_size": 2}, prompt_tokens=1024)
    assert two.max_num_seqs == 32 and two.kv_bytes_per_token == 57_344 // 2 and two.weights == shape.parameters
    short = vllm_need(shape, {**settings, "max_completion_length": 100, "steps_per_generation": 1}, 100)
    assert short.kv_cache == 32768 * 57_344  # vLLM refuses to start unless one max_model_len sequence fits


def test_suggested_utilization_is_the_smallest_that_holds_vllms_need() -> None:
    settings = {"model": SEVEN_B, "bf16": True, "use_vllm": True, "per_device_train_batch_size": 1}
    settings |= {"steps_per_generation": 16, "max_completion_length": 8192}
    result = plan(settings, 8, 80, "zero3")
    need, gpu = result.vllm.total, 80 * GIB
    share = result.suggested["vllm_gpu_memory_utilization"]
    assert share == math.ceil(need / gpu * 100) / 100 == 0.30
    assert (share - 0.01) * gpu < need <= share * gpu
    low = plan({**settings, "vllm_gpu_memory_utilization": 0.2}, 8, 80, "zero3")
    assert low.peak_bytes < gpu and not low.fits  # the GPU has room, but vLLM's 16 GiB cannot hold its contexts
    assert "set vllm_gpu_memory_utilization: 0.3" in low.problems[0]
    assert plan({**settings, "vllm_gpu_memory_utilization": share}, 8, 80, "zero3").fits


def test_fsdp2_reference_gathers_the_whole_model_while_scoring() -> None:
    """TRL's prepare_fsdp puts one fully_shard on the reference's root: its forward unshards every parameter, and
    FSDP2's all-gather buffer holds a second copy during the copy-out (2 x 2 bytes x parameters)."""
    base = {"model": SEVEN_B, "bf16": True, "use_vllm": True, "vllm_enable_sleep_mode": True, "beta": 0.001}
    result = plan(base, 8, 80, "fsdp")
    scoring = {p: b for p, b, *_ in result.scoring}
    assert scoring["reference gathered"] == 2 * 2 * result.model.parameters  # 28.4 GiB for 7.6B parameters
    assert result.peak_phase == "scoring"
    assert "reference gathered" not in {p for p, *_ in plan({**base, "beta": 0.0}, 8, 80, "fsdp").scoring}
    zero3 = {p: b for p, b, *_ in plan(base, 8, 80, "zero3").scoring}
    assert zero3["reference gathered module"] == 2 * result.model.largest_module_parameters  # one module at a time


def _stated_node(scenario: str) -> tuple[list[str], int, float, str]:
    """The `agentgym plan` line of a paper config's header: what node it says it fits."""
    header = (PAPER_DIR / f"{scenario}.yaml").read_text().split("# --- pipeline ---")[0]
    found = re.search(r"agentgym plan (\S+) --gpus (\d+) --gpu-memory (\d+) --accelerate (\w+)", header)
    assert found and found[1] == f"paper/{scenario}", f"{scenario}.yaml's header names no node"
    return found[0].split()[1:], int(found[2]), float(found[3]), found[4]


@pytest.mark.parametrize("scenario", ["babyai", "sciworld", "deepsearch", "textcraft", "webarena"])
def test_paper_configs_fit_their_stated_node_with_the_suggested_settings(scenario: str) -> None:
    """Each paper config fits the node its header names, and its vLLM settings are the plan's suggestion; verl's
    0.7 (a share of the memory free after the actor loads, in the script) read as TRL's share does not fit."""
    import yaml

    config = yaml.safe_load((PAPER_DIR / f"{scenario}.yaml").read_text())
    _, gpus, memory, accelerate = _stated_node(scenario)
    assert (gpus, memory, accelerate) == (8, 80.0, "zero3")
    result = plan(f"paper/{scenario}", gpus, memory, accelerate)
    assert result.fits, result.problems
    assert result.suggested == {
        "vllm_gpu_memory_utilization": config["vllm_gpu_memory_utilization"],
        "vllm_enable_sleep_mode": config["vllm_enable_sleep_mode"],
    }
    assert not plan({**config, "vllm_gpu_memory_utilization": 0.7}, gpus, memory, accelerate).fits


def test_sleep_mode_frees_vllm_outside_the_rollout_and_is_suggested_only_when_needed() -> None:
    webarena = {"model": SEVEN_B, "bf16": True, "use_vllm": True, "per_device_train_batch_size": 1}
    webarena |= {"steps_per_generation": 16, "max_completion_length": 14098, "vllm_gpu_memory_utilization": 0.36}
    awake, asleep = (plan({**webarena, "vllm_enable_sleep_mode": s}, 8, 80, "fsdp") for s in (False, True))
    reserved = int(0.36 * 80 * GIB)
    for phase in ("scoring", "train"):
        assert awake.total(phase) - asleep.total(phase) == reserved
    assert awake.total("rollout") == asleep.total("rollout")
    assert not awake.fits and asleep.fits  # FSDP2's whole-reference gather with vLLM awake: over 80 GiB
    assert awake.suggested["vllm_enable_sleep_mode"] is True
    assert plan(webarena, 8, 80, "zero3").suggested["vllm_enable_sleep_mode"] is False  # fits awake


def test_predict_memory_breaks_each_phase_into_categories() -> None:
    prediction = predict_memory("paper/babyai", 8, 80, "zero3")
    result = plan("paper/babyai", 8, 80, "zero3")
    assert prediction["totals"] == {phase: result.total(phase) for phase in PHASES}
    for phase in PHASES:
        assert sum(prediction["phases"][phase].values()) == prediction["totals"][phase]
    train = prediction["phases"]["train"]
    phi = result.model.parameters
    assert train["optimizer"] == 12 * phi // 8 and train["gradients"] == 4 * phi // 8  # ZeRO-3, by hand
    assert train["reference"] == 2 * phi // 8 and train["vllm"] == int(0.3 * 80 * GIB)
    assert prediction["phases"]["rollout"]["activations"] == 0 and train["overhead"] == GIB
    assert prediction["vllm"]["need"] == result.vllm.total and prediction["fits"] is True
    assert predict_memory("paper/babyai", 8, 80, "zero3", overhead_gib=0)["phases"]["train"]["overhead"] == 0


def test_cli_prints_a_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "paper/babyai", "--gpus", "8", "--gpu-memory", "80", "--accelerate", "zero3"]) == 0
    table = capsys.readouterr().out
    assert "Qwen/Qwen2.5-7B-Instruct" in table and "reference model" in table and "fits" in table
    assert "suggested: vllm_gpu_memory_utilization: 0.3" in table
    assert main(["plan", "paper/babyai", "--gpus", "8", "--gpu-memory", "80", "--accelerate", "ddp", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is False and data["sharding"] == "ddp" and data["peak_gib"] > 80
    assert main(["plan", "paper/babyai", "--gpus", "8", "--gpu-memory", "80", "--accelerate", "nope"]) == 2


def test_cli_without_accelerate_compares_the_shardings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "paper/babyai", "--gpus", "8", "--gpu-memory", "80"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^ddp .* does NOT fit$", out, re.M) and re.search(r"^zero3 .* fits$", out, re.M)
    assert "--accelerate zero3:" in out  # the lowest peak that fits
    assert main(["plan", "paper/babyai", "--gpus", "8", "--gpu-memory", "40", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] == [] and set(data["shardings"]) == {"ddp", "zero2", "zero3", "fsdp"}
    ppo = {"model": SEVEN_B, "algorithm": "ppo", "use_vllm": True}
    plans = compare_shardings(ppo, 8, 80)
    assert "full critic does not run under DeepSpeed" in plans["zero3"]  # a reason, not a plan


# ---- measured on the CPU: SmolLM2-135M, float32, one training step -------------------------------------------
_MEASURE = """
import json, resource, sys
import torch
from transformers import AutoModelForCausalLM
from trl.trainer.utils import add_fused_lm_head

torch.set_num_threads(1)
path, batch, prompt, completion, checkpointing = sys.argv[1], *map(int, sys.argv[2:6])

def rss():  # resident bytes now
    return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()

def peak():  # the highest resident bytes since the last reset
    return 1024 * int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")))

model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))  # as TRL's GRPOTrainer does
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
# as TRL's GRPO loss takes the completion's logprobs (_get_per_token_logps_and_entropies)
labels = ids.masked_fill(torch.arange(ids.size(1)) < prompt, -100)
logps = model(input_ids=ids, labels=labels, fused_lm_head=True).log_probs[:, -completion:]
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
    the step's activations and TRL's fused LM head within a factor 1.3 either way. Off CUDA the fused head
    scores every position (`trl.kernels.chunked_logprob._use_triton`), on CUDA only the completion's."""
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
    parts = {p: b for p, b, *_ in [*result.states, *result.train]}
    measured = _measure(smollm2, batch, prompt, completion, checkpointing)
    assert measured["states"] == pytest.approx(parts["policy gradients"] + parts["policy optimizer"], rel=0.1)
    shape, scored = result.model, batch * (prompt + completion - 1)
    cpu = {"scored": scored, "triton": False}  # TRL's torch fallback of the fused head
    head = activation_bytes(shape, batch, prompt + completion, completion, checkpointing, 4, **cpu)["logits"]
    predicted = parts["activations"] + head
    assert predicted / 1.3 < measured["step_peak_growth"] < predicted * 1.3, (measured, predicted)
