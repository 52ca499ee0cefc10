"""A few multi-turn GRPO steps on BabyAI with a randomly initialised model of Qwen2.5-0.5B's shape.

Prints (and writes to benchmarks/results/gpu_train.json) generation tokens/s, the env's share of
rollout time, and the step time. Meant for a GPU; `--smoke` runs a tiny CPU configuration of the
same code path (what CI can afford).

    python benchmarks/gpu_train.py            # GPU: 0.5B-shaped model, 64 episodes a step
    python benchmarks/gpu_train.py --smoke    # CPU: tiny model, 2 steps
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

from agentgym_train.grpo import MultiTurnGRPOConfig, MultiTurnGRPOTrainer
from agentgym_train.tiny import TinyModelConfig, build_tiny_model, count_parameters, load_model

ENV_ID = "AgentGym/BabyAI-GoToLocal-v0"
ENV_KWARGS = {"show_actions": False}
#: Qwen2.5-0.5B's transformer shape (its vocabulary is the tokenizer's here: trained on env text).
QWEN25_05B = {
    "hidden_size": 896,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "intermediate_size": 4864,
}
TINY = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
}


class StepClock(TrainerCallback):
    """Wall time of each optimizer step."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._start = 0.0

    def on_step_begin(self, args, state, control, **kwargs) -> None:
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs) -> None:
        self.times.append(time.perf_counter() - self._start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny model on CPU, 2 steps")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--tasks-per-step", type=int, default=None, help="GRPO groups per step")
    parser.add_argument("--generations", type=int, default=8, help="episodes per task (G)")
    parser.add_argument("--max-turns", type=int, default=10)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "gpu_train.json"))
    args = parser.parse_args()
    cuda = torch.cuda.is_available() and not args.smoke
    steps = args.steps or (2 if args.smoke else 5)
    tasks = args.tasks_per_step or (2 if args.smoke else 8)

    with tempfile.TemporaryDirectory() as workdir:
        shape = TINY if args.smoke else QWEN25_05B
        model_dir = build_tiny_model(
            Path(workdir) / "model", TinyModelConfig(env_ids=[ENV_ID], env_kwargs=ENV_KWARGS, **shape)
        )
        model, tokenizer = load_model(model_dir, dtype="bfloat16" if cuda else "float32")
        config = MultiTurnGRPOConfig(
            output_dir=str(Path(workdir) / "out"),
            env_id=ENV_ID,
            env_kwargs=ENV_KWARGS,
            max_turns=args.max_turns,
            max_turn_tokens=8,
            max_completion_length=1024,
            num_generations=args.generations,
            per_device_train_batch_size=tasks * args.generations,
            max_steps=steps,
            learning_rate=1e-6,
            logging_steps=1,
            report_to="none",
            save_strategy="no",
            activation_checkpointing=cuda,
            bf16=cuda,
            use_cpu=not cuda,
            disable_tqdm=True,
            dataloader_pin_memory=False,
        )
        clock = StepClock()
        trainer = MultiTurnGRPOTrainer(model, config, processing_class=tokenizer, callbacks=[clock])
        trainer.train()
        trainer.engine.close()

    rows = [r for r in trainer.state.log_history if "rollout/generation_time" in r]
    generated = [r["completions/mean_length"] * tasks * args.generations for r in rows]
    gen_time = [r["rollout/generation_time"] for r in rows]
    env_time = [r["rollout/env_time"] for r in rows]
    steady = slice(1, None) if len(rows) > 1 else slice(None)  # the first step warms up kernels
    result = {
        "device": torch.cuda.get_device_name() if cuda else f"cpu ({platform.processor() or platform.machine()})",
        "parameters": count_parameters(model),
        "episodes_per_step": tasks * args.generations,
        "max_turns": args.max_turns,
        "steps": steps,
        "generation_tokens_per_s": sum(generated[steady]) / max(sum(gen_time[steady]), 1e-9),
        "env_time_share": sum(env_time[steady]) / max(sum(env_time[steady]) + sum(gen_time[steady]), 1e-9),
        "step_time_s": sum(clock.times[steady]) / max(len(clock.times[steady]), 1),
        "mean_turns": sum(r["episode/turns"] for r in rows) / len(rows),
    }
    print(f"{'device':<26}{result['device']}")
    print(f"{'parameters':<26}{result['parameters'] / 1e6:.1f}M")
    print(f"{'episodes per step':<26}{result['episodes_per_step']} (max {args.max_turns} turns)")
    print(f"{'generation tokens/s':<26}{result['generation_tokens_per_s']:.0f} (model tokens only)")
    print(f"{'env share of rollout time':<26}{result['env_time_share']:.1%}")
    print(f"{'step time':<26}{result['step_time_s']:.2f} s")
    if not args.smoke:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
