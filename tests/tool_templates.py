"""Chat templates that render tools, for the tool-call tests: three families' tool-call syntax.

Qwen2.5 (Hermes `<tool_call>`) and Llama 3.1 (JSON with `parameters`, tool results under the `ipython`
header) are the templates TRL ships (`trl.chat_template_utils`). Mistral's is written here after the
published v0.3 format: `[AVAILABLE_TOOLS] [...][/AVAILABLE_TOOLS]` before the last user turn, calls as
`[TOOL_CALLS] [{"name", "arguments", "id"}]</s>`, results as `[TOOL_RESULTS] {"content", "call_id"}
[/TOOL_RESULTS]` with nine-character ids; the system prompt goes into the last user turn.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "train" / "support"))  # chat_families

from chat_families import FAMILIES, build_tokenizer

MISTRAL_TOOLS = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system = messages[0]['content'] %}{%- set chat = messages[1:] %}"
    "{%- else %}{%- set chat = messages %}{%- endif %}"
    "{%- set ns = namespace(last_user=-1) %}"
    "{%- for message in chat %}"
    "{%- if message['role'] == 'user' %}{%- set ns.last_user = loop.index0 %}{%- endif %}"
    "{%- endfor %}"
    "{{- bos_token }}"
    "{%- for message in chat %}"
    "{%- if message['role'] == 'user' %}"
    "{%- if tools and loop.index0 == ns.last_user %}"
    "{{- '[AVAILABLE_TOOLS] ' + (tools | tojson) + '[/AVAILABLE_TOOLS]' }}"
    "{%- endif %}"
    "{%- if loop.index0 == ns.last_user and system is defined %}"
    "{{- '[INST] ' + system + '\\n\\n' + message['content'] + '[/INST]' }}"
    "{%- else %}{{- '[INST] ' + message['content'] + '[/INST]' }}{%- endif %}"
    "{%- elif message['role'] == 'assistant' and message.get('tool_calls') %}"
    "{{- '[TOOL_CALLS] [' }}"
    "{%- for call in message['tool_calls'] %}"
    "{%- if call['id'] | length != 9 %}{{- raise_exception('Tool call ids must be nine characters') }}{%- endif %}"
    "{{- '{\"name\": ' + (call['function']['name'] | tojson) + ', \"arguments\": '"
    " + (call['function']['arguments'] | tojson) + ', \"id\": ' + (call['id'] | tojson) + '}' }}"
    "{%- if not loop.last %}{{- ', ' }}{%- endif %}"
    "{%- endfor %}"
    "{{- ']' + eos_token }}"
    "{%- elif message['role'] == 'assistant' %}"
    "{{- ' ' + message['content'] | trim + eos_token }}"
    "{%- elif message['role'] == 'tool' %}"
    "{%- if message['tool_call_id'] | length != 9 %}"
    "{{- raise_exception('Tool results need the nine-character id of their call') }}"
    "{%- endif %}"
    "{{- '[TOOL_RESULTS] ' + ({'content': message['content'], 'call_id': message['tool_call_id']} | tojson)"
    " + '[/TOOL_RESULTS]' }}"
    "{%- endif %}"
    "{%- endfor %}"
)


def tool_tokenizer(name: str) -> Any:
    """A family's offline tokenizer (`chat_families`) with a template that renders tools."""
    from trl.chat_template_utils import llama3_1_chat_template, qwen2_5_chat_template

    base, template, special = {
        "qwen2.5": ("qwen2.5", qwen2_5_chat_template, ()),
        "llama3.1": ("llama3", llama3_1_chat_template, ("<|python_tag|>", "<|eom_id|>")),
        "mistral": (
            "mistral",
            MISTRAL_TOOLS,
            ("[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_CALLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"),
        ),
    }[name]
    family = FAMILIES[base]
    return build_tokenizer(dataclasses.replace(family, template=template, special=family.special + special))


#: Family name -> its tool-call syntax in `agentgym_wrappers.tools`.
SYNTAX = {"qwen2.5": "hermes", "llama3.1": "llama", "mistral": "mistral"}
#: What each family's template writes where a tool's answer begins.
TOOL_TURN = {
    "qwen2.5": "<|im_start|>user\n<tool_response>",
    "llama3.1": "<|start_header_id|>ipython",
    "mistral": "[TOOL_RESULTS]",
}
