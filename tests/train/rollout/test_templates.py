"""ChatRenderer over the chat formats of real families (Qwen2.5, Qwen3 with and without thinking,
Llama-3, Gemma, Mistral), built offline: end-of-turn tokens, the token path, several end tokens."""

from __future__ import annotations

import pytest
from chat_families import FAMILIES, Family
from train_helpers import BABYAI, ENV_KWARGS

from agentgym_train.rollout import RolloutEngine, Task
from agentgym_train.rollout.templates import ChatRenderer

SYSTEM, FIRST, SECOND, LAST = "Be brief.", "You see a key.", "You picked up the key.", "Done."
PLAIN_REPLIES = ("Action: pick up key", "Action: open door")
THINKING_REPLIES = (
    "<think>\nA key.\n</think>\n\nAction: pick up key",
    "<think>\nA door.\n</think>\n\nAction: open door",
)
MISTRAL_REPLIES = (" Action: pick up key", " Action: open door")  # sampled after "[/INST]", as Mistral writes

# What the token path must read as: the first prompt, each reply as sampled with its end-of-turn token,
# each next turn as the template renders it after the previous assistant turn. Written out by hand.
EXPECTED = {
    "qwen2.5": [
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nYou see a key.<|im_end|>\n<|im_start|>assistant\n",
        "\n<|im_start|>user\nYou picked up the key.<|im_end|>\n<|im_start|>assistant\n",
        "\n<|im_start|>user\nDone.<|im_end|>\n<|im_start|>assistant\n",
    ],
    # Thinking stays in the sequence as sampled (the template would strip it from earlier turns).
    "qwen3-thinking": [
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nYou see a key.<|im_end|>\n<|im_start|>assistant\n",
        "\n<|im_start|>user\nYou picked up the key.<|im_end|>\n<|im_start|>assistant\n",
        "\n<|im_start|>user\nDone.<|im_end|>\n<|im_start|>assistant\n",
    ],
    # Every turn opens with the empty thinking block (the template would drop it from earlier turns).
    "qwen3-no-thinking": [
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nYou see a key.<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n",
        "\n<|im_start|>user\nYou picked up the key.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
        "\n<|im_start|>user\nDone.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    ],
    "llama3": [
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nYou see a key.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        "<|start_header_id|>user<|end_header_id|>\n\nYou picked up the key.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        "<|start_header_id|>user<|end_header_id|>\n\nDone.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    ],
    "gemma": [
        "<bos><start_of_turn>user\nBe brief.\n\nYou see a key.<end_of_turn>\n<start_of_turn>model\n",
        "\n<start_of_turn>user\nYou picked up the key.<end_of_turn>\n<start_of_turn>model\n",
        "\n<start_of_turn>user\nDone.<end_of_turn>\n<start_of_turn>model\n",
    ],
    # The template puts the system prompt into the last user turn: every new turn carries it.
    "mistral": [
        "<s>[INST] Be brief.\n\nYou see a key.[/INST]",
        "[INST] Be brief.\n\nYou picked up the key.[/INST]",
        "[INST] Be brief.\n\nDone.[/INST]",
    ],
}


def replies_of(family: Family) -> tuple[str, str]:
    if family.name == "qwen3-thinking":
        return THINKING_REPLIES
    return MISTRAL_REPLIES if family.name == "mistral" else PLAIN_REPLIES


def transcript(family: Family) -> list[dict[str, str]]:
    first, second = replies_of(family)
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": first},
        {"role": "user", "content": SECOND},
        {"role": "assistant", "content": second},
        {"role": "user", "content": LAST},
    ]


@pytest.fixture(params=sorted(FAMILIES), scope="module")
def family(request: pytest.FixtureRequest) -> Family:
    return FAMILIES[request.param]


def test_end_of_turn_token_is_read_off_the_template(family: Family) -> None:
    tokenizer = family.tokenizer()
    renderer = ChatRenderer(tokenizer, family.kwargs)
    assert renderer.end_of_turn_token == family.end_of_turn
    assert renderer.end_of_turn_id == tokenizer.convert_tokens_to_ids(family.end_of_turn)
    if family.name in ("llama3", "gemma"):
        assert tokenizer.eos_token != family.end_of_turn  # why it must be read off the template
    ends = renderer.end_token_ids(tokenizer.convert_tokens_to_ids(list(family.generation_eos)))
    assert ends[0] == renderer.end_of_turn_id
    assert set(ends) == {tokenizer.convert_tokens_to_ids(t) for t in (family.end_of_turn, *family.generation_eos)}
    assert renderer.end_token_ids() == list(dict.fromkeys([renderer.end_of_turn_id, tokenizer.eos_token_id]))


def test_prompt_and_turns_are_the_templates_tokens(family: Family) -> None:
    """prompt_ids and observation_ids give exactly the template's tokens; the sequence reads as the rule says."""
    tokenizer = family.tokenizer()
    renderer = ChatRenderer(tokenizer, family.kwargs)
    chat = transcript(family)
    prompt, second, last = EXPECTED[family.name]
    encode = renderer.encode

    assert renderer.prompt_ids(chat[:2]) == encode(prompt)
    assert renderer.observation_ids(SECOND, history=chat[:3]) == encode(second)
    assert renderer.observation_ids(LAST, history=chat[:5]) == encode(last)
    # a reply that did not end on the end-of-turn token: the turn brings it, with the template's text after it
    assert renderer.observation_ids(LAST, history=chat[:5], closed=False) == [renderer.end_of_turn_id, *encode(last)]

    eot = [renderer.end_of_turn_id]
    sequence = [
        *renderer.prompt_ids(chat[:2]),
        *encode(chat[2]["content"]),
        *eot,
        *renderer.observation_ids(SECOND, history=chat[:3]),
        *encode(chat[4]["content"]),
        *eot,
        *renderer.observation_ids(LAST, history=chat[:5]),
    ]
    eot_text = family.end_of_turn
    text = prompt + chat[2]["content"] + eot_text + second + chat[4]["content"] + eot_text + last
    assert tokenizer.decode(sequence, skip_special_tokens=False) == text
    rendered = renderer.render(chat, add_generation_prompt=True)
    if family.appends_only:
        assert text == rendered  # the template over the whole transcript, text for text
    else:
        assert text != rendered  # the template rewrites earlier turns; the sequence keeps them as they were


def test_qwen3_rewrites_history_and_the_turns_follow_the_newest_turn() -> None:
    """What the template does to earlier turns, and that each new turn still renders as the newest one."""
    for name in ("qwen3-thinking", "qwen3-no-thinking"):
        family = FAMILIES[name]
        renderer = ChatRenderer(family.tokenizer(), family.kwargs)
        rendered = renderer.render(transcript(family), add_generation_prompt=True)
        assert "<|im_start|>assistant\nAction: pick up key<|im_end|>" in rendered  # history without its thinking
        assert "<think>\nA key." not in rendered
        newest = renderer.render(transcript(family)[:2], add_generation_prompt=True)
        assert newest == EXPECTED[name][0]


def scripted(renderer: ChatRenderer, replies: list[str], ends: list[int | None]):
    """A TurnGenerator replaying `replies` turn by turn, each followed by its end token (None: cut)."""
    turn = {"n": 0}

    def generate(contexts, max_new_tokens, stop=None):
        k = turn["n"]
        turn["n"] += 1
        ids = renderer.encode(replies[k]) + ([] if ends[k] is None else [ends[k]])
        return [(ids, [-0.25] * len(ids)) for _ in contexts]

    return generate


def test_engine_closes_turns_the_template_way_with_several_end_tokens(family: Family) -> None:
    """Reply 1 ends on the model's other end token, reply 2 is cut, reply 3 ends the episode on the other
    end token: the turns read as the template renders them, the other token is kept only at the end."""
    tokenizer = family.tokenizer()
    generation_eos = tokenizer.convert_tokens_to_ids(list(family.generation_eos))
    engine = RolloutEngine(
        tokenizer,
        max_turns=3,
        max_completion_length=20000,
        max_turn_tokens=64,
        env_kwargs=ENV_KWARGS,
        eos_token_ids=generation_eos,
        chat_template_kwargs=family.kwargs,
    )
    renderer = engine.renderer
    eot = renderer.end_of_turn_id
    other = next((t for t in generation_eos if t != eot), None)  # Mistral has one end token: then a cut
    assert set(engine.eos_token_ids) == {eot, *generation_eos}
    texts = ["Action: turn left", "Action: move forward now", "Action: turn right"]
    if family.name == "qwen3-thinking":
        texts = [f"<think>\nturn {k}\n</think>\n\n{t}" for k, t in enumerate(texts)]
    generate = scripted(renderer, texts, [other, None, other])
    episode = engine.run([Task(BABYAI, 0, "train", 0)], generate)[0]
    engine.close()

    assert episode.turns == 3 and episode.truncated
    assert episode.replies == texts  # what the env got: each reply without its end token
    ids, mask = episode.completion_ids, episode.env_mask
    n0, n1 = (len(renderer.encode(t)) for t in texts[:2])
    # reply 1: its other end token is gone, the end-of-turn token stands in its place with mask 0
    assert ids[:n0] == renderer.encode(texts[0]) and mask[:n0] == [1] * n0
    assert ids[n0] == eot and mask[n0] == 0 and episode.logprobs[n0] == 0.0
    assert other is None or other not in ids[:-1]
    # the last reply keeps the end token it sampled, with mask 1
    assert ids[-1] == (other if other is not None else renderer.encode(texts[2])[-1]) and mask[-1] == 1
    observations = [m["content"] for m in episode.messages if m["role"] == "user"]
    turn2 = renderer.observation_ids(observations[1], history=episode.messages[:3], closed=False)
    assert ids[n0 : n0 + len(turn2)] == turn2
    start = n0 + len(turn2) + n1
    turn3 = renderer.observation_ids(observations[2], history=episode.messages[:5], closed=False)
    assert ids[start : start + len(turn3)] == turn3
    assert all(m == 0 for m in mask[n0 : n0 + len(turn2)] + mask[start : start + len(turn3)])

    if family.appends_only:
        # the whole sequence, with its last end token read as the end-of-turn token, is the chat template
        # rendered over the transcript (without the final observation), text for text
        body = tokenizer.decode(episode.prompt_ids + ids[:-1], skip_special_tokens=False) + family.end_of_turn
        rendered = renderer.render(episode.messages[:-1], add_generation_prompt=False)
        assert rendered in (body, body + "\n")  # Qwen and Gemma write a newline after the end-of-turn token


def test_renderer_refuses_templates_it_cannot_follow() -> None:
    family = FAMILIES["qwen2.5"]
    tokenizer = family.tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    with pytest.raises(ValueError, match="end_of_turn_token"):
        ChatRenderer(tokenizer)
    # an explicit end-of-turn token is taken, but the template never writes it after a reply
    with pytest.raises(ValueError, match="prefix-preserving"):
        ChatRenderer(tokenizer, end_of_turn_token="<|im_end|>").observation_ids("hello")
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="no chat_template"):
        ChatRenderer(tokenizer)
