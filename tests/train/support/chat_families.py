"""Offline stand-ins for the chat formats of real model families, for the template tests.

Each family is a small byte-level BPE tokenizer trained here, with the family's special tokens, its
`eos_token` and the end tokens of its generation config, and a chat template written for these tests
after the family's published format (the parts a text-env conversation uses: system, user and
assistant turns; no tools, no images):

- qwen2.5: ChatML, a default system prompt when none is given; eos `<|im_end|>`, generation also ends
  on `<|endoftext|>`.
- qwen3: ChatML; assistant turns before the last user turn lose their thinking (`<think>...</think>`);
  `enable_thinking=False` adds an empty thinking block to the generation prompt.
- llama3: header tokens, turns closed by `<|eot_id|>` while `eos_token` is `<|end_of_text|>`.
- gemma: `<start_of_turn>model`, closed by `<end_of_turn>` while `eos_token` is `<eos>`; the system
  prompt is folded into the first user turn; roles must alternate.
- mistral: `[INST] ... [/INST]`, replies closed by `</s>` (the eos); the system prompt goes into the
  last user turn; roles must alternate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

QWEN25 = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] != 'system' or not loop.first %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

QWEN3 = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- set ns = namespace(last_user=-1) %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}{%- set ns.last_user = loop.index0 %}{%- endif %}"
    "{%- endfor %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' or (message['role'] == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- elif message['role'] == 'assistant' %}"
    "{%- set content = message['content'] %}{%- set reasoning = '' %}"
    "{%- if '</think>' in content %}"
    "{%- set reasoning = content.split('</think>')[0].split('<think>')[-1].strip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- endif %}"
    "{%- if loop.index0 > ns.last_user and (loop.last or reasoning) %}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning + '\\n</think>\\n\\n' + content + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)

LLAMA3 = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim"
    " + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)

GEMMA = (
    "{{- bos_token }}"
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set prefix = messages[0]['content'] + '\\n\\n' %}{%- set chat = messages[1:] %}"
    "{%- else %}{%- set prefix = '' %}{%- set chat = messages %}{%- endif %}"
    "{%- for message in chat %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif %}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{- '<start_of_turn>' + role + '\\n' + (prefix if loop.first else '') + message['content'] | trim"
    " + '<end_of_turn>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}{%- endif %}"
)

MISTRAL = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system = messages[0]['content'] %}{%- set chat = messages[1:] %}"
    "{%- else %}{%- set chat = messages %}{%- endif %}"
    "{{- bos_token }}"
    "{%- for message in chat %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('After the optional system message, roles must alternate user/assistant') }}"
    "{%- endif %}"
    "{%- if message['role'] == 'user' %}"
    "{%- if loop.last and system is defined %}"
    "{{- '[INST] ' + system + '\\n\\n' + message['content'] + '[/INST]' }}"
    "{%- else %}{{- '[INST] ' + message['content'] + '[/INST]' }}{%- endif %}"
    "{%- else %}{{- ' ' + message['content'] | trim + eos_token }}{%- endif %}"
    "{%- endfor %}"
)


@dataclass(frozen=True)
class Family:
    """A chat format: special tokens, the tokenizer's special-token roles, the generation end tokens."""

    name: str
    template: str
    special: tuple[str, ...]
    eos: str
    end_of_turn: str
    generation_eos: tuple[str, ...]
    bos: str | None = None
    pad: str | None = None
    added: tuple[str, ...] = ()  # added tokens that are not special (Qwen3's think tags)
    template_kwargs: tuple[tuple[str, Any], ...] = ()
    appends_only: bool = False  # a new turn never changes how earlier turns render

    def tokenizer(self) -> Any:
        return build_tokenizer(self)

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.template_kwargs)


QWEN_SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
FAMILIES = {
    f.name: f
    for f in (
        Family(
            "qwen2.5",
            QWEN25,
            QWEN_SPECIAL,
            "<|im_end|>",
            "<|im_end|>",
            ("<|im_end|>", "<|endoftext|>"),
            pad="<|endoftext|>",
            appends_only=True,
        ),
        Family(
            "qwen3-thinking",
            QWEN3,
            QWEN_SPECIAL,
            "<|im_end|>",
            "<|im_end|>",
            ("<|im_end|>", "<|endoftext|>"),
            pad="<|endoftext|>",
            added=("<think>", "</think>"),
        ),
        Family(
            "qwen3-no-thinking",
            QWEN3,
            QWEN_SPECIAL,
            "<|im_end|>",
            "<|im_end|>",
            ("<|im_end|>", "<|endoftext|>"),
            pad="<|endoftext|>",
            added=("<think>", "</think>"),
            template_kwargs=(("enable_thinking", False),),
        ),
        Family(
            "llama3",
            LLAMA3,
            ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
            "<|end_of_text|>",
            "<|eot_id|>",
            ("<|end_of_text|>", "<|eot_id|>"),
            bos="<|begin_of_text|>",
            appends_only=True,
        ),
        Family(
            "gemma",
            GEMMA,
            ("<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"),
            "<eos>",
            "<end_of_turn>",
            ("<eos>", "<end_of_turn>"),
            bos="<bos>",
            pad="<pad>",
            appends_only=True,
        ),
        Family("mistral", MISTRAL, ("<unk>", "<s>", "</s>", "[INST]", "[/INST]"), "</s>", "</s>", ("</s>",), bos="<s>"),
    )
}

CORPUS = [
    "You are in a room. Action: look around. Action: go to the red ball. I think so, then the answer is 4.",
    "Mission: pick up the key. You see a door, a key and a box. Thinking about what to do next.",
]


def build_tokenizer(family: Family) -> Any:
    """A byte-level BPE tokenizer (a few hundred tokens) with the family's special tokens and template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=list(family.special),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(CORPUS * 4, trainer=trainer)
    named = {"eos_token": family.eos, "bos_token": family.bos, "pad_token": family.pad or family.eos}
    roles = set(named.values())
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        **{k: v for k, v in named.items() if v is not None},
        additional_special_tokens=[t for t in family.special if t not in roles],
        chat_template=family.template,
        model_max_length=1 << 20,
    )
    if family.added:
        tokenizer.add_tokens(list(family.added))
    return tokenizer
