"""`agentgym_envs.adapters.trl`: the tools each scenario offers, and TRL's GRPOTrainer training with
`environment_factory` for a few steps on a tiny model.

The tiny model (random weights, a tokenizer trained on Deep Search text, TRL's Qwen2.5 chat template,
which renders and parses tool calls) is first fitted for a few dozen steps to answer every prompt
with one tool call, so that TRL's tool loop really calls the env's tools during training.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train" / "support"))  # train_helpers

from train_helpers import QUIET_RUN

from agentgym_envs.adapters.trl import (
    ActTools,
    BabyAITools,
    DeepSearchTools,
    TextCraftTools,
    dataset_rows,
    environment_factory,
)

BABYAI = "AgentGym/BabyAI-GoToRedBallNoDists-v0"
DEEPSEARCH = "AgentGym/DeepSearch-v0"
TOOL_CALL = '<tool_call>\n{"name": "answer", "arguments": {"text": "Paris"}}\n</tool_call>'


def tool_names(cls: type) -> set[str]:
    """The methods TRL offers as tools (public functions but `reset` and `get_reward`)."""
    return {
        name
        for name, _ in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }


@pytest.mark.parametrize(
    ("env_id", "cls", "verbs"),
    [
        (BABYAI, BabyAITools, {"go_to", "pick_up", "go_through", "toggle_and_go_through", "turn_left"}),
        ("AgentGym/TextCraft-v0", TextCraftTools, {"get", "craft", "inventory"}),
        ("AgentGym/DeepSearch-v0", DeepSearchTools, {"search", "answer"}),
        ("AgentGym/SciWorld-v0", None, {"look_at", "move", "focus_on", "choose"}),
        ("AgentGym/WebArena-v0", None, {"click", "type", "scroll", "stop"}),
        ("AgentGym/Remote-v0", ActTools, {"act"}),
    ],
)
def test_each_scenario_gets_its_tools_with_schemas(env_id: str, cls: type | None, verbs: set[str]) -> None:
    """TRL reads each method's schema with `get_json_schema`: it is the env's own `ActionTool.schema()`,
    the one `action_format: tools` renders."""
    import gymnasium as gym
    from transformers.utils import get_json_schema

    from agentgym_envs.adapters.trl import _env_class, tools_class

    found = tools_class(env_id)
    assert (cls is None or found is cls) and verbs <= tool_names(found)
    env_tools = _env_class(env_id).action_tools or gym.make(env_id).unwrapped.tools()
    assert tool_names(found) == {t.name for t in env_tools}
    for tool in env_tools:
        assert get_json_schema(getattr(found, tool.name)) == tool.schema()


def test_verbs_play_textcraft_and_deepsearch_to_success() -> None:
    craft = environment_factory("AgentGym/TextCraft-v0")()
    craft.reset(split="test", task_id="green_bed")
    base = craft._env.unwrapped
    expert = base.make_expert()
    observation, info = base._observation, {}
    while not craft._done:  # the expert's action text, spoken through the verbs
        words = expert.act(observation, info).split()
        if words[0] == "get":
            observation = craft.get(int(words[1]), " ".join(words[2:]))
        else:
            head, _, ingredients = " ".join(words[1:]).partition(" using ")
            count, _, item = head.partition(" ")
            observation = craft.craft(int(count), item, ingredients)
    assert craft.get_reward() == 1.0 and "success" in observation
    assert craft.inventory().startswith("The episode is over")

    search = environment_factory("AgentGym/DeepSearch-v0")()
    search.reset(split="test", seed=0)
    gold = search._env.unwrapped.make_expert()
    result = search.search("anything")
    assert "<information>" in result or "Doc 1" in result
    action = gold.act(result, search._info)
    while action.startswith("<search>"):
        action = gold.act(search.search(action.removeprefix("<search>").removesuffix("</search>").strip()), {})
    search.answer(action.removeprefix("<answer>").removesuffix("</answer>").strip())
    assert search.get_reward() == 1.0


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """One torch thread: a tiny model's many small ops cost several times more CPU across threads."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tool_calling_tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model that answers every Deep Search prompt with an `answer` tool call (fitted here).

    Its tokenizer is trained on Deep Search text and on the prompts as TRL renders them with the tools'
    schemas, which keeps a prompt near 130 tokens (and the test cheap).
    """
    import torch
    from trl.chat_template_utils import qwen2_5_chat_template

    from agentgym_train.models.tiny import TinyModelConfig, build_tiny_model, env_corpus, load_model, train_tokenizer

    tools = [getattr(DeepSearchTools, name) for name in sorted(tool_names(DeepSearchTools))]
    env = environment_factory(DEEPSEARCH)()
    prompts = [
        [*row["prompt"][:-1], {"role": "user", "content": env.reset(**row)}]
        for row in dataset_rows(DEEPSEARCH, count=4)
    ]
    renderer = train_tokenizer(["-"], vocab_size=300)
    renderer.chat_template = qwen2_5_chat_template
    rendered = [
        renderer.apply_chat_template(p, tools=tools, add_generation_prompt=True, tokenize=False) for p in prompts
    ]
    config = TinyModelConfig(
        env_ids=[DEEPSEARCH],
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
    )
    texts = env_corpus([DEEPSEARCH], episodes=6) + rendered * 10 + [TOOL_CALL] * 10
    path = build_tiny_model(tmp_path_factory.mktemp("tiny-tools"), config, texts=texts)
    model, tokenizer = load_model(path)
    tokenizer.chat_template = qwen2_5_chat_template
    target = tokenizer(TOOL_CALL + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    examples = []
    for prompt in prompts:
        ids = tokenizer.apply_chat_template(prompt, tools=tools, add_generation_prompt=True, return_dict=False)
        examples.append((torch.tensor([ids + target]), len(ids)))
    torch.manual_seed(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    for step in range(150):
        ids, start = examples[step % len(examples)]
        loss = torch.nn.functional.cross_entropy(model(ids).logits[0, start - 1 : -1], ids[0, start:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_grpo_trainer_trains_with_the_environment_factory(tool_calling_tiny_model: Path, tmp_path: Path) -> None:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from agentgym_train.models.tiny import load_model

    model, tokenizer = load_model(tool_calling_tiny_model)
    rows = dataset_rows(DEEPSEARCH, count=4)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=64,
        max_tool_calling_iterations=2,
        max_steps=2,
        learning_rate=1e-4,
        temperature=0.5,
        logging_steps=1,
        **QUIET_RUN,
        use_cpu=True,
        bf16=False,
        seed=0,
    )
    with pytest.warns(UserWarning, match="environment_factory"):  # TRL marks the feature experimental
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=args,
            train_dataset=Dataset.from_list(rows),
            environment_factory=environment_factory(DEEPSEARCH),
        )
    assert {tool.__name__ for tool in trainer._env_tools[None]} == tool_names(DeepSearchTools)
    trainer.train()

    logs: dict[str, list[Any]] = {}
    for entry in trainer.state.log_history:
        for key, value in entry.items():
            logs.setdefault(key, []).append(value)
    assert len(logs["loss"]) == 2
    assert max(logs["tools/call_frequency"]) > 0  # the model called the env's tools during training
    assert "rewards/DeepSearchTools/mean" in logs  # the env's get_reward scored the rollouts
    pool = trainer._environment_pool[None]
    assert {env._info["task_id"] for env in pool} <= set(env_tasks(rows))
    assert max(env._turns for env in pool) > 0  # tools stepped the envs reset from the dataset rows


def env_tasks(rows: list[dict[str, Any]]) -> list[str]:
    """The task ids the rows' `task_id` indexes name."""
    env = environment_factory(DEEPSEARCH)()
    return [env._env.unwrapped.task_at(row["split"], row["task_id"]) for row in rows]
